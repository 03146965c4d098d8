/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp.c -- software RDMA over TCP: the fabric provider that runs anywhere.
 *
 * One thread per fab plays the NIC: it alone reads and writes the links'
 * sockets, executes the peers' one-sided requests against registered
 * memory, turns the application's posted work requests into frames, and
 * produces completions. The application never runs for one-sided traffic.
 *
 * Per link (one TCP connection), each direction carries frames
 * (tcp_wire.h) of two kinds: requests, numbered by a PSN equal to their
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
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../log.h"
#include "../sock.h"
#include "keytab.h"
#include "provider.h"
#include "tcp_wire.h"

#define TCP_READ_WINDOW (256u * 1024) /* READ bytes a link may have in flight */
#define TCP_RX_CAP      (2 * (TCP_HDR_LEN + TCP_MAX_SEG))
#define TCP_MAX_LINKS   1024
#define TCP_KEYS        4096
#define TCP_EVENTS      64

enum tcp_link_state {
	LINK_HANDSHAKE = 1, /* accepted, waiting for HELLO */
	LINK_UP,
	LINK_DOWN, /* failed: requests are flushed with link->err */
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
	int close_req;   /* set under fab->lock; the NIC closes it */
	int closed;      /* set under fab->lock by the NIC */
	int in_accept_q; /* waiting for fab_accept() */
	int want_out;    /* EPOLLOUT armed */
	int draining;    /* down after a NAK: flush it, half-close, read to EOF */
	uint64_t drain_deadline;
	struct tcp_link *next_q; /* accept queue */

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
	uint32_t exec_psn;  /* next PSN expected from the peer */
	uint32_t acked_psn; /* last PSN answered by a response or ACK (exec_psn - 1 when all) */
	int nak_sent;       /* we refused a request: discard everything after it */
	uint32_t imm_len;   /* WRITE_IMM: bytes written so far for the current WR */

	/* buffers */
	uint8_t *rx;
	size_t rx_len;
	uint8_t *tx;
	size_t tx_cap, tx_off, tx_len; /* bytes [tx_off, tx_len) are pending */
	size_t tx_reserve;             /* room kept for responses */
	uint64_t last_rx_ns;
	uint8_t priv[TCP_PRIV_MAX];
	size_t priv_len;
};

struct tcp_fab {
	struct fab base;
	struct fab_ops ops;
	struct keytab kt;
	int lfd, epfd, evfd, cq_evfd;
	pthread_t nic;
	int stop;
	struct fab_addr addr;
	uint64_t slow_ns;
	uint64_t rng;

	pthread_mutex_t lock; /* links[], the accept queue, close requests */
	pthread_cond_t cond;
	struct tcp_link *links[TCP_MAX_LINKS];
	unsigned nlinks;
	unsigned links_gen; /* atomic: bumped when links[] changes */
	struct tcp_link *accept_head, *accept_tail;
	uint32_t next_link_id;

	/* the NIC's private view of links[] */
	struct tcp_link *nic_links[TCP_MAX_LINKS];
	unsigned nic_nlinks, nic_gen;

	/* completion queue: the NIC produces, one poller consumes */
	struct fab_wc *cq;
	uint32_t cq_mask;
	uint64_t cq_head;   /* atomic: consumer */
	uint64_t cq_tail;   /* atomic: producer */
	int64_t cq_credits; /* atomic: CQ entries not yet promised to a request */
	int poll_waiting;   /* atomic */
	int nic_sleeping;   /* atomic */
	unsigned nic_busy;  /* atomic: odd while the NIC touches memory (mr_dereg waits) */
};

struct tcp_mr {
	struct fab_mr base;
};

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

static inline int psn_before(uint32_t a, uint32_t b)
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

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = lc_now_ns() + ns;

	while (lc_now_ns() < end)
		__builtin_ia32_pause();
}

/*
 * copy_out -- copy @len bytes from memory that others may be writing
 * (@src) to private memory; aligned words of @src are read with one
 * 8-byte atomic load each, so they are never torn.
 */
static void copy_out(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	while (len && ((uintptr_t)s & 7)) {
		*d++ = __atomic_load_n(s++, __ATOMIC_RELAXED);
		len--;
	}
	for (; len >= 8; len -= 8, s += 8, d += 8) {
		uint64_t w = __atomic_load_n((const uint64_t *)s, __ATOMIC_RELAXED);

		memcpy(d, &w, 8);
	}
	while (len--)
		*d++ = __atomic_load_n(s++, __ATOMIC_RELAXED);
}

/*
 * copy_in -- copy @len bytes from private memory into memory that others
 * may be reading (@dst) in ascending address order, aligned words of @dst
 * with one 8-byte atomic store each (pairs with readers' atomic loads).
 */
static void copy_in(void *dst, const void *src, size_t len, uint64_t pause_ns)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	while (len && ((uintptr_t)d & 7)) {
		__atomic_store_n(d++, *s++, __ATOMIC_RELAXED);
		len--;
	}
	for (; len >= 8; len -= 8, s += 8, d += 8) {
		uint64_t w;

		memcpy(&w, s, 8);
		__atomic_store_n((uint64_t *)d, w, __ATOMIC_RELAXED);
		if (pause_ns)
			spin_ns(pause_ns);
	}
	while (len--)
		__atomic_store_n(d++, *s++, __ATOMIC_RELAXED);
}

/*
 * land_write -- apply a WRITE payload to target memory. Normally lines in
 * ascending order; with the slow knob, 64-byte lines in a shuffled order,
 * each line's words ascending with a pause between words (the worst a
 * legal NIC does, DESIGN §3). The release fence makes the data visible to
 * a CPU that later observes the link's next WRITE (pairs with the
 * reader's acquire load of the flag it polls).
 */
