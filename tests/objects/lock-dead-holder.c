/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock-dead-holder.c -- a lock whose holder is killed or stopped is taken
 * over when its lease runs out (never sooner); a lock (and an atomic_var)
 * whose host is killed fails loudly, never silently, and a lock whose host
 * is killed moves to a new host.
 *
 * loco-run -n 3. Nodes 1..3 hold channel "lk-dead" with lock "L" hosted on
 * node 1, and channel "lk-host" with lock "H" and atomic_var "C", both
 * hosted on node 10. L has a 1 s lease and a 1.5 s takeover time (T).
 *
 * 1. Dead holder. Node 1 spawns node 9 (this program, role "holder"): it
 *    joins "lk-dead", takes L, reports "held" through a pipe and waits.
 *    Every base node sees loco_lock_holder() = 9 and try_acquire() = -EBUSY.
 *    Node 1 SIGKILLs node 9 by PID and publishes the kill time. Then each
 *    base node acquires L with a timeout of T + 2 s: it must succeed, no
 *    sooner than T after the kill (its watch of the dead holder's word
 *    starts after it) and within T + 1 s. Exactly one base node (the first
 *    to take it) sees loco_lock_recovered() = 1, with a greater token. Then
 *    50 more rounds each of acquire/release show that the lock still works.
 *
 * 1b. Stopped holder. The same with node 11, SIGSTOPped instead: nobody
 *    may take L from it before T (it may only be slow), and each base node
 *    gets it within T + 1 s.
 *
 * 2. Dead host. Node 1 spawns node 10 (role "host"): it joins "lk-host"
 *    (4 nodes) and waits. Every base node adds to C; node 2 takes H. Node 1
 *    SIGKILLs node 10. Then, within the fail timeout + 1 s, node 2's
 *    release fails and every node's FAA fails with -ECONNRESET and keeps
 *    failing so: no node ever gets a value of C again. H moves (to node
 *    1, the lowest id left): every node takes it again, with a token of
 *    the new host's epoch (above every earlier one), and exactly one sees
 *    it recovered (lock-host-failover tests the move under load).
 */
#include <errno.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include <loco/atomic_var.h>
#include <loco/lock.h>

#include "scenario.h"

#define HOLDER   9
#define HOST     10
#define BOX_T    1 /* node 1's kill time */
#define BOX_REC  2 /* base nodes' recovered flags: 2 + id */
#define BOX_T2   6 /* node 1's kill time of node 10 */
#define BOX_T1B  7 /* node 1's stop time of node 11 */
#define STOPPED  11
#define BOX_TOK  8 /* node 9's token */
#define BOX_HREC 9 /* H's recovered flags after its host's kill: 9 + id */
#define SLACK_MS 1000
#define ROUNDS   50
#define TMO      (10 * SC_NS)
#define LEASE_MS 1000
#define TAKE_MS  1500

/* L's lease: the same on every node */
static const loco_lock_cfg_t lcfg = {LEASE_MS * 1000000ll, TAKE_MS * 1000000ll};

static pid_t spawn_extra(loco_manager_t *m, uint32_t id, const char *role, int *report)
{
	return sc_spawn_node(m, role, id, report);
}

/* holder_main -- node 9: join "lk-dead", take L, report, wait for SIGKILL. */
static noreturn void holder_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_lock_t *lk;
	uint64_t token;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-dead", 4, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "L", 1, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
	SC_ASSERT_OK(loco_lock_token(lk, &token));
	sc_log("node %u holds L with token %llu (pid %d)", loco_manager_node_id(m),
	       (unsigned long long)token, (int)getpid());
	sc_report("held %llu", (unsigned long long)token);
	for (;;)
		pause(); /* SIGKILL ends us; the alarm fails us if nobody does */
}

