/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock-takeover-split.c -- a dead holder's lock is taken over about one
 * takeover time T after the waiters start watching it, however they split
 * their waiting: here every waiter loops loco_lock_acquire(lk, 500 ms), a
 * third of T. The watch of the holder's word (the value seen and since
 * when) belongs to the lock handle and carries over from one call to the
 * next. Before, each call started its own watch and none lasted T: such
 * waiters never got the lock (45 s and 0 grants with the default 3 s T).
 * The watch still respects a live holder: renewals defeat it.
 *
 * loco-run -n 3. Channel "lk-split" holds lock "S" hosted on node 1, with
 * a 1 s lease and a 1.5 s takeover time; channel "lk-split-w" holds two
 * atomic_vars hosted on node 3: "inside" (a witness: FAA 1 on entry must
 * return 0) and "grants" (one FAA per grant).
 *
 * A. Dead holder. Node 1 spawns node 9 (role "holder"): it takes S,
 *    reports and waits. Node 1 SIGKILLs it by PID. Every base node loops
 *    acquire(500 ms), at most SPLIT_CALLS times (-ETIMEDOUT is the only
 *    other answer allowed); it must be granted within T + SLACK of the
 *    kill, holds S for HOLD_MS with the witness and releases. Exactly one
 *    base node sees loco_lock_recovered() = 1, with a token above node
 *    9's; "grants" is 3.
 *
 * B. More rounds: every node, ROUNDS times, loops acquire(500 ms) until
 *    granted (bounded), with the witness: "grants" is 3 + 3 x ROUNDS and
 *    nobody sees recovered.
 *
 * C. A renewing holder keeps it. Lock "R" on "lk-split-w" (host node 1,
 *    lease LC 2 s, takeover time TC 3 s): node 2 takes R and renews every
 *    LC/8 for 1.5 TC; nodes 1 and 3 loop acquire(500 ms) meanwhile, and
 *    every call must time out. Then node 2 releases and node 3 gets R, not
 *    recovered. R's lease is longer than S's so that a holder descheduled
 *    for a while on a loaded host still renews in time (S's 1 s lease with
 *    renewals every 250 ms once ran out on CI: a stall of 750 ms or more);
 *    a renewal that fails says how long after the one before it started.
 */
#include <errno.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include <loco/atomic_var.h>
#include <loco/lock.h>

#include "scenario.h"

#define LOCK_HOST   1
#define WIT_HOST    3
#define HOLDER      9
#define LEASE_MS    1000
#define TAKE_MS     1500
#define SPLIT_MS    500 /* each acquire's timeout: a third of T */
#define SLACK_MS    3000
#define SPLIT_CALLS ((TAKE_MS + 4 * SLACK_MS) / SPLIT_MS) /* the loop's bound */
#define HOLD_MS     20
#define ROUNDS      20
#define MS          1000000ll
#define TMO         (10 * SC_NS)
#define BOX_T       1    /* node 1's kill time */
#define BOX_TOK     2    /* node 9's token */
#define BOX_REC     3    /* the base nodes' recovered flags + 1: 3 + id */
#define BOX_CDONE   20   /* + id: nodes 1 and 3 stopped trying in phase C */
#define LEASE_C_MS  2000 /* phase C's lock R */
#define TAKE_C_MS   3000
#define WAIT_C_MS   (3 * TAKE_C_MS / 2) /* how long nodes 1 and 3 try for R */

static const loco_lock_cfg_t lcfg = {LEASE_MS * MS, TAKE_MS *MS};
static const loco_lock_cfg_t lcfg_c = {LEASE_C_MS * MS, TAKE_C_MS *MS};

/* holder_main -- node 9: join "lk-split", take S, report, wait for SIGKILL. */
static noreturn void holder_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_lock_t *lk;
	uint64_t token;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-split", 4, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "S", LOCK_HOST, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
	SC_ASSERT_OK(loco_lock_token(lk, &token));
	sc_log("node %u holds S with token %llu (pid %d)", loco_manager_node_id(m),
	       (unsigned long long)token, (int)getpid());
	sc_report("held %llu", (unsigned long long)token);
	for (;;)
		pause(); /* SIGKILL ends us; the alarm fails us if nobody does */
}

/*
 * split_acquire -- acquire @lk in calls of SPLIT_MS each, at most @calls of
 * them: 0 when granted, with *@n the calls it took; -ETIMEDOUT when no
 * call got it; any other error fails the test.
 */