static void land_write(struct tcp_fab *f, void *dst, const void *src, size_t len)
{
	uint16_t order[TCP_MAX_SEG / 64 + 2];
	uintptr_t start = (uintptr_t)dst, end = start + len, first;
	unsigned nlines;

	if (f->slow_ns == 0 || len == 0) {
		copy_in(dst, src, len, 0);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		return;
	}
	first = start & ~(uintptr_t)63;
	nlines = (unsigned)((end - first + 63) / 64);
	for (unsigned i = 0; i < nlines; i++)
		order[i] = (uint16_t)i;
	for (unsigned i = nlines - 1; i > 0; i--) {
		unsigned j = (unsigned)(xorshift(&f->rng) % (i + 1));
		uint16_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (unsigned i = 0; i < nlines; i++) {
		uintptr_t lo = first + (uintptr_t)order[i] * 64, hi = lo + 64;

		if (lo < start)
			lo = start;
		if (hi > end)
			hi = end;
		copy_in((void *)lo, (const uint8_t *)src + (lo - start), hi - lo, f->slow_ns);
	}
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* completion queue                                                   */

static void cq_push(struct tcp_fab *f, struct tcp_link *l, uint64_t wrid, int opcode, int status,
                    uint32_t len, uint32_t imm, int has_imm)
{
	uint64_t tail = __atomic_load_n(&f->cq_tail, __ATOMIC_RELAXED);
	struct fab_wc *wc = &f->cq[tail & f->cq_mask];

	/* a slot was reserved at post time, so the ring cannot be full */
	*wc = (struct fab_wc){
	    .wrid = wrid,
	    .link_ctx = __atomic_load_n(&l->base.ctx, __ATOMIC_RELAXED),
	    .status = status,
	    .len = len,
	    .imm = imm,
	    .link_id = l->base.id,
	    .opcode = (uint8_t)opcode,
	    .has_imm = (uint8_t)has_imm,
	};
	/* pairs with the acquire load of cq_tail in tcp_poll() */
	__atomic_store_n(&f->cq_tail, tail + 1, __ATOMIC_RELEASE);
}

static void cq_wake(struct tcp_fab *f)
{
	uint64_t one = 1;

	if (__atomic_load_n(&f->poll_waiting, __ATOMIC_SEQ_CST) &&
	    write(f->cq_evfd, &one, sizeof(one)) < 0)
		lc_log_warn("tcp: cannot wake the poller: %s", strerror(errno));
}

/*
 * cq_reserve -- promise CQ room for @n requests or RECVs (each may produce
 * a completion; errors always do), so the ring can never overflow.
 * Returns 0, or -EAGAIN when the CQ is fully promised.
 */
static int cq_reserve(struct tcp_fab *f, int64_t n)
{
	if (__atomic_sub_fetch(&f->cq_credits, n, __ATOMIC_ACQ_REL) >= 0)
		return 0;
	__atomic_add_fetch(&f->cq_credits, n, __ATOMIC_RELAXED);
	return -EAGAIN;
}

/* cq_release -- give back @n promised CQ entries (unsignaled successes). */
static void cq_release(struct tcp_fab *f, int64_t n)
{
	__atomic_fetch_add(&f->cq_credits, n, __ATOMIC_RELAXED);
}

static size_t tx_used(const struct tcp_link *l);

/* ------------------------------------------------------------------ */
/* send queue completion                                              */

/* complete_upto -- requests before @psn have executed at the target. */
static void complete_upto(struct tcp_link *l, uint32_t psn)
{
	struct tcp_fab *f = l->fab;

	while (psn_before(l->sq_done, psn) && psn_before(l->sq_done, l->sq_issue)) {
		struct tcp_sqe *e = &l->sq[l->sq_done & l->sq_mask];

		if (e->wr.flags & FAB_WR_SIGNALED)
			cq_push(f, l, e->wr.wrid, e->wr.opcode, 0, e->wr.len, 0, 0);
		else
			cq_release(f, 1);
		if (e->wr.opcode == FAB_OP_CAS || e->wr.opcode == FAB_OP_FAA)
			l->atomics_inflight--;
		l->sq_done++;
	}
	__atomic_store_n(&l->sq_free, l->sq_done, __ATOMIC_RELEASE);
}

/*
 * flush_sq -- fail every request not yet completed: the one at fault
 * (l->fault_psn when set, else the oldest) with @first_err, the others
 * with @err.
 */
static void flush_sq(struct tcp_link *l, int first_err, int err)
{
	uint32_t prod = __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE);
	uint32_t fault = l->has_fault ? l->fault_psn : l->sq_done;
	struct tcp_fab *f = l->fab;

	for (; psn_before(l->sq_done, prod); l->sq_done++) {
		struct tcp_sqe *e = &l->sq[l->sq_done & l->sq_mask];

		cq_push(f, l, e->wr.wrid, e->wr.opcode, l->sq_done == fault ? first_err : err, 0, 0,
		        0);
	}
	l->has_fault = 0;
	l->sq_issue = l->sq_done;
	l->read_inflight = 0;
	l->atomics_inflight = 0;
	__atomic_store_n(&l->sq_free, l->sq_done, __ATOMIC_RELEASE);
}

static void flush_rq(struct tcp_link *l)
{
	uint32_t prod = __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);

	for (; l->rq_cons != prod; l->rq_cons++) {
		struct fab_recv_wr *r = &l->rq[l->rq_cons & l->rq_mask];

		cq_push(l->fab, l, r->wrid, FAB_OP_RECV, -ECANCELED, 0, 0, 0);
	}
	__atomic_store_n(&l->rq_free, l->rq_cons, __ATOMIC_RELEASE);
}

static void link_set_out(struct tcp_link *l, int want)
{
	struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = l};

	if (l->want_out == want || l->fd < 0)
		return;
	l->want_out = want;
	if (epoll_ctl(l->fab->epfd, EPOLL_CTL_MOD, l->fd, &ev) < 0)
		lc_log_warn("tcp: epoll_ctl on link %u: %s", l->base.id, strerror(errno));
}

/*
 * link_fail -- take @l down: the first outstanding request completes with
 * @first_err, the others and every posted RECV with @err; later posts are
 * flushed with @err. The socket is closed: the peer sees the link die.
 */
static void link_fail(struct tcp_link *l, int first_err, int err, const char *why)
{
	if (l->state == LINK_DOWN)
		return;
	if (why != NULL)
		lc_log_warn("tcp: link %u down: %s", l->base.id, why);
	l->state = LINK_DOWN;
	__atomic_store_n(&l->cause, first_err, __ATOMIC_RELEASE);
	__atomic_store_n(&l->err, err, __ATOMIC_RELEASE);
	flush_sq(l, first_err, err);
	flush_rq(l);
	if (l->nak_sent && l->fd >= 0) {
		/*
		 * Closing with the peer's later requests unread would send a RST,
		 * which may destroy the NAK before the peer reads it: half-close
		 * once the NAK is out and read until the peer closes (drain()).
		 */
		l->draining = 1;
		l->drain_deadline =
		    lc_now_ns() + (uint64_t)l->fab->base.attr.timeout_ms * 1000000ull;
		link_set_out(l, tx_used(l) > 0);
	} else if (l->fd >= 0) {
		epoll_ctl(l->fab->epfd, EPOLL_CTL_DEL, l->fd, NULL);
		close(l->fd);
		l->fd = -1;
	}
	cq_wake(l->fab);
}

/* ------------------------------------------------------------------ */
/* output                                                             */

/* tx_room -- free bytes at the end of the tx buffer, compacting first if needed. */
static size_t tx_room(struct tcp_link *l, size_t need)
{
	if (l->tx_cap - l->tx_len < need && l->tx_off > 0) {
		memmove(l->tx, l->tx + l->tx_off, l->tx_len - l->tx_off);
		l->tx_len -= l->tx_off;
		l->tx_off = 0;
	}
	return l->tx_cap - l->tx_len;
}

/* tx_used -- bytes pending in the tx buffer. */
static size_t tx_used(const struct tcp_link *l)
{
	return l->tx_len - l->tx_off;
}

/* tx_frame -- append a frame header and room for @f->len payload bytes; returns the payload. */
static uint8_t *tx_frame(struct tcp_link *l, const struct tcp_frame *f)
{
	uint8_t *p;

	if (tx_room(l, TCP_HDR_LEN + f->len) < TCP_HDR_LEN + f->len)
		return NULL;
	p = l->tx + l->tx_len;
	tcp_wire_encode(f, p);
	l->tx_len += TCP_HDR_LEN + f->len;
	return p + TCP_HDR_LEN;
}

/* tx_response -- append a response; the peer's limits guarantee room. */
static uint8_t *tx_response(struct tcp_link *l, const struct tcp_frame *f)
{
	uint8_t *p = tx_frame(l, f);

	if (p == NULL)
		link_fail(l, -EPROTO, -EPROTO, "peer exceeded its announced window");
	return p;
}

