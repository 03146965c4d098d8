/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_impl.h -- objects/-private: the parts of the rpc endpoint (rpc.c:
 * set-up, handlers, the flush poller, server threads; rpc_call.c: the
 * caller; rpc_tree.c: calls to all down a tree; rpc_serve.c: running
 * calls and replying; rpc_frame.c: the decoder; rpc_mem.c: the
 * registration cache; rpc_retry.c: queued one-way calls). Public API
 * only.
 *
 * Transport. One pipe per ordered pair of members that talk carries the
 * calls of the first to the second, made on first use: a caller's first
 * call to a node makes the writer's end (a shadow ring and a ctl, in the
 * per-peer object "<name>.o<node>", unlisted) and sends an OPEN object
 * message with a fresh session and its ctl's reference; the callee makes
 * the reader's end ("<name>.i<node>": ring, ctl and the sources of its
 * replies, unlisted) and answers GRANT with their references; the caller
 * attaches and posts. Nothing is announced per pair: set-up and memory
 * grow with the peers a node talks to, not with the members. A caller
 * whose OPEN goes unanswered (the callee has not made the endpoint yet)
 * sends it again every RPC_OPEN_RETRY_NS while it waits. When a member
 * leaves, its pipes and per-peer objects are freed by the lane that
 * serves it (and the caller's side under wlock); its small record stays,
 * for it if it comes back, or, once RPC_REUSE_AT are made, for another
 * node (reuse(): the record's epoch moves on, so whatever still names
 * the old node sees it gone). Records grow with the nodes alive at once.
 *
 * Results, error replies and "payload pulled" never use a ring: the
 * callee WRITEs them into the caller's reply slot (region "rets"), so a
 * reply never waits for ring room or for the caller's handlers -- the
 * rule that keeps two nodes calling each other from handlers out of
 * deadlock.
 *
 * Regions of the endpoint's object "<name>" (announced: four per node,
 * whatever the members):
 *   "rets"  ret_slots slots of slot_bytes (remotely writable): a slot is
 *           {u64 tag, i32 status, u32 len, u64 sum, u64 0} + result.
 *           The callee writes header and result in one WRITE; lines may
 *           land in any order, so the caller takes it once tag matches
 *           and sum = obj_sum(result, key(tag, status, len)) holds.
 *   "send"  pull_bytes, remotely readable: call_buffer payloads above
 *           inline_max, which the callee READs into "pull".
 *   "pull"  pull_bytes per lane: a stack per lane (nested handlers
 *           free in LIFO order).
 * and per caller, in "<name>.i<caller>": "rsrc", the sources of the
 * reply WRITEs: RSRC_K slots, reused as rpipe's ctl slots are (WRITEs to
 * one node complete in order: with fewer than RSRC_K outstanding, the
 * oldest is free).
 *
 * Reply slots and timeouts: a call that wants a result takes a free slot
 * and a fresh tag. A wait that times out marks the slot ABANDONED: the
 * result is never copied out, and the slot is reused only once a reply
 * with its tag landed there, or its callee left (no WRITE can come
 * anymore) -- so a late reply never lands in a reused slot, and never
 * in the user's buffer.
 *
 * A member that comes back (restarted with its id, or excluded and taken
 * back) is a new peer: its epoch moves on (rpc_peer), the calls of the
 * old one fail with -ECONNRESET, and the pipes start again
 * (loco_rpipe_reset()) with a new OPEN: the out pipe by the first post
 * under wlock, the in pipe, with the reply-slot and send lookups, by the
 * lane that serves the peer. A reply or pull of the old epoch is dropped.
 *
 * Lanes: handlers run on lanes; a caller is served by lane (k mod
 * nlanes), k counting the records made.
 * With cfg.threads == 0 there is one lane, taken (recursive mutex,
 * trylock) by loco_rpc_progress() and by this endpoint's waits; with
 * threads, each server thread holds its lane for good. A thread that
 * holds a lane and waits (a handler calling out) runs that lane's calls
 * meanwhile, one nesting level deeper: each level copies its ring
 * message into its own scratch and releases the ring at once, so the
 * outer handler's data stays valid and the caller's ring drains.
 */
