/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * nic.c -- the NIC role of a tcp fab (tcp.h): its turn (the private
 * view of the links, with close and admit requests; issue; input; ACKs;
 * the dead-peer and tcp_drain timers), the drivers that take the role
 * through fab_progress(), and the NIC thread that holds it otherwise and
 * parks while a driver does.
 *
 * Who may sleep where: one driver at a time sleeps in epoll (drv_sleeping),
 * without the role, and takes the role again to act on its events, and
 * none while another thread spins (drives with timeout 0 again and again:
 * spin_seen_ns): the events are the spinner's; the NIC
 * thread sleeps in epoll without it, or parks on a futex while a driver
 * drives (lease_end_ns). Posted work is counted in work_seq; whoever
 * sleeps counts itself in sleepers, then looks at work_seq (nic_epoll()),
 * while a poster bumps work_seq, then looks at sleepers (tcp_nic_wake()):
 * one of the two sees the other.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "tcp.h"

/*
 * ack_waits -- whether a turn at @now may hold back the ACKs @l owes: all
 * for lazy requests (no ACKREQ), owed for less than ack_delay_ns
 * (TCP_ACK_DELAY_NS), and no RECV credit to announce with them. They then
 * go with this side's next request on the link (post_inline(),
 * nic_turn()), or on the first turn after the delay (nic_timers() wakes
 * the role's holder for it). The reduce's root so answers a row with the
 * round's result, not with an ACK frame of its own first.
 */
static int ack_waits(const struct tcp_link *l, uint64_t now)
{
	return !l->ack_urgent && l->ack_owed_ns != 0 &&
	       now - l->ack_owed_ns < l->fab->ack_delay_ns &&
	       l->credits_sent == __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);
}

/* link_input -- read what the socket has and process whole frames. */
static void link_input(struct tcp_link *l)
{
	/*
	 * Before admission only a HELLO is read (rx_cap), and nothing after
	 * it. The socket is edge-triggered: a read shorter than asked for
	 * drained it (but see rx_hup); after four full reads (fairness
	 * between links) the rest is left for the next turn (rx_more), since
	 * no event will say so.
	 */
	l->rx_more = 0;
	for (int round = 0;
	     round < 4 && (l->state == TCP_LINK_UP || l->state == TCP_LINK_HANDSHAKE); round++) {
		size_t want = l->rx_cap - l->rx_len;
		ssize_t n = recv(l->fd, l->rx + l->rx_len, want, MSG_DONTWAIT);
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
		/*
		 * A short read drained the socket, unless the peer's close came
		 * with the data: one edge said both, and only the next read
		 * sees the close (no edge comes for it again).
		 */
		if ((size_t)n < want && !l->rx_hup)
			break; /* drained */
		if (round == 3)
			l->rx_more = 1;
	}
	if (l->state != TCP_LINK_UP)
		return;
	/*
	 * A driver is a thread waiting for what just arrived: it first returns
	 * to look at it, and ACKs on its next turn, or with its next request
	 * on the link (post_inline()), or the NIC thread does when it takes
	 * over (nic_turn()). ACKs owed for lazy requests only (no ACKREQ) wait
	 * for the next request on the link or ack_delay_ns, whoever plays the
	 * NIC (ack_waits()). A refusal goes at once.
	 */
	if (l->acked_psn != l->exec_psn - 1 && l->ack_owed_ns == 0)
		l->ack_owed_ns = l->last_rx_ns;
	if (l->nak_sent || (__atomic_load_n(&l->fab->role, __ATOMIC_RELAXED) != TCP_ROLE_DRIVER &&
	                    !ack_waits(l, l->last_rx_ns)))
		tcp_send_acks(l);
	else if (l->acked_psn != l->exec_psn - 1)
		l->fab->acks_owed = 1;
	if (l->state != TCP_LINK_DOWN && l->nak_sent) {
		/* the refusal is the last thing the peer hears on this link */
		tcp_link_fail(l, -ECANCELED, -ECANCELED, NULL);
		tcp_drain(l, 0);
	}
}

