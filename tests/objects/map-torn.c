/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-torn.c -- a GET never returns a torn value: node 2 rewrites one
 * 4 KiB value of a key it owns as fast as it can (each value is 512
 * copies of one counter), while nodes 1 and 3 read it with
 * loco_map_get(): every value read must be 512 equal words, and the
 * counter never goes back (one writer, linearizable reads). The READs
 * meet slots being written (the fabric copies them while node 2's CPU
 * writes them): the reads done again are printed. Each reader reads
 * READS times at least, and on until it saw 20 values (within 20 s).
 *
 * loco-run -n 3. Members {1, 2, 3} hold keys, 1 replica; node 2 owns
 * the key (the first of "torn-0", "torn-1", ... that it owns).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <loco/map.h>

#include "scenario.h"

#define TMO      (10 * SC_NS)
#define WORDS    512
#define READS    3000
#define BOX_DONE 1 /* readers finished: 1 + 3 = both */

static const uint32_t members[] = {1, 2, 3};

int main(int argc, char **argv)
{
	static uint64_t val[WORDS];
	loco_map_stats_t st;
	loco_map_cfg_t cfg;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct sc_sync sync;
	char key[16];
	uint32_t me, reads = sc_scaled(READS);
	size_t klen;

	sc_init("map-torn", argc, argv, 100);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, members, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "mt", 3, &ch));
	loco_map_cfg_default(&cfg, members, 3);
	cfg.key_max = 16;
	cfg.value_max = sizeof(val);
	cfg.capacity = 16;
	SC_ASSERT_OK(loco_map_create(ch, "torn", &cfg, &map));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	for (int i = 0;; i++) {
		snprintf(key, sizeof(key), "torn-%d", i);
		klen = strlen(key);
		if (loco_map_owner(map, key, klen) == 2)
			break;
	}
	if (me == 2)
		SC_ASSERT_OK(loco_map_put(map, key, klen, val, sizeof(val), NULL, TMO));
	sc_sync_wait(&sync, "first value", SC_WAIT_MS);

	if (me == 2) {
		uint64_t n = 0;
		int64_t dl = sc_now_ms() + 60000;

		while (sc_sync_get(&sync, BOX_DONE) != 1 + 3) {
			if (sc_now_ms() > dl)
				SC_FAIL("the readers did not finish in 60 s");
			n++;
			for (int w = 0; w < WORDS; w++)
				val[w] = n;
			SC_ASSERT_OK(loco_map_put(map, key, klen, val, sizeof(val), NULL, TMO));
			/*
			 * A breath between rewrites: back to back, under the
			 * sanitizers the readers' every READ met a slot being
			 * written and they did not finish in 60 s (a fresh-clone
			 * run). Reads still meet writes in flight: the retries are
			 * printed.
			 */
			nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
		}
		sc_log("%llu values written while the others read", (unsigned long long)n);
	} else {
		uint64_t last = 0, changes = 0;
		int64_t until = sc_now_ms() + 20000;
		uint32_t i;

		/* READS reads at least, and on until 20 values were seen (or 20 s passed) */
		for (i = 0; i < reads || (changes < 20 && sc_now_ms() < until); i++) {
			size_t len = 0;

			SC_ASSERT_OK(
			    loco_map_get(map, key, klen, val, sizeof(val), &len, NULL, TMO));
			SC_ASSERT_EQ(len, sizeof(val));
			for (int w = 1; w < WORDS; w++)
				if (val[w] != val[0])
					SC_FAIL(
					    "read %u: a torn value: word 0 is %llu, word %d %llu",
					    i, (unsigned long long)val[0], w,
					    (unsigned long long)val[w]);
			if (val[0] < last)
				SC_FAIL("read %u: counter %llu after %llu", i,
				        (unsigned long long)val[0], (unsigned long long)last);
			changes += val[0] != last;
			last = val[0];
		}
		loco_map_stats(map, &st);
		sc_log("%u reads, all whole; %llu distinct values seen, last %llu; %llu reads of a "
		       "torn or in-flight slot done again",
		       i, (unsigned long long)changes, (unsigned long long)last,
		       (unsigned long long)st.get_retries);
		SC_ASSERT(changes > 1);
	}
	sc_sync_put(&sync, 10 + me, 1);
	if (me != 2) {
		/* the writer stops once both readers said so */
		SC_WAIT_UNTIL(sc_sync_get(&sync, 10 + (me == 1 ? 3 : 1)) == 1, 60000,
		              "the other reader");
		if (me == 1)
			sc_sync_put(&sync, BOX_DONE, 1 + 3);
	}
	sc_sync_wait(&sync, "done", 60000);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
