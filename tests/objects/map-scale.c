/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-scale.c -- one map with 8 key holders and 24 clients, 32
 * processes: YCSB-style traffic from the clients, a key holder killed
 * and another one added while it runs, then every key read back: each
 * reads the last acknowledged value (0 lost, 0 corrupt).
 *
 * loco-run -n 31. Nodes 1 .. 7 hold keys; node 1 spawns node 40 (this
 * program, role "victim"), the eighth holder. Nodes 8 .. 31 are clients
 * (cfg.clients). cfg.nodes = {1 .. 7, 40, 41}: node 41 is listed but
 * comes only later (role "joiner", cfg.join = 1). 2 replicas.
 *
 * 1. Clients cost a holder nothing until they call: once every member
 *    synced, each holder's rpc endpoint has no ring from anyone
 *    (loco_map_stats pipes_in 0: GETs are one-sided READs, and no one
 *    wrote yet); then node 8 writes one key: the key's owner has a ring
 *    in, node 8 has one ring out, and no other client has any.
 * 2. Load: each client writes its own keys (key k belongs to client
 *    8 + k % 24: one writer per key, so "the last acknowledged value"
 *    is well defined), 16 each, 384 in all.
 * 3. Run (YCSB workload A, uniform keys): 50 % reads of any key, 50 %
 *    updates of one of its own keys. A value carries its key, its
 *    writer, a sequence number and a checksum, and bytes made of them:
 *    a read of a torn or foreign value is corrupt. A read of its own key
 *    must give the last value acknowledged to this client (an
 *    acknowledged write lost at the kill shows here, at once). An update
 *    that fails with an unknown outcome (-ECONNRESET, -ETIMEDOUT: its
 *    owner died) is sent again with a new value until acknowledged; any
 *    other error fails the test. Node 1 (a holder, no traffic) waits for
 *    progress, SIGKILLs node 40, waits for progress again, spawns node
 *    41 (cfg.join), waits until it owns keys, waits for progress again,
 *    and stops the clients.
 * 4. Read-back (--verify): each client reads each of its keys: the value
 *    must be the last acknowledged one. Node 1 sums lost and corrupt
 *    over the clients: both must be 0. Node 1 then kills node 41.
 *
 * Every wait is bounded; the processes node 1 starts are killed by it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/map.h>

#include "scenario.h"

#define TMO      (30 * SC_NS)
#define HOLDERS  7 /* launched: 1 .. 7 (node 40 is the eighth) */
#define CLIENTS  24
#define NODES    (HOLDERS + CLIENTS) /* launched by loco-run */
#define VICTIM   40
#define JOINER   41
#define PER      16 /* keys per client */
#define KEYS     (CLIENTS * PER)
#define VLEN     96
#define STEP     (CLIENTS * 300) /* operations between node 1's steps */
#define BOX_PROG 0               /* box of client c: its operation count (and later result) */
#define BOX_STOP 50
#define BOX_OWN  51 /* node 8's first key's owner */
#define BOX_JOIN 52 /* node 41 serves */

static const uint32_t holders[] = {1, 2, 3, 4, 5, 6, 7, VICTIM, JOINER};
static uint32_t clients[CLIENTS];

struct val {
	uint32_t key, writer;
	uint64_t seq, sum;
	uint8_t fill[VLEN - 24];
};

static loco_map_t *make_map(loco_channel_t **ch, loco_manager_t *m, int join)
{
	loco_map_cfg_t cfg;
	loco_map_t *map;

	for (uint32_t i = 0; i < CLIENTS; i++)
		clients[i] = HOLDERS + 1 + i;
	SC_ASSERT_OK(loco_channel_create(m, NULL, "msc", NODES + 1, ch));
	loco_map_cfg_default(&cfg, holders, sizeof(holders) / sizeof(holders[0]));
	cfg.clients = clients;
	cfg.nclients = CLIENTS;
	cfg.join = join;
	cfg.replicas = 2;
	cfg.capacity = 1024;
	cfg.value_max = 128;
	SC_ASSERT_OK(loco_map_create(*ch, "scale", &cfg, &map));
	return map;
}

