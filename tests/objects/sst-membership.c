/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst-membership.c -- an sst's rows follow the channel's members.
 *
 * loco-run -n 3. Channel "sst-m" holds three tables with room for 16 rows:
 * "t" (40-byte rows: a sequence-checked line), "u" (200-byte rows:
 * checksummed) and "w" (8-byte rows: one word). A row of node n at round r holds n and r in every
 * 8-byte word. Checks:
 *   - argument errors, -ERANGE for a node id above max_rows, -EEXIST;
 *     before the join only this node's row is present, and it reads as
 *     zeros; a peer's row is -ENOENT;
 *   - after the join the rows are {1, 2, 3}; every node pushes ROUNDS
 *     rows (push_broadcast, acks), reading and checking the others' rows
 *     meanwhile (never torn, rounds never going back); afterwards every
 *     node reads every other node's last round;
 *   - node 1 spawns node 9, which joins the channel: its row appears at
 *     every node with its pushed value, and it sees the others' rows
 *     once they push again; node 1 then SIGKILLs it: its row disappears
 *     from every table (row_present 0, read -ENOENT, rows {1, 2, 3});
 *   - node 1 spawns node 10: its row appears the same way; it leaves
 *     gracefully once it has seen every row, and its row disappears;
 *   - loco_sst_row_tag(): every read of a row is bracketed by a tag before
 *     and one after; when the two are equal the read returned that tag's
 *     version (the read is no older than the tag before it, nor newer
 *     than the tag after it), and two such reads under the same tag must
 *     return the same round: a tag names one version of the row, in all
 *     three kinds of table, while the rows change, vanish and come back.
 *     The tag of an absent row is -ENOENT; the tags move as the rounds
 *     go (counted: a check that never compares would prove nothing).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco/sst.h>

#include "scenario.h"

#define MAX_ROWS 16
#define ROUNDS   300
#define NTAB     3
#define KILLED   9
#define LEAVER   10
#define BOX_9_OK 1 /* node 1's mailbox: node 9 saw everything */

static const char *const tab_name[NTAB] = {"t", "u", "w"};
static const size_t tab_size[NTAB] = {40, 200, 8};

/* the tag of the last read of each row bracketed by equal tags, and the round it returned */
static struct {
	uint64_t tag;
	uint32_t round;
	int have;
} seen[NTAB][MAX_ROWS + 1];
static unsigned tags_equal, tags_moved; /* such reads under the last one's tag / another */

struct tables {
	loco_channel_t *ch;
	loco_sst_t *t[NTAB];
	loco_ack_key_t *ack;
};

static uint64_t word_of(uint32_t node, uint32_t round)
{
	return (uint64_t)node << 32 | round;
}

static void row_fill(uint64_t *row, int tab, uint32_t node, uint32_t round)
{
	for (size_t i = 0; i < tab_size[tab] / 8; i++)
		row[i] = word_of(node, round);
}

/* row_round -- read @node's row of table @tab, check it is whole; its round (0: zeros). */
static int row_round(struct tables *s, int tab, uint32_t node, uint32_t *round)
{
	uint64_t row[25], tag = 0, after = 1;
	int tret = loco_sst_row_tag(s->t[tab], node, &tag);
	int ret = loco_sst_read(s->t[tab], node, row);

	if (ret)
		return ret;
	if (tret == 0 && loco_sst_row_tag(s->t[tab], node, &after) == 0 && after == tag &&
	    node <= MAX_ROWS) {
		if (seen[tab][node].have && seen[tab][node].tag == tag) {
			tags_equal++;
			if ((uint32_t)row[0] != seen[tab][node].round)
				SC_FAIL("table %s: row %u read round %u after round %u under "
				        "the same tag %#llx",
				        tab_name[tab], node, (unsigned)(uint32_t)row[0],
				        seen[tab][node].round, (unsigned long long)tag);
		} else if (seen[tab][node].have) {
			tags_moved++;
		}
		seen[tab][node].tag = tag;
		seen[tab][node].round = (uint32_t)row[0];
		seen[tab][node].have = 1;
	}
	for (size_t i = 1; i < tab_size[tab] / 8; i++)
		if (row[i] != row[0])
			SC_FAIL("table %s: row %u is torn: word %zu = %#llx, word 0 = %#llx",
			        tab_name[tab], node, i, (unsigned long long)row[i],
			        (unsigned long long)row[0]);
	if (row[0] != 0 && row[0] >> 32 != node)
		SC_FAIL("table %s: row %u holds node %llu's data", tab_name[tab], node,
		        (unsigned long long)(row[0] >> 32));
	*round = (uint32_t)row[0];
	return 0;
}

