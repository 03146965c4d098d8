/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock-relock.c -- a thread that holds the lock and acquires it again gets
 * -EDEADLK at once, instead of waiting on itself until its timeout (or for
 * ever); the hold is left as it was. Another thread of the holding node
 * still takes its turn (it waits), and a try_acquire on the holding node
 * says -EBUSY, as before.
 *
 * loco-run -n 3. Channel "lk-relock" holds lock "R" hosted on node 1, with
 * a 500 ms lease and an 800 ms takeover time.
 *
 * A. Node 2 takes R. Its acquire(3 s) returns -EDEADLK (before: -ETIMEDOUT
 *    after 3 s), its try_acquire -EBUSY; it still holds R, with the same
 *    token. The other nodes see node 2 as the holder and time out.
 *    Node 2 releases (0, then -EPERM).
 *
 * B. Threads of node 2. The main thread takes R; a second thread's
 *    acquire(200 ms) times out (it waits its turn: not -EDEADLK). The
 *    second thread then acquires with a 10 s timeout while the main
 *    thread releases: it gets R, and its own acquire again is -EDEADLK,
 *    while the main thread's acquire(200 ms) times out. The main thread
 *    releases it (any thread of the node may).
 *
 * C. A hold whose lease ran out is still this node's until released: the
 *    holder's acquire is -EDEADLK, its release -ETIMEDOUT, and its next
 *    acquire succeeds. Then every node takes R once more.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <loco/lock.h>

#include "scenario.h"

#define LOCK_HOST 1
#define LEASE_MS  500
#define TAKE_MS   800
#define MS        1000000ll
#define TMO       (10 * SC_NS)

static const loco_lock_cfg_t lcfg = {LEASE_MS * MS, TAKE_MS *MS};

struct other {
	loco_lock_t *lk;
	int64_t timeout_ns;
	int ret;   /* the acquire's result */
	int again; /* the acquire after it, when it got the lock */
};

/* other_main -- a second thread of node 2: acquire; if granted, acquire again. */
static void *other_main(void *arg)
{
	struct other *o = arg;

	o->ret = loco_lock_acquire(o->lk, o->timeout_ns);
	if (o->ret == 0)
		o->again = loco_lock_acquire(o->lk, 3 * SC_NS);
	return NULL;
}

static void other_run(struct other *o, pthread_t *th)
{
	if (pthread_create(th, NULL, other_main, o) != 0)
		SC_FAIL("pthread_create failed");
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_lock_t *lk;
	struct sc_sync sync;
	struct other o;
	pthread_t th;
	uint32_t me, holder;
	uint64_t token, tk;
	int64_t t0;
	int ret;

	sc_init("lock-relock", argc, argv, 90);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-relock", 3, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "R", LOCK_HOST, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* A. the holder asks again */
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
		SC_ASSERT_OK(loco_lock_token(lk, &token));
		t0 = sc_now_ns();
		ret = loco_lock_acquire(lk, 3 * SC_NS);
		sc_log("the holder's second acquire(3 s): %s after %.1f ms", loco_strerror(ret),
		       (double)(sc_now_ns() - t0) / 1e6);
		SC_ASSERT_EQ(ret, -EDEADLK);
		SC_ASSERT_EQ(loco_lock_acquire(lk, -1), -EDEADLK); /* no timeout: at once too */
		SC_ASSERT_EQ(loco_lock_try_acquire(lk), -EBUSY);
		SC_ASSERT_EQ(loco_lock_held(lk), 1);
		SC_ASSERT_OK(loco_lock_token(lk, &tk));
		SC_ASSERT_EQ(tk, token);
	}
	sc_sync_wait(&sync, "node 2 holds", SC_WAIT_MS);
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, 2);
	if (me != 2) {
		SC_ASSERT_EQ(loco_lock_try_acquire(lk), -EBUSY);
		SC_ASSERT_EQ(loco_lock_acquire(lk, 100 * MS), -ETIMEDOUT); /* another node's */
	}
	sc_sync_wait(&sync, "refused", SC_WAIT_MS);
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_release(lk));
		SC_ASSERT_EQ(loco_lock_release(lk), -EPERM);
	}
	sc_sync_wait(&sync, "phase A", SC_WAIT_MS);
	sc_log("phase A passed");

	/* B. threads of the holding node take turns */
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
		o = (struct other){.lk = lk, .timeout_ns = 200 * MS, .again = 1};
		other_run(&o, &th);
		pthread_join(th, NULL);
		SC_ASSERT_EQ(o.ret, -ETIMEDOUT); /* another thread's hold: it waited */
		o = (struct other){.lk = lk, .timeout_ns = TMO, .again = 1};
		other_run(&o, &th);
		sc_sleep_ms(100);
		SC_ASSERT_OK(loco_lock_release(lk));
		pthread_join(th, NULL);
		SC_ASSERT_EQ(o.ret, 0);
		SC_ASSERT_EQ(o.again, -EDEADLK);
		SC_ASSERT_EQ(loco_lock_held(lk), 1); /* the node holds it, by the other thread */
		SC_ASSERT_EQ(loco_lock_acquire(lk, 200 * MS), -ETIMEDOUT);
		SC_ASSERT_EQ(loco_lock_try_acquire(lk), -EBUSY);
		SC_ASSERT_OK(loco_lock_release(lk));
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO)); /* this thread's turn again */
		SC_ASSERT_OK(loco_lock_release(lk));
	}
	sc_sync_wait(&sync, "phase B", SC_WAIT_MS);
	sc_log("phase B passed");

	/* C. an expired hold is still the node's until released */
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
		sc_sleep_ms(LEASE_MS + 100);
		SC_ASSERT_EQ(loco_lock_held(lk), 0);
		SC_ASSERT_EQ(loco_lock_acquire(lk, 3 * SC_NS), -EDEADLK);
		SC_ASSERT_EQ(loco_lock_release(lk), -ETIMEDOUT); /* nobody else asked meanwhile */
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
		SC_ASSERT_OK(loco_lock_release(lk));
	}
	sc_sync_wait(&sync, "phase C", SC_WAIT_MS);
	SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
	SC_ASSERT_EQ(loco_lock_acquire(lk, TMO), -EDEADLK);
	SC_ASSERT_OK(loco_lock_release(lk));
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	sc_log("phase C passed");

	loco_lock_destroy(lk);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
