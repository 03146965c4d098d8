/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * slow-peer.c -- a stopped peer does not slow the data path between the
 * others, and is declared failed within the failure bound (DESIGN §4:
 * control-plane sends never block a caller; the data path does not wait
 * for the control plane).
 *
 * loco-run -n 2; node 1 spawns node 3 (this program, role "victim"): 3
 * nodes. Channel "slow" holds owned_vars "v1" (owned by node 1) and "v2"
 * (node 2), 48 bytes each, at every node. Channel "slow-bg" holds, at nodes
 * 1 and 2, an object with BG_REGIONS standing regions (long names: every
 * announcement of the channel's regions is a few KiB); node 3 holds the
 * channel too, so it gets those announcements.
 *
 * Nodes 1 and 2 each run:
 *   - a background thread: every BG_PERIOD_US it creates an object with a
 *     region in "slow-bg" and destroys it (each announced to the channel's
 *     peers, node 3 included: some MB/s of ordinary control-plane traffic,
 *     the same in both windows below);
 *   - the main thread: pushes its owned_var to the other node, one push at
 *     a time (store, push_to, loco_ack_wait), PUSH_GAP_US apart, timing
 *     each one. Node 1 SIGSTOPs node 3 (by PID) BEFORE_MS after the start
 *     and puts the stop time in a mailbox: node 3's control and data stop;
 *     nobody reads what is sent to it. The pushes go on until the fail
 *     timeout + DETECT_SLACK_MS after the stop;
 *   - a watcher thread: looks at loco_manager_members() and loco_channel_peers()
 *     every 5 ms and notes when node 3 left each.
 *
 * Checks, on nodes 1 and 2 (each judges alone, before the last barrier):
 *   - every push succeeds (the other node stays a member and a peer);
 *   - with "before" the pushes begun before the stop and "during" those
 *     begun from the stop to the fail timeout + DURING_EXTRA_MS after it:
 *     no push during takes more than PUSH_MAX_MS (the stall of a send
 *     that blocks on the stopped node is 2 s; a loaded 2-core machine
 *     alone shows up to ~350 ms), and the median during is
 *     <= 2 x the median before + MEDIAN_SLACK_US (each window holds at
 *     least MIN_SAMPLES pushes);
 *   - node 3 disappears from loco_manager_members() and from the peers of "slow"
 *     within the fail timeout + DETECT_SLACK_MS of the stop.
 * Printed: count, median, p99 and max of both windows (and when the longest
 * push began), the detection times, and the background thread's calls and
 * its longest call (not judged here: see ctrl-queue-bound). Node 1
 * SIGKILLs and reaps node 3 after the pushes.
 *
 * Registered with LOCO_FAIL_TIMEOUT_MS=4000: the stop lasts long enough for
 * the background traffic toward node 3 (~2 MB/s a sender) to exceed what
 * the sockets to it can buffer (a few MB on loopback), while a healthy node
 * on a loaded machine keeps up with it easily.
 *
 * Usage: slow-peer [BG_PERIOD_US] (default BG_PERIOD_US x LOCO_TEST_SCALE; 0: no
 * background thread).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco/owned_var.h>

#include "scenario.h"

#define VICTIM          3
#define VSIZE           48 /* bytes of an owned_var: one sequence-checked line */
#define BG_REGIONS      48
#define BG_PERIOD_US    6000
#define PUSH_GAP_US     100
#define BEFORE_MS       1500 /* pushes before the stop */
#define DURING_EXTRA_MS 500  /* the "during" window: the fail timeout + this */
#define DETECT_SLACK_MS 1000 /* node 3 dropped within the fail timeout + this */
#define MEDIAN_SLACK_US 200
#define PUSH_MAX_MS     1000
#define MIN_SAMPLES     20
#define MAX_SAMPLES     (1 << 20)
#define BOX_START       1 /* node 1: when the pushes start (CLOCK_MONOTONIC ns) */
#define BOX_STOP        2 /* node 1: when node 3 was stopped */

struct sample {
	int64_t t;   /* when the push began */
	int64_t lat; /* ns from the store to the ack */
};

/* The background thread: control-plane traffic in "slow-bg". */
struct bg {
	loco_channel_t *ch;
	unsigned period_us;
	uint32_t me;
	int stop;       /* atomic */
	long ops;       /* object creates + region creates + object destroys */
	int64_t max_ns; /* the longest of those calls */
	int err;        /* the first error of a create */
};

/* The watcher thread: when node 3 leaves the members and the peers of "slow". */
struct watcher {
	loco_manager_t *m;
	loco_channel_t *ch;
	int stop;         /* atomic */
	int64_t t_gone_m; /* atomic: when node 3 was first no member (0: not yet) */
	int64_t t_gone_p; /* atomic: when node 3 was first no peer of "slow" */
	int64_t max_ns;   /* the longest loco_manager_members() + loco_channel_peers() look */
};

static bool has(const uint32_t *ids, int n, uint32_t node)
{
	for (int i = 0; i < n && i < SC_MAX_NODES; i++)
		if (ids[i] == node)
			return true;
	return false;
}

static void *watcher_main(void *arg)
{
	struct watcher *w = arg;
	uint32_t ids[SC_MAX_NODES];

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		int64_t t0 = sc_now_ns(), t;
		int n = loco_manager_members(w->m, ids, SC_MAX_NODES);

		t = sc_now_ns();
		if (n >= 0 && !has(ids, n, VICTIM) && w->t_gone_m == 0)
			__atomic_store_n(&w->t_gone_m, t, __ATOMIC_RELEASE);
		n = loco_channel_peers(w->ch, ids, SC_MAX_NODES);
		t = sc_now_ns();
		if (n >= 0 && !has(ids, n, VICTIM) && w->t_gone_p == 0)
			__atomic_store_n(&w->t_gone_p, t, __ATOMIC_RELEASE);
		if (t - t0 > w->max_ns)
			w->max_ns = t - t0;
		sc_sleep_ms(5);
	}
	return NULL;
}

