/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * nic.c -- the NIC thread of a tcp fab: its loop over epoll, its private
 * view of the links (sync with close requests), input dispatch, and the
 * dead-peer and tcp_drain timers.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "tcp.h"

/* link_input -- read what the socket has and process whole frames. */
static void link_input(struct tcp_link *l)
{
	/* before admission only a HELLO is read (rx_cap), and nothing after it */
	for (int round = 0;
	     round < 4 && (l->state == TCP_LINK_UP || l->state == TCP_LINK_HANDSHAKE); round++) {
		ssize_t n = recv(l->fd, l->rx + l->rx_len, l->rx_cap - l->rx_len, MSG_DONTWAIT);
		size_t off = 0;

		if (n == 0) {
			if (l->state == TCP_LINK_HANDSHAKE)
				lc_log_debug("tcp: link %u: closed before its HELLO", l->base.id);
			else
				lc_log_info("tcp: link %u: peer closed the connection", l->base.id);
			tcp_link_fail(l, -ECONNRESET, -ECONNRESET, NULL);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				tcp_link_fail(l, -ECONNRESET, -ECONNRESET,
				              l->state == TCP_LINK_UP ? strerror(errno) : NULL);
			break;
		}
		l->rx_len += (size_t)n;
		l->last_rx_ns = lc_now_ns();
		while (l->state == TCP_LINK_UP || l->state == TCP_LINK_HANDSHAKE) {
			struct tcp_frame fr;
			long flen = tcp_wire_decode(l->rx + off, l->rx_len - off, &fr);
			const uint8_t *data = l->rx + off + TCP_HDR_LEN;

			if (flen < 0) {
				tcp_link_fail(l, -EPROTO, -EPROTO, "malformed frame from the peer");
				return;
			}
			if (flen == 0 || (size_t)flen > l->rx_len - off)
				break;
			if (l->state == TCP_LINK_HANDSHAKE)
				tcp_on_hello(l, &fr, data);
			else if (fr.type >= TCP_F_WRITE && fr.type <= TCP_F_SEND)
				tcp_exec_request(l, &fr, data);
			else if (fr.type >= TCP_F_ACK && fr.type <= TCP_F_CREDIT)
				tcp_on_response(l, &fr, data);
			else
				tcp_link_fail(l, -EPROTO, -EPROTO, "unexpected frame type");
			off += (size_t)flen;
		}
		if (l->state == TCP_LINK_DOWN || l->state == TCP_LINK_HELD)
			return;
		memmove(l->rx, l->rx + off, l->rx_len - off);
		l->rx_len -= off;
		if ((size_t)n < l->rx_cap / 2)
			break; /* the socket is probably drained */
	}
	if (l->state != TCP_LINK_UP)
		return;
	tcp_send_acks(l);
	if (l->state != TCP_LINK_DOWN && l->nak_sent) {
		/* the refusal is the last thing the peer hears on this link */
		tcp_link_fail(l, -ECANCELED, -ECANCELED, NULL);
		tcp_drain(l, 0);
	}
}

/*
 * nic_sync -- refresh the private view of links[], serve close and admit
 * requests, and free the links that went down before anyone owned them.
 */
static void nic_sync(struct tcp_fab *f)
{
	unsigned gen = __atomic_load_n(&f->links_gen, __ATOMIC_ACQUIRE);

	if (gen == f->nic_gen)
		return;
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->nlinks;) {
		struct tcp_link *l = f->links[i];

		if (l->close_req && !l->closed) {
			tcp_link_fail(l, -ECANCELED, -ECANCELED, NULL);
			/*
			 * A link already down was flushed when it failed, but
			 * requests and RECVs posted since then are still queued:
			 * they must complete too, or their ack keys wait forever.
			 */
			tcp_flush_sq(l, -ECANCELED, -ECANCELED);
			tcp_flush_rq(l);
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
		if (l->admit_req && !l->admit_done)
			tcp_nic_admit(l);
		if (l->reap && tcp_nic_reap(f, l)) {
			/* down before its HELLO, or refused while still in the accept queue */
			f->links[i] = f->links[--f->nlinks];
			tcp_link_free(l);
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
		    (l->state == TCP_LINK_UP || l->state == TCP_LINK_DOWN))
			return 1;
		if (l->state == TCP_LINK_UP &&
		    __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE) != (uint32_t)l->credits_sent)
			return 1;
	}
	return 0;
}

