/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * object.c -- loco_object(3): EXAMPLE's counter object, and the waiter of "Waiters": every
 * node but node 1 adds 1 to node 1's word with counter_add(); node 1 waits with the waiter
 * until its word has counted them all.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include <loco/channel.h>

#include "docex.h"

#include "object_counter.inc"

static loco_channel_t *ch;
static struct counter cnt;
static loco_ack_key_t *ack;
static uint64_t want;
static struct timespec deadline;

/* object_waiter: what the fragment calls */
static bool done(const struct counter *c)
{
	return __atomic_load_n((const uint64_t *)loco_region_ptr(c->word), __ATOMIC_ACQUIRE) >=
	       want;
}

static bool deadline_passed(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline.tv_sec ||
	       (now.tv_sec == deadline.tv_sec && now.tv_nsec > deadline.tv_nsec);
}

static int wait_counted(loco_channel_t *ch, const struct counter *obj)
{
#include "object_waiter.inc"
	return 0;
}

static int run(struct dx *x)
{
	uint64_t old = 0;
	int ret;

	if ((ret = dx_channel(x, "object", x->nodes, &ch)) || (ret = counter_create(ch, &cnt)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("object", "setup", ret);
	if (x->me != 1)
		return dx_err("object", "counter_add", counter_add(&cnt, 1, 1, ack, &old));
	want = x->nodes - 1;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += 10;
	return dx_err("object", "wait", wait_counted(ch, &cnt));
}

static int check(struct dx *x)
{
	uint64_t v;

	if (x->me != 1)
		return 0;
	v = *(const uint64_t *)loco_region_ptr(cnt.word);
	return dx_check("object", v == x->nodes - 1, "node 1's word is %llu",
	                (unsigned long long)v);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	if (cnt.obj != NULL)
		loco_object_destroy(cnt.obj);
	loco_channel_destroy(ch);
	ack = NULL, cnt = (struct counter){0}, ch = NULL;
	return 0;
}

const struct dx_example dx_object[] = {
    {"object", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