static void key_of(char *buf, size_t len, uint32_t k)
{
	snprintf(buf, len, "user%06u", k);
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void val_make(struct val *v, uint32_t key, uint32_t writer, uint64_t seq)
{
	v->key = key;
	v->writer = writer;
	v->seq = seq;
	for (size_t i = 0; i < sizeof(v->fill); i++)
		v->fill[i] = (uint8_t)(key * 31u + seq * 7u + i);
	v->sum = fnv(v->fill, sizeof(v->fill)) ^ key ^ (uint64_t)writer << 32 ^ seq;
}

/* val_ok -- whether @v (@len bytes) is a whole value of key @key */
static int val_ok(const struct val *v, size_t len, uint32_t key)
{
	return len == sizeof(*v) && v->key == key && v->writer == clients[key % CLIENTS] &&
	       v->sum == (fnv(v->fill, sizeof(v->fill)) ^ key ^ (uint64_t)v->writer << 32 ^ v->seq);
}

static void stats_log(loco_map_t *map, const char *what)
{
	loco_map_stats_t st;

	loco_map_stats(map, &st);
	sc_log("%s: owned %llu, replicas %llu, gets %llu (%llu retries), writes %llu (%llu "
	       "retried); rpc pipes in %llu, out %llu; memory %llu B",
	       what, (unsigned long long)st.owned, (unsigned long long)st.replicas,
	       (unsigned long long)st.gets, (unsigned long long)st.get_retries,
	       (unsigned long long)st.writes, (unsigned long long)st.redirects,
	       (unsigned long long)st.pipes_in, (unsigned long long)st.pipes_out,
	       (unsigned long long)st.mem_bytes);
}

static noreturn void victim_main(int join)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_map_t *map = make_map(&ch, m, join);

	SC_ASSERT_OK(loco_channel_join(ch, 60 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 90 * SC_NS));
	if (join) {
		loco_map_stats_t st;
		int64_t dl = sc_now_ms() + 90000;

		do {
			loco_map_stats(map, &st);
			if (st.owned > 0 && st.replicas > 0)
				break;
			sc_sleep_ms(20);
		} while (sc_now_ms() < dl);
		SC_ASSERT(st.owned > 0 && st.replicas > 0);
		stats_log(map, "node 41 serves");
		sc_report("serving");
	}
	sc_victim_wait(m);
}

/* the client's state */
static loco_map_t *cmap;
static uint32_t cme;
static uint64_t acked[PER]; /* the sequence number of the last acknowledged value of own key i */
static uint64_t cseq, cunknown, cgets, cputs, ccorrupt;

/* put -- own key index @i to a new value, again until acknowledged */
static void put(uint32_t i)
{
	uint32_t key = (cme - HOLDERS - 1) + i * CLIENTS;
	int64_t dl = sc_now_ms() + 120000;
	char kb[16];
	struct val v;

	key_of(kb, sizeof(kb), key);
	for (;;) {
		int ret;

		val_make(&v, key, cme, ++cseq);
		ret = loco_map_put(cmap, kb, strlen(kb), &v, sizeof(v), NULL, TMO);
		cputs++;
		if (ret == 0) {
			acked[i] = v.seq;
			return;
		}
		if (ret != -ECONNRESET && ret != -ETIMEDOUT)
			SC_FAIL("put %s: %s", kb, loco_strerror(ret));
		cunknown++; /* its owner died: done or not; a new value goes after it */
		if (sc_now_ms() > dl)
			SC_FAIL("put %s: no acknowledgement in 120 s", kb);
	}
}

/* get -- key @key: a whole value of it; of an own key, the last acknowledged one. 1: lost */
static int get(uint32_t key)
{
	char kb[16];
	struct val v;
	size_t len = 0;
	int ret;

	key_of(kb, sizeof(kb), key);
	ret = loco_map_get(cmap, kb, strlen(kb), &v, sizeof(v), &len, NULL, TMO);
	cgets++;
	if (ret == -ENOENT)
		return 1; /* every key was loaded first */
	if (ret)
		SC_FAIL("get %s: %s", kb, loco_strerror(ret));
	if (!val_ok(&v, len, key)) {
		sc_log("get %s: corrupt (%zu bytes, key %u, writer %u)", kb, len, v.key, v.writer);
		ccorrupt++;
		return 0;
	}
	if (v.writer == cme && v.seq != acked[(key - (cme - HOLDERS - 1)) / CLIENTS]) {
		sc_log("get %s: seq %llu, the last acknowledged is %llu", kb,
		       (unsigned long long)v.seq,
		       (unsigned long long)acked[(key - (cme - HOLDERS - 1)) / CLIENTS]);
		return 1;
	}
	return 0;
}

