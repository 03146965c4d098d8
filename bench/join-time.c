/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join-time.c -- how long a cluster of N nodes takes to form: from the
 * launcher's start (--t0, CLOCK_REALTIME in ns, e.g. `date +%s%N` taken
 * just before loco-run) until this node sees all N members in its view.
 *
 *   loco-run -n N --no-prefix build/bench/join-time --t0 "$(date +%s%N)"
 *
 * Every node: loco_init(), then polls loco_manager_members() every 0.2 ms until it
 * counts N (at most 120 s), and prints one line:
 *   "join-time node K nodes N init_ms A all_ms B"
 * where A is the time from --t0 (or from this process's start of
 * loco_init() without --t0) until loco_init() returned, and B until this
 * node saw all N members. The time until *every* node sees all members is
 * the largest B of the N lines (bench/report takes it). Then the nodes
 * meet in a barrier, so that none leaves while another still waits for
 * it, and leave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loco.h>
#include <loco/barrier.h>

#include "bench.h"

#define WAIT_NS (120ll * 1000000000)

/* real_ns -- CLOCK_REALTIME in ns: the launcher's clock and ours are the same one. */
static int64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *env = getenv("LOCO_NODES");
	uint32_t nodes = env ? (uint32_t)atoi(env) : 0, ids[1];
	int64_t t0 = 0, t_init, t_all, deadline;
	struct timespec pause = {.tv_sec = 0, .tv_nsec = 200000};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--t0") == 0 && i + 1 < argc) {
			t0 = strtoll(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: loco-run -n N join-time [--t0 REALTIME_NS]\n");
			return 2;
		}
	}
	if (nodes < 1) {
		fprintf(stderr, "join-time: run under loco-run -n N\n");
		return 2;
	}
	if (t0 == 0)
		t0 = real_ns();
	if ((ret = loco_init(NULL, &m)) != 0)
		bench_die("loco_init", ret);
	t_init = real_ns();
	deadline = t_init + WAIT_NS;
	while ((uint32_t)loco_manager_members(m, ids, 1) < nodes) {
		if (real_ns() > deadline) {
			fprintf(stderr, "join-time: node %u sees %d of %u members after 120 s\n",
			        loco_manager_node_id(m), loco_manager_members(m, ids, 1), nodes);
			loco_fini(m);
			return 1;
		}
		nanosleep(&pause, NULL);
	}
	t_all = real_ns();
	printf("join-time node %u nodes %u init_ms %.3f all_ms %.3f\n", loco_manager_node_id(m),
	       nodes, (double)(t_init - t0) / 1e6, (double)(t_all - t0) / 1e6);
	fflush(stdout);
	/* nobody leaves while another node still waits to see it */
	if ((ret = loco_channel_create(m, NULL, "join-time", nodes, &ch)) != 0 ||
	    (ret = loco_barrier_create(ch, "B", &b)) != 0)
		bench_die("the last barrier's setup", ret);
	if ((ret = loco_channel_join(ch, WAIT_NS)) != 0)
		bench_die("loco_channel_join (the last barrier's channel)", ret);
	if ((ret = loco_barrier_wait(b, WAIT_NS)) != 0)
		bench_die("loco_barrier_wait (the last barrier)", ret);
	loco_barrier_destroy(b);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
