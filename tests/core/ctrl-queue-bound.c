/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctrl-queue-bound.c -- a peer that never reads its control connection
 * neither blocks the calls that send to it nor grows the sender's memory
 * without bound (DESIGN §4: sends never block a caller; each connection has
 * a bounded queue drained by the progress thread).
 *
 * loco-run -n 2, with a long fail timeout (LOCO_FAIL_TIMEOUT_MS=20000, set
 * where the test is registered) so that the stopped node is not dropped for
 * its silence during the test; node 1 spawns node 3 (this program, role
 * "victim"): 3 nodes. Channel "cq" pairs nodes 1 and 3: node 1 holds an
 * object with BASE_REGIONS standing regions with long names there, so that
 * every announcement of its regions is a few KiB. Channel "cq-final" pairs
 * nodes 1 and 2; node 2 holds object "final" with region "f" there.
 *
 * Node 1:
 *   1. warms up: WARM_CYCLES load cycles (below), WARM_GAP_US apart, while
 *      everyone runs; reads its RSS (/proc/self/statm); node 3 must still
 *      be a member and a peer of "cq" (else there is nothing to judge);
 *   2. SIGSTOPs node 3 (by PID): nobody reads node 3's sockets any more;
 *   3. runs load cycles until TARGET_CYCLES are done or LOAD_MAX_MS passed
 *      (at most CYCLE_RATE a second), timing every call and sampling its
 *      RSS every RSS_EVERY cycles. A cycle is control-plane traffic to node
 *      3: loco_object_create(), loco_region_create() in the joined channel
 *      "cq" (an announcement of node 1's regions), loco_object_destroy()
 *      (another); and every CHAN_EVERY cycles an extra channel:
 *      loco_channel_create(), loco_channel_join() (announced to every
 *      member, node 2 too), and loco_channel_destroy();
 *   4. creates object "final" with region "f" in "cq-final" (announced),
 *      which node 2 must see (loco_region_remote()) within FINAL_MS:
 *      traffic to a healthy peer still flows;
 *   5. SIGKILLs and reaps node 3.
 * A call refused with an error (a full queue may be reported so) is counted
 * and printed, not failed. The big announcements go to node 3 only: what a
 * healthy node can read under load is not the question here.
 *
 * Checks (node 1): the peak RSS during the load stays within RSS_MAX_GROWTH
 * of the RSS before it (a judged load announces at least that much to node
 * 3, the full load twice that: an unbounded queue shows; the bound leaves
 * room for the library's 8 MiB queue and, under ASan, its quarantine of
 * the queue's earlier sizes); no call took more
 * than CALL_MAX_MS (a send that waits for room in the stopped node's socket
 * waits until the node resumes, which it never does: either failure mode
 * is caught; the bound was 500 ms until a sanitizer run beside other tests
 * saw a loco_region_create() of 653 ms with no wait on node 3 in it); at least
 * MIN_CYCLES cycles ran (else there is nothing to judge). Node 2: it sees
 * node 1's "final" region within FINAL_MS of its creation. Printed: the RSS
 * before, at its peak and after, the cycles and calls done (and refused),
 * the longest call of each kind, the estimated bytes announced to node 3,
 * and whether node 3 is still a member (a queue bound may drop it early).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../rss.h"
#include "scenario.h"

#define VICTIM         3
#define BASE_REGIONS   48
#define WARM_CYCLES    100
#define WARM_GAP_US    2000
#define TARGET_CYCLES  4800 /* ~14 KiB announced to each peer per cycle: ~66 MiB */
#define MIN_CYCLES     2400 /* fewer (~33 MiB): the load is too small to judge (both scaled) */
#define LOAD_MAX_MS    20000
#define CYCLE_RATE     2400 /* cycles per second at most (~35 MB/s to node 3) */
#define CHAN_EVERY     8
#define RSS_EVERY      16
#define RSS_MAX_GROWTH (32ll << 20)
#define CALL_MAX_MS    2000 /* a send that waits for the stopped node's socket waits for good */
#define FINAL_MS       5000
#define BOX_FINAL      1 /* node 1: when it created "final/f" */
#define BOX_VERDICT    2 /* node 2: 1 when it saw "final/f" in time, 2 when not */

enum call_kind {
	K_OBJ_CREATE,
	K_REGION_CREATE,
	K_OBJ_DESTROY,
	K_CHAN_CREATE,
	K_CHAN_JOIN,
	K_CHAN_DESTROY,
	K_NKINDS
};

static const char *const kind_name[K_NKINDS] = {
    "loco_object_create",  "loco_region_create", "loco_object_destroy",
    "loco_channel_create", "loco_channel_join",  "loco_channel_destroy",
};

struct load {
	long calls[K_NKINDS];
	long refused[K_NKINDS];
	int first_err[K_NKINDS];
	int64_t max_ns[K_NKINDS];
	long cycles;
	long long rss_max;
};

static long long rss_bytes(void)
{
	long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL)
		SC_FAIL("cannot open /proc/self/statm");
	if (fscanf(f, "%lld %lld", &size, &resident) != 2)
		SC_FAIL("cannot read /proc/self/statm");
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

/* timed -- account one call of @kind begun at @t0 that returned @ret. */
static void timed(struct load *ld, int kind, int64_t t0, int ret)
{
	int64_t dt = sc_now_ns() - t0;

	if (dt > ld->max_ns[kind])
		ld->max_ns[kind] = dt;
	ld->calls[kind]++;
	if (ret != 0 && ld->refused[kind]++ == 0)
		ld->first_err[kind] = ret;
}

/* cycle -- one load cycle (see the top of the file). */
static void cycle(struct load *ld, loco_manager_t *m, loco_channel_t *ch)
{
	loco_object_t *obj;
	loco_region_t *reg;
	int64_t t0 = sc_now_ns();
	int ret = loco_object_create(ch, "churn", NULL, NULL, &obj);

	timed(ld, K_OBJ_CREATE, t0, ret);
	if (ret == 0) {
		t0 = sc_now_ns();
		ret =
		    loco_region_create(obj, "r", 4096, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &reg);
		timed(ld, K_REGION_CREATE, t0, ret);
		t0 = sc_now_ns();
		loco_object_destroy(obj);
		timed(ld, K_OBJ_DESTROY, t0, 0);
	}
	if (ld->cycles % CHAN_EVERY == 0) {
		loco_channel_t *x;
		char name[32];

		snprintf(name, sizeof(name), "cq-x-%ld", ld->cycles);
		t0 = sc_now_ns();
		ret = loco_channel_create(m, NULL, name, 1, &x);
		timed(ld, K_CHAN_CREATE, t0, ret);
		if (ret == 0) {
			t0 = sc_now_ns();
			ret = loco_channel_join(x, SC_NS);
			timed(ld, K_CHAN_JOIN, t0, ret);
			t0 = sc_now_ns();
			ret = loco_channel_destroy(x);
			timed(ld, K_CHAN_DESTROY, t0, ret);
		}
	}
	ld->cycles++;
}

/* victim_main -- node 3: hold "cq", report, wait to be stopped and killed. */
static noreturn void victim_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "cq", 2, &ch));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_victim_wait(m);
}

