/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * chan.h -- the insides of channels, objects and regions, shared by
 * channel.c (channels, pairing, object callbacks), chan_announce.c (the
 * announcements a channel sends and receives), chan_peer.c (the peer
 * table), chan_object.c (object sync and messages), region.c (objects and
 * regions) and rop.c (remote operations and fences).
 *
 * The data path reads a channel's peers without a lock, in an
 * open-addressed table of LC_CHAN_PEERS positions keyed by node id. A
 * peer is allocated when a node first sends the channel's CHAN, and
 * retired when it leaves: marked absent, its position turned into a
 * tombstone (lookups probe past it, an insertion reuses it), and the
 * struct kept on the channel's peer graves for two failure bounds before
 * it is freed (lc_peer_reap()), so that a reader that loaded the pointer
 * before the retirement still reads memory that is there, sees it absent
 * and gives up. A node that comes back gets a new struct: a struct's node
 * never changes (no reader meets a re-keyed slot). So a channel meets any
 * number of distinct nodes over its life; LC_CHAN_PEERS bounds those
 * present at once.
 *
 * Each peer holds the remote references of our announced regions,
 * resolved by name, indexed by the local region's index in the channel,
 * in pages of LC_RR_PAGE entries allocated when first written (m->lock)
 * and published with a release store; a page lives as long as its peer.
 * Each reference is behind a sequence lock: writers (holding m->lock)
 * bump the sequence to odd, write, bump it to even; readers retry while
 * it is odd or changed.
 */
#ifndef LOCO_LC_CHAN_H
#define LOCO_LC_CHAN_H

#include <stdint.h>

#include "manager.h"
#include "wake.h"

#define LC_CHAN_PEERS  512u /* nodes a channel can pair with at once */
#define LC_CHAN_REGAIN 256u /* peers a channel waits for after a rejoin */
#define LC_RR_PAGE     64u  /* remote references in one page of a peer's table */
#define LC_RR_PAGES    (LC_CHAN_ENTRIES_MAX / LC_RR_PAGE)
#define LC_IDX_NONE    UINT32_MAX /* an unlisted region's index: it has no reference */

/* A remote region as the data path reads it (sequence-locked; all atomic). */
struct lc_rref {
	uint64_t seq; /* odd while written */
	uint64_t rkey;
	uint64_t addr;
	uint64_t len; /* 0: not resolved */
};

struct lc_peer {
	uint32_t node;      /* fixed for the struct's life */
	int present;        /* atomic */
	uint32_t fence_gen; /* atomic: the channel's fence this peer's operations honour */
	uint32_t nregions;  /* m->lock: what the peer announced */
	struct lc_region_info *regions;
	/* m->lock: an announcement arriving in pages (ctrl_wire.h), not acted on until whole */
	struct lc_region_info *pend;
	uint32_t npend, pend_cap, pend_total;
	uint64_t due_ns;      /* retired: freed after this (lc_peer_reap()) */
	struct lc_peer *next; /* on the channel's peer graves */
	struct lc_rref
	    *rr[LC_RR_PAGES]; /* atomic pointers: pages by local region index / LC_RR_PAGE */
};

struct loco_channel {
	loco_manager_t *m;
	loco_channel_t *parent;
	char name[LOCO_NAME_MAX + 1]; /* full name */
	uint64_t id;                  /* unique in the manager: queued callbacks name it */
	uint32_t nodes;
	int joined; /* atomic: written under m->lock, read lock-free by loco_region_remote() */
	int nchildren;
	uint32_t fence_gen;     /* atomic: bumped by loco_channel_fence() */
	uint32_t fence_pending; /* atomic: peers whose next operation must carry the fence */
	uint64_t region_used[LC_RR_PAGES]; /* local region indexes taken (m->lock) */
	uint32_t nentries;   /* m->lock: listed regions and parameters of its objects (announced) */
	uint32_t cb_pending; /* m->lock: callbacks queued or running for this channel */
	/*
	 * After this node was excluded and rejoined: the peers it had, which
	 * the channel must pair with again before it acts (atomic entries, 0:
	 * none; loco_channel_partitioned()), until regain_ns (0: not rejoined).
	 */
	uint32_t regain[LC_CHAN_REGAIN];
	uint64_t regain_ns; /* atomic */
	struct loco_object *objects;
	struct lc_peer *peer[LC_CHAN_PEERS]; /* atomic pointers; open-addressed by node */
	/* atomic bits: position i holds a peer (not free, not a tombstone): lc_peer_next() */
	uint64_t peer_used[LC_CHAN_PEERS / 64];
	struct lc_peer *peer_graves; /* m->lock: retired peers, freed when due */
	loco_channel_t *next;
};

/* A parameter an object agreed on (loco_object_agree()): announced as a CHAN entry. */
struct lc_param {
	char key[LOCO_NAME_MAX + 1];
	uint64_t value;
};

struct loco_object {
	loco_channel_t *ch;
	char name[LOCO_NAME_MAX + 1];
	uint64_t seq; /* when it was created: queued callbacks older than it skip it */
	struct loco_object_ops ops;
	void *arg;
	struct loco_region *regions;
	int bad; /* atomic: LOCO_EMISMATCH once a peer disagreed on a parameter (for good) */
	unsigned nparams; /* m->lock */
	struct lc_param params[LOCO_AGREE_MAX];
	uint64_t logged[16]; /* m->lock: mismatches logged (peer and entry hashed): once each */
	loco_object_msg_fn msg_fn; /* m->lock: loco_object_on_msg() */
	void *msg_arg;
	struct loco_object *next;
};

