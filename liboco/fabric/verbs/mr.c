/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mr.c -- memory registration of the verbs provider: ibv_reg_mr, and the
 * fab's table of regions by local key, which posting checks local buffers
 * against.
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

static uint32_t key_slot(uint32_t lkey)
{
	return (lkey * 2654435761u) & (VRB_KEYS - 1);
}

/* key_add -- remember region @mr (under f->lock). 0 or -ENOSPC. */
static int key_add(struct vrb_fab *f, const struct ibv_mr *mr, unsigned access)
{
	uint32_t i = key_slot(mr->lkey);

	if (f->nkeys >= VRB_KEYS / 2)
		return -ENOSPC;
	for (uint32_t n = 0; n < VRB_KEYS; n++, i = (i + 1) & (VRB_KEYS - 1)) {
		struct vrb_key *k = &f->keys[i];

		if (k->state == 1)
			continue;
		/* odd: readers retry; pairs with the acquire loads in vrb_key_check() */
		__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		k->lkey = mr->lkey;
		k->access = access;
		k->base = (uintptr_t)mr->addr;
		k->len = mr->length;
		__atomic_store_n(&k->state, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELEASE);
		f->nkeys++;
		return 0;
	}
	return -ENOSPC;
}

/* key_remove -- forget the region of @lkey (under f->lock); its slot becomes a tombstone. */
static void key_remove(struct vrb_fab *f, uint32_t lkey)
{
	uint32_t i = key_slot(lkey);

	for (uint32_t n = 0; n < VRB_KEYS && f->keys[i].state != 0;
	     n++, i = (i + 1) & (VRB_KEYS - 1)) {
		struct vrb_key *k = &f->keys[i];

		if (k->state == 1 && k->lkey == lkey) {
			__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_RELEASE);
			__atomic_store_n(&k->state, 2, __ATOMIC_RELAXED);
			__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELEASE);
			f->nkeys--;
			return;
		}
	}
}

/*
 * vrb_key_check -- whether @lkey names a region of this fab that holds
 * [@addr, @addr + @len) with @access. Lock-free (seqlock per slot).
 * The device checks the same: this finds it before posting, because a
 * local protection error raised while earlier requests are in flight
 * silences an rxe QP for good (Linux 6.1: no completion at all).
 */
bool vrb_key_check(const struct vrb_fab *f, uint32_t lkey, uintptr_t addr, uint64_t len,
                   unsigned access)
{
	uint32_t i = key_slot(lkey);

	for (uint32_t n = 0; n < VRB_KEYS; n++, i = (i + 1) & (VRB_KEYS - 1)) {
		const struct vrb_key *k = &f->keys[i];
		uint32_t seq, state, klkey;
		unsigned kacc;
		uintptr_t base;
		size_t klen;

		for (int tries = 0;; tries++) {
			seq = __atomic_load_n(&k->seq, __ATOMIC_ACQUIRE);
			state = __atomic_load_n(&k->state, __ATOMIC_RELAXED);
			klkey = __atomic_load_n(&k->lkey, __ATOMIC_RELAXED);
			kacc = __atomic_load_n(&k->access, __ATOMIC_RELAXED);
			base = __atomic_load_n(&k->base, __ATOMIC_RELAXED);
			klen = __atomic_load_n(&k->len, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (!(seq & 1) && seq == __atomic_load_n(&k->seq, __ATOMIC_RELAXED))
				break;
			if (tries == 64)
				return true; /* a region changes under us: let the device judge */
		}
		if (state == 0)
			return false; /* no such key */
		if (state != 1 || klkey != lkey)
			continue;
		return addr >= base && len <= klen && addr - base <= klen - len &&
		       (kacc & access) == access;
	}
	return false;
}

int vrb_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	struct vrb_mr *m;
	int flags = 0, ret;

	if (addr == NULL || len == 0 || out == NULL || (access & ~0xfu))
		return -EINVAL;
	/* verbs: remote write and atomics need local write; we never add rights */
	if ((access & (FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & FAB_ACCESS_LOCAL_WRITE))
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
	pthread_mutex_lock(&f->lock);
	ret = key_add(f, m->mr, access);
	pthread_mutex_unlock(&f->lock);
	if (ret) {
		lc_log_err("verbs: %s: more than %u regions registered", f->dev, VRB_KEYS / 2);
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

	pthread_mutex_lock(&f->lock);
	key_remove(f, m->mr->lkey);
	pthread_mutex_unlock(&f->lock);
	ret = ibv_dereg_mr(m->mr);

	if (ret) {
		lc_log_err("verbs: %s: ibv_dereg_mr failed: %s", to_vrb_fab(mr->fab)->dev,
		           strerror(ret));
		return -ret;
	}
	free(m);
	return 0;
}
