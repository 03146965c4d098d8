/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * barrier-stress.c -- many barrier episodes, checked; a joiner; a kill.
 *
 * loco-run -n 5. Channel "bar" holds barrier "b" and an sst "entered"
 * (8-byte rows): before each wait, a node stores the episode it is about
 * to enter in its "entered" row and pushes it, and waits for the pushes'
 * acks (pushing again when a data link failed under them: announce()).
 * After loco_barrier_wait() returns for
 * episode k, the node checks that every node whose row was present before
 * the wait, and still is (and is still a peer of the channel), has entered
 * k: no node leaves an episode before all entered it. A broken barrier
 * fails this check, and so does one whose pushes may land ahead of the
 * node's earlier WRITEs (sst-push-copy).
 *
 * Phase 1: EPISODES episodes on the 5 nodes; each node's episode number
 * must be exactly k (they started together).
 * Phase 2: node 1 spawns node 9, which joins the running channel and
 * loops on episodes too: its first episode must be one the others have
 * reached (>= EPISODES), and from then on it takes part. Once node 9 has
 * done JOINER_EPISODES episodes, node 1 SIGKILLs it in the middle of the
 * run; the others must not hang: they go on until node 1's stop episode
 * (AFTER_KILL episodes after the kill), published in an sc-sync mailbox.
 * Timings are printed.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/barrier.h>
#include <loco/sst.h>

#include "scenario.h"

#define EPISODES        10000u
#define JOINER          9
#define JOINER_EPISODES 300u
#define AFTER_KILL      1000u
#define PHASE2_MAX      20000u /* episodes phase 2 may take before node 9 must be dead */
#define MAX_ROWS        16
#define BOX_STOP        1 /* node 1's mailbox: the last episode of phase 2 */
#define WAIT_NS         (30 * SC_NS)

/* the counts above divided by LOCO_TEST_SCALE (sc_scaled), set once in main */
static uint32_t episodes, joiner_episodes, after_kill;
static uint32_t repushes; /* announce()'s pushes again */

struct bar {
	loco_channel_t *ch;
	loco_barrier_t *b;
	loco_sst_t *entered;
	loco_ack_key_t *ack; /* the "entered" pushes */
};

static void bar_open(struct bar *s, loco_manager_t *m, uint32_t nodes)
{
	SC_ASSERT_OK(loco_channel_create(m, NULL, "bar", nodes, &s->ch));
	/* the barrier first: the channel calls the newest object first, so a
	 * joiner's "entered" row is present before its barrier row */
	SC_ASSERT_OK(loco_barrier_create(s->ch, "b", &s->b));
	SC_ASSERT_OK(loco_sst_create(s->ch, "entered", 8, MAX_ROWS, &s->entered));
	SC_ASSERT_OK(loco_ack_key_create(m, &s->ack));
	SC_ASSERT_OK(loco_channel_join(s->ch, (int64_t)SC_WAIT_MS * 1000000));
}

static void bar_close(struct bar *s)
{
	loco_ack_key_destroy(s->ack);
	loco_sst_destroy(s->entered);
	loco_barrier_destroy(s->b);
	SC_ASSERT_OK(loco_channel_destroy(s->ch));
}

/*
 * announce -- push the own "entered" row to every peer and wait until each
 * push is acknowledged, pushing again while any failed or was skipped (a
 * link down when posting: -ENOTCONN, not counted). A push lost with a
 * data link that failed and was rebuilt (a host stalled past
 * LOCO_FAIL_TIMEOUT_MS; the peer stays in the view) would leave a peer's
 * row behind while the barrier, which pushes its own row again, passes:
 * the check below would blame the barrier. A peer that died fails its
 * pushes until the view drops it, which also holds the barrier up.
 */
static void announce(struct bar *s)
{
	int64_t dl = sc_now_ms() + WAIT_NS / 1000000;
	int ret;

	for (;;) {
		/* the others present now (a node whose link is down is skipped: not counted) */
		int others = loco_sst_rows(s->entered, NULL, 0) - 1;
		int posted = loco_sst_push_broadcast(s->entered, s->ack);

		SC_ASSERT(posted >= 0);
		ret = loco_ack_wait(s->ack, WAIT_NS);
		if (ret == 0 && posted >= others)
			return;
		if (sc_now_ms() >= dl)
			SC_FAIL("\"entered\" not acknowledged: posted to %d of %d: %s", posted,
			        others, loco_strerror(ret));
		repushes++;
		sc_sleep_ms(1);
	}
}

/*
 * episode -- one checked episode: announce it in "entered", wait, check.
 * @check: whether to check the others; false for a joiner's first
 * episode, which it learns only from the wait, and in which its peers have
 * not pushed "entered" to it yet. Returns the episode.
 */
static uint64_t episode(struct bar *s, uint32_t me, bool check)
{
	uint32_t before[MAX_ROWS];
	uint64_t k = loco_barrier_episode(s->b) + 1, e;
	int n, ret;

	n = loco_sst_rows(s->entered, before, MAX_ROWS);
	SC_ASSERT(n >= 1 && n <= MAX_ROWS);
	if (!check)
		k = 0; /* a joiner's first episode is the others' current one: known after */
	if (k) {
		SC_ASSERT_OK(loco_sst_store_mine(s->entered, &k));
		announce(s);
	}
	ret = loco_barrier_wait(s->b, WAIT_NS);
	if (ret)
		SC_FAIL("barrier wait for episode %llu: %s", (unsigned long long)k,
		        loco_strerror(ret));
	if (k == 0) {
		k = loco_barrier_episode(s->b);
		SC_ASSERT_OK(loco_sst_store_mine(s->entered, &k));
	}
	SC_ASSERT_EQ(loco_barrier_episode(s->b), k);
	for (int i = 0; i < n && check; i++) {
		if (before[i] == me || loco_sst_read(s->entered, before[i], &e) != 0)
			continue; /* gone since */
		if (e == 0)
			continue; /* a joiner in its first episode, which it announces after */
		/*
		 * A node that left (killed) leaves each object in turn: its
		 * barrier row may be gone, and the wait passed without it,
		 * while its "entered" row is still here. The channel drops
		 * the peer before any object sees it leave, so a node still
		 * a peer now still counted for the barrier.
		 */
		if (e < k && sc_is_peer(s->ch, before[i]))
			SC_FAIL("left episode %llu while node %u had entered only %llu",
			        (unsigned long long)k, before[i], (unsigned long long)e);
	}
	return k;
}

