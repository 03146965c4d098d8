/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * chan_peer.c -- a channel's peer table (chan.h): slots read lock-free by
 * the data path, their references to the peer's regions, and slots of
 * peers that left retired and freed after a grace. channel.c pairs,
 * chan_announce.c announces; this file keeps the table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "log.h"

/* ------------------------------------------------------------------ */
/* peers: slots read lock-free by the data path                      */

static uint32_t peer_hash(uint32_t node)
{
	return (node * 2654435761u) % LC_CHAN_PEERS;
}

/* A retired peer's position: lookups probe past it, an insertion may take it. */
static struct lc_peer peer_tomb;

struct lc_peer *lc_peer_get(loco_channel_t *ch, uint32_t node)
{
	uint32_t h = peer_hash(node);

	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		/* pairs with the release stores in lc_peer_slot() and lc_peer_retire() */
		struct lc_peer *p =
		    __atomic_load_n(&ch->peer[(h + i) % LC_CHAN_PEERS], __ATOMIC_ACQUIRE);

		if (p == NULL)
			return NULL;
		if (p != &peer_tomb && p->node == node)
			return p;
	}
	return NULL;
}

struct lc_peer *lc_peer_at(loco_channel_t *ch, uint32_t i)
{
	struct lc_peer *p = __atomic_load_n(&ch->peer[i], __ATOMIC_ACQUIRE);

	return p == &peer_tomb ? NULL : p;
}

struct lc_peer *lc_peer_next(loco_channel_t *ch, uint32_t *pos)
{
	uint32_t i = *pos;

	while (i < LC_CHAN_PEERS) {
		/* pairs with the release OR in lc_peer_slot(): the pointer was stored first */
		uint64_t w = __atomic_load_n(&ch->peer_used[i / 64], __ATOMIC_ACQUIRE) >> (i % 64);
		struct lc_peer *p;

		if (w == 0) {
			i = (i / 64 + 1) * 64;
			continue;
		}
		i += (uint32_t)__builtin_ctzll(w);
		p = lc_peer_at(ch, i++);
		if (p != NULL) {
			*pos = i;
			return p;
		}
	}
	*pos = LC_CHAN_PEERS;
	return NULL;
}

struct lc_rref *lc_peer_rref(struct lc_peer *p, uint32_t idx)
{
	struct lc_rref *page;

	if (idx >= LC_CHAN_ENTRIES_MAX)
		return NULL;
	/* pairs with the release store in lc_peer_rref_set() */
	page = __atomic_load_n(&p->rr[idx / LC_RR_PAGE], __ATOMIC_ACQUIRE);
	return page != NULL ? &page[idx % LC_RR_PAGE] : NULL;
}

void lc_peer_rref_set(struct lc_peer *p, uint32_t idx, uint32_t rkey, uint64_t addr, uint64_t len)
{
	struct lc_rref *page;

	if (idx >= LC_CHAN_ENTRIES_MAX)
		return;
	page = p->rr[idx / LC_RR_PAGE];
	if (page == NULL) {
		if (len == 0)
			return; /* unresolved, as a missing page reads */
		page = calloc(LC_RR_PAGE, sizeof(*page));
		if (page == NULL) {
			lc_log_err("manager: out of memory: a region of node %u stays unresolved",
			           p->node);
			return;
		}
		__atomic_store_n(&p->rr[idx / LC_RR_PAGE], page, __ATOMIC_RELEASE);
	}
	lc_rref_write(&page[idx % LC_RR_PAGE], rkey, addr, len);
}

void lc_peer_free(struct lc_peer *p)
{
	for (uint32_t i = 0; i < LC_RR_PAGES; i++)
		free(p->rr[i]);
	free(p->regions);
	free(p->pend);
	free(p);
}

void lc_peer_reap(loco_manager_t *m, loco_channel_t *ch, int all)
{
	uint64_t now = all ? 0 : lc_now_ns();

	(void)m;
	for (struct lc_peer **pp = &ch->peer_graves; *pp != NULL;) {
		struct lc_peer *p = *pp;

		if (all || now >= p->due_ns) {
			*pp = p->next;
			lc_peer_free(p);
		} else {
			pp = &p->next;
		}
	}
}

/*
 * peer_retire -- @p (absent) leaves the table: its position becomes a
 * tombstone, and positions that end a probe chain become free again; the
 * struct waits two failure bounds on the graves for lock-free readers
 * that loaded it before. m->lock held.
 */
