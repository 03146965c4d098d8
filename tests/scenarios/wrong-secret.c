/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wrong-secret.c -- a node with the wrong cluster secret is refused.
 *
 * Nodes 1..3 (loco-run -n 3, which gives them a shared random
 * LOCO_SECRET). Node 1 spawns an intruder (this program with argument
 * "intruder", LOCO_NODE_ID=5, LOCO_JOIN = node 1's address, a different
 * LOCO_SECRET): its loco_init() must fail with -LOCO_EAUTH, at once (not
 * after the join timeout); it exits 0 when so, 2 when it was let in, 3 on
 * any other result. Node 1 reaps it by PID and checks its status. Every
 * node checks that its member table is exactly {1, 2, 3} before and after
 * (node 5 never appears). wrong-secret.sh checks the log lines of both
 * sides ("wrong cluster secret").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

#define INTRUDER 5

/* intruder_main -- loco_init with the wrong secret must fail with -LOCO_EAUTH, quickly. */
static int intruder_main(void)
{
	loco_manager_t *m = NULL;
	int64_t t0 = sc_now_ms(), ms;
	int ret;

	sc_log("intruder pid %d joins %s with the wrong secret", (int)getpid(),
	       getenv("LOCO_JOIN"));
	ret = loco_init(NULL, &m);
	ms = sc_now_ms() - t0;
	if (ret == 0) {
		sc_log("FAIL: loco_init with the wrong secret succeeded");
		loco_fini(m);
		return 2;
	}
	if (ret != -LOCO_EAUTH) {
		sc_log("FAIL: loco_init returned %d (%s), expected -LOCO_EAUTH after %lld ms", ret,
		       loco_strerror(ret), (long long)ms);
		return 3;
	}
	if (ms > 5000) {
		sc_log("FAIL: loco_init took %lld ms to refuse (it retried a refusal?)",
		       (long long)ms);
		return 3;
	}
	sc_log("loco_init refused in %lld ms: %s", (long long)ms, loco_strerror(ret));
	return 0;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	uint32_t ids[SC_MAX_NODES];
	char buf[128];
	loco_manager_t *m;
	struct sc_sync sync;
	int n;

	sc_init("wrong-secret", argc, argv, 90);
	if (argc > 1 && strcmp(argv[1], "intruder") == 0)
		return intruder_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	sc_log("pid %d", (int)getpid());
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "members before", SC_WAIT_MS);

	if (loco_manager_node_id(m) == 1) {
		const char *secret = getenv("LOCO_SECRET");
		char join[96], wrong[160];
		const char *env[] = {join, wrong, "LOCO_NODE_ID=5", "LOCO_ADDR=127.0.0.1:0", NULL};
		pid_t pid;
		int st;

		snprintf(join, sizeof(join), "LOCO_JOIN=%s", loco_manager_addr(m));
		snprintf(wrong, sizeof(wrong), "LOCO_SECRET=not-%s", secret ? secret : "loco");
		pid = sc_spawn("intruder", env, NULL);
		st = sc_reap(pid, 30000);
		if (st != 0)
			SC_FAIL("the intruder exited with status %d (0: refused with -LOCO_EAUTH; "
			        "2: let in; 3: another result; -1: hung)",
			        st);
	}
	/* node 1 has reaped the intruder when this barrier passes */
	sc_sync_wait(&sync, "intruder done", SC_WAIT_MS);
	n = sc_members(m, ids);
	if (!sc_members_are(m, base, 3))
		SC_FAIL("members after the intruder: %s, expected {1, 2, 3}",
		        sc_ids_str(ids, n, buf, sizeof(buf)));
	SC_ASSERT(!sc_is_peer(sync.ch, INTRUDER) && loco_channel_peers(sync.ch, NULL, 0) == 2);
	sc_log("member table unchanged: %s", sc_ids_str(ids, n, buf, sizeof(buf)));
	sc_sync_wait(&sync, "all checked", SC_WAIT_MS);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
