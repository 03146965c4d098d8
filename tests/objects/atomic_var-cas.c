/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * atomic_var-cas.c -- CAS-increment loops from every node on one word.
 *
 * loco-run -n N (N >= 3). Every node creates atomic_var "ctr" hosted on
 * node 2 (a node in the middle, so that node 1 is a plain client) in
 * channel "av-cas". After a barrier, each node increments the word K times
 * with CAS loops: it guesses the value, CASes guess -> guess + 1, and on
 * failure takes the old value the CAS returned as its next guess. Checks:
 *   - every successful CAS returned exactly its guess, every failed one a
 *     value other than its guess (and never below the node's last success);
 *   - after a barrier every node reads exactly N x K;
 *   - contention really happened: the failed CASes of all nodes (published
 *     in sc-sync mailboxes) add up to more than 0.
 * The host's CASes are local CPU atomics (no fabric path to itself) and
 * take nanoseconds: it paces its increments (100 us apart) so that they
 * race with the others'. It also checks the asynchronous CAS with the
 * caller's ack key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <loco/atomic_var.h>

#include "scenario.h"

#define K    1000
#define HOST 2

static int iters; /* K divided by LOCO_TEST_SCALE (sc_scaled) */

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_atomic_var_t *av;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	uint64_t guess = 0, old, v, fails = 0, all_fails, last = 0;
	uint32_t nodes, me;
	int64_t t0;

	sc_init("atomic_var-cas", argc, argv, 90);
	iters = (int)sc_scaled(K);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n N, N >= 3 (LOCO_NODES=%u)", nodes);
	m = sc_start();
	me = loco_manager_node_id(m);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "av-cas", nodes, &ch));
	SC_ASSERT_OK(loco_atomic_var_create(ch, "ctr", HOST, &av));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	t0 = sc_now_ns();
	for (int i = 0; i < iters; i++) {
		if (me == HOST)
			usleep(100);
		for (int tries = 0;; tries++) {
			if (tries > 1000000)
				SC_FAIL("increment %d: no CAS succeeded in %d tries", i, tries);
			SC_ASSERT_OK(loco_atomic_var_cas(av, guess, guess + 1, &old, 10 * SC_NS));
			if (old == guess)
				break;
			if (old < last)
				SC_FAIL("CAS returned %llu after this node's own %llu",
				        (unsigned long long)old, (unsigned long long)last);
			fails++;
			guess = old;
		}
		last = guess + 1;
		guess++;
	}
	sc_log("%d CAS increments in %.1f ms, %llu failed CASes", iters,
	       (double)(sc_now_ns() - t0) / 1e6, (unsigned long long)fails);

	sc_sync_put(&sync, me, fails);
	sc_sync_wait(&sync, "all incremented", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(av, &v, 10 * SC_NS));
	if (v != (uint64_t)nodes * iters)
		SC_FAIL("the word holds %llu, expected %u x %d", (unsigned long long)v, nodes,
		        iters);
	all_fails = sc_sync_get(&sync, me);
	for (int k = 0; k < sync.npeers; k++)
		all_fails += sc_sync_get(&sync, sync.peers[k]);
	sc_log("word = %llu = %u x %d; %llu failed CASes in all", (unsigned long long)v, nodes,
	       iters, (unsigned long long)all_fails);
	if (all_fails == 0)
		SC_FAIL("no CAS failed: the nodes did not contend, the test proves nothing");
	sc_sync_wait(&sync, "counted", SC_WAIT_MS);

	/* the asynchronous CAS: node 1 swaps N*iters -> 1, everyone then sees 1 */
	if (me == 1) {
		SC_ASSERT_OK(loco_atomic_var_cas_async(av, v, 1, 0, ack));
		SC_ASSERT_OK(
		    loco_atomic_var_cas_async(av, v, 2, 1, ack)); /* fails: after the first */
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
		SC_ASSERT_EQ(loco_atomic_var_slot(av, 0), v);
		SC_ASSERT_EQ(loco_atomic_var_slot(av, 1), 1);
	}
	sc_sync_wait(&sync, "swapped", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(av, &v, 10 * SC_NS));
	SC_ASSERT_EQ(v, 1);

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_ack_key_destroy(ack);
	loco_atomic_var_destroy(av);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
