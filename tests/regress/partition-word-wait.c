/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * partition-word-wait.c -- a node whose progress thread is starved (a busy
 * host) is not partitioned: loco_manager_partitioned() waits for the
 * progress thread's fresh word on the view instead of answering 1 for a
 * silence that was this node's own (docs/membership.md, "Partition").
 *
 * Before the fix the wait lasted one failure bound: in a fresh clone's
 * run of barrier-stress-shm, live nodes of a healthy majority (5 of 6)
 * failed a barrier wait with -LOCO_EPARTITION, and no view, no log line
 * said they were partitioned; their progress threads were starved.
 *
 * Run by loco-run -n 1 with LOCO_FAIL_TIMEOUT_MS=1000 (a cluster of one:
 * it is its own majority, and no peer excludes it meanwhile). A poller
 * holds the progress thread for HOLD_MS, 2.5 failure bounds, once; the
 * main thread asks loco_manager_partitioned() all along: every answer
 * must be 0. Before the fix the answer was 1 about 2 bounds in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/poller.h>

#include "../fail.h"

#define HOLD_MS 2500
#define RUN_MS  (HOLD_MS + 1500)

static int held;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* hold -- keep the progress thread for HOLD_MS, once: a starved thread */
static int hold(void *arg)
{
	(void)arg;
	__atomic_store_n(&held, 1, __ATOMIC_RELEASE);
	usleep(HOLD_MS * 1000);
	__atomic_store_n(&held, 2, __ATOMIC_RELEASE);
	return LOCO_POLLER_DONE;
}

int main(void)
{
	loco_manager_t *m;
	loco_poller_t *p;
	int64_t t0, asked = 0;
	int ret;

	alarm(60);
	if ((ret = loco_init(NULL, &m)))
		FAIL("loco_init: %s", loco_strerror(ret));
	if (loco_manager_partitioned(m))
		FAIL("partitioned before the test");
	if ((ret = loco_poller_add(m, hold, NULL, 0, &p)))
		FAIL("loco_poller_add: %s", loco_strerror(ret));
	t0 = now_ms();
	while (__atomic_load_n(&held, __ATOMIC_ACQUIRE) == 0) {
		if (now_ms() - t0 > 5000)
			FAIL("the poller did not run within 5 s");
		usleep(1000);
	}
	t0 = now_ms();
	while (now_ms() - t0 < RUN_MS) {
		if (loco_manager_partitioned(m))
			FAIL("partitioned %lld ms into a %d ms hold of the progress thread "
			     "(a cluster of one, which is its own majority)",
			     (long long)(now_ms() - t0), HOLD_MS);
		asked++;
		usleep(10000);
	}
	if (__atomic_load_n(&held, __ATOMIC_ACQUIRE) != 2)
		FAIL("the hold did not end");
	loco_poller_remove(p);
	printf("partition-word-wait: %lld answers over a %d ms hold of the progress thread: "
	       "never partitioned\n",
	       (long long)asked, HOLD_MS);
	loco_fini(m);
	return 0;
}