static void tx_flush(struct tcp_link *l)
{
	while (l->state != LINK_DOWN && tx_used(l) > 0) {
		ssize_t n = send(l->fd, l->tx + l->tx_off, tx_used(l), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				link_set_out(l, 1);
				return;
			}
			link_fail(l, -ECONNRESET, -ECONNRESET, strerror(errno));
			return;
		}
		l->tx_off += (size_t)n;
	}
	if (l->state != LINK_DOWN) {
		l->tx_off = l->tx_len = 0;
		link_set_out(l, 0);
	}
}

/* drain -- a link down after our NAK: finish sending, half-close, discard input to EOF. */
static void drain(struct tcp_link *l, int timed_out)
{
	uint8_t junk[4096];
	ssize_t n;

	while (!timed_out && tx_used(l) > 0) {
		n = send(l->fd, l->tx + l->tx_off, tx_used(l), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* EPOLLOUT stays armed */
		if (n < 0)
			timed_out = 1;
		else
			l->tx_off += (size_t)n;
	}
	if (!timed_out && l->draining == 1) {
		shutdown(l->fd, SHUT_WR);
		link_set_out(l, 0);
		l->draining = 2;
	}
	for (int i = 0; !timed_out && i < 64; i++) {
		n = recv(l->fd, junk, sizeof(junk), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		break; /* EOF or error */
	}
	epoll_ctl(l->fab->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	close(l->fd);
	l->fd = -1;
	l->draining = 0;
}

/* send_acks -- answer executed requests and announce new RECVs. */
static void send_acks(struct tcp_link *l)
{
	uint32_t last = l->exec_psn - 1;
	uint32_t rq_prod = __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);

	if (l->state != LINK_UP)
		return;
	if (l->acked_psn != last && !l->nak_sent) {
		struct tcp_frame f = {.type = TCP_F_ACK, .psn = last};

		if (tx_response(l, &f) == NULL)
			return;
		l->acked_psn = last;
	}
	if (l->credits_sent != rq_prod && !l->nak_sent) {
		struct tcp_frame f = {.type = TCP_F_CREDIT, .a = rq_prod};

		/* rq_prod is a 32-bit count: the peer tracks the same wrap */
		if (tx_response(l, &f) == NULL)
			return;
		l->credits_sent = rq_prod;
	}
}

/* ------------------------------------------------------------------ */
/* issuing requests                                                   */

static int local_ok(struct tcp_link *l, const struct fab_wr *wr, unsigned access)
{
	void *p;

	if (wr->len == 0 || (wr->flags & FAB_WR_INLINE))
		return 0;
	return keytab_check(&l->fab->kt, wr->lkey, (uintptr_t)wr->local, wr->len, access, &p);
}

/*
 * issue_one -- put as much of request @e on the wire as limits allow.
 * Returns 1 when it is fully issued, 0 when it must wait, -1 when the link failed.
 */
static int issue_one(struct tcp_link *l, struct tcp_sqe *e, uint32_t psn)
{
	const struct fab_wr *wr = &e->wr;
	size_t req_room = l->tx_cap - l->tx_reserve;
	struct tcp_frame f = {.psn = psn, .key = wr->rkey, .addr = wr->remote_addr};
	const uint8_t *src =
	    (wr->flags & FAB_WR_INLINE)
	        ? l->sq_inline + (size_t)(psn & l->sq_mask) * l->fab->base.attr.max_inline
	        : wr->local;
	uint8_t *p;

	if ((wr->flags & FAB_WR_FENCE) && e->sent == 0 &&
	    (l->read_inflight > 0 || l->atomics_inflight > 0 || l->sq_done != psn))
		return 0; /* wait for earlier READs and atomics to complete */

	if (e->sent == 0) {
		unsigned acc = (wr->opcode == FAB_OP_READ || wr->opcode == FAB_OP_CAS ||
		                wr->opcode == FAB_OP_FAA)
		                   ? FAB_ACCESS_LOCAL_WRITE
		                   : 0;

		if (local_ok(l, wr, acc) != 0) {
			l->fault_psn = psn; /* earlier requests in flight are flushed, not blamed */
			l->has_fault = 1;
			link_fail(l, -EFAULT, -ECANCELED, "local buffer outside its region (lkey)");
			return -1;
		}
	}

	switch (wr->opcode) {
	case FAB_OP_CAS:
	case FAB_OP_FAA:
		if (tx_used(l) + TCP_HDR_LEN > req_room)
			return 0;
		f.type = wr->opcode == FAB_OP_CAS ? TCP_F_CAS : TCP_F_FAA;
		f.flags = TCP_FL_FIRST | TCP_FL_LAST;
		f.a = wr->opcode == FAB_OP_CAS ? wr->compare : wr->swap;
		f.b = wr->swap;
		tx_frame(l, &f);
		l->atomics_inflight++;
		return 1;
	case FAB_OP_READ:
		do {
			uint32_t left = wr->len - e->sent;
			uint32_t seg = left < TCP_MAX_SEG ? left : TCP_MAX_SEG;

			if (wr->len == 0)
				seg = 0;
			if (l->read_inflight + seg > l->peer_read_window ||
			    tx_used(l) + TCP_HDR_LEN > req_room)
				return 0;
			f.type = TCP_F_READ;
			f.addr = wr->remote_addr + e->sent;
			f.a = seg ? seg : 1; /* a 0-byte READ asks for 1 byte it ignores */
			f.flags =
			    (e->sent == 0 ? TCP_FL_FIRST : 0) | (seg == left ? TCP_FL_LAST : 0);
			tx_frame(l, &f);
			l->read_inflight += f.a;
			e->sent += seg;
		} while (e->sent < wr->len);
		return 1;
	case FAB_OP_WRITE:
	case FAB_OP_WRITE_IMM:
	case FAB_OP_SEND:
		if (wr->opcode != FAB_OP_WRITE && e->sent == 0 &&
		    l->credits_used == l->peer_credits)
			return 0; /* no RECV posted at the target yet (RNR) */
		do {
			uint32_t left = wr->len - e->sent;
			uint32_t seg = left < TCP_MAX_SEG ? left : TCP_MAX_SEG;

			if (tx_used(l) + TCP_HDR_LEN + seg > req_room && tx_used(l) > 0)
				return 0;
			f.type = wr->opcode == FAB_OP_WRITE  ? TCP_F_WRITE
			         : wr->opcode == FAB_OP_SEND ? TCP_F_SEND
			                                     : TCP_F_WRITE_IMM;
			f.len = seg;
			f.addr = wr->remote_addr + e->sent;
			f.flags =
			    (e->sent == 0 ? TCP_FL_FIRST : 0) | (seg == left ? TCP_FL_LAST : 0);
			f.a = wr->len;
			if (wr->opcode == FAB_OP_SEND) {
				f.key = wr->imm;
				f.flags |= TCP_FL_HAS_IMM;
			}
			f.b = wr->imm;
			p = tx_frame(l, &f);
			if (p == NULL)
				return 0;
			copy_out(p, src + e->sent, seg);
			if (e->sent == 0 && wr->opcode != FAB_OP_WRITE)
				l->credits_used++;
			e->sent += seg;
		} while (e->sent < wr->len);
		return 1;
	}
	return -1;
}

/* link_issue -- move posted requests onto the wire. Returns whether any moved. */
static int link_issue(struct tcp_link *l)
{
	uint32_t prod = __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE);
	int moved = 0;

	if (l->state == LINK_DOWN) {
		if (l->sq_done != prod) {
			flush_sq(l, l->err, l->err);
			cq_wake(l->fab);
			return 1;
		}
		return 0;
	}
	if (l->state != LINK_UP)
		return 0;
	while (l->sq_issue != prod) {
		struct tcp_sqe *e = &l->sq[l->sq_issue & l->sq_mask];
		int r = issue_one(l, e, l->sq_issue);

		if (r <= 0)
			return moved || r < 0;
		if (l->sq_done == l->sq_issue)
			l->last_rx_ns = lc_now_ns(); /* the dead-peer clock starts now */
		l->sq_issue++;
		moved = 1;
	}
	return moved;
}

/* ------------------------------------------------------------------ */
/* executing requests (target) and responses (initiator)              */

static void target_nak(struct tcp_link *l, uint32_t psn, int err)
{
	struct tcp_frame f = {.type = TCP_F_NAK, .psn = psn, .key = (uint32_t)-err};

	if (l->nak_sent)
		return;
	lc_log_info("tcp: link %u: refused request %u: %s", l->base.id, psn, strerror(-err));
	l->nak_sent = 1;
	send_acks(l); /* answer what executed before it */
	tx_response(l, &f);
}

/* deliver_recv -- place SEND bytes into the current RECV buffer. */
static int deliver_recv(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data)
{
	struct fab_recv_wr *r;

	if (l->rq_cons == __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE))
		return -EPROTO; /* the peer sent without a credit */
	r = &l->rq[l->rq_cons & l->rq_mask];
	if ((f->flags & TCP_FL_FIRST))
		l->rq_fill = 0;
	if (f->len > r->len - l->rq_fill)
		return -EMSGSIZE;
	memcpy((uint8_t *)r->local + l->rq_fill, data, f->len);
	l->rq_fill += f->len;
	if (f->flags & TCP_FL_LAST) {
		cq_push(l->fab, l, r->wrid, FAB_OP_RECV, 0, l->rq_fill, f->key, 1);
		l->rq_cons++;
		__atomic_store_n(&l->rq_free, l->rq_cons, __ATOMIC_RELEASE);
	}
	return 0;
}

