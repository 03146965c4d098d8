/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fabric.h -- the provider interface under liboco (DESIGN §3).
 *
 * A provider is a const table of operations (struct fab_ops). Everything
 * above liboco/fabric/ sees only this header: registered regions with a
 * local and a remote key, links (one reliable-connected queue pair per
 * peer), work requests carrying a 64-bit WRID, and completions.
 *
 * The contract every provider gives, and that tests/fabric/ checks on each:
 *  - One-sided: the target application does no work for WRITE, READ, CAS,
 *    FAA (the tcp provider's own thread plays the NIC).
 *  - Requests on one link execute at the target in posting order.
 *  - An aligned 8-byte word is never torn. Within one 64-byte aligned line
 *    a WRITE lands in ascending address order; across lines no order.
 *  - Atomics are atomic with respect to other fabric atomics on the word.
 *  - A bad remote key, an out-of-bounds or wrongly-permissioned access
 *    completes with -EACCES at the initiator; the target is unharmed.
 *    As with an RC queue pair, the link then enters the error state: every
 *    later or outstanding request on it completes with -ECANCELED.
 *  - A dead peer turns outstanding and later requests into error
 *    completions (-ECONNRESET when the connection breaks, -ETIMEDOUT when
 *    the peer stops answering for fab_attr.timeout_ms); nothing hangs.
 *  - Completion of a signaled request implies completion of all earlier
 *    requests on its link; an unsignaled request that succeeds produces
 *    no completion, one that fails always does.
 *  - SEND and WRITE_IMM consume a RECV posted at the target; when none is
 *    posted the request waits (RNR with infinite retry), it is never lost,
 *    and the link's later requests wait behind it.
 *  - A link a peer opens is held: nothing of the peer's is served until
 *    the acceptor calls fab_link_admit() (fab_accept() below), and
 *    strangers are bounded (provider.h: FAB_MAX_UNADMITTED, fab_hold_ms()).
 *
 * Thread safety: fab_post() and fab_post_recv() are MT-safe per link.
 * fab_poll() is serialized: one polling thread per fab at a time;
 * fab_arm() may run in another thread meanwhile (one thread blocks on the
 * wait fd while another polls), and still every completion is returned
 * once, by fab_poll() (tests/fabric/poll-arm.c).
 * Setup calls (open, mr_reg, connect, accept, close) are MT-safe.
 */
#ifndef LOCO_FABRIC_H
#define LOCO_FABRIC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct fab;
struct fab_mr;
struct fab_link;

/* Access rights of a registered region (verbs' IBV_ACCESS_*). */
enum fab_access {
	FAB_ACCESS_LOCAL_WRITE = 1 << 0, /* the NIC may write it (READ/atomic results, RECV) */
	FAB_ACCESS_REMOTE_READ = 1 << 1,
	FAB_ACCESS_REMOTE_WRITE = 1 << 2,
	FAB_ACCESS_REMOTE_ATOMIC = 1 << 3,
};

enum fab_opcode {
	FAB_OP_WRITE = 1,
	FAB_OP_WRITE_IMM, /* WRITE, then consume a RECV at the target with @imm */
	FAB_OP_READ,
	FAB_OP_CAS, /* 8 B at remote_addr: if == compare then = swap; old value to local */
	FAB_OP_FAA, /* 8 B at remote_addr += add; old value to local */
	FAB_OP_SEND,
	FAB_OP_RECV,     /* completion only: a SEND arrived */
	FAB_OP_RECV_IMM, /* completion only: a WRITE_IMM arrived */
};

enum fab_wr_flags {
	FAB_WR_SIGNALED = 1 << 0, /* produce a completion on success */
	FAB_WR_INLINE = 1 << 1,   /* copy the payload at post time; lkey ignored */
	FAB_WR_FENCE = 1 << 2,    /* start only after earlier READs/atomics completed */
	FAB_WR_LAZY = 1 << 3,     /* nobody waits on its completion soon: it may be acknowledged
	                             late (tcp: TCP_ACK_DELAY_NS); others ignore the flag */
	FAB_WR_MORE = 1 << 4,     /* the poster's next post to this link follows at once: the
	                             provider may hold this one until then (tcp: both go out in
	                             one socket write); others ignore the flag */
};

/* One work request. Atomics use 8 bytes at @local (the old value lands there). */
struct fab_wr {
	uint64_t wrid;
	uint8_t opcode; /* enum fab_opcode */
	uint8_t flags;  /* enum fab_wr_flags */
	uint32_t imm;   /* WRITE_IMM, SEND (delivered as immediate data) */
	void *local;    /* local buffer */
	uint32_t len;   /* bytes; 8 for atomics */
	uint32_t lkey;  /* local key of the region holding @local */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare; /* CAS */
	uint64_t swap;    /* CAS: new value; FAA: the addend */
};

/* A receive buffer for SEND / WRITE_IMM. */
struct fab_recv_wr {
	uint64_t wrid;
	void *local;
	uint32_t len;
	uint32_t lkey;
};

struct fab_wc {
	uint64_t wrid;
	uint64_t link_ctx; /* the context given to connect/accept for this link */
	int32_t status;    /* 0 or -errno, see the contract above */
	uint32_t len;      /* bytes received (RECV, RECV_IMM) or transferred */
	uint32_t imm;
	uint32_t link_id; /* provider-unique link number (qp_num on verbs) */
	uint8_t opcode;   /* enum fab_opcode */
	uint8_t has_imm;
};

/* Limits and knobs of an opened fabric; zero fields take the defaults. */
struct fab_attr {
	const char *listen_addr; /* "ip" or "ip:port"; NULL = 127.0.0.1, port 0 */
	const char *device;      /* provider device (verbs: mlx5_0, rxe0); NULL = first */
	uint32_t sq_depth;       /* outstanding requests per link (default 256) */
	uint32_t rq_depth;       /* posted RECVs per link (default 256) */
	uint32_t cq_depth;       /* completion queue entries (default 4096) */
	uint32_t max_inline;     /* largest FAB_WR_INLINE payload (default 256) */
	uint32_t timeout_ms;     /* dead-peer bound (default 2000) */
	uint32_t spin_us;        /* provider thread busy-poll before blocking (0: automatic) */
	/*
	 * Optional: called by a provider that executes remote requests itself
	 * (tcp: its NIC thread) after a WRITE or an atomic changed this node's
	 * memory; it must be short and must not block. NULL: nobody is told.
	 */
	void (*landed)(void *arg);
	void *landed_arg;
	/*
	 * Set by a provider that stacks others (auto, fabric/auto/) on the
	 * fabs it opens: FAB_ATTR_KEYS_GIVEN -- regions are registered only
	 * with fab_mr_reg_key(), under the keys another fab chose, so that one
	 * key names a region on both; FAB_ATTR_ADDR_OWNED -- listen_addr is a
	 * full ip:port that the caller's other fab owns already (do not
	 * reserve it; listen on it in this provider's own namespace).
	 */
	unsigned flags;
};

#define FAB_ATTR_KEYS_GIVEN 1u
#define FAB_ATTR_ADDR_OWNED 2u

#define FAB_SPIN_AUTO    0 /* spin_us: the provider's default (tcp: 50 us, host not busy) */
#define FAB_SPIN_NONE    UINT32_MAX /* spin_us: never busy-poll (LOCO_WAIT sleep, block) */
#define FAB_PRIV_MAX     48         /* private data carried by connect (rdma_cm allows 56) */
#define FAB_ADDR_STRLEN  64
#define FAB_ADDR_TAG_LEN 16 /* bytes of fab_addr.tag */

/*
 * Address of a fabric endpoint: where peers connect. @tag, all zero when
 * there is none: random bits that name the endpoint on its host, which
 * its peers learn only from the address (the shm provider listens on an
 * abstract unix name made of them, so that no other user can take that
 * name first: loco-fabric-shm(7)). Written "ip:port/<32 hex digits>".
 */
struct fab_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	uint8_t tag[FAB_ADDR_TAG_LEN];
};

