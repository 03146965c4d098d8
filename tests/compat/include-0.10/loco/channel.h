/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/channel.h -- channels, and the object-author API.
 *
 * A channel has a full name ("kv/shard/sst": parent names joined by '/'),
 * an expected node count, and child objects. Each object owns registered
 * memory regions. loco_channel_join() pairs this node with every node
 * holding a channel of the same full name and exchanges region
 * descriptors; later joins and leaves reach the objects' callbacks.
 *
 * Everything a stock object needs is here: objects/ includes only public
 * headers. A user can write an object the same way.
 *
 * Thread safety: MT-safe. Object callbacks run on the manager's progress
 * thread (never on an application thread), without the manager's lock;
 * they may call any function here, but must not wait: no
 * loco_channel_join(), loco_channel_destroy(), nor loco_ack_wait() with a
 * timeout. Remote operations and loco_region_remote() take no lock.
 */
#ifndef LOCO_CHANNEL_H
#define LOCO_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include <loco/ack.h>
#include <loco/manager.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_channel loco_channel_t;
typedef struct loco_object loco_object_t;
typedef struct loco_region loco_region_t;

#define LOCO_NAME_MAX 128 /* bytes of a full channel name or object/region name */

/* Remote access rights of a region (local access is always allowed), and how it is made known. */
enum loco_access {
	LOCO_ACCESS_READ = 1 << 0,
	LOCO_ACCESS_WRITE = 1 << 1,
	LOCO_ACCESS_ATOMIC = 1 << 2,
	/*
	 * Not announced: the channel's peers do not learn of the region
	 * (loco_region_remote() on them gives -ENOENT) and it takes no
	 * announced entry. Its owner gives its reference (loco_region_rref())
	 * to the peers it chooses, e.g. in an object message: per-peer state
	 * made on first use, without telling every member. Appeared in loco 0.10.
	 */
	LOCO_ACCESS_UNLISTED = 1 << 3,
};

/* A remote memory reference: usable by reads, writes and atomics. */
typedef struct loco_rref {
	uint32_t node;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
} loco_rref_t;

/*
 * loco_channel_create -- a channel @name under @parent (NULL: top level),
 * expecting @nodes nodes (this one included; >= 1). Not yet announced.
 * Returns 0 and sets *@out; -EINVAL (bad name: empty, '/' inside, too
 * long), -EEXIST (this node has that full name already), -ENOMEM.
 */
int loco_channel_create(loco_manager_t *m, loco_channel_t *parent, const char *name, uint32_t nodes,
                        loco_channel_t **out);

/*
 * loco_channel_join -- announce the channel and its regions to the
 * cluster, pair with every node that holds the same full name, and wait
 * until @nodes - 1 peers are paired or @timeout_ns passes (< 0: forever).
 * Objects of a channel never joined fail with -LOCO_ENOTJOINED. Objects
 * made after the join are announced as they are made (see
 * loco_object_sync()). Returns 0; -ETIMEDOUT (the channel stays joined:
 * late peers still pair and reach the callbacks; the log says how many
 * paired, which members did not, and how many expected nodes are not
 * members at all); -LOCO_EPARTITION; -EINVAL.
 */
int loco_channel_join(loco_channel_t *ch, int64_t timeout_ns);

/*
 * loco_channel_destroy -- leave and free the channel. Returns 0, or -EBUSY
 * while objects or child channels remain in it (nothing is changed).
 */
int loco_channel_destroy(loco_channel_t *ch);

/*
 * loco_channel_fence -- order the channel's later operations after its
 * earlier ones: at each peer, the next operation of @ch starts only after
 * every earlier operation of this node to that peer completed (READs and
 * atomics included, whose results a later WRITE may send on). Without a
 * fence, requests to one node execute in order, but a WRITE posted after a
 * READ may read its local source before the READ's data has landed.
 * Returns 0; -EINVAL.
 */
int loco_channel_fence(loco_channel_t *ch);

/* loco_channel_name -- the full name. */
const char *loco_channel_name(const loco_channel_t *ch);

/* loco_channel_manager -- the manager that owns @ch. */
loco_manager_t *loco_channel_manager(const loco_channel_t *ch);

/*
 * loco_channel_partitioned -- loco_manager_partitioned() of @ch's manager:
 * 1 when the node cannot reach a majority of its view (an object's waits
 * then return -LOCO_EPARTITION), else 0. Lock-free. See loco_channel(3).
 */
int loco_channel_partitioned(loco_channel_t *ch);

/*
 * loco_channel_peers -- the ids of the nodes paired in @ch (this node
 * excluded), ascending; up to @max written; returns the peer count.
 */