/* exec_request -- run one request frame at the target. */
static void exec_request(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data)
{
	struct tcp_fab *fab = l->fab;
	void *p;
	int ret;

	if (l->nak_sent)
		return; /* error state: everything after the refused request is dropped */
	if (f->psn != l->exec_psn) {
		link_fail(l, -EPROTO, -EPROTO, "request out of sequence");
		return;
	}
	switch (f->type) {
	case TCP_F_WRITE:
	case TCP_F_WRITE_IMM:
		ret = keytab_check(&fab->kt, f->key, f->addr, tcp_wire_write_span(f),
		                   FAB_ACCESS_REMOTE_WRITE, &p);
		if (ret == 0 && f->type == TCP_F_WRITE_IMM && (f->flags & TCP_FL_FIRST) &&
		    l->rq_cons == __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE))
			ret = -EPROTO;
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		land_write(fab, p, data, f->len);
		if (f->type == TCP_F_WRITE_IMM) {
			l->imm_len = (f->flags & TCP_FL_FIRST) ? f->len : l->imm_len + f->len;
			if (f->flags & TCP_FL_LAST) {
				struct fab_recv_wr *r = &l->rq[l->rq_cons++ & l->rq_mask];

				cq_push(fab, l, r->wrid, FAB_OP_RECV_IMM, 0, l->imm_len,
				        (uint32_t)f->b, 1);
				__atomic_store_n(&l->rq_free, l->rq_cons, __ATOMIC_RELEASE);
			}
		}
		break;
	case TCP_F_SEND:
		ret = deliver_recv(l, f, data);
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		break;
	case TCP_F_READ: {
		struct tcp_frame r = {
		    .type = TCP_F_READ_RESP, .psn = f->psn, .len = (uint32_t)f->a};
		uint8_t *out;

		ret = keytab_check(&fab->kt, f->key, f->addr, f->a, FAB_ACCESS_REMOTE_READ, &p);
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		send_acks(l); /* keep ACKs in PSN order ahead of the response */
		out = tx_response(l, &r);
		if (out == NULL)
			return;
		copy_out(out, p, f->a);
		if (f->flags & TCP_FL_LAST)
			l->acked_psn = f->psn;
		break;
	}
	case TCP_F_CAS:
	case TCP_F_FAA: {
		struct tcp_frame r = {.type = TCP_F_ATOMIC_RESP, .psn = f->psn};

		ret = keytab_check(&fab->kt, f->key, f->addr, 8, FAB_ACCESS_REMOTE_ATOMIC, &p);
		if (ret == 0 && (f->addr & 7))
			ret = -EINVAL;
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		if (f->type == TCP_F_CAS) {
			uint64_t expected = f->a;

			__atomic_compare_exchange_n((uint64_t *)p, &expected, f->b, false,
			                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			r.a = expected; /* the old value either way */
		} else {
			r.a = __atomic_fetch_add((uint64_t *)p, f->a, __ATOMIC_SEQ_CST);
		}
		send_acks(l);
		if (tx_response(l, &r) == NULL)
			return;
		l->acked_psn = f->psn;
		break;
	}
	}
	if (f->flags & TCP_FL_LAST)
		l->exec_psn++;
}

/* sqe_of -- the outstanding request @psn names, or NULL when it names none. */
static struct tcp_sqe *sqe_of(struct tcp_link *l, uint32_t psn)
{
	struct tcp_sqe *e = &l->sq[psn & l->sq_mask];

	if (psn_before(psn, l->sq_done))
		return NULL;
	/* a READ bigger than the window is answered while still being issued */
	if (psn_before(psn, l->sq_issue) || (psn == l->sq_issue && e->sent > 0))
		return e;
	return NULL;
}

/* on_response -- an initiator-side frame: ACK, READ data, atomic value, NAK, credits. */
static void on_response(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data)
{
	struct tcp_sqe *e;

	switch (f->type) {
	case TCP_F_ACK:
		if (!psn_before(f->psn, l->sq_issue)) {
			link_fail(l, -EPROTO, -EPROTO, "ACK for a request never sent");
			return;
		}
		complete_upto(l, f->psn + 1);
		return;
	case TCP_F_CREDIT:
		l->peer_credits = (l->peer_credits & ~0xffffffffull) | (f->a & 0xffffffffull);
		if (l->peer_credits < l->credits_used)
			l->peer_credits += 1ull << 32;
		return;
	case TCP_F_READ_RESP:
		e = sqe_of(l, f->psn);
		if (e == NULL || e->wr.opcode != FAB_OP_READ ||
		    (uint64_t)e->recvd + f->len > (e->wr.len ? e->wr.len : 1)) {
			link_fail(l, -EPROTO, -EPROTO, "unexpected READ response");
			return;
		}
		if (e->wr.len)
			memcpy((uint8_t *)e->wr.local + e->recvd, data, f->len);
		e->recvd += f->len;
		l->read_inflight -= f->len;
		if (e->recvd >= e->wr.len)
			complete_upto(l, f->psn + 1);
		return;
	case TCP_F_ATOMIC_RESP:
		e = sqe_of(l, f->psn);
		if (e == NULL || (e->wr.opcode != FAB_OP_CAS && e->wr.opcode != FAB_OP_FAA)) {
			link_fail(l, -EPROTO, -EPROTO, "unexpected atomic response");
			return;
		}
		memcpy(e->wr.local, &f->a, 8);
		complete_upto(l, f->psn + 1);
		return;
	case TCP_F_NAK:
		e = sqe_of(l, f->psn);
		if (e == NULL || f->key == 0 || f->key > 4095) {
			link_fail(l, -EPROTO, -EPROTO, "unexpected NAK");
			return;
		}
		complete_upto(l, f->psn);
		link_fail(l, -(int)f->key, -ECANCELED, NULL);
		lc_log_info("tcp: link %u: request %u refused by the peer: %s", l->base.id, f->psn,
		            strerror((int)f->key));
		return;
	}
}

