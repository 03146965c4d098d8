/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * poller.c -- the progress thread's pollers (loco_poller_add/remove) and
 * the sst predicates built on them, on one node: when a poller is called
 * (every period while idle, at once while busy, never after DONE), the
 * removal rules (waits for a call in progress; from inside its own call),
 * and a predicate's one-shot and recurring edges over this node's row.
 *
 * The functions under test run on the progress thread, where cmocka's
 * asserts may not run: they record what they saw in atomics, and the
 * test's thread asserts on those.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <loco.h>
#include <loco/sst.h>

#define MS          1000000ll
#define WAIT_MAX    (5000 * MS) /* bound of every wait for the progress thread */
#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define INC(x)      __atomic_add_fetch(&(x), 1, __ATOMIC_ACQ_REL)

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000ll, .tv_nsec = ns % 1000000000ll};

	nanosleep(&ts, NULL);
}

/* WAIT_FOR -- poll @cond every millisecond for at most WAIT_MAX; assert it came. */
#define WAIT_FOR(cond)                             \
	do {                                       \
		int64_t dl_ = now_ns() + WAIT_MAX; \
		while (!(cond) && now_ns() < dl_)  \
			sleep_ns(MS);              \
		assert_true(cond);                 \
	} while (0)

static int setup(void **state)
{
	loco_manager_t *m;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
	setenv("LOCO_ADDR", "127.0.0.1:0", 1);
	if (loco_init(NULL, &m) != 0)
		return -1;
	*state = m;
	return 0;
}

static int teardown(void **state)
{
	loco_fini(*state);
	return 0;
}

/* What a poller under test does and saw. */
struct probe {
	loco_poller_t *self; /* its own handle, for removal from inside */
	loco_manager_t *m;
	int calls;           /* atomic */
	int inside;          /* atomic: in a call now */
	int remove_at;       /* remove itself at this call (0: never) */
	int remove_ret;      /* atomic: what that removal returned */
	int busy_for;        /* return BUSY for this many calls */
	int done_at;         /* return DONE at this call (0: never) */
	int64_t sleep_ns;    /* per call (a test of a call in progress only) */
	int64_t last_ns;     /* atomic: when the last call started */
	int64_t max_gap_ns;  /* atomic: the longest time between two calls */
	struct probe *child; /* added from inside the first call */
	int add_ret;         /* atomic: what that add returned */
};

static int probe_fn(void *arg)
{
	struct probe *p = arg;
	int64_t t = now_ns(), last = LOAD(p->last_ns);
	int n, ret;

	STORE(p->inside, 1);
	if (last != 0 && t - last > LOAD(p->max_gap_ns))
		STORE(p->max_gap_ns, t - last);
	STORE(p->last_ns, t);
	n = INC(p->calls);
	if (p->sleep_ns)
		sleep_ns(p->sleep_ns);
	if (p->child != NULL && n == 1)
		STORE(p->add_ret, loco_poller_add(p->m, probe_fn, p->child, 0, &p->child->self));
	STORE(p->inside, 0);
	ret = n <= p->busy_for ? LOCO_POLLER_BUSY : LOCO_POLLER_IDLE;
	if (p->done_at && n == p->done_at)
		ret = LOCO_POLLER_DONE;
	/* last: once remove_ret is set the test may end, and @p with its stack */
	if (p->remove_at && n == p->remove_at)
		STORE(p->remove_ret, loco_poller_remove(LOAD(p->self)));
	return ret;
}

static int noop_fn(void *arg)
{
	(void)arg;
	return LOCO_POLLER_IDLE;
}

static void poller_add__bad_args_are_einval(void **state)
{
	loco_poller_t *p = (loco_poller_t *)0x1;

	/* run + verify: nothing written on failure */
	assert_int_equal(loco_poller_add(NULL, noop_fn, NULL, 0, &p), -EINVAL);
	assert_int_equal(loco_poller_add(*state, NULL, NULL, 0, &p), -EINVAL);
	assert_int_equal(loco_poller_add(*state, noop_fn, NULL, 0, NULL), -EINVAL);
	assert_int_equal(loco_poller_add(*state, noop_fn, NULL, -1, &p), -EINVAL);
	assert_ptr_equal(p, (loco_poller_t *)0x1);
	assert_int_equal(loco_poller_remove(NULL), -EINVAL);
}