/* has_round -- whether @node's rows in every table are at round @r exactly. */
static bool has_round(struct tables *s, uint32_t node, uint32_t r)
{
	for (int k = 0; k < NTAB; k++) {
		uint32_t got;

		if (row_round(s, k, node, &got) != 0 || got != r)
			return false;
	}
	return true;
}

/* rows_are -- whether the present rows of every table are exactly @want[0..@n). */
static bool rows_are(struct tables *s, const uint32_t *want, int n)
{
	uint32_t ids[MAX_ROWS];

	for (int k = 0; k < NTAB; k++) {
		int got = loco_sst_rows(s->t[k], ids, MAX_ROWS);

		if (got != n || memcmp(ids, want, (size_t)n * sizeof(*ids)) != 0)
			return false;
	}
	return true;
}

static void tables_open(struct tables *s, loco_manager_t *m, uint32_t nodes)
{
	uint32_t me = loco_manager_node_id(m);
	uint64_t row[25];

	SC_ASSERT_OK(loco_channel_create(m, NULL, "sst-m", nodes, &s->ch));
	for (int k = 0; k < NTAB; k++) {
		SC_ASSERT_OK(loco_sst_create(s->ch, tab_name[k], tab_size[k], MAX_ROWS, &s->t[k]));
		SC_ASSERT_EQ(loco_sst_row_size(s->t[k]), tab_size[k]);
		SC_ASSERT_EQ(loco_sst_max_rows(s->t[k]), MAX_ROWS);
		SC_ASSERT(loco_sst_row_present(s->t[k], me));
		SC_ASSERT_EQ(loco_sst_read(s->t[k], me % 3 + 1, row), -ENOENT);
		SC_ASSERT_EQ(loco_sst_row_tag(s->t[k], me % 3 + 1, &row[0]), -ENOENT);
		SC_ASSERT_EQ(loco_sst_row_tag(s->t[k], me, NULL), -EINVAL);
		SC_ASSERT_OK(loco_sst_row_tag(s->t[k], me, &row[0]));
	}
	SC_ASSERT(rows_are(s, &me, 1));
	SC_ASSERT(has_round(s, me, 0));
	SC_ASSERT_OK(loco_ack_key_create(m, &s->ack));
	SC_ASSERT_OK(loco_channel_join(s->ch, (int64_t)SC_WAIT_MS * 1000000));
}

static void tables_close(struct tables *s)
{
	loco_ack_key_destroy(s->ack);
	for (int k = 0; k < NTAB; k++)
		loco_sst_destroy(s->t[k]);
	SC_ASSERT_OK(loco_channel_destroy(s->ch));
}

/* push_round -- store round @r of this node's rows and push them; @want: peers to reach. */
static void push_round(struct tables *s, uint32_t me, uint32_t r, int want, bool wait)
{
	uint64_t row[25];

	for (int k = 0; k < NTAB; k++) {
		int n;

		row_fill(row, k, me, r);
		SC_ASSERT_OK(loco_sst_store_mine(s->t[k], row));
		n = loco_sst_push_broadcast(s->t[k], s->ack);
		if (n != want)
			SC_FAIL("table %s: push_broadcast reached %d nodes, not %d", tab_name[k], n,
			        want);
	}
	if (wait)
		SC_ASSERT_OK(loco_ack_wait(s->ack, 10 * SC_NS));
}

/* push_until -- push round @r until it reaches @want peers (late regions), then wait. */
static void push_until(struct tables *s, uint32_t me, uint32_t r, int want)
{
	uint64_t row[25];

	for (int k = 0; k < NTAB; k++) {
		row_fill(row, k, me, r);
		SC_ASSERT_OK(loco_sst_store_mine(s->t[k], row));
		for (int64_t dl = sc_now_ms() + SC_WAIT_MS;; sc_sleep_ms(2)) {
			int n = loco_sst_push_broadcast(s->t[k], s->ack);

			int ret;

			SC_ASSERT(n >= 0);
			/*
			 * A node that got what it waited for may leave before it
			 * acks; as it destroys its tables first, our WRITE may meet
			 * its memory gone (-EACCES: a push reports its own WRITE).
			 */
			ret = loco_ack_wait(s->ack, 10 * SC_NS);
			if (ret != 0 && ret != -ECONNRESET && ret != -ECANCELED &&
			    ret != -ETIMEDOUT && ret != -EACCES)
				SC_FAIL("table %s: push: %s", tab_name[k], loco_strerror(ret));
			if (n >= want)
				break;
			if (sc_now_ms() > dl)
				SC_FAIL("table %s: push reached %d nodes, not %d", tab_name[k], n,
				        want);
		}
	}
}