void tcp_nic_accept(struct tcp_fab *f)
{
	for (int i = 0; i < 16; i++) {
		struct fab_addr peer = {.len = sizeof(peer.ss)};
		int fd = accept4(f->lfd, (struct sockaddr *)&peer.ss, &peer.len,
		                 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tcp_link *l;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				lc_log_warn("tcp: accept failed: %s", strerror(errno));
			return;
		}
		l = tcp_link_accepted(f, fd, &peer);
		/*
		 * The connector's HELLO is usually here already: read it now, so
		 * that the link is past the first to go (gives_way()) before
		 * the next newcomer needs room.
		 */
		if (l != NULL)
			tcp_nic_input(l);
	}
}

void tcp_nic_input(struct tcp_link *l)
{
	link_input(l);
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
	if (f->evicted != NULL) {
		/* out of links[] since link.c's make_room(): this turn's events are done */
		__atomic_add_fetch(&f->free_gen, 1, __ATOMIC_RELEASE);
		while (f->evicted != NULL) {
			struct tcp_link *l = f->evicted;

			f->evicted = l->evicted_next;
			tcp_link_free(l);
		}
	}
	for (unsigned i = 0; i < f->nlinks;) {
		struct tcp_link *l = f->links[i];

		if (l->close_req && !l->closed) {
			/* no ACK held back (ack_waits()) past the close */
			if (l->state == TCP_LINK_UP) {
				tcp_send_acks(l);
				tcp_tx_flush(l);
				tcp_linger(f, l->fd); /* a FIN, no RST, also for what comes */
				l->fd = -1;
			}
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
			l->closed = 1; /* its closer frees it */
			__atomic_add_fetch(&f->free_gen, 1, __ATOMIC_RELEASE);
			f->links[i] = f->links[--f->nlinks];
			pthread_cond_broadcast(&f->cond);
			continue;
		}
		if (l->admit_req && !l->admit_done)
			tcp_nic_admit(l);
		if (l->reap && tcp_nic_reap(f, l)) {
			/* down before its HELLO, or refused while still in the accept queue */
			f->links[i] = f->links[--f->nlinks];
			__atomic_add_fetch(&f->free_gen, 1, __ATOMIC_RELEASE);
			tcp_link_free(l);
			continue;
		}
		i++;
	}
	memcpy(f->nic_links, f->links, f->nlinks * sizeof(f->links[0]));
	f->nic_nlinks = f->nlinks;
	__atomic_store_n(&f->nic_gen, __atomic_load_n(&f->links_gen, __ATOMIC_RELAXED),
	                 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
}

/*
 * nic_late -- the role's timers run @now, and were due by f->timers_due_ns:
 * later than that by a quarter of the failure bound or more means that no
 * thread of ours could read the sockets meanwhile (the process was
 * stopped, the host or VM paused, a busy host kept the role's holder off
 * the CPU). That silence is not the peers': every link's dead-peer clock
 * and handshake deadline move on by it, as membership does for its own
 * lateness (ms_detect.c). Without it, a whole-host pause failed every tcp
 * link with a request in flight at the first turn after it, before the
 * answers waiting in the sockets were read (host-pause: 20 data links down;
 * slow-link and fabric-mix-mixed in CI: "no answer from the peer", and the
 * WRITE's ack -EHOSTDOWN).
 */
static void nic_late(struct tcp_fab *f, uint64_t now, uint64_t limit)
{
	uint64_t due = f->timers_due_ns, late;

	if (due == 0 || now <= due || now - due < limit / 4)
		return;
	late = now - due;
	for (unsigned i = 0; i < f->nic_nlinks; i++) {
		struct tcp_link *l = f->nic_links[i];

		l->last_rx_ns = l->last_rx_ns + late < now ? l->last_rx_ns + late : now;
		if (l->state == TCP_LINK_HANDSHAKE || l->state == TCP_LINK_HELD)
			l->hs_deadline += late;
	}
	lc_log_info("tcp: the NIC ran %llu ms late (a busy host, or the process was stopped): "
	            "no peer is blamed for that silence",
	            (unsigned long long)(late / 1000000));
}

/*
 * nic_timers -- fail links whose peer stopped answering, close connections
 * that sent no HELLO in TCP_HELLO_MS, refuse held links not admitted in
 * fab_hold_ms(), end the lingering sockets of closed links; returns the
 * next check in ms. Time we did not run (nic_late()) counts for nobody.
 */
static int nic_timers(struct tcp_fab *f, uint64_t now)
{
	uint64_t limit = (uint64_t)f->base.attr.timeout_ms * 1000000ull;
	int next = -1;

	nic_late(f, now, limit);

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
		if (l->state == TCP_LINK_UP && l->ack_owed_ns != 0 && !l->nak_sent) {
			/* ACKs held back (ack_waits()): the role's turn after the delay sends them */
			uint64_t due = l->ack_owed_ns + f->ack_delay_ns;
			int ms = now >= due ? 0 : (int)((due - now + 999999) / 1000000ull);

			next = next < 0 || ms < next ? ms : next;
		}
		if (l->state == TCP_LINK_UP) {
			int ms = tcp_target_keepalive(l, now);

			if (ms >= 0 && (next < 0 || ms < next))
				next = ms;
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
	if (f->nlingers > 0) {
		int ms = tcp_linger_timers(f, now);

		next = ms >= 0 && (next < 0 || ms < next) ? ms : next;
	}
	/*
	 * The next run: the NIC thread waits at most 100 ms (or until @next),
	 * a driver no longer, and a driver that left holds it off TCP_LEASE_NS
	 */
	f->timers_due_ns =
	    now + (uint64_t)(next < 0 || next > 100 ? 100 : next) * 1000000ull + TCP_LEASE_NS;
	return next;
}

/*
 * nic_turn -- the NIC's work that needs no event: issue what was posted,
 * send ACKs (unless @acks is 0: a driver's turn right after input, see
 * link_input()), flush output, read what an earlier turn left unread.
 * Returns whether anything moved.
 */
static int nic_turn(struct tcp_fab *f, int acks)
{
	int busy = 0;

	f->left = 0;
	if (acks)
		f->acks_owed = 0;
	for (unsigned i = 0; i < f->nic_nlinks; i++) {
		struct tcp_link *l = f->nic_links[i];
		int issued = tcp_link_issue(l);

		busy |= issued;
		if ((l->state == TCP_LINK_UP || l->state == TCP_LINK_HANDSHAKE) && l->rx_more) {
			link_input(l);
			busy = 1;
		}
		if (l->state == TCP_LINK_UP) {
			/* with requests just issued the ACKs cost no frame of their own */
			if (issued || (acks && !(l->ack_owed_ns != 0 && ack_waits(l, lc_now_ns()))))
				tcp_send_acks(l);
			else if (acks)
				f->acks_owed = 1; /* held back: the next turn looks again */
			tcp_tx_flush(l);
		}
		/* what no event will bring back: input left unread, requests not issued */
		if (l->state == TCP_LINK_UP &&
		    (l->rx_more || l->sq_issue != __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE)))
			f->left = 1;
	}
	return busy;
}

/* nic_events -- act on what epoll_wait() returned. Returns whether anything moved. */
static int nic_events(struct tcp_fab *f, const struct epoll_event *ev, int n)
{
	int busy = 0;

	for (int i = 0; i < n; i++) {
		struct tcp_link *l = ev[i].data.ptr;

		if (l == NULL) {
			tcp_nic_accept(f);
			continue;
		}
		if (tcp_linger_slot(f, l) != NULL) {
			tcp_linger_input(f, tcp_linger_slot(f, l));
			continue;
		}
		if (l == (struct tcp_link *)f) {
			uint64_t v;

			if (read(f->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				lc_log_warn("tcp: eventfd read: %s", strerror(errno));
			/* after the read: a kick that still finds kicked set was read here */
			__atomic_exchange_n(&f->kicked, 0, __ATOMIC_SEQ_CST);
			continue;
		}
		if (l->state == TCP_LINK_DOWN) {
			if (l->draining)
				tcp_drain(l, 0);
			continue;
		}
		if (l->state == TCP_LINK_HELD) {
			/* only a hang-up or an error is watched on a held link */
			lc_log_info("tcp: link %u: the peer left before admission", l->base.id);
			tcp_link_fail(l, -ECONNRESET, -ECONNRESET, NULL);
			continue;
		}
		if (ev[i].events & (EPOLLRDHUP | EPOLLERR | EPOLLHUP))
			l->rx_hup = 1; /* link_input() reads on to the close */
		if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
			link_input(l);
		if (l->state == TCP_LINK_UP)
			tcp_tx_flush(l);
		busy = 1;
	}
	return busy;
}

/*
 * nic_before -- with the role: the view, the work posted, the timers
 * (next check in ms into *@tnext). Everything posted before it is taken.
 */
static int nic_before(struct tcp_fab *f, int *tnext)
{
	int busy;

	__atomic_store_n(&f->work_seen, __atomic_load_n(&f->work_seq, __ATOMIC_SEQ_CST),
	                 __ATOMIC_SEQ_CST);
	tcp_nic_touch(f);
	nic_sync(f);
	busy = nic_turn(f, 1);
	*tnext = nic_timers(f, lc_now_ns());
	tcp_nic_touch(f);
	return busy;
}

/* nic_after -- with the role: act on @n events, then on what they brought. */
static int nic_after(struct tcp_fab *f, const struct epoll_event *ev, int n)
{
	int busy;

	tcp_nic_touch(f);
	busy = nic_events(f, ev, n);
	nic_sync(f); /* a close or admission the events woke us for */
	if (n > 0 || f->left)
		busy |= nic_turn(f, __atomic_load_n(&f->role, __ATOMIC_RELAXED) !=
		                        TCP_ROLE_DRIVER); /* responses flushed */
	tcp_nic_touch(f);
	return busy;
}

/*
 * nic_pending -- work posted since the role last took it (tcp_nic_wake()),
 * or links to add, close, admit or reap (a link that failed at its timer).
 */
static int nic_pending(struct tcp_fab *f)
{
	return __atomic_load_n(&f->work_seq, __ATOMIC_SEQ_CST) !=
	           __atomic_load_n(&f->work_seen, __ATOMIC_SEQ_CST) ||
	       __atomic_load_n(&f->links_gen, __ATOMIC_ACQUIRE) !=
	           __atomic_load_n(&f->nic_gen, __ATOMIC_RELAXED);
}

/*
 * nic_epoll -- epoll_wait() for at most @timeout_ns (< 0: forever). A
 * sleeper counts itself in sleepers first and looks for posted work after
 * that (pairs with tcp_nic_wake(): one of the two sees the other); with
 * work pending it waits @pending_ns instead.
 */
static int nic_epoll(struct tcp_fab *f, struct epoll_event *ev, int64_t timeout_ns,
                     int64_t pending_ns)
{
	struct timespec ts;
	int n;

	if (timeout_ns != 0) {
		__atomic_add_fetch(&f->sleepers, 1, __ATOMIC_SEQ_CST);
		if (nic_pending(f))
			timeout_ns = pending_ns;
	}
	n = -1;
	errno = ENOSYS;
#ifdef LOCO_HAVE_EPOLL_PWAIT2
	if (timeout_ns > 0 && timeout_ns % 1000000 != 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		n = epoll_pwait2(f->epfd, ev, TCP_EVENTS, &ts, NULL);
	}
#endif
	if (n < 0 && errno == ENOSYS) /* whole milliseconds (a kernel older than 5.11) */
		n = epoll_wait(f->epfd, ev, TCP_EVENTS,
		               timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999) / 1000000));
	if (timeout_ns != 0)
		__atomic_sub_fetch(&f->sleepers, 1, __ATOMIC_SEQ_CST);
	return n < 0 ? 0 : n;
}

/*
 * nic_reread -- (with the role) the links that events named may have been
 * freed since they were taken (free_gen moved): drop the events, and read
 * every link on the next turn instead.
 */
static void nic_reread(struct tcp_fab *f)
{
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->nlinks; i++)
		f->links[i]->rx_more = 1;
	pthread_mutex_unlock(&f->lock);
}