int loco_channel_peers(loco_channel_t *ch, uint32_t *ids, size_t max);

/*
 * Callbacks of an object: a peer paired in the channel, or left it.
 * @view: the number of the membership view that made the change (views
 * grow by one with every join, leave or failure the cluster agreed on;
 * a pairing made within one view carries that view's number).
 */
struct loco_object_ops {
	void (*peer_join)(loco_object_t *obj, uint32_t node, uint64_t view, void *arg);
	void (*peer_leave)(loco_object_t *obj, uint32_t node, uint64_t view, void *arg);
};

/*
 * loco_object_create -- register object @name (unique in the channel) in
 * @ch with callbacks @ops (may be NULL) and their @arg.
 * Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOMEM.
 */
int loco_object_create(loco_channel_t *ch, const char *name, const struct loco_object_ops *ops,
                       void *arg, loco_object_t **out);

/*
 * loco_object_destroy -- remove the object and tell the channel's peers;
 * its regions are deregistered and freed two failure bounds later (a
 * peer's WRITE that crossed the news lands in them, harmlessly; at most
 * 64 regions and 16 MiB are kept, the oldest go first). NULL-safe.
 */
void loco_object_destroy(loco_object_t *obj);

/* loco_object_channel -- the channel of @obj. */
loco_channel_t *loco_object_channel(const loco_object_t *obj);

/*
 * loco_object_status -- whether @obj may be used: 0; -LOCO_ENOTJOINED
 * (its channel was never joined: loco_channel_join()); -LOCO_EMISMATCH (a
 * peer holds the object with another value of a parameter agreed with
 * loco_object_agree(), or a region of another length: the pairing of the
 * object failed, for good, and the log names the object, both values and
 * the peer); -EINVAL (NULL). Lock-free: objects call it on their data
 * path. loco_region_remote() returns the same errors. Appeared in loco 0.4.
 */
int loco_object_status(const loco_object_t *obj);

#define LOCO_AGREE_MAX 8 /* parameters one object can agree on */

/*
 * loco_object_agree -- declare that every node holding @obj must give
 * parameter @key (a name as a region's: no '/', and "object/key" within
 * LOCO_NAME_MAX) the same @value: a row size, a host's node id. The
 * parameter travels with the channel's announcements and is checked when
 * peers pair, on both sides; regions of the object are checked the same
 * way by length, without a call. A mismatch is logged on both nodes and
 * makes the object's calls there return -LOCO_EMISMATCH
 * (loco_object_status()). Call it right after loco_object_create(),
 * before the object's regions. Returns 0 (also when @key already has
 * @value); -EEXIST (@key has another value), -ENOSPC (LOCO_AGREE_MAX
 * parameters, or the channel announces 16384 entries already, listed
 * regions and parameters together), -EINVAL. Appeared in loco 0.4.
 */
int loco_object_agree(loco_object_t *obj, const char *key, uint64_t value);

/*
 * loco_object_sync -- wait until every peer paired in @obj's channel holds
 * the object too: it announced every parameter of @obj and one of its
 * regions at least (the first an object makes: the one pushed to; some
 * regions are one node's only), so a push right after this returns
 * reaches each of them. An object made
 * after loco_channel_join() needs this before its first push (a peer that
 * has not made it yet has nowhere to take it). Returns the number of
 * those peers (>= 0); -ETIMEDOUT after @timeout_ns (< 0: forever; the log
 * names the peers that miss it); -LOCO_ENOTJOINED, -LOCO_EMISMATCH,
 * -LOCO_EPARTITION; -EINVAL. Appeared in loco 0.4.
 */
int loco_object_sync(loco_object_t *obj, int64_t timeout_ns);

/*
 * Object messages: a short message from an object to the object of the
 * same name, in the channel of the same full name, on another member,
 * over the control plane (not the fabric: for set-up, not for data).
 * They let an object make per-peer state on first use and hand over
 * unlisted regions, instead of announcing per-pair regions to every
 * member.
 *
 * Delivery: on the receiver's progress thread, under the rules of the
 * object callbacks, to the function set by loco_object_on_msg(); in the
 * order sent between one pair of objects; at most once. A message is
 * dropped (the log says so, at debug level) when the receiver has
 * no such object or no function set, when the sender is not a member of
 * the receiver's view any more, or when either node leaves or fails.
 * An object's peer_join callback for a node comes before any message
 * from that node's object; a peer_leave callback for a node comes after
 * the last message delivered from the incarnation that left.
 */
#define LOCO_OBJECT_MSG_MAX 1024u /* bytes of one object message */

typedef void (*loco_object_msg_fn)(loco_object_t *obj, uint32_t node, const void *msg, size_t len,
                                   void *arg);

