/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * barrier-leave.c -- a peer that passes a barrier and leaves at once never
 * makes the others' next wait fail.
 *
 * loco-run -n 3. ROUNDS rounds, each on a new channel "c<i>" holding
 * barrier "b", joined by all three (sc_sync between the steps). All three
 * pass episode 1; then node 3 destroys the barrier and the channel at once,
 * as a program does at its exit, while nodes 1 and 2 wait for episode 2
 * right away: their pushes to node 3 go out before node 3's announcement
 * that its table is gone reaches them, and may land after the table was
 * deregistered (-EACCES at the pusher). Node 3's row vanishes when its
 * leave arrives, and nodes 1 and 2 pass episode 2 between themselves:
 * every wait must return 0.
 *
 * Regression: the barrier took -EACCES for an error of its own and
 * returned it from the wait (seen at 32 nodes as nodes that had passed the
 * exit barrier left).
 */
#include <errno.h>
#include <stdio.h>

#include <loco/barrier.h>

#include "scenario.h"

#define ROUNDS  200u
#define LEAVER  3
#define WAIT_NS (20 * SC_NS)

int main(int argc, char **argv)
{
	loco_manager_t *m;
	struct sc_sync sync;
	uint32_t me, rounds;
	int64_t t0;

	sc_init("barrier-leave", argc, argv, 110);
	rounds = sc_scaled(ROUNDS);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);
	t0 = sc_now_ns();
	for (uint32_t i = 0; i < rounds; i++) {
		char name[32], what[32];
		loco_channel_t *ch;
		loco_barrier_t *b;
		int ret;

		snprintf(name, sizeof(name), "c%u", i);
		SC_ASSERT_OK(loco_channel_create(m, NULL, name, 3, &ch));
		SC_ASSERT_OK(loco_barrier_create(ch, "b", &b));
		SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
		ret = loco_barrier_wait(b, WAIT_NS);
		if (ret)
			SC_FAIL("round %u: episode 1: %s", i, loco_strerror(ret));
		SC_ASSERT_EQ(loco_barrier_episode(b), 1);
		if (me != LEAVER) {
			ret = loco_barrier_wait(b, WAIT_NS);
			if (ret)
				SC_FAIL("round %u: episode 2 as node %u left: %s", i, LEAVER,
				        loco_strerror(ret));
			SC_ASSERT_EQ(loco_barrier_episode(b), 2);
		}
		loco_barrier_destroy(b);
		SC_ASSERT_OK(loco_channel_destroy(ch));
		snprintf(what, sizeof(what), "round %u", i);
		sc_sync_wait(&sync, what, SC_WAIT_MS);
	}
	sc_log("%u rounds in %.3f s", rounds, (double)(sc_now_ns() - t0) / 1e9);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
