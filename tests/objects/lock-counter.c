/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock-counter.c -- mutual exclusion: a non-atomic read-modify-write of a
 * remote counter under the lock loses no update.
 *
 * loco-run -n N (N >= 3). Channel "lk-count" holds lock "L" hosted on node
 * 1, and two atomic variables hosted on node N: "ctr", the counter, and
 * "inside", a witness. First, node 2 takes the lock; every other node sees
 * try_acquire() fail with -EBUSY and loco_lock_holder() name node 2; node
 * 2's second try fails too, and release twice is -EPERM. Then every node,
 * K times: acquire; FAA(inside, 1) must return 0 (nobody else inside);
 * read ctr; write ctr + 1 (a plain READ and a plain WRITE, each waited
 * for); FAA(inside, -1) must return 1; release. After a barrier, ctr must
 * be exactly N x K: a lost update would show as less. The host of the lock
 * (node 1) and the host of the counter (node N) take part like the others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <loco/atomic_var.h>
#include <loco/lock.h>

#include "scenario.h"

#define K         200
#define LOCK_HOST 1
#define TMO       (10 * SC_NS)

static int iters; /* K divided by LOCO_TEST_SCALE (sc_scaled) */

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_lock_t *lk;
	loco_atomic_var_t *ctr, *inside;
	struct sc_sync sync;
	uint64_t v, in;
	uint32_t nodes, me, holder;
	int64_t t0, wait_max = 0;

	sc_init("lock-counter", argc, argv, 90);
	iters = (int)sc_scaled(K);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n N, N >= 3 (LOCO_NODES=%u)", nodes);
	m = sc_start();
	me = loco_manager_node_id(m);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-count", nodes, &ch));
	SC_ASSERT_EQ(loco_lock_create(ch, "L", 0, &lk), -EINVAL);
	SC_ASSERT_OK(loco_lock_create(ch, "L", LOCK_HOST, &lk));
	SC_ASSERT_OK(loco_atomic_var_create(ch, "ctr", nodes, &ctr));
	SC_ASSERT_OK(loco_atomic_var_create(ch, "inside", nodes, &inside));
	SC_ASSERT_EQ(loco_lock_release(lk), -EPERM);
	if (me != LOCK_HOST)
		SC_ASSERT_EQ(loco_lock_try_acquire(lk), -LOCO_ENOTJOINED); /* not joined yet */
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* 1. one holder; the others are refused */
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
		SC_ASSERT_EQ(loco_lock_recovered(lk), 0);
		SC_ASSERT_EQ(loco_lock_try_acquire(lk), -EBUSY); /* the node holds it already */
	}
	sc_sync_wait(&sync, "node 2 holds", SC_WAIT_MS);
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, 2);
	if (me != 2) {
		SC_ASSERT_EQ(loco_lock_try_acquire(lk), -EBUSY);
		SC_ASSERT_EQ(loco_lock_acquire(lk, SC_NS / 100), -ETIMEDOUT);
		SC_ASSERT_EQ(loco_lock_release(lk), -EPERM);
	}
	sc_sync_wait(&sync, "refused", SC_WAIT_MS);
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_release(lk));
		SC_ASSERT_EQ(loco_lock_release(lk), -EPERM);
	}
	sc_sync_wait(&sync, "node 2 released", SC_WAIT_MS);
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, 0);
	sc_sync_wait(&sync, "seen free", SC_WAIT_MS);

	/* 2. iters increments each, a non-atomic read-modify-write under the lock */
	t0 = sc_now_ns();
	for (int i = 0; i < iters; i++) {
		int64_t t = sc_now_ns();

		SC_ASSERT_OK(loco_lock_acquire(lk, 30 * SC_NS));
		if (sc_now_ns() - t > wait_max)
			wait_max = sc_now_ns() - t;
		SC_ASSERT_OK(loco_atomic_var_faa(inside, 1, &in, TMO));
		if (in != 0)
			SC_FAIL("round %d: %llu other node(s) inside the critical section", i,
			        (unsigned long long)in);
		SC_ASSERT_OK(loco_atomic_var_read(ctr, &v, TMO));
		SC_ASSERT_OK(loco_atomic_var_write(ctr, v + 1, TMO));
		SC_ASSERT_OK(loco_atomic_var_faa(inside, (uint64_t)-1, &in, TMO));
		SC_ASSERT_EQ(in, 1);
		SC_ASSERT_OK(loco_lock_release(lk));
	}
	sc_log("%d locked increments in %.1f ms (longest acquire %.2f ms)", iters,
	       (double)(sc_now_ns() - t0) / 1e6, (double)wait_max / 1e6);

	sc_sync_wait(&sync, "all incremented", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(ctr, &v, TMO));
	if (v != (uint64_t)nodes * iters)
		SC_FAIL("the counter holds %llu, expected %u x %d: updates were lost",
		        (unsigned long long)v, nodes, iters);
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, 0);
	sc_log("counter = %llu = %u x %d", (unsigned long long)v, nodes, iters);

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_atomic_var_destroy(inside);
	loco_atomic_var_destroy(ctr);
	loco_lock_destroy(lk);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