static void client_run(struct sc_sync *sync)
{
	unsigned seed = cme * 7919u;
	uint64_t ops = 0, lost = 0;
	int64_t dl = sc_now_ms() + 240000;

	while (sc_sync_get(sync, BOX_STOP) == 0) {
		if (sc_now_ms() > dl)
			SC_FAIL("no stop within 240 s (%llu operations)", (unsigned long long)ops);
		if (rand_r(&seed) % 2)
			lost += (uint64_t)get((uint32_t)(rand_r(&seed) % KEYS));
		else
			put((uint32_t)(rand_r(&seed) % PER));
		if (++ops % 64 == 0)
			sc_sync_put(sync, BOX_PROG + cme, ops);
	}
	sc_log("client: %llu operations (%llu gets, %llu puts, %llu with an unknown outcome), "
	       "%llu lost and %llu corrupt reads",
	       (unsigned long long)ops, (unsigned long long)cgets, (unsigned long long)cputs,
	       (unsigned long long)cunknown, (unsigned long long)lost,
	       (unsigned long long)ccorrupt);
	if (lost)
		SC_FAIL("%llu reads of an own key missed its last acknowledged value",
		        (unsigned long long)lost);
}

static uint64_t progress(struct sc_sync *sync)
{
	uint64_t sum = 0;

	for (uint32_t c = HOLDERS + 1; c <= NODES; c++)
		sum += sc_sync_get(sync, BOX_PROG + c);
	return sum;
}

static void wait_progress(struct sc_sync *sync, uint64_t from, const char *what)
{
	SC_WAIT_UNTIL(progress(sync) >= from + STEP, 120000, what);
}

