/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm.h -- private header of the shm provider: one-sided operations
 * between processes of one host, done by the initiator's CPU on the
 * target's registered memory mapped into the initiator
 * (loco-fabric-shm(7)).
 *
 * Setup goes over a unix-domain SOCK_SEQPACKET socket per link, to the
 * abstract name "loco-shm-<uid>-<ip>:<port>/<tag>" of the target's fab
 * (ip:port/tag is its fab_addr; the port is reserved by a bound,
 * unlistened TCP socket so that it is unique on the host; the tag is 128
 * random bits drawn at open, so that no other user can bind the name
 * first: peers learn it only with the address): the HELLO carries the
 * private data; the link is held until fab_link_admit(); then each side
 * passes the other, with SCM_RIGHTS, its fab page (published key table,
 * sealed against writes by others), its link page (rings and counters the
 * peer writes), its doorbell (the CQ eventfd), its bell page (a futex
 * word peers bump after landings while a driver waits in fab_progress())
 * and one memfd per arena of registered memory (then one more each time
 * mr_reg makes an arena).
 * Both ends check SO_PEERCRED: same effective uid only.
 *
 * Data path: fab_post() executes WRITE, READ, CAS and FAA at once in the
 * posting thread (ordered 8-byte stores, 8-byte loads, __atomic), after
 * checking the key against the target's published table; completions go
 * to the initiator's CQ at once. SEND and WRITE_IMM put a record into a
 * ring in the target's link page when the target has a RECV posted (its
 * count is in its link page), else they and the link's later requests
 * wait in the link's deferred queue, retried by fab_poll(). The target's
 * fab_poll() moves ring records into its posted RECVs.
 *
 * One provider thread per fab: accepts connections, reads HELLOs, bounds
 * held links, watches each peer's pidfd and socket (a dead peer or a
 * closed link takes the link down), and maps arenas peers announce.
 *
 * Thread safety as fabric.h: post/post_recv MT-safe per link (post_lock),
 * poll serialized, setup MT-safe (fab->lock).
 */
#ifndef LOCO_FABRIC_SHM_H
#define LOCO_FABRIC_SHM_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../keytab.h"
#include "../provider.h"
#include "../swcq.h"

#define SHM_KEYS        4096u /* regions per fab (published key table entries) */
#define SHM_PROBE       8u    /* a key's entry is at its slot or one of the 7 after it */
#define SHM_MAX_LINKS   1024u
#define SHM_MAX_ARENAS  1024u         /* memfd arenas per fab */
#define SHM_RQ_MAX      4096u         /* rq_depth limit (RECV lengths published per link) */
#define SHM_RING        (256u * 1024) /* SEND ring bytes per link direction */
#define SHM_REC_ALIGN   64u
#define SHM_MAX_SEND    (64u * 1024) /* largest SEND */
#define SHM_MAX_MSG     (1u << 31)   /* largest WRITE/READ */
#define SHM_HELLO_MS    1000         /* an accepted connection must send its HELLO within */
#define SHM_ADOPT_ALIGN (2ull << 20) /* adopt anonymous memory in windows this aligned */
#define SHM_MAGIC       0x4c4f434f53484d31ull /* "LOCOSHM1" */
#define SHM_VERSION     2u
#define SHM_NFDS        5 /* ACK, FDS: fab page, link page, doorbell, progress bell, bell page */
#define SHM_DISARM_NS   (20ll * 1000000) /* no driver for this long: peers stop bumping */

enum shm_link_state {
	SHM_LINK_HANDSHAKE = 1, /* accepted, waiting for HELLO */
	SHM_LINK_HELD,          /* HELLO read, not admitted */
	SHM_LINK_UP,
	SHM_LINK_DOWN,
};

/* One published key table entry (a seqlock as keytab.h's). */
struct shm_kent {
	uint32_t seq; /* odd: holds a region */
	uint32_t key;
	uint32_t access;
	uint32_t arena;
	uint64_t base; /* the target's virtual address of the region */
	uint64_t len;
	uint64_t off; /* offset of base in the arena's memfd */
};

