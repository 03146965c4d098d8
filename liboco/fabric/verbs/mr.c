/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mr.c -- memory registration of the verbs provider: ibv_reg_mr, and the
 * region's entry under its lkey in the fab's key table (keytab.h), which
 * posting checks local buffers against.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../log.h"
#include "verbs.h"

struct vrb_mr {
	struct fab_mr base;
	struct ibv_mr *mr;
};

int vrb_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	struct vrb_mr *m;
	int flags = 0, ret;

	/* verbs: remote write and atomics need local write; we never add rights */
	if (fab_mr_check(addr, len, access, out))
		return -EINVAL;
	if (access & FAB_ACCESS_LOCAL_WRITE)
		flags |= IBV_ACCESS_LOCAL_WRITE;
	if (access & FAB_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & FAB_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & FAB_ACCESS_REMOTE_ATOMIC)
		flags |= IBV_ACCESS_REMOTE_ATOMIC;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	m->mr = ibv_reg_mr(f->pd, addr, len, flags);
	if (m->mr == NULL) {
		ret = errno ? -errno : -ENOMEM;
		lc_log_err("verbs: %s: cannot register %zu bytes at %p: %s%s", f->dev, len, addr,
		           strerror(-ret),
		           ret == -ENOMEM || ret == -EPERM || ret == -EAGAIN
		               ? " (RLIMIT_MEMLOCK too low? see ulimit -l and loco-info(1))"
		               : "");
		free(m);
		return ret;
	}
	ret = keytab_add_foreign(&f->kt, m->mr->lkey, addr, len, access);
	if (ret) {
		if (ret == -ENOSPC)
			lc_log_err("verbs: %s: more than %u regions registered", f->dev,
			           VRB_KEYS / 2);
		else
			lc_log_err("verbs: %s: cannot add lkey 0x%x to the region table: %s",
			           f->dev, m->mr->lkey, strerror(-ret));
		ibv_dereg_mr(m->mr);
		free(m);
		return ret;
	}
	m->base = (struct fab_mr){.fab = fab,
	                          .addr = addr,
	                          .len = len,
	                          .lkey = m->mr->lkey,
	                          .rkey = m->mr->rkey,
	                          .access = access};
	*out = &m->base;
	return 0;
}

int vrb_mr_dereg(struct fab_mr *mr)
{
	struct vrb_mr *m = container_of(mr, struct vrb_mr, base);
	struct vrb_fab *f = to_vrb_fab(mr->fab);
	int ret;

	keytab_remove(&f->kt, m->mr->lkey);
	ret = ibv_dereg_mr(m->mr);

	if (ret) {
		lc_log_err("verbs: %s: ibv_dereg_mr failed: %s", to_vrb_fab(mr->fab)->dev,
		           strerror(ret));
		return -ret;
	}
	free(m);
	return 0;
}
