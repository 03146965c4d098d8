/* SPDX-License-Identifier: BSD-2-Clause */
/* * map-linear.c -- the map is linearizable per key: 4 nodes, 2 client
 * threads each, run concurrent GET/PUT/CAS/DEL on 3 keys; every operation's
 * invocation and response time (CLOCK_MONOTONIC: one clock for every
 * process of the host) and result is recorded, and node 1 checks each
 * key's history with the WGL checker (map-check.h; map-checker shows it
 * fails on non-linearizable histories).
 *
 * loco-run -n 4. Members {1, 2, 3, 4} hold keys, 2 replicas (the writes
 * are forwarded). Each thread makes OPS operations: 40% GET, 30% PUT of
 * a value unique in the run (node, thread, sequence), 10% CAS of such a
 * value expecting the version this thread last saw of the key, 20% DEL.
 * GETs, PUTs and CASes record versions, which the checker checks too (a
 * version grows by one per write, a delete included). Any error other
 * than -ENOENT (a GET or DEL of an absent key) or -ECANCELED (a CAS of
 * another version) fails the test. Whether a concurrent CAS finds the
 * version it expects is up to the timing (with LOCO_TEST_SCALE=10 a run
 * makes a dozen CASes, most of them fail), so once every thread is done
 * (a barrier) node 1 alone GETs each key and CASes it with the version
 * it read: with no writer left each of these CASes must succeed, and
 * both operations go into node 1's records. Each node writes its records
 * to a file; node 1 reads them all, checks every key and prints per key
 * the operation counts, the largest number of operations in flight at
 * once and the states the search explored.
 *
 * "wide" (argument): cfg.nodes lists 252 key holders that never come
 * before {1, 2, 3, 4}: 256 holders, the live ones at indexes 252 .. 255
 * (the last word of the map's sets), and 252 log slices each.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/map.h>

#include "map-check.h"
#include "scenario.h"

#define TMO     (10 * SC_NS)
#define THREADS 2
#define KEYS    3
#define NODES   4
#define BOX_PID 1

struct rec {
	int64_t inv, resp;
	uint32_t key, kind;
	uint64_t val, ver;
};

struct client {
	loco_map_t *map;
	uint32_t me, th, ops;
	struct rec *recs;
	pthread_t t;
};

static const uint32_t members[] = {1, 2, 3, 4};

/* rec_get -- GET @key into record @r (kind, times, value and version; absent: 0, 0). */
static void rec_get(loco_map_t *map, const char *key, struct rec *r)
{
	uint64_t v = 0;
	size_t len = 0;
	int ret;

	r->inv = sc_now_ns();
	ret = loco_map_get(map, key, strlen(key), &v, sizeof(v), &len, &r->ver, TMO);
	r->resp = sc_now_ns();
	r->kind = MC_GET;
	if (ret == -ENOENT)
		v = r->ver = 0;
	else if (ret)
		SC_FAIL("get %s: %s", key, loco_strerror(ret));
	else
		SC_ASSERT_EQ(len, sizeof(v));
	r->val = v;
}

/*
 * rec_cas -- CAS @key from version @ver (0: absent) to @v into record @r;
 * 0 (the new version in *@nv: @ver + 1 unless @ver is 0) or -ECANCELED
 * (any other error fails).
 */
static int rec_cas(loco_map_t *map, const char *key, uint64_t ver, uint64_t v, struct rec *r,
                   uint64_t *nv)
{
	int ret;

	r->ver = ver; /* the expected version */
	r->inv = sc_now_ns();
	ret = loco_map_cas(map, key, strlen(key), ver, &v, sizeof(v), nv, TMO);
	r->resp = sc_now_ns();
	if (ret && ret != -ECANCELED)
		SC_FAIL("cas %s: %s", key, loco_strerror(ret));
	r->kind = ret ? MC_CAS_FAIL : MC_CAS;
	r->val = v;
	if (ret == 0 && ver != 0)
		SC_ASSERT_EQ(*nv, ver + 1);
	return ret;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	unsigned seed = c->me * 7919u + c->th;
	uint64_t seen[KEYS] = {
	    0}; /* the last version this thread saw of each key: cas expects it */
	for (uint32_t i = 0; i < c->ops; i++) {
		struct rec *r = &c->recs[i];
		char key[16];
		uint64_t v = 0;
		int p = rand_r(&seed) % 10, ret;

		r->key = (uint32_t)(rand_r(&seed) % KEYS);
		snprintf(key, sizeof(key), "lin-%u", r->key);
		if (p < 4) {
			rec_get(c->map, key, r);
			seen[r->key] = r->ver;
		} else if (p < 7) {
			v = (uint64_t)c->me << 40 | (uint64_t)c->th << 32 | (i + 1);
			r->inv = sc_now_ns();
			ret = loco_map_put(c->map, key, strlen(key), &v, sizeof(v), &r->ver, TMO);
			r->resp = sc_now_ns();
			if (ret)
				SC_FAIL("put %s: %s", key, loco_strerror(ret));
			r->kind = MC_PUT;
			r->val = v;
			seen[r->key] = r->ver;
		} else if (p < 8) {
			uint64_t nv = 0;

			v = (uint64_t)c->me << 40 | (uint64_t)c->th << 32 | (i + 1);
			if (rec_cas(c->map, key, seen[r->key], v, r, &nv) == 0)
				seen[r->key] = nv;
		} else {
			r->inv = sc_now_ns();
			ret = loco_map_del(c->map, key, strlen(key), TMO);
			r->resp = sc_now_ns();
			if (ret && ret != -ENOENT)
				SC_FAIL("del %s: %s", key, loco_strerror(ret));
			r->kind = ret ? MC_DEL_ENOENT : MC_DEL;
		}
	}
	return NULL;
}

