/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-doorbell.c -- on shm the wait fd (fab_wait_fd(), an eventfd peers
 * ring while the poller is armed) does not stay readable once the poller
 * took what it announced: the core's progress thread watches it
 * level-triggered and arms again only when nobody waits on an ack key,
 * so a ring left in it made every epoll_wait() return at once (a spin
 * that took a core from the waiters).
 *
 * 1. A arms; B SENDs into A's posted RECV (a ring); A polls the RECV's
 *    completion: the wait fd is not readable afterwards.
 * 2. A arms; A's own post completes (a ring from our side); A polls it:
 *    not readable afterwards.
 * 3. A late ring: a peer that saw the flag up just before the poll lowered
 *    it rings after the poll (staged: the ring without a completion). The
 *    next poll finds nothing and clears it.
 * 4. An armed poller keeps its ring: a poll that found nothing while
 *    armed leaves the wait fd readable (the ring is the wake-up).
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../liboco/fabric/shm/shm.h"
#include "helpers.h"

#define LEN 4096

static int readable(struct fab *f)
{
	struct pollfd p = {.fd = fab_wait_fd(f), .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* drain -- poll @f until it gives the completion @wrid (bounded: 5 s). */
static void drain(struct fab *f, uint64_t wrid)
{
	struct fab_wc wc;
	int64_t end = t_now_ms() + 5000;

	for (;;) {
		int n = fab_poll(f, &wc, 1);

		if (n == 1) {
			T_ASSERT_EQ(wc.wrid, wrid);
			T_ASSERT_EQ(wc.status, 0);
			return;
		}
		if (t_now_ms() > end)
			T_FAIL("no completion %llu within 5 s", (unsigned long long)wrid);
	}
}

int main(void)
{
	struct fab *a, *b;
	struct fab_mr *amr, *bmr;
	struct fab_link *la, *lb;
	struct fab_wr wr;
	struct fab_wc wc;
	uint64_t *abuf, *bbuf, one = 1;

	t_init("shm-doorbell", 60);
	if (strcmp(t_provider(), "shm") != 0)
		t_skip("shm only");
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(LEN);
	bbuf = t_alloc(LEN);
	amr = t_mr_reg(a, abuf, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	bmr = t_mr_reg(b, bbuf, LEN, FAB_ACCESS_LOCAL_WRITE);
	t_pair(a, b, 1, 2, &la, &lb);
	while (fab_poll(a, &wc, 1) > 0) /* nothing should be there; start clean */
		;

	/* 1. a peer's ring (a SEND into a posted RECV) */
	T_ASSERT_OK(fab_post_recv(
	    la, &(struct fab_recv_wr){.wrid = 10, .local = abuf, .len = 64, .lkey = amr->lkey}, 1));
	T_ASSERT_EQ(fab_arm(a), 0);
	bbuf[0] = 7;
	wr = t_wr_rdma(FAB_OP_SEND, 11, FAB_WR_SIGNALED, bbuf, 8, bmr->lkey, 0, 0);
	T_ASSERT_OK(t_run(lb, &wr));
	T_ASSERT(readable(a)); /* the ring */
	drain(a, 10);
	T_ASSERT_EQ(abuf[0], 7);
	T_ASSERT(!readable(a));
	printf("doorbell: a peer's ring is cleared by the poll that took its completion: ok\n");

	/* 2. our own completion while armed */
	T_ASSERT_EQ(fab_arm(a), 0);
	abuf[1] = 3;
	{
		struct fab_mr *bt =
		    t_mr_reg(b, bbuf + 64, 64, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);

		wr = t_wr_rdma(FAB_OP_WRITE, 12, FAB_WR_SIGNALED, abuf + 1, 8, amr->lkey,
		               (uintptr_t)(bbuf + 64), bt->rkey);
		T_ASSERT_OK(fab_post(la, &wr, 1));
		T_ASSERT(readable(a));
		drain(a, 12);
		T_ASSERT_EQ(bbuf[64], 3);
		T_ASSERT(!readable(a));
		T_ASSERT_OK(fab_mr_dereg(bt));
	}
	printf("doorbell: our own completion's ring is cleared by its poll: ok\n");

	/* 3. a late ring, after the poll lowered the flag: the next poll clears it */
	T_ASSERT_EQ(write(fab_wait_fd(a), &one, sizeof(one)), (ssize_t)sizeof(one));
	__atomic_add_fetch(&to_shm_fab(a)->bpage->rings, 1, __ATOMIC_RELEASE);
	T_ASSERT(readable(a));
	T_ASSERT_EQ(fab_poll(a, &wc, 1), 0);
	T_ASSERT(!readable(a));
	printf("doorbell: a late ring is cleared by the next poll: ok\n");

	/* 4. armed and nothing found: the ring stays (it is the wake-up) */
	T_ASSERT_EQ(fab_arm(a), 0);
	T_ASSERT_EQ(write(fab_wait_fd(a), &one, sizeof(one)), (ssize_t)sizeof(one));
	__atomic_add_fetch(&to_shm_fab(a)->bpage->rings, 1, __ATOMIC_RELEASE);
	T_ASSERT_EQ(fab_poll(a, &wc, 1), 0);
	T_ASSERT(readable(a));
	T_ASSERT_EQ(fab_wait(a, 1000), 0);
	printf("doorbell: an armed poller's ring stays until it waits: ok\n");

	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, LEN);
	t_free(bbuf, LEN);
	printf("shm-doorbell: PASS\n");
	return T_EXIT_PASS;
}