#ifndef LOCO_OBJECTS_RPC_IMPL_H
#define LOCO_OBJECTS_RPC_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <loco.h>
#include <loco/rpc.h>
#include <loco/rpipe.h>

#include "rpc_frame.h"
#include "rpipe_impl.h"

#define SLOT_HDR          32u
#define RSRC_K            8u
#define RPC_TAB           4096u /* peer records of one endpoint (distinct nodes it met) */
#define RPC_REUSE_AT      32u   /* records made before those of nodes that left are reused */
#define RPC_OPEN_RETRY_NS (20ll * 1000000ll)
#define RPC_TREE_FANOUT   4u /* children of a node in call_all's tree */

enum {
	SLOT_FREE = 0,
	SLOT_WAIT = 1,
	SLOT_ABANDONED = 2,
};

enum {
	OUT_NONE = 0,  /* no pipe to it, or the old epoch's */
	OUT_ASKED = 1, /* OPEN sent, no GRANT yet */
	OUT_READY = 2, /* attached */
};

/* object messages (struct layouts are the wire: little-endian hosts, checked on receipt) */
enum {
	MSG_OPEN = 1,  /* caller -> callee: make my ring */
	MSG_GRANT = 2, /* callee -> caller: here it is */
};

struct rpc_open_msg {
	uint32_t kind;
	uint32_t rsv;
	uint64_t sess;
	loco_rref_t ctl;  /* the writer's ctl */
	loco_rref_t ring; /* its shadow, which the reader READs to mend (loco 0.11: not sent) */
};
#define RPC_OPEN_OLD_LEN offsetof(struct rpc_open_msg, ring) /* an OPEN without @ring */

struct rpc_grant_msg {
	uint32_t kind;
	uint32_t rsv;
	uint64_t sess;
	loco_rref_t ring, ctl; /* the reader's */
};

struct slot_hdr {
	uint64_t tag;
	int32_t status;
	uint32_t len;
	uint64_t sum;
	/*
	 * a pulled call's tag once the callee has its payload, WRITTEN ahead
	 * of the reply (loco_rpc_consumed()); the reply writes 0 here. A 0.10
	 * callee never writes it: the caller learns it from the reply.
	 */
	uint64_t consumed;
};

struct rpc_peer {
	uint32_t node; /* atomic: set once made, and by reuse() (a record of a node that left) */
	unsigned lane; /* fixed: the lane that runs its calls */
	/*
	 * atomic, written by the callbacks: even while it is a member (or not
	 * paired yet), odd once it left or died; one more when it comes back
	 * as a new incarnation. A call is tied to the epoch it was posted in.
	 */
	uint32_t epoch;
	/* the caller side (wlock): the out pipe, the batch */
	pthread_mutex_t wlock;
	int out_state;      /* OUT_* */
	uint32_t out_epoch; /* the epoch the out pipe serves */
	uint64_t out_sess;  /* the session asked for */
	int64_t asked_ns;   /* when OPEN was last sent */
	loco_object_t *oobj;
	loco_rpipe_t *out;
	uint8_t *batch;
	size_t blen;
	int64_t bt0;
	/* glock: the GRANT that came (callback), a re-OPEN for the lane, p->in's changes */
	pthread_mutex_t glock;
	int granted;
	uint64_t g_sess;
	loco_rref_t g_ring, g_ctl;
	int reopen;
	uint64_t o_sess;
	loco_rref_t o_ctl;
	loco_rref_t o_ring; /* (len 0: none sent) */
	/* the callee side: in is published with release (glock), then its lane's */
	loco_object_t *iobj;
	loco_rpipe_t *in;
	loco_region_t *rsrc;
	uint64_t in_sess;
	uint32_t in_epoch; /* its lane: the epoch the in pipe and the reply state serve */
	/* the callee side: replies to it */
	pthread_mutex_t rlock;
	loco_ack_key_t *rack;
	uint64_t rn;
	int have_rrets, have_rsend;
	loco_rhandle_t rrets, rsend; /* bound to the caller's link (loco_rop_post()) */
	/* the caller side (wlock): one-way calls queued by loco_rpc_call_retry(), FIFO */
	struct rpc_rq *rq_head, *rq_tail;
	unsigned rq_n; /* atomic: queued here (a hint outside wlock) */
};