static void poller__idle_node_calls_it_every_period_without_spinning(void **state)
{
	struct probe pr = {0};
	loco_poller_t *p;
	int n;

	/* configure: an idle node (no traffic; heartbeats have nobody to go to) */
	sleep_ns(20 * MS);

	/* run: a 2 ms period for 300 ms */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 2 * MS, &p), 0);
	sleep_ns(300 * MS);
	assert_int_equal(loco_poller_remove(p), 0);

	/* verify: about 150 calls; gaps far below the 250 ms heartbeat wake; no spinning */
	n = LOAD(pr.calls);
	print_message("2 ms period: %d calls in 300 ms, longest gap %.2f ms\n", n,
	              LOAD(pr.max_gap_ns) / 1e6);
	assert_in_range(n, 30, 1000);
	assert_true(LOAD(pr.max_gap_ns) < 100 * MS);
}

static void poller__short_periods_are_raised_to_the_minimum(void **state)
{
	struct probe pr = {0};
	loco_poller_t *p;
	int n;

	/* run: period 1 ns, i.e. LOCO_POLLER_PERIOD_MIN_NS (100 us), for 200 ms */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 1, &p), 0);
	sleep_ns(200 * MS);
	assert_int_equal(loco_poller_remove(p), 0);

	/* verify: at most ~2000 turns (a spin would make 100x more) */
	n = LOAD(pr.calls);
	print_message("1 ns period: %d calls in 200 ms\n", n);
	assert_in_range(n, 20, 4000);
}

static void poller__busy_turns_again_at_once(void **state)
{
	struct probe pr = {.busy_for = 2000};
	loco_poller_t *p;
	int64_t t0 = now_ns(), dt;

	/* run: a 100 ms period, but BUSY for 2000 calls */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 100 * MS, &p), 0);
	WAIT_FOR(LOAD(pr.calls) >= 2000);
	dt = now_ns() - t0;
	assert_int_equal(loco_poller_remove(p), 0);

	/* verify: 2000 sleeps of a period would take 200 s */
	print_message("2000 busy calls in %.1f ms\n", dt / 1e6);
	assert_true(dt < 4000 * MS);
}

static void poller__done_is_not_called_again(void **state)
{
	struct probe pr = {.done_at = 3};
	loco_poller_t *p;

	/* run */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 0, &p), 0);
	WAIT_FOR(LOAD(pr.calls) >= 3);
	sleep_ns(30 * MS); /* ~30 periods */

	/* verify */
	assert_int_equal(LOAD(pr.calls), 3);
	assert_int_equal(loco_poller_remove(p), 0);
}

/* A poller that parks whenever nothing is pending, and takes what is. */
struct parker {
	int pending;     /* atomic: work for it, set by the test before a kick */
	int calls;       /* atomic */
	int taken;       /* atomic: pending works it took */
	int64_t slow_ns; /* between finding nothing and saying PARK (widens the race) */
};

static int park_fn(void *arg)
{
	struct parker *k = arg;
	int64_t until;

	INC(k->calls);
	if (__atomic_exchange_n(&k->pending, 0, __ATOMIC_ACQ_REL)) {
		INC(k->taken);
		return LOCO_POLLER_IDLE;
	}
	for (until = now_ns() + k->slow_ns; now_ns() < until;)
		;
	return LOCO_POLLER_PARK;
}

static void poller__parked_is_not_called_until_kicked(void **state)
{
	struct parker k = {0};
	loco_poller_t *p;
	int n;

	/* run: a 1 ms period; it parks on its first call (called once more to close the race) */
	assert_int_equal(loco_poller_add(*state, park_fn, &k, MS, &p), 0);
	WAIT_FOR(LOAD(k.calls) >= 2);
	sleep_ns(50 * MS); /* ~50 periods */
	n = LOAD(k.calls);

	/* verify: parked, it is not called every period */
	assert_int_equal(n, 2);

	/* run: work, then a kick */
	STORE(k.pending, 1);
	assert_int_equal(loco_poller_kick(p), 0);
	WAIT_FOR(LOAD(k.taken) == 1);
	WAIT_FOR(LOAD(k.calls) >= n + 3); /* took it, then parked again (two calls) */
	sleep_ns(20 * MS);

	/* verify: parked again */
	assert_int_equal(LOAD(k.calls), n + 3);
	assert_int_equal(loco_poller_remove(p), 0);
	assert_int_equal(loco_poller_kick(NULL), -EINVAL);
}

