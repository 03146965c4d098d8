/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view-lock.c -- a lock loop beside a view-node's barrier rounds, for the
 * partition scenarios: the cluster's leases must never overlap, whatever
 * the network does (issue 10, partitions (d)).
 *
 * Every node takes lock "l" (hosted on node 1; a 1 s lease, 1.5 s
 * takeover) over and over, holds it 2-20 ms while loco_lock_held() says
 * so, and releases it. For each grant it appends one line to DIR/lock.ID:
 *
 *   TOKEN NODE START_NS END_NS RECOVERED
 *
 * START_NS: CLOCK_MONOTONIC when the acquire returned (after the grant);
 * END_NS: the earlier of the release call and the lease's end on this
 * node's clock (the lease is never renewed here). All nodes run on this
 * machine, so their clocks are one: the driver (vl_check_leases in
 * views-lib.sh) sorts every node's lines by token and checks that tokens
 * are unique and that each hold ends before the next one starts.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <loco/lock.h>

#include "scenario.h"
#include "view-lock.h"

#define VLOCK_LEASE_NS    1000000000ll
#define VLOCK_TAKEOVER_NS 1500000000ll

int vlock_create(struct vlock *v, loco_channel_t *ch)
{
	loco_lock_cfg_t cfg = {.lease_ns = VLOCK_LEASE_NS, .takeover_ns = VLOCK_TAKEOVER_NS};

	return loco_lock_create_cfg(ch, "l", 1, &cfg, &v->lk);
}

/* hold -- one grant: hold it a little, release it, and record it. */
static void hold(struct vlock *v, unsigned *seed)
{
	int64_t start = sc_now_ns(), end, lease_end, until;
	uint64_t token = 0;
	int recovered = loco_lock_recovered(v->lk);

	lease_end = start + loco_lock_lease_left(v->lk);
	if (loco_lock_token(v->lk, &token) != 0)
		token = 0; /* lost at once (the lease ended): recorded as token 0, checked */
	until = start + (2 + rand_r(seed) % 19) * 1000000ll;
	while (sc_now_ns() < until && loco_lock_held(v->lk)) {
		struct timespec ts = {0, 1000000};

		nanosleep(&ts, NULL);
	}
	end = sc_now_ns();
	loco_lock_release(v->lk); /* -ETIMEDOUT/-ESTALE/-ECONNRESET: the hold ended anyway */
	if (end > lease_end)
		end = lease_end;
	fprintf(v->f, "%" PRIu64 " %u %" PRId64 " %" PRId64 " %d\n", token, v->id, start, end,
	        recovered);
	fflush(v->f);
	v->grants++;
}

static void *loop(void *arg)
{
	struct vlock *v = arg;
	unsigned seed = v->id * 2654435761u;

	while (!__atomic_load_n(&v->stop, __ATOMIC_ACQUIRE)) {
		int ret = loco_lock_acquire(v->lk, 200000000ll);

		if (ret == 0) {
			hold(v, &seed);
		} else {
			struct timespec ts = {0, 10000000};

			if (ret == -LOCO_EPARTITION)
				v->epart++;
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int vlock_start(struct vlock *v, const char *dir, uint32_t id)
{
	char path[512];

	v->id = id;
	snprintf(path, sizeof(path), "%s/lock.%u", dir, id);
	v->f = fopen(path, "a");
	if (v->f == NULL)
		return -errno;
	if (pthread_create(&v->th, NULL, loop, v) != 0) {
		fclose(v->f);
		v->f = NULL;
		return -EAGAIN;
	}
	return 0;
}

void vlock_stop(struct vlock *v)
{
	if (v->f == NULL)
		return;
	__atomic_store_n(&v->stop, 1, __ATOMIC_RELEASE);
	pthread_join(v->th, NULL);
	fclose(v->f);
	v->f = NULL;
	sc_log("lock: %u grants, %u waits refused as partitioned", v->grants, v->epart);
}