struct rpc_lane {
	uintptr_t owner; /* atomic: its holder's lane_me(), 0: free (lane_try()) */
	unsigned holds;  /* the holder's: how many times it holds the lane */
	unsigned depth;
	unsigned next;
	uint8_t *scratch; /* max_depth * rec_max */
	uint8_t *retbuf;  /* max_depth * ret_max */
	size_t pull_base, pull_top;
	loco_ack_key_t *pack;
	pthread_t th;   /* the server thread (joined by destroy) */
	pthread_t self; /* the same, set by the thread itself */
	int started;    /* th was created */
	int running;    /* atomic: self is set */
};

_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "a thread's id fits a lane's owner word");

static inline uintptr_t lane_me(void)
{
	return (uintptr_t)pthread_self();
}

/*
 * lane_try -- hold lane @l, again if this thread holds it already (a
 * handler's nested call helps its own lane): 1, or 0 when another thread
 * holds it. An owner word, not a recursive mutex: a poll that finds the
 * lane taken is one load, a hold one CAS and its release one store
 * (loco_rpc_progress() on an idle endpoint was 13 % trylock and unlock).
 */
static inline int lane_try(struct rpc_lane *l)
{
	uintptr_t me = lane_me(), cur = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);

	if (cur == me) {
		l->holds++;
		return 1;
	}
	if (cur != 0 || !__atomic_compare_exchange_n(&l->owner, &cur, me, 0, __ATOMIC_ACQUIRE,
	                                             __ATOMIC_RELAXED))
		return 0;
	l->holds = 1;
	return 1;
}

/* lane_drop -- the end of a lane_try() that returned 1 */
static inline void lane_drop(struct rpc_lane *l)
{
	if (--l->holds == 0)
		__atomic_store_n(&l->owner, 0, __ATOMIC_RELEASE);
}

struct rpc_slot {
	uint64_t tag;
	uint32_t node;
	uint32_t epoch; /* the callee's, when the call was posted */
	int state;
	int pulled; /* the payload leaves the caller's memory after the call (READ, or WRITE ahead) */
	int oneway; /* an RF_TREEV: no reply comes, its consumed mark is the last word */
};

struct rpc_handler {
	uint32_t id;
	loco_rpc_fn fn;
	void *arg;
};

struct loco_rpc_ep {
	loco_channel_t *ch;
	loco_manager_t *m;
	loco_object_t *obj;
	char name[LOCO_NAME_MAX + 1];
	loco_rpc_cfg_t cfg;
	uint32_t *nodes; /* cfg.nodes, sorted (NULL: every peer holding the endpoint) */
	uint32_t me;
	size_t rec_max, slot_bytes;
	struct rf_limits lim;
	loco_region_t *rets, *send, *pull;
	/* peer records: open-addressed by node (tlock to add), and in order made */
	pthread_mutex_t tlock;
	struct rpc_peer *tab[RPC_TAB];   /* atomic pointers */
	struct rpc_peer *plist[RPC_TAB]; /* atomic pointers */
	unsigned np;                     /* atomic: records made */
	uint64_t st_reused;              /* atomic: records taken over by another node */
	uint64_t st_pull_again;          /* atomic: payload READs done again after a link failed */
	uint64_t st_reopened;            /* atomic: rings to a live callee started again */
	struct rpc_lane lanes[LOCO_RPC_THREADS_MAX];
	unsigned nlanes;
	/* reply slots */
	pthread_mutex_t slock;
	struct rpc_slot *slots;
	uint32_t *freel;
	uint32_t nfree;
	uint64_t tagctr;
	uint64_t tagctr_sess; /* atomic: sessions asked for */
	/* handlers: appended under hlock, nh published with release */
	pthread_mutex_t hlock;
	struct rpc_handler h[LOCO_RPC_HANDLERS_MAX];
	unsigned nh;
	/* regions call_buffer_to may WRITE into (hlock; ndest published with release) */
	struct {
		loco_region_t *r;
		loco_rref_t self;
	} dest[LOCO_RPC_DESTS_MAX];
	unsigned ndest;
	loco_poller_t *poller;
	/* loco_rpc_call_retry(): the queue's entries and its poller (rpc_retry.c) */
	pthread_mutex_t qlock;
	uint8_t *rq_mem;          /* LOCO_RPC_RETRY_MAX entries, made on first use (qlock) */
	struct rpc_rq *rq_free;   /* qlock */
	unsigned rq_count;        /* qlock: entries taken (queued, or being ended) */
	int rq_on;                /* qlock: the retry poller runs (or is being added) */
	loco_poller_t *rq_poller; /* qlock */
	/* loco_rpc_callv(): the caller's buffers kept registered (rpc_mem.c) */
	pthread_mutex_t mlock;
	loco_object_t *mobj; /* "<name>.m", made on first use: their regions' object */
	struct rpc_mreg {
		uintptr_t start, end; /* the pages registered */
		loco_region_t *r;     /* NULL: a free entry */
		unsigned pins;        /* calls being made with it */
		uint32_t slot;        /* the reply slot of the last call that used it */
		uint64_t tag, used;   /* that call's tag; when last used (mclock) */
	} mreg[LOCO_RPC_REG_MAX];     /* mlock */
	uint64_t mclock;              /* mlock */
	int stop;
	loco_rpc_stats_t st; /* updated with atomic adds */
};

