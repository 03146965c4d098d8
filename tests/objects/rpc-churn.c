/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-churn.c -- callers come and go for good: what an endpoint holds for
 * them is freed when they leave, and the records of nodes that left are
 * reused for new ones, so memory stays flat however many distinct nodes
 * call.
 *
 * loco-run -n 2. Nodes 1 and 2 make endpoint "c" (no member list, one
 * server thread each). Node 1 then starts CHILDREN nodes one after the
 * other, each with a new id (10, 11, ...): a child joins, makes the
 * endpoint, calls "echo" on nodes 1 and 2 (answers checked), calls
 * "hello" on all (loco_rpc_call_all), and leaves gracefully. After each
 * child, nodes 1 and 2 count its hello. At the end, on both: every hello
 * arrived once; no pipe is left for the children (pipes_in and
 * pipes_out 0); at most RECORDS_MAX records exist for the CHILDREN + 1
 * nodes met and some were reused; node 1's RSS grew by less than
 * RSS_SLACK between child 16 and the last (plain builds only: tests/rss.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "../rss.h"
#include "rpc-hello.h"
#include "scenario.h"

#define TMO         (30 * SC_NS)
#define CHILDREN    48u
#define FIRST_CHILD 10                  /* scenario ids stay below SC_MAX_NODES */
#define RECORDS_MAX 40                  /* 32 made before reuse, and room for the live ones */
#define RSS_SLACK   (8ll * 1024 * 1024) /* touched pages of regions in their graves */
#define BOX_DONE    1

static long rss_bytes(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL || fscanf(f, "%ld %ld", &pages, &rss) != 2)
		SC_FAIL("cannot read /proc/self/statm");
	fclose(f);
	return rss * 4096;
}

static loco_rpc_ep_t *endpoint(loco_manager_t *m, uint32_t nodes, loco_channel_t **ch)
{
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "rch", nodes, ch));
	loco_rpc_cfg_default(&cfg, NULL, 0);
	cfg.threads = 1;
	SC_ASSERT_OK(loco_rpc_create(*ch, "c", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "hello", hello, NULL, NULL));
	SC_ASSERT_OK(loco_rpc_register(ep, "echo", echo, NULL, NULL));
	return ep;
}

static int child(void)
{
	loco_manager_t *m = sc_start();
	uint32_t me = loco_manager_node_id(m);
	loco_channel_t *ch;
	loco_rpc_ep_t *ep = endpoint(m, 3, &ch);

	SC_ASSERT_OK(loco_channel_join(ch, 30 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 30 * SC_NS));
	for (uint32_t node = 1; node <= 2; node++)
		for (uint64_t i = 0; i < 5; i++) {
			uint64_t v = (uint64_t)me << 32 | i, r = 0;

			SC_ASSERT_OK(loco_rpc_call_return(ep, node, loco_rpc_id("echo"), &v,
			                                  sizeof(v), &r, sizeof(r), NULL, TMO));
			SC_ASSERT_EQ(r, v);
		}
	SC_ASSERT_OK(loco_rpc_call_all(ep, loco_rpc_id("hello"), &me, sizeof(me), TMO));
	/* a call_return after the broadcast: calls run in order, so both hellos ran */
	for (uint32_t node = 1; node <= 2; node++) {
		uint64_t v = 7, r = 0;

		SC_ASSERT_OK(loco_rpc_call_return(ep, node, loco_rpc_id("echo"), &v, sizeof(v), &r,
		                                  sizeof(r), NULL, TMO));
	}
	sc_report("done");
	loco_rpc_destroy(ep);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}

/* wait_hello -- until @node's hello arrived here */
static void wait_hello(uint32_t node)
{
	int64_t dl = sc_now_ms() + 30000;

	while (__atomic_load_n(&hellos[node], __ATOMIC_RELAXED) == 0) {
		if (sc_now_ms() > dl)
			SC_FAIL("no hello from node %u in 30 s", node);
		sc_sleep_ms(1);
	}
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_stats_t st;
	struct sc_sync sync;
	long rss0 = 0, rss1;
	uint32_t me;
	int64_t dl;

	sc_init("rpc-churn", argc, argv, 400);
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return child();
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2");
	m = sc_start();
	me = loco_manager_node_id(m);
	ep = endpoint(m, 2, &ch);
	SC_ASSERT_OK(loco_channel_join(ch, 30 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 30 * SC_NS));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "made", SC_WAIT_MS);
	if (me == 1) {
		for (uint32_t k = 0; k < CHILDREN; k++) {
			char line[64];
			int report;
			pid_t pid = sc_spawn_node(m, "child", FIRST_CHILD + k, &report);

			sc_read_line(report, line, sizeof(line), 60000);
			SC_ASSERT(strcmp(line, "done") == 0);
			SC_ASSERT_EQ(sc_reap(pid, 30000), 0);
			wait_hello(FIRST_CHILD + k);
			if (k == 15)
				rss0 = rss_bytes();
		}
		sc_sync_put(&sync, BOX_DONE, 1);
	} else {
		dl = sc_now_ms() + 360000;
		while (sc_sync_get(&sync, BOX_DONE) == 0) {
			if (sc_now_ms() > dl)
				SC_FAIL("node 1 not done in 360 s");
			sc_sleep_ms(10);
		}
	}
	for (uint32_t k = 0; k < CHILDREN; k++) {
		wait_hello(FIRST_CHILD + k);
		SC_ASSERT_EQ(__atomic_load_n(&hellos[FIRST_CHILD + k], __ATOMIC_RELAXED), 1u);
	}
	/* the last child's pipes go once its leave reached the endpoint */
	dl = sc_now_ms() + 30000;
	for (;;) {
		loco_rpc_stats(ep, &st);
		if (st.pipes_in == 0 && st.pipes_out == 0)
			break;
		if (sc_now_ms() > dl)
			SC_FAIL("pipes left for children that left: %llu in, %llu out",
			        (unsigned long long)st.pipes_in, (unsigned long long)st.pipes_out);
		sc_sleep_ms(10);
	}
	sc_log("%u children came and went: %llu records (%llu reused), %llu bytes held", CHILDREN,
	       (unsigned long long)st.peers, (unsigned long long)st.reused,
	       (unsigned long long)st.mem_bytes);
	SC_ASSERT(st.peers <= RECORDS_MAX);
	SC_ASSERT(st.reused >= CHILDREN + 1 - RECORDS_MAX);
	if (me == 1) {
		rss1 = rss_bytes();
		sc_log("RSS after child 16: %ld KiB, after child %u: %ld KiB", rss0 / 1024,
		       CHILDREN, rss1 / 1024);
		if (RSS_CHECKED && rss1 - rss0 > RSS_SLACK)
			SC_FAIL("RSS grew by %ld KiB over %u children", (rss1 - rss0) / 1024,
			        CHILDREN - 16);
	}
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	loco_rpc_destroy(ep);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
