/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * links.h -- the node -> data link table that remote operations read.
 *
 * Posting an operation looks its node up without a lock: an open-addressed
 * table of LC_LINK_SLOTS slots keyed by node id (a slot keeps its node for
 * the manager's life, so a lookup never meets a moved entry). A poster
 * counts itself in the slot's users, then loads the link; whoever
 * replaces or removes a link (the progress thread, or setup) stores the
 * new pointer and then waits until no poster that may have loaded the old
 * one is left, before the old link may be closed. Both sides use
 * sequentially consistent operations, so either the poster sees the new
 * pointer or the remover sees the poster.
 *
 * Thread safety: lc_links_hold() / lc_links_release() and lc_links_get() are MT-safe and
 * lock-free; lc_links_set() / lc_links_take() are called by one thread at
 * a time (the progress thread, or init/fini).
 */
#ifndef LOCO_LC_LINKS_H
#define LOCO_LC_LINKS_H

#include <stdint.h>

#include "fabric/fabric.h"

#define LC_LINK_SLOTS 1024u /* distinct node ids one manager can meet */

struct lc_link_slot {
	uint32_t node;         /* atomic; 0: never used */
	int users;             /* atomic: posters between lc_links_hold() and release */
	struct fab_link *link; /* atomic; NULL: no link now */
};

struct lc_links {
	struct lc_link_slot slot[LC_LINK_SLOTS];
};

/*
 * lc_links_set -- @link is @node's link now (NULL: none). Returns the
 * link it replaced, which no poster uses any more (the caller closes it),
 * or NULL; -ENOSPC is logged and the table left unchanged when every slot
 * is taken by other nodes.
 */
struct fab_link *lc_links_set(struct lc_links *t, uint32_t node, struct fab_link *link);

/*
 * lc_links_hold -- @node's link, held for posting (fab_post_now(),
 * fab_post(), as often as needed, never blocking), or NULL when there is
 * none (-ENOTCONN). *@slot gets what lc_links_release() gives back, which
 * it must, also after NULL: until then lc_links_set() waits before it
 * hands a replaced link to its closer.
 */
struct fab_link *lc_links_hold(struct lc_links *t, uint32_t node, struct lc_link_slot **slot);

/* lc_links_release -- the end of an lc_links_hold() (NULL: nothing held). */
void lc_links_release(struct lc_link_slot *slot);

/* lc_links_has -- whether @node has a link now (a snapshot). */
int lc_links_has(struct lc_links *t, uint32_t node);

/*
 * The private data a connector sends (auth.h says why it proves who it
 * is): LC_LINK_PRIV_LEN bytes, little-endian,
 *   [0] version (LC_LINK_PRIV_VERSION)  [1..3] zero  [4..7] node
 *   [8..15] incarnation  [16..23] counter  [24..39] tag
 * struct lc_link_priv is its decoded form (lc_link_priv_decode(), auth.h).
 */
#define LC_LINK_PRIV_VERSION 1
#define LC_LINK_PRIV_LEN     40
#define LC_LINK_TAG_LEN      16

struct lc_link_priv {
	uint32_t node; /* who the connector says it is */
	uint64_t inc;
	uint64_t counter; /* one-time: grows with every link its node opens */
	uint8_t tag[LC_LINK_TAG_LEN];
};

struct lc_link_proof;

/*
 * lc_link_open -- connect to the data endpoint @fab_addr as @proof says
 * (from, to, the session key; auth.h) with one-time @counter, blocking up
 * to @timeout_ms. Completions of the link carry @proof->to_node.
 * Returns 0 and *@out; fab_connect()'s error (logged).
 */
int lc_link_open(struct fab *fab, const char *fab_addr, const struct lc_link_proof *proof,
                 uint64_t counter, int timeout_ms, struct fab_link **out);

#endif /* LOCO_LC_LINKS_H */
