/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * links.h -- the node -> data link table that remote operations read.
 *
 * Posting an operation looks its node up without a lock: an open-addressed
 * table of LC_LINK_SLOTS slots keyed by node id, with linear probing. A
 * slot holds a node only while the node has a link: when its link is
 * removed the slot becomes a tombstone (the probe goes on past it) and a
 * later node, or a new incarnation of the same one, takes it again. Node
 * ids may therefore come and go for the manager's whole life; what is
 * bounded is the nodes linked at once (LC_MAX_NODES members and this node,
 * far below LC_LINK_SLOTS, so probe runs stay short).
 *
 * Each slot's key is generation-checked: key = generation << 32 | node,
 * where the generation grows every time the slot is given to a node; a
 * tombstone keeps its generation with node 0, and a never-used slot is 0.
 *
 * Posters share no counter. Each posting thread has a hazard record of its
 * own (made on its first post through this table, reused after the thread
 * is gone): a poster finds the slot whose key names its node, names the
 * slot in its record, then loads the key again: only if it is unchanged
 * (same node, same generation) does it load the link. Whoever replaces or
 * removes a link (the progress thread, or setup) stores the new pointer,
 * or NULL and then the tombstone, makes every thread of the process pass
 * a full barrier (membarrier(2), expedited: the poster's side is then two
 * plain stores), and waits until no record names the slot before the old
 * link may be closed. So either the poster sees the new key or pointer, or
 * the remover sees the poster: a poster never uses a link through a slot
 * that was re-keyed under it (it gets NULL: the node had no link at some
 * moment of its lookup). Without membarrier(2) posters store their record
 * with a full barrier instead. Slots themselves are never freed (the table
 * is part of the manager).
 *
 * A lookup probes at most max_probe + 1 slots (the longest displacement
 * of a node present, kept by the writer), so a lookup of an absent node
 * stays short however many tombstones there are.
 *
 * Thread safety: lc_links_hold() / lc_links_release() and lc_links_has() are MT-safe and
 * lock-free once the thread has its record (its first hold takes the
 * records' lock); a thread holds one slot at a time. lc_links_set() is
 * called by one thread at a time (the progress thread, or init/fini).
 */
#ifndef LOCO_LC_LINKS_H
#define LOCO_LC_LINKS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "fabric/fabric.h"

#define LC_LINK_SLOTS 1024u /* nodes linked at once, at most (members + this node: 257) */

struct lc_link_slot {
	uint64_t key;          /* atomic: generation << 32 | node; node 0: free (0: never used) */
	struct fab_link *link; /* atomic; NULL: no link now */
	uint64_t serial;       /* atomic: which link @link is (lc_links_serial()) */
};

/* lc_link_hazard -- one posting thread's record: the slot it holds now. */
struct lc_link_hazard {
	struct lc_link_slot *held;   /* atomic; written by its thread only; NULL: none */
	pid_t tid;                   /* the thread it is for (records' lock); 0: free */
	struct lc_link_hazard *next; /* every record (records' lock) */
};

struct lc_links {
	struct lc_link_slot slot[LC_LINK_SLOTS];
	uint32_t max_probe; /* atomic: the longest displacement of a node present */
	uint32_t nodes;     /* nodes present (the writer's) */
	uint64_t serials;   /* atomic: links set so far (each link's serial) */
	/* posters' hazard records (links.c) */
	pthread_key_t hz_key; /* a thread's record */
	pthread_mutex_t hz_lock;
	struct lc_link_hazard *hz; /* hz_lock; records are freed only by lc_links_fini() */
	int hz_membarrier;         /* membarrier(2) expedited works: posters need no fence */
};

/*
 * lc_links_init -- an empty table (@t zeroed). 0; -EAGAIN when no
 * pthread key is left (PTHREAD_KEYS_MAX).
 */
int lc_links_init(struct lc_links *t);

/* lc_links_fini -- after every link was removed and no thread posts any more. */
void lc_links_fini(struct lc_links *t);

/*
 * lc_links_set -- @link is @node's link now (NULL: none). Returns the
 * link it replaced, which no poster uses any more (the caller closes it),
 * or NULL. With NULL the node's slot is freed (a tombstone) for any node
 * to take later. -ENOSPC is logged and the table left unchanged when
 * every slot is taken by other nodes (more than LC_LINK_SLOTS linked at
 * once: cannot happen with LC_MAX_NODES members).
 */
struct fab_link *lc_links_set(struct lc_links *t, uint32_t node, struct fab_link *link);

/*
 * lc_links_hold -- @node's link, held for posting (fab_post_now(),
 * fab_post(), as often as needed, never blocking), in *@link, or NULL
 * when there is none. *@hz gets what lc_links_release() gives back, which
 * it must, also after NULL: until then lc_links_set() waits before it
 * hands a replaced link to its closer. 0; -ENOMEM when this thread's
 * first hold found no memory for its record (nothing held).
 */
int lc_links_hold(struct lc_links *t, uint32_t node, struct fab_link **link,
                  struct lc_link_hazard **hz);

/*
 * lc_links_hold_cached -- lc_links_hold() that first tries the slot
 * *@cache names (lc_links_cache(): a slot and its generation, resolved
 * before, e.g. at setup; 0: none): no probe when the node still has it.
 * Otherwise it probes, and *@cache gets what it found (0: the node has no
 * slot). *@cache is read and written with relaxed atomics: threads may
 * share one. A cache from another table is only a wrong guess (the key
 * names the node): the probe follows.
 */
int lc_links_hold_cached(struct lc_links *t, uint32_t node, uint64_t *cache, struct fab_link **link,
                         struct lc_link_hazard **hz);

/* lc_links_cache -- @node's slot, for lc_links_hold_cached() (0: none now). */
uint64_t lc_links_cache(struct lc_links *t, uint32_t node);

/*
 * lc_links_serial -- which link @node has now, in *@out: a number given
 * to each link as lc_links_set() installs it, never 0, never given twice
 * in this table. 0; -ENOTCONN when the node has no link now. A snapshot:
 * the link may be replaced as it returns.
 */
int lc_links_serial(struct lc_links *t, uint32_t node, uint64_t *out);

/* lc_links_release -- the end of an lc_links_hold() (NULL: nothing held). */
static inline void lc_links_release(struct lc_link_hazard *hz)
{
	if (hz != NULL)
		__atomic_store_n(&hz->held, NULL, __ATOMIC_RELEASE);
}

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
