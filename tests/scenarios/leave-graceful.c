/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * leave-graceful.c -- node 3 of 3 leaves early with loco_fini() while
 * nodes 1 and 2 keep running; they must drop it from loco_manager_members() and
 * from the channel quickly: well under LOCO_FAIL_TIMEOUT_MS (the driver
 * sets 5000), since a graceful leave is announced, not detected.
 *
 * Node 3 publishes the CLOCK_MONOTONIC time at which it starts leaving in
 * sc-sync mailbox 3; nodes 1 and 2 measure from it to the moment node 3
 * is gone from their member table. leave-graceful.sh runs this under
 * loco-run with LOCO_LOG=info and checks that the log says "node 3 left",
 * never "node 3 failed".
 */
#include <stdio.h>

#include "scenario.h"

#define LEAVER      3
#define BOX_T_LEAVE 3

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	uint32_t me, other;
	loco_manager_t *m;
	struct sc_sync sync;
	int64_t t_leave, t_gone, bound_ms;

	sc_init("leave-graceful", argc, argv, 90);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	/* a fifth of the failure timeout: a leave that took longer looks detected, not announced */
	bound_ms = sc_fail_timeout() / 5;

	SC_WAIT_UNTIL(sc_members_are(m, all, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "all members", SC_WAIT_MS);

	if (me == LEAVER) {
		sc_sync_put(&sync, BOX_T_LEAVE, (uint64_t)sc_now_ns());
		sc_sync_close(&sync);
		loco_fini(m);
		sc_log("left with loco_fini");
		return SC_EXIT_PASS;
	}

	other = me == 1 ? 2 : 1;
	SC_WAIT_UNTIL(!sc_is_member(m, LEAVER), (int)sc_fail_timeout() * 2,
	              "node 3 to leave the member table");
	t_gone = sc_now_ns();
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T_LEAVE) != 0, SC_WAIT_MS, "node 3's leave time");
	t_leave = (int64_t)sc_sync_get(&sync, BOX_T_LEAVE);
	sc_log("node 3 gone from the members %.1f ms after it started leaving "
	       "(LOCO_FAIL_TIMEOUT_MS %u)",
	       (double)(t_gone - t_leave) / 1e6, sc_fail_timeout());
	if (t_gone - t_leave > bound_ms * 1000000)
		SC_FAIL("a graceful leave took %.1f ms to be seen, more than %lld ms",
		        (double)(t_gone - t_leave) / 1e6, (long long)bound_ms);

	/* the others stay: the member table and the channel keep exactly them */
	{
		uint32_t two[] = {me < other ? me : other, me < other ? other : me};

		SC_WAIT_UNTIL(!sc_is_peer(sync.ch, LEAVER), SC_WAIT_MS, "node 3 to leave sc-sync");
		SC_ASSERT(sc_peers_are(sync.ch, &other, 1));
		SC_ASSERT(sc_members_are(m, two, 2));
		sc_sync_drop(&sync, LEAVER);
		sc_sync_wait(&sync, "nodes 1 and 2 checked", SC_WAIT_MS);
	}
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