/*
 * nic_timers -- fail links whose peer stopped answering, close connections
 * that sent no HELLO in TCP_HELLO_MS, refuse held links not admitted in
 * fab_hold_ms(); returns the next check in ms.
 */
static int nic_timers(struct tcp_fab *f, uint64_t now)
{
	uint64_t limit = (uint64_t)f->base.attr.timeout_ms * 1000000ull;
	int next = -1;

	for (unsigned i = 0; i < f->nic_nlinks; i++) {
		struct tcp_link *l = f->nic_links[i];

		if (l->state == TCP_LINK_HANDSHAKE || l->state == TCP_LINK_HELD) {
			char where[FAB_ADDR_STRLEN] = "?";
			int ms;

			if (now < l->hs_deadline) {
				ms = (int)((l->hs_deadline - now) / 1000000ull) + 1;
				next = next < 0 || ms < next ? ms : next;
				continue;
			}
			fab_addr_format(&l->peer, where, sizeof(where));
			if (l->state == TCP_LINK_HANDSHAKE)
				lc_log_debug("tcp: link %u from %s: no HELLO within %u ms: closed",
				             l->base.id, where, TCP_HELLO_MS);
			else
				lc_log_info(
				    "tcp: link %u from %s: not admitted within %u ms: refused",
				    l->base.id, where, fab_hold_ms(&f->base.attr));
			tcp_link_fail(l, -ETIMEDOUT, -ETIMEDOUT, NULL);
			continue;
		}

		if (l->draining && now >= l->drain_deadline)
			tcp_drain(l, 1);
		if (l->draining) {
			int ms = (int)((l->drain_deadline - now) / 1000000ull) + 1;

			next = next < 0 || ms < next ? ms : next;
		}
		if (l->state != TCP_LINK_UP || l->sq_done == l->sq_issue || l->last_rx_ns > now)
			continue;
		if (now - l->last_rx_ns >= limit) {
			lc_log_warn("tcp: link %u: no answer from the peer for %u ms", l->base.id,
			            f->base.attr.timeout_ms);
			tcp_link_fail(l, -ETIMEDOUT, -ETIMEDOUT, NULL);
			continue;
		}
		int ms = (int)((limit - (now - l->last_rx_ns)) / 1000000ull) + 1;
		if (next < 0 || ms < next)
			next = ms;
	}
	return next;
}

void *tcp_nic_main(void *arg)
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

			busy |= tcp_link_issue(l);
			if (l->state == TCP_LINK_UP) {
				tcp_send_acks(l);
				tcp_tx_flush(l);
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
				tcp_nic_accept(f);
				continue;
			}
			if (l == (struct tcp_link *)f) {
				uint64_t v;

				if (read(f->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					lc_log_warn("tcp: eventfd read: %s", strerror(errno));
				continue;
			}
			if (l->state == TCP_LINK_DOWN) {
				if (l->draining)
					tcp_drain(l, 0);
				continue;
			}
			if (l->state == TCP_LINK_HELD) {
				/* only a hang-up or an error is watched on a held link */
				lc_log_info("tcp: link %u: the peer left before admission",
				            l->base.id);
				tcp_link_fail(l, -ECONNRESET, -ECONNRESET, NULL);
				continue;
			}
			if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				link_input(l);
			if (l->state == TCP_LINK_UP)
				tcp_tx_flush(l);
			busy = 1;
		}
		__atomic_add_fetch(&f->nic_busy, 1, __ATOMIC_SEQ_CST);
		if (busy || n > 0)
			last_busy = lc_now_ns();
		if (__atomic_load_n(&f->cq_tail, __ATOMIC_RELAXED) != cq0)
			tcp_cq_wake(f);
	}
	return NULL;
}
