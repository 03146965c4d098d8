/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-basic.c -- the map's semantics across 3 nodes: put/get/del/cas and
 * versions, errors for bad input, -ENOSPC when full without harm to what
 * was stored, and every key on exactly `replicas` nodes.
 *
 * loco-run -n 3. Members {1, 2, 3} hold keys, 2 replicas.
 * 1. Map "m" (key_max 16, value_max 64): node 1 puts 40 keys (each value
 *    names its key), overwrites every fourth one (version 2), deletes
 *    every fifth; nodes 2 and 3 then read every key and check value,
 *    length, version and -ENOENT for the deleted ones; a 17-byte key, an
 *    empty key and a 65-byte value give -EMSGSIZE, a 4-byte buffer for a
 *    longer value -ENOBUFS; cas with a wrong version -ECANCELED, with
 *    the right one the next version, with 0 on an absent key creates it;
 *    del of an absent key -ENOENT. The census: every key is owned by one
 *    node and held as a replica by one other, and every write that
 *    succeeded was applied twice (sums over the nodes: also where the
 *    replicas' poller never ran, map-basic-nopoll, so that their records
 *    are taken by the census itself).
 * 2. Map "s" (capacity 16 per node): node 2 puts new keys until -ENOSPC
 *    (at most 200 tries); then every key put before reads back intact
 *    from every node, and an overwrite of a stored key still works.
 * 3. Map "c": nodes {1, 2} hold keys, node 3 is a client: it puts 20
 *    keys and reads them back, node 1 reads them too; node 3's table
 *    holds nothing and every key's owner is 1 or 2.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco/map.h>

#include "scenario.h"

#define TMO   (10 * SC_NS)
#define NKEYS 40
#define BOX_N 1 /* node 2: keys stored in map "s" before -ENOSPC */

static const uint32_t members[] = {1, 2, 3};