static void poller_kick__never_loses_work_to_a_poller_parking(void **state)
{
	struct parker k = {.slow_ns = 100000};
	loco_poller_t *p;
	int lost = 0;

	/*
	 * run: 2000 rounds of work + kick while the progress thread parks the poller after each,
	 * the work stored 0-127 us after the last was taken, often while the poller, having found
	 * nothing, is about to say PARK: a kick that read the flag before the walk raised it,
	 * with no last call after the flag to see the work, would leave it parked with the work
	 * pending until the wait's bound.
	 */
	assert_int_equal(loco_poller_add(*state, park_fn, &k, 1, &p), 0);
	for (int i = 1; i <= 2000 && !lost; i++) {
		int64_t dl = now_ns() + WAIT_MAX;

		for (int64_t t = now_ns() + (i * 7919) % 128 * 1000; now_ns() < t;)
			;
		STORE(k.pending, 1);
		assert_int_equal(loco_poller_kick(p), 0);
		while (LOAD(k.taken) != i && now_ns() < dl)
			;
		lost = LOAD(k.taken) != i;
		if (lost)
			print_message("round %d: the work was not taken in %lld ms\n", i,
			              (long long)(WAIT_MAX / MS));
	}
	assert_int_equal(loco_poller_remove(p), 0);

	/* verify */
	assert_false(lost);
	assert_int_equal(LOAD(k.taken), 2000);
}

static void poller_remove__waits_for_the_call_in_progress(void **state)
{
	struct probe pr = {.sleep_ns = 50 * MS};
	loco_poller_t *p;
	int n;

	/* configure: a call that lasts 50 ms */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 0, &p), 0);
	WAIT_FOR(LOAD(pr.inside) == 1);

	/* run */
	assert_int_equal(loco_poller_remove(p), 0);

	/* verify: the call has returned, and no other comes */
	assert_int_equal(LOAD(pr.inside), 0);
	n = LOAD(pr.calls);
	sleep_ns(30 * MS);
	assert_int_equal(LOAD(pr.calls), n);
	assert_int_equal(LOAD(pr.inside), 0);
}

static void poller_remove__from_inside_its_own_call(void **state)
{
	struct probe pr = {.remove_at = 3, .remove_ret = 1};
	loco_poller_t *p;

	/* run: the third call removes the poller */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 0, &p), 0);
	STORE(pr.self, p); /* a call before this sees NULL: remove_at is 3 */
	WAIT_FOR(LOAD(pr.remove_ret) != 1);
	sleep_ns(30 * MS);

	/* verify: removed (the progress thread freed it), never called again */
	assert_int_equal(LOAD(pr.remove_ret), 0);
	assert_int_equal(LOAD(pr.calls), 3);
}

static void poller_add__from_inside_a_call(void **state)
{
	struct probe child = {0};
	struct probe pr = {.m = *state, .child = &child, .add_ret = 1};
	loco_poller_t *p;

	/* run: the first call adds another poller */
	assert_int_equal(loco_poller_add(*state, probe_fn, &pr, 0, &p), 0);
	WAIT_FOR(LOAD(child.calls) >= 3);

	/* verify */
	assert_int_equal(LOAD(pr.add_ret), 0);
	assert_int_equal(loco_poller_remove(p), 0);
	assert_int_equal(loco_poller_remove(LOAD(child.self)), 0);
}

static void fini__frees_pollers_left(void **state)
{
	loco_manager_t *m = NULL;
	loco_poller_t *p;
	struct probe pr = {0};

	/* configure: a manager of its own, with a poller never removed */
	(void)state;
	assert_int_equal(setup((void **)&m), 0);
	assert_int_equal(loco_poller_add(m, probe_fn, &pr, 0, &p), 0);
	WAIT_FOR(LOAD(pr.calls) >= 1);

	/* run + verify: no call after loco_fini (the sanitizer builds see a leak) */
	loco_fini(m);
	assert_int_equal(LOAD(pr.inside), 0);
}

/* ------------------------------------------------------------------ */
/* sst predicates over this node's own row                            */

