/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-move.c -- keys move while clients run: a node joins a map in use
 * (cfg.join) and takes its share, and a node leaves gracefully
 * (loco_map_leave) and hands its keys over; every operation succeeds,
 * and every key's history stays linearizable across both moves.
 *
 * loco-run -n 3. Node 1 spawns node 11 (role "leaver") at the start;
 * members {1, 2, 3, 10, 11} hold keys, 2 replicas (argument "1": one
 * replica, so that the moves alone carry the keys). Nodes 1, 2 and 3 run
 * 2 client threads each on KEYS keys: 40% GET, 40% PUT of values unique
 * in the run, 20% DEL, every operation recorded. When node 1's threads
 * made PRE operations it spawns node 10 (role "joiner"), which makes the
 * map with cfg.join = 1 and reports once loco_map_sync() says it serves.
 * When they made MID operations and node 10 serves, node 1 tells node 11
 * (SIGUSR1) to leave: loco_map_leave(), destroy, loco_fini(), exit 0.
 * Past MID, until the leave is done, a thread's operations slow down the
 * longer it waits for a move (5 ms apart at first, then 1/32 of the wait
 * so far, the clock starting again when node 10 serves), so that they
 * keep running through both moves however long node 10 takes to start;
 * and it never uses the last POST of its OPS_MAX records before the
 * leave (it waits for the leave instead), so that the records do not run
 * out however slow the start-up is. Each thread goes on until it made
 * POST operations after the leave. Any error fails the test. Node 1 then
 * checks that node 10 owns some keys and node 11 none, and checks each
 * key's history with the WGL checker (map-check.h), versions included.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/map.h>

#include "map-check.h"
#include "scenario.h"

#define TMO      (10 * SC_NS)
#define THREADS  2
#define KEYS     16
#define JOINER   10
#define LEAVER   11
#define PRE      100
#define MID      250
#define POST     100
#define OPS_MAX  1000
#define BOX_PID  1
#define BOX_LEFT 2 /* the time node 11 finished leaving */
#define BOX_JOIN 3 /* the time node 10 served */

struct rec {
	int64_t inv, resp;
	uint32_t key, kind;
	uint64_t val, ver; /* ver: as the GET or PUT returned it (0: unknown) */
};

struct client {
	loco_map_t *map;
	struct sc_sync *sync;
	uint32_t me, th, n, after;
	struct rec recs[OPS_MAX];
	pthread_t t;
	uint32_t done; /* atomic: operations made */
};

static const uint32_t members[] = {1, 2, 3, JOINER, LEAVER};
static uint32_t replicas = 2;

static loco_map_t *make_map(loco_channel_t **ch, loco_manager_t *m, int join)
{
	loco_map_cfg_t cfg;
	loco_map_t *map;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "mm", 4, ch));
	if (getenv("MAP_MOVE_WIDE") != NULL) {
		/* 256 key holders listed, the 5 real ones spread over the sets' 4 words */
		static const uint32_t at[5] = {10, 70, 130, 200, 255};
		static uint32_t wide[LOCO_MAP_NODES_MAX];

		for (uint32_t i = 0; i < LOCO_MAP_NODES_MAX; i++)
			wide[i] = 1000 + i;
		for (int i = 0; i < 5; i++)
			wide[at[i]] = members[i];
		loco_map_cfg_default(&cfg, wide, LOCO_MAP_NODES_MAX);
		sc_log("%u key holders listed, 5 of them real", LOCO_MAP_NODES_MAX);
	} else {
		loco_map_cfg_default(&cfg, members, 5);
	}
	cfg.replicas = replicas;
	cfg.capacity = 256;
	cfg.join = join;
	SC_ASSERT_OK(loco_map_create(*ch, "move", &cfg, &map));
	return map;
}

static void key_of(char *buf, size_t len, uint32_t k)
{
	snprintf(buf, len, "move-%u", k);
}