/* ------------------------------------------------------------------ */
/* links                                                              */

static int set_sock_opts(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

static struct tcp_link *link_new(struct tcp_fab *f, int fd)
{
	const struct fab_attr *a = &f->base.attr;
	struct tcp_link *l = calloc(1, sizeof(*l));
	uint32_t sq = 1, rq = 1;

	if (l == NULL)
		return NULL;
	while (sq < a->sq_depth)
		sq <<= 1;
	while (rq < a->rq_depth)
		rq <<= 1;
	l->fab = f;
	l->fd = fd;
	l->base.fab = &f->base;
	l->sq_mask = sq - 1;
	l->rq_mask = rq - 1;
	l->sq = calloc(sq, sizeof(*l->sq));
	l->sq_inline = malloc((size_t)sq * a->max_inline);
	l->rq = calloc(rq, sizeof(*l->rq));
	l->rx = malloc(TCP_RX_CAP);
	l->acked_psn = (uint32_t)-1;
	pthread_spin_init(&l->post_lock, PTHREAD_PROCESS_PRIVATE);
	if (l->sq == NULL || l->sq_inline == NULL || l->rq == NULL || l->rx == NULL) {
		free(l->sq);
		free(l->sq_inline);
		free(l->rq);
		free(l->rx);
		free(l);
		return NULL;
	}
	return l;
}

/* link_setup_tx -- size the tx buffer from the peer's announced limits. */
static int link_setup_tx(struct tcp_link *l, const struct tcp_hello *h)
{
	l->peer_sq_depth = h->sq_depth;
	l->peer_read_window = h->read_window;
	/* READ data + one header per READ segment or atomic the peer may have in flight */
	l->tx_reserve =
	    h->read_window + ((size_t)h->sq_depth + h->read_window / TCP_MAX_SEG + 8) * TCP_HDR_LEN;
	l->tx_cap = l->tx_reserve + 2 * (TCP_HDR_LEN + TCP_MAX_SEG);
	l->tx = malloc(l->tx_cap);
	return l->tx ? 0 : -ENOMEM;
}

static void link_free(struct tcp_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	pthread_spin_destroy(&l->post_lock);
	free(l->sq);
	free(l->sq_inline);
	free(l->rq);
	free(l->rx);
	free(l->tx);
	free(l);
}

/* link_publish -- add @l to the fab's links; the NIC picks it up. */
static int link_publish(struct tcp_fab *f, struct tcp_link *l)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};

	pthread_mutex_lock(&f->lock);
	if (f->nlinks == TCP_MAX_LINKS) {
		pthread_mutex_unlock(&f->lock);
		return -ENOSPC;
	}
	l->base.id = ++f->next_link_id;
	/* input may be handled before the NIC's view has the link: it is complete here */
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, l->fd, &ev) < 0) {
		int ret = -errno;

		pthread_mutex_unlock(&f->lock);
		return ret;
	}
	f->links[f->nlinks++] = l;
	__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void nic_kick(struct tcp_fab *f)
{
	uint64_t one = 1;

	if (write(f->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_warn("tcp: cannot wake the NIC thread: %s", strerror(errno));
}

/* ------------------------------------------------------------------ */
/* the NIC thread                                                     */

static void on_hello(struct tcp_link *l, const struct tcp_frame *fr, const uint8_t *data)
{
	struct tcp_fab *f = l->fab;
	struct tcp_hello h, mine = {.magic = TCP_MAGIC, .version = TCP_VERSION};
	struct tcp_frame ack = {.type = TCP_F_HELLO_ACK, .len = TCP_HELLO_LEN};

	if (fr->type != TCP_F_HELLO || tcp_hello_decode(data, fr->len, &h) != 0) {
		lc_log_warn("tcp: link %u: bad HELLO from the connecting peer", l->base.id);
		link_fail(l, -EPROTO, -EPROTO, NULL);
		return;
	}
	if (link_setup_tx(l, &h) != 0) {
		link_fail(l, -ENOMEM, -ENOMEM, "out of memory for the tx buffer");
		return;
	}
	memcpy(l->priv, h.priv, h.priv_len);
	l->priv_len = h.priv_len;
	mine.sq_depth = l->sq_mask + 1;
	mine.read_window = TCP_READ_WINDOW;
	tcp_hello_encode(&mine, tx_frame(l, &ack));
	l->state = LINK_UP;
	pthread_mutex_lock(&f->lock);
	l->in_accept_q = 1;
	if (f->accept_tail)
		f->accept_tail->next_q = l;
	else
		__atomic_store_n(&f->accept_head, l,
		                 __ATOMIC_RELEASE); /* tcp_arm() peeks without the lock */
	f->accept_tail = l;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	cq_wake(f); /* a poller blocked on the wait fd takes accepted links too */
}

/* link_input -- read what the socket has and process whole frames. */
static void link_input(struct tcp_link *l)
{
	for (int round = 0; round < 4 && l->state != LINK_DOWN; round++) {
		ssize_t n = recv(l->fd, l->rx + l->rx_len, TCP_RX_CAP - l->rx_len, MSG_DONTWAIT);
		size_t off = 0;

		if (n == 0) {
			lc_log_info("tcp: link %u: peer closed the connection", l->base.id);
			link_fail(l, -ECONNRESET, -ECONNRESET, NULL);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				link_fail(l, -ECONNRESET, -ECONNRESET, strerror(errno));
			break;
		}
		l->rx_len += (size_t)n;
		l->last_rx_ns = lc_now_ns();
		while (l->state != LINK_DOWN) {
			struct tcp_frame fr;
			long flen = tcp_wire_decode(l->rx + off, l->rx_len - off, &fr);
			const uint8_t *data = l->rx + off + TCP_HDR_LEN;

			if (flen < 0) {
				link_fail(l, -EPROTO, -EPROTO, "malformed frame from the peer");
				return;
			}
			if (flen == 0 || (size_t)flen > l->rx_len - off)
				break;
			if (l->state == LINK_HANDSHAKE)
				on_hello(l, &fr, data);
			else if (fr.type >= TCP_F_WRITE && fr.type <= TCP_F_SEND)
				exec_request(l, &fr, data);
			else if (fr.type >= TCP_F_ACK && fr.type <= TCP_F_CREDIT)
				on_response(l, &fr, data);
			else
				link_fail(l, -EPROTO, -EPROTO, "unexpected frame type");
			off += (size_t)flen;
		}
		if (l->state == LINK_DOWN)
			return;
		memmove(l->rx, l->rx + off, l->rx_len - off);
		l->rx_len -= off;
		if ((size_t)n < TCP_RX_CAP / 2)
			break; /* the socket is probably drained */
	}
	send_acks(l);
	if (l->state != LINK_DOWN && l->nak_sent) {
		/* the refusal is the last thing the peer hears on this link */
		link_fail(l, -ECANCELED, -ECANCELED, NULL);
		drain(l, 0);
	}
}

static void nic_accept(struct tcp_fab *f)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tcp_link *l;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				lc_log_warn("tcp: accept failed: %s", strerror(errno));
			return;
		}
		set_sock_opts(fd);
		l = link_new(f, fd);
		if (l == NULL) {
			lc_log_err("tcp: out of memory accepting a link");
			close(fd);
			continue;
		}
		l->state = LINK_HANDSHAKE;
		if (link_publish(f, l) != 0) {
			lc_log_err("tcp: cannot add an accepted link");
			link_free(l);
		}
	}
}

