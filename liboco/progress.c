/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * progress.c -- the progress thread: it reaps fabric completions (ack
 * keys), takes the dialer's finished connections and new data links,
 * serves the control plane (reads, and writes of queued messages), acts
 * on link failures, runs the failure detector, runs object callbacks and
 * calls the pollers. It blocks in epoll when idle (the fabric's wait fd
 * is in the set), so an idle node burns no CPU; while pollers are active
 * it sleeps at most their period between turns, since the remote WRITEs
 * they watch for give no event.
 *
 * Application threads waiting on ack keys reap completions themselves
 * (lc_progress_reap()): that path only completes operations and records
 * link failures for this thread (lc_member_link_report()).
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "dial.h"
#include "log.h"
#include "manager.h"
#include "progress.h"
#include "wake.h"

#define LC_WCS 64

/*
 * reap -- hand completions to their ack keys. A failed operation's link
 * is acted on by the progress thread: in place when @progress, else
 * recorded and the progress thread woken.
 */
static int reap(loco_manager_t *m, int progress)
{
	struct fab_wc wc[LC_WCS];
	int n = fab_poll(m->fab, wc, LC_WCS);

	for (int i = 0; i < n; i++) {
		if (wc[i].status != 0 && wc[i].status != -ECANCELED) {
			lc_log_debug("manager: %s to node %u failed: %s",
			             fab_opcode_str(wc[i].opcode), (unsigned)wc[i].link_ctx,
			             strerror(-wc[i].status));
			if (progress)
				lc_member_link_failed(m, (uint32_t)wc[i].link_ctx, wc[i].status);
			else
				lc_member_link_report(m, (uint32_t)wc[i].link_ctx, wc[i].status);
		}
		if (lc_ack_complete_node(&m->acks, wc[i].wrid, wc[i].status,
		                         (uint32_t)wc[i].link_ctx) == -ENOENT &&
		    wc[i].status != 0 && wc[i].status != -ECANCELED)
			lc_log_warn("manager: unacknowledged %s to node %u failed: %s",
			            fab_opcode_str(wc[i].opcode), (unsigned)wc[i].link_ctx,
			            strerror(-wc[i].status));
	}
	if (n > 0)
		lc_wait_signal(&m->wait); /* block-policy waiters: completions arrived */
	return n;
}

/*
 * lc_progress_reap -- a thread waiting on an ack key reaps completions
 * itself when no one else is: the completion reaches its key without
 * waking the progress thread (one thread hop less per operation). Never
 * blocks, never does membership work.
 */
void lc_progress_reap(void *arg)
{
	loco_manager_t *m = arg;

	if (pthread_mutex_trylock(&m->prog.poll_lock) != 0)
		return;
	while (reap(m, 0) > 0)
		;
	pthread_mutex_unlock(&m->prog.poll_lock);
}

/*
 * wait_events -- epoll_wait() for at most @timeout_ns (>= 0), to the
 * nanosecond with epoll_pwait2() where the kernel has it (pollers' periods
 * may be below a millisecond), else rounded up to whole milliseconds.
 */
static int wait_events(loco_manager_t *m, struct epoll_event *ev, int max, int64_t timeout_ns)
{
#ifdef LOCO_HAVE_EPOLL_PWAIT2
	if (timeout_ns % 1000000 != 0 && !m->prog.no_pwait2) {
		struct timespec ts = {.tv_sec = timeout_ns / 1000000000,
		                      .tv_nsec = timeout_ns % 1000000000};
		int n = epoll_pwait2(m->epfd, ev, max, &ts, NULL);

		if (n >= 0 || errno != ENOSYS)
			return n;
		m->prog.no_pwait2 = 1; /* ENOSYS: whole milliseconds from now on */
	}
#endif
	if (timeout_ns > (int64_t)INT32_MAX * 1000000)
		timeout_ns = (int64_t)INT32_MAX * 1000000;
	return epoll_wait(m->epfd, ev, max, (int)((timeout_ns + 999999) / 1000000));
}

/*
 * watch_fab -- put the fab's wait fd in the epoll set (@on) or take it out.
 * It is watched only after an arm that returned 0: an event that fired
 * once stays readable until the next arm consumes it (fabric.h), and
 * while threads reap completions themselves we do not arm, so a watched
 * fd would make every epoll_wait() return at once -- a spin that takes a
 * core from the waiters.
 */
static void watch_fab(loco_manager_t *m, int on)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = m->fab};

	if (on == m->prog.fab_watched)
		return;
	if (epoll_ctl(m->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fab_wait_fd(m->fab), &ev) < 0)
		lc_log_warn("manager: cannot %s the fabric's wait fd: %s", on ? "watch" : "unwatch",
		            strerror(errno));
	else
		m->prog.fab_watched = on;
}

