/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst-predicate.c -- sst predicates: tests the progress thread evaluates,
 * with a trigger when they turn true.
 *
 * loco-run -n 3. Channel "sst-p" holds table "p" (24-byte rows {count,
 * flag, time}: one sequence-checked line) with room for 16 rows. Every
 * trigger reads the table again itself and fails the node unless its
 * predicate holds. Checks:
 *   - argument errors;
 *   - one-shot "every present row's count >= K": every node pushes its
 *     count 1 .. K - 1; after a barrier nothing has fired (every row is at
 *     K - 1); then every node pushes K .. K + 50: the trigger fires exactly
 *     once on every node;
 *   - recurring "row 1's flag is set": node 1 raises and lowers its flag
 *     EDGES times, each state waited for until every predicate's test has
 *     read it; the predicate fires on every rise (EDGES times) and never
 *     on a fall; one removed by the main thread after 3 rises fires 3
 *     times; one whose trigger removes itself fires once. The time from
 *     node 1's push to the trigger at the other nodes is printed;
 *   - node 1 spawns node 9, which joins and pushes count 1; a one-shot
 *     "every present row's count >= K" armed then stays false while node
 *     9 is there; node 1 SIGKILLs node 9: its row vanishes, and the
 *     predicate fires on every node (with row 9 absent);
 *   - loco_sst_destroy() removes the predicates left.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/sst.h>

#include "scenario.h"

#define MAX_ROWS  16
#define KILLED    9
#define MAX_EDGES 64
#define BOX_9_OK  1 /* node 1's mailbox: node 9 pushed its row */

struct row {
	uint64_t count;
	uint64_t flag;
	int64_t t_ns; /* when the row was pushed */
};

/* A predicate under test; the progress thread writes its counters with atomics. */
struct pred {
	const char *name;
	uint64_t k;                /* "every present row >= k" */
	loco_sst_predicate_t *h;   /* atomic */
	int fired;                 /* atomic */
	uint64_t seen;             /* atomic: row 1's count when the test last read it, + 1 */
	int dead;                  /* atomic: removed */
	int remove_at;             /* the trigger removes its own predicate at this firing */
	int64_t lat_ns[MAX_EDGES]; /* by firing: trigger time - row 1's push time */
	int row9;                  /* atomic: row 9 was present at the firing */
};

#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

static loco_sst_t *tab;
static loco_ack_key_t *ack;
static uint32_t me;
static struct row mine;

/* all_at_least -- whether every present row's count is >= @k (rows vanishing meanwhile skipped). */
static bool all_at_least(loco_sst_t *sst, uint64_t k)
{
	uint32_t ids[MAX_ROWS];
	int n = loco_sst_rows(sst, ids, MAX_ROWS);

	for (int i = 0; i < n && i < MAX_ROWS; i++) {
		struct row r;
		int ret = loco_sst_read(sst, ids[i], &r);

		if (ret == -ENOENT)
			continue;
		if (ret != 0 || r.count < k)
			return false;
	}
	return n > 0;
}

static int test_all(loco_sst_t *sst, void *arg)
{
	struct pred *p = arg;

	return all_at_least(sst, p->k);
}

static void trigger_all(loco_sst_t *sst, void *arg)
{
	struct pred *p = arg;

	if (!all_at_least(sst, p->k))
		SC_FAIL("%s: triggered, but a row's count is below %llu", p->name,
		        (unsigned long long)p->k);
	STORE(p->row9, loco_sst_row_present(sst, KILLED));
	__atomic_add_fetch(&p->fired, 1, __ATOMIC_ACQ_REL);
}

/* row1 -- node 1's row into *@r: 0, or -ENOENT once node 1 left (at the end); else fail. */
static int row1(loco_sst_t *sst, struct row *r)
{
	int ret = loco_sst_read(sst, 1, r);

	if (ret != 0 && ret != -ENOENT)
		SC_FAIL("reading row 1: %s", loco_strerror(ret));
	return ret;
}

static int test_flag(loco_sst_t *sst, void *arg)
{
	struct pred *p = arg;
	struct row r;

	if (row1(sst, &r) != 0)
		return 0;
	STORE(p->seen, r.count + 1);
	return r.flag != 0;
}