static void sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static void timed(struct bg *b, int64_t t0)
{
	int64_t dt = sc_now_ns() - t0;

	if (dt > b->max_ns)
		b->max_ns = dt;
	b->ops++;
}

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	char name[32];

	snprintf(name, sizeof(name), "bg-%u-churn", b->me);
	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		loco_object_t *obj;
		loco_region_t *reg;
		int64_t t0 = sc_now_ns();
		int ret = loco_object_create(b->ch, name, NULL, NULL, &obj);

		timed(b, t0);
		if (ret) {
			b->err = ret;
			return NULL;
		}
		t0 = sc_now_ns();
		ret = loco_region_create(obj, "r", 4096, LOCO_ACCESS_READ, &reg);
		timed(b, t0);
		t0 = sc_now_ns();
		loco_object_destroy(obj);
		timed(b, t0);
		if (ret) {
			b->err = ret;
			return NULL;
		}
		sleep_us(b->period_us);
	}
	return NULL;
}

/* bg_base -- "bg-<me>-base" with BG_REGIONS standing regions of long names. */
static loco_object_t *bg_base(loco_channel_t *ch, uint32_t me)
{
	char name[32];

	snprintf(name, sizeof(name), "bg-%u-base", me);
	return sc_standing_regions(ch, name, BG_REGIONS);
}

/* victim_main -- node 3: hold both channels, report, wait to be stopped and killed. */
static noreturn void victim_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch, *bg;
	loco_owned_var_t *v1, *v2;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "slow", 3, &ch));
	SC_ASSERT_OK(loco_owned_var_create(ch, "v1", 1, VSIZE, &v1));
	SC_ASSERT_OK(loco_owned_var_create(ch, "v2", 2, VSIZE, &v2));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "slow-bg", 3, &bg));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_channel_join(bg, 20 * SC_NS));
	sc_victim_wait(m);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

struct stats {
	size_t n;
	int64_t median, p99, max;
	int64_t t_max; /* when the longest push began */
};

/* window -- the latencies of the samples that began in [@from, @to). */
static struct stats window(const struct sample *s, size_t n, int64_t from, int64_t to)
{
	struct stats st = {0};
	int64_t *lat = malloc((n ? n : 1) * sizeof(*lat));

