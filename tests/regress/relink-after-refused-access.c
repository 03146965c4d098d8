/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * relink-after-refused-access.c -- a refused remote access (here: a
 * region the peer destroyed) puts the RC data link into the error state.
 * The manager must rebuild the link while the member lives, so that later
 * operations to that node work again. Before the fix every later
 * operation failed with -ECANCELED, forever. Run by loco-run -n 2.
 *
 * A destroyed object's regions stay registered for a while (loco_object(3):
 * a WRITE that crossed the news lands harmlessly), at most a bounded number
 * of them: node 1 destroys CHURN more objects with a region each after the
 * doomed one, which pushes it out, so node 2's stale reference is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/shared_region.h>

#include "../fail.h"

#define CHURN 200 /* destroyed regions after the doomed one: more than are ever kept */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_shared_region_t *keep;
	loco_object_t *obj;
	loco_region_t *doomed, *src;
	loco_ack_key_t *ack;
	loco_rref_t stale;
	volatile uint64_t *flag;
	uint32_t me, peer;
	double end;
	int ret;

	alarm(60);
	if ((ret = loco_init(NULL, &m)))
		FAIL("loco_init: %s", loco_strerror(ret));
	me = loco_manager_node_id(m);
	peer = me == 1 ? 2 : 1;
	if ((ret = loco_channel_create(m, NULL, "relink", 2, &ch)) ||
	    (ret = loco_shared_region_create(ch, "keep", 64, LOCO_ACCESS_WRITE, &keep)) ||
	    (ret = loco_object_create(ch, "raw", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "doomed", 64, LOCO_ACCESS_WRITE, &doomed)) ||
	    (ret = loco_region_create(obj, "src", 64, 0, &src)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_channel_join(ch, 20000000000ll)))
		FAIL("setup: %s", loco_strerror(ret));
	flag = loco_shared_region_ptr(keep);

	if (me == 1) {
		/* wait until node 2 holds a reference to our "doomed", then destroy it */
		for (end = now_s() + 10; flag[2] != 1 && now_s() < end;)
			usleep(1000);
		if (flag[2] != 1)
			FAIL("node 1: node 2 never took its reference");
		loco_object_destroy(obj);
		for (int i = 0; i < CHURN; i++) {
			loco_object_t *o;
			loco_region_t *r;

			if ((ret = loco_object_create(ch, "churn", NULL, NULL, &o)) ||
			    (ret = loco_region_create(o, "r", 64, LOCO_ACCESS_WRITE, &r)))
				FAIL("node 1: churn %d: %s", i, loco_strerror(ret));
			loco_object_destroy(o);
		}
		flag[0] = 1;
		if ((ret = loco_shared_region_write(keep, peer, 0, 8, ack)) ||
		    (ret = loco_ack_wait(ack, 10000000000ll)))
			FAIL("node 1: signalling node 2: %s", loco_strerror(ret));
		for (end = now_s() + 20; flag[1] != 2 && now_s() < end;)
			usleep(1000);
		if (flag[1] != 2)
			FAIL("node 1: node 2's write after the refused access never arrived");
	} else {
		if ((ret = loco_region_remote(doomed, peer, &stale)))
			FAIL("node 2: no remote region: %s", loco_strerror(ret));
		flag[2] = 1;
		if ((ret = loco_shared_region_write(keep, peer, 16, 8, ack)) ||
		    (ret = loco_ack_wait(ack, 10000000000ll)))
			FAIL("node 2: signalling node 1: %s", loco_strerror(ret));
		for (end = now_s() + 10; flag[0] != 1 && now_s() < end;)
			usleep(1000);
		if (flag[0] != 1)
			FAIL("node 2: no signal from node 1");
		/* the region is gone at node 1: the write with the stale reference is refused */
		ret = loco_write(src, 0, &stale, 0, 8, ack);
		if (ret == 0)
			ret = loco_ack_wait(ack, 10000000000ll);
		if (ret != -EACCES)
			FAIL("node 2: write to a destroyed region: %s, expected -EACCES",
			     loco_strerror(ret));
		/* later writes to node 1 must work again (bounded retries while it relinks) */
		flag[1] = 2;
		for (end = now_s() + 15;; usleep(20000)) {
			ret = loco_shared_region_write(keep, peer, 8, 8, ack);
			if (ret == 0)
				ret = loco_ack_wait(ack, 5000000000ll);
			if (ret == 0)
				break;
			if (now_s() > end)
				FAIL("node 2: writes to node 1 still fail: %s", loco_strerror(ret));
		}
		printf("node 2: refused access, then writes work again\n");
		loco_object_destroy(obj);
	}
	sleep(1); /* let the peer finish before leaving */
	loco_ack_key_destroy(ack);
	loco_shared_region_destroy(keep);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