/* base_object -- "cq-<me>-base" with BASE_REGIONS standing regions of long names. */
static loco_object_t *base_object(loco_channel_t *ch, uint32_t me)
{
	char name[32];

	snprintf(name, sizeof(name), "cq-%u-base", me);
	return sc_standing_regions(ch, name, BASE_REGIONS);
}

/* node1_load -- steps 1-4 on node 1; returns the number of failed checks. */
static int node1_load(loco_manager_t *m, loco_channel_t *ch, loco_channel_t *fch,
                      struct sc_sync *sync, pid_t pid, loco_object_t **final)
{
	struct load ld = {0};
	loco_region_t *f;
	long long rss0, rss1;
	int64_t t0, t_end, worst = 0;
	long target = (long)sc_scaled(TARGET_CYCLES), min = (long)sc_scaled(MIN_CYCLES);
	long calls = 0, refused = 0;
	int fails = 0, worst_kind = 0;

	for (int i = 0; i < WARM_CYCLES; i++) {
		struct timespec gap = {.tv_nsec = WARM_GAP_US * 1000};

		cycle(&ld, m, ch);
		nanosleep(&gap, NULL);
	}
	if (!sc_is_member(m, VICTIM) || !sc_is_peer(ch, VICTIM))
		SC_FAIL("node 3 was dropped while it ran (the warm-up): nothing to judge");
	rss0 = rss_bytes();
	ld = (struct load){.cycles = ld.cycles, .rss_max = rss0};