int main(int argc, char **argv)
{
	static uint32_t launched[NODES];
	uint64_t before[NODES + 1] = {0};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct sc_sync sync;
	uint32_t me;
	pid_t vpid = 0, jpid = 0;
	char line[64];
	int report = -1, holder, t0;

	sc_init("map-scale", argc, argv, 580);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main(0);
	if (argc > 1 && strcmp(argv[1], "joiner") == 0)
		victim_main(1);
	if (sc_nodes() != NODES)
		SC_FAIL("run with loco-run -n %u (LOCO_NODES=%u)", NODES, sc_nodes());
	t0 = (int)sc_now_ms();
	m = sc_start();
	me = loco_manager_node_id(m);
	holder = me <= HOLDERS;
	cme = me;
	for (uint32_t i = 0; i < NODES; i++)
		launched[i] = i + 1;
	SC_WAIT_UNTIL(sc_members_are(m, launched, NODES), 120000, "every launched member");
	sc_sync_open(&sync, m, NODES);
	sc_sync_wait(&sync, "started", 120000);

	map = make_map(&ch, m, 0);
	cmap = map;
	if (me == 1)
		vpid = sc_spawn_node(m, "victim", VICTIM, &report);
	SC_ASSERT_OK(loco_channel_join(ch, 120 * SC_NS));
	if (me == 1) {
		sc_read_line(report, line, sizeof(line), 120000);
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
	}
	SC_ASSERT_OK(loco_map_sync(map, 120 * SC_NS));
	sc_sync_wait(&sync, "synced", 120000);
	if (me == 1)
		sc_log("32 members synced in %d ms", (int)sc_now_ms() - t0);

	/* 1. no ring at a holder before a client calls; node 8's first write makes one */
	if (holder) {
		loco_map_stats_t st;

		loco_map_stats(map, &st);
		sc_sync_put(&sync, BOX_PROG + me, st.pipes_in + 1);
		stats_log(map, "holder before any write");
	} else if (me == HOLDERS + 1 || me == NODES) {
		stats_log(map, "client before any write");
	}
	sc_sync_wait(&sync, "pipes before", 120000);
	for (uint32_t h = 1; h <= HOLDERS; h++) {
		before[h] = sc_sync_get(&sync, BOX_PROG + h) - 1;
		SC_ASSERT_EQ(before[h], 0); /* no client and no holder called yet */
	}
	if (me == HOLDERS + 1) {
		char kb[16];
		uint32_t own;

		key_of(kb, sizeof(kb), 0);
		own = loco_map_owner(map, kb, strlen(kb));
		put(0);
		sc_sync_put(&sync, BOX_OWN, own);
	}
	sc_sync_wait(&sync, "first write", 120000);
	{
		loco_map_stats_t st;

		loco_map_stats(map, &st);
		sc_sync_put(&sync, BOX_PROG + me, (holder ? st.pipes_in : st.pipes_out) + 1);
	}
	sc_sync_wait(&sync, "pipes after", 120000);
	{
		uint32_t own = (uint32_t)sc_sync_get(&sync, BOX_OWN), callers = 0;

		/* a holder may have rings from other holders now (the owner's copy pass after the
		   last pairing may copy the new key to its replica by "map.rep"), never from a
		   client but node 8, the only one that called: no client has a ring but node 8,
		   which has one, to the key's owner */
		for (uint32_t h = 1; h <= HOLDERS; h++) {
			uint64_t after = sc_sync_get(&sync, BOX_PROG + h) - 1;

			if (me == 1)
				sc_log("holder %u: rpc rings in: %llu before node 8's first write, "
				       "%llu after (the key's owner: node %u)",
				       h, (unsigned long long)before[h], (unsigned long long)after,
				       own);
			SC_ASSERT(after <= HOLDERS + (h == own));
			SC_ASSERT(h != own || after >= 1);
		}
		for (uint32_t c = HOLDERS + 1; c <= NODES; c++)
			callers += sc_sync_get(&sync, BOX_PROG + c) - 1 != 0;
		if (me == 1)
			sc_log(
			    "clients with a ring to a holder: %u (node 8: %llu)", callers,
			    (unsigned long long)(sc_sync_get(&sync, BOX_PROG + HOLDERS + 1) - 1));
		SC_ASSERT_EQ(callers, 1);
		SC_ASSERT_EQ(sc_sync_get(&sync, BOX_PROG + HOLDERS + 1) - 1, 1);
	}
	sc_sync_wait(&sync, "pipes checked", 120000);
	sc_sync_put(&sync, BOX_PROG + me, 0);
	sc_sync_wait(&sync, "boxes clear", 120000);

	/* 2. load */
	if (!holder)
		for (uint32_t i = 0; i < PER; i++)
			put(i);
	sc_sync_wait(&sync, "loaded", 120000);
	if (me == 1)
		sc_log("%u keys loaded at %d ms", KEYS, (int)sc_now_ms() - t0);

	/* 3. run; node 1 kills a holder, adds one, stops the clients */
	if (!holder) {
		client_run(&sync);
	} else if (me == 1) {
		uint64_t p;

		wait_progress(&sync, 0, "progress before the kill");
		p = progress(&sync);
		SC_ASSERT_EQ(sc_kill(vpid), 128 + 9);
		sc_log("killed node %u after %llu operations (%d ms)", VICTIM,
		       (unsigned long long)p, (int)sc_now_ms() - t0);
		wait_progress(&sync, p, "progress after the kill");
		p = progress(&sync);
		jpid = sc_spawn_node(m, "joiner", JOINER, &report);
		sc_read_line(report, line, sizeof(line), 150000);
		SC_ASSERT(strcmp(line, "serving") == 0);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS); /* sc_victim_wait()'s */
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
		sc_log("node %u joined and serves after %llu more operations (%d ms)", JOINER,
		       (unsigned long long)(progress(&sync) - p), (int)sc_now_ms() - t0);
		p = progress(&sync);
		wait_progress(&sync, p, "progress after the join");
		sc_sync_put(&sync, BOX_STOP, 1);
		sc_log("stopped the clients after %llu operations (%d ms)",
		       (unsigned long long)progress(&sync), (int)sc_now_ms() - t0);
	}
	sc_sync_wait(&sync, "stopped", 120000);

	/* 4. read-back: every own key has its last acknowledged value */
	if (!holder) {
		uint64_t lost = 0;

		for (uint32_t i = 0; i < PER; i++)
			lost += (uint64_t)get((cme - HOLDERS - 1) + i * CLIENTS);
		sc_sync_put(&sync, BOX_PROG + me, 1ull << 63 | lost << 32 | ccorrupt);
		if (me == HOLDERS + 1 || me == NODES)
			stats_log(map, "client at the end");
	} else {
		stats_log(map, "holder at the end");
	}
	sc_sync_wait(&sync, "verified", 120000);
	if (me == 1) {
		uint64_t lost = 0, corrupt = 0;

		for (uint32_t c = HOLDERS + 1; c <= NODES; c++) {
			uint64_t w = sc_sync_get(&sync, BOX_PROG + c);

			SC_ASSERT(w >> 63);
			lost += w >> 32 & 0x7fffffff;
			corrupt += w & 0xffffffff;
		}
		sc_log("read-back of %u keys by their writers: %llu lost, %llu corrupt (%d ms)",
		       KEYS, (unsigned long long)lost, (unsigned long long)corrupt,
		       (int)sc_now_ms() - t0);
		SC_ASSERT_EQ(lost, 0);
		SC_ASSERT_EQ(corrupt, 0);
		SC_ASSERT_EQ(sc_kill(jpid), 128 + 9);
	}
	sc_sync_wait(&sync, "done", 120000);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