static void one_op(struct client *c, uint32_t k, int p, uint32_t seq)
{
	struct rec *r = &c->recs[c->n++];
	char key[16];
	uint64_t v = 0;
	size_t len = 0;
	int ret;

	key_of(key, sizeof(key), k);
	r->key = k;
	if (p < 4) {
		r->inv = sc_now_ns();
		r->ver = 0;
		ret = loco_map_get(c->map, key, strlen(key), &v, sizeof(v), &len, &r->ver, TMO);
		r->resp = sc_now_ns();
		r->kind = MC_GET;
		if (ret == -ENOENT)
			v = 0;
		else if (ret)
			SC_FAIL("thread %u: get %s: %s", c->th, key, loco_strerror(ret));
		r->val = v;
	} else if (p < 8) {
		v = (uint64_t)c->me << 40 | (uint64_t)c->th << 32 | seq;
		r->inv = sc_now_ns();
		r->ver = 0;
		ret = loco_map_put(c->map, key, strlen(key), &v, sizeof(v), &r->ver, TMO);
		r->resp = sc_now_ns();
		if (ret)
			SC_FAIL("thread %u: put %s: %s", c->th, key, loco_strerror(ret));
		r->kind = MC_PUT;
		r->val = v;
	} else {
		r->inv = sc_now_ns();
		ret = loco_map_del(c->map, key, strlen(key), TMO);
		r->resp = sc_now_ns();
		if (ret && ret != -ENOENT)
			SC_FAIL("thread %u: del %s: %s", c->th, key, loco_strerror(ret));
		r->kind = ret ? MC_DEL_ENOENT : MC_DEL;
	}
}

/*
 * pace -- past MID, before the leave is done: sleep max(5 ms, 1/32 of the
 * time this wait lasted, from MID or from when node 10 served), so that the
 * operations go on through either move however long it takes, at a rate
 * that falls with its length; once only POST records are left, wait for
 * the leave without operations. Returns BOX_LEFT as now seen.
 */
static uint64_t pace(struct client *c, int64_t dl, int64_t *since, uint64_t *joined)
{
	uint64_t t_join = sc_sync_get(c->sync, BOX_JOIN);
	int64_t waited;

	if (*since == 0 || t_join != *joined) {
		*since = sc_now_ms();
		*joined = t_join;
	}
	if (c->n >= OPS_MAX - POST) {
		SC_WAIT_UNTIL(sc_sync_get(c->sync, BOX_LEFT) != 0, dl - sc_now_ms(),
		              "the leave, with only the records for after it left");
	} else {
		waited = sc_now_ms() - *since;
		sc_sleep_ms(waited / 32 > 5 ? (unsigned)(waited / 32) : 5);
	}
	return sc_sync_get(c->sync, BOX_LEFT);
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	unsigned seed = c->me * 7919u + c->th;
	int64_t dl = sc_now_ms() + 90000, since = 0;
	uint64_t joined = 0;

	for (uint32_t i = 1; c->n < OPS_MAX; i++) {
		uint64_t t_left = sc_sync_get(c->sync, BOX_LEFT);
		int64_t inv;

		if (sc_now_ms() > dl)
			SC_FAIL("thread %u: no %u operations after the leave in 90 s", c->th, POST);
		if (t_left == 0 && i > MID)
			t_left = pace(c, dl, &since, &joined); /* a move is under way */
		inv = sc_now_ns();
		one_op(c, (uint32_t)(rand_r(&seed) % KEYS), rand_r(&seed) % 10, i);
		if (t_left != 0 && inv > (int64_t)t_left && ++c->after >= POST)
			break;
		__atomic_store_n(&c->done, i, __ATOMIC_RELEASE);
	}
	if (c->after < POST)
		SC_FAIL("thread %u: %u ops, only %u after the leave", c->th, c->n, c->after);
	return NULL;
}

static noreturn void joiner_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_map_t *map = make_map(&ch, m, 1);
	int64_t t0 = sc_now_ns();

	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 30 * SC_NS));
	sc_log("node %u serves, %.1f ms after it made the map", JOINER,
	       (double)(sc_now_ns() - t0) / 1e6);
	sc_victim_wait(m); /* killed at the end, once the histories are recorded */
}

