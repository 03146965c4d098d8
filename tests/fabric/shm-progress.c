/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-progress.c -- on shm a thread that drives its fab (fab_progress(),
 * the sleep and spin waiters' path) sleeps on the bell page's futex, and
 * a peer's WRITE, FAA or SEND landing here wakes it (loco-fabric-shm(7),
 * "Waiting"):
 *
 * 1. The first call after a quiet spell arms the fab and returns 1 at once
 *    (a landing before the arming was not counted: look again).
 * 2. B's driver sleeps in fab_progress() with a 30 s timeout; once it is
 *    asleep (its sleepers flag), another thread's fab_progress() gets
 *    -EBUSY (it is sent off to sleep elsewhere), and A WRITEs into B: the
 *    driver's call returns 2, not at its timeout (a 0 is a sleep that
 *    nobody woke), and not 1: a peer's landing is what the thread sent off
 *    may wait for, and only a 2 makes the manager wake it (before, it slept
 *    out its interval, up to 4 ms). The value is there. The same for a FAA,
 *    and for a SEND into a posted RECV (the RECV's completion is ready when
 *    the call returns).
 * 3. While armed, every landing bumps B's bell page once; a READ does not.
 * 4. No driver for SHM_DISARM_NS: B's provider thread disarms it, and a
 *    WRITE no longer bumps the bell page (the data path's cost is one load).
 * 5. A spinning driver (timeout 0) neither arms the fab nor keeps it armed:
 *    disarmed, its calls return 0 with nothing to do, the fab stays
 *    unarmed and a WRITE still does not bump the bell page; a completion
 *    ready here makes the call return 1.
 * 6. A spinning driver walks the links only while some link has work for
 *    the walk (the fab's walk_work: RECVs posted and not filled, requests
 *    deferred): 0 at rest; a SEND from A with no RECV at B waits at A
 *    (A's count 1); B posts a RECV (B's count 1), A's request runs and
 *    B's spinning calls (fab_progress(), fab_poll()) take the SEND into it;
 *    both counts back at 0. RECVs still posted when the link closes are
 *    flushed and leave the count at 0. (The counts are what fails when an
 *    update is missing: fab_poll() walks the links whatever they say.)
 *
 * Figures: the wake-up latency of each landing (WRITE posted -> driver
 * awake), printed, not asserted.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../../liboco/fabric/shm/shm.h"
#include "helpers.h"

#define LEN      4096
#define SLEEP_NS (30ll * 1000000000) /* a driver's sleep: a wake-up must end it */

static struct fab *a, *b;
static uint64_t *tgt;

struct driver {
	volatile uint64_t *word; /* what it waits for */
	uint64_t want;
	int once; /* stop at the first wake-up (a SEND: the word is not ours to watch) */
	int last; /* what the last call returned */
	unsigned calls, zeros;
	uint64_t woke_ns;
};

static void *driver_main(void *arg)
{
	struct driver *d = arg;

	/* bounded: each call returns on a landing or at SLEEP_NS; at most 8 calls */
	while (__atomic_load_n(d->word, __ATOMIC_ACQUIRE) != d->want && d->calls < 8) {
		int ret = fab_progress(b, SLEEP_NS);

		d->calls++;
		d->last = ret;
		if (ret == 0)
			d->zeros++;
		else if (ret != 1 && ret != 2)
			T_FAIL("fab_progress: %s", t_errname(ret));
		else if (d->once)
			break;
	}
	d->woke_ns = t_now_ns();
	return NULL;
}

static struct shm_fpage *bpage_flags(void)
{
	return to_shm_fab(b)->fpage;
}

/* walk_work -- @f's count of work for a walk of its links (RECVs posted, requests deferred). */
static uint64_t walk_work(struct fab *f)
{
	return __atomic_load_n(&to_shm_fab(f)->walk_work, __ATOMIC_ACQUIRE);
}

static uint32_t bell(void)
{
	return __atomic_load_n(&to_shm_fab(b)->bpage->seq, __ATOMIC_ACQUIRE);
}

/* wait_asleep -- wait (bounded) until B's driver sleeps on the bell page. */
static void wait_asleep(void)
{
	int64_t end = t_now_ms() + 5000;

	while (!__atomic_load_n(&bpage_flags()->sleepers, __ATOMIC_ACQUIRE)) {
		if (t_now_ms() > end)
			T_FAIL("B's driver did not go to sleep within 5 s");
		t_sleep_us(100);
	}
	t_sleep_ms(2); /* and into the futex (a landing before that is seen too) */
}

/* land -- start a driver waiting for *@word == @want, let it sleep, post @wr on @l. */
static void land(const char *what, struct fab_link *l, struct fab_wr *wr, volatile uint64_t *word,
                 uint64_t want)
{
	struct driver d = {.word = word, .want = want};
	pthread_t th;
	uint64_t t0;

	T_ASSERT_OK(pthread_create(&th, NULL, driver_main, &d));
	wait_asleep();
	T_ASSERT_ERR(fab_progress(b, SLEEP_NS), -EBUSY); /* it holds the bell: sent off */
	t0 = t_now_ns();
	wr->flags |= FAB_WR_SIGNALED;
	T_ASSERT_OK(t_run(l, wr));
	T_ASSERT_OK(pthread_join(th, NULL));
	T_ASSERT_EQ(*word, want);
	T_ASSERT_EQ(d.zeros, 0); /* no call slept to its timeout */
	T_ASSERT_EQ(d.last, 2);  /* a landing: wake the one sent off */
	printf("progress: a sleeping driver woke for a %s after %.1f us (%u calls): ok\n", what,
	       (double)(d.woke_ns - t0) / 1000.0, d.calls);
}

int main(void)
{
	struct fab_mr *tmr, *lmr;
	struct fab_link *la, *lb;
	struct fab_wr wr;
	struct fab_wc wc;
	uint64_t *loc, rbuf[8] = {0}, got = 0;
	uint32_t s0;

	t_init("shm-progress", 90);
	if (strcmp(t_provider(), "shm") != 0)
		t_skip("shm only");
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	tgt = t_alloc(LEN);
	loc = t_alloc(LEN);
	tmr = t_mr_reg(b, tgt, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE |
	                   FAB_ACCESS_REMOTE_ATOMIC);
	lmr = t_mr_reg(a, loc, LEN, FAB_ACCESS_LOCAL_WRITE);
	t_pair(a, b, 1, 2, &la, &lb);

	/* 1. the first call arms and asks to look again */
	T_ASSERT_EQ(bpage_flags()->armed, 0);
	T_ASSERT_EQ(fab_progress(b, SLEEP_NS), 1);
	T_ASSERT_EQ(bpage_flags()->armed, 1);
	printf("progress: the first call armed the fab and returned at once: ok\n");

	/* 2. WRITE, FAA, SEND wake a sleeping driver */
	loc[0] = 41;
	wr = t_wr_rdma(FAB_OP_WRITE, 1, 0, loc, 8, lmr->lkey, (uintptr_t)tgt, tmr->rkey);
	land("WRITE", la, &wr, tgt, 41);
	wr = t_wr_faa(2, 0, loc + 1, lmr->lkey, (uintptr_t)(tgt + 1), tmr->rkey, 5);
	land("FAA", la, &wr, tgt + 1, 5);
	{
		struct fab_recv_wr rw = {.wrid = 7, .local = rbuf, .len = 64, .lkey = tmr->lkey};
		struct fab_mr *rmr = t_mr_reg(b, rbuf, sizeof(rbuf), FAB_ACCESS_LOCAL_WRITE);
		struct driver d = {.word = &got, .want = 1, .once = 1};
		pthread_t th;
		uint64_t t0;
		int n = 0;

		rw.lkey = rmr->lkey;
		T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
		T_ASSERT_OK(pthread_create(&th, NULL, driver_main, &d));
		wait_asleep();
		loc[2] = 0x5e17d;
		wr = t_wr_rdma(FAB_OP_SEND, 3, FAB_WR_SIGNALED, loc + 2, 8, lmr->lkey, 0, 0);
		t0 = t_now_ns();
		T_ASSERT_OK(t_run(la, &wr));
		T_ASSERT_OK(pthread_join(th, NULL));
		T_ASSERT_EQ(d.zeros, 0);
		T_ASSERT_EQ(d.calls, 1);
		T_ASSERT_EQ(d.last, 2);
		for (int64_t end = t_now_ms() + 5000; n == 0 && t_now_ms() < end;)
			n = fab_poll(b, &wc, 1);
		T_ASSERT_EQ(n, 1);
		T_ASSERT_EQ(wc.wrid, 7);
		T_ASSERT_EQ(wc.status, 0);
		T_ASSERT_EQ(rbuf[0], 0x5e17d);
		printf("progress: a sleeping driver woke for a SEND after %.1f us: ok\n",
		       (double)(d.woke_ns - t0) / 1000.0);
		T_ASSERT_OK(fab_mr_dereg(rmr));
	}

	/* 3. armed: one bump per landing, none for a READ */
	T_ASSERT_EQ(fab_progress(b, 1) >= 0, 1); /* (a driver that may sleep: keeps it armed) */
	s0 = bell();
	wr = t_wr_rdma(FAB_OP_WRITE, 4, 0, loc, 8, lmr->lkey, (uintptr_t)tgt, tmr->rkey);
	T_ASSERT_OK(t_run(la, &wr));
	T_ASSERT_EQ(bell() - s0, 1);
	wr = t_wr_rdma(FAB_OP_READ, 5, 0, loc + 3, 8, lmr->lkey, (uintptr_t)tgt, tmr->rkey);
	T_ASSERT_OK(t_run(la, &wr));
	T_ASSERT_EQ(bell() - s0, 1);
	printf("progress: armed, a WRITE bumps the bell once, a READ not: ok\n");

	/* 4. no driver: disarmed by B's thread, and WRITEs cost no bump */
	for (int64_t end = t_now_ms() + 5000;
	     __atomic_load_n(&bpage_flags()->armed, __ATOMIC_ACQUIRE) != 0;) {
		if (t_now_ms() > end)
			T_FAIL("still armed 5 s after the last driver");
		t_sleep_ms(5);
	}
	s0 = bell();
	wr = t_wr_rdma(FAB_OP_WRITE, 6, 0, loc, 8, lmr->lkey, (uintptr_t)tgt, tmr->rkey);
	T_ASSERT_OK(t_run(la, &wr));
	T_ASSERT_EQ(bell(), s0);
	printf("progress: disarmed without a driver, a WRITE leaves the bell alone: ok\n");

	/* 5. a spinning driver: no arming, landings not counted, completions are */
	for (int i = 0; i < 100; i++)
		T_ASSERT_EQ(fab_progress(b, 0), 0);
	T_ASSERT_EQ(__atomic_load_n(&bpage_flags()->armed, __ATOMIC_ACQUIRE), 0);
	s0 = bell();
	wr = t_wr_rdma(FAB_OP_WRITE, 8, 0, loc, 8, lmr->lkey, (uintptr_t)tgt, tmr->rkey);
	T_ASSERT_OK(t_run(la, &wr));
	T_ASSERT_EQ(fab_progress(b, 0), 0);
	T_ASSERT_EQ(bell(), s0);
	{
		uint64_t *abuf = t_alloc(LEN);
		struct fab_mr *amr =
		    t_mr_reg(a, abuf, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);

		/* B's own WRITE into A: its completion is ready at B */
		wr = t_wr_rdma(FAB_OP_WRITE, 9, FAB_WR_SIGNALED, tgt, 8, tmr->lkey, (uintptr_t)abuf,
		               amr->rkey);
		T_ASSERT_OK(fab_post(lb, &wr, 1));
		T_ASSERT_EQ(fab_progress(b, 0), 1);
		T_EXPECT_WC(b, 9, FAB_OP_WRITE, 0, 5000, NULL);
		T_ASSERT_EQ(__atomic_load_n(&bpage_flags()->armed, __ATOMIC_ACQUIRE), 0);
		T_ASSERT_EQ(abuf[0], tgt[0]);
		T_ASSERT_OK(fab_mr_dereg(amr));
		t_free(abuf, LEN);
	}
	printf("progress: a spinning driver arms nothing, sees its completions: ok\n");

	/* 6. a spinning driver walks the links only while one has work */
	{
		struct fab_mr *rmr = t_mr_reg(b, rbuf, sizeof(rbuf), FAB_ACCESS_LOCAL_WRITE);
		struct fab_recv_wr rw = {.wrid = 11, .local = rbuf, .len = 64, .lkey = rmr->lkey};
		int got_a = 0, got_b = 0, calls = 0;

		T_ASSERT_EQ(walk_work(a), 0);
		T_ASSERT_EQ(walk_work(b), 0);
		loc[4] = 0x600d;
		wr = t_wr_rdma(FAB_OP_SEND, 12, FAB_WR_SIGNALED, loc + 4, 8, lmr->lkey, 0, 0);
		T_ASSERT_OK(fab_post(la, &wr, 1));
		T_ASSERT_EQ(walk_work(a), 1); /* deferred: no RECV at B */
		T_ASSERT_EQ(fab_progress(a, 0), 0);
		T_ASSERT_EQ(fab_poll(a, &wc, 1), 0);
		T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
		/* (0 once delivered, should A's thread be quick) */
		T_ASSERT_EQ(walk_work(b) >= 1, 1);
		/* bounded: 5 s of spinning calls on both sides */
		for (int64_t end = t_now_ms() + 5000; !(got_a && got_b) && t_now_ms() < end;) {
			if (!got_a && fab_progress(a, 0) >= 0 && fab_poll(a, &wc, 1) == 1) {
				T_ASSERT_EQ(wc.wrid, 12);
				T_ASSERT_EQ(wc.status, 0);
				got_a = 1;
			}
			if (!got_b) {
				calls++;
				if (fab_progress(b, 0) >= 0 && fab_poll(b, &wc, 1) == 1) {
					T_ASSERT_EQ(wc.wrid, 11);
					T_ASSERT_EQ(wc.status, 0);
					got_b = 1;
				}
			}
		}
		if (!got_a || !got_b)
			T_FAIL("a SEND deferred for want of a RECV: %s",
			       got_a ? "never delivered at B" : "never ran at A");
		T_ASSERT_EQ(rbuf[0], 0x600d);
		T_ASSERT_EQ(__atomic_load_n(&bpage_flags()->armed, __ATOMIC_ACQUIRE), 0);
		T_ASSERT_EQ(walk_work(a), 0);
		T_ASSERT_EQ(walk_work(b), 0);
		printf(
		    "progress: a SEND into a RECV posted late, delivered after %d spinning calls; "
		    "the walk counts are back at 0: ok\n",
		    calls);
		/* RECVs left posted: the close flushes them */
		for (int i = 0; i < 3; i++) {
			rw.wrid = 20 + (uint64_t)i;
			T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
		}
		T_ASSERT_EQ(walk_work(b), 3);
		T_ASSERT_OK(fab_link_close(lb));
		T_ASSERT_EQ(walk_work(b), 0);
		for (int i = 0, n; i < 3; i++) {
			for (int64_t end = t_now_ms() + 5000; (n = fab_poll(b, &wc, 1)) == 0;)
				if (t_now_ms() > end)
					T_FAIL("flushed RECV %d: no completion", i);
			T_ASSERT_EQ(n, 1);
			T_ASSERT_EQ(wc.status, -ECANCELED);
		}
		printf("progress: RECVs flushed at close leave the walk count at 0: ok\n");
		T_ASSERT_OK(fab_mr_dereg(rmr));
	}

	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_mr_dereg(tmr));
	T_ASSERT_OK(fab_mr_dereg(lmr));
	fab_close(a);
	fab_close(b);
	t_free(tgt, LEN);
	t_free(loc, LEN);
	printf("shm-progress: PASS\n");
	return T_EXIT_PASS;
}
