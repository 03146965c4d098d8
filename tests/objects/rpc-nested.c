/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-nested.c -- two nodes call each other from inside handlers, at the
 * same time, without deadlock: handler "ping" with depth d > 0 calls
 * "ping" with depth d - 1 back on its caller (call_return) and returns
 * that result + 1, so a call of depth D bounces D times between the two
 * nodes and returns D + 1.
 *
 * loco-run -n 3, argument THREADS (server threads; 0: the main threads
 * run the calls inside their own waits and loco_rpc_progress()). Nodes 1
 * and 2 each make COUNT calls of depth DEPTH to each other at once; node
 * 3 calls depth-DEPTH pings on node 1 meanwhile (its handler calls node
 * 3 back). Every result is checked; a deadlock fails by the wait's
 * timeout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "scenario.h"

#define DEPTH    3u
#define COUNT    300u
#define TMO      (30 * SC_NS)
#define BOX_DONE 1

static uint64_t max_seen;

static int ping(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t d, r = 0;

	(void)arg;
	SC_ASSERT(msg->len == sizeof(d) && cap >= sizeof(r));
	memcpy(&d, msg->data, sizeof(d));
	if (d > 0) {
		uint64_t dd = d - 1;
		int ret2 = loco_rpc_call_return(msg->ep, msg->caller, msg->id, &dd, sizeof(dd), &r,
		                                sizeof(r), NULL, TMO);

		if (ret2)
			SC_FAIL("nested call of depth %llu to %u: %s", (unsigned long long)dd,
			        msg->caller, loco_strerror(ret2));
		SC_ASSERT_EQ(r, dd + 1);
	}
	r = d + 1;
	if (d > __atomic_load_n(&max_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&max_seen, d, __ATOMIC_RELAXED);
	memcpy(ret, &r, sizeof(r));
	*rl = sizeof(r);
	return 0;
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	loco_rpc_stats_t st;
	struct sc_sync sync;
	uint32_t me, id, threads;
	int64_t t0, dl;

	sc_init("rpc-nested", argc, argv, 110);
	threads = argc > 1 ? (uint32_t)atoi(argv[1]) : 0;
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rne", 3, &ch));
	loco_rpc_cfg_default(&cfg, all, 3);
	cfg.threads = threads;
	cfg.max_depth = 8;
	SC_ASSERT_OK(loco_rpc_create(ch, "n", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "ping", ping, NULL, &id));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	t0 = sc_now_ns();
	for (uint64_t k = 0; k < COUNT; k++) {
		uint32_t to = me == 1 ? 2 : 1;
		uint64_t d = DEPTH, r = 0;

		SC_ASSERT_OK(
		    loco_rpc_call_return(ep, to, id, &d, sizeof(d), &r, sizeof(r), NULL, TMO));
		SC_ASSERT_EQ(r, DEPTH + 1);
	}
	sc_log("%u calls of depth %u in %.2f s", COUNT, DEPTH, (double)(sc_now_ns() - t0) / 1e9);
	sc_sync_put(&sync, BOX_DONE + me, 1);
	dl = sc_now_ms() + 60000;
	for (;;) {
		int done = 1;

		for (unsigned q = 0; q < 3; q++)
			done &= sc_sync_get(&sync, BOX_DONE + all[q]) != 0;
		if (done)
			break;
		if (sc_now_ms() > dl)
			SC_FAIL("the others not done in 60 s");
		if (threads || loco_rpc_progress(ep, 64) == 0)
			sc_sleep_ms(1);
	}
	loco_rpc_stats(ep, &st);
	sc_log("ran %llu handlers, %llu replies, deepest %llu", (unsigned long long)st.handled,
	       (unsigned long long)st.replies, (unsigned long long)max_seen);
	SC_ASSERT(st.handled > 0);
	SC_ASSERT_EQ(st.timeouts + st.dropped + st.unknown, 0);
	sc_sync_wait(&sync, "checked", 60000);
	loco_rpc_destroy(ep);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
