/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-ackkill.c -- an owner that dies right after its writes were
 * acknowledged loses none of them, round after round: the new owners
 * serve every acknowledged value (and no deleted key) at once.
 *
 * loco-run -n 3. Members {1, 2, 3, 9} hold keys, 3 replicas (the owner
 * and 2 more); KEYS keys. In each of ROUNDS rounds node 1 spawns node 9
 * (a new incarnation each round, cfg.join = 1), which waits until it
 * serves and the others copied it its keys, then writes every key it
 * owns as fast as it can: PUT (three
 * versions in a row), or DEL for one key in four, or CAS from the
 * version its PUT returned for one in four; then it reports the keys it
 * wrote to node 1 and SIGKILLs itself at once. The writes' records are
 * in its replicas' logs, mostly not taken yet (the replica takes them
 * in the background): the new owner must take them before it serves.
 * Node 1 reaps it (killed, so every write was acknowledged), the
 * survivors wait until node 9 left their view, then each reads every key
 * and compares it with what it expects (the value of the round that
 * wrote it last, or absent): a difference fails the test. Every process
 * the test starts is ended by it (by PID), and every wait is bounded.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/map.h>

#include "scenario.h"

#define TMO       (10 * SC_NS)
#define KEYS      48
#define VICTIM    9
#define BOX_MASK1 1 /* the keys node 9 wrote in this round: bits 0 .. 31 */
#define BOX_MASK2 2 /* ... bits 32 .. 47 */
#define BOX_ROUND 3

static const uint32_t members[] = {1, 2, 3, VICTIM};

static loco_map_t *make_map(loco_channel_t **ch, loco_manager_t *m, int join)
{
	loco_map_cfg_t cfg;
	loco_map_t *map;

	/* the survivors wait for each other at the join, node 9 for all three */
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ak", join ? 4 : 3, ch));
	loco_map_cfg_default(&cfg, members, 4);
	cfg.join = join;
	cfg.replicas = 3;
	cfg.capacity = 256;
	cfg.value_max = 64;
	SC_ASSERT_OK(loco_map_create(*ch, "ackkill", &cfg, &map));
	return map;
}

static void key_of(char *buf, size_t len, uint32_t k)
{
	snprintf(buf, len, "ak-%u", k);
}

/* the value round @r writes last to key @k (8 bytes of it, then padding to @k's length) */
static size_t value_of(uint8_t *buf, uint32_t r, uint32_t k)
{
	uint64_t v = (uint64_t)r << 32 | k;
	size_t len = 8 + k % 40;

	memset(buf, (int)('a' + (r + k) % 26), len);
	memcpy(buf, &v, 8);
	return len;
}

