/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * state.c -- a link's state below the initiator and the target: its
 * output (the linear tx buffer, framing into it, non-blocking sends with
 * EPOLLOUT when the socket is full, the drain of a link that went down
 * after our NAK), its failure (tcp_link_fail() and the flushes of its
 * queues), and the NIC thread's doorbell. The files above call down into
 * it; it calls nothing of theirs.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../log.h"
#include "../../sock.h"
#include "tcp.h"

void tcp_link_set_out(struct tcp_link *l, int want)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (want ? EPOLLOUT : 0),
	                         .data.ptr = l};

	if (l->want_out == want || l->fd < 0)
		return;
	l->want_out = want;
	if (epoll_ctl(l->fab->epfd, EPOLL_CTL_MOD, l->fd, &ev) < 0)
		lc_log_warn("tcp: epoll_ctl on link %u: %s", l->base.id, strerror(errno));
}

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

/* tcp_tx_frame -- append a frame header and room for @f->len payload bytes; returns the payload. */
uint8_t *tcp_tx_frame(struct tcp_link *l, const struct tcp_frame *f)
{
	uint8_t *p;

	if (tx_room(l, TCP_HDR_LEN + f->len) < TCP_HDR_LEN + f->len)
		return NULL;
	p = l->tx + l->tx_len;
	tcp_wire_encode(f, p);
	l->tx_len += TCP_HDR_LEN + f->len;
	return p + TCP_HDR_LEN;
}

/* tcp_tx_response -- append a response; the peer's limits guarantee room. */
uint8_t *tcp_tx_response(struct tcp_link *l, const struct tcp_frame *f)
{
	uint8_t *p = tcp_tx_frame(l, f);

	if (p == NULL)
		tcp_link_fail(l, -EPROTO, -EPROTO, "peer exceeded its announced window");
	return p;
}

void tcp_tx_flush(struct tcp_link *l)
{
	while (l->state != TCP_LINK_DOWN && tcp_tx_used(l) > 0) {
		ssize_t n =
		    send(l->fd, l->tx + l->tx_off, tcp_tx_used(l), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tcp_link_set_out(l, 1);
				return;
			}
			tcp_link_fail(l, -ECONNRESET, -ECONNRESET, strerror(errno));
			return;
		}
		l->tx_off += (size_t)n;
	}
	if (l->state != TCP_LINK_DOWN) {
		l->tx_off = l->tx_len = 0;
		tcp_link_set_out(l, 0);
	}
}

