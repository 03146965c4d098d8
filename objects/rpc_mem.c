/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_mem.c -- the registration cache of loco_rpc_callv(): the caller's
 * buffers that callees READ, registered on first use
 * (loco_region_register(), remotely readable, in the endpoint's object
 * "<name>.m") and kept, LOCO_RPC_REG_MAX per endpoint. Public API only.
 *
 * An entry covers whole pages, so a buffer used again, or another one in
 * the same pages, finds it. It is in use while a call is being made with
 * it (pins) and then while that call may still READ it: until the call's
 * reply slot is free or serves another call (rpc_slot_busy()); only an
 * entry in no use is dropped (least recently used first) or forgotten.
 *
 * Freed memory: every hit asks whether the entry's pages are still mapped
 * (loco_region_valid(): mincore(2)); an unmapped one is dropped, and the
 * registration of what is there now fails with -EFAULT if nothing is. A
 * buffer unmapped and mapped again at the same address cannot be told
 * from the old one that way (the mapping looks the same): the caller says
 * so with loco_rpc_mem_forget() before it frees or unmaps.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "obj_util.h"
#include "rpc_impl.h"

_Static_assert(RF_VEC_MAX == LOCO_RPC_ARGS_MAX, "one frame carries a callv's arguments");

/* in_use -- (mlock) whether entry @e is pinned or may still be READ by a call */
static int in_use(loco_rpc_ep_t *ep, const struct rpc_mreg *e)
{
	return e->pins > 0 || (e->tag != 0 && rpc_slot_busy(ep, e->slot, e->tag));
}

/* drop -- (mlock) unregister entry @e */
static void drop(struct rpc_mreg *e)
{
	(void)loco_region_unregister(e->r);
	*e = (struct rpc_mreg){0};
}

/* mobj -- (mlock) the regions' object, made on first use: 0 or its error */
static int mobj(loco_rpc_ep_t *ep)
{
	char on[LOCO_NAME_MAX + 16];

	if (ep->mobj != NULL)
		return 0;
	snprintf(on, sizeof(on), "%s.m", ep->name);
	return loco_object_create(ep->ch, on, NULL, NULL, &ep->mobj);
}

int rpc_mem_get(loco_rpc_ep_t *ep, const void *ptr, size_t len, uint32_t *rkey, int *idx)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), s = (uintptr_t)ptr & ~(pg - 1),
	          e = ((uintptr_t)ptr + len + pg - 1) & ~(pg - 1);
	struct rpc_mreg *hit = NULL, *victim = NULL;
	loco_rref_t rr;
	int ret = 0;

	if (e <= s)
		return -EFAULT; /* wraps around */
	pthread_mutex_lock(&ep->mlock);
	for (unsigned i = 0; i < LOCO_RPC_REG_MAX && hit == NULL; i++) {
		struct rpc_mreg *m = &ep->mreg[i];

		if (m->r == NULL || s < m->start || e > m->end)
			continue;
		if (loco_region_valid(m->r) == 0)
			hit = m;
		else if (!in_use(ep, m))
			drop(m); /* unmapped under it: what is there now is registered anew */
	}
	for (unsigned i = 0; i < LOCO_RPC_REG_MAX && hit == NULL; i++) {
		struct rpc_mreg *m = &ep->mreg[i];

		if (m->r == NULL) {
			victim = m;
			break;
		}
		if (!in_use(ep, m) && (victim == NULL || m->used < victim->used))
			victim = m;
	}
	if (hit == NULL && victim == NULL)
		ret = -EBUSY;
	if (hit == NULL && victim != NULL) {
		if (victim->r != NULL)
			drop(victim);
		ret = mobj(ep);
		if (ret == 0)
			ret = loco_region_register(ep->mobj, (void *)s, e - s, LOCO_ACCESS_READ,
			                           &victim->r);
		if (ret == 0) {
			victim->start = s;
			victim->end = e;
			hit = victim;
		}
	}
	if (hit != NULL) {
		hit->pins++;
		hit->used = ++ep->mclock;
		(void)loco_region_rref(hit->r, &rr);
		*rkey = rr.rkey;
		*idx = (int)(hit - ep->mreg);
	}
	pthread_mutex_unlock(&ep->mlock);
	return ret;
}

void rpc_mem_done(loco_rpc_ep_t *ep, int idx, int posted, uint32_t slot, uint64_t tag)
{
	struct rpc_mreg *m = &ep->mreg[idx];

	pthread_mutex_lock(&ep->mlock);
	m->pins--;
	if (posted) {
		/* the newest call decides (slots are taken in order of the calls) */
		m->slot = slot;
		m->tag = tag;
	}
	pthread_mutex_unlock(&ep->mlock);
}

int loco_rpc_mem_forget(loco_rpc_ep_t *ep, const void *ptr, size_t len)
{
	uintptr_t s = (uintptr_t)ptr, e = s + len;
	int ret = 0;

	OBJ_CHECK(ep);
	if (ptr == NULL || len == 0 || e < s)
		return -EINVAL;
	pthread_mutex_lock(&ep->mlock);
	for (unsigned i = 0; i < LOCO_RPC_REG_MAX && ret == 0; i++) {
		struct rpc_mreg *m = &ep->mreg[i];

		if (m->r != NULL && m->start < e && s < m->end && in_use(ep, m))
			ret = -EBUSY;
	}
	for (unsigned i = 0; i < LOCO_RPC_REG_MAX && ret == 0; i++) {
		struct rpc_mreg *m = &ep->mreg[i];

		if (m->r != NULL && m->start < e && s < m->end)
			drop(m);
	}
	pthread_mutex_unlock(&ep->mlock);
	return ret;
}

void rpc_mem_fini(loco_rpc_ep_t *ep)
{
	for (unsigned i = 0; i < LOCO_RPC_REG_MAX; i++)
		if (ep->mreg[i].r != NULL)
			drop(&ep->mreg[i]);
	loco_object_destroy(ep->mobj);
	ep->mobj = NULL;
}
