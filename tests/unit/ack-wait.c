/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack-wait.c -- lc_ack_wait: idle, test-once, timeouts (LC_ACK_BUSY), errors kept across
 * timeouts, an operation's own -ETIMEDOUT, wake-ups
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "ack.h"

#define NKEYS     2
#define MS        1000000ll
#define LONG_WAIT (20000 * MS) /* bound for waits that must succeed */
#define YIELDS    2000u        /* completer yields before completing: reach the yield loop */

struct fixture {
	struct lc_ack_table t;
	loco_ack_key_t *key;
};

static int setup(void **state)
{
	static struct fixture fx;

	memset(&fx, 0, sizeof(fx));
	if (lc_ack_table_init(&fx.t, NKEYS) != 0)
		return -1;
	if (lc_ack_key_new(&fx.t, NULL, &fx.key) != 0)
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	lc_ack_table_fini(&fx->t);
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void wait__null_key_is_einval(void **state)
{
	(void)state;
	/* configure mocks: none */

	/* run test, verify the results */
	assert_int_equal(lc_ack_wait(NULL, 0), -EINVAL);
	assert_int_equal(lc_ack_wait(NULL, -1), -EINVAL);
}

static void wait__idle_key_returns_0(void **state)
{
	struct fixture *fx = *state;

	/* configure mocks: nothing attached */

	/* run test, verify the results */
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
	assert_int_equal(lc_ack_wait(fx->key, MS), 0);
	assert_int_equal(lc_ack_wait(fx->key, -1), 0);
}

static void wait__zero_timeout_tests_once(void **state)
{
	struct fixture *fx = *state;
	uint64_t w;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);

	/* run test */
	assert_int_equal(lc_ack_wait(fx->key, 0), LC_ACK_BUSY);

	/* verify the results */
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

/*
 * The idle test reads only the words a slot was ever taken in: a key is
 * idle when every one of them is, wherever its slots went. Fill word 0,
 * spill into word 1, then drain in an order that leaves one word busy
 * while the other is empty, both ways round; then, with the attach hint
 * moved past word 0, a single slot in a later word keeps the key busy.
 */
static void wait__idle_needs_every_word_empty(void **state)
{
	struct fixture *fx = *state;
	static uint64_t w[LC_ACK_SLOTS];
	const unsigned n = 64 + 3;
	uint64_t one;

	/* configure mocks */
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(lc_ack_attach(fx->key, &w[i]), 0);
	assert_int_equal(lc_ack_outstanding(fx->key), n);

	/* run test: word 0 empties, word 1 still holds three */
	for (unsigned i = 0; i < 64; i++)
		assert_int_equal(lc_ack_complete(&fx->t, w[i], 0), 0);

	/* verify the results */
	assert_false(lc_ack_idle(fx->key));
	assert_int_equal(lc_ack_wait(fx->key, 0), LC_ACK_BUSY);
	assert_int_equal(lc_ack_outstanding(fx->key), 3);
	for (unsigned i = 64; i < n; i++)
		assert_int_equal(lc_ack_complete(&fx->t, w[i], 0), 0);
	assert_true(lc_ack_idle(fx->key));
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);

	/* the hint moved on: the next slot goes to a later word, and counts */
	assert_int_equal(lc_ack_attach(fx->key, &one), 0);
	assert_false(lc_ack_idle(fx->key));
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_int_equal(lc_ack_complete(&fx->t, one, 0), 0);
	assert_true(lc_ack_idle(fx->key));

	/* every word at once, emptied from the last word to the first */
	for (unsigned i = 0; i < LC_ACK_SLOTS; i++)
		assert_int_equal(lc_ack_attach(fx->key, &w[i]), 0);
	for (unsigned i = LC_ACK_SLOTS; i-- > 0;) {
		assert_false(lc_ack_idle(fx->key));
		assert_int_equal(lc_ack_outstanding(fx->key), i + 1);
		assert_int_equal(lc_ack_complete(&fx->t, w[i], 0), 0);
	}
	assert_true(lc_ack_idle(fx->key));
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void wait__timeout_with_ops_outstanding(void **state)
{
	struct fixture *fx = *state;
	int64_t t0, elapsed;
	uint64_t w;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);

	/* run test */
	t0 = now_ns();
	assert_int_equal(lc_ack_wait(fx->key, 20 * MS), LC_ACK_BUSY);
	elapsed = now_ns() - t0;

	/* verify the results: the timeout was honoured, roughly */
	assert_true(elapsed >= 20 * MS);
	assert_true(elapsed < LONG_WAIT);
	assert_int_equal(lc_ack_wait(fx->key, 1), LC_ACK_BUSY); /* shorter than the spin phase */
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
}