#define ST_ADD(ep, f, n) __atomic_fetch_add(&(ep)->st.f, (n), __ATOMIC_RELAXED)
/*
 * ST_LOG -- count one more @f, and say so at @lvl (loco_log()) the 1st,
 * 2nd, 4th... time (loco_log_due()): what the counter alone kept silent.
 */
#define ST_LOG(ep, f, lvl, why)                                                              \
	do {                                                                                 \
		uint64_t n_ = ST_ADD(ep, f, 1) + 1;                                          \
		if (loco_log_due(n_))                                                        \
			loco_log(lvl, "rpc %s: %s (" #f ": %llu so far)", (ep)->name, (why), \
			         (unsigned long long)n_);                                    \
	} while (0)

static inline uint32_t peer_epoch(const struct rpc_peer *p)
{
	return __atomic_load_n(&p->epoch, __ATOMIC_ACQUIRE); /* pairs with the callbacks */
}

static inline int peer_dead(const struct rpc_peer *p)
{
	return peer_epoch(p) & 1;
}

/* rpc_peer_of -- the record of @node, or NULL (none yet). Lock-free. */
struct rpc_peer *rpc_peer_of(loco_rpc_ep_t *ep, uint32_t node);

/* rpc_peer_find -- rpc_peer_of(), and under the table's lock when that found none. */
struct rpc_peer *rpc_peer_find(loco_rpc_ep_t *ep, uint32_t node);

/* rpc_peer_get -- the record of @node, made if there is none: NULL (-ENOMEM, table full). */
struct rpc_peer *rpc_peer_get(loco_rpc_ep_t *ep, uint32_t node);

/* rpc_is_member -- whether @node may call and be called (cfg.nodes, or any other node). */
int rpc_is_member(const loco_rpc_ep_t *ep, uint32_t node);

/* rpc_npeers / rpc_peer_at -- the records made, in order (lock-free). */
static inline unsigned rpc_npeers(loco_rpc_ep_t *ep)
{
	return __atomic_load_n(&ep->np, __ATOMIC_ACQUIRE); /* pairs with rpc_peer_get() */
}

static inline struct rpc_peer *rpc_peer_at(loco_rpc_ep_t *ep, unsigned i)
{
	return __atomic_load_n(&ep->plist[i], __ATOMIC_ACQUIRE);
}

/* rpc_on_msg -- the endpoint's object messages (OPEN, GRANT): on the progress thread. */
void rpc_on_msg(loco_object_t *obj, uint32_t node, const void *msg, size_t len, void *arg);

/* rpc_in_serve -- (@p's lane) a re-OPEN, a comeback or a leave of @p's caller: 0, or -ENOENT (no in pipe). */
int rpc_in_serve(loco_rpc_ep_t *ep, struct rpc_peer *p);

/* rpc_out_free -- (wlock held) free @p's out side. */
void rpc_out_free(struct rpc_peer *p);

/* rpc_reply_sum -- the checksum of a reply's result. */
uint64_t rpc_reply_sum(const void *data, uint32_t len, uint64_t tag, int32_t status);

/* rpc_lane_progress -- run up to @max calls on lane @l (its mutex held): the number run. */
int rpc_lane_progress(loco_rpc_ep_t *ep, struct rpc_lane *l, int max);

