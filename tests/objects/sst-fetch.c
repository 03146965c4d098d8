/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst-fetch.c -- an sst's calls for one-word rows: direct pushes
 * (loco_sst_set_direct) and fetches of a peer's row at its source
 * (loco_sst_fetch, loco_sst_fetch_result).
 *
 * loco-run -n 3. Channel "sst-f" holds three tables with room for 16
 * rows: "w" (8-byte rows, pushed through the staging ring), "d" (4-byte
 * rows, pushed directly) and "l" (40-byte rows). Checks:
 *   - argument errors: rows above 8 bytes are refused; a fetch needs an
 *     ack key and a peer's id; before any fetch, and after a fetch that
 *     found no copy (before the join), the result is -ENODATA;
 *     set_direct twice is fine;
 *   - every node stores its rows without pushing: a fetch of each peer
 *     gives what that peer stored (a 4-byte row fills 4 bytes only),
 *     while the replica still reads zeros; after a second store, a
 *     second fetch gives the new row;
 *   - direct pushes: one WRITE per peer (the pushes counter), and the
 *     peers' replicas show the row once the ack key is waited for; a
 *     table that pushed through its ring may still turn direct.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco/sst.h>

#include "scenario.h"

#define MAX_ROWS 16
#define SENTINEL 0xa5a5a5a5u

struct tables {
	loco_channel_t *ch;
	loco_sst_t *w; /* 8-byte rows, staged */
	loco_sst_t *d; /* 4-byte rows, direct */
	loco_sst_t *l; /* 40-byte rows */
	loco_ack_key_t *ack;
};

static uint64_t w_row(uint32_t node, uint32_t round)
{
	return (uint64_t)node << 32 | round;
}

static uint32_t d_row(uint32_t node, uint32_t round)
{
	return node * 1000 + round;
}

/* present -- whether the rows of every table are {1, 2, 3}. */
static bool present(struct tables *s)
{
	static const uint32_t want[] = {1, 2, 3};
	loco_sst_t *t[] = {s->w, s->d, s->l};
	uint32_t ids[MAX_ROWS];

	for (int k = 0; k < 3; k++)
		if (loco_sst_rows(t[k], ids, MAX_ROWS) != 3 || memcmp(ids, want, sizeof(want)) != 0)
			return false;
	return true;
}