/* victim_main -- node 9: joins, writes the keys it owns, reports them, dies at once */
static noreturn void victim_main(uint32_t round)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_map_t *map = make_map(&ch, m, 1);
	uint64_t mask = 0;

	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 30 * SC_NS));
	/* the others' copies for this join are done (they take the logs' records first): the
	   writes below stay in the logs until the survivors must take them */
	sc_sleep_ms(400);
	for (uint32_t k = 0; k < KEYS; k++) {
		char key[16];
		uint8_t val[64];
		uint64_t ver = 0;
		size_t len;
		int ret;

		key_of(key, sizeof(key), k);
		if (loco_map_owner(map, key, strlen(key)) != VICTIM)
			continue;
		mask |= 1ull << k;
		if (k % 4 == 3) { /* absent afterwards */
			ret = loco_map_del(map, key, strlen(key), TMO);
			SC_ASSERT(ret == 0 || ret == -ENOENT);
			continue;
		}
		for (uint32_t i = 0; i < 3; i++) { /* older values of the round first */
			len = value_of(val, round, k);
			val[8] = (uint8_t)('0' + 2 - i);
			if (i == 2)
				len = value_of(val, round, k);
			if (k % 4 == 1 && i == 2)
				ret = loco_map_cas(map, key, strlen(key), ver, val, len, &ver, TMO);
			else
				ret = loco_map_put(map, key, strlen(key), val, len, &ver, TMO);
			if (ret)
				SC_FAIL("round %u: write of key %u: %s", round, k,
				        loco_strerror(ret));
		}
	}
	/* every write acknowledged: say which, and die before anything else */
	sc_report("wrote %" PRIx64, mask);
	raise(SIGKILL);
	SC_FAIL("not killed");
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	uint8_t expect[KEYS][64];
	size_t elen[KEYS]; /* 0: absent */
	uint32_t rounds = sc_scaled(8), me, checked = 0, written = 0;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct sc_sync sync;

	sc_init("map-ackkill", argc, argv, 180);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main(sc_env_u32("SC_ACKKILL_ROUND", 0));
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);
	map = make_map(&ch, m, 0);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_map_sync(map, 20 * SC_NS));
	memset(elen, 0, sizeof(elen));
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	for (uint32_t r = 1; r <= rounds; r++) {
		uint64_t mask;

		if (me == 1) {
			char rs[16], line[64];
			int report = -1, st;
			pid_t vpid;

			/* the child inherits the environment: the round goes with it */
			snprintf(rs, sizeof(rs), "%u", r);
			setenv("SC_ACKKILL_ROUND", rs, 1);
			vpid = sc_spawn_node(m, "victim", VICTIM, &report);
			sc_read_line(report, line, sizeof(line), 60000);
			close(report);
			SC_ASSERT(sscanf(line, "wrote %" SCNx64, &mask) == 1);
			st = sc_reap(vpid, 10000);
			SC_ASSERT_EQ(st, 128 + SIGKILL); /* it killed itself after every ack */
			sc_sync_put(&sync, BOX_MASK1, mask & 0xffffffffu);
			sc_sync_put(&sync, BOX_MASK2, mask >> 32);
			sc_sync_put(&sync, BOX_ROUND, r);
		}
		sc_sync_wait(&sync, "round written", 90000);
		SC_ASSERT_EQ(sc_sync_get(&sync, BOX_ROUND), r);
		mask = sc_sync_get(&sync, BOX_MASK1) | sc_sync_get(&sync, BOX_MASK2) << 32;
		for (uint32_t k = 0; k < KEYS; k++) {
			if (!(mask >> k & 1))
				continue;
			written++;
			elen[k] = k % 4 == 3 ? 0 : value_of(expect[k], r, k);
		}
		/* node 9 gone from this node's view: its keys are the survivors' now */
		SC_WAIT_UNTIL(!sc_is_member(m, VICTIM), 30000, "node 9 out of the view");
		for (uint32_t k = 0; k < KEYS; k++) {
			char key[16];
			uint8_t val[64];
			size_t len = 0;
			int ret;

			key_of(key, sizeof(key), k);
			ret =
			    loco_map_get(map, key, strlen(key), val, sizeof(val), &len, NULL, TMO);
			if (elen[k] == 0 && ret != -ENOENT)
				SC_FAIL("round %u: key %u: want absent, GET says %s (%zu bytes)", r,
				        k, loco_strerror(ret), len);
			if (elen[k] != 0 && ret != 0)
				SC_FAIL("round %u: key %u: GET says %s", r, k, loco_strerror(ret));
			if (elen[k] != 0 && (len != elen[k] || memcmp(val, expect[k], len) != 0)) {
				uint64_t got = 0;

				memcpy(&got, val, 8);
				SC_FAIL(
				    "round %u: key %u: an acknowledged write lost: read round %u "
				    "(%zu bytes), want round %u (%zu bytes)",
				    r, k, (unsigned)(got >> 32), len, r, elen[k]);
			}
			checked++;
		}
		sc_sync_wait(&sync, "round checked", 60000);
	}
	sc_log("%u rounds: node 9 wrote %u keys and died at once each time; %u reads after the "
	       "kills gave every acknowledged value",
	       rounds, written, checked);
	sc_sync_wait(&sync, "done", 60000);
	loco_map_destroy(map);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
