/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * swcq.c -- the software providers' completion queue (swcq.h): the ring,
 * its producers and its poller, and the wait fd with its arm, wait and
 * the clearing of stale wake-ups. The protocol is written down in
 * swcq.h; each fence below names its pair.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../log.h"
#include "swcq.h"

int fab_swcq_init(struct fab_swcq *cq, const struct fab_swcq_attr *attr)
{
	uint32_t n = fab_pow2_at_least(attr->depth);
	int ret;

	*cq = (struct fab_swcq){
	    .mask = n - 1,
	    .flags = attr->flags,
	    .credits = n,
	    .rung = attr->rung,
	    .mirror = attr->mirror,
	    .evfd = -1,
	    .ready = attr->ready,
	    .arg = attr->arg,
	    .name = attr->name != NULL ? attr->name : "fabric",
	};
	if (cq->rung == NULL)
		cq->rung = &cq->own_rung;
	cq->rung_seen = __atomic_load_n(cq->rung, __ATOMIC_RELAXED);
	cq->ring = calloc(n, sizeof(*cq->ring));
	if (cq->ring == NULL)
		return -ENOMEM;
	cq->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->evfd < 0) {
		ret = -errno;
		lc_log_err("%s: cannot create the completion queue's wait fd: %s", cq->name,
		           strerror(-ret));
		goto err_free;
	}
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return 0;

err_free:
	free(cq->ring);
	cq->ring = NULL;
	return ret;
}

void fab_swcq_fini(struct fab_swcq *cq)
{
	if (cq->ring == NULL)
		return;
	close(cq->evfd);
	pthread_spin_destroy(&cq->lock);
	free(cq->ring);
	cq->ring = NULL;
	cq->evfd = -1;
}

void fab_swcq_push(struct fab_swcq *cq, const struct fab_link *link, uint64_t wrid, int opcode,
                   int status, uint32_t len, uint32_t imm, int has_imm)
{
	bool mp = cq->flags & FAB_SWCQ_MP;
	uint64_t tail;

	if (mp)
		pthread_spin_lock(&cq->lock);
	tail = __atomic_load_n(&cq->tail, __ATOMIC_RELAXED);
	/* a credit was taken at post time, so the ring cannot be full */
	cq->ring[tail & cq->mask] = (struct fab_wc){
	    .wrid = wrid,
	    .link_ctx = __atomic_load_n(&link->ctx, __ATOMIC_RELAXED),
	    .status = status,
	    .len = len,
	    .imm = imm,
	    .link_id = link->id,
	    .opcode = (uint8_t)opcode,
	    .has_imm = (uint8_t)has_imm,
	};
	/* pairs with the acquire load of tail in fab_swcq_poll() and fab_swcq_empty() */
	__atomic_store_n(&cq->tail, tail + 1, __ATOMIC_RELEASE);
	if (mp)
		pthread_spin_unlock(&cq->lock);
}