static noreturn void leaver_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_map_t *map = make_map(&ch, m, 0);
	sigset_t set;
	int sig = 0;
	int64_t t0;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	sc_report("ready");
	SC_ASSERT_EQ(sigwait(&set, &sig), 0);
	t0 = sc_now_ns();
	SC_ASSERT_OK(loco_map_leave(map, 20 * SC_NS));
	sc_log("node %u handed its keys over in %.1f ms; leaving", LEAVER,
	       (double)(sc_now_ns() - t0) / 1e6);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	exit(SC_EXIT_PASS);
}

static void path_of(char *buf, size_t len, uint64_t pid, uint32_t node)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/loco-map-move.%llu.%u", dir != NULL ? dir : "/tmp",
	         (unsigned long long)pid, node);
}

static void check(uint64_t pid)
{
	size_t cap = 3 * THREADS * OPS_MAX, n = 0;
	struct rec *all = calloc(cap, sizeof(*all));

	SC_ASSERT(all != NULL);
	for (uint32_t node = 1; node <= 3; node++) {
		char path[256];
		ssize_t got;
		int fd;

		path_of(path, sizeof(path), pid, node);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			SC_FAIL("open %s", path);
		got = read(fd, all + n, (cap - n) * sizeof(*all));
		close(fd);
		unlink(path);
		SC_ASSERT(got >= 0 && got % (ssize_t)sizeof(*all) == 0);
		n += (size_t)got / sizeof(*all);
	}
	for (uint32_t k = 0; k < KEYS; k++) {
		struct mc_op *ops = calloc(n, sizeof(*ops));
		size_t m = 0, explored = 0;
		int res;

		for (size_t i = 0; i < n; i++)
			if (all[i].key == k)
				ops[m++] = (struct mc_op){all[i].inv, all[i].resp, (int)all[i].kind,
				                          all[i].val, all[i].ver};
		res = mc_check(ops, m, &explored);
		if (res != MC_OK)
			sc_log("key %u: %zu ops, %zu states explored: %s", k, m, explored,
			       res == MC_TOO_BIG ? "TOO BIG" : "NOT LINEARIZABLE");
		SC_ASSERT_EQ(res, MC_OK);
		free(ops);
	}
	sc_log("%zu operations: every key's history is linearizable across the join and the leave",
	       n);
	free(all);
}

