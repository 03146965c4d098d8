/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-log.c -- a key holder takes from its inbound logs only whole,
 * well-formed records, in order (objects/map_core.c: map_drain,
 * map_rec_check). One process, one node: a map of members {me, me + 1}
 * whose member me + 1 never starts; the test writes into this node's
 * log slice of node me + 1 what that owner's WRITEs could leave there,
 * then takes the records (map_drain, under the map's lock) and checks
 * the table and the slice's head:
 *
 *   - fuzz: a whole record with one covered byte changed (header, key,
 *     value, sum), many times: never taken;
 *   - hostile: records whose checksum is right but whose fields are not
 *     (key length 0 or above key_max, value above value_max, the hidden
 *     flag, a tombstone with a value, version 0): never taken;
 *   - a record of another lap at the expected place: not taken;
 *   - torn landings: a record's 64-byte lines land in a random order over
 *     an older record; after each line, the record is taken if and only
 *     if the slot holds the whole new record (every byte its checksum
 *     covers: its padding may differ);
 *   - whole records are taken in order: newer versions win, an older one
 *     changes nothing, a tombstone deletes, and the ring wraps; the slice's
 *     control word (what the owner reads for room) follows.
 *
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map_impl.h"

#define FUZZ 3000
#define TORN 300

static int fails;

#define CHECK(c)                                                                         \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "map-log: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			fails++;                                                         \
		}                                                                        \
	} while (0)

static loco_map_t *map;
static uint32_t slice; /* node me + 1's slice */

static uint8_t *rec_at(uint64_t seq)
{
	return (uint8_t *)loco_region_ptr(map->log) + (size_t)slice * map->slice_len + MAP_LOG_CTL +
	       (size_t)((seq - 1) % map->log_recs) * map->rec_len;
}

static uint64_t head(void)
{
	uint64_t h;

	pthread_mutex_lock(&map->lock);
	h = map->in_head[slice];
	pthread_mutex_unlock(&map->lock);
	return h;
}

static unsigned drain(void)
{
	unsigned n;

	pthread_mutex_lock(&map->lock);
	n = map_drain(map);
	pthread_mutex_unlock(&map->lock);
	return n;
}

/* sum -- the record checksum as map_core.c makes it, for hand-made records */
static uint64_t sum(const uint8_t *r, uint64_t seq)
{
	const struct slot_hdr *h = (const void *)r;
	uint64_t x = obj_sum(&h->ver, 16 + h->klen, seq);

	return obj_sum(r + MAP_HDR + map->key_area, h->vlen & MAP_LEN, x);
}

/* get -- key @k's value into @v: 0, or the GET's error */
static int get(const char *k, char *v, size_t cap, uint64_t *ver)
{
	size_t len = 0;
	int ret = loco_map_get(map, k, strlen(k), v, cap - 1, &len, ver, 5000000000ll);

	if (ret == 0)
		v[len] = '\0';
	return ret;
}

static size_t build(uint8_t *r, uint64_t seq, uint64_t ver, int del, const char *k, const char *v)
{
	memset(r, 0, map->rec_len);
	return map_rec_build(map, r, seq, ver, del, k, strlen(k), v, v ? strlen(v) : 0);
}

