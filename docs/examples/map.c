/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map.c -- three nodes share a replicated map (2 copies of each key).
 * Node 1 stores COUNT keys, updates one with a compare-and-set and
 * deletes another; nodes 2 and 3 read them all back (one RDMA READ per
 * GET, checked) and say so through the map itself.
 *
 *   loco-run -n 3 ./map [COUNT]
 *
 * Exits 0 when every node read what node 1 wrote.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco.h>
#include <loco/map.h>

#define SEC (1000000000ll)

static int fail(const char *what, int err)
{
	fprintf(stderr, "map: %s: %s\n", what, loco_strerror(err));
	return 1;
}

/* wait_key -- poll until @key exists (another node wrote it), 30 s at most */
static int wait_key(loco_map_t *map, const char *key)
{
	char v[64];

	for (int i = 0; i < 30000; i++) {
		int ret = loco_map_get(map, key, strlen(key), v, sizeof(v), NULL, NULL, SEC);

		if (ret != -ENOENT)
			return ret;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

static int writer(loco_map_t *map, unsigned long count)
{
	char key[32], val[64];
	uint64_t ver;
	int ret;

	for (unsigned long i = 0; i < count; i++) {
		snprintf(key, sizeof(key), "key-%lu", i);
		snprintf(val, sizeof(val), "value %lu", i);
		ret = loco_map_put(map, key, strlen(key), val, strlen(val), &ver, 10 * SEC);
		if (ret)
			return fail("put", ret);
	}
	/* compare-and-set: only if key-0 is still at the version we read */
	ret = loco_map_get(map, "key-0", 5, val, sizeof(val), NULL, &ver, 10 * SEC);
	if (ret == 0)
		ret = loco_map_cas(map, "key-0", 5, ver, "updated", 7, &ver, 10 * SEC);
	if (ret)
		return fail("cas", ret);
	ret = loco_map_del(map, "key-1", 5, 10 * SEC);
	if (ret)
		return fail("del", ret);
	ret = loco_map_put(map, "done", 4, "1", 1, NULL, 10 * SEC);
	if (ret == 0)
		ret = wait_key(map, "read-2");
	if (ret == 0)
		ret = wait_key(map, "read-3");
	if (ret)
		return fail("waiting for the readers", ret);
	printf("node 1: wrote %lu keys; nodes 2 and 3 read them all\n", count);
	return loco_map_put(map, "bye", 3, "1", 1, NULL, 10 * SEC) ? 1 : 0;
}

static int reader(loco_map_t *map, uint32_t me, unsigned long count)
{
	char key[32], want[64], got[64];
	size_t len;
	int ret = wait_key(map, "done");

	if (ret)
		return fail("waiting for node 1", ret);
	for (unsigned long i = 0; i < count; i++) {
		snprintf(key, sizeof(key), "key-%lu", i);
		if (i == 0)
			snprintf(want, sizeof(want), "updated");
		else
			snprintf(want, sizeof(want), "value %lu", i);
		ret = loco_map_get(map, key, strlen(key), got, sizeof(got), &len, NULL, 10 * SEC);
		if (i == 1 && ret == -ENOENT)
			continue; /* deleted */
		if (ret)
			return fail("get", ret);
		if (i == 1 || len != strlen(want) || memcmp(got, want, len) != 0) {
			fprintf(stderr, "map: %s: wrong value\n", key);
			return 1;
		}
	}
	snprintf(key, sizeof(key), "read-%u", me);
	ret = loco_map_put(map, key, strlen(key), "1", 1, NULL, 10 * SEC);
	if (ret == 0)
		ret = wait_key(map, "bye");
	return ret ? fail("read-N / bye", ret) : 0;
}

int main(int argc, char **argv)
{
	static const uint32_t nodes[] = {1, 2, 3};
	unsigned long count = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_cfg_t cfg;
	loco_map_stats_t st;
	loco_map_t *map;
	uint32_t me;
	int ret, rc;

	ret = loco_init(NULL, &m);
	if (ret)
		return fail("loco_init", ret);
	me = loco_manager_node_id(m);
	ret = loco_channel_create(m, NULL, "example-map", 3, &ch);
	if (ret)
		return fail("loco_channel_create", ret);
	loco_map_cfg_default(&cfg, nodes, 3);
	cfg.replicas = 2;
	cfg.capacity = count + 64 > 4096 ? (uint32_t)((count + 64) * 2 + 3) / 4 * 4 : 4096;
	ret = loco_map_create(ch, "kv", &cfg, &map);
	if (ret == 0)
		ret = loco_channel_join(ch, 20 * SEC);
	if (ret == 0)
		ret = loco_map_sync(map, 20 * SEC);
	if (ret)
		return fail("create, join, sync", ret);
	rc = me == 1 ? writer(map, count) : reader(map, me, count);
	loco_map_stats(map, &st);
	printf("node %u: %llu gets (%llu groups read from other nodes), %llu writes; "
	       "holds %llu entries (%llu owned, %llu as a replica)\n",
	       me, (unsigned long long)st.gets, (unsigned long long)st.get_reads,
	       (unsigned long long)st.writes, (unsigned long long)st.used,
	       (unsigned long long)st.owned, (unsigned long long)st.replicas);
	sleep(1); /* the others' last reads of what this node owns */
	loco_map_destroy(map);
	loco_channel_destroy(ch);
	loco_fini(m);
	return rc;
}