/*
 * loco_object_on_msg -- deliver @obj's messages to @fn(@obj, sender,
 * bytes, length, @arg) from now on (NULL: drop them). Set it before
 * loco_channel_join() or loco_object_sync() so that no message is lost.
 * Returns 0; -EINVAL. Appeared in loco 0.10.
 */
int loco_object_on_msg(loco_object_t *obj, loco_object_msg_fn fn, void *arg);

/*
 * loco_object_send -- send the @len bytes at @msg (copied) to @obj's
 * namesake on member @node. Never waits: it may be called from
 * callbacks and pollers. Returns 0 when queued; -ENOTCONN (@node is not
 * a paired peer of the channel: not a member, left, or has not paired
 * yet), -EMSGSIZE (@len > LOCO_OBJECT_MSG_MAX), -LOCO_ENOTJOINED,
 * -ENOBUFS (the control connection to @node is that far behind),
 * -EINVAL. Appeared in loco 0.10.
 */
int loco_object_send(loco_object_t *obj, uint32_t node, const void *msg, size_t len);

/*
 * loco_region_create -- @len bytes of zeroed registered memory for @obj,
 * remotely accessible as @access says, announced to the channel's peers
 * under @name (unless LOCO_ACCESS_UNLISTED). Registration happens here,
 * never on the data path. A channel announces any number of regions and
 * parameters, up to 16384 (a bound against hostile peers, which size
 * their buffers by it, and what a control connection's queue holds at
 * once). Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOSPC (a listed
 * region, and the channel announces 16384 entries already), -ENOMEM, or
 * the fabric's error.
 */
int loco_region_create(loco_object_t *obj, const char *name, size_t len, unsigned access,
                       loco_region_t **out);

/*
 * loco_region_rref -- this node's own reference to @r (node: this node),
 * as a peer passes it to the remote operations: for handing an unlisted
 * region (LOCO_ACCESS_UNLISTED) to a chosen peer. Writes *@out; returns
 * 0, -EINVAL (NULL). Appeared in loco 0.10.
 */
int loco_region_rref(const loco_region_t *r, loco_rref_t *out);

/* loco_region_ptr / loco_region_len -- the local memory of @r. */
void *loco_region_ptr(const loco_region_t *r);
size_t loco_region_len(const loco_region_t *r);

/*
 * loco_region_remote -- the region of the same object and name on peer
 * @node. Returns 0 and sets *@out; -ENOENT when that peer has none (yet);
 * -LOCO_ENOTJOINED and -LOCO_EMISMATCH as loco_object_status() (also for
 * this node's own copy).
 */
int loco_region_remote(const loco_region_t *r, uint32_t node, loco_rref_t *out);

/*
 * Remote operations. The local side is [@loff, @loff + @len) of @local
 * (which must be registered memory of this node); the remote side starts
 * at @roff in @remote. With @ack, the operation is attached to it and
 * loco_ack_wait(ack) reports its completion; without, it is fire-and-forget
 * and errors are only logged. Requests to one node execute there in order.
 * Return 0 when posted; -EINVAL (out of bounds, misaligned atomic),
 * -ENOTCONN (no link to that node), -EAGAIN (queue or ack key full).
 */
int loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
               size_t len, loco_ack_key_t *ack);
int loco_read(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff, size_t len,
              loco_ack_key_t *ack);

/*
 * loco_write_inline -- loco_write() whose payload is copied when the call
 * returns (as IBV_SEND_INLINE): [@loff, @loff + @len) may change at once,
 * before the completion. Returns as loco_write(); -EMSGSIZE when @len
 * exceeds what the fabric of the link to that node copies at post (256
 * bytes on tcp and shm; on verbs what the device takes inline), and then
 * nothing was posted: use loco_write() from a buffer that stays.
 * Appeared in loco 0.7.
 */
int loco_write_inline(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                      size_t len, loco_ack_key_t *ack);

/*
 * loco_write_acks -- loco_write() whose completion reaches every key of
 * @acks[0 .. @nacks) (at most LOCO_OP_ACKS_MAX; NULL entries are
 * skipped): e.g. a key that guards the source buffer's reuse and the
 * caller's key, with one WRITE. Returns as loco_write(); -EINVAL also for
 * @nacks > LOCO_OP_ACKS_MAX or keys of another manager.
 */
#define LOCO_OP_ACKS_MAX 2
int loco_write_acks(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                    size_t len, loco_ack_key_t *const *acks, unsigned nacks);

/*
 * loco_cas / loco_faa -- 8-byte atomics on an 8-byte aligned remote word;
 * the old value lands at @loff of @local (8-byte aligned).
 */
