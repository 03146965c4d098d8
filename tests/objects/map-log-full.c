/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-log-full.c -- an owner whose log slice at a key holder is full waits
 * for room, and gets it once the holder drains again; no write is lost.
 * No other test fills a slice: holders drain at every half (an idle
 * holder's log poller parks and the owner kicks it there: map_poll,
 * log_reserve).
 *
 * loco-run -n 2; node 1 spawns node 9. Key holders {1, 2, 9}, 3 replicas:
 * every write node 1 owns goes into node 9's inbound log. Node 1 SIGSTOPs
 * node 9 (shm: its memory still takes the WRITEs, so the slice fills; on
 * tcp and verbs the WRITEs themselves would wait, so shm only), then a
 * thread of node 1 PUTs keys node 1 owns, a slice and more of them, one at
 * a time (30 s each). Checked: with node 9 stopped the PUTs stall after at
 * most a slice (log_recs) and none fails; once node 9 goes on, every PUT
 * returns 0; node 9 then holds every key as a replica (its census,
 * loco_map_stats(), taken only then: a census drains the logs itself).
 *
 * What makes the room: the kicks (an object message, MAP_MSG_DRAIN, sent
 * at every half slice and every MAP_KICK_NS while the owner waits) wake
 * the parked poller; the holder's copy thread, whose passes drain too,
 * would make it within its nap (at most 200 ms) without them. So a lost
 * kick slows this test down and does not fail it: what fails it is an
 * owner that never gets room, a PUT that fails, or a record lost.
 *
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include "map_impl.h" /* map->log_recs: how many records a slice holds */
#include "scenario.h"

#define HOLDER 9
#define EXTRA  32u /* PUTs past a slice */
#define STALL  300 /* ms without a PUT done: stalled */

static const uint32_t holders[] = {1, 2, HOLDER};

static loco_map_t *open_map(loco_manager_t *m, loco_channel_t **ch)
{
	loco_map_cfg_t cfg;
	loco_map_t *map;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "mlf", 3, ch));
	loco_map_cfg_default(&cfg, holders, 3);
	cfg.key_max = 16;
	cfg.value_max = 64;
	cfg.replicas = 3;
	cfg.capacity = 4096;
	SC_ASSERT_OK(loco_map_create(*ch, "mlf", &cfg, &map));
	SC_ASSERT_OK(loco_channel_join(*ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	return map;
}

/*
 * the holder: report the slice's length, wait for node 1's SIGUSR1 (its
 * PUTs returned), then report the keys it holds. Not before: its census
 * takes the records of its logs itself (map_absorb), which would make
 * room without the poller.
 */
static noreturn void holder_main(void)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	loco_map_stats_t st;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	SC_ASSERT(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0); /* before any thread starts */
	m = sc_start();
	map = open_map(m, &ch);
	sc_report("ready %u", map->log_recs);
	SC_ASSERT(sigwait(&set, &sig) == 0);
	loco_map_stats(map, &st);
	sc_report("held %lu", (unsigned long)st.replicas);
	for (;;)
		pause(); /* node 1 kills it (the alarm fails it if nobody does) */
}