/*
 * tcp_progress -- fab_progress(): take the NIC role if nobody holds it,
 * do its work, and sleep in epoll for up to @timeout_ns. It sleeps without
 * the role: a thread that posts meanwhile sends from its own call
 * (post_inline()) instead of handing the work to the sleeper through a
 * wake-up, a thread hop that costs tens of us where the sleeper's CPU
 * halted (the KV client's map serve thread idles here while its workers
 * post READs). The NIC thread stays parked (the lease). The events the
 * sleeper wakes with are its own, acted on once it holds the role again;
 * a link they name may have been freed meanwhile (nic_reread()).
 */
int tcp_progress(struct fab *fab, int64_t timeout_ns)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	struct epoll_event ev[TCP_EVENTS];
	int busy, n, tnext, left, owed;
	uintptr_t self;
	uint64_t now;

	if (timeout_ns < 0)
		return -EINVAL;
	if (__atomic_load_n(&f->nic_wants, __ATOMIC_SEQ_CST))
		return -EBUSY; /* the NIC thread holds events and waits for the role */
	/* one driver sleeps in epoll (its events wake it, not another): the others as the
	   wait policy says (reaped completions wake them) */
	if (timeout_ns > 0 && __atomic_load_n(&f->drv_sleeping, __ATOMIC_SEQ_CST))
		return -EBUSY;
	/*
	 * Nor while another thread spins here: the events in epoll are the
	 * spinner's (what it waits for), and a sleeper there would wake for
	 * each, then wait for the role the spinner holds (map-lat, tcp, node 1:
	 * its idle map serve thread took 92 % of the process's futex calls, on
	 * nic_mu; the raw READ took 54-79 us, 34-35 us with that thread kept
	 * off). The sleeper sleeps as the wait policy says, woken by the
	 * completions the spinner reaps, or, for a peer's WRITE or atomic that
	 * landed, by the 2 the spinner returns (landed_want).
	 */
	now = lc_now_ns();
	self = (uintptr_t)pthread_self();
	if (timeout_ns == 0) {
		if (__atomic_load_n(&f->look_tid, __ATOMIC_RELAXED) == self &&
		    now - __atomic_load_n(&f->look_ns, __ATOMIC_RELAXED) < TCP_SPIN_GAP_NS) {
			__atomic_store_n(&f->spin_tid, self, __ATOMIC_RELAXED);
			__atomic_store_n(&f->spin_seen_ns, now, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&f->look_tid, self, __ATOMIC_RELAXED);
		__atomic_store_n(&f->look_ns, now, __ATOMIC_RELAXED);
	} else if (now - __atomic_load_n(&f->spin_seen_ns, __ATOMIC_RELAXED) < TCP_SPINNER_NS &&
	           __atomic_load_n(&f->spin_tid, __ATOMIC_RELAXED) != self) {
		__atomic_store_n(&f->landed_want, 1, __ATOMIC_RELAXED);
		return -EBUSY;
	}
	if (pthread_mutex_trylock(&f->nic_mu) != 0) {
		pthread_mutex_lock(&f->nic_mu); /* held briefly: wait for it */
		timeout_ns = 0;                 /* and look first: it may have brought the news */
	}
	__atomic_store_n(&f->role, TCP_ROLE_DRIVER, __ATOMIC_RELAXED);
	if (timeout_ns > 0) /* the NIC thread parks until this sleep is over, and a little more */
		__atomic_store_n(&f->lease_end_ns,
		                 lc_now_ns() + (uint64_t)timeout_ns + TCP_LEASE_NS,
		                 __ATOMIC_RELAXED);
	busy = nic_before(f, &tnext);
	if (tnext >= 0 && (int64_t)tnext * 1000000ll < timeout_ns)
		timeout_ns = (int64_t)tnext * 1000000ll;
	if (busy || timeout_ns == 0 || __atomic_exchange_n(&f->drv_sleeping, 1, __ATOMIC_SEQ_CST)) {
		n = nic_epoll(f, ev, 0, 0);
	} else {
		unsigned gen = f->free_gen;
		uint64_t due = lc_now_ns() + (uint64_t)timeout_ns + TCP_LEASE_NS;

		/* the timers' next run may come after our sleep (the NIC thread is parked) */
		if (due > f->timers_due_ns)
			f->timers_due_ns = due;
		/* this one hears its own events: nobody waits for a spinner's news */
		__atomic_store_n(&f->landed_want, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&f->role, TCP_ROLE_NONE, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&f->nic_mu);
		n = nic_epoll(f, ev, timeout_ns, 0);
		pthread_mutex_lock(&f->nic_mu); /* others hold it briefly: none sleeps with it */
		__atomic_store_n(&f->role, TCP_ROLE_DRIVER, __ATOMIC_RELAXED);
		__atomic_store_n(&f->drv_sleeping, 0, __ATOMIC_SEQ_CST);
		if (n > 0 && f->free_gen != gen) {
			nic_reread(f);
			n = 0;
		}
	}
	busy |= nic_after(f, ev, n);
	left = f->left;
	owed = f->acks_owed;
	/* the wait may be over: the NIC thread takes over unless we are back soon */
	__atomic_store_n(&f->lease_end_ns, lc_now_ns() + TCP_LEASE_NS, __ATOMIC_RELAXED);
	__atomic_store_n(&f->role, TCP_ROLE_NONE, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->nic_mu);
	if (left)
		tcp_nic_wake(f); /* this thread may not come back: the NIC thread finishes */
	else if (owed && __atomic_load_n(&f->sleepers, __ATOMIC_SEQ_CST) > 0)
		tcp_nic_kick(
		    f); /* ACKs owed, the NIC thread in epoll, not parked: it parks, or ACKs */
	if (__atomic_load_n(&f->landed_seen, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&f->landed_seen, 0, __ATOMIC_RELAXED))
		return 2; /* a landing that a driver sent off to sleep elsewhere may wait for */
	return busy || n > 0;
}

