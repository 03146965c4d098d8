/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-kill.c -- with 2 replicas, SIGKILL of a key-holding node loses no
 * acknowledged write, GETs and PUTs go on after the view change, the
 * history stays linearizable per key across the kill, and the replica
 * count is restored (each key again on 2 live nodes).
 *
 * loco-run -n 3. Node 1 spawns node 9 (this program, role "victim");
 * members {1, 2, 3, 9} hold keys, 2 replicas, 16 keys. Nodes 1, 2 and 3
 * run 2 client threads each: 50% GET, 50% PUT of values unique in the
 * run, every operation recorded with its invocation and response time.
 * Once node 1's threads made PRE operations it SIGKILLs node 9 and
 * publishes the time; each thread goes on until it made POST successful
 * operations invoked after the kill. A PUT that fails after the kill
 * (-ECONNRESET: its owner died with it; -ETIMEDOUT) is recorded as
 * unknown (it may have happened or not); any failure before the kill,
 * or of another kind, fails the test. Then the nodes wait (bounded) for
 * the census (loco_map_stats) to add up to 24 owned entries and 24
 * replica entries over the three survivors (8 more "cold" keys, written
 * once by node 1 before the clients start, reach their new replica only
 * through the owners' copies after the view change: without them the
 * census stays short), every node reads every key
 * once more (recorded too), and node 1 checks each key's history with
 * the WGL checker (map-check.h), with the versions GETs and PUTs
 * returned: an acknowledged write that was lost shows as a read of an
 * older value after it, and a new owner that did not go on from the
 * versions the old one gave shows as a version out of sequence; the
 * checker refuses both. It also checks that node 9 owned some keys before the kill.
 *
 * Then node 9 comes back: node 1 starts it again with its id (a new
 * incarnation, role "back"), which makes the map with cfg.join = 1 and
 * waits until it serves. It must own and hold keys again (the owners
 * copied them to it), and every node, node 9 included, reads every key's
 * value as the survivors last read it (no write since).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
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
#define COLD     8 /* keys 16 .. 23: written once by node 1 before the clients start */
#define VICTIM   9
#define PRE      150
#define POST     100
#define OPS_MAX  800
#define BOX_PID  1
#define BOX_KILL 2 /* node 1's kill time */

struct rec {
	int64_t inv, resp;
	uint32_t key, kind;
	uint64_t val, ver; /* ver: as the GET or PUT returned it (0: unknown) */
};

struct client {
	loco_map_t *map;
	struct sc_sync *sync;
	uint32_t me, th, n, after, errors;
	struct rec recs[OPS_MAX + 2 * (KEYS + COLD)];
	pthread_t t;
	uint32_t done; /* atomic: operations made */
};

static const uint32_t members[] = {1, 2, 3, VICTIM};

static loco_map_t *make_map(loco_channel_t **ch, loco_manager_t *m, int join)
{
	loco_map_cfg_t cfg;
	loco_map_t *map;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "mk", 4, ch));
	loco_map_cfg_default(&cfg, members, 4);
	cfg.join = join;
	cfg.replicas = 2;
	cfg.capacity = 256;
	SC_ASSERT_OK(loco_map_create(*ch, "kill", &cfg, &map));
	return map;
}

static void key_of(char *buf, size_t len, uint32_t k)
{
	snprintf(buf, len, "kill-%u", k);
}