/* Provider-neutral parts of the handles; providers embed them first. */
struct fab {
	const struct fab_ops *ops;
	struct fab_attr attr;
};

struct fab_mr {
	struct fab *fab;
	void *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
	unsigned access;
};

struct fab_link {
	struct fab *fab;
	uint64_t ctx;
	uint32_t id;
};

struct fab_ops {
	size_t size; /* sizeof(struct fab_ops) the provider was built with */
	const char *name;
	int (*accept)(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out,
	              void *priv, size_t *priv_len);
	int (*arm)(struct fab *fab);
	void (*close)(struct fab *fab);
	int (*connect)(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
	               size_t priv_len, int timeout_ms, struct fab_link **out);
	int (*get_addr)(struct fab *fab, struct fab_addr *out);
	int (*link_admit)(struct fab_link *link);
	int (*link_close)(struct fab_link *link);
	int (*link_peer)(struct fab_link *link, struct fab_addr *out);
	int (*link_state)(struct fab_link *link);
	int (*mr_dereg)(struct fab_mr *mr);
	int (*mr_reg)(struct fab *fab, void *addr, size_t len, unsigned access,
	              struct fab_mr **out);
	int (*mr_reg_key)(struct fab *fab, void *addr, size_t len, unsigned access, uint32_t lkey,
	                  uint32_t rkey, struct fab_mr **out);
	int (*open)(const struct fab_attr *attr, struct fab **out);
	int (*poll)(struct fab *fab, struct fab_wc *wc, int max);
	int (*post)(struct fab_link *link, const struct fab_wr *wr, int n);
	int (*post_recv)(struct fab_link *link, const struct fab_recv_wr *wr, int n);
	int (*progress)(struct fab *fab, int64_t timeout_ns);
	int (*wait)(struct fab *fab, int timeout_ms);
	int (*wait_fd)(struct fab *fab);
	/* NULL: the provider never executes at post time (fab_post_now()) */
	int (*post_now)(struct fab_link *link, const struct fab_wr *wr, int *status);
};

