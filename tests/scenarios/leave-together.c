/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * leave-together.c -- nodes 2, 3 and 4 of 4 call loco_fini() at the same
 * moment (right after a barrier) while node 1 stays; with the argument
 * "all", node 1 leaves with them (the end of most jobs). Their LEAVEs reach
 * node 1 while it is agreeing on the view that drops the first of them,
 * and each leaver must still be dropped as having left, not failed.
 * Node 1 waits until it is alone in its member table, in well under
 * LOCO_FAIL_TIMEOUT_MS (the driver sets 5000: a leave is announced, not
 * detected). leave-together.sh runs this under loco-run with
 * LOCO_LOG=info and checks that node 1 logged "node K left" for each
 * leaver (not with "all") and that nobody logged a failure or a warning.
 */
#include <string.h>

#include "scenario.h"

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3, 4}, alone[] = {1};
	loco_manager_t *m;
	struct sc_sync sync;
	int all_leave = argc > 1 && strcmp(argv[1], "all") == 0;

	sc_init("leave-together", argc, argv, 90);
	if (sc_nodes() != 4)
		SC_FAIL("run with loco-run -n 4 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_WAIT_UNTIL(sc_members_are(m, all, 4), SC_WAIT_MS, "members {1, 2, 3, 4}");
	sc_sync_open(&sync, m, 4);
	sc_sync_wait(&sync, "all members", SC_WAIT_MS);
	if (loco_manager_node_id(m) != 1 || all_leave) {
		sc_sync_close(&sync);
		loco_fini(m);
		sc_log("left with loco_fini");
		return SC_EXIT_PASS;
	}
	SC_WAIT_UNTIL(sc_members_are(m, alone, 1), (int)sc_fail_timeout() / 2,
	              "nodes 2, 3 and 4 to leave the member table");
	sc_log("alone in the member table");
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