/* one_op -- one GET (@get) or PUT of key @k, recorded; 0 or the error */
static int one_op(struct client *c, uint32_t k, int get, uint32_t seq)
{
	struct rec *r = &c->recs[c->n];
	char key[16];
	uint64_t v = 0;
	size_t len = 0;
	int ret;

	key_of(key, sizeof(key), k);
	r->key = k;
	if (get) {
		r->inv = sc_now_ns();
		r->ver = 0;
		ret = loco_map_get(c->map, key, strlen(key), &v, sizeof(v), &len, &r->ver, TMO);
		r->resp = sc_now_ns();
		r->kind = MC_GET;
		if (ret == -ENOENT)
			ret = 0;
		else if (ret == 0)
			SC_ASSERT_EQ(len, sizeof(v));
		r->val = v;
		if (ret == 0)
			c->n++;
		return ret;
	}
	v = (uint64_t)c->me << 40 | (uint64_t)c->th << 32 | seq;
	r->inv = sc_now_ns();
	r->ver = 0;
	ret = loco_map_put(c->map, key, strlen(key), &v, sizeof(v), &r->ver, TMO);
	r->resp = sc_now_ns();
	r->kind = ret ? MC_PUT_MAYBE : MC_PUT;
	r->val = v;
	c->n++;
	return ret;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	unsigned seed = c->me * 7919u + c->th;
	int64_t dl = sc_now_ms() + 60000;

	for (uint32_t i = 1; c->n < OPS_MAX; i++) {
		uint64_t t_kill = sc_sync_get(c->sync, BOX_KILL);
		int64_t inv = sc_now_ns();
		int ret;

		if (sc_now_ms() > dl)
			SC_FAIL("thread %u: no %u operations after the kill in 60 s", c->th, POST);
		if (t_kill == 0 && i > PRE + 50)
			sc_sleep_ms(5); /* the kill is near: do not run out of records */
		ret = one_op(c, (uint32_t)(rand_r(&seed) % KEYS), rand_r(&seed) % 2, i);
		if (ret) {
			if (t_kill == 0 && sc_sync_get(c->sync, BOX_KILL) == 0)
				SC_FAIL("thread %u: %s before the kill", c->th, loco_strerror(ret));
			if (ret != -ECONNRESET && ret != -ETIMEDOUT)
				SC_FAIL("thread %u: %s", c->th, loco_strerror(ret));
			c->errors++;
			sc_sleep_ms(1);
		} else if (t_kill != 0 && inv > (int64_t)t_kill && ++c->after >= POST) {
			break;
		}
		__atomic_store_n(&c->done, i, __ATOMIC_RELEASE);
	}
	if (c->after < POST)
		SC_FAIL("thread %u: %u ops, only %u after the kill", c->th, c->n, c->after);
	return NULL;
}

static noreturn void victim_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_map_t *map = make_map(&ch, m, 0);

	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	sc_victim_wait(m);
}

/* sum_all -- read every key (each must be there): a sum of the values, each weighted by its key */
static uint64_t sum_all(loco_map_t *map)
{
	uint64_t sum = 0;

	for (uint32_t k = 0; k < KEYS + COLD; k++) {
		char key[16];
		uint64_t v = 0;
		size_t len = 0;

		key_of(key, sizeof(key), k);
		SC_ASSERT_OK(loco_map_get(map, key, strlen(key), &v, sizeof(v), &len, NULL, TMO));
		SC_ASSERT_EQ(len, sizeof(v));
		sum += v * (2 * k + 1);
	}
	return sum;
}

/* back_main -- node 9 again, a new incarnation: joins the map in use, serves, reads it all */
static noreturn void back_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_map_t *map = make_map(&ch, m, 1);
	loco_map_stats_t st;
	int64_t dl;

	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 30 * SC_NS));
	dl = sc_now_ms() + 20000;
	do {
		loco_map_stats(map, &st);
		if (st.owned > 0 && st.replicas > 0)
			break;
		sc_sleep_ms(50);
	} while (sc_now_ms() < dl);
	sc_log("node 9 is back (incarnation %llx): owns %llu, holds %llu replica entries",
	       (unsigned long long)loco_manager_incarnation(m), (unsigned long long)st.owned,
	       (unsigned long long)st.replicas);
	SC_ASSERT(st.owned > 0 && st.replicas > 0);
	sc_report("sum %llx", (unsigned long long)sum_all(map));
	sc_victim_wait(m);
}

static void path_of(char *buf, size_t len, uint64_t pid, uint32_t node)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/loco-map-kill.%llu.%u", dir != NULL ? dir : "/tmp",
	         (unsigned long long)pid, node);
}