	sc_stop(pid);
	sc_log("stopped node 3 (pid %d); RSS %.1f MiB; load: up to %ld cycles or %d ms", (int)pid,
	       rss0 / 1048576.0, target, LOAD_MAX_MS);
	t0 = sc_now_ns();
	t_end = t0 + LOAD_MAX_MS * 1000000ll;
	for (long i = 0; i < target && sc_now_ns() < t_end; i++) {
		cycle(&ld, m, ch);
		if (i % RSS_EVERY == 0) {
			long long r = rss_bytes();
			int64_t due = t0 + i * (SC_NS / CYCLE_RATE), now = sc_now_ns();

			if (r > ld.rss_max)
				ld.rss_max = r;
			if (now < due) /* ahead of CYCLE_RATE: wait */
				sc_sleep_ms((unsigned)((due - now) / 1000000));
		}
	}
	rss1 = rss_bytes();
	if (rss1 > ld.rss_max)
		ld.rss_max = rss1;
	for (int k = 0; k < K_NKINDS; k++) {
		calls += ld.calls[k];
		refused += ld.refused[k];
		if (ld.max_ns[k] > worst) {
			worst = ld.max_ns[k];
			worst_kind = k;
		}
		sc_log("  %-20s %7ld calls, %5ld refused%s%s, the longest %.3f ms", kind_name[k],
		       ld.calls[k], ld.refused[k], ld.refused[k] ? " (first: " : "",
		       ld.refused[k] ? loco_strerror(ld.first_err[k]) : "",
		       (double)ld.max_ns[k] / 1e6);
	}
	sc_log("load: %ld cycles (%ld calls, %ld refused) in %.0f ms while node 3 was stopped: "
	       "about %.0f MiB of region announcements for node 3; node 3 %s a member",
	       ld.cycles - WARM_CYCLES, calls, refused, (double)(sc_now_ns() - t0) / 1e6,
	       (double)(ld.calls[K_REGION_CREATE] + ld.calls[K_OBJ_DESTROY]) * BASE_REGIONS * 150 /
	           1048576.0,
	       sc_is_member(m, VICTIM) ? "is still" : "is no longer");
	sc_log("RSS before %.1f MiB, peak %.1f MiB (+%.1f MiB), after %.1f MiB; the longest call "
	       "%.1f ms (%s)",
	       rss0 / 1048576.0, ld.rss_max / 1048576.0, (ld.rss_max - rss0) / 1048576.0,
	       rss1 / 1048576.0, (double)worst / 1e6, kind_name[worst_kind]);

	if (worst > CALL_MAX_MS * 1000000ll) {
		sc_log("CHECK FAILED: %s blocked for %.1f ms (more than %d ms) while a peer was "
		       "stopped",
		       kind_name[worst_kind], (double)worst / 1e6, CALL_MAX_MS);
		fails++;
	}
	if (!RSS_CHECKED)
		sc_log("RSS bound not checked: AddressSanitizer's quarantine keeps freed memory");
	else if (ld.rss_max - rss0 > RSS_MAX_GROWTH) {
		sc_log("CHECK FAILED: the RSS grew by %.1f MiB (more than %lld MiB) while a peer "
		       "was stopped",
		       (ld.rss_max - rss0) / 1048576.0, RSS_MAX_GROWTH >> 20);
		fails++;
	}
	if (ld.cycles - WARM_CYCLES < min) {
		sc_log(
		    "CHECK FAILED: only %ld load cycles in %d ms (want %ld): too little to judge",
		    ld.cycles - WARM_CYCLES, LOAD_MAX_MS, min);
		fails++;
	}

