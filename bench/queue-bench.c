/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * queue-bench.c -- fan-in: N - 1 producers hand 64-byte items to node 1,
 * three ways, each timed at node 1 from the start barrier until it holds
 * every item:
 *   queue  loco_queue(3): one queue owned by node 1 (1024 slots); an
 *          enqueue is a CAS and a WRITE, each waited for;
 *   rpipe  loco_rpipe(3): a pipe from each producer to node 1 (64 KiB
 *          rings), which node 1 polls in turn;
 *   rpc    loco_rpc(3): one-way calls to node 1, whose handler counts.
 * Plus each producer's enqueue latency (the queue's median), against one
 * rpipe write's (posted, not landed) and one rpc call's.
 *
 * loco-run -n N build/bench/queue-bench [--items M] [--json FILE]  (N >= 2)
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/queue.h>
#include <loco/rpc.h>
#include <loco/rpipe.h>

#include "bench.h"

#define SEC   1000000000ll
#define TMO   (30 * SEC)
#define ITEM  64u
#define NMODE 3

static const char *mode_name[NMODE] = {"queue", "rpipe", "rpc"};
static long got_rpc; /* node 1: items the rpc handler took (its progress thread: one at a time) */

static void die_if(const char *what, int ret)
{
	if (ret)
		bench_die(what, ret);
}

static int take(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)ret, (void)cap, (void)rl;
	if (msg->len == ITEM)
		got_rpc++;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"items", required_argument, NULL, 'i'},
	    {"json", required_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	const char *json = NULL, *prov = getenv("LOCO_FABRIC");
	char json_default[4096], name[32];
	double rate[NMODE] = {0}, lat[NMODE] = {0}, *t;
	long items = 20000;
	uint8_t item[ITEM] = {0};
	loco_queue_cfg_t qcfg;
	loco_rpc_cfg_t rcfg;
	loco_rpipe_t **pipes;
	loco_barrier_t *bar;
	loco_rpc_ep_t *ep;
	loco_queue_t *q;
	loco_manager_t *m;
	loco_channel_t *ch;
	uint32_t me, n;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'i') {
			items = atol(optarg);
		} else if (c == 'j') {
			json = optarg;
		} else {
			fprintf(stderr,
			        "usage: loco-run -n N queue-bench [--items M] [--json FILE]\n");
			return 2;
		}
	}
	if (items < 10)
		return 2;
	if (prov == NULL)
		prov = "auto";
	die_if("init", loco_init(NULL, &m));
	me = loco_manager_node_id(m);
	n = loco_manager_job_size(m);
	if (n < 2 || me < 1 || me > n) {
		fprintf(stderr, "queue-bench: run with loco-run -n N, N >= 2\n");
		return 2;
	}
	t = calloc((size_t)items, sizeof(*t));
	pipes = calloc(n + 1, sizeof(*pipes));
	if (t == NULL || pipes == NULL)
		return 1;
	die_if("channel", loco_channel_create(m, NULL, "queue-bench", n, &ch));
	die_if("barrier", loco_barrier_create(ch, "start", &bar));
	loco_queue_cfg_default(&qcfg, 1);
	qcfg.item_max = ITEM;
	die_if("queue", loco_queue_create(ch, "q", &qcfg, &q));
	for (uint32_t w = 2; w <= n; w++) {
		if (me != 1 && me != w)
			continue;
		snprintf(name, sizeof(name), "p%u", w);
		die_if("rpipe", loco_rpipe_create(ch, name, w, 1, 64 * 1024, &pipes[w]));
	}
	loco_rpc_cfg_default(&rcfg, NULL, 0);
	die_if("rpc", loco_rpc_create(ch, "rpc", &rcfg, &ep));
	die_if("register", loco_rpc_register(ep, "take", take, NULL, NULL));
	die_if("join", loco_channel_join(ch, 20 * SEC));
	die_if("queue sync", loco_queue_sync(q, 20 * SEC) < 0 ? -ETIMEDOUT : 0);
	die_if("rpc sync", loco_rpc_sync(ep, 20 * SEC));

	for (int k = 0; k < NMODE; k++) {
		long want = items * (long)(n - 1), got = 0;
		uint64_t t0;

		die_if("barrier", loco_barrier_wait(bar, TMO));
		t0 = bench_now_ns();
		if (me == 1) {
			got_rpc = 0;
			while (got < want) {
				size_t len;
				int r = 0;

				if ((int64_t)(bench_now_ns() - t0) > 120 * SEC)
					bench_die(mode_name[k], -ETIMEDOUT);
				if (k == 0) {
					r = loco_queue_dequeue(q, item, sizeof(item), &len);
					got += r == 0;
				} else if (k == 1) {
					for (uint32_t w = 2; w <= n; w++)
						while (loco_rpipe_read(pipes[w], item, sizeof(item),
						                       &len, 0) == 0)
							got++;
				} else {
					r = loco_rpc_progress(ep, 256);
					got = got_rpc;
				}
				if (r < 0 && r != -EAGAIN)
					bench_die(mode_name[k], r);
			}
			rate[k] = (double)want / ((double)(bench_now_ns() - t0) / 1e9);
		} else {
			uint32_t id = loco_rpc_id("take");

			for (long i = 0; i < items; i++) {
				double s = bench_now_us();
				int r;

				memcpy(item, &i, sizeof(i));
				if (k == 0) {
					while ((r = loco_queue_enqueue(q, item, ITEM)) == -EAGAIN)
						;
				} else if (k == 1) {
					r = loco_rpipe_write(pipes[me], item, ITEM, TMO);
				} else {
					r = loco_rpc_call(ep, 1, id, item, ITEM, TMO);
				}
				die_if(mode_name[k], r);
				t[i] = bench_now_us() - s;
			}
			if (k == 2)
				die_if("flush", loco_rpc_flush(ep, 1, TMO));
			qsort(t, (size_t)items, sizeof(*t), bench_cmp_double);
			lat[k] = t[items / 2];
		}
		die_if("barrier", loco_barrier_wait(bar, TMO)); /* all taken before the next mode */
		if (me == 2)
			printf("queue-bench: node 2: %s %.3f us a call (median)\n", mode_name[k],
			       lat[k]);
	}
	if (me == 1) {
		FILE *f;

		printf("queue-bench: provider %s, %u producers x %ld items of %u B\n", prov, n - 1,
		       items, ITEM);
		printf("%-6s %14s %9s\n", "mode", "items/s", "x queue");
		for (int k = 0; k < NMODE; k++)
			printf("%-6s %14.0f %9.2f\n", mode_name[k], rate[k], rate[k] / rate[0]);
		if (json == NULL)
			json = bench_result_path(json_default, sizeof(json_default),
			                         "queue-bench-%s.json", prov);
		f = fopen(json, "w");
		if (f != NULL) {
			fprintf(
			    f,
			    "{\"bench\": \"queue-bench\", \"provider\": \"%s\", \"producers\": %u, "
			    "\"items\": %ld, \"items_per_s\": {\"queue\": %.0f, \"rpipe\": %.0f, "
			    "\"rpc\": %.0f}}\n",
			    prov, n - 1, items, rate[0], rate[1], rate[2]);
			fclose(f);
			printf("results: %s\n", json);
		}
	}
	die_if("barrier", loco_barrier_wait(bar, TMO));
	loco_rpc_destroy(ep);
	for (uint32_t w = 2; w <= n; w++)
		loco_rpipe_destroy(pipes[w]);
	loco_queue_destroy(q);
	loco_barrier_destroy(bar);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(pipes);
	free(t);
	return 0;
}
