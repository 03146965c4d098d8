/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack-ignore-left.c -- ack keys tell who failed (issue 11): a push to a
 * SIGKILLed peer makes loco_ack_wait() fail on a plain key, and
 * loco_ack_failures() names the dead peer; on a key created with
 * LOCO_ACK_IGNORE_LEFT the same failures are not reported once the view
 * removed the peer, so the wait returns 0.
 *
 * loco-run -n 3. Nodes 1..3 and node 9 (spawned by node 1, role "victim")
 * hold channel "ackw" (4 nodes) with an sst "S" of 8-byte rows. Node 1
 * SIGSTOPs node 9; each base node pushes its row to every present row
 * PUSHES times on key P (plain) and on key I (LOCO_ACK_IGNORE_LEFT),
 * without waiting: the pushes to node 9 are posted on a live link and stay
 * outstanding. Node 1 SIGKILLs node 9: they fail while node 9 is still in
 * the view (removing it takes the failure bound). Once the view no longer
 * holds node 9, each node waits on both keys:
 *  - P: an error; every failure listed names node 9, marked left;
 *  - I: 0, with the same failures listed, marked left.
 * A base node's own pushes to the live base nodes must not fail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include <loco/sst.h>

#include "scenario.h"

#define VICTIM 9
#define PUSHES 3

static noreturn void victim_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_sst_t *sst;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "ackw", 4, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "S", 8, 16, &sst));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_victim_wait(m);
}

/* check_failures -- the failures the last wait on @key covered: >= 1, all to the victim, left. */
static int check_failures(loco_ack_key_t *key, const char *what)
{
	struct loco_ack_failure f[LOCO_ACK_FAILURES_MAX];
	size_t dropped = 1;
	int n = loco_ack_failures(key, f, LOCO_ACK_FAILURES_MAX, &dropped);

	SC_ASSERT(n >= 1 && n <= (int)LOCO_ACK_FAILURES_MAX);
	SC_ASSERT_EQ(dropped, 0);
	for (int i = 0; i < n; i++) {
		if (f[i].node != VICTIM || !f[i].left || f[i].error >= 0)
			SC_FAIL("%s: failure %d: node %u error %d left %d", what, i, f[i].node,
			        f[i].error, f[i].left);
	}
	sc_log("%s: %d failure(s), first node %u %s", what, n, f[0].node, strerror(-f[0].error));
	return n;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_ack_key_t *plain, *ignore;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_sst_t *sst;
	struct sc_sync sync;
	char line[64];
	uint64_t row;
	pid_t pid = 0;
	int report = -1, ret, np, ni;
	const char *fabric;

	sc_init("ack-ignore-left", argc, argv, 90);
	fabric = getenv("LOCO_FABRIC");
	if (fabric != NULL && strcmp(fabric, "verbs") == 0) {
		/*
		 * The scenario needs WRITEs outstanding to a peer when it dies. On
		 * verbs the kernel's NIC serves a stopped process's memory (the
		 * pushes to node 9 complete), and a killed one's connection is torn
		 * down at once (later pushes skip it): no operation is left to fail.
		 * The flag's rules are fabric-independent (ack.c): unit ack-failures.
		 */
		sc_log("SKIP: verbs completes WRITEs to a stopped process (see the comment)");
		return SC_EXIT_SKIP;
	}
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	if (loco_manager_node_id(m) == 1) /* it reports once it joined "ackw", below */
		pid = sc_spawn_node(m, "victim", VICTIM, &report);
	SC_ASSERT_EQ(loco_ack_key_create_cfg(m, &(loco_ack_key_cfg_t){.flags = 4}, &plain),
	             -EINVAL); /* unknown flag */
	SC_ASSERT_OK(loco_ack_key_create(m, &plain));
	SC_ASSERT_OK(loco_ack_key_create_cfg(
	    m, &(loco_ack_key_cfg_t){.flags = LOCO_ACK_IGNORE_LEFT}, &ignore));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ackw", 4, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "S", 8, 16, &sst));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_WAIT_UNTIL(sc_is_peer(ch, VICTIM), SC_WAIT_MS, "node 9 paired");
	if (loco_manager_node_id(m) == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		close(report);
	}

	/* before the kill: pushes to everyone succeed, nothing is listed */
	row = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_sst_store_mine(sst, &row));
	SC_ASSERT_EQ(loco_sst_push_broadcast(sst, plain), 3); /* the two other base nodes, node 9 */
	SC_ASSERT_OK(loco_ack_wait(plain, 10 * SC_NS));
	SC_ASSERT_EQ(loco_ack_failures(plain, NULL, 0, NULL), 0);
	sc_sync_wait(&sync, "paired", SC_WAIT_MS);

	/*
	 * Stop node 9 first, so that every base node's pushes are posted on a
	 * live link and stay outstanding (its NIC thread executes nothing);
	 * then kill it: they fail, while node 9 is still in the view.
	 */
	if (loco_manager_node_id(m) == 1)
		sc_stop(pid);
	sc_sync_wait(&sync, "stopped", SC_WAIT_MS);
	for (int i = 0; i < PUSHES; i++) {
		SC_ASSERT_EQ(loco_sst_push_broadcast(sst, plain), 3);
		SC_ASSERT_EQ(loco_sst_push_broadcast(sst, ignore), 3);
	}
	sc_sync_wait(&sync, "pushed", SC_WAIT_MS);
	if (loco_manager_node_id(m) == 1)
		sc_kill(pid);
	sc_sync_wait(&sync, "killed", SC_WAIT_MS);
	SC_WAIT_UNTIL(!sc_is_member(m, VICTIM), SC_WAIT_MS, "node 9 out of the view");
	sc_log("view %llu without node 9", (unsigned long long)loco_manager_view(m));

	ret = loco_ack_wait(plain, 10 * SC_NS);
	if (ret == 0 || ret == -ETIMEDOUT || ret == -LOCO_EPARTITION)
		SC_FAIL("plain key: wait returned %d, want the dead peer's error", ret);
	np = check_failures(plain, "plain key");
	sc_log("plain key: wait %s", strerror(-ret));

	ret = loco_ack_wait(ignore, 10 * SC_NS);
	if (ret != 0)
		SC_FAIL("LOCO_ACK_IGNORE_LEFT key: wait returned %d (%s), want 0", ret,
		        strerror(-ret));
	ni = check_failures(ignore, "ignore-left key");
	printf("node %u: plain key %d failure(s) to node %u reported; ignore-left key %d ignored\n",
	       loco_manager_node_id(m), np, VICTIM, ni);

	/* the live peers still work on both keys */
	SC_ASSERT_EQ(loco_sst_push_broadcast(sst, ignore), 2);
	SC_ASSERT_OK(loco_ack_wait(ignore, 10 * SC_NS));
	SC_ASSERT_EQ(loco_ack_failures(ignore, NULL, 0, NULL), 0);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_sst_destroy(sst);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_ack_key_destroy(plain);
	loco_ack_key_destroy(ignore);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
