/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * check.c -- the argument checks every provider makes, so that all of
 * them refuse the same requests and registrations (fabric.h).
 */
#include <errno.h>

#include "keytab.h"
#include "provider.h"

int fab_mr_check(const void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	if (addr == NULL || len == 0 || out == NULL || (access & ~0xfu))
		return -EINVAL;
	/* as verbs: the NIC writing into a region needs local write access */
	if ((access & (FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & FAB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

int fab_connect_check(const struct fab_addr *peer, const void *priv, size_t priv_len,
                      struct fab_link **out)
{
	if (peer == NULL || out == NULL || priv_len > FAB_PRIV_MAX || (priv_len && priv == NULL))
		return -EINVAL;
	return 0;
}

int fab_wr_check(const struct fab_wr *w, uint32_t max_len, uint32_t max_inline)
{
	if (w->flags &
	    ~(FAB_WR_SIGNALED | FAB_WR_INLINE | FAB_WR_FENCE | FAB_WR_LAZY | FAB_WR_MORE))
		return -EINVAL;
	switch (w->opcode) {
	case FAB_OP_CAS:
	case FAB_OP_FAA:
		if (w->len != 8 || (w->remote_addr & 7) || w->local == NULL)
			return -EINVAL;
		return 0;
	case FAB_OP_WRITE:
	case FAB_OP_WRITE_IMM:
	case FAB_OP_READ:
	case FAB_OP_SEND:
		if ((w->len && w->local == NULL) || w->len > max_len)
			return -EINVAL;
		if ((w->flags & FAB_WR_INLINE) && w->opcode == FAB_OP_READ)
			return -EINVAL;
		if ((w->flags & FAB_WR_INLINE) && w->len > max_inline)
			return -EMSGSIZE;
		return 0;
	default:
		return -EINVAL;
	}
}

int fab_recv_check(const struct keytab *kt, const struct fab_recv_wr *wr, int n)
{
	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		void *p;

		if (wr[i].len && keytab_check(kt, wr[i].lkey, (uintptr_t)wr[i].local, wr[i].len,
		                              FAB_ACCESS_LOCAL_WRITE, &p) != 0)
			return -EINVAL;
	}
	return 0;
}