static void trigger_flag(loco_sst_t *sst, void *arg)
{
	struct pred *p = arg;
	int n = __atomic_load_n(&p->fired, __ATOMIC_RELAXED);
	struct row r;

	if (row1(sst, &r) != 0)
		SC_FAIL("%s: triggered, but row 1 is gone", p->name);
	if (r.flag == 0)
		SC_FAIL("%s: triggered, but row 1's flag is down (count %llu)", p->name,
		        (unsigned long long)r.count);
	if (n < MAX_EDGES)
		p->lat_ns[n] = sc_now_ns() - r.t_ns;
	n = __atomic_add_fetch(&p->fired, 1, __ATOMIC_ACQ_REL);
	if (p->remove_at != 0 && n == p->remove_at) {
		SC_ASSERT_OK(loco_sst_predicate_remove(LOAD(p->h)));
		STORE(p->dead, 1); /* @p is ours: only the predicate is gone */
	}
}

static void arm(struct pred *p, int (*test)(loco_sst_t *, void *),
                void (*trigger)(loco_sst_t *, void *), unsigned mode)
{
	loco_sst_predicate_t *h;

	SC_ASSERT_OK(loco_sst_predicate_add(tab, test, trigger, p, mode, &h));
	STORE(p->h, h);
}

/* push -- store this node's row and push it to every present row; wait for the acks. */
static void push(bool wait)
{
	int n;

	mine.t_ns = sc_now_ns();
	SC_ASSERT_OK(loco_sst_store_mine(tab, &mine));
	n = loco_sst_push_broadcast(tab, ack);
	if (n < 0)
		SC_FAIL("push_broadcast: %s", loco_strerror(n));
	if (wait)
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
}

static bool rows_are(const uint32_t *want, int n)
{
	uint32_t ids[MAX_ROWS];

	return loco_sst_rows(tab, ids, MAX_ROWS) == n &&
	       memcmp(ids, want, (size_t)n * sizeof(*ids)) == 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void errors(void)
{
	loco_sst_predicate_t *h = (loco_sst_predicate_t *)0x1;
	struct pred p = {0};

	SC_ASSERT_EQ(loco_sst_predicate_add(NULL, test_all, trigger_all, &p, 0, &h), -EINVAL);
	SC_ASSERT_EQ(loco_sst_predicate_add(tab, NULL, trigger_all, &p, 0, &h), -EINVAL);
	SC_ASSERT_EQ(loco_sst_predicate_add(tab, test_all, NULL, &p, 0, &h), -EINVAL);
	SC_ASSERT_EQ(loco_sst_predicate_add(tab, test_all, trigger_all, &p, 7, &h), -EINVAL);
	SC_ASSERT_EQ(loco_sst_predicate_add(tab, test_all, trigger_all, &p, 0, NULL), -EINVAL);
	SC_ASSERT(h == (loco_sst_predicate_t *)0x1);
	SC_ASSERT_EQ(loco_sst_predicate_remove(NULL), -EINVAL);
}

/* open_table -- channel "sst-p" for @nodes nodes with table "p", joined. */
static loco_channel_t *open_table(loco_manager_t *m, uint32_t nodes)
{
	loco_channel_t *ch;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "sst-p", nodes, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "p", sizeof(struct row), MAX_ROWS, &tab));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	return ch;
}

/* extra_main -- node 9: join, push count 1 until the three rows have it, wait to be killed. */
static int extra_main(void)
{
	static const uint32_t with[] = {1, 2, 3, KILLED};
	loco_manager_t *m = sc_start();

	me = loco_manager_node_id(m);
	open_table(m, 4);
	SC_WAIT_UNTIL(rows_are(with, 4), SC_WAIT_MS, "rows {1, 2, 3, 9}");
	mine.count = 1;
	push(true);
	sc_report("ok");
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; sc_now_ms() < dl;)
		sc_sleep_ms(100); /* node 1 SIGKILLs us */
	SC_FAIL("node 1 did not kill node %u", me);
}