/* nic_sync -- refresh the private view of links[] and serve close requests. */
static void nic_sync(struct tcp_fab *f)
{
	unsigned gen = __atomic_load_n(&f->links_gen, __ATOMIC_ACQUIRE);

	if (gen == f->nic_gen)
		return;
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->nlinks;) {
		struct tcp_link *l = f->links[i];

		if (l->close_req && !l->closed) {
			link_fail(l, -ECANCELED, -ECANCELED, NULL);
			/*
			 * A link already down was flushed when it failed, but
			 * requests and RECVs posted since then are still queued:
			 * they must complete too, or their ack keys wait forever.
			 */
			flush_sq(l, -ECANCELED, -ECANCELED);
			flush_rq(l);
			/*
			 * A link already down may still hold its fd in our epoll
			 * (draining after a NAK): release it before the closer
			 * frees the link, or a later event reaches freed memory.
			 */
			if (l->fd >= 0) {
				epoll_ctl(f->epfd, EPOLL_CTL_DEL, l->fd, NULL);
				close(l->fd);
				l->fd = -1;
			}
			l->draining = 0;
			l->closed = 1;
			f->links[i] = f->links[--f->nlinks];
			pthread_cond_broadcast(&f->cond);
			continue;
		}
		i++;
	}
	memcpy(f->nic_links, f->links, f->nlinks * sizeof(f->links[0]));
	f->nic_nlinks = f->nlinks;
	f->nic_gen = __atomic_load_n(&f->links_gen, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
}

/* nic_work_pending -- anything posted that the NIC has not taken yet. */
static int nic_work_pending(struct tcp_fab *f)
{
	if (__atomic_load_n(&f->links_gen, __ATOMIC_ACQUIRE) != f->nic_gen)
		return 1;
	for (unsigned i = 0; i < f->nic_nlinks; i++) {
		struct tcp_link *l = f->nic_links[i];

		if (__atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE) != l->sq_issue &&
		    l->state != LINK_HANDSHAKE)
			return 1;
		if (l->state == LINK_UP &&
		    __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE) != (uint32_t)l->credits_sent)
			return 1;
	}
	return 0;
}

/* nic_timers -- fail links whose peer stopped answering; returns the next check in ms. */
static int nic_timers(struct tcp_fab *f, uint64_t now)
{
	uint64_t limit = (uint64_t)f->base.attr.timeout_ms * 1000000ull;
	int next = -1;

	for (unsigned i = 0; i < f->nic_nlinks; i++) {
		struct tcp_link *l = f->nic_links[i];

		if (l->draining && now >= l->drain_deadline)
			drain(l, 1);
		if (l->draining) {
			int ms = (int)((l->drain_deadline - now) / 1000000ull) + 1;

			next = next < 0 || ms < next ? ms : next;
		}
		if (l->state != LINK_UP || l->sq_done == l->sq_issue || l->last_rx_ns > now)
			continue;
		if (now - l->last_rx_ns >= limit) {
			lc_log_warn("tcp: link %u: no answer from the peer for %u ms", l->base.id,
			            f->base.attr.timeout_ms);
			link_fail(l, -ETIMEDOUT, -ETIMEDOUT, NULL);
			continue;
		}
		int ms = (int)((limit - (now - l->last_rx_ns)) / 1000000ull) + 1;
		if (next < 0 || ms < next)
			next = ms;
	}
	return next;
}

static void *nic_main(void *arg)
{
	struct tcp_fab *f = arg;
	struct epoll_event ev[TCP_EVENTS];
	uint64_t spin_ns = (uint64_t)f->base.attr.spin_us * 1000ull, last_busy = lc_now_ns();

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		uint64_t t0 = lc_now_ns(), cq0 = __atomic_load_n(&f->cq_tail, __ATOMIC_RELAXED);
		int busy = 0, timeout, n, tnext;

		__atomic_add_fetch(&f->nic_busy, 1, __ATOMIC_SEQ_CST); /* odd: touching memory */
		nic_sync(f);
		for (unsigned i = 0; i < f->nic_nlinks; i++) {
			struct tcp_link *l = f->nic_links[i];

			busy |= link_issue(l);
			if (l->state == LINK_UP) {
				send_acks(l);
				tx_flush(l);
			}
		}
		tnext = nic_timers(f, lc_now_ns());
		__atomic_add_fetch(&f->nic_busy, 1, __ATOMIC_SEQ_CST);

		if (busy || t0 - last_busy < spin_ns) {
			timeout = 0;
		} else {
			__atomic_store_n(&f->nic_sleeping, 1, __ATOMIC_SEQ_CST);
			timeout = nic_work_pending(f) ? 0 : tnext;
		}
		n = epoll_wait(f->epfd, ev, TCP_EVENTS, timeout);
		__atomic_store_n(&f->nic_sleeping, 0, __ATOMIC_SEQ_CST);

		__atomic_add_fetch(&f->nic_busy, 1, __ATOMIC_SEQ_CST);
		for (int i = 0; i < n; i++) {
			struct tcp_link *l = ev[i].data.ptr;

			if (l == NULL) {
				nic_accept(f);
				continue;
			}
			if (l == (struct tcp_link *)f) {
				uint64_t v;

				if (read(f->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					lc_log_warn("tcp: eventfd read: %s", strerror(errno));
				continue;
			}
			if (l->state == LINK_DOWN) {
				if (l->draining)
					drain(l, 0);
				continue;
			}
			if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				link_input(l);
			if (l->state != LINK_DOWN)
				tx_flush(l);
			busy = 1;
		}
		__atomic_add_fetch(&f->nic_busy, 1, __ATOMIC_SEQ_CST);
		if (busy || n > 0)
			last_busy = lc_now_ns();
		if (__atomic_load_n(&f->cq_tail, __ATOMIC_RELAXED) != cq0)
			cq_wake(f);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* ops                                                                */

static int tcp_listen(struct tcp_fab *f, const char *where)
{
	struct fab_addr a;
	int one = 1, ret;

	ret = fab_addr_parse(where ? where : "127.0.0.1:0", 0, &a);
	if (ret) {
		lc_log_err("tcp: bad listen address %s", where);
		return ret;
	}
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->lfd < 0)
		return -errno;
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(f->lfd, (struct sockaddr *)&a.ss, a.len) < 0 || listen(f->lfd, 128) < 0) {
		ret = -errno;
		lc_log_err("tcp: cannot listen on %s: %s", where ? where : "127.0.0.1:0",
		           strerror(-ret));
		return ret;
	}
	f->addr.len = sizeof(f->addr.ss);
	if (getsockname(f->lfd, (struct sockaddr *)&f->addr.ss, &f->addr.len) < 0)
		return -errno;
	return 0;
}

static void tcp_close(struct fab *fab);

static int tcp_open(const struct fab_attr *attr, struct fab **out)
{
	struct tcp_fab *f;
	struct epoll_event ev;
	const char *slow = getenv("LOCO_TCP_SLOW_WRITE");
	uint32_t cq = 1;
	int ret;

	if (attr->max_inline > TCP_MAX_SEG || attr->sq_depth > 65536 || attr->rq_depth > 65536 ||
	    attr->cq_depth > (1u << 24))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->lfd = f->epfd = f->evfd = f->cq_evfd = -1;
	f->base.attr = *attr;
	fab_ops_fill(&f->ops, &fab_tcp_ops);
	f->base.ops = &f->ops;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->rng = lc_now_ns() | 1;
	if (slow != NULL && *slow != '\0')
		f->slow_ns = strtoull(slow, NULL, 10);
	/*
	 * Busy-polling only pays with a spare core: on a small machine the
	 * NIC thread's spin steals the CPU the application waits on
	 * (bench/: 2 cores, 8 B READ ~18 us with no spin, ~115 us with 50 us).
	 */
	if (attr->spin_us == FAB_SPIN_AUTO)
		f->base.attr.spin_us = sysconf(_SC_NPROCESSORS_ONLN) > 4 ? 20 : 0;
	if (getenv("LOCO_TCP_SPIN_US") != NULL)
		f->base.attr.spin_us = (uint32_t)strtoul(getenv("LOCO_TCP_SPIN_US"), NULL, 10);
	while (cq < attr->cq_depth)
		cq <<= 1;
	f->cq_mask = cq - 1;
	f->cq_credits = cq;
	f->cq = calloc(cq, sizeof(*f->cq));
	if (f->cq == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = keytab_init(&f->kt, TCP_KEYS);
	if (ret)
		goto err_close;
	ret = tcp_listen(f, attr->listen_addr);
	if (ret)
		goto err_close;
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->cq_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->epfd < 0 || f->evfd < 0 || f->cq_evfd < 0) {
		ret = -errno;
		lc_log_err("tcp: cannot create the NIC's event fds: %s", strerror(-ret));
		goto err_close;
	}
	ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->lfd, &ev);
	ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = f};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->evfd, &ev);
	ret = -pthread_create(&f->nic, NULL, nic_main, f);
	if (ret) {
		lc_log_err("tcp: cannot start the NIC thread: %s", strerror(-ret));
		goto err_close;
	}
	*out = &f->base;
	return 0;