/* The fab page: written by its fab only (peers map it read-only: sealed). */
struct shm_fpage {
	uint64_t magic;
	uint64_t slow_ns;     /* LOCO_SHM_SLOW_WRITE of the target: how peers land WRITEs here */
	uint32_t want_landed; /* fab_attr.landed is set: peers ring after WRITEs and atomics */
	uint32_t waiting __attribute__((aligned(64))); /* the poller sleeps: ring the doorbell */
	uint32_t
	    sleepers; /* a driver sleeps on the bell page's seq (fab_progress): FUTEX_WAKE it */
	/*
	 * A driver waits (fab_progress() was called within SHM_DISARM_NS):
	 * peers bump the bell page's seq after each WRITE, atomic or SEND
	 * that lands here. Off, a landing costs its poster one load.
	 */
	uint32_t armed __attribute__((aligned(64)));
	/*
	 * Held by the provider thread for the fab's life: a robust, process-
	 * shared mutex, so when the process dies the kernel marks its lock
	 * word FUTEX_OWNER_DIED before anyone can reap it. Peers read the word
	 * before each post (shm_peer_gone()): a dead peer's requests fail at
	 * once, without a syscall.
	 */
	pthread_mutex_t life __attribute__((aligned(64)));
	struct shm_kent ent[SHM_KEYS] __attribute__((aligned(64)));
};

/*
 * The bell page: one per fab, mapped read-write by every peer (a peer can
 * only make a driver here wake early or late: its word is no proof).
 */
struct shm_bpage {
	uint64_t magic;
	uint32_t seq __attribute__((aligned(64))); /* peers: +1 per landing while armed; a futex */
	/* peers, and our threads: +1 after each write to our doorbell (the poller clears it) */
	uint32_t rings __attribute__((aligned(64)));
};

/* A link page: made by one side, mapped read-write by its peer. */
struct shm_lpage {
	uint64_t magic;
	uint64_t busy __attribute__((aligned(64)));      /* owner: odd while it accesses the peer */
	uint64_t rq_posted __attribute__((aligned(64))); /* owner: RECVs posted */
	uint64_t ring_cons __attribute__((aligned(64))); /* owner: ring bytes consumed */
	uint64_t ring_prod __attribute__((aligned(64))); /* peer: ring bytes produced */
	uint32_t rnr __attribute__((aligned(64))); /* owner: requests wait for the peer's RECVs */
	uint32_t
	    landed; /* peer: 1 after its WRITE or atomic here, until our thread told the core */
	uint32_t rq_lens[SHM_RQ_MAX] __attribute__((aligned(64))); /* owner: lengths of RECVs */
	uint8_t ring[SHM_RING] __attribute__((aligned(64)));       /* peer writes records */
};

/* A ring record; its payload follows; it spans a multiple of SHM_REC_ALIGN bytes. */
struct shm_rec {
	uint32_t span; /* bytes of the record in the ring; 0 in a pad record: skip to the end */
	uint32_t len;
	uint32_t imm;
	uint8_t op; /* FAB_OP_SEND, FAB_OP_WRITE_IMM, or 0 (pad) */
	uint8_t pad[3];
};

/*
 * shm_rec_check -- whether record @rec, read at ring offset @cons of a
 * ring whose producer says @prod, is one the reader may act on. The peer
 * writes both (hostile input): the record must be aligned, at least a
 * header when it carries a message (a pad record skips to the ring's end),
 * lie inside the ring without crossing its end, lie inside what the peer
 * produced, and a SEND's payload fit its span. 0 or -EPROTO.
 */
static inline int shm_rec_check(const struct shm_rec *rec, uint64_t cons, uint64_t prod)
{
	uint64_t pos = cons % SHM_RING, avail = prod - cons;

	if (avail > SHM_RING || rec->span == 0 || rec->span % SHM_REC_ALIGN || rec->span > avail ||
	    pos + rec->span > SHM_RING)
		return -EPROTO;
	if (rec->op == 0)
		return pos + rec->span == SHM_RING ? 0 : -EPROTO; /* a pad ends the ring */
	if (rec->span < sizeof(*rec) ||
	    (rec->op == FAB_OP_SEND && rec->len > rec->span - sizeof(*rec)))
		return -EPROTO;
	return rec->op == FAB_OP_SEND || rec->op == FAB_OP_WRITE_IMM ? 0 : -EPROTO;
}

/* Socket messages. */
enum shm_msg_type {
	SHM_M_HELLO = 1, /* connector -> acceptor: private data */
	SHM_M_ACK,       /* acceptor -> connector, at admission: + fds fpage, lpage, doorbell */
	SHM_M_FDS,       /* connector -> acceptor: + fds fpage, lpage, doorbell */
	SHM_M_ARENA,     /* either: + the arena's memfd */
};

struct shm_msg {
	uint64_t magic;
	uint32_t version;
	uint32_t type;
	uint32_t id;       /* ARENA: arena number */
	uint32_t priv_len; /* HELLO */
	uint64_t size;     /* ARENA: bytes of the memfd */
	uint8_t priv[FAB_PRIV_MAX];
};