/*
 * rpc_help -- one step of a wait: run calls on the lane this thread
 * holds, or on lane 0 when free and the user runs the handlers.
 * Returns the number of calls run.
 */
int rpc_help(loco_rpc_ep_t *ep);

/*
 * rpc_out_fresh -- (wlock held) the out pipe serves @p's current epoch:
 * made on first use (OPEN, GRANT), started again after a comeback (the
 * old epoch's batch is dropped). Returns 0; -EAGAIN (set-up under way:
 * try again), -ECONNRESET while @p is gone, -ENOMEM or the fabric's error.
 */
int rpc_out_fresh(loco_rpc_ep_t *ep, struct rpc_peer *p);

/*
 * rpc_tree_send -- pass a one-way call of @origin (handler @hid, @alen
 * bytes of @args) on to the @n nodes of @sub (u32 ids, unaligned):
 * RPC_TREE_FANOUT groups, each reached through its first member that
 * takes it, which passes it on to the rest of its group. Each call
 * waits up to @timeout_ns (< 0: forever; 0: not at all) for its ring and
 * ring room, and the frame carries that wait on (rf_hdr.ret_cap, ms) for
 * each node that passes it further. Returns 0 or the first error met
 * (the others were still reached).
 */
int rpc_tree_send(loco_rpc_ep_t *ep, uint32_t origin, uint32_t hid, const uint8_t *sub, uint32_t n,
                  const void *args, size_t alen, int64_t timeout_ns);

/* rpc_tree_wait_ns -- the wait an RF_TREE frame carries (ms; UINT32_MAX: forever), in ns */
int64_t rpc_tree_wait_ns(uint32_t ms);

#define RPC_TREEV_GROUPS 64u /* groups a buffer broadcast splits its nodes into, at most */

/* one group of a buffer broadcast: the nodes [lo, hi) of the list; sub[c] holds the call */
struct rpc_treev_group {
	uint32_t lo, hi, c;
	uint32_t slot;
	uint64_t tag;
	int out; /* an RF_TREEV is out to sub[c]: its consumed mark is waited for */
};

/*
 * A buffer broadcast down a tree, as this node sends it: @len bytes,
 * READ by each group's taker through the send region's own
 * registration when they lie in it, else an entry of rpc_mem_get(),
 * pinned until every taker marked them consumed or left.
 */
struct rpc_treev {
	uint32_t origin, hid, ngroups, rkey;
	uint64_t addr; /* where the takers READ the bytes, with @rkey */
	const uint8_t *sub;
	size_t len;
	int64_t timeout_ns, deadline;
	int pin; /* the rpc_mem_get() entry; -1: none (nothing sent, or the bytes in the send region) */
	int sent;  /* calls may be out: rpc_treev_wait() waits for them */
	int first; /* the first error met */
	struct rpc_treev_group g[RPC_TREEV_GROUPS];
};

/*
 * rpc_treev_send -- pass a buffer broadcast of @origin (handler @hid, the
 * @len bytes at @data, which must stay as they are until rpc_treev_wait()
 * returned) on to the @n nodes of @sub, as rpc_tree_send() does a call:
 * in groups, each taken by its first member that can be posted to, which
 * READs the bytes from here and passes them on to the rest of its group.
 * Fills *@tv for rpc_treev_wait(). Returns 0 or an error of the whole
 * (-EMSGSIZE: the list does not fit RPC_TREEV_GROUPS frames; -EBUSY,
 * -EFAULT, -ENOMEM: @data could not be registered); a member's error is
 * kept in tv->first.
 */
int rpc_treev_send(loco_rpc_ep_t *ep, uint32_t origin, uint32_t hid, const uint8_t *sub, uint32_t n,
                   const void *data, size_t len, int64_t timeout_ns, struct rpc_treev *tv);

/*
 * rpc_treev_wait -- until every group's taker marked the bytes consumed
 * (a taker that leaves first hands its group on to the next member) or
 * the broadcast's timeout passed; frees its reply slots and unpins the
 * bytes. Returns 0 or the first error met (-ETIMEDOUT: a taker neither
 * consumed nor left; the bytes may still be READ until it does).
 */
int rpc_treev_wait(loco_rpc_ep_t *ep, struct rpc_treev *tv);