static void wait__huge_timeout_does_not_overflow(void **state)
{
	struct fixture *fx = *state;
	uint64_t w;

	/* configure mocks: an operation that has already completed with an error */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w, -EIO), 0);

	/* run test, verify the results */
	assert_int_equal(lc_ack_wait(fx->key, INT64_MAX), -EIO);
	assert_int_equal(lc_ack_wait(fx->key, INT64_MAX), 0);
}

static void wait__error_survives_a_timeout(void **state)
{
	struct fixture *fx = *state;
	uint64_t a, b;

	/* configure mocks: one operation failed, another is still outstanding */
	assert_int_equal(lc_ack_attach(fx->key, &a), 0);
	assert_int_equal(lc_ack_attach(fx->key, &b), 0);
	assert_int_equal(lc_ack_complete(&fx->t, a, -EHOSTUNREACH), 0);

	/* run test */
	assert_int_equal(lc_ack_wait(fx->key, 0), LC_ACK_BUSY);
	assert_int_equal(lc_ack_wait(fx->key, MS), LC_ACK_BUSY);
	assert_int_equal(lc_ack_complete(&fx->t, b, 0), 0);

	/* verify the results */
	assert_int_equal(lc_ack_wait(fx->key, 0), -EHOSTUNREACH);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

/*
 * An operation that failed with -ETIMEDOUT (its peer stopped answering) is
 * not "outstanding at the deadline": loco_ack_wait() waits in slices and
 * took one for the other, cleared the error and returned 0 (objects
 * ack-op-timeout; a lock granted one token twice).
 */
static void wait__op_timeout_is_not_busy(void **state)
{
	struct fixture *fx = *state;
	uint64_t w;

	/* configure mocks: an operation that failed with -ETIMEDOUT */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w, -ETIMEDOUT), 0);

	/* run test, verify the results: the error, once; never LC_ACK_BUSY */
	assert_int_equal(lc_ack_wait(fx->key, 20 * MS), -EHOSTDOWN);
	assert_int_equal(lc_ack_outstanding(fx->key), 0);
	assert_int_equal(lc_ack_wait(fx->key, 20 * MS), 0);
	assert_int_not_equal(LC_ACK_BUSY, -ETIMEDOUT);
	assert_true(LC_ACK_BUSY > 0); /* no errno: no operation's error can look like it */
}

struct completer {
	struct lc_ack_table *t;
	uint64_t wrids[8];
	unsigned n;
	int status; /* of the last completion */
	unsigned yields;
	int started; /* atomic */
	int rets;    /* atomic: non-zero lc_ack_complete() results */
};

static void *complete_later(void *p)
{
	struct completer *c = p;
	unsigned i;

	__atomic_store_n(&c->started, 1, __ATOMIC_RELEASE);
	for (i = 0; i < c->yields; i++)
		sched_yield();
	for (i = 0; i < c->n; i++) {
		if (lc_ack_complete(c->t, c->wrids[i], i + 1 == c->n ? c->status : 0) != 0)
			__atomic_fetch_add(&c->rets, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void run_completer(struct fixture *fx, int64_t timeout, int status, int expect)
{
	struct completer c;
	pthread_t th;
	unsigned i;

	/* configure mocks */
	memset(&c, 0, sizeof(c));
	c.t = &fx->t;
	c.n = 8;
	c.status = status;
	c.yields = YIELDS;
	for (i = 0; i < c.n; i++)
		assert_int_equal(lc_ack_attach(fx->key, &c.wrids[i]), 0);
	assert_int_equal(pthread_create(&th, NULL, complete_later, &c), 0);

	/* run test */
	assert_int_equal(lc_ack_wait(fx->key, timeout), expect);

	/* verify the results */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(__atomic_load_n(&c.started, __ATOMIC_ACQUIRE), 1);
	assert_int_equal(c.rets, 0);
	assert_int_equal(lc_ack_outstanding(fx->key), 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void wait__forever_returns_when_other_thread_completes(void **state)
{
	run_completer(*state, -1, 0, 0);
}

static void wait__timeout_returns_when_other_thread_completes(void **state)
{
	run_completer(*state, LONG_WAIT, 0, 0);
}

static void wait__reports_error_of_other_thread(void **state)
{
	run_completer(*state, LONG_WAIT, -ECONNABORTED, -ECONNABORTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(wait__null_key_is_einval),
	    cmocka_unit_test_setup_teardown(wait__idle_key_returns_0, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__zero_timeout_tests_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__idle_needs_every_word_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__timeout_with_ops_outstanding, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__huge_timeout_does_not_overflow, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__error_survives_a_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__op_timeout_is_not_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__forever_returns_when_other_thread_completes,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__timeout_returns_when_other_thread_completes,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(wait__reports_error_of_other_thread, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