int main(void)
{
	uint8_t *good, *bad, *old;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_cfg_t cfg;
	uint32_t nodes[2];
	char v[128];
	uint64_t ver = 0, seq;
	unsigned seed = 12345, recs;
	size_t len;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
	if (loco_init(NULL, &m) != 0) {
		fprintf(stderr, "map-log: loco_init failed\n");
		return 1;
	}
	nodes[0] = loco_manager_node_id(m);
	nodes[1] = nodes[0] + 1;
	if (loco_channel_create(m, NULL, "map-log", 2, &ch) != 0)
		return 1;
	loco_map_cfg_default(&cfg, nodes, 2);
	cfg.key_max = 16;
	cfg.value_max = 100;
	cfg.capacity = 64;
	cfg.replicas = 2;
	if (loco_map_create(ch, "ml", &cfg, &map) != 0) {
		fprintf(stderr, "map-log: loco_map_create failed\n");
		return 1;
	}
	slice = 1;
	good = calloc(1, map->rec_len);
	bad = calloc(1, map->rec_len);
	old = calloc(1, map->rec_len);
	if (good == NULL || bad == NULL || old == NULL)
		return 1;
	CHECK(head() == 1);

	/* fuzz: one covered byte changed */
	len = build(good, 1, 5, 0, "k1", "hello");
	for (int i = 0; i < FUZZ; i++) {
		struct slot_hdr *h = (void *)good;
		size_t covered[3][2] = {
		    {8, MAP_HDR},
		    {MAP_HDR, MAP_HDR + h->klen},
		    {MAP_HDR + map->key_area, MAP_HDR + map->key_area + (h->vlen & MAP_LEN)}};
		int part = rand_r(&seed) % 3;
		size_t at = covered[part][0] +
		            (size_t)rand_r(&seed) % (covered[part][1] - covered[part][0]);
		uint8_t flip = (uint8_t)(1 + rand_r(&seed) % 255);

		memcpy(bad, good, len);
		bad[at] ^= flip;
		memcpy(rec_at(1), bad, len);
		drain();
		CHECK(head() == 1);
	}
	CHECK(get("k1", v, sizeof(v), NULL) == -ENOENT);

	/* hostile: a right checksum over wrong fields */
	for (int kind = 0; kind < 6; kind++) {
		struct slot_hdr *h = (void *)bad;

		build(bad, 1, 5, 0, "k1", "hello");
		switch (kind) {
		case 0:
			h->klen = 0;
			break;
		case 1:
			h->klen = (uint32_t)map->key_max + 1;
			break;
		case 2:
			h->vlen = (uint32_t)map->value_max + 1;
			break;
		case 3:
			h->vlen |= MAP_HIDE;
			break;
		case 4:
			h->vlen |= MAP_DEL;
			break;
		case 5:
			h->ver = 0;
			break;
		}
		h->sum = sum(bad, 1);
		memcpy(rec_at(1), bad, map->rec_len);
		drain();
		CHECK(head() == 1);
	}
	/* another lap's record at the expected place */
	build(bad, 1 + map->log_recs, 5, 0, "k1", "hello");
	memcpy(rec_at(1), bad, map->rec_len);
	drain();
	CHECK(head() == 1);
	CHECK(get("k1", v, sizeof(v), NULL) == -ENOENT);

	/* the whole record: taken */
	memcpy(rec_at(1), good, len);
	drain();
	CHECK(head() == 2);
	CHECK(get("k1", v, sizeof(v), &ver) == 0 && strcmp(v, "hello") == 0 && ver == 5);
	/* an older version: taken, changes nothing; a tombstone deletes */
	len = build(good, 2, 3, 0, "k1", "old");
	memcpy(rec_at(2), good, len);
	len = build(good, 3, 6, 1, "k1", NULL);
	memcpy(rec_at(3), good, len);
	drain();
	CHECK(head() == 4);
	CHECK(get("k1", v, sizeof(v), NULL) == -ENOENT);

	/* torn landings: lines in a random order over another lap's record */
	seq = 4;
	for (int i = 0; i < TORN; i++, seq++) {
		unsigned nl, order[64];
		char key[16], val[101];
		size_t vl = 1 + (size_t)rand_r(&seed) % 100;

		snprintf(key, sizeof(key), "t%d", i % 8);
		for (size_t j = 0; j < vl; j++)
			val[j] = (char)('a' + rand_r(&seed) % 26);
		val[vl] = '\0';
		build(old, seq > map->log_recs ? seq - map->log_recs : seq + map->log_recs, 1, 0,
		      "zz", "an older record of this place, from another lap of the ring");
		memcpy(rec_at(seq), old, map->rec_len);
		len = build(good, seq, 100 + (uint64_t)i, 0, key, val);
		nl = (unsigned)((len + 63) / 64);
		for (unsigned j = 0; j < nl; j++)
			order[j] = j;
		for (unsigned j = nl - 1; j > 0; j--) {
			unsigned k = (unsigned)rand_r(&seed) % (j + 1), t = order[j];

			order[j] = order[k];
			order[k] = t;
		}
		for (unsigned j = 0; j < nl; j++) {
			size_t off = (size_t)order[j] * 64, n = len - off < 64 ? len - off : 64;
			int whole;

			memcpy(rec_at(seq) + off, good + off, n);
			/* whole: every byte the record's checksum covers landed (its padding
			   may still hold the older record's bytes) */
			whole = memcmp(rec_at(seq), good, MAP_HDR + strlen(key)) == 0 &&
			        memcmp(rec_at(seq) + MAP_HDR + map->key_area,
			               good + MAP_HDR + map->key_area, vl) == 0;
			drain();
			CHECK(head() == seq + (uint64_t)whole);
			if (whole)
				break;
		}
		CHECK(head() == seq + 1);
		CHECK(get(key, v, sizeof(v), &ver) == 0 && strcmp(v, val) == 0 &&
		      ver == 100 + (uint64_t)i);
	}
	/* the ring wrapped (TORN > log_recs); the owner's view of the head follows */
	CHECK(seq > map->log_recs);
	CHECK(*(uint64_t *)((uint8_t *)loco_region_ptr(map->log) +
	                    (size_t)slice * map->slice_len) == seq);

	recs = map->log_recs;
	loco_map_destroy(map);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(good);
	free(bad);
	free(old);
	if (fails) {
		fprintf(stderr, "map-log: %d checks failed\n", fails);
		return 1;
	}
	printf("map-log: %d fuzzed, 6 hostile and 1 stale records refused, %d torn landings "
	       "taken only whole, %llu records taken in order (log of %u records)\n",
	       FUZZ, TORN, (unsigned long long)seq - 1, recs);
	return 0;
}
