/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-lazy-ack.c -- the ACK of a lazy request (FAB_WR_LAZY, no ACKREQ on
 * the wire) may wait for the target's next request on the link, and for no
 * more than the delay; any other request is ACKed at once
 * (loco-fabric-tcp(7)).
 *
 * Two tcp fabs in one process, A posting to B. The delay is set to 3 s
 * (LOCO_TCP_ACK_DELAY_US; the dead-peer bound to 20 s, as the delay may be
 * a quarter of it at most), so that each bound below is far from it. A
 * thread drives B (fab_progress(), timeout 0, in a loop) except in 4:
 *  1. a WRITE without FAB_WR_LAZY completes within 1 s (ACKREQ: not held);
 *  2. a lazy WRITE, then B writes to A once the first landed: the lazy
 *     WRITE completes within 1 s of that (its ACK rides with B's WRITE);
 *  3. a lazy WRITE with nothing sent back completes within 10 s (the
 *     delay ends, the driver's turn sends the ACK), and B's driver went on;
 *  4. no driver on B (its NIC thread serves): a WRITE without FAB_WR_LAZY
 *     completes within 1 s, a lazy one within 10 s (the NIC thread holds
 *     it as a driver does, and wakes when the delay ends).
 * Without ACKREQ (every ACK held) 1 and 4 fail; without the piggyback 2
 * fails; an ACK held for good fails 3 or 4.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define LEN 4096
#define SEC 1000

static struct fab *fa, *fb;
static struct fab_link *la, *lb;
static struct fab_mr *mra, *mrb;
static uint8_t *bufa, *bufb;
static uint64_t wrid = 1;
static int stop_driver;
static unsigned long turns;

static void *drive_b(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_driver, __ATOMIC_ACQUIRE)) {
		int r = fab_progress(fb, 0);

		if (r < 0 && r != -EBUSY)
			T_FAIL("fab_progress on B: %s", t_errname(r));
		__atomic_add_fetch(&turns, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* a_write -- A WRITEs 64 bytes of @seed at @off of B's buffer, signaled (+ @flags). */
static uint64_t a_write(unsigned flags, size_t off, uint64_t seed)
{
	struct fab_wr wr;

	t_fill(bufa + off, 64, seed);
	wr = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED | flags, bufa + off, 64, mra->lkey,
	               (uintptr_t)bufb + off, mrb->rkey);
	T_ASSERT_OK(fab_post(la, &wr, 1));
	return wr.wrid;
}

/* landed -- wait up to @ms until B's buffer holds A's 64 bytes at @off. */
static void landed(size_t off, int ms)
{
	int64_t t0 = t_now_ms();

	while (memcmp(bufa + off, bufb + off, 64) != 0) {
		if (t_now_ms() - t0 > ms)
			T_FAIL("A's WRITE at %zu did not land at B within %d ms", off, ms);
		t_sleep_us(100);
	}
}

static int64_t expect_done(uint64_t id, int ms, const char *what)
{
	int64_t t0 = t_now_ms();

	T_EXPECT_WC(fa, id, FAB_OP_WRITE, 0, ms, NULL);
	printf("%s: completed after %lld ms: ok\n", what, (long long)(t_now_ms() - t0));
	return t_now_ms() - t0;
}

int main(void)
{
	struct fab_attr attr = {.timeout_ms = 20000};
	pthread_t drv;
	struct fab_wr back;
	unsigned long before;
	uint64_t id;

	t_init("tcp-lazy-ack", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("tcp only");
	setenv("LOCO_TCP_ACK_DELAY_US", "3000000", 1);
	fa = t_fab_open(&attr); /* dead-peer bound 20 s: the delay may be 5 s at most */
	fb = t_fab_open(&attr);
	bufa = t_alloc(LEN);
	bufb = t_alloc(LEN);
	mra = t_mr_reg(fa, bufa, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	mrb = t_mr_reg(fb, bufb, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	t_pair(fa, fb, 1, 2, &la, &lb);
	T_ASSERT_EQ(pthread_create(&drv, NULL, drive_b, NULL), 0);

	/* 1. not lazy: ACKREQ, ACKed on the driver's next turn */
	id = a_write(0, 0, 1);
	expect_done(id, SEC, "WRITE with ACKREQ, B driving");

	/* 2. lazy, answered: the ACK rides with B's WRITE to A */
	id = a_write(FAB_WR_LAZY, 64, 2);
	landed(64, 5 * SEC);
	t_fill(bufb + 1024, 64, 3);
	back = t_wr_rdma(FAB_OP_WRITE, 900, 0, bufb + 1024, 64, mrb->lkey, (uintptr_t)bufa + 1024,
	                 mra->rkey);
	T_ASSERT_OK(fab_post(lb, &back, 1));
	expect_done(id, SEC, "lazy WRITE, then B writes to A: the ACK came with B's WRITE");

	/* 3. lazy, never answered: the delay ends */
	before = __atomic_load_n(&turns, __ATOMIC_RELAXED);
	id = a_write(FAB_WR_LAZY, 128, 4);
	expect_done(id, 10 * SEC, "lazy WRITE, nothing sent back: ACKed when the delay ended");
	if (__atomic_load_n(&turns, __ATOMIC_RELAXED) == before)
		T_FAIL("B's driver made no turn meanwhile");

	__atomic_store_n(&stop_driver, 1, __ATOMIC_RELEASE);
	T_ASSERT_EQ(pthread_join(drv, NULL), 0);

	/* 4. nobody drives B: its NIC thread holds the lazy ACK only */
	id = a_write(0, 192, 5);
	expect_done(id, SEC, "WRITE with ACKREQ, B's NIC thread serving");
	id = a_write(FAB_WR_LAZY, 256, 6);
	expect_done(id, 10 * SEC, "lazy WRITE, B's NIC thread serving: ACKed when the delay ended");

	T_EXPECT_NONE(fa, 50);
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(mra));
	T_ASSERT_OK(fab_mr_dereg(mrb));
	fab_close(fa);
	fab_close(fb);
	t_free(bufa, LEN);
	t_free(bufb, LEN);
	printf("tcp-lazy-ack: PASS\n");
	return T_EXIT_PASS;
}