/*
 * nic_lock -- the NIC thread takes the role if nobody holds it, or
 * returns 0. When it must wait (it holds events), it raises nic_wants:
 * a mutex is not fair, and a driver would otherwise take the role back
 * at once, again and again.
 */
static int nic_lock(struct tcp_fab *f)
{
	if (pthread_mutex_trylock(&f->nic_mu) != 0)
		return 0;
	__atomic_store_n(&f->role, TCP_ROLE_NIC, __ATOMIC_RELAXED);
	return 1;
}

static void nic_unlock(struct tcp_fab *f)
{
	__atomic_store_n(&f->role, TCP_ROLE_NONE, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->nic_mu);
}

/*
 * nic_park -- while a thread drives (sleeps in tcp_progress(), or did less
 * than TCP_LEASE_NS ago),
 * the NIC thread stays off the sockets' wait queues, so that their events
 * wake the driver only: it sleeps on park_seq until the lease ends, or
 * until work is posted that nobody may take (tcp_nic_wake()), and then
 * takes that work. Returns whether it parked.
 */
static int nic_park(struct tcp_fab *f, uint64_t now)
{
	uint64_t end = __atomic_load_n(&f->lease_end_ns, __ATOMIC_RELAXED);
	uint32_t seq = __atomic_load_n(&f->park_seq, __ATOMIC_SEQ_CST);
	struct timespec ts;
	int tnext;

	if (end <= now)
		return 0;
	if (now < f->awake_until) {
		/*
		 * Woken for posted work a moment ago: a stream of posts (a link
		 * with TCP_INLINE_INFLIGHT out) would wake it at every one, a
		 * futex call each (rpc one-way calls on tcp: 0.9 a call). So it
		 * stays up, unparked, and takes what is posted (posts then only
		 * count it in work_seq), yielding between looks; it stays off the
		 * sockets, which are the driver's, and parks once nothing came
		 * for spin_us.
		 */
		if (nic_pending(f) && nic_lock(f)) {
			nic_before(f, &tnext);
			nic_unlock(f);
			f->awake_until = now + (uint64_t)f->base.attr.spin_us * 1000ull;
		} else {
			sched_yield();
		}
		return 1;
	}
	ts.tv_sec = (time_t)((end - now) / 1000000000ull);
	ts.tv_nsec = (long)((end - now) % 1000000000ull);
	__atomic_store_n(&f->parked, 1, __ATOMIC_SEQ_CST);
	/* work posted that the role has not taken: take it if nobody holds the role */
	if (nic_pending(f) && nic_lock(f)) {
		nic_before(f, &tnext);
		nic_unlock(f);
	}
	if (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &f->park_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
	__atomic_store_n(&f->parked, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&f->park_seq, __ATOMIC_SEQ_CST) != seq && f->base.attr.spin_us &&
	    !lc_hostload_busy(&f->load))
		f->awake_until = lc_now_ns() + (uint64_t)f->base.attr.spin_us * 1000ull;
	return 1;
}