/*
 * fab_open -- open provider @name ("tcp", "shm", "verbs", "auto"); NULL or ""
 * reads LOCO_FABRIC and defaults to "auto". @attr may be NULL.
 * Returns 0 and sets *@out; -ENOENT (no such provider), -ENODEV, -ENOMEM,
 * or the provider's error.
 */
int fab_open(const char *name, const struct fab_attr *attr, struct fab **out);

/* fab_close -- close @fab; every link and region must be closed first. NULL-safe. */
void fab_close(struct fab *fab);

/* fab_provider_names -- NULL-terminated list of the providers built in. */
const char *const *fab_provider_names(void);

/*
 * fab_uses_device -- whether @fab registers memory with an RDMA device, which
 * pins it against RLIMIT_MEMLOCK: verbs, or auto whose remote fabric opened
 * verbs. tcp and shm pin nothing. false for NULL.
 */
bool fab_uses_device(struct fab *fab);

/*
 * fab_block_drives -- whether a waiter of the block policy (LOCO_WAIT)
 * should sleep in fab_progress() rather than on the core's event count:
 * tcp, where a completion otherwise reaches a sleeper through the NIC
 * thread, the core's progress thread and a futex wake (an 8 B WRITE +
 * completion took 149-162 us under block, 67-81 us sleeping in the fabric).
 * Not shm, whose peers' landings wake a futex sleeper at once (a barrier
 * round of 2 nodes: 1.6 us on the futex, 11.5 us sleeping in the
 * fabric), so not auto either; verbs has no progress. false for NULL.
 */
bool fab_block_drives(struct fab *fab);

/* fab_attr_defaults -- fill zero fields of @attr with the defaults. */
void fab_attr_defaults(struct fab_attr *attr);

/*
 * fab_addr_parse / fab_addr_format -- "ip:port" or "ip:port/tag" (FAB_ADDR_TAG_LEN bytes in
 * lower-case hex, not all zero) <-> struct fab_addr. A tag-less address has a zero tag.
 */
int fab_addr_parse(const char *str, uint16_t default_port, struct fab_addr *out);
int fab_addr_format(const struct fab_addr *addr, char *buf, size_t len);

/* fab_same_host -- whether @a and @b hold the same IP address (ports ignored). */
bool fab_same_host(const struct fab_addr *a, const struct fab_addr *b);

/* fab_addr_has_tag -- whether @a carries a tag (fab_addr.tag not all zero). */
static inline bool fab_addr_has_tag(const struct fab_addr *a)
{
	uint8_t any = 0;

	for (size_t i = 0; i < FAB_ADDR_TAG_LEN; i++)
		any |= a->tag[i];
	return any != 0;
}

/* fab_get_addr -- the address peers connect to. */
static inline int fab_get_addr(struct fab *fab, struct fab_addr *out)
{
	return fab->ops->get_addr(fab, out);
}

/*
 * fab_mr_reg -- register [@addr, @addr + @len) with @access.
 * FAB_ACCESS_REMOTE_WRITE and FAB_ACCESS_REMOTE_ATOMIC require
 * FAB_ACCESS_LOCAL_WRITE, on every provider (the verbs rule).
 * Returns 0 and sets *@out (lkey, rkey filled); -EINVAL, -ENOMEM, -ENOSPC.
 */
