/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * owned_var-local.c -- the owner's own value, loaded by other threads of
 * the owner while its thread stores: never torn, never older than a value
 * loaded before.
 *
 * loco-run -n 1. One variable per size class and path of the load: 8 B
 * (a word), 48 B (a line), 200 B and 4096 B (checksummed, validated on
 * the stack) and 8192 B (checksummed, on the shared scratch buffer). For
 * each, the main thread stores versions 1, 2, ... as fast as it can
 * (a value whose 8-byte words all hold its version) for ROUND_MS, while
 * READERS threads load it: every value loaded must have all its words
 * equal (not torn) and be at least the version that reader loaded last.
 * A load may give up (-LOCO_ETORN: stores back to back for 50 ms), but
 * each reader must load a value many times (MIN_LOADS).
 *
 * Why: the owner stores a checksummed value with one memcpy of its data
 * (objects/value.c, value_encode()), and a load copies it with one
 * memcpy before checking the hash (hash_try()); the hash, not the order
 * of the stores, is what keeps a torn copy out. The remote readers are
 * the torn-read hunt's (owned_var-torn); this is the owner's side.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/owned_var.h>

#include "scenario.h"

#define NVARS     5
#define READERS   2
#define ROUND_MS  400
#define MIN_LOADS 100

static const size_t var_size[NVARS] = {8, 48, 200, 4096, 8192};

struct reader {
	pthread_t thr;
	loco_owned_var_t *ov;
	size_t words;
	int stop; /* atomic */
	uint64_t loads, gaveup, last;
	char err[160];
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t val[8192 / 8];
	int ret;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		ret = loco_owned_var_load(r->ov, val);
		if (ret == -LOCO_ETORN) {
			r->gaveup++;
			continue;
		}
		if (ret != 0) {
			snprintf(r->err, sizeof(r->err), "load: %s", loco_strerror(ret));
			return NULL;
		}
		for (size_t k = 1; k < r->words; k++)
			if (val[k] != val[0]) {
				snprintf(r->err, sizeof(r->err),
				         "torn: word 0 is version %llu, word %zu version %llu",
				         (unsigned long long)val[0], k, (unsigned long long)val[k]);
				return NULL;
			}
		if (val[0] < r->last) {
			snprintf(r->err, sizeof(r->err), "version %llu after version %llu",
			         (unsigned long long)val[0], (unsigned long long)r->last);
			return NULL;
		}
		r->last = val[0];
		r->loads++;
	}
	return NULL;
}

static void round_of(loco_owned_var_t *ov, size_t size)
{
	struct reader rd[READERS];
	uint64_t val[8192 / 8], ver = 0;
	loco_value_stats_t st;
	int64_t end;

	memset(rd, 0, sizeof(rd));
	for (int i = 0; i < READERS; i++) {
		rd[i].ov = ov;
		rd[i].words = size / 8;
		SC_ASSERT_EQ(pthread_create(&rd[i].thr, NULL, reader_main, &rd[i]), 0);
	}
	end = sc_now_ms() + ROUND_MS;
	while (sc_now_ms() < end) {
		ver++;
		for (size_t k = 0; k < size / 8; k++)
			val[k] = ver;
		SC_ASSERT_OK(loco_owned_var_store(ov, val));
	}
	for (int i = 0; i < READERS; i++) {
		__atomic_store_n(&rd[i].stop, 1, __ATOMIC_RELEASE);
		SC_ASSERT_EQ(pthread_join(rd[i].thr, NULL), 0);
	}
	for (int i = 0; i < READERS; i++) {
		sc_log("%zu B: reader %d: %llu loads (last version %llu of %llu), %llu gave up",
		       size, i, (unsigned long long)rd[i].loads, (unsigned long long)rd[i].last,
		       (unsigned long long)ver, (unsigned long long)rd[i].gaveup);
		if (rd[i].err[0] != '\0')
			SC_FAIL("%zu B: reader %d: %s", size, i, rd[i].err);
		if (rd[i].loads < MIN_LOADS)
			SC_FAIL("%zu B: reader %d loaded %llu values, under %d", size, i,
			        (unsigned long long)rd[i].loads, MIN_LOADS);
	}
	loco_owned_var_stats(ov, &st);
	sc_log("%zu B: %llu retried attempts (half-stored values the validation refused)", size,
	       (unsigned long long)st.retries);
	/* the store that came last is what loads now */
	SC_ASSERT_OK(loco_owned_var_load(ov, val));
	SC_ASSERT_EQ(val[0], ver);
	SC_ASSERT_EQ(val[size / 8 - 1], ver);
}

int main(int argc, char **argv)
{
	loco_owned_var_t *ov[NVARS];
	loco_channel_t *ch;
	loco_manager_t *m;
	char name[16];

	sc_init("owned_var-local", argc, argv, 60);
	if (sc_nodes() != 1)
		SC_FAIL("run with loco-run -n 1 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ov-local", 1, &ch));
	for (int i = 0; i < NVARS; i++) {
		snprintf(name, sizeof(name), "v%zu", var_size[i]);
		SC_ASSERT_OK(loco_owned_var_create(ch, name, 1, var_size[i], &ov[i]));
	}
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	for (int i = 0; i < NVARS; i++)
		round_of(ov[i], var_size[i]);
	for (int i = 0; i < NVARS; i++)
		loco_owned_var_destroy(ov[i]);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	sc_log("every load whole and in order");
	return 0;
}