void fab_swcq_ring(struct fab_swcq *cq)
{
	uint64_t one = 1;

	if (write(cq->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_warn("%s: cannot wake the poller: %s", cq->name, strerror(errno));
	__atomic_add_fetch(cq->rung, 1, __ATOMIC_RELEASE); /* after the write: clear_wake() */
}

bool fab_swcq_wake(struct fab_swcq *cq)
{
	/*
	 * Our entries, then the flag: pairs with the fence in announce(). The
	 * release store of tail alone would not do: a later load may pass an
	 * earlier store (x86 too), and the poller that announced after our
	 * load would miss the entries the store had not yet published.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&cq->waiting, __ATOMIC_RELAXED))
		return false;
	/*
	 * Written once per arm: the poller wakes and takes every entry there is. Before, every
	 * push until the poller had polled wrote it again, a syscall each in the posting thread.
	 * The flag stays raised until the poller polls, as before (clear_wake() relies on it).
	 */
	if (__atomic_load_n(&cq->rang, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&cq->rang, 1, __ATOMIC_ACQ_REL))
		return true;
	fab_swcq_ring(cq);
	return true;
}

/* announce -- the poller is about to sleep: raise the flags, then look (fence). */
static void announce(struct fab_swcq *cq)
{
	__atomic_store_n(&cq->rang, 0, __ATOMIC_RELAXED); /* before the flag: see wake */
	__atomic_store_n(&cq->waiting, 1, __ATOMIC_SEQ_CST);
	if (cq->mirror != NULL)
		__atomic_store_n(cq->mirror, 1, __ATOMIC_SEQ_CST);
	/* the flags, then the ring: pairs with the fence in fab_swcq_wake() */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* anything_ready -- after announce(): whether the poller should poll instead of sleeping. */
static bool anything_ready(struct fab_swcq *cq)
{
	return !fab_swcq_empty(cq) || (cq->ready != NULL && cq->ready(cq->arg));
}

/* disarm -- lower the flags (the poller took completions, or stops waiting). */
static void disarm(struct fab_swcq *cq)
{
	if (__atomic_load_n(&cq->waiting, __ATOMIC_RELAXED)) {
		__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
		if (cq->mirror != NULL)
			__atomic_store_n(cq->mirror, 0, __ATOMIC_SEQ_CST);
	}
}

/*
 * clear_wake -- the poller, not armed: clear the fd when it was written
 * since we last cleared it. A wake-up whose completions a poll took (a
 * waiter driving the fabric reaps them itself), or one from a producer
 * that saw the flag just before a poll lowered it, would otherwise leave
 * the eventfd readable for good: the core watches it level-triggered and
 * arms again (which clears it) only when nobody waits on an ack key, so
 * its progress thread's epoll_wait() would return at once, again and
 * again -- a spin that takes a core from the waiters (4 nodes on 2 cores,
 * shm: barrier rounds of 3.2 ms under LOCO_WAIT=spin, 11 us without it).
 */
static void clear_wake(struct fab_swcq *cq)
{
	uint32_t r = __atomic_load_n(cq->rung, __ATOMIC_ACQUIRE);
	uint64_t v;

	if (r == cq->rung_seen || __atomic_load_n(&cq->waiting, __ATOMIC_RELAXED))
		return;
	cq->rung_seen = r;
	if (read(cq->evfd, &v, sizeof(v)) < 0) {
		if (errno != EAGAIN)
			lc_log_debug("%s: cannot clear the wait fd: %s", cq->name, strerror(errno));
		return;
	}
	/* fab_arm() in another thread armed meanwhile: what we took may be its wake-up */
	if (__atomic_load_n(&cq->waiting, __ATOMIC_SEQ_CST) && write(cq->evfd, &v, sizeof(v)) < 0 &&
	    errno != EAGAIN)
		lc_log_warn("%s: cannot wake the poller: %s", cq->name, strerror(errno));
}

int fab_swcq_poll(struct fab_swcq *cq, struct fab_wc *wc, int max)
{
	uint64_t head, tail;
	int n = 0;

	if (wc == NULL || max <= 0)
		return -EINVAL;
	head = __atomic_load_n(&cq->head, __ATOMIC_RELAXED);
	tail = __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE); /* pairs with fab_swcq_push() */
	for (; head != tail && n < max; head++, n++)
		wc[n] = cq->ring[head & cq->mask];
	if (n) {
		__atomic_store_n(&cq->head, head, __ATOMIC_RELEASE);
		fab_credits_give(&cq->credits, n);
		disarm(cq); /* the arm is one-shot, as ibv_req_notify_cq(): whoever polls disarms */
	}
	clear_wake(cq);
	return n;
}

void fab_swcq_disarm(struct fab_swcq *cq)
{
	__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
	if (cq->mirror != NULL)
		__atomic_store_n(cq->mirror, 0, __ATOMIC_RELAXED);
}

int fab_swcq_arm(struct fab_swcq *cq)
{
	uint64_t v;

	if (read(cq->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	announce(cq);
	if (anything_ready(cq)) {
		fab_swcq_disarm(cq);
		return -EAGAIN;
	}
	return 0;
}

int fab_swcq_wait(struct fab_swcq *cq, int timeout_ms)
{
	struct pollfd pfd = {.fd = cq->evfd, .events = POLLIN};
	uint64_t v;
	int r, err;

	announce(cq);
	if (anything_ready(cq)) {
		disarm(cq);
		return 0;
	}
	r = poll(&pfd, 1, timeout_ms);
	err = errno;
	disarm(cq);
	if (r > 0 && read(cq->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	return r < 0 && err != EINTR ? -err : 0;
}
