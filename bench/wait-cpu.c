/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wait-cpu.c -- what waiting costs, per wait policy (LOCO_WAIT): CPU time
 * (user + sys of the whole process: application, progress and NIC
 * threads; getrusage) per barrier round and per second of idle barrier
 * wait, beside the round time each policy gives.
 *
 *   LOCO_WAIT=sleep loco-run -n 4 build/bench/wait-cpu [--rounds N] [--idle-ms MS] [--rpc]
 *
 * Every node: WARMUP rounds, then --rounds barrier rounds back to back
 * (round time = wall / rounds; CPU per round = CPU / rounds). Then the
 * idle phase: node 1 enters a barrier at once while the others sleep
 * --idle-ms before entering; node 1's CPU over its wait is the idle
 * waiter's, the others' CPU over their sleep is the background (progress
 * and NIC threads) of a node that waits in nothing. One line per node.
 * --rpc: every node also holds an rpc endpoint of all the nodes with
 * trad aggregation (as a service does: loco_rpc(3)), idle throughout, so
 * the figures include what such an endpoint costs a node that is not
 * calling (its flush poller: parked while no batch waits).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/rpc.h>

#include "bench.h"

#define WARMUP  200 /* rounds before the timed ones (bench/peers/mpi-rma warms up with 1000) */
#define WAIT_NS (60ll * 1000000000)

/* cpu_ns -- user and system CPU time of this process so far. */
static void cpu_ns(uint64_t *user, uint64_t *sys)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*user = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000;
	*sys = (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"rounds", required_argument, NULL, 'r'},
	    {"idle-ms", required_argument, NULL, 'i'},
	    {"rpc", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *env = getenv("LOCO_NODES"), *policy = getenv("LOCO_WAIT");
	uint32_t nodes = env ? (uint32_t)atoi(env) : 1, me;
	long rounds = 200, idle_ms = 2000;
	uint64_t u0, s0, u1, s1, t0, t1, iu0, is0, iu1, is1, it0, it1;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	loco_rpc_ep_t *ep = NULL;
	uint32_t ids[LOCO_BARRIER_MAX_NODE];
	int c, ret, with_rpc = 0;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			rounds = strtol(optarg, NULL, 10);
			break;
		case 'i':
			idle_ms = strtol(optarg, NULL, 10);
			break;
		case 'p':
			with_rpc = 1;
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
			        "usage: [LOCO_WAIT=adaptive|spin|sleep|block] "
			        "loco-run -n N wait-cpu [--rounds N] "
			        "[--idle-ms MS] [--rpc]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (nodes < 2 || nodes > LOCO_BARRIER_MAX_NODE || rounds < 1 || idle_ms < 100) {
		fprintf(stderr, "wait-cpu: run under loco-run -n N (N >= 2), --rounds >= 1, "
		                "--idle-ms >= 100\n");
		return 2;
	}
	if (policy == NULL || *policy == '\0')
		policy = "adaptive"; /* the default */
	ret = loco_init(NULL, &m);
	if (ret)
		bench_die("loco_init", ret);
	me = loco_manager_node_id(m);
	if ((ret = loco_channel_create(m, NULL, "wait-cpu", nodes, &ch)) != 0 ||
	    (ret = loco_barrier_create(ch, "B", &b)) != 0)
		bench_die("setup", ret);
	if (with_rpc) {
		loco_rpc_cfg_t cfg;

		for (uint32_t i = 0; i < nodes; i++)
			ids[i] = i + 1;
		loco_rpc_cfg_default(&cfg, ids, nodes);
		cfg.agg = LOCO_RPC_AGG_TRAD;
		if ((ret = loco_rpc_create(ch, "rpc", &cfg, &ep)) != 0)
			bench_die("rpc", ret);
	}
	if ((ret = loco_channel_join(ch, WAIT_NS)) != 0 ||
	    (ep != NULL && (ret = loco_rpc_sync(ep, WAIT_NS)) != 0))
		bench_die("join", ret);
	for (int i = 0; i < WARMUP; i++)
		if ((ret = loco_barrier_wait(b, WAIT_NS)) != 0)
			bench_die("warm-up barrier", ret);

	/* busy: rounds back to back */
	t0 = bench_now_ns();
	cpu_ns(&u0, &s0);
	for (long i = 0; i < rounds; i++)
		if ((ret = loco_barrier_wait(b, WAIT_NS)) != 0)
			bench_die("barrier", ret);
	cpu_ns(&u1, &s1);
	t1 = bench_now_ns();

	/* idle: node 1 waits, the others arrive idle_ms later */
	it0 = bench_now_ns();
	cpu_ns(&iu0, &is0);
	if (me != 1)
		sleep_ms(idle_ms);
	else if ((ret = loco_barrier_wait(b, WAIT_NS)) != 0)
		bench_die("idle barrier", ret);
	cpu_ns(&iu1, &is1);
	it1 = bench_now_ns();
	if (me != 1 && (ret = loco_barrier_wait(b, WAIT_NS)) != 0)
		bench_die("idle barrier", ret);

	printf(
	    "wait-cpu: node %u policy %s nodes %u%s: %ld rounds: %.2f us/round wall, cpu "
	    "%.2f us/round (user %.2f + sys %.2f); %s %.0f ms: cpu %.1f ms/s = %.1f %% of a core "
	    "(user %.1f + sys %.1f ms)\n",
	    me, policy, nodes, ep != NULL ? " (+ idle trad rpc endpoint)" : "", rounds,
	    (double)(t1 - t0) / 1e3 / (double)rounds,
	    (double)(u1 - u0 + s1 - s0) / 1e3 / (double)rounds,
	    (double)(u1 - u0) / 1e3 / (double)rounds, (double)(s1 - s0) / 1e3 / (double)rounds,
	    me == 1 ? "idle barrier wait" : "idle sleep (background)", (double)(it1 - it0) / 1e6,
	    (double)(iu1 - iu0 + is1 - is0) / 1e6 / ((double)(it1 - it0) / 1e9),
	    100.0 * (double)(iu1 - iu0 + is1 - is0) / (double)(it1 - it0),
	    (double)(iu1 - iu0) / 1e6, (double)(is1 - is0) / 1e6);
	fflush(stdout);
	if ((ret = loco_barrier_wait(b, WAIT_NS)) != 0) /* nobody leaves early */
		bench_die("last barrier", ret);
	if (ep != NULL)
		loco_rpc_destroy(ep);
	loco_barrier_destroy(b);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
