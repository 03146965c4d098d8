/* SPDX-License-Identifier: BSD-2-Clause */
/* ack-mt.c -- producers attaching and completers completing in shuffled order, one waiter */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "ack.h"

/*
 * Each round, NPROD producers attach PER_PROD operations each, alternating
 * between two keys, and "post" them: they take a ticket in a shared queue
 * (an array filled in ticket order, each entry published with a release
 * store of its ready flag). Phase 1: producers post HALF each while the
 * completers are held back, and the waiter checks the exact outstanding
 * counts and that wait(0) times out. Phase 2: producers post the rest --
 * many more than a key holds, so they meet -EAGAIN and retry, as a poster
 * under back-pressure would -- and attach + detach a spare now and then (a
 * post that failed), while NCOMP completers claim batches of tickets,
 * shuffle each batch and complete it. Phase 2 is long enough (thousands of
 * operations per thread) for the threads to overlap on two CPUs. A completer marks its entry done
 * with a plain store before lc_ack_complete(), as a NIC writes the data of an operation before its
 * completion; once the producers are finished, the waiter's lc_ack_wait() must return only when
 * every entry is done (plain loads after the wait: TSan reports a race if the release/acquire
 * pairing is broken), with the first injected error of that key or 0. Phases are separated by a
 * yielding barrier (no sleeps). Workers are pinned round-robin to the CPUs the process may use, so
 * producers and completers really run at the same time even where the scheduler would pack them
 * onto one CPU.
 */
#define NPROD      3
#define NCOMP      3
#define NTHREADS   (NPROD + NCOMP + 1)
#define NKEYS      2
#define HALF       300  /* per producer in phase 1: NPROD * HALF / NKEYS fit in a key */
#define PER_PROD   4300 /* per producer and round; keys fill up in phase 2 */
#define TOTAL      (NPROD * PER_PROD)
#define ROUNDS     200
#define BATCH      16
#define SPIN_MAX   10000000ul /* bound on every busy-wait */
#define LONG_WAIT  (30ll * 1000000000ll)
#define ERR_STRIDE 397

_Static_assert(NPROD *HALF / NKEYS <= LC_ACK_SLOTS, "phase 1 never fills a key");
_Static_assert(NPROD *PER_PROD / NKEYS > 4 * LC_ACK_SLOTS, "phase 2 fills the keys");
_Static_assert(HALF % NKEYS == 0, "phase 1 splits evenly between the keys");

static const int errs[] = {-EIO, -ECONNRESET, -EPIPE, -EHOSTDOWN,
                           -EHOSTUNREACH}; /* as keys keep them */

struct entry {
	uint64_t wrid; /* plain: published by ready */
	int key;       /* plain: published by ready */
	int status;    /* plain: published by ready */
	int done;      /* plain: published by lc_ack_complete() / lc_ack_wait() */
	int ready;     /* atomic */
};

struct shared {
	struct lc_ack_table t;
	loco_ack_key_t *key[NKEYS];
	struct entry q[TOTAL];
	unsigned tail;           /* atomic: producer tickets */
	unsigned head;           /* atomic: completer tickets */
	unsigned producers_done; /* atomic */
	unsigned round;          /* plain: written by the waiter before the start barrier */
	unsigned bar_count;      /* atomic: threads arrived at the barrier */
	unsigned bar_gen;        /* atomic: barrier passes so far */
	unsigned long bad;       /* atomic: failures seen by the worker threads */
	unsigned long spares;    /* atomic: attach + detach pairs */
	unsigned long completed; /* atomic */
	unsigned long eagain;    /* atomic: attaches refused by a full key */
};

static struct shared sh;

