/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-tree-late.c -- a call_all that goes down its tree to a member
 * whose ring takes seconds to be made: the member that passes it on
 * waits as long as the first caller said, and the call arrives.
 *
 * loco-run -n 6. Every node makes endpoint "t" with the member list
 * 1..6; nodes 1-5 make it before the join, node 6 three seconds after
 * (its server is its own thread, which registers "hello" before it
 * serves). Node 1 calls "hello" on all with a 30 s timeout at once: its
 * tree's groups are {2}, {3}, {4}, {5, 6}, so node 5 passes the call on
 * to node 6, whose ring cannot be made before node 6 has the endpoint.
 * Every other node must get exactly one hello, from node 1, and no node
 * may count a dropped call. (Passing a call on used to wait one second:
 * node 5 dropped it, and node 6 never heard it; the rxe VM's slow ring
 * set-up lost one so in rpc-many-verbs.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "rpc-hello.h"
#include "scenario.h"

#define N    6u
#define TMO  (30 * SC_NS)
#define LATE 3000 /* ms node 6 waits before it makes the endpoint */

int main(int argc, char **argv)
{
	uint32_t nodes[N], ids[SC_MAX_NODES], me;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep = NULL;
	loco_rpc_cfg_t cfg;
	loco_rpc_stats_t st;
	struct sc_sync sync;
	int64_t dl;

	sc_init("rpc-tree-late", argc, argv, 110);
	if (sc_nodes() != N)
		SC_FAIL("run with loco-run -n %u", N);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT(me >= 1 && me <= N);
	for (uint32_t i = 0; i < N; i++)
		nodes[i] = i + 1;
	SC_WAIT_UNTIL(sc_members(m, ids) == (int)N, 60000, "every node a member");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rlate", N, &ch));
	loco_rpc_cfg_default(&cfg, nodes, N);
	cfg.threads = me == N ? 0 : 1; /* node 6 serves on this thread, after it registered */
	if (me != N) {
		SC_ASSERT_OK(loco_rpc_create(ch, "t", &cfg, &ep));
		SC_ASSERT_OK(loco_rpc_register(ep, "hello", hello, NULL, NULL));
	}
	SC_ASSERT_OK(loco_channel_join(ch, 60 * SC_NS));
	sc_sync_open(&sync, m, N);
	sc_sync_wait(&sync, "joined", 60000);

	if (me == 1) {
		SC_ASSERT_OK(loco_rpc_call_all(ep, loco_rpc_id("hello"), &me, sizeof(me), TMO));
	} else if (me == N) {
		sc_sleep_ms(LATE);
		SC_ASSERT_OK(loco_rpc_create(ch, "t", &cfg, &ep));
		SC_ASSERT_OK(loco_rpc_register(ep, "hello", hello, NULL, NULL));
		sc_log("endpoint made %d ms late", LATE);
	}
	if (me != 1) {
		dl = sc_now_ms() + 60000;
		while (__atomic_load_n(&hellos[1], __ATOMIC_RELAXED) == 0 && sc_now_ms() < dl) {
			if (me == N)
				(void)loco_rpc_progress(ep, 64);
			else
				sc_sleep_ms(1);
		}
	}
	loco_rpc_stats(ep, &st);
	sc_log("%u hellos from node 1; %llu calls, %llu dropped", hellos[1],
	       (unsigned long long)st.calls, (unsigned long long)st.dropped);
	sc_sync_wait(&sync, "hellos", 90000);
	for (uint32_t q = 1; q <= N; q++)
		SC_ASSERT_EQ(__atomic_load_n(&hellos[q], __ATOMIC_RELAXED),
		             q == 1 && me != 1 ? 1u : 0u);
	SC_ASSERT_EQ(st.dropped, 0);
	sc_sync_wait(&sync, "done", 60000);
	loco_rpc_destroy(ep);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