static int split_acquire(loco_lock_t *lk, int calls, int *n)
{
	for (int i = 1; i <= calls; i++) {
		int ret = loco_lock_acquire(lk, SPLIT_MS * MS);

		if (ret == 0) {
			*n = i;
			return 0;
		}
		if (ret != -ETIMEDOUT)
			SC_FAIL("acquire(%d ms), call %d: %s", SPLIT_MS, i, loco_strerror(ret));
	}
	*n = calls;
	return -ETIMEDOUT;
}

/* inside -- under S: the witness says nobody else is inside; count the grant; hold a while. */
static void inside(loco_atomic_var_t *in, loco_atomic_var_t *grants)
{
	uint64_t old;

	SC_ASSERT_OK(loco_atomic_var_faa(in, 1, &old, TMO));
	if (old != 0)
		SC_FAIL("two holders of S at once: the witness was %llu on entry",
		        (unsigned long long)old);
	SC_ASSERT_OK(loco_atomic_var_faa(grants, 1, &old, TMO));
	sc_sleep_ms(HOLD_MS);
	SC_ASSERT_OK(loco_atomic_var_faa(in, (uint64_t)-1, &old, TMO));
	SC_ASSERT_EQ(old, 1);
}

/*
 * renew -- renew @lk, which this node holds: any error fails the test, and
 * says how long after the previous renewal's start (*@t_last) it came.
 */
