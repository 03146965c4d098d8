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

static uint32_t hash(uint32_t node)
{
	return (node * 2654435761u) % LC_LINK_SLOTS;
}

/* find -- @node's slot, or NULL (lock-free: slots never change node once set). */
static struct lc_link_slot *find(struct lc_links *t, uint32_t node)
{
	uint32_t h = hash(node);

	for (uint32_t i = 0; i < LC_LINK_SLOTS; i++) {
		struct lc_link_slot *s = &t->slot[(h + i) % LC_LINK_SLOTS];
		uint32_t n = __atomic_load_n(&s->node, __ATOMIC_ACQUIRE);

		if (n == node)
			return s;
		if (n == 0)
			return NULL;
	}
	return NULL;
}

struct fab_link *lc_links_set(struct lc_links *t, uint32_t node, struct fab_link *link)
{
	struct lc_link_slot *s = find(t, node);
	struct fab_link *old;

	if (s == NULL && link == NULL)
		return NULL;
	if (s == NULL) {
		uint32_t h = hash(node);

		for (uint32_t i = 0; i < LC_LINK_SLOTS && s == NULL; i++) {
			struct lc_link_slot *x = &t->slot[(h + i) % LC_LINK_SLOTS];

			if (__atomic_load_n(&x->node, __ATOMIC_RELAXED) == 0)
				s = x;
		}
		if (s == NULL) {
			lc_log_err("manager: no room for a link to node %u (%u nodes met)", node,
			           LC_LINK_SLOTS);
			return NULL;
		}
		/* pairs with the acquire load in find() */
		__atomic_store_n(&s->node, node, __ATOMIC_RELEASE);
	}
	old = __atomic_exchange_n(&s->link, link, __ATOMIC_SEQ_CST);
	/*
	 * A poster that loaded @old counted itself in users first (seq_cst
	 * both sides): wait until it has posted. Posting never blocks.
	 */
	for (unsigned spins = 0; __atomic_load_n(&s->users, __ATOMIC_SEQ_CST) != 0; spins++) {
		if (spins < 256)
			lc_cpu_relax();
		else
			sched_yield();
	}
	return old;
}

struct fab_link *lc_links_hold(struct lc_links *t, uint32_t node, struct lc_link_slot **slot)
{
	struct lc_link_slot *s = find(t, node);

	*slot = s;
	if (s == NULL)
		return NULL;
	/* counted before the load: pairs with lc_links_set() (seq_cst both sides) */
	__atomic_add_fetch(&s->users, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&s->link, __ATOMIC_SEQ_CST);
}

void lc_links_release(struct lc_link_slot *slot)
{
	if (slot != NULL)
		__atomic_sub_fetch(&slot->users, 1, __ATOMIC_RELEASE);
}

int lc_links_has(struct lc_links *t, uint32_t node)
{
	struct lc_link_slot *s = find(t, node);

	return s != NULL && __atomic_load_n(&s->link, __ATOMIC_ACQUIRE) != NULL;
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