struct shm_arena { /* one of this fab's memfds of registered memory */
	int fd;
	dev_t dev;
	ino_t ino;
	uint64_t size;
};

struct shm_map { /* a peer's arena, mapped here */
	uint8_t *base;
	uint64_t size;
};

struct shm_link {
	struct fab_link base;
	struct shm_fab *fab;
	int fd;    /* the socket */
	int pidfd; /* the peer's process */
	pid_t pid;
	int state; /* atomic: enum shm_link_state */
	int err;   /* atomic: status of later requests */
	int cause; /* atomic: 0 or what took it down */
	int passive;
	int queued_gone; /* under fab->lock: refused while nobody had accepted it */
	int owned;       /* under fab->lock: fab_accept() gave it to the caller */
	int in_epoll;
	uint64_t deadline; /* thread: HANDSHAKE: HELLO due; HELD: admission due */
	struct fab_addr peer_addr;

	pthread_mutex_t sock_lock; /* reading the socket, mapping the peer's arenas */
	pthread_spinlock_t post_lock;

	/* shared pages */
	struct shm_lpage *mine; /* the peer writes its records here */
	int mine_fd;
	struct shm_lpage *peer;
	const struct shm_fpage *pfab;
	struct shm_bpage *pbell; /* the peer's bell page */
	int peer_bell;           /* the peer's CQ eventfd: its poller sleeps */
	int peer_rnr;         /* the peer's progress bell: it has requests waiting for our RECVs */
	struct shm_map *maps; /* [SHM_MAX_ARENAS] */

	/* initiator: requests waiting behind a SEND with no RECV posted (post_lock) */
	struct fab_wr *dq;
	uint8_t *dq_inline;
	uint32_t dq_mask, dq_head, dq_tail; /* dq_tail atomic (poll peeks) */
	uint64_t credits_used;              /* SEND/WRITE_IMM consumed of the peer's RECVs */
	uint64_t rng;                       /* the slow knob's line shuffle (post_lock) */
	struct {
		const struct shm_kent *e; /* NULL: none */
		uint32_t seq;             /* its seq when read: valid while it still says so */
		struct shm_kent c;        /* what it held */
	} klast;                          /* remote_ptr()'s last key entry (post_lock) */
	struct keytab_last llast;         /* local_ok()'s last source key (post_lock) */
	int announced; /* under fab->lock: the peer was sent our pages; new arenas go to it */
	int admitting; /* under fab->lock: fab_link_admit() runs: no hold timeout */

	/* receiver: posted RECVs (post_lock) */
	struct fab_recv_wr *rq;
	uint32_t rq_mask;
	uint64_t rq_prod, rq_cons;

	struct fab_pending pending;
};

struct shm_fab {
	struct fab base;
	struct fab_ops ops;
	struct keytab kt; /* this fab's regions: lkeys and rkeys */
	int lfd;          /* the unix listening socket */
	int port_fd;      /* the TCP socket that reserves the port */
	int epfd, evfd;
	int rnr_evfd; /* peers ring it when we wait for their RECVs: the thread progresses */
	pthread_t thread;
	int stop;
	int alive; /* atomic: the thread holds fpage->life */
	struct fab_addr addr;
	uid_t uid;

	struct shm_fpage *fpage;
	int fpage_fd;
	struct shm_bpage *bpage; /* peers bump its seq while fpage->armed (fab_progress) */
	int bpage_fd;
	pthread_mutex_t drive_mu; /* one driver at a time (fab_progress); others -EBUSY */
	uint32_t drive_seen;      /* under drive_mu: bpage->seq when the last driver looked */
	uint64_t drive_ns; /* atomic: when a driver last ran, lc_coarse_ns() (the thread disarms) */
	unsigned drive_busy; /* atomic: odd while a driver walks links[] */

	pthread_mutex_t lock; /* links[], arenas, the accept queue */
	pthread_cond_t cond;
	struct shm_link *links[SHM_MAX_LINKS]; /* read by poll without the lock */
	unsigned nlinks;                       /* atomic */
	unsigned poll_busy;                    /* atomic: odd while poll walks links[] */
	struct fab_acceptq acceptq;
	uint32_t next_link_id;
	struct shm_arena arenas[SHM_MAX_ARENAS];
	unsigned narenas;
	struct fab_ratelog refuse_log;

	/* atomic: RECVs posted and not yet filled, and requests deferred, over every link: with
	 * none, a walk of the links finds nothing to do (a spinning driver looks at the CQ alone,
	 * on the line it reads anyway: the CQ's head and tail follow) */
	uint64_t walk_work;
	/* many producers (FAB_SWCQ_MP), one poller; its wait fd is our doorbell, its wake-up
	 * counter the bell page's rings, its armed flag mirrored in the fab page's waiting */
	struct fab_swcq cq;
};