static void renew(loco_lock_t *lk, int64_t *t_last)
{
	int64_t now = sc_now_ns();
	int ret = loco_lock_renew(lk);

	if (ret)
		SC_FAIL("loco_lock_renew(R): %s, %.1f ms after the previous renewal started "
		        "(lease %d ms)",
		        loco_strerror(ret), (double)(now - *t_last) / 1e6, LEASE_C_MS);
	*t_last = now;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch, *wch;
	loco_lock_t *lk, *lkc;
	loco_atomic_var_t *in, *grants;
	struct sc_sync sync;
	char line[64];
	uint32_t me, holder;
	uint64_t token, token9, v, rec = 0;
	unsigned long long tok;
	int64_t t_kill, t0, t_renew;
	int report = -1, n, ret;
	pid_t pid = 0;
	double ms;

	sc_init("lock-takeover-split", argc, argv, 100);
	if (argc > 1 && strcmp(argv[1], "holder") == 0)
		holder_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-split", 3, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "S", LOCK_HOST, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-split-w", 3, &wch));
	SC_ASSERT_OK(loco_atomic_var_create(wch, "inside", WIT_HOST, &in));
	SC_ASSERT_OK(loco_atomic_var_create(wch, "grants", WIT_HOST, &grants));
	SC_ASSERT_OK(loco_lock_create_cfg(wch, "R", LOCK_HOST, &lcfg_c, &lkc));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_channel_join(wch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* A. the holder dies; the waiters wait 500 ms at a time */
	if (me == 1) {
		pid = sc_spawn_node(m, "holder", HOLDER, &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(sscanf(line, "held %llu", &tok) == 1);
		close(report);
		sc_sync_put(&sync, BOX_TOK, (uint64_t)tok);
	}
	sc_sync_wait(&sync, "node 9 holds S", SC_WAIT_MS);
	token9 = sc_sync_get(&sync, BOX_TOK);
	SC_WAIT_UNTIL(sc_is_peer(ch, HOLDER), SC_WAIT_MS, "node 9 to pair in lk-split");
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, HOLDER);
	sc_sync_wait(&sync, "node 9 seen", SC_WAIT_MS);
	if (me == 1) {
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T, (uint64_t)t_kill);
	}
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T) != 0, SC_WAIT_MS, "node 1's kill time");
	t_kill = (int64_t)sc_sync_get(&sync, BOX_T);
	ret = split_acquire(lk, SPLIT_CALLS, &n);
	ms = (double)(sc_now_ns() - t_kill) / 1e6;
	if (ret)
		SC_FAIL("S not granted in %d calls of acquire(%d ms), %.0f ms after node 9's kill "
		        "(takeover time %d ms)",
		        n, SPLIT_MS, ms, TAKE_MS);
	SC_ASSERT_OK(loco_lock_token(lk, &token));
	sc_log("took S %.1f ms after node 9's kill, in call %d of acquire(%d ms) (T %d ms): "
	       "recovered %d, token %llu",
	       ms, n, SPLIT_MS, TAKE_MS, loco_lock_recovered(lk), (unsigned long long)token);
	if (ms > TAKE_MS + SLACK_MS)
		SC_FAIL("S taken %.1f ms after the kill: more than T + %d ms", ms, SLACK_MS);
	SC_ASSERT(token > token9);
	sc_sync_put(&sync, BOX_REC + me, 1 + (uint64_t)loco_lock_recovered(lk));
	inside(in, grants);
	SC_ASSERT_OK(loco_lock_release(lk));
	sc_sync_wait(&sync, "S taken once each", SC_WAIT_MS);
	for (unsigned i = 1; i <= 3; i++)
		rec += sc_sync_get(&sync, BOX_REC + i) - 1;
	if (rec != 1)
		SC_FAIL("%llu nodes saw S recovered from node 9, expected exactly 1",
		        (unsigned long long)rec);
	SC_ASSERT_OK(loco_atomic_var_read(grants, &v, TMO));
	SC_ASSERT_EQ(v, 3);
	sc_sync_wait(&sync, "counted", SC_WAIT_MS); /* before anyone's phase B adds to it */
	sc_log("phase A passed");

	/* B. the lock works on, taken in split waits with a witness */
	for (int i = 0; i < ROUNDS; i++) {
		ret = split_acquire(lk, 4 * SPLIT_CALLS, &n);
		if (ret)
			SC_FAIL("round %d: S not granted in %d calls of acquire(%d ms)", i, n,
			        SPLIT_MS);
		SC_ASSERT_EQ(loco_lock_recovered(lk), 0);
		inside(in, grants);
		SC_ASSERT_OK(loco_lock_release(lk));
	}
	sc_sync_wait(&sync, "rounds", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(grants, &v, TMO));
	SC_ASSERT_EQ(v, 3 + 3 * ROUNDS); /* phase C adds nothing */
	sc_log("phase B passed: %llu grants", (unsigned long long)v);

	/* C. a holder that renews is never taken over, however the others wait */
	if (me == 2) {
		SC_ASSERT_OK(loco_lock_acquire(lkc, TMO));
		SC_ASSERT_OK(loco_lock_token(lkc, &token));
	}
	t_renew = sc_now_ns();
	sc_sync_wait(&sync, "node 2 holds", SC_WAIT_MS);
	t0 = sc_now_ns();
	if (me == 2) {
		while (sc_now_ns() - t0 < WAIT_C_MS * MS) {
			renew(lkc, &t_renew);
			SC_ASSERT_EQ(loco_lock_held(lkc), 1);
			sc_sleep_ms(LEASE_C_MS / 8);
		}
	} else {
		int calls = 0;

		while (calls < WAIT_C_MS / SPLIT_MS && sc_now_ns() - t0 < WAIT_C_MS * MS) {
			ret = loco_lock_acquire(lkc, SPLIT_MS * MS);
			if (ret == 0)
				SC_FAIL("R granted to node %u %.0f ms into node 2's renewed hold",
				        me, (double)(sc_now_ns() - t0) / 1e6);
			SC_ASSERT_EQ(ret, -ETIMEDOUT);
			calls++;
		}
		sc_log("%d calls of acquire(%d ms) timed out while node 2 renewed", calls,
		       SPLIT_MS);
		sc_sync_put(&sync, BOX_CDONE + me, 1);
	}
	if (me == 2) {
		/*
		 * renew on until the others stopped trying: their last acquire may
		 * end a call's length after the loop above, and this hold must still
		 * be leased at its release below (under ASan beside another test the
		 * barrier alone once took it past the lease: -ETIMEDOUT)
		 */
		t0 = sc_now_ns();
		while (sc_sync_get(&sync, BOX_CDONE + 1) == 0 ||
		       sc_sync_get(&sync, BOX_CDONE + 3) == 0) {
			if (sc_now_ns() - t0 > SC_WAIT_MS * MS)
				SC_FAIL("nodes 1 and 3 did not end phase C's acquires");
			renew(lkc, &t_renew);
			sc_sleep_ms(LEASE_C_MS / 16);
		}
		renew(lkc, &t_renew);
	}
	sc_sync_wait(&sync, "renewals held", SC_WAIT_MS);
	if (me == 2) {
		uint64_t tk;

		SC_ASSERT_OK(loco_lock_token(lkc, &tk));
		SC_ASSERT_EQ(tk, token); /* the same hold throughout */
		SC_ASSERT_OK(loco_lock_release(lkc));
	}
	sc_sync_wait(&sync, "node 2 released", SC_WAIT_MS);
	if (me == 3) {
		SC_ASSERT_OK(loco_lock_acquire(lkc, TMO));
		SC_ASSERT_EQ(loco_lock_recovered(lkc), 0);
		SC_ASSERT_OK(loco_lock_release(lkc));
	}
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	sc_log("phase C passed");

	loco_atomic_var_destroy(grants);
	loco_atomic_var_destroy(in);
	loco_lock_destroy(lkc);
	loco_lock_destroy(lk);
	SC_ASSERT_OK(loco_channel_destroy(wch));
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