struct loco_region {
	loco_object_t *obj;
	char full[LOCO_NAME_MAX + 1]; /* "object/region" */
	uint32_t idx; /* index in the channel (its lc_peer reference); LC_IDX_NONE: unlisted */
	void *ptr;
	size_t len;
	unsigned access;
	struct fab_mr *mr;
	int foreign;     /* the caller's memory (loco_region_register()): never freed here */
	uint64_t due_ns; /* destroyed: deregistered and freed after this (region.c, graves) */
	struct loco_region *next;
};

/* lc_peer_get -- @node's peer slot in @ch, or NULL (lock-free). */
struct lc_peer *lc_peer_get(loco_channel_t *ch, uint32_t node);

/* lc_peer_at -- the peer at position @i of @ch's table, or NULL (free or tombstone). Lock-free. */
struct lc_peer *lc_peer_at(loco_channel_t *ch, uint32_t i);

/*
 * lc_peer_next -- the first peer at a position >= *@pos of @ch's table,
 * with *@pos moved past it; NULL when there is none. Walks the bitmap of
 * taken positions (a data-path walk costs the peers, not the table's 512
 * positions). Lock-free: a peer paired or retired meanwhile may be seen
 * or not, as with lc_peer_at().
 *
 *   for (uint32_t i = 0; (p = lc_peer_next(ch, &i)) != NULL;)
 */
struct lc_peer *lc_peer_next(loco_channel_t *ch, uint32_t *pos);

/* lc_peer_rref -- @p's reference for local index @idx, or NULL (never written). Lock-free. */
struct lc_rref *lc_peer_rref(struct lc_peer *p, uint32_t idx);

/* lc_peer_rref_set -- write @p's reference for @idx (its page made when needed). m->lock. */
void lc_peer_rref_set(struct lc_peer *p, uint32_t idx, uint32_t rkey, uint64_t addr, uint64_t len);

/* lc_peer_reap -- free @ch's retired peers that are due (all: @all). m->lock held. */
void lc_peer_reap(loco_manager_t *m, loco_channel_t *ch, int all);

/* lc_peer_slot -- @node's slot in @ch, taken if it has none: NULL when the table is full. m->lock. */
struct lc_peer *lc_peer_slot(loco_manager_t *m, loco_channel_t *ch, uint32_t node);

/* lc_peer_retire -- @p left: its position may serve another node, its struct goes later. m->lock. */
void lc_peer_retire(loco_manager_t *m, loco_channel_t *ch, struct lc_peer *p);

/* lc_peer_free -- free @p and what it holds (a retired peer that is due, or the channel's). */
void lc_peer_free(struct lc_peer *p);

/* lc_param_name -- "object/key" of @o's parameter @pm into @out (LC_NAME_MAX + 1 bytes). */
void lc_param_name(const loco_object_t *o, const struct lc_param *pm, char *out);

/* lc_peer_entry_lower -- the first of @p's sorted entries not before (@key, @param). m->lock. */
uint32_t lc_peer_entry_lower(const struct lc_peer *p, const char *key, int param);

/* lc_peer_entry -- @p's announced region (or parameter: @param) named @key, or NULL. m->lock. */
const struct lc_region_info *lc_peer_entry(const struct lc_peer *p, const char *key, int param);

/* lc_peer_fence_settle -- @p owes no fence any more (it left, or paired just now). */
void lc_peer_fence_settle(loco_channel_t *ch, struct lc_peer *p);

/* lc_rref_read / lc_rref_write -- a sequence-locked remote reference (writers: m->lock). */
int lc_rref_read(const struct lc_rref *r, uint32_t node, loco_rref_t *out);
void lc_rref_write(struct lc_rref *r, uint32_t rkey, uint64_t addr, uint64_t len);

/* lc_rref_resolve -- set @p's reference for local region @r from what @p announced. m->lock. */
void lc_rref_resolve(struct lc_peer *p, const struct loco_region *r);

/* lc_chan_announce -- CHAN to @to, or every up member (only the peers: @peers_only). m->lock. */
void lc_chan_announce(loco_manager_t *m, loco_channel_t *ch, struct lc_member *to, uint32_t flags,
                      int peers_only);

/* lc_chan_entries -- the CHAN entries @ch announces: listed regions and parameters. m->lock. */
unsigned lc_chan_entries(const loco_channel_t *ch);

/*
 * lc_chan_agree_check -- compare @p's announced entries with @ch's objects
 * (only @only when not NULL): a parameter of another value or a region of
 * another length marks the object bad and is logged. m->lock held.
 */
void lc_chan_agree_check(loco_channel_t *ch, struct lc_peer *p, loco_object_t *only);

/* lc_chan_peer_page -- keep a page of @p's announcement: 1 once whole (in p->pend). m->lock. */
int lc_chan_peer_page(loco_channel_t *ch, struct lc_peer *p, const struct lc_msg *msg);

/* lc_chan_peer_regions -- act on @p's whole announcement: keep, check, resolve it. m->lock. */
void lc_chan_peer_regions(loco_channel_t *ch, struct lc_peer *p);

/* lc_chan_object_gone -- @obj was unlinked: wait out a callback of it running now. m->lock. */
void lc_chan_object_gone(loco_manager_t *m, loco_object_t *obj);

#endif /* LOCO_LC_CHAN_H */