/* host_main -- node 10: host H and C in "lk-host", then wait for SIGKILL. */
static noreturn void host_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_lock_t *lk;
	loco_atomic_var_t *av;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-host", 4, &ch));
	SC_ASSERT_OK(loco_lock_create(ch, "H", HOST, &lk));
	SC_ASSERT_OK(loco_atomic_var_create(ch, "C", HOST, &av));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_log("node %u hosts H and C (pid %d)", loco_manager_node_id(m), (int)getpid());
	sc_report("ready");
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch_dead, *ch_host;
	loco_lock_t *lk, *hl;
	loco_atomic_var_t *av;
	struct sc_sync sync;
	char line[64];
	uint32_t me, ft, holder;
	uint64_t old, recovered_total = 0, token, token9;
	pid_t pid = 0;
	int report = -1, ret;
	unsigned long long tok;
	int64_t t_kill, t_got;
	double ms;

	sc_init("lock-dead-holder", argc, argv, 90);
	if (argc > 1 && strcmp(argv[1], "holder") == 0)
		holder_main();
	if (argc > 1 && strcmp(argv[1], "host") == 0)
		host_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	ft = sc_fail_timeout();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-dead", 3, &ch_dead));
	SC_ASSERT_OK(loco_lock_create_cfg(ch_dead, "L", 1, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-host", 4, &ch_host));
	SC_ASSERT_OK(loco_lock_create(ch_host, "H", HOST, &hl));
	SC_ASSERT_OK(loco_atomic_var_create(ch_host, "C", HOST, &av));
	SC_ASSERT_OK(loco_channel_join(ch_dead, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* 1. a holder that dies */
	if (me == 1) {
		pid = spawn_extra(m, HOLDER, "holder", &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(sscanf(line, "held %llu", &tok) == 1);
		close(report);
		sc_sync_put(&sync, BOX_TOK, (uint64_t)tok);
	}
	sc_sync_wait(&sync, "node 9 holds L", SC_WAIT_MS);
	token9 = sc_sync_get(&sync, BOX_TOK);
	SC_ASSERT(token9 >= 1);
	SC_WAIT_UNTIL(sc_is_peer(ch_dead, HOLDER), SC_WAIT_MS, "node 9 to pair in lk-dead");
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, HOLDER);
	SC_ASSERT_EQ(loco_lock_try_acquire(lk), -EBUSY);
	sc_sync_wait(&sync, "refused", SC_WAIT_MS);
	if (me == 1) {
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T, (uint64_t)t_kill);
	}
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T) != 0, SC_WAIT_MS, "node 1's kill time");
	t_kill = (int64_t)sc_sync_get(&sync, BOX_T);
	ret = loco_lock_acquire(lk, (int64_t)(TAKE_MS + 2 * SLACK_MS) * 1000000);
	t_got = sc_now_ns();
	if (ret)
		SC_FAIL("acquire after the holder's kill: %s", loco_strerror(ret));
	ms = (double)(t_got - t_kill) / 1e6;
	SC_ASSERT_OK(loco_lock_token(lk, &token));
	sc_log("took L %.1f ms after node 9's kill (takeover %d ms), recovered %d, token %llu", ms,
	       TAKE_MS, loco_lock_recovered(lk), (unsigned long long)token);
	if (ms < TAKE_MS || ms > TAKE_MS + SLACK_MS)
		SC_FAIL("L taken %.1f ms after the kill: not within [%d, %d] ms", ms, TAKE_MS,
		        TAKE_MS + SLACK_MS);
	SC_ASSERT(token > token9);
	sc_sync_put(&sync, BOX_REC + me, 1 + (uint64_t)loco_lock_recovered(lk));
	SC_ASSERT_OK(loco_lock_release(lk));
	SC_ASSERT_EQ(loco_lock_recovered(lk), 0);
	sc_sync_wait(&sync, "L taken once each", SC_WAIT_MS);
	for (unsigned i = 1; i <= 3; i++)
		recovered_total += sc_sync_get(&sync, BOX_REC + i) - 1;
	if (recovered_total != 1)
		SC_FAIL("%llu nodes saw L recovered from node 9, expected exactly 1",
		        (unsigned long long)recovered_total);
	for (int i = 0; i < ROUNDS; i++) {
		SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
		SC_ASSERT_EQ(loco_lock_recovered(lk), 0);
		SC_ASSERT_OK(loco_lock_release(lk));
	}
	sc_sync_wait(&sync, "L works on", SC_WAIT_MS);
	sc_log("phase 1 passed: one recovery, %d more rounds each", ROUNDS);

	/* 1b. a holder that stops: only the missing heartbeats tell */
	if (me == 1) {
		pid = spawn_extra(m, STOPPED, "holder", &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(sscanf(line, "held %llu", &tok) == 1);
		SC_ASSERT(tok > token9);
		close(report);
	}
	sc_sync_wait(&sync, "node 11 holds L", SC_WAIT_MS);
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, STOPPED);
	sc_sync_wait(&sync, "node 11 seen", SC_WAIT_MS);
	if (me == 1) {
		t_kill = sc_now_ns();
		sc_stop(pid);
		sc_sync_put(&sync, BOX_T1B, (uint64_t)t_kill);
	}
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T1B) != 0, SC_WAIT_MS, "node 1's stop time");
	t_kill = (int64_t)sc_sync_get(&sync, BOX_T1B);
	ret = loco_lock_acquire(lk, (int64_t)(TAKE_MS + 2 * SLACK_MS) * 1000000);
	t_got = sc_now_ns();
	if (ret)
		SC_FAIL("acquire after the holder stopped: %s", loco_strerror(ret));
	ms = (double)(t_got - t_kill) / 1e6;
	sc_log("took L %.1f ms after node 11 stopped (takeover %d ms), recovered %d", ms, TAKE_MS,
	       loco_lock_recovered(lk));
	if (ms < TAKE_MS || ms > TAKE_MS + SLACK_MS)
		SC_FAIL("L taken %.1f ms after node 11 stopped: not within [%d, %d] ms", ms,
		        TAKE_MS, TAKE_MS + SLACK_MS);
	SC_ASSERT_OK(loco_lock_release(lk));
	sc_sync_wait(&sync, "L taken after the stop", SC_WAIT_MS);
	if (me == 1)
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);

	/* 2. a host that dies */
	if (me == 1)
		pid = spawn_extra(m, HOST, "host", &report);
	SC_ASSERT_OK(loco_channel_join(ch_host, 20 * SC_NS));
	if (me == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
	}
	SC_ASSERT_OK(loco_atomic_var_faa(av, 1, &old, TMO));
	if (me == 2)
		SC_ASSERT_OK(loco_lock_acquire(hl, TMO));
	sc_sync_wait(&sync, "node 2 holds H", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(av, &old, TMO));
	SC_ASSERT_EQ(old, 3);
	SC_ASSERT_OK(loco_lock_holder(hl, &holder, TMO));
	SC_ASSERT_EQ(holder, 2);
	sc_sync_wait(&sync, "checked H and C", SC_WAIT_MS);
	if (me == 1) {
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T2, (uint64_t)t_kill);
	}
	/* every call fails from now on; within the bound, with -ECONNRESET */
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T2) != 0, SC_WAIT_MS, "node 1's kill time");
	t_kill = (int64_t)sc_sync_get(&sync, BOX_T2);
	if (me == 2) {
		ret = loco_lock_release(hl);
		sc_log("release of H after its host's kill: %s", loco_strerror(ret));
		/* loco_lock(3): whatever the fabric said (verbs in the VM gave others) */
		SC_ASSERT_EQ(ret, -ECONNRESET);
		SC_ASSERT_EQ(loco_lock_release(hl), -EPERM);
	}
	for (;;) {
		int r2 = loco_atomic_var_faa(av, 1, &old, TMO);

		if (r2 == 0)
			SC_FAIL("FAA on C returned %llu after its host's kill",
			        (unsigned long long)old);
		if (r2 == -ECONNRESET)
			break;
		if (sc_now_ns() - t_kill > (int64_t)(ft + SLACK_MS) * 1000000)
			SC_FAIL("C still answers %d %.0f ms after its host's kill", r2,
			        (double)(sc_now_ns() - t_kill) / 1e6);
		sc_sleep_ms(5);
	}
	sc_log("C reports -ECONNRESET %.1f ms after its host's kill",
	       (double)(sc_now_ns() - t_kill) / 1e6);
	/*
	 * A failed data link only makes the host suspected; the view that
	 * removes it (about one failure bound later) makes the objects lost.
	 */
	SC_WAIT_UNTIL(!sc_is_member(m, HOST), (int)(ft + SLACK_MS), "the host's removal");
	sc_sleep_ms(200); /* sticky: still so later */
	SC_ASSERT_EQ(loco_atomic_var_read(av, &old, TMO), -ECONNRESET);
	SC_ASSERT_EQ(loco_atomic_var_faa_async(av, 1, 0, NULL), -ECONNRESET);
	/* H moved: each node takes it once more (the default 3 s takeover time passes first) */
	ret = loco_lock_acquire(hl, 10 * SC_NS);
	if (ret)
		SC_FAIL("acquire of H after its host's removal: %s", loco_strerror(ret));
	SC_ASSERT_OK(loco_lock_token(hl, &token));
	sc_log("took H %.1f ms after its host's kill: token %#llx, recovered %d",
	       (double)(sc_now_ns() - t_kill) / 1e6, (unsigned long long)token,
	       loco_lock_recovered(hl));
	SC_ASSERT(token >> 44 != 0); /* the new host's epoch */
	SC_ASSERT_OK(loco_lock_holder(hl, &holder, TMO));
	SC_ASSERT_EQ(holder, me);
	sc_sync_put(&sync, BOX_HREC + me, 1 + (uint64_t)loco_lock_recovered(hl));
	SC_ASSERT_OK(loco_lock_release(hl));
	sc_sync_wait(&sync, "H taken once each", SC_WAIT_MS);
	recovered_total = 0;
	for (unsigned i = 1; i <= 3; i++)
		recovered_total += sc_sync_get(&sync, BOX_HREC + i) - 1;
	if (recovered_total != 1)
		SC_FAIL("%llu nodes saw H recovered after its host's kill, expected exactly 1",
		        (unsigned long long)recovered_total);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_atomic_var_destroy(av);
	loco_lock_destroy(hl);
	loco_lock_destroy(lk);
	SC_ASSERT_OK(loco_channel_destroy(ch_host));
	SC_ASSERT_OK(loco_channel_destroy(ch_dead));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