/* wait_row -- until @node's rows are at round @r in every table. */
static void wait_row(struct tables *s, uint32_t node, uint32_t r)
{
	char what[64];

	snprintf(what, sizeof(what), "node %u's rows at round %u", node, r);
	SC_WAIT_UNTIL(has_round(s, node, r), SC_WAIT_MS, what);
}

/* extra_main -- node 9 or 10: join, push, wait to see every row, then die or leave. */
static int extra_main(void)
{
	static const uint32_t all[] = {1, 2, 3};
	loco_manager_t *m = sc_start();
	uint32_t me = loco_manager_node_id(m), with[4] = {1, 2, 3, me};
	struct tables s;

	tables_open(&s, m, 4);
	SC_WAIT_UNTIL(rows_are(&s, with, 4), SC_WAIT_MS, "rows {1, 2, 3, me}");
	push_until(&s, me, 1, 3);
	for (int i = 0; i < 3; i++)
		wait_row(&s, all[i], me == KILLED ? ROUNDS + 1 : ROUNDS + 2);
	sc_log("extra node %u: every row seen", me);
	if (me == LEAVER) {
		/* every early node saw our row before it pushed the round we waited for */
		tables_close(&s);
		loco_fini(m);
		return SC_EXIT_PASS;
	}
	sc_report("ok");
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; sc_now_ms() < dl;)
		sc_sleep_ms(100); /* node 1 SIGKILLs us */
	SC_FAIL("node 1 did not kill node %u", me);
}

static pid_t spawn_extra(loco_manager_t *m, uint32_t id, int *fd)
{
	return sc_spawn_node(m, "extra", id, fd);
}

