/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wake-lat.c -- how soon a waiting thread sees a peer's WRITE when it is
 * one of two threads of its node that wait at once, each past its spin
 * window: one of them drives the fabric (on shm: asleep on the bell page,
 * which the WRITE rings), the other is sent off (fab_progress() says
 * -EBUSY) and sleeps on the manager's event count until the driver tells
 * it a peer's WRITE landed.
 *
 *   loco-run -n 2 build/bench/wake-lat [--pings N] [--gap-ms MS]
 *
 * Node 2 runs --threads (default 2) threads; thread i waits with
 * loco_waiter_pause() (the manager's policy, LOCO_WAIT) for word i of its
 * region to change. Node 1 WRITEs its CLOCK_MONOTONIC time into word 0,
 * then word 1, and so on in turn, one every --gap-ms (default 5: each
 * thread waits that times the threads, far past any spin window),
 * --pings times (default 200) in all. --threads 1: the wake-up of a lone
 * waiter, which drives the fabric itself. Each thread
 * takes the time the WRITE took to be seen (one host: one clock). Node 2
 * prints the median, p90 and max per thread and of both together. On
 * one host only (the clocks of two hosts are not one).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <loco.h>

#include "bench.h"

#define SEC    1000000000ll
#define TMO    (30 * SEC)
#define THR    8 /* at most */
#define STOP   UINT64_MAX
#define MAXPIN 100000

static loco_manager_t *m;
static loco_region_t *words, *src;
static long pings = 200, gap_ms = 5;
static int nthr = 2;

struct waiter {
	int i;
	long n;
	double *lat; /* us */
};

static volatile uint64_t *word(int i)
{
	return (volatile uint64_t *)loco_region_ptr(words) + i * 8; /* a line each */
}

static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	uint64_t seen = 0;
	loco_waiter_t lw;

	loco_waiter_init(&lw, m);
	for (;;) {
		uint64_t v;

		loco_waiter_reset(&lw);
		while ((v = __atomic_load_n(word(w->i), __ATOMIC_ACQUIRE)) == seen)
			loco_waiter_pause(&lw);
		if (v == STOP)
			break;
		if (w->n < MAXPIN)
			w->lat[w->n++] = (double)(bench_now_ns() - v) / 1e3;
		seen = v;
	}
	return NULL;
}

static void summary(const char *who, double *t, long n)
{
	if (n == 0) {
		printf("%-12s no pings seen\n", who);
		return;
	}
	qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
	printf("%-12s %6ld %10.1f %10.1f %10.1f\n", who, n, t[n / 2], t[n * 9 / 10], t[n - 1]);
}

/* ping -- @v into word @i of node 2; a STOP's ack may not come (node 2 may be gone by then) */
static void ping(const loco_rref_t *peer, int i, uint64_t v, loco_ack_key_t *ack)
{
	int ret;

	*(uint64_t *)loco_region_ptr(src) = v;
	ret = loco_write(src, 0, peer, (size_t)i * 64, 8, ack);
	if (ret == 0)
		ret = loco_ack_wait(ack, TMO);
	if (ret && v != STOP)
		bench_die("write", ret);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"pings", required_argument, NULL, 'p'},
	    {"gap-ms", required_argument, NULL, 'g'},
	    {"threads", required_argument, NULL, 't'},
	    {NULL, 0, NULL, 0},
	};
	struct waiter w[THR];
	pthread_t th[THR];
	loco_object_t *obj;
	loco_channel_t *ch;
	uint32_t me;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pings = atol(optarg);
			break;
		case 'g':
			gap_ms = atol(optarg);
			break;
		case 't':
			nthr = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: loco-run -n 2 wake-lat [--pings N] [--gap-ms MS] "
			                "[--threads N]\n");
			return 2;
		}
	}
	if (pings < 2 || pings > MAXPIN || gap_ms < 0 || gap_ms > 10000 || nthr < 1 || nthr > THR)
		return 2;
	ret = loco_init(NULL, &m);
	if (ret)
		bench_die("init", ret);
	me = loco_manager_node_id(m);
	if (me != 1 && me != 2) {
		fprintf(stderr, "wake-lat: run with loco-run -n 2\n");
		return 2;
	}
	if ((ret = loco_channel_create(m, NULL, "wake-lat", 2, &ch)) ||
	    (ret = loco_object_create(ch, "w", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "words", 64 * THR, LOCO_ACCESS_WRITE, &words)) ||
	    (ret = loco_region_create(obj, "src", 64, 0, &src)) ||
	    (ret = loco_channel_join(ch, 20 * SEC)))
		bench_die("setup", ret);
	if (loco_object_sync(obj, 20 * SEC) < 0)
		bench_die("object sync", -ETIMEDOUT);
	if (me == 2) {
		double *all = calloc((size_t)pings, sizeof(double));
		long n = 0;

		for (int i = 0; i < nthr; i++) {
			w[i] =
			    (struct waiter){.i = i, .lat = calloc((size_t)pings, sizeof(double))};
			if (w[i].lat == NULL || all == NULL ||
			    pthread_create(&th[i], NULL, wait_main, &w[i]) != 0)
				bench_die("thread", -ENOMEM);
		}
		for (int i = 0; i < nthr; i++)
			pthread_join(th[i], NULL);
		printf(
		    "wake-lat: wait policy %s, %ld pings, one every %ld ms, %d waiting threads\n",
		    getenv("LOCO_WAIT") ? getenv("LOCO_WAIT") : "default", pings, gap_ms, nthr);
		printf("%-12s %6s %10s %10s %10s\n", "thread", "pings", "median us", "p90 us",
		       "max us");
		for (int i = 0; i < nthr; i++) {
			char who[16];

			for (long k = 0; k < w[i].n && n < pings; k++)
				all[n++] = w[i].lat[k];
			snprintf(who, sizeof(who), "thread %d", i);
			summary(who, w[i].lat, w[i].n);
		}
		summary("both", all, n);
		for (int i = 0; i < nthr; i++)
			free(w[i].lat);
		free(all);
	} else {
		struct timespec gap = {.tv_sec = gap_ms / 1000,
		                       .tv_nsec = (gap_ms % 1000) * 1000000};
		loco_ack_key_t *ack;
		loco_rref_t peer;

		if ((ret = loco_region_remote(words, 2, &peer)) ||
		    (ret = loco_ack_key_create(m, &ack)))
			bench_die("peer", ret);
		for (long k = 0; k < pings; k++) {
			nanosleep(&gap, NULL);
			ping(&peer, (int)(k % nthr), bench_now_ns(), ack);
		}
		nanosleep(&gap, NULL); /* the last ping seen before the stop overwrites it */
		for (int i = 0; i < nthr; i++)
			ping(&peer, i, STOP, ack);
		loco_ack_key_destroy(ack);
	}
	loco_object_destroy(obj); /* and its regions */
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
