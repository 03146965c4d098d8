/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-idle.c -- what one loco_rpc_progress() costs a server whose endpoint
 * has nothing to run: the time a spinning server adds, on average, to
 * every call it has yet to notice (half a turn of its loop).
 *
 *   loco-run -n 2 build/bench/rpc-idle [--polls N] [--runs N]
 *
 * Node 1 makes one call_return to node 2 (so node 2's endpoint has a pipe
 * from it to look at), then serves its own endpoint once a millisecond
 * until node 2 calls its "done". Node 2 serves that first call, then times
 * --runs (3) runs of --polls (2,000,000) loco_rpc_progress(ep, 64) on its
 * idle endpoint, prints ns per poll for each, and calls node 1's "done".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <loco.h>
#include <loco/rpc.h>

#include "bench.h"

#define SEC 1000000000ll

static int served, fin;

static int first(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg, (void)ret, (void)cap;
	*rl = 0;
	served = 1;
	return 0;
}

static int done(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg, (void)ret, (void)cap;
	*rl = 0;
	fin = 1;
	return 0;
}

static void die_if(const char *what, int ret)
{
	if (ret < 0)
		bench_die(what, ret);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"polls", required_argument, NULL, 'p'},
	    {"runs", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	long polls = 2000000, runs = 3;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'p')
			polls = atol(optarg);
		else if (c == 'r')
			runs = atol(optarg);
		else {
			fprintf(stderr, "usage: loco-run -n 2 %s [--polls N] [--runs N]\n",
			        argv[0]);
			return 2;
		}
	}
	if (polls <= 0 || runs <= 0) {
		fprintf(stderr, "%s: --polls and --runs take a positive count\n", argv[0]);
		return 2;
	}
	die_if("init", loco_init(NULL, &m));
	die_if("channel", loco_channel_create(m, NULL, "rpc-idle", 2, &ch));
	loco_rpc_cfg_default(&cfg, NULL, 0);
	die_if("rpc", loco_rpc_create(ch, "idle", &cfg, &ep));
	die_if("register", loco_rpc_register(ep, "first", first, NULL, NULL));
	die_if("register", loco_rpc_register(ep, "done", done, NULL, NULL));
	die_if("join", loco_channel_join(ch, 20 * SEC));
	die_if("sync", loco_rpc_sync(ep, 20 * SEC));
	if (loco_manager_node_id(m) == 1) {
		uint64_t end = bench_now_ns() + 300 * SEC;

		die_if("first call", loco_rpc_call_return(ep, 2, loco_rpc_id("first"), NULL, 0,
		                                          NULL, 0, NULL, 20 * SEC));
		while (!fin) { /* idle here, so that node 2's timing is alone on its CPU */
			if (bench_now_ns() > end)
				bench_die("node 2's done", -ETIMEDOUT);
			die_if("progress", loco_rpc_progress(ep, 64));
			usleep(1000);
		}
	} else {
		const char *f = getenv("LOCO_FABRIC");

		while (!served)
			die_if("progress", loco_rpc_progress(ep, 64));
		for (long r = 0; r < runs; r++) {
			uint64_t t0 = bench_now_ns();

			for (long i = 0; i < polls; i++)
				die_if("progress", loco_rpc_progress(ep, 64));
			printf("rpc-idle: LOCO_FABRIC=%s: idle loco_rpc_progress(): %.1f ns a poll "
			       "(%ld "
			       "polls)\n",
			       f ? f : "(default)", (double)(bench_now_ns() - t0) / (double)polls,
			       polls);
		}
		die_if("done", loco_rpc_call_return(ep, 1, loco_rpc_id("done"), NULL, 0, NULL, 0,
		                                    NULL, 20 * SEC));
	}
	loco_rpc_destroy(ep);
	die_if("channel destroy", loco_channel_destroy(ch));
	loco_fini(m);
	return 0;
}