void lc_peer_retire(loco_manager_t *m, loco_channel_t *ch, struct lc_peer *p)
{
	uint32_t h = peer_hash(p->node), at = LC_CHAN_PEERS;

	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		uint32_t k = (h + i) % LC_CHAN_PEERS;

		if (ch->peer[k] == NULL)
			break;
		if (ch->peer[k] == p) {
			at = k;
			break;
		}
	}
	if (at == LC_CHAN_PEERS)
		return; /* not in the table: never */
	__atomic_and_fetch(&ch->peer_used[at / 64], ~(1ull << (at % 64)), __ATOMIC_RELEASE);
	__atomic_store_n(&ch->peer[at], &peer_tomb, __ATOMIC_RELEASE);
	/* a tombstone followed by a free position ends its chains: free it too, and so on back */
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		uint32_t k = (at + LC_CHAN_PEERS - i) % LC_CHAN_PEERS;

		if (ch->peer[k] != &peer_tomb || ch->peer[(k + 1) % LC_CHAN_PEERS] != NULL)
			break;
		__atomic_store_n(&ch->peer[k], NULL, __ATOMIC_RELEASE);
	}
	free(p->regions);
	p->regions = NULL;
	p->nregions = 0;
	free(p->pend);
	p->pend = NULL;
	p->npend = p->pend_cap = p->pend_total = 0;
	p->due_ns = lc_now_ns() + 2ull * m->cfg.fail_timeout_ms * 1000000ull;
	p->next = ch->peer_graves;
	ch->peer_graves = p;
}

/* peer_slot -- @node's slot, made when it is new. m->lock held. NULL: out of memory or room. */
struct lc_peer *lc_peer_slot(loco_manager_t *m, loco_channel_t *ch, uint32_t node)
{
	struct lc_peer *p = lc_peer_get(ch, node);
	uint32_t h = peer_hash(node);

	if (p != NULL)
		return p;
	lc_peer_reap(m, ch, 0);
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		uint32_t k = (h + i) % LC_CHAN_PEERS;
		struct lc_peer **slot = &ch->peer[k];

		/* lc_peer_get() said @node is not in the chain: the first free or dead position */
		if (*slot != NULL && *slot != &peer_tomb)
			continue;
		p = calloc(1, sizeof(*p));
		if (p == NULL)
			return NULL;
		p->node = node;
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
		__atomic_or_fetch(&ch->peer_used[k / 64], 1ull << (k % 64), __ATOMIC_RELEASE);
		return p;
	}
	lc_log_err("manager: channel %s: no room for node %u (%u peers at once)", ch->name, node,
	           LC_CHAN_PEERS);
	return NULL;
}

int lc_rref_read(const struct lc_rref *r, uint32_t node, loco_rref_t *out)
{
	for (;;) {
		/* pairs with the release stores in lc_rref_write() */
		uint64_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE), s2;
		uint64_t rkey = __atomic_load_n(&r->rkey, __ATOMIC_RELAXED);
		uint64_t addr = __atomic_load_n(&r->addr, __ATOMIC_RELAXED);
		uint64_t len = __atomic_load_n(&r->len, __ATOMIC_RELAXED);

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
		if ((s1 & 1) || s1 != s2) {
			lc_cpu_relax();
			continue;
		}
		if (len == 0)
			return -ENOENT;
		*out =
		    (loco_rref_t){.node = node, .rkey = (uint32_t)rkey, .addr = addr, .len = len};
		return 0;
	}
}

void lc_rref_write(struct lc_rref *r, uint32_t rkey, uint64_t addr, uint64_t len)
{
	uint64_t s = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&r->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE); /* odd before the fields change */
	__atomic_store_n(&r->rkey, rkey, __ATOMIC_RELAXED);
	__atomic_store_n(&r->addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&r->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&r->seq, s + 2, __ATOMIC_RELEASE);
}

/* lc_peer_fence_settle -- @p owes no fence any more (it left, or paired just now). */
void lc_peer_fence_settle(loco_channel_t *ch, struct lc_peer *p)
{
	uint32_t g = __atomic_load_n(&ch->fence_gen, __ATOMIC_ACQUIRE);
	uint32_t old = __atomic_load_n(&p->fence_gen, __ATOMIC_ACQUIRE);

	/* the same CAS as a poster taking the fence: exactly one of them settles it */
	while (old != g)
		if (__atomic_compare_exchange_n(&p->fence_gen, &old, g, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE)) {
			if (__atomic_load_n(&p->present, __ATOMIC_RELAXED))
				__atomic_sub_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
			break;
		}
}