struct writer {
	loco_map_t *map;
	char (*keys)[16];
	unsigned n;
	unsigned done; /* atomic */
	int err;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (unsigned i = 0; i < w->n; i++) {
		char val[64];
		int ret;

		snprintf(val, sizeof(val), "value %u", i);
		ret = loco_map_put(w->map, w->keys[i], strlen(w->keys[i]), val, strlen(val) + 1,
		                   NULL, 30 * SC_NS);
		if (ret) {
			w->err = ret;
			break;
		}
		__atomic_store_n(&w->done, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2};
	struct writer w = {0};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct sc_sync sync;
	unsigned recs = 0, stalled, last;
	pid_t pid = 0;
	int report = -1;
	pthread_t thr;
	char line[64];
	const char *fabric;
	int64_t t0, seen;

	sc_init("map-log-full", argc, argv, 110);
	fabric = getenv("LOCO_FABRIC");
	if (fabric == NULL || strcmp(fabric, "shm") != 0) {
		sc_log("SKIP: shm only (elsewhere the WRITEs to a stopped holder wait themselves)");
		return SC_EXIT_SKIP;
	}
	if (argc > 1 && strcmp(argv[1], "holder") == 0)
		holder_main();
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_WAIT_UNTIL(sc_members_are(m, base, 2), SC_WAIT_MS, "members {1, 2}");
	sc_sync_open(&sync, m, 2);
	if (loco_manager_node_id(m) == 1)
		pid = sc_spawn_node(m, "holder", HOLDER, &report);
	map = open_map(m, &ch);
	sc_sync_wait(&sync, "map", SC_WAIT_MS);
	if (loco_manager_node_id(m) != 1) {
		sc_sync_wait(&sync, "done", 60000);
		goto out;
	}
	sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
	if (sscanf(line, "ready %u", &recs) != 1 || recs != map->log_recs)
		SC_FAIL("holder said \"%s\", this node's slices hold %u records", line,
		        map->log_recs);

	/* keys this node owns: each PUT writes a record into node 9's slice */
	w.map = map;
	w.n = recs + EXTRA;
	w.keys = calloc(w.n, sizeof(*w.keys));
	SC_ASSERT(w.keys != NULL);
	{
		unsigned k = 0;

		for (unsigned i = 0; k < w.n && i < 1000000; i++) {
			snprintf(w.keys[k], sizeof(w.keys[k]), "k%u", i);
			if (loco_map_owner(map, w.keys[k], strlen(w.keys[k])) == 1)
				k++;
		}
		SC_ASSERT(k == w.n);
	}

	sc_stop(pid);
	SC_ASSERT(pthread_create(&thr, NULL, writer_main, &w) == 0);
	t0 = seen = sc_now_ms();
	last = 0;
	for (;;) {
		unsigned d = __atomic_load_n(&w.done, __ATOMIC_ACQUIRE);

		if (d == w.n || w.err)
			break;
		if (d != last) {
			last = d;
			seen = sc_now_ms();
		} else if (sc_now_ms() - seen >= STALL) {
			break;
		}
		if (sc_now_ms() - t0 > 20000)
			break;
		sc_sleep_ms(5);
	}
	stalled = __atomic_load_n(&w.done, __ATOMIC_ACQUIRE);
	sc_log("holder stopped: %u of %u PUTs returned in %lld ms, then none for %d ms (a slice "
	       "holds %u)",
	       stalled, w.n, (long long)(seen - t0), STALL, recs);
	if (kill(pid, SIGCONT) != 0)
		SC_FAIL("kill(%d, SIGCONT): %s", (int)pid, strerror(errno));
	if (w.err)
		SC_FAIL("PUT %u failed with the holder stopped: %s", stalled, strerror(-w.err));
	if (stalled > recs)
		SC_FAIL("%u PUTs returned with the holder stopped: more than its slice holds (%u)",
		        stalled, recs);
	t0 = sc_now_ms();
	SC_ASSERT(pthread_join(thr, NULL) == 0);
	if (w.err || w.done != w.n)
		SC_FAIL("after the holder went on: PUT %u of %u failed: %s", w.done, w.n,
		        strerror(-w.err));
	sc_log("holder went on: the other %u PUTs returned in %lld ms", w.n - stalled,
	       (long long)(sc_now_ms() - t0));

	/* the holder took every record: it holds every key */
	if (kill(pid, SIGUSR1) != 0)
		SC_FAIL("kill(%d, SIGUSR1): %s", (int)pid, strerror(errno));
	sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
	{
		unsigned long held = 0;

		if (sscanf(line, "held %lu", &held) != 1 || held < w.n)
			SC_FAIL("holder said \"%s\": it holds %u keys as a replica", line, w.n);
	}
	sc_log("holder: %s", line);
	sc_sync_wait(&sync, "done", 60000);
	sc_kill(pid);
	close(report);
	free(w.keys);
out:
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return 0;
}