	if (lat == NULL)
		SC_FAIL("out of memory");
	for (size_t i = 0; i < n; i++) {
		if (s[i].t < from || s[i].t >= to)
			continue;
		lat[st.n++] = s[i].lat;
		if (st.n == 1 || s[i].lat > st.max) {
			st.max = s[i].lat;
			st.t_max = s[i].t;
		}
	}
	if (st.n > 0) {
		qsort(lat, st.n, sizeof(*lat), cmp_i64);
		st.median = lat[st.n / 2];
		st.p99 = lat[st.n * 99 / 100];
	}
	free(lat);
	return st;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2};
	loco_manager_t *m;
	loco_channel_t *ch, *bgch;
	loco_owned_var_t *v[3];
	loco_object_t *bgobj;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	struct bg bg = {0};
	struct sample *smp;
	struct stats before, during;
	pthread_t bgt;
	uint32_t me, other, ft;
	uint64_t val[VSIZE / 8];
	size_t ns = 0;
	int64_t t_start, t_stop = 0, t_stop_plan, t_end, t_gone_m, t_gone_p;
	struct watcher wt = {0};
	pthread_t wtt;
	unsigned bg_period;
	uint64_t seq_err = 0;
	int64_t t_err = 0, lat_err = 0;
	int push_err = 0;
	pid_t pid = 0;
	int report = -1;
	char line[32];
	double det_m, det_p;

	sc_init("slow-peer", argc, argv, 60);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	/* a slower fabric's CPU (LOCO_TEST_SCALE) gets proportionally less background work */
	bg_period = BG_PERIOD_US * sc_env_u32("LOCO_TEST_SCALE", 1);
	if (argc > 1)
		bg_period = (unsigned)strtoul(argv[1], NULL, 10);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	other = me == 1 ? 2 : 1;
	ft = sc_fail_timeout();
	SC_WAIT_UNTIL(sc_members_are(m, base, 2), SC_WAIT_MS, "members {1, 2}");
	sc_sync_open(&sync, m, 2);
	smp = calloc(MAX_SAMPLES, sizeof(*smp));
	SC_ASSERT(smp != NULL);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "slow", 3, &ch));
	SC_ASSERT_OK(loco_owned_var_create(ch, "v1", 1, VSIZE, &v[1]));
	SC_ASSERT_OK(loco_owned_var_create(ch, "v2", 2, VSIZE, &v[2]));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "slow-bg", 3, &bgch));
	bgobj = bg_base(bgch, me);
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	if (me == 1) {
		pid = sc_spawn_node(m, "victim", VICTIM, &report);
	}
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_channel_join(bgch, 20 * SC_NS));
	if (me == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		close(report);
		SC_ASSERT(strcmp(line, "ready") == 0);
	}
	SC_WAIT_UNTIL(sc_is_peer(ch, VICTIM) && sc_is_peer(bgch, VICTIM), SC_WAIT_MS,
	              "node 3 to pair in both channels");
	/* the first push: the other node's replica is known */
	SC_WAIT_UNTIL(loco_owned_var_push_to(v[me], other, ack) == 0, SC_WAIT_MS,
	              "the other node's replica");
	SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));

	if (bg_period > 0) {
		bg = (struct bg){.ch = bgch, .period_us = bg_period, .me = me};
		SC_ASSERT_OK(pthread_create(&bgt, NULL, bg_main, &bg));
	}
	if (me == 1)
		sc_sync_put(&sync, BOX_START, (uint64_t)(sc_now_ns() + 200 * 1000000ll));
	sc_sync_wait(&sync, "start time", SC_WAIT_MS);
	t_start = (int64_t)sc_sync_get(&sync, BOX_START);
	t_stop_plan = t_start + BEFORE_MS * 1000000ll;
	t_end = t_stop_plan + (int64_t)(ft + DETECT_SLACK_MS) * 1000000;
	while (sc_now_ns() < t_start)
		sc_sleep_ms(1);
	wt = (struct watcher){.m = m, .ch = ch};
	SC_ASSERT_OK(pthread_create(&wtt, NULL, watcher_main, &wt));

	for (uint64_t seq = 1;; seq++) {
		int64_t t = sc_now_ns(), t0;
		int ret;

		if (t >= t_end)
			break;
		if (me == 1 && t_stop == 0 && t >= t_stop_plan) {
			sc_stop(pid);
			t_stop = sc_now_ns();
			sc_sync_put(&sync, BOX_STOP, (uint64_t)t_stop);
			sc_log("stopped node 3 (pid %d)", (int)pid);
		}
		for (size_t i = 0; i < VSIZE / 8; i++)
			val[i] = seq;
		t0 = sc_now_ns();
		SC_ASSERT_OK(loco_owned_var_store(v[me], val));
		ret = loco_owned_var_push_to(v[me], other, ack);
		if (ret == 0)
			ret = loco_ack_wait(ack, 10 * SC_NS);
		if (ret) {
			push_err = ret;
			t_err = t0;
			lat_err = sc_now_ns() - t0;
			seq_err = seq;
			break;
		}
		if (ns < MAX_SAMPLES)
			smp[ns++] = (struct sample){.t = t0, .lat = sc_now_ns() - t0};
		sleep_us(PUSH_GAP_US);
	}
	if (bg_period > 0) {
		__atomic_store_n(&bg.stop, 1, __ATOMIC_RELEASE);
		SC_ASSERT_OK(pthread_join(bgt, NULL));
		sc_log(
		    "background: %ld control-plane calls in \"slow-bg\", the longest %.1f ms%s%s",
		    bg.ops, (double)bg.max_ns / 1e6, bg.err ? "; stopped by " : "",
		    bg.err ? loco_strerror(bg.err) : "");
	}
	if (me == 1)
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	/* the watcher saw node 3 go, or it is not gone */
	__atomic_store_n(&wt.stop, 1, __ATOMIC_RELEASE);
	SC_ASSERT_OK(pthread_join(wtt, NULL));
	t_gone_m = wt.t_gone_m;
	t_gone_p = wt.t_gone_p;
	/* node 1's stop time (put right after the stop); the planned one if it did not come */
	if (me != 1)
		t_stop = (int64_t)sc_sync_get(&sync, BOX_STOP);
	if (t_stop == 0) {
		sc_log("node 1's stop time did not arrive: judging with the planned one");
		t_stop = t_stop_plan;
	}
	before = window(smp, ns, t_start, t_stop);
	during = window(smp, ns, t_stop, t_stop + (int64_t)(ft + DURING_EXTRA_MS) * 1000000);
	sc_log("pushes to node %u before the stop: %zu, median %.1f us, p99 %.1f us, max %.1f us",
	       other, before.n, before.median / 1e3, before.p99 / 1e3, before.max / 1e3);
	sc_log("pushes to node %u during the stop: %zu, median %.1f us, p99 %.1f us, max %.1f us "
	       "(begun %.1f ms after the stop)",
	       other, during.n, during.median / 1e3, during.p99 / 1e3, during.max / 1e3,
	       (double)(during.t_max - t_stop) / 1e6);
	det_m = t_gone_m ? (double)(t_gone_m - t_stop) / 1e6 : -1;
	det_p = t_gone_p ? (double)(t_gone_p - t_stop) / 1e6 : -1;
	sc_log("node 3 left loco_manager_members() %.1f ms and the peers of \"slow\" %.1f ms after "
	       "the "
	       "stop (fail timeout %u ms; -1: never); the watcher's longest look %.1f ms",
	       det_m, det_p, ft, (double)wt.max_ns / 1e6);
	if (push_err) {
		uint32_t ids[SC_MAX_NODES];
		char buf[128];
		int n = sc_members(m, ids);

		SC_FAIL(
		    "push %llu to node %u failed %.1f ms after the stop (the push took %.1f ms): "
		    "%s; members now %s",
		    (unsigned long long)seq_err, other, (double)(t_err - t_stop) / 1e6,
		    (double)lat_err / 1e6, loco_strerror(push_err),
		    sc_ids_str(ids, n, buf, sizeof(buf)));
	}

	if (during.max > PUSH_MAX_MS * 1000000ll)
		SC_FAIL("a push during the stop took %.1f ms (more than %d ms)", during.max / 1e6,
		        PUSH_MAX_MS);
	if (before.n < MIN_SAMPLES || during.n < MIN_SAMPLES)
		SC_FAIL("too few pushes to judge: %zu before, %zu during the stop (want %d each)",
		        before.n, during.n, MIN_SAMPLES);
	if (during.median > 2 * before.median + MEDIAN_SLACK_US * 1000ll)
		SC_FAIL("median push during the stop %.1f us > 2 x %.1f us + %d us",
		        during.median / 1e3, before.median / 1e3, MEDIAN_SLACK_US);
	if (t_gone_m == 0 || det_m > ft + DETECT_SLACK_MS)
		SC_FAIL("node 3 not dropped from the members within %u + %d ms of its stop", ft,
		        DETECT_SLACK_MS);
	if (t_gone_p == 0 || det_p > ft + DETECT_SLACK_MS)
		SC_FAIL(
		    "node 3 not dropped from the peers of \"slow\" within %u + %d ms of its stop",
		    ft, DETECT_SLACK_MS);
	if (bg.err)
		SC_FAIL("the background thread's create failed: %s", loco_strerror(bg.err));

	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	free(smp);
	loco_ack_key_destroy(ack);
	loco_owned_var_destroy(v[1]);
	loco_owned_var_destroy(v[2]);
	loco_object_destroy(bgobj);
	SC_ASSERT_OK(loco_channel_destroy(bgch));
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