static int status_of(unsigned round, unsigned pos)
{
	if (round % 4 != 1 || pos % ERR_STRIDE != 13)
		return 0;
	return errs[(pos / ERR_STRIDE) % (sizeof(errs) / sizeof(errs[0]))];
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void bad(void)
{
	__atomic_fetch_add(&sh.bad, 1, __ATOMIC_RELAXED);
}

/*
 * barrier -- wait until all NTHREADS threads arrived. The last one resets
 * the count and bumps the generation; the others yield until it changes.
 */
static void barrier(void)
{
	unsigned gen = __atomic_load_n(&sh.bar_gen, __ATOMIC_ACQUIRE);
	unsigned long spin;

	/* acq_rel: the last arrival sees every thread's work before the barrier */
	if (__atomic_add_fetch(&sh.bar_count, 1, __ATOMIC_ACQ_REL) == NTHREADS) {
		__atomic_store_n(&sh.bar_count, 0, __ATOMIC_RELAXED);
		/* pairs with the acquire loads below: the others see it all too */
		__atomic_store_n(&sh.bar_gen, gen + 1, __ATOMIC_RELEASE);
		return;
	}
	for (spin = 0; spin < SPIN_MAX && __atomic_load_n(&sh.bar_gen, __ATOMIC_ACQUIRE) == gen;
	     spin++)
		sched_yield();
	if (spin == SPIN_MAX)
		bad();
}

/*
 * post -- attach one operation to key @k (retrying while the key is full)
 * and publish it in the queue. A failure still publishes an entry (wrid 0,
 * which the completion refuses), so the completers never wait for it.
 */
static void post(int k, unsigned round)
{
	unsigned long tries;
	struct entry *e;
	uint64_t wrid = 0;
	unsigned pos;
	int ret = -EAGAIN;

	for (tries = 0; tries < SPIN_MAX && ret == -EAGAIN; tries++) {
		ret = lc_ack_attach(sh.key[k], &wrid);
		if (ret == -EAGAIN) {
			__atomic_fetch_add(&sh.eagain, 1, __ATOMIC_RELAXED);
			sched_yield(); /* back-pressure: let the completers run */
		}
	}
	if (ret != 0)
		bad();
	pos = __atomic_fetch_add(&sh.tail, 1, __ATOMIC_RELAXED);
	if (pos >= TOTAL) {
		bad();
		return;
	}
	e = &sh.q[pos];
	e->wrid = wrid;
	e->key = k;
	e->status = status_of(round, pos);
	/* pairs with the acquire load in completer() */
	__atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
}

/* pin -- run the calling worker on the @n-th CPU of the process's set (best effort). */
static void pin(unsigned n)
{
	cpu_set_t all, one;
	unsigned cpu, seen = 0, ncpu;

	if (sched_getaffinity(0, sizeof(all), &all) != 0)
		return;
	ncpu = (unsigned)CPU_COUNT(&all);
	if (ncpu < 2)
		return;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &all))
			continue;
		if (seen++ == n % ncpu) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			(void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
			return;
		}
	}
}

static void *producer(void *p)
{
	unsigned id = (unsigned)(uintptr_t)p, r, i;
	uint64_t spare;
	int ret;

	pin(id);
	for (r = 0; r < ROUNDS; r++) {
		barrier(); /* start */
		for (i = 0; i < HALF; i++)
			post((int)((i + id) % NKEYS), sh.round);
		barrier(); /* phase1 */
		barrier(); /* go */
		for (i = HALF; i < PER_PROD; i++) {
			post((int)((i + id) % NKEYS), sh.round);
			if (i % 8 == id) {
				/* a post that failed: the slot goes back, no error */
				ret = lc_ack_attach(sh.key[i % NKEYS], &spare);
				if (ret == -EAGAIN)
					continue; /* full: nothing to give back */
				if (ret != 0) {
					bad();
					continue;
				}
				lc_ack_detach(sh.key[i % NKEYS], spare);
				__atomic_fetch_add(&sh.spares, 1, __ATOMIC_RELAXED);
			}
		}
		/* pairs with the acquire load in the waiter */
		__atomic_fetch_add(&sh.producers_done, 1, __ATOMIC_RELEASE);
		barrier(); /* end */
	}
	return NULL;
}

/* complete_batch -- wait for tickets [first, first + n) to be ready, shuffle, complete. */
static void complete_batch(unsigned first, unsigned n, uint64_t *seed)
{
	unsigned idx[BATCH], i, j, tmp;
	unsigned long spin;
	struct entry *e;

	for (i = 0; i < n; i++) {
		idx[i] = first + i;
		e = &sh.q[first + i];
		/* pairs with the release store in post() */
		for (spin = 0; spin < SPIN_MAX && !__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE);
		     spin++)
			sched_yield();
		if (spin == SPIN_MAX)
			bad();
	}
	for (i = n; i > 1; i--) {
		j = (unsigned)(xorshift(seed) % i);
		tmp = idx[i - 1];
		idx[i - 1] = idx[j];
		idx[j] = tmp;
	}
	for (i = 0; i < n; i++) {
		e = &sh.q[idx[i]];
		e->done = 1; /* the operation's effect, before its completion */
		if (lc_ack_complete(&sh.t, e->wrid, e->status) != 0)
			bad();
		__atomic_fetch_add(&sh.completed, 1, __ATOMIC_RELAXED);
	}
}

