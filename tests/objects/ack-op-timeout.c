/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack-op-timeout.c -- an operation whose peer stopped answering is
 * reported by loco_ack_wait() as failed (-EHOSTDOWN), never taken for the
 * wait's own timeout. loco_ack_wait() waits in 50 ms slices (so that a
 * partition ends it in time); a slice that ended with the operation's
 * -ETIMEDOUT was read as "not yet", its error was cleared, and the next
 * slice found the key empty and returned 0: a failed CAS read as done,
 * with a stale result. Seen in partition-split (the fresh clone at
 * 9b1747b, 1 run in ~20): a lock's release CAS failed that way, it read
 * the result slot of its grant, and the node was granted the same token
 * twice. (The fabric's error for it is -ETIMEDOUT; the key now says
 * -EHOSTDOWN, so that -ETIMEDOUT from a wait means "not yet" and only that.)
 *
 * loco-run -n 2; node 1 spawns node 9 (role "victim"): 3 nodes in channel
 * "ackt", each with an sst "S" of 8-byte rows. Node 1 SIGSTOPs node 9; each
 * base node pushes its row to node 9 (WRITEs outstanding on a live link)
 * and waits 30 s on the key: the tcp link finds no answer within its
 * timeout and fails them (-EHOSTDOWN; or the view drops node 9 first:
 * -ECANCELED). The wait must return that error with nothing outstanding,
 * and loco_ack_failures() must name node 9 with it. A push posted after
 * that (the link is down) must fail too: at the post, or at the wait.
 * tcp only: on shm a stopped process's memory takes the WRITEs, and on
 * verbs its kernel NIC does.
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

	SC_ASSERT_OK(loco_channel_create(m, NULL, "ackt", 3, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "S", 8, 16, &sst));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_victim_wait(m);
}

/* failed_wait -- wait on @key: an error, nothing outstanding, the failures name the victim. */
static int failed_wait(loco_ack_key_t *key, const char *what)
{
	struct loco_ack_failure f[LOCO_ACK_FAILURES_MAX];
	int64_t t0 = sc_now_ms();
	int ret = loco_ack_wait(key, 30 * SC_NS), n;

	if (ret == 0 || ret == -ETIMEDOUT)
		SC_FAIL("%s: loco_ack_wait returned %d after %lld ms: the pushes to a stopped node "
		        "cannot have succeeded, and they are not in flight for 30 s",
		        what, ret, (long long)(sc_now_ms() - t0));
	if (loco_ack_outstanding(key) != 0)
		SC_FAIL("%s: wait returned %d with %zu operation(s) outstanding after 30 s", what,
		        ret, loco_ack_outstanding(key));
	n = loco_ack_failures(key, f, LOCO_ACK_FAILURES_MAX, NULL);
	SC_ASSERT(n >= 1);
	if (f[0].node != VICTIM || f[0].error != ret)
		SC_FAIL("%s: wait returned %d, the first failure is node %u error %d", what, ret,
		        f[0].node, f[0].error);
	sc_log("%s: %s after %lld ms (%d failure(s))", what, strerror(-ret),
	       (long long)(sc_now_ms() - t0), n);
	return ret;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2};
	loco_ack_key_t *key;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_sst_t *sst;
	struct sc_sync sync;
	char line[64];
	uint64_t row;
	pid_t pid = 0;
	int report = -1, ret;
	const char *fabric;

	sc_init("ack-op-timeout", argc, argv, 90);
	fabric = getenv("LOCO_FABRIC");
	if (fabric == NULL || strcmp(fabric, "tcp") != 0) {
		sc_log("SKIP: tcp only (shm and verbs complete WRITEs to a stopped process)");
		return SC_EXIT_SKIP;
	}
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_WAIT_UNTIL(sc_members_are(m, base, 2), SC_WAIT_MS, "members {1, 2}");
	sc_sync_open(&sync, m, 2);
	if (loco_manager_node_id(m) == 1) /* it reports once it joined "ackt", below */
		pid = sc_spawn_node(m, "victim", VICTIM, &report);
	SC_ASSERT_OK(loco_ack_key_create(m, &key));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ackt", 3, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "S", 8, 16, &sst));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_WAIT_UNTIL(sc_is_peer(ch, VICTIM), SC_WAIT_MS, "node 9 paired");
	if (loco_manager_node_id(m) == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		close(report);
	}
	row = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_sst_store_mine(sst, &row));
	SC_ASSERT_OK(loco_sst_push_to(sst, VICTIM, key));
	SC_ASSERT_OK(loco_ack_wait(key, 10 * SC_NS));
	sc_sync_wait(&sync, "paired", SC_WAIT_MS);

	if (loco_manager_node_id(m) == 1)
		sc_stop(pid);
	sc_sync_wait(&sync, "stopped", SC_WAIT_MS);
	for (int i = 0; i < PUSHES; i++)
		SC_ASSERT_OK(loco_sst_push_to(sst, VICTIM, key));
	ret = failed_wait(key, "pushes to the stopped node");
	if (ret != -EHOSTDOWN && ret != -ECANCELED && ret != -ECONNRESET)
		SC_FAIL("pushes to the stopped node: %s, want the link's timeout (or its close)",
		        strerror(-ret));

	/* the link is down (or gone with the member): a later push fails too */
	ret = loco_sst_push_to(sst, VICTIM, key);
	if (ret == 0)
		failed_wait(key, "a push after the failure");
	else
		sc_log("a push after the failure: refused at the post: %s", strerror(-ret));
	sc_sync_wait(&sync, "pushed", SC_WAIT_MS);

	if (loco_manager_node_id(m) == 1)
		sc_kill(pid);
	SC_WAIT_UNTIL(!sc_is_member(m, VICTIM), SC_WAIT_MS, "node 9 out of the view");
	/* the live peer still works on the key */
	SC_ASSERT_OK(loco_sst_push_to(sst, 3 - loco_manager_node_id(m), key));
	SC_ASSERT_OK(loco_ack_wait(key, 10 * SC_NS));
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_sst_destroy(sst);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_ack_key_destroy(key);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