struct pred_probe {
	uint64_t at_least; /* the test: own row >= at_least; or odd with odd */
	int odd;
	uint32_t me;
	uint64_t seen; /* atomic: the row the last test read, + 1 */
	int fired;     /* atomic */
	int wrong;     /* atomic: a trigger whose own read found the test false */
	loco_sst_predicate_t *self;
	int remove_at;  /* the trigger removes its predicate at this firing */
	int remove_ret; /* atomic */
	int dead;       /* atomic: removed, its test no longer runs */
};

static int pred_holds(struct pred_probe *pp, uint64_t v)
{
	return pp->odd ? (v & 1) != 0 : v >= pp->at_least;
}

static int pred_test(loco_sst_t *sst, void *arg)
{
	struct pred_probe *pp = arg;
	uint64_t v;

	if (loco_sst_read(sst, pp->me, &v) != 0)
		return 0;
	STORE(pp->seen, v + 1);
	return pred_holds(pp, v);
}

static void pred_trigger(loco_sst_t *sst, void *arg)
{
	struct pred_probe *pp = arg;
	uint64_t v;
	int n;

	if (loco_sst_read(sst, pp->me, &v) != 0 || !pred_holds(pp, v))
		INC(pp->wrong);
	n = INC(pp->fired);
	if (pp->remove_at && n == pp->remove_at) {
		STORE(pp->remove_ret, loco_sst_predicate_remove(LOAD(pp->self)));
		STORE(pp->dead, 1);
	}
}

struct table {
	loco_channel_t *ch;
	loco_sst_t *sst;
};

static void table_open(loco_manager_t *m, struct table *t)
{
	assert_int_equal(loco_channel_create(m, NULL, "pred", 1, &t->ch), 0);
	assert_int_equal(loco_sst_create(t->ch, "t", 8, 4, &t->sst), 0);
	assert_int_equal(loco_channel_join(t->ch, 0), 0); /* alone: at once; stores need it */
}

static void table_close(struct table *t)
{
	loco_sst_destroy(t->sst);
	assert_int_equal(loco_channel_destroy(t->ch), 0);
}

/* store_seen -- store @v as this node's row; wait until the predicates' tests read it. */
static void store_seen(struct table *t, struct pred_probe **pps, int n, uint64_t v)
{
	assert_int_equal(loco_sst_store_mine(t->sst, &v), 0);
	for (int i = 0; i < n; i++)
		WAIT_FOR(LOAD(pps[i]->seen) == v + 1 || LOAD(pps[i]->dead));
}

static void sst_predicate_add__bad_args_are_einval(void **state)
{
	struct table t;
	struct pred_probe pp = {0};
	loco_sst_predicate_t *p = (loco_sst_predicate_t *)0x1;

	/* configure */
	table_open(*state, &t);

	/* run + verify: nothing written on failure */
	assert_int_equal(loco_sst_predicate_add(NULL, pred_test, pred_trigger, &pp, 0, &p),
	                 -EINVAL);
	assert_int_equal(loco_sst_predicate_add(t.sst, NULL, pred_trigger, &pp, 0, &p), -EINVAL);
	assert_int_equal(loco_sst_predicate_add(t.sst, pred_test, NULL, &pp, 0, &p), -EINVAL);
	assert_int_equal(loco_sst_predicate_add(t.sst, pred_test, pred_trigger, &pp, 2, &p),
	                 -EINVAL);
	assert_int_equal(loco_sst_predicate_add(t.sst, pred_test, pred_trigger, &pp, 0, NULL),
	                 -EINVAL);
	assert_ptr_equal(p, (loco_sst_predicate_t *)0x1);
	assert_int_equal(loco_sst_predicate_remove(NULL), -EINVAL);
	table_close(&t);
}

static void sst_predicate__one_shot_fires_once_when_true(void **state)
{
	struct pred_probe pp = {.at_least = 5, .me = loco_manager_node_id(*state)};
	struct pred_probe *pps[] = {&pp};
	loco_sst_predicate_t *p;
	struct table t;

	/* configure */
	table_open(*state, &t);
	assert_int_equal(
	    loco_sst_predicate_add(t.sst, pred_test, pred_trigger, &pp, LOCO_SST_ONE_SHOT, &p), 0);
	STORE(pp.self, p);

	/* run + verify: false up to 4; true at 5; again true after a false */
	for (uint64_t v = 1; v <= 4; v++)
		store_seen(&t, pps, 1, v);
	assert_int_equal(LOAD(pp.fired), 0);
	store_seen(&t, pps, 1, 5);
	WAIT_FOR(LOAD(pp.fired) == 1);
	assert_int_equal(loco_sst_store_mine(t.sst, &(uint64_t){0}), 0);
	sleep_ns(20 * MS); /* a fired one-shot predicate is not evaluated any more */
	assert_int_equal(loco_sst_store_mine(t.sst, &(uint64_t){9}), 0);
	sleep_ns(20 * MS);
	assert_int_equal(LOAD(pp.fired), 1);
	assert_int_equal(LOAD(pp.seen), 5 + 1);
	assert_int_equal(LOAD(pp.wrong), 0);
	assert_int_equal(loco_sst_predicate_remove(p), 0);
	table_close(&t);
}

