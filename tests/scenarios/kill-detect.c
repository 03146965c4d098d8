/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kill-detect.c -- failure detection of a killed and of a stopped node.
 *
 * Nodes 1..3 (loco-run -n 3). Node 1 spawns an extra node (this program
 * with argument "extra", LOCO_NODE_ID=9) that joins and then only waits;
 * once all three see it as a member, node 1 SIGKILLs it by PID, reaps it,
 * and publishes the CLOCK_MONOTONIC kill time in sc-sync mailbox 1. Each
 * node measures from that time to the moment node 9 is gone from its
 * member table: the bound is LOCO_FAIL_TIMEOUT_MS + 1000 ms of slack (a
 * kill closes the sockets, so it is usually a few ms).
 *
 * Then node 1 spawns extra node 10 and, once all see it, SIGSTOPs it: no
 * socket closes, so only the missing heartbeats can tell. Every node must
 * drop node 10 no sooner than half the fail timeout (nothing was seen
 * early) and no later than the fail timeout + 1000 ms. Node 1 then
 * SIGKILLs and reaps node 10. Detection times are printed.
 */
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

#define KILLED     9
#define STOPPED    10
#define BOX_T_KILL 1
#define BOX_T_STOP 2
#define SLACK_MS   1000

/* extra_main -- node 9 or 10: join, then wait to be killed (bounded by the alarm). */
static noreturn void extra_main(void)
{
	loco_manager_t *m = sc_start();

	sc_log("extra node %u joined (pid %d)", loco_manager_node_id(m), (int)getpid());
	/* SIGKILL ends us; the alarm (or the bound) fails us if nobody does */
	for (int i = 0; i < 1000; i++)
		pause();
	SC_FAIL("extra node %u was not killed", loco_manager_node_id(m));
}

static pid_t spawn_extra(loco_manager_t *m, uint32_t id)
{
	return sc_spawn_node(m, "extra", id, NULL);
}

/* detect -- wait until @node is no member; return the ms since the time in mailbox @box. */
static double detect(loco_manager_t *m, struct sc_sync *s, uint32_t node, unsigned box,
                     int timeout_ms)
{
	int64_t t_gone, t0;
	char what[64];

	snprintf(what, sizeof(what), "node %u to be dropped", node);
	SC_WAIT_UNTIL(!sc_is_member(m, node), timeout_ms, what);
	t_gone = sc_now_ns();
	SC_WAIT_UNTIL(sc_sync_get(s, box) != 0, SC_WAIT_MS, "node 1's event time");
	t0 = (int64_t)sc_sync_get(s, box);
	return (double)(t_gone - t0) / 1e6;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_manager_t *m;
	struct sc_sync sync;
	uint32_t me, ft;
	pid_t pid = 0;
	double ms;

	sc_init("kill-detect", argc, argv, 90);
	if (argc > 1 && strcmp(argv[1], "extra") == 0)
		extra_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	ft = sc_fail_timeout();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "members", SC_WAIT_MS);

	/* 1. kill -9: the sockets close */
	if (me == 1)
		pid = spawn_extra(m, KILLED);
	SC_WAIT_UNTIL(sc_is_member(m, KILLED), SC_WAIT_MS, "node 9 to join");
	sc_sync_wait(&sync, "node 9 joined", SC_WAIT_MS);
	if (me == 1) {
		int64_t t = sc_now_ns();
		int st = sc_kill(pid);

		SC_ASSERT_EQ(st, 128 + 9);
		sc_sync_put(&sync, BOX_T_KILL, (uint64_t)t);
	}
	ms = detect(m, &sync, KILLED, BOX_T_KILL, (int)ft + SLACK_MS + 5000);
	sc_log("SIGKILLed node 9 dropped after %.1f ms (fail timeout %u ms)", ms, ft);
	if (ms > ft + SLACK_MS)
		SC_FAIL("node 9 was dropped %.1f ms after its kill, more than %u + %d ms", ms, ft,
		        SLACK_MS);
	SC_ASSERT(sc_members_are(m, base, 3));
	sc_sync_wait(&sync, "node 9 dropped", SC_WAIT_MS);

	/* 2. SIGSTOP: nothing closes, only the heartbeats stop */
	if (me == 1)
		pid = spawn_extra(m, STOPPED);
	SC_WAIT_UNTIL(sc_is_member(m, STOPPED), SC_WAIT_MS, "node 10 to join");
	sc_sync_wait(&sync, "node 10 joined", SC_WAIT_MS);
	if (me == 1) {
		int64_t t = sc_now_ns();

		sc_stop(pid);
		sc_sync_put(&sync, BOX_T_STOP, (uint64_t)t);
	}
	ms = detect(m, &sync, STOPPED, BOX_T_STOP, (int)ft + SLACK_MS + 5000);
	sc_log("SIGSTOPped node 10 dropped after %.1f ms (fail timeout %u ms)", ms, ft);
	if (ms > ft + SLACK_MS)
		SC_FAIL("node 10 was dropped %.1f ms after it stopped, more than %u + %d ms", ms,
		        ft, SLACK_MS);
	if (ms < ft / 2)
		SC_FAIL("node 10 was dropped %.1f ms after it stopped: a stopped node cannot be "
		        "told from a slow one before %u ms",
		        ms, ft / 2);
	if (me == 1)
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	SC_ASSERT(sc_members_are(m, base, 3));
	sc_sync_wait(&sync, "node 10 dropped", SC_WAIT_MS);

	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