static pid_t spawn_extra(loco_manager_t *m, int *fd)
{
	return sc_spawn_node(m, "extra", KILLED, fd);
}

/* wait_seen -- until every live predicate of @ps has read row 1 at @count. */
static void wait_seen(struct pred *const *ps, int n, uint64_t count)
{
	for (int i = 0; i < n; i++)
		SC_WAIT_UNTIL(LOAD(ps[i]->dead) || LOAD(ps[i]->seen) == count + 1, SC_WAIT_MS,
		              ps[i]->name);
}

/* one_shot -- phase 2: "every row >= K" fires once, when every row reached K. */
static void one_shot(struct sc_sync *sync, struct pred *all)
{
	uint64_t k = all->k;

	arm(all, test_all, trigger_all, LOCO_SST_ONE_SHOT);
	for (mine.count = 1; mine.count < k; mine.count++) {
		push(mine.count % 10 == 0 || mine.count == k - 1);
		if (mine.count % 16 == 0)
			sc_sleep_ms(1); /* let the progress thread see the rows on the way */
	}
	sc_sync_wait(sync, "every row at K - 1", SC_WAIT_MS);
	sc_sleep_ms(10);
	if (LOAD(all->fired) != 0)
		SC_FAIL("one-shot fired while every row was at %llu < K",
		        (unsigned long long)k - 1);
	for (; mine.count <= k + 50; mine.count++)
		push(mine.count % 10 == 0 || mine.count == k + 50);
	SC_WAIT_UNTIL(LOAD(all->fired) >= 1, SC_WAIT_MS, "the one-shot trigger");
	sc_sync_wait(sync, "one-shot fired", SC_WAIT_MS);
	sc_sleep_ms(20);
	SC_ASSERT_EQ(LOAD(all->fired), 1);
	sc_log("one-shot 'every row >= %llu' fired once", (unsigned long long)k);
	mine.count = k + 50;
}

/* recurring -- phase 3: node 1's flag rises and falls @edges times. */
static void recurring(struct sc_sync *sync, uint32_t edges)
{
	/* static: "flag" stays armed after we return, until loco_sst_destroy() */
	static struct pred flag = {.name = "recurring"};
	static struct pred gone = {.name = "removed after 3"};
	static struct pred self = {.name = "removes itself", .remove_at = 1};
	struct pred *const ps[] = {&flag, &gone, &self};
	uint64_t base = mine.count; /* node 1's count at each state: base + 2r - 1, base + 2r */
	int64_t lat[MAX_EDGES];

	/* node 1's flag is down and its count at base at every node */
	if (me == 1)
		push(true);
	sc_sync_wait(sync, "row 1 at base", SC_WAIT_MS);
	arm(&flag, test_flag, trigger_flag, LOCO_SST_RECURRING);
	arm(&gone, test_flag, trigger_flag, LOCO_SST_RECURRING);
	arm(&self, test_flag, trigger_flag, LOCO_SST_RECURRING);
	wait_seen(ps, 3, base); /* every node pushed count base last (phase 2) */
	sc_sync_wait(sync, "armed", SC_WAIT_MS);
	for (uint32_t r = 1; r <= edges; r++) {
		if (me == 1) {
			mine.count = base + 2 * r - 1;
			mine.flag = 1;
			push(true);
		}
		wait_seen(ps, 3, base + 2 * r - 1);
		SC_WAIT_UNTIL(LOAD(flag.fired) == (int)r, SC_WAIT_MS, "a rise's trigger");
		if (r <= 3)
			SC_WAIT_UNTIL(LOAD(gone.fired) == (int)r, SC_WAIT_MS, "a rise's trigger");
		if (r == 3) {
			SC_ASSERT_OK(loco_sst_predicate_remove(LOAD(gone.h)));
			STORE(gone.dead, 1);
		}
		sc_sync_wait(sync, "flag up", SC_WAIT_MS);
		if (me == 1) {
			mine.count = base + 2 * r;
			mine.flag = 0;
			push(true);
		}
		wait_seen(ps, 3, base + 2 * r);
		sc_sync_wait(sync, "flag down", SC_WAIT_MS);
	}
	SC_ASSERT_EQ(LOAD(flag.fired), edges);
	SC_ASSERT_EQ(LOAD(gone.fired), 3);
	SC_ASSERT_EQ(LOAD(self.fired), 1);
	SC_ASSERT_EQ(LOAD(self.dead), 1);
	memcpy(lat, flag.lat_ns, edges * sizeof(*lat));
	qsort(lat, edges, sizeof(*lat), cmp_i64);
	sc_log("recurring: %u rises, %u triggers; push -> trigger %s: median %.3f ms, max %.3f ms",
	       edges, (unsigned)LOAD(flag.fired), me == 1 ? "(local)" : "(remote)",
	       lat[edges / 2] / 1e6, lat[edges - 1] / 1e6);
	/* "flag" stays armed: loco_sst_destroy() removes it */
}

