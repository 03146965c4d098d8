/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cq.c -- the completion queue of a tcp fab: a ring the NIC thread
 * produces and one poller consumes (every posted request and RECV took a
 * credit for its entry, so it never overflows), and the wait fd
 * (fab_wait_fd/fab_arm/fab_wait).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "../../log.h"
#include "tcp.h"

void tcp_cq_push(struct tcp_fab *f, struct tcp_link *l, uint64_t wrid, int opcode, int status,
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

void tcp_cq_wake(struct tcp_fab *f)
{
	uint64_t one = 1;

	if (!__atomic_load_n(&f->poll_waiting, __ATOMIC_SEQ_CST))
		return;
	if (write(f->cq_evfd, &one, sizeof(one)) < 0)
		lc_log_warn("tcp: cannot wake the poller: %s", strerror(errno));
	__atomic_add_fetch(&f->cq_rung, 1, __ATOMIC_RELEASE); /* after the write: clear_wake() */
}

/*
 * clear_wake -- the poller, not armed: clear cq_evfd when it was written
 * since we last cleared it. A wake-up whose completions a poll took (a
 * waiter driving the fabric reaps them itself) would otherwise leave the
 * eventfd readable for good: the core watches it level-triggered and arms
 * again (which clears it) only when nobody waits on an ack key, so its
 * progress thread's epoll_wait() returned at once, again and again -- a
 * spin that took a core from the waiters (the shm provider had the same,
 * fixed there first).
 */
static void clear_wake(struct tcp_fab *f)
{
	uint32_t r = __atomic_load_n(&f->cq_rung, __ATOMIC_ACQUIRE);
	uint64_t v;

	if (r == f->cq_rung_seen || __atomic_load_n(&f->poll_waiting, __ATOMIC_RELAXED))
		return;
	f->cq_rung_seen = r;
	if (read(f->cq_evfd, &v, sizeof(v)) < 0) {
		if (errno != EAGAIN)
			lc_log_debug("tcp: cannot clear the wait fd: %s", strerror(errno));
		return;
	}
	/* fab_arm() in another thread armed meanwhile: what we took may be its wake-up */
	if (__atomic_load_n(&f->poll_waiting, __ATOMIC_SEQ_CST) &&
	    write(f->cq_evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		lc_log_warn("tcp: cannot wake the poller: %s", strerror(errno));
}

int tcp_poll(struct fab *fab, struct fab_wc *wc, int max)
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
		fab_credits_give(&f->cq_credits, n);
		/* the arm is one-shot, as ibv_req_notify_cq(): whoever polls disarms */
		if (__atomic_load_n(&f->poll_waiting, __ATOMIC_RELAXED))
			__atomic_store_n(&f->poll_waiting, 0, __ATOMIC_RELAXED);
	}
	clear_wake(f);
	return n;
}

int tcp_wait_fd(struct fab *fab)
{
	return to_tcp_fab(fab)->cq_evfd;
}

int tcp_arm(struct fab *fab)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	uint64_t v;

	if (read(f->cq_evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	__atomic_store_n(&f->poll_waiting, 1, __ATOMIC_SEQ_CST);
	/* recheck after announcing: pairs with the SEQ_CST load in tcp_cq_wake() */
	if (__atomic_load_n(&f->cq_head, __ATOMIC_RELAXED) !=
	        __atomic_load_n(&f->cq_tail, __ATOMIC_ACQUIRE) ||
	    fab_acceptq_ready(&f->acceptq)) {
		__atomic_store_n(&f->poll_waiting, 0, __ATOMIC_RELAXED);
		return -EAGAIN;
	}
	return 0;
}

int tcp_wait(struct fab *fab, int timeout_ms)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	struct pollfd pfd = {.fd = f->cq_evfd, .events = POLLIN};
	uint64_t v;
	int r;

	__atomic_store_n(&f->poll_waiting, 1, __ATOMIC_SEQ_CST);
	/* recheck after announcing: pairs with the SEQ_CST load in tcp_cq_wake() */
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
