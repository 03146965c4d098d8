/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * links.c -- the node -> data link table (rules in links.h) and opening
 * data links.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "links.h"
#include "log.h"

#define KEY_NODE(k) ((uint32_t)((k)&0xffffffffu))
#define KEY_GEN(k)  ((uint32_t)((k) >> 32))

static uint32_t hash(uint32_t node)
{
	return (node * 2654435761u) % LC_LINK_SLOTS;
}

/*
 * find -- @node's slot and the key it was seen with, or NULL (lock-free).
 * It probes at most max_probe + 1 slots, past tombstones and other nodes,
 * and stops at a never-used slot.
 */
static struct lc_link_slot *find(struct lc_links *t, uint32_t node, uint64_t *key)
{
	uint32_t h = hash(node), max = __atomic_load_n(&t->max_probe, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i <= max && i < LC_LINK_SLOTS; i++) {
		struct lc_link_slot *s = &t->slot[(h + i) % LC_LINK_SLOTS];
		uint64_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (KEY_NODE(k) == node) {
			*key = k;
			return s;
		}
		if (k == 0)
			return NULL;
	}
	return NULL;
}

/* wait_users -- until no poster holds @s (posting never blocks: short). */
static void wait_users(struct lc_link_slot *s)
{
	for (unsigned spins = 0; __atomic_load_n(&s->users, __ATOMIC_SEQ_CST) != 0; spins++) {
		if (spins < 256)
			lc_cpu_relax();
		else
			sched_yield();
	}
}

/* displacement -- how far slot @i is from the home of the node it holds. */
static uint32_t displacement(uint32_t i, uint32_t node)
{
	return (i + LC_LINK_SLOTS - hash(node)) % LC_LINK_SLOTS;
}

/* shrink_probe -- after a removal: the longest displacement of the nodes still present. */
static void shrink_probe(struct lc_links *t)
{
	uint32_t max = 0;

	for (uint32_t i = 0; i < LC_LINK_SLOTS; i++) {
		uint64_t k = __atomic_load_n(&t->slot[i].key, __ATOMIC_RELAXED);
		uint32_t d;

		if (KEY_NODE(k) == 0)
			continue;
		d = displacement(i, KEY_NODE(k));
		if (d > max)
			max = d;
	}
	/* every node present is within @max of its home: lookups may stop there */
	__atomic_store_n(&t->max_probe, max, __ATOMIC_RELEASE);
}

/* take_slot -- a free slot (never used or a tombstone) for @node, keyed to it; or NULL. */
static struct lc_link_slot *take_slot(struct lc_links *t, uint32_t node)
{
	uint32_t h = hash(node);

	for (uint32_t i = 0; i < LC_LINK_SLOTS; i++) {
		struct lc_link_slot *s = &t->slot[(h + i) % LC_LINK_SLOTS];
		uint64_t k = __atomic_load_n(&s->key, __ATOMIC_RELAXED);

		if (KEY_NODE(k) != 0)
			continue;
		/* lookups must probe this far before the node appears here */
		if (i > __atomic_load_n(&t->max_probe, __ATOMIC_RELAXED))
			__atomic_store_n(&t->max_probe, i, __ATOMIC_RELEASE);
		/* a new generation: a poster that saw the slot's old key sees the change */
		__atomic_store_n(&s->key, (uint64_t)(KEY_GEN(k) + 1u) << 32 | node,
		                 __ATOMIC_SEQ_CST);
		t->nodes++;
		return s;
	}
	return NULL;
}

struct fab_link *lc_links_set(struct lc_links *t, uint32_t node, struct fab_link *link)
{
	struct lc_link_slot *s;
	struct fab_link *old;
	uint64_t key = 0;

	if (node == 0)
		return NULL;
	s = find(t, node, &key);
	if (s == NULL && link == NULL)
		return NULL;
	if (s == NULL) {
		s = take_slot(t, node);
		if (s == NULL) {
			lc_log_err("manager: no room for a link to node %u (%u nodes linked)", node,
			           t->nodes);
			return NULL;
		}
	}
	old = __atomic_exchange_n(&s->link, link, __ATOMIC_SEQ_CST);
	/*
	 * A poster that loaded @old counted itself in users first (seq_cst
	 * both sides): wait until it has posted.
	 */
	wait_users(s);
	if (link == NULL) {
		/*
		 * Free the slot: the tombstone keeps the generation. A poster that
		 * counts itself from now on sees the key changed and loads no link;
		 * one that saw it unchanged loaded NULL (stored above).
		 */
		__atomic_store_n(&s->key, (uint64_t)KEY_GEN(key) << 32, __ATOMIC_SEQ_CST);
		t->nodes--;
		shrink_probe(t);
	}
	return old;
}

struct fab_link *lc_links_hold(struct lc_links *t, uint32_t node, struct lc_link_slot **slot)
{
	struct lc_link_slot *s;
	uint64_t key = 0;

	*slot = NULL;
	if (node == 0)
		return NULL; /* (no node's id: it would name the free slots) */
	s = find(t, node, &key);
	*slot = s;
	if (s == NULL)
		return NULL;
	/* counted before the loads: pairs with lc_links_set() (seq_cst both sides) */
	__atomic_add_fetch(&s->users, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->key, __ATOMIC_SEQ_CST) != key)
		return NULL; /* freed or given to another node since: no link through it */
	return __atomic_load_n(&s->link, __ATOMIC_SEQ_CST);
}

void lc_links_release(struct lc_link_slot *slot)
{
	if (slot != NULL)
		__atomic_sub_fetch(&slot->users, 1, __ATOMIC_RELEASE);
}

int lc_links_has(struct lc_links *t, uint32_t node)
{
	struct fab_link *link;
	struct lc_link_slot *s;

	link = lc_links_hold(t, node, &s);
	lc_links_release(s);
	return link != NULL;
}

int lc_link_open(struct fab *fab, const char *fab_addr, const struct lc_link_proof *proof,
                 uint64_t counter, int timeout_ms, struct fab_link **out)
{
	uint8_t priv[LC_LINK_PRIV_LEN];
	struct fab_addr fa;
	int ret;

	lc_link_priv_make(proof, counter, priv);
	ret = fab_addr_parse(fab_addr, 0, &fa);
	if (ret == 0)
		ret = fab_connect(fab, &fa, proof->to_node, priv, sizeof(priv), timeout_ms, out);
	if (ret)
		lc_log_warn("manager: data link to node %u (%s) failed: %s", proof->to_node,
		            fab_addr, strerror(-ret));
	return ret;
}