/*
 * A predicate true when added fires at once, and its trigger may remove
 * it through the handle add wrote: add must neither evaluate it before
 * writing *out nor touch it afterwards (it touched it once freed: ASan).
 */
static void sst_predicate__trigger_removes_it_as_soon_as_added(void **state)
{
	struct table t;

	table_open(*state, &t);
	assert_int_equal(loco_sst_store_mine(t.sst, &(uint64_t){7}), 0);
	for (int i = 0; i < 200; i++) {
		struct pred_probe pp = {.at_least = 5,
		                        .me = loco_manager_node_id(*state),
		                        .remove_at = 1,
		                        .remove_ret = 1};

		assert_int_equal(loco_sst_predicate_add(t.sst, pred_test, pred_trigger, &pp,
		                                        LOCO_SST_ONE_SHOT, &pp.self),
		                 0);
		WAIT_FOR(LOAD(pp.dead));
		assert_int_equal(LOAD(pp.fired), 1);
		assert_int_equal(LOAD(pp.remove_ret), 0);
		assert_int_equal(LOAD(pp.wrong), 0);
	}
	table_close(&t);
}

static void sst_predicate__recurring_counts_edges_and_removal_stops_it(void **state)
{
	uint32_t me = loco_manager_node_id(*state);
	struct pred_probe all = {.odd = 1, .me = me};
	struct pred_probe self = {.odd = 1, .me = me, .remove_at = 2, .remove_ret = 1};
	struct pred_probe gone = {.odd = 1, .me = me};
	struct pred_probe *pps[] = {&all, &self, &gone};
	loco_sst_predicate_t *p[3];
	struct table t;

	/* configure: three recurring predicates "own row is odd" */
	table_open(*state, &t);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(loco_sst_predicate_add(t.sst, pred_test, pred_trigger, pps[i],
		                                        LOCO_SST_RECURRING, &p[i]),
		                 0);
		STORE(pps[i]->self, p[i]);
	}

	/* run: 10 false -> true edges, each state seen by every test; "gone" removed after 3,
	 * "self" removes itself in its second trigger */
	for (uint64_t v = 1; v <= 20; v++) {
		store_seen(&t, pps, 3, v);
		if (v % 2 == 1)
			WAIT_FOR(LOAD(all.fired) == (int)(v + 1) / 2);
		if (v == 6) {
			assert_int_equal(loco_sst_predicate_remove(p[2]), 0);
			STORE(gone.dead, 1);
		}
	}

	/* verify */
	assert_int_equal(LOAD(all.fired), 10);
	assert_int_equal(LOAD(self.fired), 2);
	assert_int_equal(LOAD(self.remove_ret), 0);
	assert_int_equal(LOAD(gone.fired), 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(LOAD(pps[i]->wrong), 0);
	table_close(&t); /* removes "all" */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(poller_add__bad_args_are_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        poller__idle_node_calls_it_every_period_without_spinning, setup, teardown),
	    cmocka_unit_test_setup_teardown(poller__short_periods_are_raised_to_the_minimum, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(poller__busy_turns_again_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(poller__done_is_not_called_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(poller__parked_is_not_called_until_kicked, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(poller_kick__never_loses_work_to_a_poller_parking,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(poller_remove__waits_for_the_call_in_progress, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(poller_remove__from_inside_its_own_call, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(poller_add__from_inside_a_call, setup, teardown),
	    cmocka_unit_test(fini__frees_pollers_left),
	    cmocka_unit_test_setup_teardown(sst_predicate_add__bad_args_are_einval, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(sst_predicate__one_shot_fires_once_when_true, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(sst_predicate__trigger_removes_it_as_soon_as_added,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        sst_predicate__recurring_counts_edges_and_removal_stops_it, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