/* shm_peer_gone -- whether the process behind @pfab died or closed its fab (glibc's lock word). */
static inline int shm_peer_gone(const struct shm_fpage *pfab)
{
	uint32_t w = __atomic_load_n((const uint32_t *)(const void *)&pfab->life, __ATOMIC_ACQUIRE);

	return (w & 0x40000000u) || (w & 0x3fffffffu) == 0; /* FUTEX_OWNER_DIED, FUTEX_TID_MASK */
}

static inline struct shm_link *to_shm_link(struct fab_link *l)
{
	return container_of(l, struct shm_link, base);
}

static inline struct shm_fab *to_shm_fab(struct fab *f)
{
	return container_of(f, struct shm_fab, base);
}

/*
 * The files call one way, from the top down (none calls a file above it):
 *   fab.c   open, close, the provider thread's loop, the ops table
 *   mr.c    registration: the key table, arenas (msg.c, post.c)
 *   link.c  a link's life: connect, accept, admit, close (msg.c, post.c, cq.c)
 *   poll.c  the CQ's consumer: fab_poll(), arm, wait, fab_progress() (post.c)
 *   post.c  the data path, delivery, a link taken down (msg.c, cq.c)
 *   msg.c   the socket: its name, the messages, the peer's arenas mapped
 *   cq.c    waking our poller and drivers, peers' bells (the CQ itself: ../swcq.c)
 */

/* shm_cq_push -- a completion of @l's into @f's CQ (a credit was taken for it). */
static inline void shm_cq_push(struct shm_fab *f, struct shm_link *l, uint64_t wrid, int opcode,
                               int status, uint32_t len, uint32_t imm, int has_imm)
{
	fab_swcq_push(&f->cq, &l->base, wrid, opcode, status, len, imm, has_imm);
}

/* cq.c */
void shm_cq_wake(struct shm_fab *f);
void shm_landed(struct shm_link *l);
void shm_bell(struct shm_link *l);
void shm_rnr_bell(struct shm_link *l);

/* msg.c */
int shm_abstract_name(const struct fab_addr *a, uid_t uid, void *sun, socklen_t *len);
int shm_send_msg(int fd, const struct shm_msg *m, const int *fds, int nfds);
int shm_recv_msg(int fd, struct shm_msg *m, int *fds, int *nfds);
void shm_close_fds(int *fds, int n);
int shm_send_arena(struct shm_link *l, unsigned id);
int shm_read_arenas(struct shm_link *l, uint32_t n, uint64_t deadline);
int shm_link_drain(struct shm_link *l);

/* post.c */
int shm_post(struct fab_link *link, const struct fab_wr *wr, int n);
int shm_post_now(struct fab_link *link, const struct fab_wr *wr, int *status);
int shm_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n);
int shm_link_progress(struct shm_link *l);
int shm_link_ready(struct shm_link *l);
void shm_link_fail(struct shm_link *l, int first_err, int err, const char *why);

/* poll.c */
int shm_poll(struct fab *fab, struct fab_wc *wc, int max);
int shm_wait_fd(struct fab *fab);
int shm_ready(void *arg);
int shm_arm(struct fab *fab);
int shm_wait(struct fab *fab, int timeout_ms);
int shm_progress(struct fab *fab, int64_t timeout_ns);
void shm_disarm(struct shm_fab *f);

/* link.c */
int shm_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                size_t priv_len, int timeout_ms, struct fab_link **out);
int shm_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len);
int shm_link_admit(struct fab_link *link);
int shm_link_close(struct fab_link *link);
int shm_link_state(struct fab_link *link);
int shm_link_peer(struct fab_link *link, struct fab_addr *out);
void shm_link_free(struct shm_link *l);
void shm_thread_accept(struct shm_fab *f);
void shm_thread_input(struct shm_fab *f, struct shm_link *l);
void shm_thread_sock(struct shm_fab *f, struct shm_link *l, uint32_t events);
void shm_thread_pid(struct shm_fab *f, struct shm_link *l);
void shm_thread_timers(struct shm_fab *f);

/* mr.c */
int shm_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out);
int shm_mr_reg_key(struct fab *fab, void *addr, size_t len, unsigned access, uint32_t lkey,
                   uint32_t rkey, struct fab_mr **out);
int shm_mr_dereg(struct fab_mr *mr);

#endif /* LOCO_FABRIC_SHM_H */