static loco_map_t *open_map(loco_manager_t *m, loco_channel_t **ch, const char *name,
                            uint32_t capacity)
{
	loco_map_cfg_t cfg;
	loco_map_t *map;

	SC_ASSERT_OK(loco_channel_create(m, NULL, name, 3, ch));
	loco_map_cfg_default(&cfg, members, 3);
	cfg.key_max = 16;
	cfg.value_max = 64;
	cfg.replicas = 2;
	cfg.capacity = capacity;
	SC_ASSERT_OK(loco_map_create(*ch, name, &cfg, &map));
	SC_ASSERT_OK(loco_channel_join(*ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	return map;
}

static void value_of(char *v, size_t cap, int i, int gen)
{
	snprintf(v, cap, "value of key %d, generation %d", i, gen);
}

int main(int argc, char **argv)
{
	char key[32], val[80], got[80], big[80];
	loco_map_stats_t st;
	loco_manager_t *m;
	loco_channel_t *ch, *ch2;
	loco_map_t *map, *small;
	struct sc_sync sync;
	uint64_t ver, v2, sum[3];
	size_t len;
	uint32_t me;
	int ret;
	uint64_t wrote = 0; /* writes of this node that succeeded, each applied on 2 nodes */

	sc_init("map-basic", argc, argv, 100);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, members, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);
	map = open_map(m, &ch, "m", 0);
	sc_sync_wait(&sync, "map m", SC_WAIT_MS);

	if (me == 1) {
		for (int i = 0; i < NKEYS; i++) {
			snprintf(key, sizeof(key), "key-%d", i);
			value_of(val, sizeof(val), i, 1);
			SC_ASSERT_OK(
			    loco_map_put(map, key, strlen(key), val, strlen(val), &ver, TMO));
			SC_ASSERT_EQ(ver, 1);
			wrote++;
		}
		for (int i = 0; i < NKEYS; i += 4) {
			snprintf(key, sizeof(key), "key-%d", i);
			value_of(val, sizeof(val), i, 2);
			SC_ASSERT_OK(
			    loco_map_put(map, key, strlen(key), val, strlen(val), &ver, TMO));
			SC_ASSERT_EQ(ver, 2);
			wrote++;
		}
		for (int i = 0; i < NKEYS; i += 5) {
			snprintf(key, sizeof(key), "key-%d", i);
			SC_ASSERT_OK(loco_map_del(map, key, strlen(key), TMO));
			wrote++;
		}
		sc_log("%d keys put, %d overwritten, %d deleted", NKEYS, NKEYS / 4, NKEYS / 5);
	}
	sc_sync_wait(&sync, "written", SC_WAIT_MS);
	if (me != 1) {
		unsigned owners[4] = {0};

		for (int i = 0; i < NKEYS; i++) {
			snprintf(key, sizeof(key), "key-%d", i);
			owners[loco_map_owner(map, key, strlen(key))]++;
			ret =
			    loco_map_get(map, key, strlen(key), got, sizeof(got), &len, &ver, TMO);
			if (i % 5 == 0) {
				SC_ASSERT_EQ(ret, -ENOENT);
				continue;
			}
			SC_ASSERT_OK(ret);
			value_of(val, sizeof(val), i, i % 4 == 0 ? 2 : 1);
			SC_ASSERT_EQ(len, strlen(val));
			SC_ASSERT(memcmp(got, val, len) == 0);
			SC_ASSERT_EQ(ver, i % 4 == 0 ? 2 : 1);
		}
		sc_log("every key read back; owners: node 1 %u, node 2 %u, node 3 %u", owners[1],
		       owners[2], owners[3]);
		SC_ASSERT(owners[1] > 0 && owners[2] > 0 && owners[3] > 0);
	}
	sc_sync_wait(&sync, "read back", SC_WAIT_MS); /* before node 2 changes key-1 and key-5 */
	if (me == 2) {
		memset(big, 'x', sizeof(big));
		SC_ASSERT_EQ(loco_map_put(map, big, 17, "v", 1, NULL, TMO), -EMSGSIZE);
		SC_ASSERT_EQ(loco_map_put(map, big, 0, "v", 1, NULL, TMO), -EMSGSIZE);
		SC_ASSERT_EQ(loco_map_put(map, "k", 1, big, 65, NULL, TMO), -EMSGSIZE);
		SC_ASSERT_EQ(loco_map_get(map, big, 17, got, sizeof(got), NULL, NULL, TMO),
		             -EMSGSIZE);
		SC_ASSERT_EQ(loco_map_get(map, "key-1", 5, got, 4, &len, NULL, TMO), -ENOBUFS);
		SC_ASSERT_EQ(loco_map_del(map, "absent", 6, TMO), -ENOENT);
		SC_ASSERT_EQ(loco_map_get(map, "absent", 6, got, sizeof(got), NULL, NULL, TMO),
		             -ENOENT);
		/* cas */
		SC_ASSERT_OK(loco_map_get(map, "key-1", 5, got, sizeof(got), &len, &ver, TMO));
		SC_ASSERT_EQ(loco_map_cas(map, "key-1", 5, ver + 1, "x", 1, NULL, TMO), -ECANCELED);
		SC_ASSERT_EQ(loco_map_cas(map, "key-1", 5, 0, "x", 1, NULL, TMO), -ECANCELED);
		SC_ASSERT_OK(loco_map_cas(map, "key-1", 5, ver, "cas", 3, &v2, TMO));
		SC_ASSERT_EQ(v2, ver + 1);
		wrote++;
		SC_ASSERT_OK(loco_map_get(map, "key-1", 5, got, sizeof(got), &len, &ver, TMO));
		SC_ASSERT(len == 3 && memcmp(got, "cas", 3) == 0 && ver == v2);
		SC_ASSERT_OK(loco_map_cas(map, "new", 3, 0, "n", 1, &v2, TMO));
		SC_ASSERT_EQ(v2, 1);
		wrote++;
		SC_ASSERT_EQ(loco_map_cas(map, "new", 3, 0, "n", 1, &v2, TMO), -ECANCELED);
		/* a deleted key: cas 0 recreates it, its version goes on from the delete */
		SC_ASSERT_OK(loco_map_cas(map, "key-5", 5, 0, "again", 5, &v2, TMO));
		SC_ASSERT_EQ(v2, 3);
		wrote++;
		sc_log("EMSGSIZE, ENOBUFS, ENOENT, ECANCELED and cas versions as documented");
	}
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	/* census: NKEYS + "new" entries, each owned once and replicated once */
	loco_map_stats(map, &st);
	sc_log("owned %llu, replicas %llu, stale %llu, used %llu, gets %llu (%llu reads, "
	       "%llu retries), writes %llu, applied %llu",
	       (unsigned long long)st.owned, (unsigned long long)st.replicas,
	       (unsigned long long)st.stale, (unsigned long long)st.used,
	       (unsigned long long)st.gets, (unsigned long long)st.get_reads,
	       (unsigned long long)st.get_retries, (unsigned long long)st.writes,
	       (unsigned long long)st.applied);
	sc_sync_put(&sync, 10 + me, st.owned << 32 | st.replicas);
	sc_sync_put(&sync, 20 + me, wrote << 32 | st.applied);
	sc_sync_wait(&sync, "census", SC_WAIT_MS);
	sum[0] = sum[1] = sum[2] = 0;
	for (uint32_t n = 1; n <= 3; n++) {
		uint64_t w = sc_sync_get(&sync, 10 + n), a = sc_sync_get(&sync, 20 + n);

		sum[0] += w >> 32;
		sum[1] += w & 0xffffffffu;
		wrote += n == me ? 0 : a >> 32;
		sum[2] += a & 0xffffffffu;
	}
	SC_ASSERT_EQ(sum[0], NKEYS + 1);
	SC_ASSERT_EQ(sum[1], NKEYS + 1);
	/* the census takes what the logs hold first: a write acknowledged was applied twice */
	SC_ASSERT_EQ(sum[2], 2 * wrote);

	/* 2: full */
	small = open_map(m, &ch2, "s", 16);
	sc_sync_wait(&sync, "map s", SC_WAIT_MS);
	if (me == 2) {
		int n = 0;

		for (; n < 200; n++) {
			snprintf(key, sizeof(key), "s-%d", n);
			value_of(val, sizeof(val), n, 1);
			ret = loco_map_put(small, key, strlen(key), val, strlen(val), NULL, TMO);
			if (ret == -ENOSPC)
				break;
			SC_ASSERT_OK(ret);
		}
		SC_ASSERT(n < 200);
		sc_log("%d keys stored in 3 x 16 slots (2 copies each), then ENOSPC", n);
		SC_ASSERT(n >= 8);
		sc_sync_put(&sync, BOX_N, (uint64_t)n);
	}
	sc_sync_wait(&sync, "filled", SC_WAIT_MS);
	{
		int n = (int)sc_sync_get(&sync, BOX_N);

		for (int i = 0; i < n; i++) {
			snprintf(key, sizeof(key), "s-%d", i);
			value_of(val, sizeof(val), i, 1);
			SC_ASSERT_OK(loco_map_get(small, key, strlen(key), got, sizeof(got), &len,
			                          &ver, TMO));
			SC_ASSERT(len == strlen(val) && memcmp(got, val, len) == 0 && ver == 1);
		}
		sc_log("the %d keys of the full map read back intact", n);
	}
	sc_sync_wait(&sync, "small read", 60000); /* then the overwrite: the others read all */
	if (me == 3) {
		SC_ASSERT_OK(loco_map_put(small, "s-0", 3, "over", 4, &ver, TMO));
		SC_ASSERT_EQ(ver, 2);
	}
	sc_sync_wait(&sync, "small done", 60000);

	/* 3: a client */
	{
		static const uint32_t holders[] = {1, 2}, clients[] = {3};
		loco_channel_t *ch3;
		loco_map_cfg_t cfg;
		loco_map_t *cm;

		SC_ASSERT_OK(loco_channel_create(m, NULL, "c", 3, &ch3));
		loco_map_cfg_default(&cfg, holders, 2);
		cfg.clients = clients;
		cfg.nclients = 1;
		cfg.replicas = 2;
		SC_ASSERT_OK(loco_map_create(ch3, "c", &cfg, &cm));
		SC_ASSERT_OK(loco_channel_join(ch3, 20 * SC_NS));
		SC_ASSERT_OK(loco_map_sync(cm, 20 * SC_NS));
		sc_sync_wait(&sync, "map c", SC_WAIT_MS);
		if (me == 3) {
			for (int i = 0; i < 20; i++) {
				snprintf(key, sizeof(key), "c-%d", i);
				value_of(val, sizeof(val), i, 1);
				SC_ASSERT_OK(loco_map_put(cm, key, strlen(key), val, strlen(val),
				                          &ver, TMO));
				SC_ASSERT_EQ(ver, 1);
				SC_ASSERT(loco_map_owner(cm, key, strlen(key)) == 1 ||
				          loco_map_owner(cm, key, strlen(key)) == 2);
			}
		}
		sc_sync_wait(&sync, "client wrote", SC_WAIT_MS);
		if (me != 2) {
			for (int i = 0; i < 20; i++) {
				snprintf(key, sizeof(key), "c-%d", i);
				value_of(val, sizeof(val), i, 1);
				SC_ASSERT_OK(loco_map_get(cm, key, strlen(key), got, sizeof(got),
				                          &len, &ver, TMO));
				SC_ASSERT(len == strlen(val) && memcmp(got, val, len) == 0 &&
				          ver == 1);
			}
			loco_map_stats(cm, &st);
			if (me == 3)
				SC_ASSERT_EQ(st.used, 0);
			else
				SC_ASSERT_EQ(st.owned + st.replicas, 20);
			sc_log("map c: the client's 20 keys read back here; this node holds %llu",
			       (unsigned long long)st.used);
		} /* destroyed together at the end, after the last barrier: an rpc endpoint destroyed
		   while a peer's is still up gets a last WRITE from it (loco_rpipe_destroy) */
		sc_sync_wait(&sync, "done", 60000);
		loco_map_destroy(cm);
		SC_ASSERT_OK(loco_channel_destroy(ch3));
	}
	loco_map_destroy(small);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch2));
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