static unsigned owned_by(loco_map_t *map, uint32_t node)
{
	unsigned n = 0;

	for (uint32_t k = 0; k < KEYS; k++) {
		char key[16];

		key_of(key, sizeof(key), k);
		n += loco_map_owner(map, key, strlen(key)) == node;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	static struct client cl[THREADS];
	loco_map_stats_t st;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct sc_sync sync;
	uint32_t me;
	uint64_t pid;
	pid_t lpid = 0, jpid = 0;
	char line[64], path[256];
	int lrep = -1, jrep = -1, fd;
	sc_init("map-move", argc, argv, 200);
	if (argc > 1 && strcmp(argv[1], "joiner") && strcmp(argv[1], "leaver")) {
		replicas = (uint32_t)atoi(argv[1]);
		setenv("MAP_MOVE_REPLICAS", argv[1], 1); /* for the nodes spawned */
	} else if (getenv("MAP_MOVE_REPLICAS") != NULL) {
		replicas = (uint32_t)atoi(getenv("MAP_MOVE_REPLICAS"));
	}
	if (argc > 1 && strcmp(argv[1], "joiner") == 0)
		joiner_main();
	if (argc > 1 && strcmp(argv[1], "leaver") == 0)
		leaver_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	if (me == 1)
		sc_sync_put(&sync, BOX_PID, (uint64_t)getpid());
	sc_sync_wait(&sync, "started", SC_WAIT_MS);
	pid = sc_sync_get(&sync, BOX_PID);

	map = make_map(&ch, m, 0);
	if (me == 1)
		lpid = sc_spawn_node(m, "leaver", LEAVER, &lrep);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	if (me == 1) {
		sc_read_line(lrep, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
	}
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	sc_log("%u replicas; node %u owns %u of the %u keys", replicas, LEAVER,
	       owned_by(map, LEAVER), KEYS);

	for (int t = 0; t < THREADS; t++) {
		cl[t].map = map;
		cl[t].sync = &sync;
		cl[t].me = me;
		cl[t].th = (uint32_t)t;
		SC_ASSERT_EQ(pthread_create(&cl[t].t, NULL, client_main, &cl[t]), 0);
	}
	if (me == 1) {
		int64_t t;

		SC_WAIT_UNTIL(__atomic_load_n(&cl[0].done, __ATOMIC_ACQUIRE) >= PRE &&
		                  __atomic_load_n(&cl[1].done, __ATOMIC_ACQUIRE) >= PRE,
		              60000, "the operations before the join");
		t = sc_now_ns();
		jpid = sc_spawn_node(m, "joiner", JOINER, &jrep);
		sc_read_line(jrep, line, sizeof(line), 40000);
		SC_ASSERT(strcmp(line, "ready") == 0);
		sc_sync_put(&sync, BOX_JOIN, (uint64_t)sc_now_ns());
		sc_log("node %u joined and serves %.1f ms after its spawn; it owns %u keys here",
		       JOINER, (double)(sc_now_ns() - t) / 1e6, owned_by(map, JOINER));
		SC_WAIT_UNTIL(__atomic_load_n(&cl[0].done, __ATOMIC_ACQUIRE) >= MID &&
		                  __atomic_load_n(&cl[1].done, __ATOMIC_ACQUIRE) >= MID,
		              60000, "the operations before the leave");
		t = sc_now_ns();
		SC_ASSERT_EQ(kill(lpid, SIGUSR1), 0);
		SC_ASSERT_EQ(sc_reap(lpid, 30000), 0);
		sc_sync_put(&sync, BOX_LEFT, (uint64_t)sc_now_ns());
		sc_log("node %u left %.1f ms after it was told", LEAVER,
		       (double)(sc_now_ns() - t) / 1e6);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(cl[t].t, NULL);
	sc_log("threads: %u and %u ops, %u and %u after the leave", cl[0].n, cl[1].n, cl[0].after,
	       cl[1].after);
	SC_WAIT_UNTIL(!sc_is_member(m, LEAVER), SC_WAIT_MS, "node 11 out of the view");
	if (me == 1) {
		unsigned j = owned_by(map, JOINER), l = owned_by(map, LEAVER);

		sc_log("after the moves: node %u owns %u keys, node %u %u", JOINER, j, LEAVER, l);
		SC_ASSERT(j > 0);
		SC_ASSERT_EQ(l, 0);
	}
	path_of(path, sizeof(path), pid, me);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	SC_ASSERT(fd >= 0);
	for (int t = 0; t < THREADS; t++)
		SC_ASSERT_EQ(write(fd, cl[t].recs, cl[t].n * sizeof(struct rec)),
		             (ssize_t)(cl[t].n * sizeof(struct rec)));
	close(fd);
	loco_map_stats(map, &st);
	sc_log("gets %llu (%llu remote reads, %llu retries), writes %llu (%llu retried), applied "
	       "here %llu, copied %llu",
	       (unsigned long long)st.gets, (unsigned long long)st.get_reads,
	       (unsigned long long)st.get_retries, (unsigned long long)st.writes,
	       (unsigned long long)st.redirects, (unsigned long long)st.applied,
	       (unsigned long long)st.resync);
	sc_sync_wait(&sync, "recorded", 60000);
	if (me == 1) {
		check(pid);
		SC_ASSERT_EQ(sc_kill(jpid), 128 + 9);
		close(jrep);
		close(lrep);
	}
	sc_sync_wait(&sync, "done", 60000);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
