/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-many.c -- an rpc endpoint with more members than the old ceiling
 * (8), no member list, and per-peer rings made only for the peers that
 * talk; call_all reaches every member once, down its tree.
 *
 * loco-run -n N (N >= 3; the suite runs 12). Every node makes endpoint
 * "m" with no member list and one server thread. Ring: node i calls
 * "echo" on node i mod N + 1 (200 calls, each answer checked); then every
 * node holds exactly one ring to a callee and one from a caller
 * (loco_rpc_stats() pipes_out, pipes_in), whatever N: per-peer state is
 * made on first use. Broadcast: every node calls "hello" with its id on
 * all the others (loco_rpc_call_all), and waits until it got exactly one
 * hello from each of the N - 1 others, with the first caller's id as
 * msg->caller. Each node logs its endpoint's memory before and after.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "rpc-hello.h"
#include "scenario.h"

#define TMO   (30 * SC_NS)
#define CALLS 200

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	loco_rpc_stats_t st;
	struct sc_sync sync;
	uint32_t ids[SC_MAX_NODES], me, n, next;
	int64_t dl;

	sc_init("rpc-many", argc, argv, 230);
	n = sc_nodes();
	if (n < 3 || n >= SC_MAX_NODES)
		SC_FAIL("run with loco-run -n N, 3 <= N < %d", SC_MAX_NODES);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT(me >= 1 && me <= n);
	next = me % n + 1;
	SC_WAIT_UNTIL(sc_members(m, ids) == (int)n, 60000, "every node a member");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rmany", n, &ch));
	loco_rpc_cfg_default(&cfg, NULL, 0);
	cfg.threads = 1;
	SC_ASSERT_OK(loco_rpc_create(ch, "m", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "hello", hello, NULL, NULL));
	SC_ASSERT_OK(loco_rpc_register(ep, "echo", echo, NULL, NULL));
	SC_ASSERT_OK(loco_channel_join(ch, 60 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 60 * SC_NS));
	loco_rpc_stats(ep, &st);
	SC_ASSERT_EQ(st.pipes_out, 0);
	SC_ASSERT_EQ(st.pipes_in, 0);
	sc_log("%u members, endpoint made: %llu bytes", n, (unsigned long long)st.mem_bytes);
	sc_sync_open(&sync, m, n);
	sc_sync_wait(&sync, "made", 60000);

	/* ring: one callee each */
	for (uint64_t i = 0; i < CALLS; i++) {
		uint64_t v = (uint64_t)me << 32 | i, r = 0;

		SC_ASSERT_EQ(loco_rpc_call_return(ep, next, loco_rpc_id("echo"), &v, sizeof(v), &r,
		                                  sizeof(r), NULL, TMO),
		             0);
		SC_ASSERT_EQ(r, v);
	}
	sc_sync_wait(&sync, "ring", 60000);
	loco_rpc_stats(ep, &st);
	SC_ASSERT_EQ(st.pipes_out, 1);
	SC_ASSERT_EQ(st.pipes_in, 1);
	sc_log("ring: 1 pipe out, 1 in: %llu bytes", (unsigned long long)st.mem_bytes);
	sc_sync_wait(&sync, "counted", 60000); /* before anyone broadcasts */

	/* broadcast: exactly one hello from each other member */
	SC_ASSERT_OK(loco_rpc_call_all(ep, loco_rpc_id("hello"), &me, sizeof(me), TMO));
	dl = sc_now_ms() + 60000;
	for (;;) {
		uint32_t got = 0;

		for (uint32_t q = 1; q <= n; q++)
			got += __atomic_load_n(&hellos[q], __ATOMIC_RELAXED);
		if (got >= n - 1)
			break;
		if (sc_now_ms() > dl) {
			sc_log("%u hellos of %u after 60 s", got, n - 1);
			break;
		}
		sc_sleep_ms(1);
	}
	/* every node says what it did before any fails: the lost call is a forwarder's */
	loco_rpc_stats(ep, &st);
	sc_log("broadcast: %llu calls, %llu handled, %llu dropped, %llu full, %llu timeouts",
	       (unsigned long long)st.calls, (unsigned long long)st.handled,
	       (unsigned long long)st.dropped, (unsigned long long)st.full,
	       (unsigned long long)st.timeouts);
	for (uint32_t q = 1; q <= n; q++)
		if (q != me && __atomic_load_n(&hellos[q], __ATOMIC_RELAXED) != 1)
			sc_log("hellos from %u: %u", q,
			       __atomic_load_n(&hellos[q], __ATOMIC_RELAXED));
	sc_sync_wait(&sync, "hellos", 90000);
	for (uint32_t q = 1; q <= n; q++)
		SC_ASSERT_EQ(__atomic_load_n(&hellos[q], __ATOMIC_RELAXED), q == me ? 0u : 1u);
	loco_rpc_stats(ep, &st);
	/* the tree: at most 4 children per tree this node is in, and its ring's callee */
	SC_ASSERT(st.pipes_out >= 1 && st.pipes_out <= n - 1);
	sc_log("broadcast: one hello from each of %u; %llu pipes out, %llu in, %llu bytes", n - 1,
	       (unsigned long long)st.pipes_out, (unsigned long long)st.pipes_in,
	       (unsigned long long)st.mem_bytes);
	sc_sync_wait(&sync, "done", 60000);
	loco_rpc_destroy(ep);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