	/* 4. a healthy peer still hears us */
	SC_ASSERT_OK(loco_object_create(fch, "final", NULL, NULL, final));
	sc_sync_put(sync, BOX_FINAL, (uint64_t)sc_now_ns());
	SC_ASSERT_OK(loco_region_create(*final, "f", 64, LOCO_ACCESS_READ, &f));
	return fails;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2};
	loco_manager_t *m;
	loco_channel_t *ch = NULL, *fch;
	loco_object_t *bobj = NULL, *final = NULL;
	loco_region_t *f = NULL;
	struct sc_sync sync;
	uint32_t me;
	pid_t pid = 0;
	int report = -1, fails = 0;
	char line[32];

	sc_init("ctrl-queue-bound", argc, argv, 75);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	sc_log("fail timeout %u ms", sc_fail_timeout());
	SC_WAIT_UNTIL(sc_members_are(m, base, 2), SC_WAIT_MS, "members {1, 2}");
	sc_sync_open(&sync, m, 2);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "cq-final", 2, &fch));
	if (me == 1) {
		SC_ASSERT_OK(loco_channel_create(m, NULL, "cq", 2, &ch));
		bobj = base_object(ch, me);
		pid = sc_spawn_node(m, "victim", VICTIM, &report);
		SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		close(report);
		SC_ASSERT(strcmp(line, "ready") == 0);
		SC_WAIT_UNTIL(sc_is_peer(ch, VICTIM), SC_WAIT_MS, "node 3 to pair in \"cq\"");
	} else {
		SC_ASSERT_OK(loco_object_create(fch, "final", NULL, NULL, &final));
		SC_ASSERT_OK(loco_region_create(final, "f", 64, LOCO_ACCESS_READ, &f));
	}
	SC_ASSERT_OK(loco_channel_join(fch, 20 * SC_NS));
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (me == 1) {
		fails = node1_load(m, ch, fch, &sync, pid, &final);
		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_VERDICT) != 0,
		              LOAD_MAX_MS + FINAL_MS + SC_WAIT_MS, "node 2's verdict");
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		if (sc_sync_get(&sync, BOX_VERDICT) != 1) {
			sc_log("CHECK FAILED: node 2 did not see \"final/f\" within %d ms",
			       FINAL_MS);
			fails++;
		}
	} else {
		loco_rref_t rr;
		int64_t t_seen, t_made;
		double ms;

		/* node 1's load runs meanwhile: up to LOAD_MAX_MS */
		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_FINAL) != 0, LOAD_MAX_MS + SC_WAIT_MS,
		              "node 1's load to end");
		t_made = (int64_t)sc_sync_get(&sync, BOX_FINAL);
		while (loco_region_remote(f, 1, &rr) != 0 &&
		       sc_now_ns() - t_made < (FINAL_MS + 1000) * 1000000ll)
			sc_sleep_ms(1);
		t_seen = sc_now_ns();
		ms = (double)(t_seen - t_made) / 1e6;
		if (loco_region_remote(f, 1, &rr) == 0 && ms <= FINAL_MS) {
			sc_log("saw node 1's \"final/f\" %.1f ms after its creation", ms);
			sc_sync_put(&sync, BOX_VERDICT, 1);
		} else {
			sc_log("CHECK FAILED: node 1's \"final/f\" not seen within %d ms (%.1f ms)",
			       FINAL_MS, ms);
			sc_sync_put(&sync, BOX_VERDICT, 2);
			fails++;
		}
	}
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_object_destroy(final);
	SC_ASSERT_OK(loco_channel_destroy(fch));
	if (me == 1) {
		loco_object_destroy(bobj);
		SC_ASSERT_OK(loco_channel_destroy(ch));
	}
	sc_sync_close(&sync);
	loco_fini(m);
	if (fails)
		SC_FAIL("%d check(s) failed (see CHECK FAILED above)", fails);
	return SC_EXIT_PASS;
}