int loco_cas(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t compare, uint64_t swap, loco_ack_key_t *ack);
int loco_faa(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t add, loco_ack_key_t *ack);

/*
 * Pollers: a function the manager's progress thread calls on every turn
 * of its loop, for objects that watch memory which remote WRITEs change
 * (such a WRITE gives the target no event). While a poller is active the
 * progress thread, which otherwise blocks when idle, wakes at least every
 * @period_ns (the smallest period among the active pollers), so @fn sees
 * a change within about one period, sooner when the node is busy. It
 * sleeps between wakes: it never spins for a poller.
 *
 * @fn returns one of enum loco_poller_ret. It runs on the progress
 * thread, never on two threads at once, under the rules of the object
 * callbacks (see Thread safety above: short, no waiting) but without the
 * manager's lock. It may add and remove pollers, itself included.
 *
 * Thread safety: MT-safe. See loco_object(3).
 */
typedef struct loco_poller loco_poller_t;

enum loco_poller_ret {
	LOCO_POLLER_IDLE = 0, /* nothing done: the progress thread may sleep (one period at most) */
	LOCO_POLLER_BUSY = 1, /* work done: the progress thread turns again without sleeping */
	LOCO_POLLER_DONE =
	    2, /* finished: never called again; loco_poller_remove() still frees it */
};

#define LOCO_POLLER_PERIOD_NS     1000000ll /* period 0 means this: 1 ms */
#define LOCO_POLLER_PERIOD_MIN_NS 100000ll  /* shorter periods are raised to 100 us */

/*
 * loco_poller_add -- have the progress thread of @m call @fn(@arg) on every
 * turn, and turn at least every @period_ns (0: LOCO_POLLER_PERIOD_NS) while
 * @fn is active. Everything is allocated here: calling it allocates nothing.
 * The first call may come before this returns. Returns 0 and sets *@out;
 * -EINVAL (NULL @m, @fn or @out, @period_ns < 0), -ENOMEM.
 */
int loco_poller_add(loco_manager_t *m, int (*fn)(void *arg), void *arg, int64_t period_ns,
                    loco_poller_t **out);

/*
 * loco_poller_remove -- stop calling @p's function and free @p. From any
 * thread but @p's own function, it waits for a call in progress to
 * return: afterwards the function is neither running nor called again.
 * From inside a poller's function (its own included) it does not wait: a
 * function that removes itself finishes its current call and is not
 * called again. Returns 0; -EINVAL (NULL).
 */
int loco_poller_remove(loco_poller_t *p);

/*
 * Waiters: how an object's wait loop waits, by the manager's policy
 * (enum loco_wait_policy, LOCO_WAIT). A loop that waits for a condition:
 *
 *	loco_waiter_t w;
 *	loco_waiter_init(&w, m);        (or loco_waiter_reset() to reuse it)
 *	while (!condition())
 *		loco_waiter_pause(&w);  (check deadlines between pauses)
 *
 * Each pause is one step of the policy: a spin, a yield, a sleep (at most
 * 1 ms) or a block on the manager's event count, which the completion
 * path and the progress thread signal; loco_waiter_wake() signals it too
 * (e.g. from a poller that saw the memory it watches change). Init and
 * reset take a snapshot of that count: call them before the first check
 * of the condition, and an event after it ends the next block at once.
 *
 * Thread safety: a waiter belongs to one thread; loco_waiter_wake() is
 * MT-safe and lock-free. See loco_object(3). Appeared in loco 0.4.
 */
typedef struct loco_waiter {
	void *priv;       /* private: the manager's wait state */
	int policy;       /* enum loco_wait_policy of the manager (never 0) */
	uint32_t seq;     /* private: the event count seen */
	uint32_t pauses;  /* pauses since init or reset */
	uint64_t t0_ns;   /* private: when spinning started */
	int64_t sleep_ns; /* private: the next sleep */
} loco_waiter_t;

/* loco_waiter_init -- a waiter for @m's policy (@m NULL: sleep), reset. */
void loco_waiter_init(loco_waiter_t *w, loco_manager_t *m);

/* loco_waiter_reset -- start a new wait: spin first again, snapshot the event count. */
void loco_waiter_reset(loco_waiter_t *w);

/* loco_waiter_pause -- one step of the policy: spin, yield, sleep or block (<= 1 ms). */
void loco_waiter_pause(loco_waiter_t *w);

/* loco_waiter_policy -- @w's policy (enum loco_wait_policy); -EINVAL for NULL. */
int loco_waiter_policy(const loco_waiter_t *w);

/* loco_waiter_wake -- wake @m's waiters blocked in loco_waiter_pause() (block policy). */
void loco_waiter_wake(loco_manager_t *m);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_CHANNEL_H */