err_close:
	tcp_close(&f->base);
	return ret;
}

static void tcp_close(struct fab *fab)
{
	struct tcp_fab *f = to_tcp_fab(fab);

	if (f->nic) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		nic_kick(f);
		pthread_join(f->nic, NULL);
	}
	if (f->nlinks)
		lc_log_warn("tcp: closing the fabric with %u link(s) open", f->nlinks);
	for (unsigned i = 0; i < f->nlinks; i++)
		link_free(f->links[i]);
	if (f->lfd >= 0)
		close(f->lfd);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->evfd >= 0)
		close(f->evfd);
	if (f->cq_evfd >= 0)
		close(f->cq_evfd);
	keytab_fini(&f->kt);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f->cq);
	free(f);
}

static int tcp_get_addr(struct fab *fab, struct fab_addr *out)
{
	*out = to_tcp_fab(fab)->addr;
	return 0;
}

static int tcp_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                       size_t priv_len, int timeout_ms, struct fab_link **out)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	uint64_t deadline =
	    lc_now_ns() + (uint64_t)(timeout_ms < 0 ? 3600000 : timeout_ms) * 1000000ull;
	uint8_t buf[TCP_HDR_LEN + TCP_HELLO_LEN];
	struct tcp_hello h = {.magic = TCP_MAGIC, .version = TCP_VERSION};
	struct tcp_frame fr = {.type = TCP_F_HELLO, .len = TCP_HELLO_LEN};
	char where[FAB_ADDR_STRLEN] = "?";
	struct tcp_link *l;
	int fd, ret;

	if (peer == NULL || out == NULL || priv_len > FAB_PRIV_MAX || (priv_len && priv == NULL))
		return -EINVAL;
	fab_addr_format(peer, where, sizeof(where));
	fd = socket(peer->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	set_sock_opts(fd);
	if (connect(fd, (const struct sockaddr *)&peer->ss, peer->len) < 0 &&
	    errno != EINPROGRESS) {
		ret = -errno;
		goto err_close;
	}
	{
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		uint64_t now = lc_now_ns();

		ret = poll(&pfd, 1, now < deadline ? (int)((deadline - now) / 1000000ull) : 0);
		if (ret == 0) {
			ret = -ETIMEDOUT;
			goto err_close;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (ret < 0 || soerr) {
			ret = ret < 0 ? -errno : -soerr;
			goto err_close;
		}
	}
	h.priv_len = (uint16_t)priv_len;
	if (priv_len)
		memcpy(h.priv, priv, priv_len);
	for (h.sq_depth = 1; h.sq_depth < fab->attr.sq_depth;)
		h.sq_depth <<= 1;
	h.read_window = TCP_READ_WINDOW;
	tcp_wire_encode(&fr, buf);
	tcp_hello_encode(&h, buf + TCP_HDR_LEN);
	ret = lc_sock_io_full(fd, buf, sizeof(buf), 1, deadline);
	if (ret == 0)
		ret = lc_sock_io_full(fd, buf, sizeof(buf), 0, deadline);
	if (ret)
		goto err_close;
	if (tcp_wire_decode(buf, sizeof(buf), &fr) != (long)sizeof(buf) ||
	    fr.type != TCP_F_HELLO_ACK || tcp_hello_decode(buf + TCP_HDR_LEN, fr.len, &h) != 0) {
		ret = -EPROTO;
		goto err_close;
	}
	l = link_new(f, fd);
	if (l == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = link_setup_tx(l, &h);
	if (ret) {
		l->fd = -1;
		link_free(l);
		goto err_close;
	}
	l->base.ctx = ctx;
	l->state = LINK_UP;
	ret = link_publish(f, l);
	if (ret) {
		lc_log_err("tcp: cannot add the link to %s: %s", where, strerror(-ret));
		link_free(l); /* closes fd */
		return ret;
	}
	nic_kick(f);
	*out = &l->base;
	return 0;

err_close:
	lc_log_info("tcp: connect to %s failed: %s", where, strerror(-ret));
	close(fd);
	return ret;
}

static int tcp_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out,
                      void *priv, size_t *priv_len)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	struct tcp_link *l;

	if (out == NULL)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	if (fab_wait_nonnull(&f->cond, &f->lock, (void *const *)&f->accept_head, timeout_ms)) {
		pthread_mutex_unlock(&f->lock);
		return -EAGAIN;
	}
	l = f->accept_head;
	__atomic_store_n(&f->accept_head, l->next_q, __ATOMIC_RELEASE);
	if (f->accept_head == NULL)
		f->accept_tail = NULL;
	l->in_accept_q = 0;
	__atomic_store_n(&l->base.ctx, ctx, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	if (priv != NULL)
		memcpy(priv, l->priv, l->priv_len);
	if (priv_len != NULL)
		*priv_len = l->priv_len;
	*out = &l->base;
	return 0;
}

static int tcp_link_close(struct fab_link *link)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;

	pthread_mutex_lock(&f->lock);
	l->close_req = 1;
	__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
	nic_kick(f);
	while (!l->closed)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	link_free(l);
	return 0;
}

static int tcp_link_state(struct fab_link *link)
{
	return __atomic_load_n(&to_tcp_link(link)->cause, __ATOMIC_ACQUIRE);
}