/*
 * final_cas -- node 1, no writer left: GET each key, then CAS it expecting
 * the version read (0: absent), recorded in @r[0 .. 2 * KEYS); the value
 * written is unique in the run (thread number THREADS, which no client has).
 */
static void final_cas(loco_map_t *map, uint32_t me, struct rec *r)
{
	for (uint32_t k = 0; k < KEYS; k++, r += 2) {
		char key[16];
		uint64_t nv = 0;
		int ret;

		snprintf(key, sizeof(key), "lin-%u", k);
		r[0].key = r[1].key = k;
		rec_get(map, key, &r[0]);
		ret = rec_cas(map, key, r[0].ver,
		              (uint64_t)me << 40 | (uint64_t)THREADS << 32 | (k + 1), &r[1], &nv);
		if (ret)
			SC_FAIL("final cas %s expecting version %llu: %s", key,
			        (unsigned long long)r[0].ver, loco_strerror(ret));
	}
}

static void path_of(char *buf, size_t len, uint64_t pid, uint32_t node)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/loco-map-linear.%llu.%u", dir != NULL ? dir : "/tmp",
	         (unsigned long long)pid, node);
}

/*
 * check -- node 1: every node's records (@total each, node 1's and its
 * final GETs and CASes), per key, through the checker
 */
static void check(uint64_t pid, uint32_t total)
{
	struct rec *all = calloc((size_t)NODES * total + 2 * KEYS, sizeof(*all));
	size_t n = 0, cas_ok = 0;

	SC_ASSERT(all != NULL);
	for (uint32_t node = 1; node <= NODES; node++) {
		char path[256];
		size_t want = total + (node == 1 ? 2 * KEYS : 0);
		ssize_t got;
		int fd;

		path_of(path, sizeof(path), pid, node);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			SC_FAIL("open %s", path);
		got = read(fd, all + n, want * sizeof(*all));
		close(fd);
		unlink(path);
		SC_ASSERT_EQ(got, (ssize_t)(want * sizeof(*all)));
		n += want;
	}
	for (uint32_t k = 0; k < KEYS; k++) {
		struct mc_op *ops = calloc(n, sizeof(*ops));
		size_t m = 0, explored = 0, cnt[16] = {0}, cas_tried = 0;
		int conc = 0, res;

		for (size_t i = 0; i < n; i++) {
			if (all[i].key != k)
				continue;
			ops[m++] = (struct mc_op){all[i].inv, all[i].resp, (int)all[i].kind,
			                          all[i].val, all[i].ver};
			cnt[all[i].kind]++;
			if (all[i].kind == MC_GET && all[i].val)
				cnt[0]++;
			/* the CASes made while the clients ran (not node 1's final ones) */
			if ((all[i].kind == MC_CAS || all[i].kind == MC_CAS_FAIL) &&
			    (all[i].val >> 32 & 0xff) < THREADS) {
				cas_tried++;
				cas_ok += all[i].kind == MC_CAS;
			}
		}
		/* the largest number of operations of this key in flight at once */
		for (size_t i = 0; i < m; i++) {
			int c = 0;

			for (size_t j = 0; j < m; j++)
				c += ops[j].inv <= ops[i].inv && ops[j].resp >= ops[i].inv;
			if (c > conc)
				conc = c;
		}
		res = mc_check(ops, m, &explored);
		sc_log("key %u: %zu ops (%zu get, %zu found a value; %zu put; %zu cas, %zu failed; "
		       "%zu del, %zu ENOENT), up to %d in flight at once, %zu states explored: %s",
		       k, m, cnt[MC_GET], cnt[0], cnt[MC_PUT], cnt[MC_CAS] + cnt[MC_CAS_FAIL],
		       cnt[MC_CAS_FAIL], cnt[MC_DEL] + cnt[MC_DEL_ENOENT], cnt[MC_DEL_ENOENT], conc,
		       explored,
		       res == MC_OK        ? "linearizable"
		       : res == MC_TOO_BIG ? "TOO BIG"
		                           : "NOT LINEARIZABLE");
		if (res != MC_OK) {
			char dump[300];
			FILE *f;

			snprintf(
			    dump, sizeof(dump), "%s.key%u",
			    getenv("MAP_LINEAR_DUMP") ? getenv("MAP_LINEAR_DUMP") : "/dev/null", k);
			f = fopen(dump, "w");
			for (size_t i = 0; f != NULL && i < m; i++)
				fprintf(f, "%lld %lld %d %llx %llu\n", (long long)ops[i].inv,
				        (long long)ops[i].resp, ops[i].kind,
				        (unsigned long long)ops[i].val,
				        (unsigned long long)ops[i].ver);
			if (f != NULL)
				fclose(f);
		}
		SC_ASSERT_EQ(res, MC_OK);
		/* every kind was tried concurrently on every key, and a CAS
		 * succeeded on every key: node 1's final one at least (whether a
		 * concurrent CAS finds the version it expects is up to the
		 * timing, and a run with LOCO_TEST_SCALE=10 makes a dozen) */
		SC_ASSERT(cnt[0] > 0 && cnt[MC_PUT] > 0 && cnt[MC_DEL] > 0 && cas_tried > 0 &&
		          cnt[MC_CAS] > 0);
		SC_ASSERT(conc >= 2);
		free(ops);
	}
	sc_log("%zu concurrent CASes succeeded, and node 1's %u final ones", cas_ok, KEYS);
	free(all);
}

