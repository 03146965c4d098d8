/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock-takeover-gap.c -- the takeover watch spans calls, but not gaps: a
 * waiter whose looks at a held word are further apart than the gap bound
 * G starts its watch afresh at each look, and takes nothing over however
 * long it goes on so; G is T/4, and at most 256 L. That cap is what keeps
 * the 16-bit renewal counter from wrapping back to the watched value
 * unseen between two looks (a holder renews up to 64 times per L): with
 * T/4 alone, a lock whose T exceeds 1024 L let a watch that spans calls
 * bridge gaps in which a live holder could renew 65536 times.
 *
 * loco-run -n 3. Channel "lk-gap" holds lock "G" hosted on node 1, with a
 * 5 ms lease (L) and an 8 s takeover time (T): G is 1.28 s, where T/4
 * would be 2 s. (A shorter lease would make the test quicker, but a grant
 * must complete within L of its post: 5 ms leaves room for the VM's
 * emulated verbs.)
 *
 * Node 1 spawns node 9 (role "holder"): it takes G, reports and waits;
 * node 1 SIGKILLs it by PID. Then every base node looks at G with
 * acquire(1 ms) every GAP_MS (1.6 s: more than G, less than T/4) for
 * LOOK_MS (T + 2 s): every look must time out (no watch survives a gap).
 * Then each acquires with a timeout of T + SLACK: it must get G, no sooner
 * than T after that call began (its watch starts afresh), and exactly one
 * base node sees it recovered.
 */
#include <errno.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include <loco/lock.h>

#include "scenario.h"

#define LOCK_HOST 1
#define HOLDER    9
#define MS        1000000ll
#define LEASE_NS  (5 * MS)
#define TAKE_MS   8000
#define GAP_MS    1600 /* between looks: > 256 L = 1280 ms, < T/4 = 2000 ms */
#define LOOK_MS   (TAKE_MS + 2000)
#define SLACK_MS  5000
#define TMO       (10 * SC_NS)
#define BOX_T     1 /* node 1's kill time */
#define BOX_REC   2 /* the base nodes' recovered flags + 1: 2 + id */

static const loco_lock_cfg_t lcfg = {LEASE_NS, TAKE_MS *MS};

/* holder_main -- node 9: join "lk-gap", take G, report, wait for SIGKILL. */
static noreturn void holder_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_lock_t *lk;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-gap", 4, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "G", LOCK_HOST, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	/* a 5 ms lease: a grant that completes later is given back, and tried again */
	SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
	sc_log("node %u holds G (pid %d)", loco_manager_node_id(m), (int)getpid());
	sc_report("held");
	for (;;)
		pause(); /* SIGKILL ends us; the alarm fails us if nobody does */
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_lock_t *lk;
	struct sc_sync sync;
	char line[64];
	uint32_t me, holder;
	uint64_t rec = 0;
	int64_t t0;
	int report = -1, looks = 0, ret;
	pid_t pid = 0;
	double ms;

	sc_init("lock-takeover-gap", argc, argv, 100);
	if (argc > 1 && strcmp(argv[1], "holder") == 0)
		holder_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-gap", 3, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "G", LOCK_HOST, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (me == 1) {
		pid = sc_spawn_node(m, "holder", HOLDER, &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "held") == 0);
		close(report);
	}
	sc_sync_wait(&sync, "node 9 holds G", SC_WAIT_MS);
	SC_WAIT_UNTIL(sc_is_peer(ch, HOLDER), SC_WAIT_MS, "node 9 to pair in lk-gap");
	SC_ASSERT_OK(loco_lock_holder(lk, &holder, TMO));
	SC_ASSERT_EQ(holder, HOLDER);
	sc_sync_wait(&sync, "node 9 seen", SC_WAIT_MS);
	if (me == 1) {
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T, (uint64_t)sc_now_ns());
	}
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T) != 0, SC_WAIT_MS, "node 1's kill time");

	/* looks further apart than G: each one starts the watch afresh */
	t0 = sc_now_ns();
	while (sc_now_ns() - t0 < LOOK_MS * MS && looks < 2 * LOOK_MS / GAP_MS) {
		ret = loco_lock_acquire(lk, MS);
		looks++;
		if (ret == 0)
			SC_FAIL("G taken over at look %d, %.0f ms in, with looks %d ms apart (more "
			        "than 256 L = %lld ms)",
			        looks, (double)(sc_now_ns() - t0) / 1e6, GAP_MS,
			        256 * LEASE_NS / MS);
		SC_ASSERT_EQ(ret, -ETIMEDOUT);
		sc_sleep_ms(GAP_MS);
	}
	sc_log("%d looks %d ms apart over %.0f ms: none took G over", looks, GAP_MS,
	       (double)(sc_now_ns() - t0) / 1e6);
	sc_sync_wait(&sync, "looked", SC_WAIT_MS);

	/* one call that lasts T takes it over, no sooner than T after it began */
	t0 = sc_now_ns();
	ret = loco_lock_acquire(lk, (TAKE_MS + SLACK_MS) * MS);
	ms = (double)(sc_now_ns() - t0) / 1e6;
	if (ret)
		SC_FAIL("acquire(%d ms) after the looks: %s", TAKE_MS + SLACK_MS,
		        loco_strerror(ret));
	sc_log("took G %.1f ms into the call (T %d ms), recovered %d", ms, TAKE_MS,
	       loco_lock_recovered(lk));
	sc_sync_put(&sync, BOX_REC + me, 1 + (uint64_t)loco_lock_recovered(lk));
	if (loco_lock_recovered(lk) && ms < TAKE_MS)
		SC_FAIL("G taken over %.1f ms into the call: sooner than T", ms);
	ret = loco_lock_release(lk);
	if (ret != 0 && ret != -ETIMEDOUT) /* -ETIMEDOUT: a 5 ms lease ran out */
		SC_FAIL("release: %s", loco_strerror(ret));
	sc_sync_wait(&sync, "taken once each", SC_WAIT_MS);
	for (unsigned i = 1; i <= 3; i++)
		rec += sc_sync_get(&sync, BOX_REC + i) - 1;
	if (rec != 1)
		SC_FAIL("%llu nodes saw G recovered from node 9, expected exactly 1",
		        (unsigned long long)rec);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_lock_destroy(lk);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