/* killed -- phase 4: a row that vanishes makes "every present row >= K" true. */
static void killed(loco_manager_t *m, struct sc_sync *sync, uint64_t k)
{
	static const uint32_t with[] = {1, 2, 3, KILLED}, base[] = {1, 2, 3};
	struct pred gone = {.name = "after the kill", .k = k};
	char line[64];
	pid_t pid = 0;
	int fd = -1;
	int64_t t0;

	if (me == 1)
		pid = spawn_extra(m, &fd);
	SC_WAIT_UNTIL(rows_are(with, 4), SC_WAIT_MS, "rows {1, 2, 3, 9}");
	if (me == 1) {
		sc_read_line(fd, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ok") == 0);
		sc_sync_put(sync, BOX_9_OK, 1);
	}
	SC_WAIT_UNTIL(sc_sync_get(sync, BOX_9_OK) == 1, SC_WAIT_MS, "node 9's ok");
	{
		struct row r9;

		SC_WAIT_UNTIL(loco_sst_read(tab, KILLED, &r9) == 0 && r9.count == 1, SC_WAIT_MS,
		              "row 9 at count 1");
	}
	arm(&gone, test_all, trigger_all, LOCO_SST_ONE_SHOT);
	sc_sync_wait(sync, "armed with node 9 there", SC_WAIT_MS);
	sc_sleep_ms(20);
	SC_ASSERT_EQ(LOAD(gone.fired), 0);
	sc_sync_wait(sync, "not fired with node 9 there", SC_WAIT_MS);
	t0 = sc_now_ms();
	if (me == 1)
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	SC_WAIT_UNTIL(LOAD(gone.fired) == 1, SC_WAIT_MS, "the trigger after node 9's kill");
	SC_ASSERT_EQ(LOAD(gone.row9), 0);
	SC_ASSERT(rows_are(base, 3));
	sc_log("node 9's row vanished: the predicate fired %lld ms after %s",
	       (long long)(sc_now_ms() - t0), me == 1 ? "the kill" : "the barrier");
	sc_sync_wait(sync, "fired after the kill", SC_WAIT_MS);
	sc_sleep_ms(10);
	SC_ASSERT_EQ(LOAD(gone.fired), 1);
	SC_ASSERT_OK(loco_sst_predicate_remove(LOAD(gone.h)));
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	struct pred all = {.name = "every row >= K"};
	uint32_t edges;
	loco_manager_t *m;
	loco_channel_t *ch;
	struct sc_sync sync;

	sc_init("sst-predicate", argc, argv, 100);
	if (argc > 1 && strcmp(argv[1], "extra") == 0)
		return extra_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	ch = open_table(m, 3);
	errors();
	sc_sync_open(&sync, m, 3);
	SC_WAIT_UNTIL(rows_are(base, 3), SC_WAIT_MS, "rows {1, 2, 3}");
	sc_sync_wait(&sync, "rows {1, 2, 3}", SC_WAIT_MS);

	all.k = sc_scaled(300);
	one_shot(&sync, &all);
	edges = sc_scaled(20);
	recurring(&sync, edges < 5 ? 5 : edges);
	killed(m, &sync, all.k);

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_ack_key_destroy(ack);
	loco_sst_destroy(tab); /* removes "every row >= K" (fired) and "recurring" */
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