/* tcp_drain -- a link down after our NAK: finish sending, half-close, discard input to EOF. */
void tcp_drain(struct tcp_link *l, int timed_out)
{
	uint8_t junk[4096];
	ssize_t n;

	while (!timed_out && tcp_tx_used(l) > 0) {
		n = send(l->fd, l->tx + l->tx_off, tcp_tx_used(l), MSG_NOSIGNAL | MSG_DONTWAIT);
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
		tcp_link_set_out(l, 0);
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

static void linger_end(struct tcp_fab *f, struct tcp_linger *g)
{
	epoll_ctl(f->epfd, EPOLL_CTL_DEL, g->fd, NULL);
	close(g->fd);
	g->fd = -1;
	f->nlingers--;
}

void tcp_linger(struct tcp_fab *f, int fd)
{
	struct epoll_event ev = {.events =
	                             EPOLLIN | EPOLLRDHUP}; /* level: a dropped event comes back */
	struct tcp_linger *g = NULL;

	shutdown(fd, SHUT_WR); /* our FIN: the peer sees a close */
	for (unsigned i = 0; f->nlingers < TCP_LINGERS && i < TCP_LINGERS && g == NULL; i++)
		if (f->lingers[i].fd < 0)
			g = &f->lingers[i];
	if (g == NULL || !lc_sock_drain(fd)) {
		epoll_ctl(f->epfd, EPOLL_CTL_DEL, fd, NULL);
		lc_sock_close(fd);
		return;
	}
	g->fd = fd;
	g->deadline_ns = lc_now_ns() + TCP_LINGER_MS * 1000000ull;
	f->nlingers++;
	ev.data.ptr = g;
	if (epoll_ctl(f->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 &&
	    epoll_ctl(f->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		linger_end(f, g); /* unwatched: close it now */
}

void tcp_linger_input(struct tcp_fab *f, struct tcp_linger *g)
{
	if (g->fd >= 0 && !lc_sock_drain(g->fd))
		linger_end(f, g);
}

int tcp_linger_timers(struct tcp_fab *f, uint64_t now)
{
	int next = -1;

	for (unsigned i = 0; f->nlingers > 0 && i < TCP_LINGERS; i++) {
		struct tcp_linger *g = &f->lingers[i];
		int ms;

		if (g->fd < 0)
			continue;
		if (now >= g->deadline_ns || !lc_sock_drain(g->fd)) {
			linger_end(f, g);
			continue;
		}
		ms = (int)((g->deadline_ns - now) / 1000000ull) + 1;
		next = next < 0 || ms < next ? ms : next;
	}
	return next;
}

void tcp_linger_fini(struct tcp_fab *f)
{
	for (int ms; (ms = tcp_linger_timers(f, lc_now_ns())) >= 0;) {
		struct pollfd pfd[TCP_LINGERS];
		nfds_t n = 0;

		for (unsigned i = 0; i < TCP_LINGERS; i++)
			if (f->lingers[i].fd >= 0)
				pfd[n++] =
				    (struct pollfd){.fd = f->lingers[i].fd, .events = POLLIN};
		poll(pfd, n, ms);
	}
}

void tcp_nic_kick(struct tcp_fab *f)
{
	uint64_t one = 1;

	if (write(f->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_warn("tcp: cannot wake the NIC thread: %s", strerror(errno));
}

void tcp_nic_touch(struct tcp_fab *f)
{
	__atomic_add_fetch(&f->nic_busy, 1, __ATOMIC_SEQ_CST);
}

void tcp_nic_wake(struct tcp_fab *f)
{
	/* the work is published; count it, then look for sleepers (pairs with nic_epoll()) */
	__atomic_add_fetch(&f->work_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&f->sleepers, __ATOMIC_SEQ_CST) > 0) {
		if (!__atomic_exchange_n(&f->kicked, 1, __ATOMIC_SEQ_CST))
			tcp_nic_kick(f);
	} else if (__atomic_load_n(&f->parked, __ATOMIC_SEQ_CST)) {
		tcp_nic_unpark(f);
	}
}

/* tcp_nic_unpark -- wake the NIC thread if it parks (fab close, work nobody may take). */
void tcp_nic_unpark(struct tcp_fab *f)
{
	__atomic_add_fetch(&f->park_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&f->parked, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &f->park_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * tcp_flush_sq -- fail every request not yet completed: the one at fault
 * (l->fault_psn when set, else the oldest) with @first_err, the others
 * with @err.
 */
void tcp_flush_sq(struct tcp_link *l, int first_err, int err)
{
	uint32_t prod = __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE);
	uint32_t fault = l->has_fault ? l->fault_psn : l->sq_done;
	struct tcp_fab *f = l->fab;

	for (; tcp_psn_before(l->sq_done, prod); l->sq_done++) {
		struct tcp_sqe *e = &l->sq[l->sq_done & l->sq_mask];

		tcp_cq_push(f, l, e->wr.wrid, e->wr.opcode, l->sq_done == fault ? first_err : err,
		            0, 0, 0);
	}
	l->has_fault = 0;
	l->sq_issue = l->sq_done;
	l->read_inflight = 0;
	l->atomics_inflight = 0;
	__atomic_store_n(&l->sq_free, l->sq_done, __ATOMIC_RELEASE);
}

void tcp_flush_rq(struct tcp_link *l)
{
	uint32_t prod = __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);

	for (; l->rq_cons != prod; l->rq_cons++) {
		struct fab_recv_wr *r = &l->rq[l->rq_cons & l->rq_mask];

		tcp_cq_push(l->fab, l, r->wrid, FAB_OP_RECV, -ECANCELED, 0, 0, 0);
	}
	__atomic_store_n(&l->rq_free, l->rq_cons, __ATOMIC_RELEASE);
}

/*
 * tcp_link_fail -- take @l down: the first outstanding request completes with
 * @first_err, the others and every posted RECV with @err; later posts are
 * flushed with @err. The socket is closed: the peer sees the link die.
 */
void tcp_link_fail(struct tcp_link *l, int first_err, int err, const char *why)
{
	if (l->state == TCP_LINK_DOWN)
		return;
	if (why != NULL)
		lc_log_warn("tcp: link %u down: %s", l->base.id, why);
	if (l->passive && !l->admitted &&
	    (l->state == TCP_LINK_HANDSHAKE || l->state == TCP_LINK_HELD)) {
		/* perhaps nobody's yet: nic_sync() frees it unless the caller accepted it */
		l->reap = l->state;
		__atomic_add_fetch(&l->fab->links_gen, 1, __ATOMIC_RELEASE);
	}
	l->state = TCP_LINK_DOWN;
	__atomic_store_n(&l->cause, first_err, __ATOMIC_RELEASE);
	__atomic_store_n(&l->err, err, __ATOMIC_RELEASE);
	tcp_flush_sq(l, first_err, err);
	tcp_flush_rq(l);
	if (l->nak_sent && l->fd >= 0) {
		/*
		 * Closing with the peer's later requests unread would send a RST,
		 * which may destroy the NAK before the peer reads it: half-close
		 * once the NAK is out and read until the peer closes (tcp_drain()).
		 */
		l->draining = 1;
		l->drain_deadline =
		    lc_now_ns() + (uint64_t)l->fab->base.attr.timeout_ms * 1000000ull;
		tcp_link_set_out(l, tcp_tx_used(l) > 0);
	} else if (l->fd >= 0) {
		epoll_ctl(l->fab->epfd, EPOLL_CTL_DEL, l->fd, NULL);
		lc_sock_close(l->fd); /* a FIN, not a RST: the peer logs a close, not an error */
		l->fd = -1;
	}
	tcp_cq_wake(l->fab);
}