/* errors -- before the join: argument errors, nothing fetched, no copy to fetch from. */
static void errors(struct tables *s, uint32_t me)
{
	uint32_t peer = me % 3 + 1;
	uint64_t c = 7;

	SC_ASSERT_EQ(loco_sst_set_direct(NULL), -EINVAL);
	SC_ASSERT_EQ(loco_sst_set_direct(s->l), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch(NULL, peer, s->ack), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch(s->l, peer, s->ack), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch(s->w, peer, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch(s->w, me, s->ack), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch(s->w, 0, s->ack), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch(s->w, MAX_ROWS + 1, s->ack), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch_result(NULL, peer, &c), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch_result(s->w, peer, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch_result(s->l, peer, &c), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch_result(s->w, MAX_ROWS + 1, &c), -EINVAL);
	SC_ASSERT_EQ(loco_sst_fetch_result(s->w, peer, &c), -ENODATA);
	/* not joined yet: no copy to READ, and still nothing fetched */
	SC_ASSERT_EQ(loco_sst_fetch(s->w, peer, s->ack), -LOCO_ENOTJOINED);
	SC_ASSERT_EQ(loco_sst_fetch_result(s->w, peer, &c), -ENODATA);
	SC_ASSERT_EQ(c, 7); /* outputs are written only on success */
	SC_ASSERT_OK(loco_sst_set_direct(s->d));
	SC_ASSERT_OK(loco_sst_set_direct(s->d));
}

static void tables_open(struct tables *s, loco_manager_t *m)
{
	SC_ASSERT_OK(loco_channel_create(m, NULL, "sst-f", 3, &s->ch));
	SC_ASSERT_OK(loco_sst_create(s->ch, "w", 8, MAX_ROWS, &s->w));
	SC_ASSERT_OK(loco_sst_create(s->ch, "d", 4, MAX_ROWS, &s->d));
	SC_ASSERT_OK(loco_sst_create(s->ch, "l", 40, MAX_ROWS, &s->l));
	SC_ASSERT_OK(loco_ack_key_create(m, &s->ack));
	errors(s, loco_manager_node_id(m));
	SC_ASSERT_OK(loco_channel_join(s->ch, (int64_t)SC_WAIT_MS * 1000000));
}

static void tables_close(struct tables *s)
{
	loco_ack_key_destroy(s->ack);
	loco_sst_destroy(s->l);
	loco_sst_destroy(s->d);
	loco_sst_destroy(s->w);
	SC_ASSERT_OK(loco_channel_destroy(s->ch));
}

static void store(struct tables *s, uint32_t me, uint32_t round)
{
	uint64_t w = w_row(me, round);
	uint32_t d = d_row(me, round);

	SC_ASSERT_OK(loco_sst_store_mine(s->w, &w));
	SC_ASSERT_OK(loco_sst_store_mine(s->d, &d));
}

/* fetch_peers -- fetch both one-word tables from every peer; expect their round @round. */
static void fetch_peers(struct tables *s, uint32_t me, uint32_t round)
{
	for (uint32_t n = 1; n <= 3; n++) {
		if (n == me)
			continue;
		SC_ASSERT_OK(loco_sst_fetch(s->w, n, s->ack));
		SC_ASSERT_OK(loco_sst_fetch(s->d, n, s->ack));
	}
	SC_ASSERT_OK(loco_ack_wait(s->ack, 10 * SC_NS));
	for (uint32_t n = 1; n <= 3; n++) {
		uint32_t d[2] = {0, SENTINEL};
		uint64_t w = 0;

		if (n == me)
			continue;
		SC_ASSERT_OK(loco_sst_fetch_result(s->w, n, &w));
		SC_ASSERT_OK(loco_sst_fetch_result(s->d, n, d));
		if (w != w_row(n, round) || d[0] != d_row(n, round))
			SC_FAIL("node %u fetched as %#llx / %u, not round %u", n,
			        (unsigned long long)w, d[0], round);
		SC_ASSERT_EQ(d[1], SENTINEL); /* a 4-byte row fills 4 bytes */
	}
}

int main(int argc, char **argv)
{
	loco_value_stats_t st;
	struct sc_sync sync;
	struct tables s;
	loco_manager_t *m;
	uint32_t me;
	int n;

	sc_init("sst-fetch", argc, argv, 100);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	tables_open(&s, m);
	sc_sync_open(&sync, m, 3);
	SC_WAIT_UNTIL(present(&s), SC_WAIT_MS, "rows {1, 2, 3}");

	/* 1. stored, never pushed: a fetch reads it at the source, the replica has zeros */
	store(&s, me, 1);
	sc_sync_wait(&sync, "round 1 stored", SC_WAIT_MS);
	fetch_peers(&s, me, 1);
	for (uint32_t node = 1; node <= 3; node++) {
		uint64_t w = 1;

		SC_ASSERT_OK(loco_sst_read(s.w, node, &w));
		SC_ASSERT_EQ(w, node == me ? w_row(me, 1) : 0);
	}
	sc_sync_wait(&sync, "round 1 fetched", SC_WAIT_MS);
	store(&s, me, 2);
	sc_sync_wait(&sync, "round 2 stored", SC_WAIT_MS);
	fetch_peers(&s, me, 2);
	sc_log("fetches give the peers' rows as stored, before any push");

	/* 2. direct pushes: one WRITE per peer, attached to the ack key itself */
	n = loco_sst_push_broadcast(s.d, s.ack);
	SC_ASSERT_EQ(n, 2);
	SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));
	loco_sst_stats(s.d, &st);
	SC_ASSERT_EQ(st.pushes, 2);
	sc_sync_wait(&sync, "d pushed", SC_WAIT_MS);
	for (uint32_t node = 1; node <= 3; node++) {
		uint32_t d = 0;

		SC_ASSERT_OK(loco_sst_read(s.d, node, &d));
		SC_ASSERT_EQ(d, d_row(node, 2));
	}

	/* 3. a table that pushed through its ring may turn direct after */
	SC_ASSERT_EQ(loco_sst_push_broadcast(s.w, s.ack), 2);
	SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));
	SC_ASSERT_OK(loco_sst_set_direct(s.w));
	sc_sync_wait(&sync, "w pushed", SC_WAIT_MS);
	for (uint32_t node = 1; node <= 3; node++) {
		uint64_t w = 0;

		SC_ASSERT_OK(loco_sst_read(s.w, node, &w));
		SC_ASSERT_EQ(w, w_row(node, 2));
	}

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	tables_close(&s);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