/*
 * tcp_nic_main -- the NIC thread: plays the NIC whenever nobody else does.
 * It sleeps in epoll without the role, so that a driving thread
 * (tcp_progress()) can hold it meanwhile. The links its events name may
 * have been freed by the role's holder by the time it takes the role
 * (free_gen tells): their events are then dropped and every link read
 * again instead.
 */
void *tcp_nic_main(void *arg)
{
	struct tcp_fab *f = arg;
	struct epoll_event ev[TCP_EVENTS];
	uint64_t spin_ns = (uint64_t)f->base.attr.spin_us * 1000ull, last_busy = lc_now_ns();

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		uint64_t t0 = lc_now_ns(), cq0 = fab_swcq_tail(&f->cq);
		int busy = 0, n, tnext = -1, locked, spinning;
		int64_t timeout;
		unsigned gen;

		if (nic_park(f, t0))
			continue;
		locked = nic_lock(f);
		if (locked) {
			busy = nic_before(f, &tnext);
			gen = f->free_gen;
			nic_unlock(f);
		} else {
			/* a driving thread holds the role and does all of it */
			gen = __atomic_load_n(&f->free_gen, __ATOMIC_ACQUIRE);
		}
		/*
		 * At most 100 ms: a driving thread may have issued what the
		 * dead-peer timer watches and left. With work pending: at once
		 * if it is ours (a link our turn failed), after 50 us if a
		 * driver holds the role (it is about to take it, or leaving).
		 */
		spinning = !busy && t0 - last_busy < spin_ns && !lc_hostload_look(&f->load, t0);
		if (busy || spinning)
			timeout = 0;
		else
			timeout = (tnext < 0 || tnext > 100 ? 100 : tnext) * 1000000ll;
		n = nic_epoll(f, ev, timeout, locked ? 0 : 50000);
		/*
		 * The spin after work (spin_us) looks, and yields when nothing
		 * came: a thread that can run on this CPU (perhaps the one that
		 * will post next) gets it, and a request that comes meanwhile is
		 * served without a wake-up (tens of us on a virtual CPU that
		 * halted: 8 B READ 38 -> 10 us on 2 vCPUs).
		 */
		if (spinning && n == 0)
			sched_yield();
		if (n > 0) {
			if (!nic_lock(f)) {
				/*
				 * A driver holds the role, and we hold events it
				 * will not see again (edge-triggered): it lets us
				 * have the role next (nic_wants), woken if it sleeps.
				 */
				__atomic_store_n(&f->nic_wants, 1, __ATOMIC_SEQ_CST);
				tcp_nic_kick(f);
				pthread_mutex_lock(&f->nic_mu);
				__atomic_store_n(&f->role, TCP_ROLE_NIC, __ATOMIC_RELAXED);
				__atomic_store_n(&f->nic_wants, 0, __ATOMIC_SEQ_CST);
			}
			if (f->free_gen != gen) {
				nic_reread(f); /* what the events name may be gone */
				n = 0;
			}
			busy |= nic_after(f, ev, n);
			nic_unlock(f);
		}
		if (busy || n > 0)
			last_busy = lc_now_ns();
		if (fab_swcq_tail(&f->cq) != cq0)
			tcp_cq_wake(f);
	}
	return NULL;
}