static inline int fab_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access,
                             struct fab_mr **out)
{
	return fab->ops->mr_reg(fab, addr, len, access, out);
}

/*
 * fab_mr_reg_key -- fab_mr_reg() under @lkey and @rkey, chosen by another
 * fab: only on a fab opened with FAB_ATTR_KEYS_GIVEN (there fab_mr_reg()
 * is -EINVAL). -EEXIST: a key names a region already; -EINVAL: the
 * provider needs @lkey == @rkey (tcp: one table serves both);
 * -EOPNOTSUPP: the provider cannot take keys (verbs: the device chooses).
 */
static inline int fab_mr_reg_key(struct fab *fab, void *addr, size_t len, unsigned access,
                                 uint32_t lkey, uint32_t rkey, struct fab_mr **out)
{
	return fab->ops->mr_reg_key(fab, addr, len, access, lkey, rkey, out);
}

/* fab_mr_dereg -- deregister; remote accesses after it return -EACCES. NULL-safe. */
static inline int fab_mr_dereg(struct fab_mr *mr)
{
	return mr ? mr->fab->ops->mr_dereg(mr) : 0;
}

/*
 * fab_connect -- open a link to the endpoint at @peer, carrying @priv
 * (at most FAB_PRIV_MAX bytes) to the acceptor. @ctx is returned in every
 * completion of the link. Blocks up to @timeout_ms.
 * Returns 0 and sets *@out; -ECONNREFUSED, -ETIMEDOUT, -EINVAL, -ENOMEM, -EPROTO.
 */
static inline int fab_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx,
                              const void *priv, size_t priv_len, int timeout_ms,
                              struct fab_link **out)
{
	return fab->ops->connect(fab, peer, ctx, priv, priv_len, timeout_ms, out);
}

/*
 * fab_accept -- take the next link a peer opened to us, waiting up to
 * @timeout_ms (0: do not wait). The link is held: it serves none of the
 * peer's requests, and the peer's fab_connect() does not return, until
 * the caller checked @priv and called fab_link_admit(); fab_link_close()
 * refuses it instead (the peer's fab_connect() fails with -ECONNREFUSED).
 * A link neither admitted nor closed within the provider's bound is
 * refused by the provider, and is then reported by fab_link_state().
 * @priv receives the connector's private data (FAB_PRIV_MAX bytes of room),
 * *@priv_len its length. Returns 0 and sets *@out; -EAGAIN (none yet).
 */
static inline int fab_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out,
                             void *priv, size_t *priv_len)
{
	return fab->ops->accept(fab, ctx, timeout_ms, out, priv, priv_len);
}

/*
 * fab_post -- post @n work requests in order on @link.
 * Returns 0 when all were queued; -EINVAL (bad request: nothing queued),
 * -EMSGSIZE (an inline payload above attr.max_inline: nothing queued),
 * -EAGAIN (send queue full: nothing queued). Errors of execution arrive as
 * completions.
 */
static inline int fab_post(struct fab_link *link, const struct fab_wr *wr, int n)
{
	return link->fab->ops->post(link, wr, n);
}

/*
 * fab_post_now -- execute one request in the calling thread, now, if the
 * provider can (shm: the initiator executes; tcp and verbs cannot): the
 * payload is read and the target changed (a READ or atomic result placed)
 * when it returns, and no completion follows, signaled or not. Returns 0
 * when it executed, with *@status 0 or the negative errno a completion
 * would have carried (the link is then down, as after such a completion);
 * -EWOULDBLOCK when it did not (another request waits before it, the link
 * is not up, or the provider never does): nothing happened, post it with
 * fab_post(); -EINVAL or -EMSGSIZE for a request fab_post() refuses (a provider that
 * never executes may say -EWOULDBLOCK: fab_post() refuses it then). An
 * inline WRITE above attr.max_inline may execute here (nothing is left to
 * copy once it ran); when it does not, fab_post() refuses it (-EMSGSIZE).
 * Requests keep their order: one runs now only when none waits on the link.
 * MT-safe per link.
 */
static inline int fab_post_now(struct fab_link *link, const struct fab_wr *wr, int *status)
{
	int (*now)(struct fab_link *, const struct fab_wr *, int *) = link->fab->ops->post_now;

	return now != NULL ? now(link, wr, status) : -EWOULDBLOCK; /* (tcp, verbs: no call) */
}

