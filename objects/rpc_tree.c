/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_tree.c -- calls to every member down a tree: loco_rpc_call_all()
 * (RF_TREE, the arguments in the frame) and loco_rpc_call_buffer_all()
 * (RF_TREEV, the bytes READ from the sender by each taker), both sent by
 * the origin and passed on by each member that takes a group (the design
 * is in rpc_impl.h; the relaying side is rpc_serve.c's). Public API only.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "obj_util.h"
#include "rpc_impl.h"

/* sub_at -- node id @i of a tree's list (unaligned: it may point into a ring message) */
static uint32_t sub_at(const uint8_t *sub, uint32_t i)
{
	uint32_t v;

	memcpy(&v, sub + (size_t)i * 4, sizeof(v));
	return v;
}

/* tree_ms -- a wait as an RF_TREE frame carries it: ms, rounded up; UINT32_MAX: forever */
static uint32_t tree_ms(int64_t timeout_ns)
{
	if (timeout_ns < 0 || timeout_ns / 1000000 >= UINT32_MAX - 1)
		return UINT32_MAX;
	return (uint32_t)((timeout_ns + 999999) / 1000000);
}

int64_t rpc_tree_wait_ns(uint32_t ms)
{
	return ms == UINT32_MAX ? -1 : (int64_t)ms * 1000000;
}

int rpc_tree_send(loco_rpc_ep_t *ep, uint32_t origin, uint32_t hid, const uint8_t *sub, uint32_t n,
                  const void *args, size_t alen, int64_t timeout_ns)
{
	uint32_t groups = n < RPC_TREE_FANOUT ? n : RPC_TREE_FANOUT;
	int first = 0;

	for (uint32_t g = 0; g < groups; g++) {
		/* group g: [lo, hi); its first reachable member takes the call and passes it on */
		uint32_t lo = (uint32_t)((uint64_t)n * g / groups);
		uint32_t hi = (uint32_t)((uint64_t)n * (g + 1) / groups);

		for (uint32_t c = lo; c < hi; c++) {
			uint32_t node = sub_at(sub, c), th[2] = {origin, 0};
			struct rf_hdr h = {
			    .kind = RF_TREE, .hid = hid, .ret_cap = tree_ms(timeout_ns)};
			struct pl_iov pl;
			struct rpc_peer *p;
			int64_t dl;
			int ret;

			if (!rpc_is_member(ep, node) || node == origin ||
			    (p = rpc_peer_get(ep, node)) == NULL)
				continue; /* a hostile list, or no room for its record */
			th[1] = hi - c - 1;
			pl = (struct pl_iov){.p = {th, sub + (size_t)(c + 1) * 4, args},
			                     .n = {sizeof(th), (size_t)th[1] * 4, alen}};
			pl.len = pl.n[0] + pl.n[1] + pl.n[2];
			if (rf_r8(RF_HDR + pl.len) > ep->rec_max) {
				/* the list does not fit a ring message: this one gets a plain call */
				h = (struct rf_hdr){.kind = RF_CALL, .hid = hid};
				pl = pl_one(args, alen);
			}
			h.plen = (uint32_t)pl.len;
			/* each post waits its own @timeout_ns: a slow ring set-up costs no other */
			dl = obj_deadline_lazy(timeout_ns);
			ret = rpc_post(ep, p, node, &h, &pl, 0, timeout_ns == 0, &dl, NULL, NULL);
			if (ret == 0 && h.kind == RF_TREE)
				break; /* it passes the call on to the rest of the group */
			if (ret && !first)
				first = ret; /* the next member of the group takes its place */
		}
	}
	return first;
}

/*
 * all_peers -- the other members a call to all goes to (RPC_TAB / 2 room
 * at @peers): the member list, else every paired peer that holds the
 * endpoint (its reply slots are known). Returns their count.
 */
static uint32_t all_peers(loco_rpc_ep_t *ep, uint32_t *peers)
{
	uint32_t n = 0;
	int np;

	if (ep->nodes != NULL) {
		for (uint32_t i = 0; i < ep->cfg.nnodes; i++)
			if (ep->nodes[i] != ep->me)
				peers[n++] = ep->nodes[i];
		return n;
	}
	np = loco_channel_peers(ep->ch, peers, RPC_TAB / 2);
	for (int i = 0; i < np && i < (int)(RPC_TAB / 2); i++) {
		loco_rref_t r;

		if (loco_region_remote(ep->rets, peers[i], &r) == 0)
			peers[n++] = peers[i];
	}
	return n;
}

int loco_rpc_call_all(loco_rpc_ep_t *ep, uint32_t id, const void *args, size_t len,
                      int64_t timeout_ns)
{
	uint32_t peers[RPC_TAB / 2], n;

	OBJ_CHECK(ep);
	if (len && args == NULL)
		return -EINVAL;
	if (len > ep->cfg.inline_max)
		return -EMSGSIZE;
	n = all_peers(ep, peers);
	return rpc_tree_send(ep, ep->me, id, (const uint8_t *)peers, n, args, len, timeout_ns);
}

/* ------------------------------------------------------------------ */
/* a buffer broadcast down a tree (RF_TREEV)                          */

/* treev_ids_max -- the node ids an RF_TREEV frame with one READ argument has room for */
static uint32_t treev_ids_max(const loco_rpc_ep_t *ep)
{
	size_t fixed =
	    RF_HDR + 2 * sizeof(uint32_t) + sizeof(struct rf_vec) + sizeof(struct rf_varg);

	return ep->rec_max > fixed ? (uint32_t)((ep->rec_max - fixed) / 4) : 0;
}

/* treev_slot -- a reply slot for an RF_TREEV to @node, waiting for one within @tv's time */
static int treev_slot(loco_rpc_ep_t *ep, uint32_t node, const struct rpc_treev *tv, uint32_t *slot,
                      uint64_t *tag)
{
	loco_waiter_t w;
	int ret;

	loco_waiter_init(&w, ep->m);
	while ((ret = rpc_slot_get(ep, node, 1, slot, tag)) == -EBUSY) {
		if (tv->timeout_ns == 0 || (tv->deadline >= 0 && obj_now_ns() >= tv->deadline))
			return -EBUSY;
		if (rpc_help(ep) == 0)
			loco_waiter_pause(&w);
	}
	ep->slots[*slot].oneway = 1; /* (SLOT_WAIT: no reclaim looks at it) */
	return ret;
}

/*
 * treev_post -- post @g's RF_TREEV to its member sub[c], or, when that one
 * cannot be posted to, to the next: the taker READs the bytes and passes
 * them on to the rest of the group, [c + 1, hi). Sets g->out when one went.
 */
static void treev_post(loco_rpc_ep_t *ep, struct rpc_treev *tv, struct rpc_treev_group *g)
{
	for (; g->c < g->hi; g->c++) {
		uint32_t node = sub_at(tv->sub, g->c), th[2] = {tv->origin, g->hi - g->c - 1};
		struct {
			struct rf_vec v;
			struct rf_varg a;
		} vec = {
		    .v = {.n = 1},
		    .a = {.len = tv->len, .addr = tv->addr, .rkey = tv->rkey, .how = RF_VARG_READ}};
		struct rf_hdr h = {
		    .kind = RF_TREEV, .hid = tv->hid, .ret_cap = tree_ms(tv->timeout_ns)};
		struct pl_iov pl = {.p = {th, tv->sub + (size_t)(g->c + 1) * 4, &vec},
		                    .n = {sizeof(th), (size_t)th[1] * 4, sizeof(vec)}};
		struct rpc_peer *p;
		int ret;

		if (!rpc_is_member(ep, node) || node == tv->origin || node == ep->me ||
		    (p = rpc_peer_get(ep, node)) == NULL)
			continue; /* a hostile list, or no room for its record */
		pl.len = pl.n[0] + pl.n[1] + pl.n[2];
		h.plen = (uint32_t)pl.len;
		ret = treev_slot(ep, node, tv, &h.slot, &h.tag);
		if (ret == 0) {
			ret = rpc_post(ep, p, node, &h, &pl, 1, tv->timeout_ns == 0, &tv->deadline,
			               &ep->slots[h.slot].epoch, NULL);
			if (ret)
				rpc_slot_end(ep, h.slot,
				             SLOT_FREE); /* never posted: nothing comes */
		}
		if (ret == 0) {
			g->slot = h.slot;
			g->tag = h.tag;
			g->out = 1;
			return;
		}
		if (!tv->first)
			tv->first = ret; /* the next member of the group takes its place */
	}
}

int rpc_treev_send(loco_rpc_ep_t *ep, uint32_t origin, uint32_t hid, const uint8_t *sub, uint32_t n,
                   const void *data, size_t len, int64_t timeout_ns, struct rpc_treev *tv)
{
	uint32_t per = treev_ids_max(ep) + 1, ng = n < RPC_TREE_FANOUT ? n : RPC_TREE_FANOUT;
	const uint8_t *send = loco_region_ptr(ep->send);
	int ret;

	tv->origin = origin;
	tv->hid = hid;
	tv->ngroups = 0;
	tv->sub = sub;
	tv->len = len;
	tv->timeout_ns = timeout_ns;
	tv->deadline = obj_deadline(timeout_ns);
	tv->pin = -1;
	tv->sent = 0;
	tv->first = 0;
	if (n == 0)
		return 0;
	/* more groups when a group's list would not fit its taker's frame */
	if ((n + per - 1) / per > ng)
		ng = (n + per - 1) / per;
	if (ng > RPC_TREEV_GROUPS)
		return -EMSGSIZE;
	if ((const uint8_t *)data >= send &&
	    (const uint8_t *)data + len <= send + ep->cfg.pull_bytes) {
		/* in the send region: its own registration */
		loco_rref_t rr;

		ret = loco_region_rref(ep->send, &rr);
		if (ret)
			return ret;
		tv->rkey = rr.rkey;
		tv->addr = rr.addr + (uint64_t)((const uint8_t *)data - send);
	} else {
		ret = rpc_mem_get(ep, data, len, &tv->rkey, &tv->pin);
		if (ret) {
			tv->pin = -1;
			return ret;
		}
		tv->addr = (uint64_t)(uintptr_t)data;
	}
	tv->sent = 1;
	tv->ngroups = ng;
	for (uint32_t i = 0; i < ng; i++) {
		struct rpc_treev_group *g = &tv->g[i];

		*g = (struct rpc_treev_group){.lo = (uint32_t)((uint64_t)n * i / ng),
		                              .hi = (uint32_t)((uint64_t)n * (i + 1) / ng)};
		g->c = g->lo;
		treev_post(ep, tv, g);
	}
	return 0;
}

/* treev_abandon -- stop waiting for @tv's takers: their slots go when their marks land */
static void treev_abandon(loco_rpc_ep_t *ep, struct rpc_treev *tv, int err)
{
	int kept = 0;

	for (uint32_t i = 0; i < tv->ngroups; i++) {
		struct rpc_treev_group *g = &tv->g[i];

		if (!g->out)
			continue;
		rpc_slot_end(ep, g->slot, SLOT_ABANDONED);
		g->out = 0;
		if (!kept && tv->pin >= 0) { /* the bytes stay registered while it may READ */
			rpc_mem_done(ep, tv->pin, 1, g->slot, g->tag);
			kept = 1;
		}
	}
	if (!kept && tv->pin >= 0)
		rpc_mem_done(ep, tv->pin, 0, 0, 0);
	tv->pin = -1;
	tv->sent = 0;
	if (!tv->first)
		tv->first = err;
}

int rpc_treev_wait(loco_rpc_ep_t *ep, struct rpc_treev *tv)
{
	loco_waiter_t w;
	int ret, waited = 0;

	if (!tv->sent)
		return tv->first;
	for (;;) {
		unsigned out = 0;

		for (uint32_t i = 0; i < tv->ngroups; i++) {
			struct rpc_treev_group *g = &tv->g[i];
			struct rpc_peer *p;

			if (!g->out)
				continue;
			p = rpc_peer_find(ep, sub_at(tv->sub, g->c));
			if (rpc_slot_consumed(ep, g->slot, g->tag)) {
				rpc_slot_end(ep, g->slot, SLOT_FREE);
				g->out = 0;
				continue;
			}
			if (p == NULL || peer_epoch(p) != ep->slots[g->slot].epoch) {
				/* it left before it took the bytes: the next member takes the group */
				rpc_slot_end(ep, g->slot, SLOT_FREE);
				g->out = 0;
				g->c++;
				treev_post(ep, tv, g);
				out += g->out;
				continue;
			}
			if (__atomic_load_n(&p->blen, __ATOMIC_RELAXED) != 0) { /* batched */
				pthread_mutex_lock(&p->wlock);
				(void)rpc_flush_peer(ep, p);
				pthread_mutex_unlock(&p->wlock);
			}
			out++;
		}
		if (out == 0)
			break;
		ret = rpc_ep_check(ep);
		if (ret == 0 &&
		    (tv->timeout_ns == 0 || (tv->deadline >= 0 && obj_now_ns() >= tv->deadline)))
			ret = -ETIMEDOUT;
		if (ret) {
			if (ret == -ETIMEDOUT)
				ST_ADD(ep, timeouts, 1);
			treev_abandon(ep, tv, ret);
			return tv->first;
		}
		if (!waited++)
			loco_waiter_init(&w, ep->m);
		if (rpc_help(ep) == 0)
			loco_waiter_pause(&w);
	}
	if (waited)
		loco_waiter_done(&w);
	if (tv->pin >= 0)
		rpc_mem_done(ep, tv->pin, 0, 0, 0); /* every taker holds the bytes, or left */
	tv->pin = -1;
	tv->sent = 0;
	return tv->first;
}

int loco_rpc_call_buffer_all(loco_rpc_ep_t *ep, uint32_t id, const void *buf, size_t len,
                             int64_t timeout_ns)
{
	uint32_t peers[RPC_TAB / 2], n;
	struct rpc_treev tv;
	int ret;

	OBJ_CHECK(ep);
	if (buf == NULL || len == 0)
		return -EINVAL;
	if (len > ep->cfg.pull_bytes)
		return -EMSGSIZE;
	ret = rpc_ep_check(ep);
	if (ret)
		return ret;
	n = all_peers(ep, peers);
	ret = rpc_treev_send(ep, ep->me, id, (const uint8_t *)peers, n, buf, len, timeout_ns, &tv);
	return ret ? ret : rpc_treev_wait(ep, &tv);
}
