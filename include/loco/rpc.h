/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/rpc.h -- remote invocation between the nodes of a channel, on
 * one-sided WRITEs (Seriema's call / call_return / call_buffer). Calls
 * travel through one ring per ordered pair of members that talk (caller
 * -> callee), made on the first call and freed when either leaves;
 * results and error replies are written straight back into registered
 * reply slots of the caller's endpoint (never through a ring, so a reply
 * never waits for the callee's handler queue); large call_buffer
 * payloads are pulled by the callee with an RDMA READ from the caller's
 * registered memory. Small calls may be aggregated ("trad" or
 * "overflow"). See loco_rpc(3).
 *
 * Members: the nodes of cfg.nodes, or, without a list, every node of the
 * channel that made the endpoint (clients and servers alike; there is no
 * ceiling below the core's members). Every member calls loco_rpc_create()
 * with the same name, member list and sizes (checked when the peers
 * pair). What a node holds per peer -- a ring and its control words for
 * each node it calls, a ring and reply sources for each node that calls
 * it -- is made on first use, so a node pays for the peers it talks to,
 * not for the members.
 *
 * Handlers are registered by
 * name on the nodes that serve them, in any order: a handler's id is a
 * hash of its name (loco_rpc_id()), the same on every node, and a call
 * to an id the callee does not know gets an error reply (-ENOENT).
 *
 * Who runs handlers: with cfg.threads == 0, the threads that call
 * loco_rpc_progress(), and any thread waiting inside this endpoint's
 * calls (for ring room or a result) -- one thread at a time, FIFO per
 * caller; with cfg.threads > 0, that many server threads the endpoint
 * starts (each serves a fixed share of the callers: FIFO per caller).
 * A handler may call any endpoint, this one included: while it waits it
 * runs the calls that reach its thread (nested up to cfg.max_depth), and
 * replies never wait for a handler: two nodes calling each other from
 * inside handlers do not deadlock.
 *
 * Thread safety: MT-safe, except loco_rpc_destroy() (no call may be in
 * progress). A ticket belongs to one thread at a time.
 */
#ifndef LOCO_RPC_H
#define LOCO_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_rpc_ep loco_rpc_ep_t;

#define LOCO_RPC_HANDLERS_MAX 64u /* handlers registered on one endpoint */
#define LOCO_RPC_THREADS_MAX  8u  /* server threads */
#define LOCO_RPC_DEPTH_MAX    8u  /* nesting of handlers waiting inside handlers */
#define LOCO_RPC_DESTS_MAX    8u  /* regions call_buffer_to may write into, per endpoint */

/* Aggregation of small calls on the caller (cfg.agg). */
enum loco_rpc_agg {
	LOCO_RPC_AGG_NONE = 0,     /* every call is one ring message */
	LOCO_RPC_AGG_TRAD = 1,     /* batch; flush at agg_bytes, loco_rpc_flush(), agg_ns, a wait */
	LOCO_RPC_AGG_OVERFLOW = 2, /* batch only while the ring is full; flush as room comes */
};

/* An endpoint's configuration: 0 in a size field means its default. */
typedef struct loco_rpc_cfg {
	const uint32_t *nodes; /* the members (this node among them, >= 2), or NULL: see above */
	uint32_t nnodes;       /* 0 with NULL nodes; at most 2048 */
	size_t ring_bytes;     /* each caller -> callee ring (64 KiB); agreed */
	size_t inline_max;  /* largest inline payload (1 KiB); bigger call_buffer ones are pulled */
	size_t ret_max;     /* largest result (256 B); agreed */
	uint32_t ret_slots; /* reply slots: calls waiting for a result at once (64); agreed */
	size_t pull_bytes;  /* largest pulled payload (1 MiB), per server lane; agreed */
	int agg;            /* enum loco_rpc_agg (this node's calls only) */
	size_t agg_bytes;   /* aggregation batch size and mark (4 KiB); agreed */
	int64_t agg_ns;     /* trad: flush a batch older than this (100 us, >= 100 us) */
	unsigned threads;   /* server threads (0: the user runs loco_rpc_progress()) */
	unsigned max_depth; /* handler nesting on one thread (4), <= LOCO_RPC_DEPTH_MAX */
} loco_rpc_cfg_t;

/* A call as its handler sees it (valid until the handler returns). */
typedef struct loco_rpc_msg {
	loco_rpc_ep_t *ep;
	uint32_t caller; /* node id */
	uint32_t id;     /* handler id */
	const void *data;
	size_t len;
} loco_rpc_msg_t;

/*
 * A handler: the call @msg; the result goes into @ret (@ret_cap bytes,
 * 0 for a one-way call), its length into *@ret_len (0 at entry). Returns
 * the status the caller's loco_rpc_wait() gives (use >= 0 or -errno).
 */
typedef int (*loco_rpc_fn)(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t ret_cap,
                           size_t *ret_len);

/* A call waiting for its result: filled by call_return/call_buffer; fields private. */
typedef struct loco_rpc_ticket {
	uint64_t tag;
	uint32_t slot;
	uint32_t node;
	void *ret;
	size_t ret_cap;
} loco_rpc_ticket_t;

/* What the endpoint did (loco_rpc_stats()). */
typedef struct loco_rpc_stats {
	uint64_t calls;    /* calls sent (every form) */
	uint64_t records;  /* ring messages written (a batch is one) */
	uint64_t full;     /* times a caller found its ring full and waited or batched */
	uint64_t handled;  /* handlers run here */
	uint64_t unknown;  /* calls here to an id with no handler (error reply when awaited) */
	uint64_t pulls;    /* payloads pulled with an RDMA READ */
	uint64_t dropped;  /* calls here from a member that left or died, or pulls that failed */
	uint64_t bad;      /* ring messages or frames the decoder refused */
	uint64_t replies;  /* replies written back */
	uint64_t timeouts; /* waits that timed out (their slot is kept until the reply lands) */
	/* now (not counters): the per-peer state made on first use */
	uint64_t pipes_out; /* nodes this node has a ring to (it called them) */
	uint64_t pipes_in;  /* nodes with a ring here (they called this node) */
	uint64_t peers;     /* records of nodes met (kept for them, or reused for others) */
	uint64_t reused;    /* counter: records of nodes that left taken over by others */
	uint64_t mem_bytes; /* memory the endpoint holds: registered regions and records */
} loco_rpc_stats_t;

/* loco_rpc_cfg_default -- a configuration for members @nodes[0 .. @n) (NULL, 0: any) with the defaults. */
void loco_rpc_cfg_default(loco_rpc_cfg_t *cfg, const uint32_t *nodes, uint32_t n);

/*
 * loco_rpc_create -- endpoint @name (at most LOCO_NAME_MAX - 12 bytes) in
 * @ch (this node among cfg->nodes, if given): its reply slots, its send
 * and pull regions and, with cfg->threads, its server threads; the
 * per-peer rings come with the first call. Make it before
 * loco_channel_join(), or wait with loco_rpc_sync() after. Returns 0 and
 * sets *@out; -EINVAL, -EEXIST, -ENOMEM, or the fabric's error.
 */
int loco_rpc_create(loco_channel_t *ch, const char *name, const loco_rpc_cfg_t *cfg,
                    loco_rpc_ep_t **out);

/* loco_rpc_destroy -- stop the server threads, free the endpoint. NULL-safe. */
void loco_rpc_destroy(loco_rpc_ep_t *ep);

/*
 * loco_rpc_sync -- wait until every other member (cfg.nodes; without a
 * list, every paired peer of the channel) made the endpoint and paired.
 * Makes no ring: those come with the first call. Returns 0; -ETIMEDOUT,
 * -ECONNRESET (a member left), -LOCO_ENOTJOINED, -LOCO_EMISMATCH,
 * -LOCO_EPARTITION, -EINVAL.
 */
int loco_rpc_sync(loco_rpc_ep_t *ep, int64_t timeout_ns);

/* loco_rpc_id -- the id of handler @name (a hash: the same on every node); 0 for NULL. */
uint32_t loco_rpc_id(const char *name);

/*
 * loco_rpc_register -- serve handler @name with @fn(@arg, ...); its id
 * into *@id (may be NULL). Returns 0; -EEXIST (that name or id is
 * registered), -ENOSPC (LOCO_RPC_HANDLERS_MAX), -EINVAL.
 */
int loco_rpc_register(loco_rpc_ep_t *ep, const char *name, loco_rpc_fn fn, void *arg, uint32_t *id);

/*
 * loco_rpc_call -- one-way call of handler @id on member @node with
 * @len bytes (<= inline_max) of @args, copied: @args may be reused on
 * return. Waits up to @timeout_ns for ring room (< 0: forever; 0: not at
 * all) unless aggregation takes the call; the first call to a node also
 * waits for its ring to be made there (one control-plane round trip;
 * the node may not have made the endpoint yet). Returns 0; -EAGAIN
 * (timeout 0, no room or no ring yet), -ETIMEDOUT, -EMSGSIZE,
 * -ECONNRESET (@node left or died), -EINVAL (bad argument, @node is not
 * a member or is this node),
 * -LOCO_ENOTJOINED, -LOCO_EMISMATCH, -LOCO_EPARTITION.
 */
int loco_rpc_call(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *args, size_t len,
                  int64_t timeout_ns);

/*
 * A call queued by loco_rpc_call_retry() has ended: @status 0 once it is
 * in @node's ring (it runs there as a loco_rpc_call() would), or
 * -ETIMEDOUT (not taken within its timeout), -ECONNRESET (@node left or
 * died), -ECANCELED (the endpoint is being destroyed), or another error
 * of loco_rpc_call(); then it was never sent. Runs on the manager's
 * progress thread under the rules of the object callbacks (short, no
 * waiting: it may call loco_rpc_call_retry(), or loco_rpc_call() with
 * timeout 0), or for -ECANCELED in the thread of loco_rpc_destroy().
 * Since loco 0.11.
 */
typedef void (*loco_rpc_done_fn)(void *arg, uint32_t node, uint32_t id, int status);

#define LOCO_RPC_RETRY_MAX 64u /* calls queued by loco_rpc_call_retry() at once, per endpoint */

/*
 * loco_rpc_call_retry -- loco_rpc_call() that does not wait for ring
 * room (Seriema's RetryAsync): when @node's ring is full (or not made
 * yet) the call is copied into the endpoint's queue and posted by the
 * library as room comes, within @timeout_ns (< 0: for as long as @node
 * lives), and @done(@arg, @node, @id, status) tells how it ended. Calls
 * to one node, queued or not, from any call form, go in the order they
 * were made: while calls to @node are queued, the other forms wait
 * behind them. Returns 0 (in the ring now: @done is not called);
 * -EINPROGRESS (queued: @done is called exactly once); or, with nothing
 * queued and @done never called, -ENOBUFS (LOCO_RPC_RETRY_MAX calls
 * queued already), -EMSGSIZE, -ECONNRESET, -EINVAL (as loco_rpc_call(),
 * and a NULL @done), -ECANCELED (from a callback of loco_rpc_destroy()), -ENOMEM, -LOCO_ENOTJOINED, -LOCO_EMISMATCH,
 * -LOCO_EPARTITION. Since loco 0.11.
 */
int loco_rpc_call_retry(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *args, size_t len,
                        int64_t timeout_ns, loco_rpc_done_fn done, void *arg);

/*
 * loco_rpc_call_all -- loco_rpc_call() to every other member (without a
 * member list: every paired peer whose endpoint is known here), down a
 * tree: each call on the way, here and at the members that pass it on,
 * waits up to @timeout_ns as loco_rpc_call() does (< 0: as long as the
 * next member lives; 0: not at all, so a member whose ring is not made
 * yet is skipped). Returns 0, or the first error of this node's calls
 * (the call still went to the other members).
 */
int loco_rpc_call_all(loco_rpc_ep_t *ep, uint32_t id, const void *args, size_t len,
                      int64_t timeout_ns);

/*
 * loco_rpc_call_buffer_all -- a one-way call of handler @id on every other
 * member (as loco_rpc_call_all() finds them) with the @len bytes at @buf
 * (1 .. pull_bytes; in loco_rpc_send_region(ep), which needs no more
 * registration, or any memory of this process, registered on first use
 * as loco_rpc_callv() does), down the same kind of tree: each member READs
 * the bytes from the node that passed the call to it, and passes them on
 * from where it READ them. The handler runs with msg->caller = this node.
 * Returns once every member this node passed the call to holds the bytes
 * (or left; the next member of its group then takes its place): @buf may
 * then change. Each node waits up to @timeout_ns (< 0: as long as the
 * members live) to pass the call on. Returns 0, or the first error met
 * here (the call still went to the others): -EINVAL (NULL @buf, @len 0),
 * -EMSGSIZE (@len above pull_bytes, or more members than the frames
 * can list: only with a small inline_max), -ETIMEDOUT (a member neither
 * took the bytes nor left within @timeout_ns: it may still READ them
 * until it does), -EFAULT (@buf not mapped), -EBUSY (every registration
 * or reply slot in use), -LOCO_ENOTJOINED, -LOCO_EMISMATCH,
 * -LOCO_EPARTITION, or an error of loco_rpc_call(). Every member must run
 * loco 0.11 or later (an older one drops the call as malformed).
 * Since loco 0.11.
 */
int loco_rpc_call_buffer_all(loco_rpc_ep_t *ep, uint32_t id, const void *buf, size_t len,
                             int64_t timeout_ns);

/*
 * loco_rpc_call_return -- call handler @id on @node with @len bytes of
 * @args (copied, <= inline_max); its result is copied into @ret (@ret_cap
 * bytes, <= ret_max) when the call is waited for. With @t, returns once
 * the call is posted and loco_rpc_wait(@t) waits; with @t NULL, waits
 * here (the whole call within @timeout_ns) and returns the handler's
 * status if negative. Returns as loco_rpc_call(), and -EBUSY: every
 * reply slot is in use (within @timeout_ns).
 */
int loco_rpc_call_return(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *args,
                         size_t len, void *ret, size_t ret_cap, loco_rpc_ticket_t *t,
                         int64_t timeout_ns);

/*
 * loco_rpc_call_buffer -- call handler @id on @node with the @len bytes
 * at @buf. Up to inline_max the payload is copied into the ring (@buf
 * may be any memory, reusable on return); above, @buf must lie in
 * loco_rpc_send_region(ep) (registered memory of this node): only its
 * place travels and the callee pulls it with an RDMA READ into its own
 * registered memory (zero-copy), so the bytes must stay unchanged until
 * the call completes (loco_rpc_wait() returned 0 or -ECONNRESET, or this
 * call with @t NULL returned). Result and returns as
 * loco_rpc_call_return(); -EMSGSIZE above pull_bytes, -EINVAL for a
 * pulled @buf outside the send region.
 */
int loco_rpc_call_buffer(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *buf, size_t len,
                         void *ret, size_t ret_cap, loco_rpc_ticket_t *t, int64_t timeout_ns);

/*
 * loco_rpc_call_buffer_to -- Seriema's third call_buffer form: WRITE the
 * @len bytes at @buf (in loco_rpc_send_region(ep)) into @dst at @doff (a
 * region of @node, loco_region_remote(), that @node gave its endpoint
 * with loco_rpc_dest_add()), then call handler @id there, which finds the
 * bytes in place: msg->data points into its own region (no copy, no
 * READ). The link runs the WRITE before the call, so the handler sees
 * them whole. @buf must stay unchanged until the call completes, as for
 * a pulled call_buffer. Result and returns as loco_rpc_call_return();
 * -EINVAL also for @buf outside the send region, @dst not @node's or too
 * short; the handler's status is -EFAULT when @dst is not a destination
 * region of the callee's endpoint. Appeared in loco 0.10.
 */
int loco_rpc_call_buffer_to(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *buf,
                            size_t len, const loco_rref_t *dst, size_t doff, void *ret,
                            size_t ret_cap, loco_rpc_ticket_t *t, int64_t timeout_ns);

#define LOCO_RPC_ARGS_MAX 8u   /* arguments of one loco_rpc_callv() */
#define LOCO_RPC_COPY_MAX 512u /* callv arguments up to this many bytes are copied */
#define LOCO_RPC_REG_MAX  16u  /* the caller's buffers an endpoint keeps registered */

/* One argument of loco_rpc_callv(): @len bytes at @ptr. */
typedef struct loco_rpc_arg {
	const void *ptr;
	size_t len;
} loco_rpc_arg_t;

/*
 * loco_rpc_callv -- call handler @id on @node with the @nargs (1 ..
 * LOCO_RPC_ARGS_MAX) arguments @args, laid out one after the other for
 * the handler (msg->data, msg->len: their sum, <= pull_bytes), from
 * anywhere in this process's memory. Arguments up to LOCO_RPC_COPY_MAX
 * bytes are copied into the call while it has room (inline_max); the
 * others are READ by the callee from where they lie, registered on first
 * use and kept registered (LOCO_RPC_REG_MAX buffers per endpoint, the
 * least recently used going first), so that a buffer used again costs no
 * registration. Such a buffer must stay unchanged and mapped until the
 * call is consumed (loco_rpc_consumed()) or completes; before freeing or
 * unmapping one, call loco_rpc_mem_forget() (a buffer found unmapped is
 * dropped from the cache: -EFAULT). Result and returns as
 * loco_rpc_call_return(); -E2BIG (more than LOCO_RPC_ARGS_MAX
 * arguments), -EMSGSIZE (their sum above pull_bytes, or @ret_cap above
 * ret_max), -EINVAL (no arguments, a NULL or empty one), -EFAULT (an
 * argument's memory is not mapped), -EBUSY (every kept registration is
 * in use by calls in flight, or every reply slot). The handler's status
 * is -EIO when a READ failed. Since loco 0.11.
 */
int loco_rpc_callv(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const loco_rpc_arg_t *args,
                   unsigned nargs, void *ret, size_t ret_cap, loco_rpc_ticket_t *t,
                   int64_t timeout_ns);

/*
 * loco_rpc_mem_forget -- drop the kept registrations of the caller's
 * memory that overlap [@ptr, @ptr + @len): call it before freeing or
 * unmapping a buffer given to loco_rpc_callv(), as memory mapped again at
 * the same address is not told apart from the old. Returns 0; -EBUSY (a
 * call in flight may still READ one of them: nothing dropped), -EINVAL.
 * Since loco 0.11.
 */
int loco_rpc_mem_forget(loco_rpc_ep_t *ep, const void *ptr, size_t len);

/*
 * loco_rpc_dest_add -- let callers of @ep WRITE call_buffer_to payloads
 * into @r (a remotely writable region of this node, of any object of its
 * manager). Returns 0; -EEXIST (added already), -ENOSPC
 * (LOCO_RPC_DESTS_MAX), -EINVAL. Appeared in loco 0.10.
 */
int loco_rpc_dest_add(loco_rpc_ep_t *ep, loco_region_t *r);

/*
 * loco_rpc_wait -- wait up to @timeout_ns for the call of @t: its status
 * (the handler's return; -ENOENT: no such handler on the callee; -EIO:
 * the pull failed; -ENOBUFS: no pull room at that nesting) into *@status
 * and its result's length into *@ret_len (both may be NULL), the result
 * into the ticket's buffer. Returns 0 (the ticket is done); -EAGAIN
 * (timeout 0: the ticket stays valid); -ETIMEDOUT (the ticket is
 * dropped: a late result is never copied anywhere, and its slot is kept
 * until it lands or the callee leaves); -ECONNRESET (the callee left or
 * died); -EMSGSIZE (the result is longer than the buffer: truncated,
 * status still set); -EINVAL (a done ticket).
 */
int loco_rpc_wait(loco_rpc_ep_t *ep, loco_rpc_ticket_t *t, int *status, size_t *ret_len,
                  int64_t timeout_ns);

/*
 * loco_rpc_consumed -- wait up to @timeout_ns until the callee has the
 * payload of @t's call (call_buffer or call_buffer_to with a ticket), so
 * that the caller may reuse its bytes before the call completes: a pulled
 * payload once the callee's READ of it completed (the callee tells with a
 * WRITE ahead of the reply), one copied into the ring at once. The ticket
 * stays for loco_rpc_wait(). Returns 0; -EAGAIN (timeout 0), -ETIMEDOUT;
 * -ECONNRESET (the callee left: no READ of it can come any more, so the
 * bytes are free too); -EINVAL (a done ticket); -LOCO_ENOTJOINED,
 * -LOCO_EPARTITION. Since loco 0.11.
 */
int loco_rpc_consumed(loco_rpc_ep_t *ep, const loco_rpc_ticket_t *t, int64_t timeout_ns);

/*
 * loco_rpc_flush -- post this node's aggregated calls (to @node, or to
 * every member for 0), waiting up to @timeout_ns for room. Returns 0;
 * -EAGAIN, -ETIMEDOUT, -ECONNRESET, -EINVAL.
 */
int loco_rpc_flush(loco_rpc_ep_t *ep, uint32_t node, int64_t timeout_ns);

/*
 * loco_rpc_progress -- run up to @max calls (a batch is run whole) that
 * reached this node, FIFO per caller. Returns the number run (>= 0);
 * -EPERM (server threads run the handlers: cfg.threads > 0), -EINVAL.
 * Returns 0 at once if another thread is running them.
 */
int loco_rpc_progress(loco_rpc_ep_t *ep, int max);

/*
 * loco_rpc_send_region -- this node's registered region of cfg.pull_bytes
 * bytes (loco_region_ptr()) from which call_buffer payloads above
 * inline_max are pulled; the user places them (NULL for NULL).
 */
loco_region_t *loco_rpc_send_region(loco_rpc_ep_t *ep);

/* loco_rpc_stats -- the endpoint's counters into *@st (a snapshot). */
void loco_rpc_stats(const loco_rpc_ep_t *ep, loco_rpc_stats_t *st);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_RPC_H */