/* sleep_for -- how long the loop may block, or -1 to only look (armed is 0 or -EAGAIN). */
static int64_t sleep_for(loco_manager_t *m, uint64_t now, uint64_t wake, int64_t period)
{
	int64_t t;

	if (__atomic_load_n(&m->prog.waiters, __ATOMIC_ACQUIRE) > 0 ||
	    lc_coarse_ns() - __atomic_load_n(&m->prog.last_wait_ns, __ATOMIC_RELAXED) <
	        5000000ull) {
		/*
		 * Threads are waiting on ack keys and reap completions
		 * themselves: do not arm the CQ (each completion would wake us
		 * for nothing), look every millisecond for completions nobody
		 * waits for.
		 */
		watch_fab(m, 0);
		return period > 0 && period < 1000000 ? period : 1000000;
	}
	if (fab_arm(m->fab) != 0)
		return 0;
	watch_fab(m, 1);
	/* round up: waking a little late is fine, early means a spin */
	t = (int64_t)((wake > now ? wake - now + 999999 : 0) / 1000000ull) * 1000000;
	if (period > 0 && period < t)
		t = period; /* the pollers watch for WRITEs, which wake nobody */
	return t;
}

static void events(loco_manager_t *m, struct epoll_event *ev, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = ev[i].data.ptr;

		if (p == (void *)&m->lfd) {
			lc_member_accept(m);
		} else if (p == (void *)&m->evfd) {
			uint64_t v;

			if (read(m->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				lc_log_warn("manager: eventfd: %s", strerror(errno));
		} else if (p == (void *)m->fab) {
			/* completions: reaped at the top of the loop */
		} else {
			unsigned what = 0;

			if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				what |= LC_EV_IN;
			if (ev[i].events & EPOLLOUT)
				what |= LC_EV_OUT;
			lc_member_input(m, p, what);
		}
	}
}

static void *progress_main(void *arg)
{
	loco_manager_t *m = arg;
	struct epoll_event ev[32];

	while (!__atomic_load_n(&m->prog.stop, __ATOMIC_ACQUIRE)) {
		uint64_t now, wake;
		int64_t period;
		int n, busy = 0;

		pthread_mutex_lock(&m->prog.poll_lock);
		while (reap(m, 1) > 0)
			busy = 1;
		pthread_mutex_unlock(&m->prog.poll_lock);
		lc_member_link_errors(m);
		lc_graves_reap(m, 0);
		lc_linkin_accept(m);   /* links others opened to us: checked, admitted */
		lc_member_handoffs(m); /* ... and those the dialer opened: bound to members */
		now = lc_now_ns();
		lc_wait_look(&m->wait, now); /* adaptive: is the host oversubscribed */
		wake = lc_member_timers(m, now);
		lc_chan_dispatch(m);
		if (lc_pollers_run(m->pollers, &period))
			busy = 1;
		if (busy)
			lc_wait_signal(&m->wait); /* pollers did work: blocked waiters look again */
		n = wait_events(m, ev, 32, busy ? 0 : sleep_for(m, now, wake, period));
		events(m, ev, n);
		lc_chan_dispatch(m); /* callbacks of what the control plane brought */
		lc_view_dispatch(m); /* the application's membership events */
	}
	return NULL;
}

int lc_progress_start(loco_manager_t *m)
{
	int ret = -pthread_create(&m->progress, NULL, progress_main, m);

	if (ret)
		lc_log_err("manager: cannot start the progress thread: %s", strerror(-ret));
	return ret;
}

void lc_progress_stop(loco_manager_t *m)
{
	__atomic_store_n(&m->prog.stop, 1, __ATOMIC_RELEASE);
	lc_wake(m);
	pthread_join(m->progress, NULL);
}

void lc_progress_init(loco_manager_t *m)
{
	pthread_mutex_init(&m->prog.poll_lock, NULL);
}

void lc_progress_fini(loco_manager_t *m)
{
	pthread_mutex_destroy(&m->prog.poll_lock);
}

void lc_progress_fab_watched(loco_manager_t *m)
{
	m->prog.fab_watched = 1;
}

void lc_progress_waiter_enter(loco_manager_t *m)
{
	__atomic_add_fetch(&m->prog.waiters, 1, __ATOMIC_ACQ_REL);
}

void lc_progress_waiter_leave(loco_manager_t *m)
{
	/* coarse: the progress thread only asks whether waiters left in the last 5 ms */
	__atomic_store_n(&m->prog.last_wait_ns, lc_coarse_ns(), __ATOMIC_RELAXED);
	__atomic_sub_fetch(&m->prog.waiters, 1, __ATOMIC_ACQ_REL);
}