/* fab_post_recv -- post @n receive buffers on @link. 0, -EINVAL, -EAGAIN. */
static inline int fab_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n)
{
	return link->fab->ops->post_recv(link, wr, n);
}

/* fab_poll -- reap up to @max completions without blocking; returns the count. */
static inline int fab_poll(struct fab *fab, struct fab_wc *wc, int max)
{
	return fab->ops->poll(fab, wc, max);
}

/*
 * fab_progress -- lend the calling thread to a provider that does its
 * work in software (tcp): if no other thread is doing it right now, do
 * the provider's pending work (issue posted requests, execute the peers'
 * requests, produce completions) and wait up to @timeout_ns (0: do not
 * wait) for more to arrive, doing that too. A thread that waits for a
 * remote WRITE or a completion and calls this instead of sleeping sees it
 * without a thread hop. The caller reaps the completions this produced
 * (fab_poll()): the CQ's wait fd is not signaled for them. A call with
 * @timeout_ns 0 only does the work: it need not report one-sided WRITEs
 * that landed here (shm reports them only to drivers that may sleep), a
 * spinning caller looks at its memory itself. Returns 1
 * (work was done), 2 (work was done, and a peer's WRITE or atomic landed
 * while a caller that -EBUSY sent off sleeps elsewhere: wake it), 0 (none
 * arrived), -EBUSY (another thread is doing the provider's work, or spins
 * on it: sleep instead) or -EOPNOTSUPP (the hardware does it: verbs).
 * MT-safe.
 */
static inline int fab_progress(struct fab *fab, int64_t timeout_ns)
{
	return fab->ops->progress(fab, timeout_ns);
}

/*
 * fab_wait -- block until a completion may be ready or @timeout_ms passes
 * (-1: forever). Returns 0, or -ETIMEDOUT. Spurious wake-ups are allowed.
 */
static inline int fab_wait(struct fab *fab, int timeout_ms)
{
	return fab->ops->wait(fab, timeout_ms);
}

/*
 * fab_wait_fd -- a file descriptor that becomes readable when completions
 * or accepted links may be ready, for callers that block in their own
 * epoll. It only signals after fab_arm() returned 0, once: the arm is
 * one-shot (as ibv_req_notify_cq), and a fab_poll() that reaps anything
 * disarms it too. After it fires, call fab_arm() again (which also
 * consumes the event).
 */
static inline int fab_wait_fd(struct fab *fab)
{
	return fab->ops->wait_fd(fab);
}

/*
 * fab_arm -- prepare to block on fab_wait_fd(): returns 0 when armed, or
 * -EAGAIN when completions or accepted links are already waiting (poll
 * them instead of blocking).
 */
static inline int fab_arm(struct fab *fab)
{
	return fab->ops->arm(fab);
}

/*
 * fab_link_admit -- serve the held link @link (from fab_accept()) from
 * now on, and let its connector's fab_connect() return. 0, or the error
 * that took the link down meanwhile (close it then).
 */
static inline int fab_link_admit(struct fab_link *link)
{
	return link->fab->ops->link_admit(link);
}

/* fab_link_peer -- the address the peer of @link connects from (for logs). 0, -ENOTCONN. */
static inline int fab_link_peer(struct fab_link *link, struct fab_addr *out)
{
	return link->fab->ops->link_peer(link, out);
}

/* fab_link_state -- 0 while the link is up, else the error that took it down. */
static inline int fab_link_state(struct fab_link *link)
{
	return link->fab->ops->link_state(link);
}

/*
 * fab_link_close -- close @link. Requests still outstanding complete with
 * -ECANCELED (their completions may be polled after this returns; they
 * carry link_ctx/link_id, never the freed handle). NULL-safe.
 */
static inline int fab_link_close(struct fab_link *link)
{
	return link ? link->fab->ops->link_close(link) : 0;
}

/* fab_opcode_str -- "WRITE", "READ", ... for logs. */
const char *fab_opcode_str(int opcode);

/* Built-in providers (the list fab_open() searches). */
extern const struct fab_ops fab_tcp_ops;
extern const struct fab_ops fab_shm_ops;
extern const struct fab_ops fab_auto_ops;
#ifdef LOCO_HAVE_VERBS
extern const struct fab_ops fab_verbs_ops;
#endif

#endif /* LOCO_FABRIC_H */