static void errors(loco_channel_t *ch, uint32_t me)
{
	loco_sst_t *x;
	uint64_t row[25];

	SC_ASSERT_EQ(loco_sst_create(NULL, "x", 8, 4, &x), -EINVAL);
	SC_ASSERT_EQ(loco_sst_create(ch, NULL, 8, 4, &x), -EINVAL);
	SC_ASSERT_EQ(loco_sst_create(ch, "x", 0, 4, &x), -EINVAL);
	SC_ASSERT_EQ(loco_sst_create(ch, "x", 8, 0, &x), -EINVAL);
	SC_ASSERT_EQ(loco_sst_create(ch, "x", 8, LOCO_SST_MAX_ROWS + 1, &x), -EINVAL);
	SC_ASSERT_EQ(loco_sst_create(ch, "x", 8, 4, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_sst_create(ch, "x", 8, me - 1, &x), me == 1 ? -EINVAL : -ERANGE);
	SC_ASSERT_EQ(loco_sst_create(ch, "t", 8, 4, &x), -EEXIST);
	SC_ASSERT_EQ(loco_sst_store_mine(NULL, row), -EINVAL);
	SC_ASSERT_EQ(loco_sst_read(NULL, me, row), -EINVAL);
	SC_ASSERT_EQ(loco_sst_rows(NULL, NULL, 0), -EINVAL);
	SC_ASSERT_EQ(loco_sst_row_present(NULL, me), 0);
	SC_ASSERT_EQ(loco_sst_row_tag(NULL, me, &row[0]), -EINVAL);
	SC_ASSERT_EQ(loco_sst_row_size(NULL), 0);
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	uint32_t me, with[4] = {1, 2, 3, 0}, last[4] = {0}, got;
	loco_manager_t *m;
	struct sc_sync sync;
	struct tables s;
	loco_value_stats_t st;
	pid_t pid = 0;
	int fd = -1;
	int64_t t0;
	char line[64];

	sc_init("sst-membership", argc, argv, 100);
	if (argc > 1 && strcmp(argv[1], "extra") == 0)
		return extra_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	tables_open(&s, m, 3);
	errors(s.ch, me);
	sc_sync_open(&sync, m, 3);
	SC_WAIT_UNTIL(rows_are(&s, base, 3), SC_WAIT_MS, "rows {1, 2, 3}");
	sc_sync_wait(&sync, "rows {1, 2, 3}", SC_WAIT_MS);

	/* 1. every node pushes ROUNDS rounds; the others' rows are checked meanwhile */
	for (uint32_t r = 1; r <= ROUNDS; r++) {
		push_round(&s, me, r, 2, r % 10 == 0 || r == ROUNDS);
		for (uint32_t n = 1; n <= 3; n++) {
			for (int k = 0; k < NTAB && n != me; k++) {
				SC_ASSERT_OK(row_round(&s, k, n, &got));
				if (got < last[n] && k == 0)
					SC_FAIL("row %u went back from round %u to %u", n, last[n],
					        got);
				if (k == 0)
					last[n] = got;
			}
		}
	}
	sc_sync_wait(&sync, "all rounds pushed", SC_WAIT_MS);
	for (uint32_t n = 1; n <= 3; n++)
		if (!has_round(&s, n, ROUNDS))
			SC_FAIL("node %u's rows are not at its last round %u", n, ROUNDS);
	sc_log("every node's last round (%u) is in every table", ROUNDS);
	sc_sync_wait(&sync, "last rounds checked", SC_WAIT_MS);

	/* 2. node 9 joins: its row appears; the others push again so that it sees theirs */
	if (me == 1)
		pid = spawn_extra(m, KILLED, &fd);
	with[3] = KILLED;
	SC_WAIT_UNTIL(rows_are(&s, with, 4), SC_WAIT_MS, "rows {1, 2, 3, 9}");
	push_until(&s, me, ROUNDS + 1, 3);
	wait_row(&s, KILLED, 1);
	if (me == 1) {
		sc_read_line(fd, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ok") == 0);
		sc_sync_put(&sync, BOX_9_OK, 1);
	}
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_9_OK) == 1, SC_WAIT_MS, "node 9's ok");

	/* 3. SIGKILL node 9: its row disappears */
	if (me == 1)
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	t0 = sc_now_ms();
	SC_WAIT_UNTIL(rows_are(&s, base, 3), SC_WAIT_MS, "node 9's row to disappear");
	sc_log("node 9's row disappeared %lld ms after%s", (long long)(sc_now_ms() - t0),
	       me == 1 ? " its kill" : " node 9's ok");
	for (int k = 0; k < NTAB; k++) {
		uint64_t row[25];

		SC_ASSERT_EQ(loco_sst_row_present(s.t[k], KILLED), 0);
		SC_ASSERT_EQ(loco_sst_read(s.t[k], KILLED, row), -ENOENT);
		SC_ASSERT_EQ(loco_sst_row_tag(s.t[k], KILLED, &row[0]), -ENOENT);
	}
	push_round(&s, me, ROUNDS + 1, 2, true); /* node 9 is no longer pushed to */
	sc_sync_wait(&sync, "node 9 gone", SC_WAIT_MS);

	/* 4. node 10 joins, sees every row, leaves gracefully: its row comes and goes */
	if (me == 1)
		pid = spawn_extra(m, LEAVER, NULL);
	with[3] = LEAVER;
	SC_WAIT_UNTIL(rows_are(&s, with, 4), SC_WAIT_MS, "rows {1, 2, 3, 10}");
	wait_row(&s, LEAVER, 1);
	push_until(&s, me, ROUNDS + 2, 3);
	SC_WAIT_UNTIL(rows_are(&s, base, 3), SC_WAIT_MS, "node 10's row to disappear");
	if (me == 1)
		SC_ASSERT_EQ(sc_reap(pid, 10000), 0);
	for (uint32_t n = 1; n <= 3; n++)
		if (n != me)
			wait_row(&s, n, ROUNDS + 2);
	loco_sst_stats(s.t[1], &st);
	sc_log("table u: %llu reads, %llu retries, %llu pushes, %llu push errors",
	       (unsigned long long)st.loads, (unsigned long long)st.retries,
	       (unsigned long long)st.pushes, (unsigned long long)st.push_errors);

	sc_log("row tags: %u stable reads under the last one's tag, %u under another", tags_equal,
	       tags_moved);
	SC_ASSERT(tags_equal > 0 && tags_moved > 0); /* both sides of the tag check ran */

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	tables_close(&s);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