static int tcp_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	struct tcp_mr *m;
	uint32_t key;
	int ret;

	if (addr == NULL || len == 0 || out == NULL || (access & ~0xfu))
		return -EINVAL;
	/* as verbs: the NIC writing into a region needs local write access */
	if ((access & (FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & FAB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	ret = keytab_add(&f->kt, addr, len, access, &key);
	if (ret) {
		free(m);
		return ret;
	}
	m->base = (struct fab_mr){
	    .fab = fab, .addr = addr, .len = len, .lkey = key, .rkey = key, .access = access};
	*out = &m->base;
	return 0;
}

static int tcp_mr_dereg(struct fab_mr *mr)
{
	struct tcp_fab *f = to_tcp_fab(mr->fab);
	unsigned seq;
	int ret = keytab_remove(&f->kt, mr->rkey);

	/*
	 * Wait until the NIC is past any access that may have looked the key
	 * up. Store (key removed) then load (nic_busy) here against the NIC's
	 * SEQ_CST increment then key load: the fence forbids the store-load
	 * reordering that TSO allows.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	seq = __atomic_load_n(&f->nic_busy, __ATOMIC_SEQ_CST);
	if (seq & 1) {
		for (int i = 0;
		     i < 1000000 && __atomic_load_n(&f->nic_busy, __ATOMIC_ACQUIRE) == seq; i++)
			sched_yield();
	}
	free(container_of(mr, struct tcp_mr, base));
	return ret;
}

static int tcp_post(struct fab_link *link, const struct fab_wr *wr, int n)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;
	uint32_t max_inline = f->base.attr.max_inline, prod;

	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		const struct fab_wr *w = &wr[i];

		switch (w->opcode) {
		case FAB_OP_CAS:
		case FAB_OP_FAA:
			if (w->len != 8 || (w->remote_addr & 7) || w->local == NULL)
				return -EINVAL;
			break;
		case FAB_OP_WRITE:
		case FAB_OP_WRITE_IMM:
		case FAB_OP_READ:
		case FAB_OP_SEND:
			if ((w->len && w->local == NULL) || w->len > (1u << 31))
				return -EINVAL;
			if ((w->flags & FAB_WR_INLINE) &&
			    (w->len > max_inline || w->opcode == FAB_OP_READ))
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
		if (w->flags & ~(FAB_WR_SIGNALED | FAB_WR_INLINE | FAB_WR_FENCE))
			return -EINVAL;
	}

	pthread_spin_lock(&l->post_lock);
	prod = l->sq_prod;
	if (prod - __atomic_load_n(&l->sq_free, __ATOMIC_ACQUIRE) + (uint32_t)n > l->sq_mask + 1) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	if (cq_reserve(f, n) != 0) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	for (int i = 0; i < n; i++, prod++) {
		struct tcp_sqe *e = &l->sq[prod & l->sq_mask];

		e->wr = wr[i];
		e->sent = e->recvd = 0;
		if (wr[i].flags & FAB_WR_INLINE)
			copy_out(l->sq_inline + (size_t)(prod & l->sq_mask) * max_inline,
			         wr[i].local, wr[i].len);
	}
	/* pairs with the acquire load of sq_prod in link_issue() */
	__atomic_store_n(&l->sq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->post_lock);

	/* wake the NIC only if it sleeps; pairs with its SEQ_CST store before epoll_wait */
	if (__atomic_exchange_n(&f->nic_sleeping, 0, __ATOMIC_SEQ_CST))
		nic_kick(f);
	return 0;
}

static int tcp_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;
	uint32_t prod;

	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		void *p;

		if (wr[i].len && keytab_check(&f->kt, wr[i].lkey, (uintptr_t)wr[i].local, wr[i].len,
		                              FAB_ACCESS_LOCAL_WRITE, &p) != 0)
			return -EINVAL;
	}
	pthread_spin_lock(&l->post_lock);
	prod = l->rq_prod;
	if (prod - __atomic_load_n(&l->rq_free, __ATOMIC_ACQUIRE) + (uint32_t)n > l->rq_mask + 1) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	if (cq_reserve(f, n) != 0) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	for (int i = 0; i < n; i++, prod++)
		l->rq[prod & l->rq_mask] = wr[i];
	/* pairs with the acquire loads of rq_prod in the NIC (credits, delivery) */
	__atomic_store_n(&l->rq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->post_lock);
	if (__atomic_exchange_n(&f->nic_sleeping, 0, __ATOMIC_SEQ_CST))
		nic_kick(f);
	return 0;
}

static int tcp_poll(struct fab *fab, struct fab_wc *wc, int max)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	uint64_t head = __atomic_load_n(&f->cq_head, __ATOMIC_RELAXED);
	uint64_t tail = __atomic_load_n(&f->cq_tail, __ATOMIC_ACQUIRE);
	int n = 0;

	if (wc == NULL || max <= 0)
		return -EINVAL;
	for (; head != tail && n < max; head++, n++)
		wc[n] = f->cq[head & f->cq_mask];
	if (n) {
		__atomic_store_n(&f->cq_head, head, __ATOMIC_RELEASE);
		cq_release(f, n);
		/* the arm is one-shot, as ibv_req_notify_cq(): whoever polls disarms */
		if (__atomic_load_n(&f->poll_waiting, __ATOMIC_RELAXED))
			__atomic_store_n(&f->poll_waiting, 0, __ATOMIC_RELAXED);
	}
	return n;
}

static int tcp_wait_fd(struct fab *fab)
{
	return to_tcp_fab(fab)->cq_evfd;
}

static int tcp_arm(struct fab *fab)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	uint64_t v;

	if (read(f->cq_evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	__atomic_store_n(&f->poll_waiting, 1, __ATOMIC_SEQ_CST);
	/* recheck after announcing: pairs with the SEQ_CST load in cq_wake() */
	if (__atomic_load_n(&f->cq_head, __ATOMIC_RELAXED) !=
	        __atomic_load_n(&f->cq_tail, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&f->accept_head, __ATOMIC_ACQUIRE) != NULL) {
		__atomic_store_n(&f->poll_waiting, 0, __ATOMIC_RELAXED);
		return -EAGAIN;
	}
	return 0;
}

static int tcp_wait(struct fab *fab, int timeout_ms)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	struct pollfd pfd = {.fd = f->cq_evfd, .events = POLLIN};
	uint64_t v;
	int r;

	__atomic_store_n(&f->poll_waiting, 1, __ATOMIC_SEQ_CST);
	/* recheck after announcing: pairs with the SEQ_CST load in cq_wake() */
	if (__atomic_load_n(&f->cq_head, __ATOMIC_RELAXED) !=
	    __atomic_load_n(&f->cq_tail, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&f->poll_waiting, 0, __ATOMIC_RELAXED);
		return 0;
	}
	r = poll(&pfd, 1, timeout_ms);
	__atomic_store_n(&f->poll_waiting, 0, __ATOMIC_RELAXED);
	if (r > 0 && read(f->cq_evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	return r < 0 && errno != EINTR ? -errno : 0;
}

const struct fab_ops fab_tcp_ops = {
    .size = sizeof(struct fab_ops),
    .name = "tcp",
    .accept = tcp_accept,
    .arm = tcp_arm,
    .close = tcp_close,
    .connect = tcp_connect,
    .get_addr = tcp_get_addr,
    .link_close = tcp_link_close,
    .link_state = tcp_link_state,
    .mr_dereg = tcp_mr_dereg,
    .mr_reg = tcp_mr_reg,
    .open = tcp_open,
    .poll = tcp_poll,
    .post = tcp_post,
    .post_recv = tcp_post_recv,
    .wait = tcp_wait,
    .wait_fd = tcp_wait_fd,
};