/* rpc_flush_peer -- post @p's batch (wlock held): 0, -EAGAIN (no room), or an error. */
int rpc_flush_peer(loco_rpc_ep_t *ep, struct rpc_peer *p);

/*
 * rpc_post_now -- (wlock held) one-way call @id with @len bytes of @args
 * to @p, taken by the aggregation mode without waiting: 0, -EAGAIN (no
 * ring room, or its set-up under way), or an error.
 */
int rpc_post_now(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t id, const void *args, size_t len);

/* rpc_slot_busy -- whether reply slot @slot still serves the call of @tag (slock) */
int rpc_slot_busy(loco_rpc_ep_t *ep, uint32_t slot, uint64_t tag);

/* ---- the caller's pieces, which the trees (rpc_tree.c) use too (rpc_call.c) ---- */

/* rpc_ep_check -- what every call looks at first: 0, the object's status, -LOCO_EPARTITION */
int rpc_ep_check(loco_rpc_ep_t *ep);

/*
 * a payload in pieces: a tree call's header, its node ids, its arguments;
 * or a callv's argument table and its copied arguments
 */
#define PL_MAX (1 + RF_VEC_MAX)

struct pl_iov {
	const void *p[PL_MAX];
	size_t n[PL_MAX];
	size_t len; /* the sum */
};

static inline struct pl_iov pl_one(const void *p, size_t n)
{
	return (struct pl_iov){.p = {p}, .n = {n}, .len = n};
}

struct pre_write; /* rpc_call.c's: a WRITE that goes before a call's record */

/*
 * rpc_post -- send one frame @h + @pl to @p (member @node), waiting
 * (running calls meanwhile) until *@deadline (either form of obj_util.h:
 * a lazy one is worked out there once it waits);
 * @nowait: -EAGAIN instead; *@epoch (may be NULL): the callee's epoch it
 * went to. With @pre, its WRITE goes first. 0, -EAGAIN, -ETIMEDOUT,
 * -ECONNRESET (the callee left), or the object's or fabric's error.
 */
int rpc_post(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t node, const struct rf_hdr *h,
             const struct pl_iov *pl, int urgent, int nowait, int64_t *deadline, uint32_t *epoch,
             struct pre_write *pre);

/* rpc_slot_get -- a free reply slot for a call to @node (@pulled: its payload is in our memory): 0, -EBUSY */
int rpc_slot_get(loco_rpc_ep_t *ep, uint32_t node, int pulled, uint32_t *slot, uint64_t *tag);

/* rpc_slot_end -- reply slot @s is done with: @state SLOT_FREE (back on the list) or SLOT_ABANDONED */
void rpc_slot_end(loco_rpc_ep_t *ep, uint32_t s, int state);

/* rpc_slot_consumed -- whether slot @s holds @tag's consumed mark (or its reply's tag: it landed) */
int rpc_slot_consumed(loco_rpc_ep_t *ep, uint32_t s, uint64_t tag);

/*
 * rpc_mem_get -- the key of [@ptr, @ptr + @len) registered for READs by
 * callees: an entry of the endpoint's cache that covers it and whose
 * memory is still mapped, or a new registration of its pages (the least
 * recently used entry that no call uses goes). The entry is pinned: its
 * index into *@idx for rpc_mem_done(). 0; -EFAULT (not mapped), -EBUSY
 * (every entry in use by calls in flight), -ENOMEM, the fabric's error.
 */
int rpc_mem_get(loco_rpc_ep_t *ep, const void *ptr, size_t len, uint32_t *rkey, int *idx);

/* rpc_mem_done -- unpin entry @idx; @posted: the call of (@slot, @tag) may READ it until done */
void rpc_mem_done(loco_rpc_ep_t *ep, int idx, int posted, uint32_t slot, uint64_t tag);

/* rpc_mem_fini -- (destroy) unregister every entry, destroy their object */
void rpc_mem_fini(loco_rpc_ep_t *ep);

/*
 * rpc_retry_fini -- (loco_rpc_destroy(), after the server threads) stop
 * the retry poller and end every queued call with -ECANCELED.
 */
void rpc_retry_fini(loco_rpc_ep_t *ep);

#endif /* LOCO_OBJECTS_RPC_IMPL_H */