static void *completer(void *p)
{
	uint64_t seed = 0x2545f4914f6cdd1dull * ((uintptr_t)p + 1);
	unsigned r, first, n, iter;

	pin((unsigned)(uintptr_t)p + 1); /* a completer next to each producer */
	for (r = 0; r < ROUNDS; r++) {
		barrier(); /* start */
		barrier(); /* phase1 */
		barrier(); /* go */
		for (iter = 0; iter <= TOTAL; iter++) {
			first = __atomic_fetch_add(&sh.head, BATCH, __ATOMIC_RELAXED);
			if (first >= TOTAL)
				break;
			n = TOTAL - first < BATCH ? TOTAL - first : BATCH;
			complete_batch(first, n, &seed);
		}
		barrier(); /* end */
	}
	return NULL;
}

/* expected_ok -- whether @ret is 0 with no error on key @k, or one of its injected errors. */
static int expected_ok(int k, int ret)
{
	int any = 0;
	unsigned i;

	for (i = 0; i < TOTAL; i++) {
		if (sh.q[i].key != k || sh.q[i].status == 0)
			continue;
		any = 1;
		if (sh.q[i].status == ret)
			return 1;
	}
	return !any && ret == 0;
}

static void mt__wait_returns_when_all_completed(void **state)
{
	pthread_t th[NPROD + NCOMP];
	unsigned long spin, errors_seen = 0;
	unsigned i, r;
	int k, ret;

	(void)state;
	/* configure mocks */
	memset(&sh, 0, sizeof(sh));
	assert_int_equal(lc_ack_table_init(&sh.t, 8), 0);
	for (k = 0; k < NKEYS; k++)
		assert_int_equal(lc_ack_key_new(&sh.t, NULL, &sh.key[k]), 0);
	for (i = 0; i < NPROD; i++)
		assert_int_equal(pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)i), 0);
	for (i = 0; i < NCOMP; i++)
		assert_int_equal(
		    pthread_create(&th[NPROD + i], NULL, completer, (void *)(uintptr_t)i), 0);

	/* run test */
	for (r = 0; r < ROUNDS; r++) {
		memset(sh.q, 0, sizeof(sh.q)); /* the workers are parked at start */
		sh.round = r;
		__atomic_store_n(&sh.tail, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&sh.head, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&sh.producers_done, 0, __ATOMIC_RELAXED);
		barrier(); /* start */

		/* phase 1: only producers run; the counts are exact */
		barrier(); /* phase1 */
		for (k = 0; k < NKEYS; k++) {
			assert_int_equal(lc_ack_outstanding(sh.key[k]), NPROD * HALF / NKEYS);
			assert_int_equal(lc_ack_wait(sh.key[k], 0), LC_ACK_BUSY);
		}
		barrier(); /* go */

		/* phase 2: wait for the producers, then for the completions */
		for (spin = 0; spin < SPIN_MAX; spin++) {
			/* pairs with the release increment in producer() */
			if (__atomic_load_n(&sh.producers_done, __ATOMIC_ACQUIRE) == NPROD)
				break;
			sched_yield();
		}
		assert_true(spin < SPIN_MAX);
		for (k = 0; k < NKEYS; k++) {
			ret = lc_ack_wait(sh.key[k], LONG_WAIT);

			/* verify the results */
			assert_true(expected_ok(k, ret));
			errors_seen += ret != 0;
			assert_int_equal(lc_ack_outstanding(sh.key[k]), 0);
			assert_int_equal(lc_ack_wait(sh.key[k], 0), 0); /* the error was cleared */
		}
		for (i = 0; i < TOTAL; i++) {
			assert_int_equal(__atomic_load_n(&sh.q[i].ready, __ATOMIC_RELAXED), 1);
			assert_int_equal(sh.q[i].done, 1); /* plain: ordered by lc_ack_wait() */
		}
		assert_int_equal(__atomic_load_n(&sh.tail, __ATOMIC_RELAXED), TOTAL);
		barrier(); /* end */
	}

	/* verify the results */
	for (i = 0; i < NPROD + NCOMP; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(sh.bad, 0);
	assert_int_equal(sh.completed, (unsigned long)ROUNDS * TOTAL);
	assert_true(sh.spares > 0);
	assert_true(sh.eagain > 0);                   /* the keys did fill up */
	assert_true(errors_seen >= (ROUNDS + 2) / 4); /* each such round fails on >= 1 key */
	for (k = 0; k < NKEYS; k++)
		assert_true(lc_ack_idle(sh.key[k]));
	lc_ack_table_fini(&sh.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(mt__wait_returns_when_all_completed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
