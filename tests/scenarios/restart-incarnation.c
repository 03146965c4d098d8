/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * restart-incarnation.c -- a node killed and restarted at once under the
 * same id comes back as a new incarnation, and channel objects see it
 * leave, then join again.
 *
 * Nodes 1..3 (loco-run -n 3) join channel "r" holding an object whose
 * callbacks log the events about node 7 in order (J or L). Node 1 spawns
 * node 7 (this program with argument "seven"): it joins and joins "r",
 * reports loco_manager_incarnation() on its report pipe, then waits to be killed.
 * Once every node sees 7 as a member and a peer of "r", node 1 SIGKILLs it,
 * reaps it, and immediately starts it again with the same id. Checks:
 *   - the second incarnation differs from the first;
 *   - every node sees node 7 come back (a member and a peer of "r" again)
 *     and its object logged exactly J L J: the old incarnation left before
 *     the new one joined;
 *   - after node 1 kills the second incarnation too, every node logs
 *     J L J L and drops node 7.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

#define SEVEN      7
#define MAX_EVENTS 16

/* the events about node 7, in the order the progress thread delivered them */
static char events[MAX_EVENTS + 1]; /* 'J' / 'L'; published by nevents (release) */
static unsigned nevents;
static unsigned nother; /* events about any other node after the start */

static void record(uint32_t node, char what)
{
	if (node != SEVEN) {
		__atomic_fetch_add(&nother, 1, __ATOMIC_RELAXED);
		return;
	}
	unsigned i = __atomic_load_n(&nevents, __ATOMIC_RELAXED);

	if (i < MAX_EVENTS) {
		events[i] = what;
		__atomic_store_n(&nevents, i + 1, __ATOMIC_RELEASE); /* pairs with seen() */
	}
}

static void on_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)view;
	(void)obj;
	(void)arg;
	record(node, 'J');
}

static void on_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)view;
	(void)obj;
	(void)arg;
	record(node, 'L');
}

static const struct loco_object_ops watch_ops = {.peer_join = on_join, .peer_leave = on_leave};

/* seen -- the events so far as a string in @buf; returns their count. */
static unsigned seen(char *buf)
{
	unsigned n = __atomic_load_n(&nevents, __ATOMIC_ACQUIRE);

	memcpy(buf, events, n);
	buf[n] = '\0';
	return n;
}

/* seven_main -- node 7: join, join "r", report the incarnation, wait to be killed. */
static noreturn void seven_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_object_t *obj;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "r", 4, &ch));
	SC_ASSERT_OK(loco_object_create(ch, "watch", &watch_ops, NULL, &obj));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	sc_report("inc %" PRIx64, loco_manager_incarnation(m));
	/* SIGKILL ends us; the alarm (or the bound) fails us if nobody does */
	for (int i = 0; i < 1000; i++)
		pause();
	SC_FAIL("node 7 was not killed");
}

/* start_seven -- spawn node 7; returns its incarnation (from its report pipe). */
static uint64_t start_seven(loco_manager_t *m, pid_t *pid)
{
	char join[96], line[128];
	const char *env[] = {join, "LOCO_NODE_ID=7", "LOCO_ADDR=127.0.0.1:0", NULL};
	uint64_t inc;
	int fd;

	snprintf(join, sizeof(join), "LOCO_JOIN=%s", loco_manager_addr(m));
	*pid = sc_spawn("seven", env, &fd);
	sc_read_line(fd, line, sizeof(line), SC_WAIT_MS);
	close(fd);
	if (sscanf(line, "inc %" SCNx64, &inc) != 1)
		SC_FAIL("node 7 reported '%s', expected 'inc HEX'", line);
	return inc;
}

/* wait_events -- wait until the object logged @want about node 7. */
static void wait_events(const char *want)
{
	char got[MAX_EVENTS + 1];
	int64_t dl = sc_now_ms() + SC_WAIT_MS;

	while (seen(got) < strlen(want)) {
		if (sc_now_ms() >= dl)
			SC_FAIL("events about node 7: '%s' after %d ms, expected '%s'", got,
			        SC_WAIT_MS, want);
		sc_sleep_ms(1);
	}
	if (strcmp(got, want) != 0)
		SC_FAIL("events about node 7: '%s', expected '%s'", got, want);
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	static const uint32_t with7[] = {1, 2, 3, SEVEN};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	struct sc_sync sync;
	uint64_t inc1 = 0, inc2 = 0;
	unsigned others;
	pid_t pid = 0;
	int64_t t_kill = 0;

	sc_init("restart-incarnation", argc, argv, 90);
	if (argc > 1 && strcmp(argv[1], "seven") == 0)
		seven_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "r", 3, &ch));
	SC_ASSERT_OK(loco_object_create(ch, "watch", &watch_ops, NULL, &obj));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	sc_sync_wait(&sync, "channel r paired", SC_WAIT_MS);
	others = __atomic_load_n(&nother, __ATOMIC_RELAXED);

	/* first incarnation */
	if (loco_manager_node_id(m) == 1) {
		inc1 = start_seven(m, &pid);
		sc_log("node 7 started, incarnation %" PRIx64, inc1);
	}
	wait_events("J");
	SC_WAIT_UNTIL(sc_members_are(m, with7, 4) && sc_is_peer(ch, SEVEN), SC_WAIT_MS,
	              "node 7 as a member and a peer");
	sc_sync_wait(&sync, "node 7 seen", SC_WAIT_MS);

	/* kill -9 and start again at once, same id */
	if (loco_manager_node_id(m) == 1) {
		t_kill = sc_now_ms();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		inc2 = start_seven(m, &pid);
		sc_log("node 7 restarted %lld ms after the kill, incarnation %" PRIx64,
		       (long long)(sc_now_ms() - t_kill), inc2);
		if (inc2 == inc1)
			SC_FAIL("the restarted node 7 has the old incarnation %" PRIx64, inc1);
	}
	wait_events("JLJ");
	SC_WAIT_UNTIL(sc_members_are(m, with7, 4) && sc_is_peer(ch, SEVEN), SC_WAIT_MS,
	              "node 7 as a member and a peer again");
	sc_log("saw node 7 leave and come back: events JLJ");
	sc_sync_wait(&sync, "node 7 back", SC_WAIT_MS);

	/* kill the second incarnation: it leaves for good */
	if (loco_manager_node_id(m) == 1)
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	wait_events("JLJL");
	SC_WAIT_UNTIL(sc_members_are(m, base, 3) && !sc_is_peer(ch, SEVEN), SC_WAIT_MS,
	              "node 7 to be dropped");
	SC_ASSERT_EQ(__atomic_load_n(&nother, __ATOMIC_RELAXED), others);
	sc_sync_wait(&sync, "all checked", SC_WAIT_MS);

	loco_object_destroy(obj);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