/* readable -- whether a line (or the end) waits on @fd. */
static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* joiner_main -- node 9: join the running barrier, take part until killed. */
static int joiner_main(void)
{
	loco_manager_t *m = sc_start();
	uint32_t me = loco_manager_node_id(m);
	uint64_t first, k;
	struct bar s;

	bar_open(&s, m, 6);
	first = episode(&s, me, false);
	sc_log("joiner: first episode %llu", (unsigned long long)first);
	if (first < episodes)
		SC_FAIL("joiner entered episode %llu, before the others' current one (>= %u)",
		        (unsigned long long)first, episodes);
	for (int64_t dl = sc_now_ms() + 60000; sc_now_ms() < dl;) {
		k = episode(&s, me, true);
		if (k == first + 10)
			sc_report("%llu", (unsigned long long)first);
	}
	SC_FAIL("node 1 did not kill the joiner");
}

int main(int argc, char **argv)
{
	uint64_t k = 0, stop = 0, first9 = 0;
	uint32_t me;
	loco_manager_t *m;
	struct sc_sync sync;
	struct bar s;
	pid_t pid = 0;
	int fd = -1;
	int64_t t0, t1;
	char line[64];

	sc_init("barrier-stress", argc, argv, 280);
	episodes = sc_scaled(EPISODES);
	joiner_episodes = sc_scaled(JOINER_EPISODES);
	after_kill = sc_scaled(AFTER_KILL);
	if (argc > 1 && strcmp(argv[1], "joiner") == 0)
		return joiner_main();
	if (sc_nodes() != 5)
		SC_FAIL("run with loco-run -n 5 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_EQ(loco_barrier_create(NULL, "x", &s.b), -EINVAL);
	bar_open(&s, m, 5);
	SC_ASSERT_EQ(loco_barrier_episode(s.b), 0);
	sc_sync_open(&sync, m, 5);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* phase 1: `episodes` episodes among the five */
	t0 = sc_now_ns();
	for (uint64_t i = 1; i <= episodes; i++) {
		k = episode(&s, me, true);
		SC_ASSERT_EQ(k, i);
	}
	t1 = sc_now_ns();
	sc_log("phase 1: %u episodes on 5 nodes in %.3f s: %.1f us per episode", episodes,
	       (double)(t1 - t0) / 1e9, (double)(t1 - t0) / 1e3 / episodes);
	sc_log("phase 1: \"entered\" pushed again %u times (data links that failed under them)",
	       repushes);
	sc_sync_wait(&sync, "phase 1 done", SC_WAIT_MS);

	/* phase 2: node 9 joins the running barrier, is killed in the middle */
	if (me == 1) {
		char join[96];
		const char *env[] = {join, "LOCO_NODE_ID=9", "LOCO_ADDR=127.0.0.1:0", NULL};

		snprintf(join, sizeof(join), "LOCO_JOIN=%s", loco_manager_addr(m));
		pid = sc_spawn("joiner", env, &fd);
	}
	t0 = sc_now_ns();
	for (uint64_t i = 0; stop == 0 || k < stop; i++) {
		uint64_t e9;

		k = episode(&s, me, true);
		if (i > PHASE2_MAX)
			SC_FAIL("phase 2: %llu episodes and no stop episode",
			        (unsigned long long)i);
		if (me == 1 && pid > 0 && loco_sst_read(s.entered, JOINER, &e9) == 0 && first9 &&
		    e9 >= first9 + joiner_episodes) {
			/* node 9 is in the middle of its episodes: kill it */
			SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
			pid = 0;
			stop = k + after_kill;
			sc_log("killed node 9 at its episode %llu (mine %llu); stopping at %llu",
			       (unsigned long long)e9, (unsigned long long)k,
			       (unsigned long long)stop);
			sc_sync_put(&sync, BOX_STOP, stop);
		}
		if (me == 1 && first9 == 0 && readable(fd)) {
			/* the joiner reports its first episode 10 episodes after it */
			sc_read_line(fd, line, sizeof(line), SC_WAIT_MS);
			first9 = strtoull(line, NULL, 10);
			SC_ASSERT(first9 >= episodes);
			sc_log("node 9 joined at episode %llu (mine now %llu)",
			       (unsigned long long)first9, (unsigned long long)k);
		}
		if (me != 1 && stop == 0)
			stop = sc_sync_get(&sync, BOX_STOP);
	}
	t1 = sc_now_ns();
	SC_ASSERT(!sc_is_peer(s.ch, JOINER));
	sc_log("phase 2: node 9 joined, took part and was killed; %llu episodes in %.3f s, last "
	       "%llu",
	       (unsigned long long)(k - episodes), (double)(t1 - t0) / 1e9, (unsigned long long)k);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	bar_close(&s);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