static void check(uint64_t pid, int64_t t_kill)
{
	size_t cap = 3 * THREADS * (OPS_MAX + 2 * (KEYS + COLD)), n = 0;
	struct rec *all = calloc(cap, sizeof(*all));
	size_t acked = 0, maybe = 0, after = 0;

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
	for (size_t i = 0; i < n; i++) {
		acked += all[i].kind == MC_PUT;
		maybe += all[i].kind == MC_PUT_MAYBE;
		after += all[i].inv > t_kill;
	}
	sc_log("%zu operations recorded, %zu invoked after the kill; %zu acknowledged puts, %zu "
	       "with an unknown outcome",
	       n, after, acked, maybe);
	for (uint32_t k = 0; k < KEYS + COLD; k++) {
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
	sc_log("every key's history is linearizable across the kill: no acknowledged write lost");
	free(all);
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
	uint32_t me, victim_owns = 0;
	uint64_t pid;
	int64_t t_kill;
	pid_t vpid = 0;
	char line[64], path[256];
	int report = -1, fd, ok = 0;

	sc_init("map-kill", argc, argv, 150);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	if (argc > 1 && strcmp(argv[1], "back") == 0)
		back_main();
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
		vpid = sc_spawn_node(m, "victim", VICTIM, &report);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	if (me == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
	}
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	for (uint32_t k = 0; k < KEYS; k++) {
		char key[16];

		key_of(key, sizeof(key), k);
		victim_owns += loco_map_owner(map, key, strlen(key)) == VICTIM;
	}
	sc_log("node %u owns %u of the %u keys", VICTIM, victim_owns, KEYS);
	SC_ASSERT(victim_owns > 0);
	/* the cold keys: no write after the kill brings them to their new replicas */
	if (me == 1) {
		cl[0].map = map;
		cl[0].me = me;
		for (uint32_t k = KEYS; k < KEYS + COLD; k++)
			SC_ASSERT_OK(one_op(&cl[0], k, 0, k));
	}
	sc_sync_wait(&sync, "cold keys", SC_WAIT_MS);

	for (int t = 0; t < THREADS; t++) {
		cl[t].map = map;
		cl[t].sync = &sync;
		cl[t].me = me;
		cl[t].th = (uint32_t)t;
		SC_ASSERT_EQ(pthread_create(&cl[t].t, NULL, client_main, &cl[t]), 0);
	}
	if (me == 1) {
		/* published (acknowledged by every node) before the kill: an error seen after it is
		 * after the kill time */
		SC_WAIT_UNTIL(__atomic_load_n(&cl[0].done, __ATOMIC_ACQUIRE) >= PRE &&
		                  __atomic_load_n(&cl[1].done, __ATOMIC_ACQUIRE) >= PRE,
		              60000, "the operations before the kill");
		t_kill = sc_now_ns();
		sc_sync_put(&sync, BOX_KILL, (uint64_t)t_kill);
		SC_ASSERT_EQ(sc_kill(vpid), 128 + 9);
		sc_log("killed node %u", VICTIM);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(cl[t].t, NULL);
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_KILL) != 0, SC_WAIT_MS, "the kill time");
	t_kill = (int64_t)sc_sync_get(&sync, BOX_KILL);
	sc_log("threads: %u and %u ops, %u and %u after the kill, %u and %u errors", cl[0].n,
	       cl[1].n, cl[0].after, cl[1].after, cl[0].errors, cl[1].errors);
	sc_sync_wait(&sync, "clients done", 60000);

	/* the census: each key owned by one survivor and held by one other */
	for (int try = 1; try <= 80 && !ok; try++) {
		uint64_t own = 0, rep = 0;

		sc_sleep_ms(250);
		loco_map_stats(map, &st);
		sc_sync_put(&sync, 10 + me, (uint64_t)try << 40 | st.owned << 20 | st.replicas);
		sc_sync_wait(&sync, "census", SC_WAIT_MS);
		for (uint32_t n = 1; n <= 3; n++) {
			uint64_t w = sc_sync_get(&sync, 10 + n);

			SC_ASSERT_EQ(w >> 40, try);
			own += w >> 20 & 0xfffff;
			rep += w & 0xfffff;
		}
		ok = own == KEYS + COLD && rep == KEYS + COLD;
		if (ok || try % 8 == 0)
			sc_log("census after %d ms: %llu owned, %llu replica entries (want %u and "
			       "%u); "
			       "this node copied %llu",
			       try * 250, (unsigned long long)own, (unsigned long long)rep,
			       KEYS + COLD, KEYS + COLD, (unsigned long long)st.resync);
		sc_sync_wait(&sync, "census read", SC_WAIT_MS);
	}
	SC_ASSERT(ok);
	/* a final read of every key, into the history */
	for (uint32_t k = 0; k < KEYS + COLD; k++)
		SC_ASSERT_OK(one_op(&cl[0], k, 1, 0));
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
	if (me == 1)
		check(pid, t_kill);
	sc_sync_wait(&sync, "checked", 60000);

	/* node 9 comes back with its id and joins the map in use */
	{
		uint64_t sum = sum_all(map), back = 0;

		if (me == 1) {
			vpid = sc_spawn_node(m, "back", VICTIM, &report);
			sc_read_line(report, line, sizeof(line), 60000);
			SC_ASSERT(sscanf(line, "sum %" SCNx64, &back) == 1);
			sc_read_line(report, line, sizeof(line),
			             SC_WAIT_MS); /* sc_victim_wait()'s */
			SC_ASSERT(strcmp(line, "ready") == 0);
			close(report);
			SC_ASSERT_EQ(back, sum);
		}
		sc_sync_wait(&sync, "back", 90000);
		SC_ASSERT_EQ(sum_all(map), sum); /* with node 9 serving: the same values */
		sc_log("node 9 came back, took its keys and reads every value as before");
		sc_sync_wait(&sync, "read again", 60000);
		if (me == 1)
			SC_ASSERT_EQ(sc_kill(vpid), 128 + 9);
	}
	sc_sync_wait(&sync, "done", 60000);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
