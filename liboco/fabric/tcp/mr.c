/* SPDX-License-Identifier: BSD-2-Clause */
/* mr.c -- memory registration of the tcp provider: regions in the fab's key table. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "tcp.h"

struct tcp_mr {
	struct fab_mr base;
};

/* reg -- a region under a key the table chooses (@given NULL) or under *@given (auto). */
static int reg(struct fab *fab, void *addr, size_t len, unsigned access, const uint32_t *given,
               struct fab_mr **out)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	struct tcp_mr *m;
	uint32_t key = given != NULL ? *given : 0;
	int ret;

	if (fab_mr_check(addr, len, access, out))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	ret = given != NULL ? keytab_add_foreign(&f->kt, key, addr, len, access)
	                    : keytab_add(&f->kt, addr, len, access, &key);
	if (ret) {
		free(m);
		return ret;
	}
	m->base = (struct fab_mr){
	    .fab = fab, .addr = addr, .len = len, .lkey = key, .rkey = key, .access = access};
	*out = &m->base;
	return 0;
}

int tcp_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	return reg(fab, addr, len, access, NULL, out);
}

int tcp_mr_reg_key(struct fab *fab, void *addr, size_t len, unsigned access, uint32_t lkey,
                   uint32_t rkey, struct fab_mr **out)
{
	if (lkey != rkey)
		return -EINVAL; /* one table checks both */
	return reg(fab, addr, len, access, &lkey, out);
}

int tcp_mr_dereg(struct fab_mr *mr)
{
	struct tcp_fab *f = to_tcp_fab(mr->fab);
	unsigned seq;
	int ret = keytab_remove(&f->kt, mr->rkey);

	/*
	 * Wait until the NIC is past any access that may have looked the key
	 * up. Store (key removed) then load (nic_busy) here against the NIC's
	 * SEQ_CST increment then key load: the fence forbids the store-load
	 * reordering that TSO allows.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	seq = __atomic_load_n(&f->nic_busy, __ATOMIC_SEQ_CST);
	if (seq & 1) {
		for (int i = 0;
		     i < 1000000 && __atomic_load_n(&f->nic_busy, __ATOMIC_ACQUIRE) == seq; i++)
			sched_yield();
	}
	free(container_of(mr, struct tcp_mr, base));
	return ret;
}
