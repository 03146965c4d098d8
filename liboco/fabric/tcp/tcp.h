/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp.h -- private header of the tcp provider: software RDMA over TCP, the
 * fabric provider that runs anywhere.
 *
 * The NIC is a role, held by one thread at a time (the nic_mu mutex): it
 * alone reads and writes the links' sockets, executes the peers'
 * one-sided requests against registered memory, turns the application's
 * posted work requests into frames, and produces completions. One thread
 * per fab, the NIC thread, plays it whenever nobody else does, so the
 * application never has to run for one-sided traffic. But a thread that
 * posts may issue its own requests at once, and a thread that waits for
 * a WRITE or a completion may lend itself through fab_progress() and wait
 * in epoll as the NIC (nic.c): then what it waits for needs no thread
 * hop, and the NIC thread is not woken at all. Link sockets are
 * edge-triggered, and epoll wakes the newest of several sleepers: a
 * driving waiter gets the events, the NIC thread sleeps on.
 *
 * An accepted connection is read only up to its HELLO (1 s bound), then
 * held and not read at all until fab_link_admit() makes the NIC answer
 * HELLO_ACK (link.c); the connector's fab_connect() waits for that answer.
 * Connections that fail before anyone accepted them are freed by the NIC
 * (nic_sync()), and those not admitted yet are capped (provider.h): a
 * newcomer makes room by closing the one with least to show (link.c).
 *
 * Per link (one TCP connection), each direction carries frames
 * (wire.h) of two kinds: requests, numbered by a PSN equal to their
 * send-queue position, and responses (cumulative ACK, READ data, atomic
 * old value, NAK, RECV credits). The target executes requests in stream
 * order, so per-link ordering holds by construction, and a response or ACK
 * for PSN p completes every earlier request too.
 *
 * The NIC thread never blocks on a socket: all output goes through a
 * per-link linear tx buffer written with non-blocking send(). Responses
 * always fit because the initiator bounds what it can make the target
 * hold (its send-queue depth and READ window, announced in HELLO): the tx
 * buffer keeps that much in reserve and requests only use the rest. So
 * two nodes reading from each other cannot deadlock on full sockets.
 *
 * Aligned 8-byte words are copied with 8-byte atomic loads/stores on the
 * side that others may be accessing concurrently (target memory, and the
 * application's source buffers), so they are never torn. WRITE payloads
 * land line by line in ascending address order, or, with the
 * LOCO_TCP_SLOW_WRITE=<ns> test knob, lines shuffled, words ascending
 * within a line and a pause of <ns> between words.
 *
 * Files: fab.c (open, close, the ops table; the completion queue and
 * its wait fd are ../swcq.c's), link.c (link lifecycle:
 * connect, accept, HELLO, close), nic.c (the NIC thread), state.c
 * (a link's output, its failure and the flushes of its queues, the NIC's
 * doorbell: the bottom, called by all), initiator.c (post, issue,
 * responses), target.c
 * (executing the peer's requests), mr.c (memory registration), wire.[ch] (the frame format).
 */
#ifndef LOCO_FABRIC_TCP_H
#define LOCO_FABRIC_TCP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../../hostload.h"
#include "../keytab.h"
#include "../provider.h"
#include "../swcq.h"
#include "wire.h"

#define TCP_READ_WINDOW     (256u * 1024) /* READ bytes a link may have in flight */
#define TCP_RX_CAP          (2 * (TCP_HDR_LEN + TCP_MAX_SEG))
#define TCP_MAX_LINKS       1024
#define TCP_KEYS            4096
#define TCP_EVENTS          64
#define TCP_MAX_MSG         (1u << 31) /* largest request */
#define TCP_LEASE_NS        1000000ull /* a driver holds off the NIC thread this long after it */
#define TCP_INLINE_INFLIGHT 4          /* post_inline(): a link with this many in flight streams */
#define TCP_ACK_DELAY_NS    200000ull  /* default of tcp_fab.ack_delay_ns */
#define TCP_ALIVE_NS        100000000ull /* a long request arriving is answered this often */
#define TCP_SPIN_US         50 /* spin_us FAB_SPIN_AUTO: the NIC thread's spin, host not busy */
/*
 * A thread that drives with timeout 0 twice within TCP_SPIN_GAP_NS spins
 * (one call is a look); while it did so within TCP_SPINNER_NS, no other
 * driver sleeps in epoll (tcp_progress()).
 */
#define TCP_SPIN_GAP_NS 20000ull
#define TCP_SPINNER_NS  100000ull

/* who holds the NIC role (tcp_fab.role, written with it) */
enum tcp_role {
	TCP_ROLE_NONE = 0,
	TCP_ROLE_NIC,    /* the NIC thread: briefly */
	TCP_ROLE_POSTER, /* a posting thread issuing its requests: briefly */
	TCP_ROLE_DRIVER, /* a waiting thread (tcp_progress()), between its sleeps in epoll */
};
#define TCP_HELLO_MS 1000 /* an accepted connection must send its HELLO within */
/*
 * A link we close sends its FIN, then reads and drops what the peer still
 * sends until the peer's FIN, for this long at most, before close()
 * (tcp_linger()): a close() with bytes unread, or bytes that land after
 * it, is answered with a RST, which the peer logs as a reset link.
 */
#define TCP_LINGER_MS 250
#define TCP_LINGERS   64 /* sockets lingering at once; more are closed at once */

_Static_assert(TCP_PRIV_MAX <= FAB_PRIV_MAX, "HELLO private data fits struct fab_pending");

enum tcp_link_state {
	TCP_LINK_HANDSHAKE =
	    1,         /* accepted, waiting for HELLO; its socket is read up to the HELLO */
	TCP_LINK_HELD, /* HELLO read, not admitted: its socket is not read at all */
	TCP_LINK_UP,
	TCP_LINK_DOWN, /* failed: requests are flushed with link->err */
};

struct tcp_sqe {
	struct fab_wr wr;
	uint32_t sent;  /* WRITE/SEND: payload bytes framed; READ: bytes requested */
	uint32_t recvd; /* READ: bytes placed */
};

struct tcp_link {
	struct fab_link base;
	struct tcp_fab *fab;
	int fd;
	int state;     /* NIC-owned: enum tcp_link_state */
	int err;       /* read with atomics: the status later requests flush with */
	int cause;     /* read with atomics: 0 or the error that took it down */
	int has_fault; /* NIC: fault_psn names the request that took it down */
	uint32_t fault_psn;
	int close_req; /* set under fab->lock; the NIC closes it */
	int closed;    /* set under fab->lock by the NIC */
	int want_out;  /* EPOLLOUT armed */
	int draining;  /* down after a NAK: flush it, half-close, read to EOF */
	int rx_more;   /* NIC: input left unread (edge-triggered: no event will say so) */
	int rx_hup;    /* NIC: the peer closed or failed (EPOLLRDHUP): read until the close */
	uint64_t drain_deadline;

	/* admission (the passive side): HANDSHAKE -> HELD -> (admit) UP */
	int passive;            /* accepted from the listening socket */
	int admitted;           /* under fab->lock: served (always 1 on the connecting side) */
	int admit_req;          /* under fab->lock: fab_link_admit() waits for admit_done */
	int admit_done;         /* under fab->lock, set by the NIC */
	int reap;               /* NIC: down before the caller owned it; nic_sync() frees it */
	uint64_t hs_deadline;   /* NIC: HANDSHAKE: HELLO due; HELD: admission due */
	struct tcp_hello hello; /* the peer's HELLO, for the tx buffer made at admission */
	struct fab_addr peer;   /* where the peer connects from (fab_link_peer) */
	size_t rx_cap;          /* bytes of rx: only a HELLO's before admission */

	/* send queue: posters produce at sq_prod; the NIC issues then completes */
	pthread_spinlock_t post_lock;
	struct tcp_sqe *sq;
	uint8_t *sq_inline; /* sq_depth * max_inline bytes */
	uint32_t sq_mask;
	uint32_t sq_prod;  /* atomic: next PSN to post */
	uint32_t sq_issue; /* NIC: next PSN to put on the wire */
	uint32_t sq_done;  /* NIC: next PSN to complete */
	uint32_t sq_free;  /* atomic: sq_done as posters see it */

	/* receive queue: post_recv produces, the NIC consumes */
	struct fab_recv_wr *rq;
	uint32_t rq_mask;
	uint32_t rq_prod;      /* atomic */
	uint32_t rq_cons;      /* NIC */
	uint32_t rq_free;      /* atomic: rq_cons as posters see it */
	uint32_t rq_fill;      /* NIC: bytes placed into rq[rq_cons] by a segmented SEND */
	uint64_t credits_sent; /* NIC: RECVs announced to the peer */
	uint64_t peer_credits; /* NIC: RECVs the peer announced */
	uint64_t credits_used; /* NIC: SEND/WRITE_IMM issued */
	uint32_t peer_sq_depth;
	uint32_t peer_read_window;
	uint64_t read_inflight; /* NIC: READ bytes requested, not yet received */
	uint32_t atomics_inflight;

	/* target side */
	uint32_t exec_psn;    /* next PSN expected from the peer */
	uint32_t acked_psn;   /* last PSN answered by a response or ACK (exec_psn - 1 when all) */
	int nak_sent;         /* we refused a request: discard everything after it */
	int ack_urgent;       /* NIC: an ACK owed is for a request with ACKREQ */
	uint64_t ack_owed_ns; /* NIC: when the ACKs owed became owed (0: none owed) */
	uint32_t imm_len;     /* WRITE_IMM: bytes written so far for the current WR */
	uint64_t alive_ns;    /* NIC: when a long request's last sign of life went out */
	int seg_open;         /* NIC: a request of several segments is part-way in */

	/* buffers */
	uint8_t *rx;
	size_t rx_len;
	uint8_t *tx;
	size_t tx_cap, tx_off, tx_len; /* bytes [tx_off, tx_len) are pending */
	size_t tx_reserve;             /* room kept for responses */
	uint64_t last_rx_ns;
	struct fab_pending pending;    /* in the accept queue; the connector's private data */
	struct tcp_link *evicted_next; /* on tcp_fab.evicted */
};

/* a closed link's socket, half-closed, read to its EOF before close() (tcp_linger()) */
struct tcp_linger {
	int fd; /* -1: a free slot */
	uint64_t deadline_ns;
};

struct tcp_fab {
	struct fab base;
	struct fab_ops ops;
	struct keytab kt;
	int lfd, epfd, evfd;
	pthread_t nic;
	pthread_mutex_t nic_mu; /* the NIC role: held by the NIC thread or a driving thread */
	int stop;
	struct fab_addr addr;
	uint64_t slow_ns;
	uint32_t fail_reads;     /* atomic: READs still to fail their link (LOCO_TCP_FAIL_READS) */
	uint32_t fail_reads_len; /* ... of this many bytes (0: any) */
	uint64_t rng;
	struct lc_hostload load; /* NIC thread: no spin after work while the host is busy */

	pthread_mutex_t lock; /* links[], the accept queue, close requests */
	pthread_cond_t cond;
	struct tcp_link *links[TCP_MAX_LINKS];
	unsigned nlinks;
	unsigned links_gen; /* atomic: bumped when links[] changes */
	struct fab_acceptq acceptq;
	uint32_t next_link_id;
	struct tcp_link *evicted; /* closed to make room, out of links[]: nic_sync() frees them */

	struct fab_ratelog refuse_log; /* NIC: connections refused by the caps */

	/* the role: sockets of closed links, read to the peer's FIN (epoll: data.ptr = the slot) */
	struct tcp_linger lingers[TCP_LINGERS];
	unsigned nlingers;

	/* the NIC's private view of links[] */
	struct tcp_link *nic_links[TCP_MAX_LINKS];
	unsigned nic_nlinks, nic_gen;
	uint64_t timers_due_ns; /* the role: when nic_timers() should run next, at the latest */

	/* completion queue: the NIC role produces (one thread at a time), one poller consumes */
	struct fab_swcq cq;
	int sleepers;          /* atomic: NIC-role threads in epoll_wait with a timeout */
	int kicked;            /* atomic: the eventfd was written and not read yet */
	int drv_sleeping;      /* atomic: a driver sleeps in epoll (tcp_progress()) */
	uint64_t look_ns;      /* atomic: when a driver last came with timeout 0 */
	uintptr_t look_tid;    /* atomic: and which thread (pthread_self()) */
	uint64_t spin_seen_ns; /* atomic: when a thread last looked twice in a row: it spins */
	uintptr_t spin_tid;    /* atomic: that thread */
	int landed_want;       /* atomic: a spinner sent a driver off to sleep elsewhere */
	int landed_seen;       /* atomic: a peer's WRITE or atomic landed since (tcp_landed()) */
	uint64_t work_seq;     /* atomic: bumped by every post, close and admit request */
	uint64_t work_seen;    /* atomic: work_seq when the NIC role last took the work */
	unsigned free_gen;     /* atomic, written with the role: bumped when a link may be freed */
	uint64_t lease_end_ns; /* atomic: the NIC thread parks until then (nic_park()) */
	uint32_t park_seq;     /* atomic: the parked NIC thread's futex word */
	int parked;            /* atomic: the NIC thread parks (nic_park()) */
	uint64_t awake_until;  /* NIC thread's: woken for posted work, it takes more until then */
	int role;              /* atomic: enum tcp_role, who holds nic_mu */
	int nic_wants;         /* atomic: the NIC thread waits for the role: drivers stay off */
	int acks_owed;         /* the role: a driver left ACKs for its next turn (link_input()) */
	uint64_t ack_delay_ns; /* lazy requests' ACKs are held this long (LOCO_TCP_ACK_DELAY_US) */
	int left;              /* the role: its last turn left work no event will bring back */
	unsigned nic_busy;     /* atomic: odd while the NIC touches memory (mr_dereg waits) */
};

/*
 * tcp_landed -- a peer's WRITE or atomic landed (the role; a SEND makes a
 * completion, whose reap wakes waiters anyway): tell
 * the block policy's waiters (fab_attr.landed), and a spinner whose
 * presence sent a driver to sleep elsewhere (tcp_progress() returns 2 for
 * it: the manager wakes that sleeper, which may wait for this).
 */
static inline void tcp_landed(struct tcp_fab *fab)
{
	if (fab->base.attr.landed != NULL)
		fab->base.attr.landed(fab->base.attr.landed_arg); /* LOCO_WAIT=block */
	if (__atomic_load_n(&fab->landed_want, __ATOMIC_RELAXED))
		__atomic_store_n(&fab->landed_seen, 1, __ATOMIC_RELAXED);
}

static inline int tcp_psn_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline struct tcp_link *to_tcp_link(struct fab_link *l)
{
	return container_of(l, struct tcp_link, base);
}

static inline struct tcp_fab *to_tcp_fab(struct fab *f)
{
	return container_of(f, struct tcp_fab, base);
}

/* tcp_tx_used -- bytes pending in the tx buffer. */
static inline size_t tcp_tx_used(const struct tcp_link *l)
{
	return l->tx_len - l->tx_off;
}

/* tcp_cq_push -- with the NIC role: a completion of @l's (a credit was taken for it). */
static inline void tcp_cq_push(struct tcp_fab *f, struct tcp_link *l, uint64_t wrid, int opcode,
                               int status, uint32_t len, uint32_t imm, int has_imm)
{
	fab_swcq_push(&f->cq, &l->base, wrid, opcode, status, len, imm, has_imm);
}

/* tcp_cq_wake -- after pushes or an accepted link: wake the poller if it is armed. */
static inline void tcp_cq_wake(struct tcp_fab *f)
{
	fab_swcq_wake(&f->cq);
}

/* initiator.c */
int tcp_link_issue(struct tcp_link *l);
void tcp_on_response(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data);
int tcp_post(struct fab_link *link, const struct fab_wr *wr, int n);
int tcp_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n);

/* target.c */
void tcp_send_acks(struct tcp_link *l);
void tcp_exec_request(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data);
/* tcp_target_keepalive -- a sign of life while a long request is part-way in (target.c) */
int tcp_target_keepalive(struct tcp_link *l, uint64_t now);

/* state.c */
void tcp_nic_kick(struct tcp_fab *f);
/* tcp_nic_touch -- the NIC role starts (odd) or stops (even) touching memory: mr_dereg waits. */
void tcp_nic_touch(struct tcp_fab *f);
/*
 * tcp_nic_wake -- work was published for the NIC role (posted, a close or
 * admit request): count it, then wake a holder that sleeps in epoll or
 * the parked NIC thread (pairs with nic_epoll() in nic.c).
 */
void tcp_nic_wake(struct tcp_fab *f);
/* tcp_nic_unpark -- wake the NIC thread if it parks (fab close, work nobody may take). */
void tcp_nic_unpark(struct tcp_fab *f);
void tcp_flush_sq(struct tcp_link *l, int first_err, int err);
void tcp_flush_rq(struct tcp_link *l);
void tcp_link_fail(struct tcp_link *l, int first_err, int err, const char *why);
void tcp_link_set_out(struct tcp_link *l, int want);
uint8_t *tcp_tx_frame(struct tcp_link *l, const struct tcp_frame *f);
uint8_t *tcp_tx_response(struct tcp_link *l, const struct tcp_frame *f);
void tcp_tx_flush(struct tcp_link *l);
void tcp_drain(struct tcp_link *l, int timed_out);
/*
 * tcp_linger -- (the role) close @fd, the socket of a link we close, with a
 * FIN and no RST: half-close it, then read and drop what comes until the
 * peer's FIN or for TCP_LINGER_MS, then close() it (tcp_linger_input(),
 * tcp_linger_timers(); tcp_linger_fini() at the fab's close).
 */
void tcp_linger(struct tcp_fab *f, int fd);
/* tcp_linger_slot -- the slot an epoll event names, or NULL (a link, the listener, ...) */
static inline struct tcp_linger *tcp_linger_slot(struct tcp_fab *f, void *ptr)
{
	return (uintptr_t)ptr >= (uintptr_t)f->lingers &&
	               (uintptr_t)ptr < (uintptr_t)(f->lingers + TCP_LINGERS)
	           ? ptr
	           : NULL;
}
void tcp_linger_input(struct tcp_fab *f, struct tcp_linger *g);
/* tcp_linger_timers -- read every lingering socket, close the done and the late; next ms or -1 */
int tcp_linger_timers(struct tcp_fab *f, uint64_t now);
/* tcp_linger_fini -- (no NIC thread any more) wait for the lingering sockets, then close them */
void tcp_linger_fini(struct tcp_fab *f);

/* link.c */
void tcp_link_free(struct tcp_link *l);
void tcp_on_hello(struct tcp_link *l, const struct tcp_frame *fr, const uint8_t *data);
/* tcp_link_accepted -- a socket the listener accepted: a held link in the table, or NULL */
struct tcp_link *tcp_link_accepted(struct tcp_fab *f, int fd, const struct fab_addr *peer);
int tcp_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                size_t priv_len, int timeout_ms, struct fab_link **out);
int tcp_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len);
int tcp_link_admit(struct fab_link *link);
int tcp_link_close(struct fab_link *link);
int tcp_link_state(struct fab_link *link);
int tcp_link_peer(struct fab_link *link, struct fab_addr *out);
void tcp_nic_admit(struct tcp_link *l);
int tcp_nic_reap(struct tcp_fab *f, struct tcp_link *l);

/* nic.c */
void *tcp_nic_main(void *arg);
/* tcp_nic_input -- the NIC: read what @l's socket has and act on it (a HELLO, frames). */
void tcp_nic_input(struct tcp_link *l);
/* tcp_nic_accept -- the NIC: take new connections, read their HELLO if it is there */
void tcp_nic_accept(struct tcp_fab *f);
int tcp_progress(struct fab *fab, int64_t timeout_ns);

/* mr.c */
int tcp_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out);
int tcp_mr_reg_key(struct fab *fab, void *addr, size_t len, unsigned access, uint32_t lkey,
                   uint32_t rkey, struct fab_mr **out);
int tcp_mr_dereg(struct fab_mr *mr);

#endif /* LOCO_FABRIC_TCP_H */