int main(int argc, char **argv)
{
	struct client cl[THREADS];
	struct rec fin[2 * KEYS] = {0}; /* node 1's final GETs and CASes */
	loco_map_stats_t st;
	loco_map_cfg_t cfg;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct sc_sync sync;
	uint32_t me, ops = sc_scaled(200);
	uint64_t pid;
	char path[256];
	int fd;

	sc_init("map-linear", argc, argv, 200);
	if (sc_nodes() != NODES)
		SC_FAIL("run with loco-run -n %d (LOCO_NODES=%u)", NODES, sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, members, NODES), SC_WAIT_MS, "members {1, 2, 3, 4}");
	sc_sync_open(&sync, m, NODES);
	if (me == 1)
		sc_sync_put(&sync, BOX_PID, (uint64_t)getpid());
	sc_sync_wait(&sync, "started", SC_WAIT_MS);
	pid = sc_sync_get(&sync, BOX_PID);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "ml", NODES, &ch));
	if (argc > 1 && strcmp(argv[1], "wide") == 0) {
		static uint32_t wide[LOCO_MAP_NODES_MAX];

		for (uint32_t i = 0; i < LOCO_MAP_NODES_MAX - NODES; i++)
			wide[i] = 1000 + i;
		memcpy(wide + LOCO_MAP_NODES_MAX - NODES, members, sizeof(members));
		loco_map_cfg_default(&cfg, wide, LOCO_MAP_NODES_MAX);
	} else {
		loco_map_cfg_default(&cfg, members, NODES);
	}
	cfg.replicas = 2;
	cfg.capacity = 64;
	SC_ASSERT_OK(loco_map_create(ch, "lin", &cfg, &map));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	sc_sync_wait(&sync, "map", SC_WAIT_MS);

	for (int t = 0; t < THREADS; t++) {
		cl[t] = (struct client){.map = map, .me = me, .th = (uint32_t)t, .ops = ops};
		cl[t].recs = calloc(ops, sizeof(struct rec));
		SC_ASSERT(cl[t].recs != NULL);
		SC_ASSERT_EQ(pthread_create(&cl[t].t, NULL, client_main, &cl[t]), 0);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(cl[t].t, NULL);
	/* no node writes after this barrier: node 1's final CASes must succeed */
	sc_sync_wait(&sync, "clients done", 60000);
	if (me == 1)
		final_cas(map, me, fin);
	path_of(path, sizeof(path), pid, me);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	SC_ASSERT(fd >= 0);
	for (int t = 0; t < THREADS; t++) {
		SC_ASSERT_EQ(write(fd, cl[t].recs, ops * sizeof(struct rec)),
		             (ssize_t)(ops * sizeof(struct rec)));
		free(cl[t].recs);
	}
	if (me == 1)
		SC_ASSERT_EQ(write(fd, fin, sizeof(fin)), (ssize_t)sizeof(fin));
	close(fd);
	loco_map_stats(map, &st);
	sc_log("%u ops by %d threads; gets %llu (%llu remote reads, %llu retries), writes %llu "
	       "(%llu redirected), applied here %llu",
	       THREADS * ops, THREADS, (unsigned long long)st.gets,
	       (unsigned long long)st.get_reads, (unsigned long long)st.get_retries,
	       (unsigned long long)st.writes, (unsigned long long)st.redirects,
	       (unsigned long long)st.applied);
	sc_sync_wait(&sync, "recorded", 60000);
	if (me == 1)
		check(pid, THREADS * ops);
	sc_sync_wait(&sync, "done", 60000);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
