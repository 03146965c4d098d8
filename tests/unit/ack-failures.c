/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack-failures.c -- the failure list of an ack key (loco_ack_failures())
 * and LOCO_ACK_IGNORE_LEFT: failures name their peer and error in
 * completion order, the list covers the last wait that found the key
 * idle, storage is bounded (the rest counted as dropped), fan-out
 * completions reach every key's list, and with the flag a wait reports
 * only failures to peers still in the view (here: a fake in_view()).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ack.h"

struct fixture {
	struct lc_ack_table t;
	loco_ack_key_t *key, *other;
	int gone[8]; /* by node id: 1 when the fake view no longer holds it */
};

static struct fixture fx;

static int fake_in_view(void *arg, uint32_t node)
{
	struct fixture *f = arg;

	return node >= 8 || !f->gone[node];
}

static int setup(void **state)
{
	memset(&fx, 0, sizeof(fx));
	if (lc_ack_table_init(&fx.t, 4) != 0)
		return -1;
	fx.t.in_view = fake_in_view;
	fx.t.progress_arg = &fx; /* in_view() gets the progress argument */
	if (lc_ack_key_new(&fx.t, NULL, &fx.key) || lc_ack_key_new(&fx.t, NULL, &fx.other))
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	lc_ack_table_fini(&f->t);
	return 0;
}

/* post -- attach @n operations to @key, complete them to @nodes[i] with @errs[i]. */
static void post(struct fixture *f, loco_ack_key_t *key, unsigned n, const uint32_t *nodes,
                 const int *errs)
{
	uint64_t w[8];

	for (unsigned i = 0; i < n; i++)
		assert_int_equal(lc_ack_attach(key, &w[i]), 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(lc_ack_complete_node(&f->t, w[i], errs[i], nodes[i]), 0);
}

/* failures__name_node_and_error -- two of four operations fail: both listed, in order. */
static void failures__name_node_and_error(void **state)
{
	struct fixture *f = *state;
	static const uint32_t nodes[4] = {2, 3, 4, 5};
	static const int errs[4] = {0, -ECONNRESET, 0, -ECANCELED};
	struct loco_ack_failure out[4];
	size_t dropped = 99;

	post(f, f->key, 4, nodes, errs);
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET); /* the first error */
	assert_int_equal(lc_ack_failures(f->key, out, 4, &dropped), 2);
	assert_int_equal(dropped, 0);
	assert_int_equal(out[0].node, 3);
	assert_int_equal(out[0].error, -ECONNRESET);
	assert_int_equal(out[0].left, 0);
	assert_int_equal(out[1].node, 5);
	assert_int_equal(out[1].error, -ECANCELED);
	printf("failures: node %u %d, node %u %d\n", out[0].node, out[0].error, out[1].node,
	       out[1].error);
	/* the next wait that finds the key idle starts a new list */
	assert_int_equal(lc_ack_wait(f->key, 0), 0);
	assert_int_equal(lc_ack_failures(f->key, out, 4, NULL), 0);
}

/*
 * failures__fail_now_recorded -- an operation that failed at post time
 * (lc_ack_fail_now(), never attached) is reported like a failed completion:
 * the first error, listed with its node, after the attached ones' that
 * completed first; a success records nothing, keys of another table are
 * refused by lc_ack_keys_check().
 */
static void failures__fail_now_recorded(void **state)
{
	struct fixture *f = *state;
	static const uint32_t nodes[1] = {2};
	static const int errs[1] = {-ECONNRESET};
	struct lc_ack_table other;
	loco_ack_key_t *stranger, *keys[2] = {NULL, NULL};
	struct loco_ack_failure out[4];

	lc_ack_fail_now(f->key, 6, 0); /* success: nothing */
	assert_int_equal(lc_ack_wait(f->key, 0), 0);
	assert_int_equal(lc_ack_failures(f->key, out, 4, NULL), 0);
	lc_ack_fail_now(f->key, 4, -EACCES);
	assert_int_equal(lc_ack_outstanding(f->key), 0);
	assert_int_equal(lc_ack_wait(f->key, 0), -EACCES);
	assert_int_equal(lc_ack_failures(f->key, out, 4, NULL), 1);
	assert_int_equal(out[0].node, 4);
	assert_int_equal(out[0].error, -EACCES);
	post(f, f->key, 1, nodes, errs);
	lc_ack_fail_now(f->key, 5, -EACCES);
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET); /* the first one stands */
	assert_int_equal(lc_ack_failures(f->key, out, 4, NULL), 2);
	assert_int_equal(out[0].node, 2);
	assert_int_equal(out[1].node, 5);
	lc_ack_fail_now(NULL, 1, -EACCES); /* NULL-safe */

	assert_int_equal(lc_ack_table_init(&other, 1), 0);
	assert_int_equal(lc_ack_key_new(&other, NULL, &stranger), 0);
	keys[1] = f->key;
	assert_int_equal(lc_ack_keys_check(&f->t, keys, 2), 0);
	keys[0] = stranger;
	assert_int_equal(lc_ack_keys_check(&f->t, keys, 2), -EINVAL);
	lc_ack_key_free(stranger);
	lc_ack_table_fini(&other);
}

/* failures__max_bounds_the_copy -- @max 1 copies one entry, returns the count held. */
static void failures__max_bounds_the_copy(void **state)
{
	struct fixture *f = *state;
	static const uint32_t nodes[3] = {2, 3, 4};
	static const int errs[3] = {-EACCES, -ECONNRESET, -ECANCELED};
	struct loco_ack_failure out[1] = {{0}};

	post(f, f->key, 3, nodes, errs);
	assert_int_equal(lc_ack_wait(f->key, 0), -EACCES);
	assert_int_equal(lc_ack_failures(f->key, out, 1, NULL), 3);
	assert_int_equal(out[0].node, 2);
	assert_int_equal(lc_ack_failures(f->key, NULL, 0, NULL), 3); /* counting only */
}

/* failures__bounded_storage_counts_dropped -- more than LOCO_ACK_FAILURES_MAX failures. */
static void failures__bounded_storage_counts_dropped(void **state)
{
	struct fixture *f = *state;
	static struct loco_ack_failure out[LOCO_ACK_FAILURES_MAX];
	unsigned extra = 5, total = LOCO_ACK_FAILURES_MAX + extra;
	size_t dropped = 0;
	uint64_t w;

	for (unsigned i = 0; i < total; i++) {
		assert_int_equal(lc_ack_attach(f->key, &w), 0);
		assert_int_equal(lc_ack_complete_node(&f->t, w, -ECONNRESET, 2 + i % 3), 0);
	}
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET);
	assert_int_equal(lc_ack_failures(f->key, out, LOCO_ACK_FAILURES_MAX, &dropped),
	                 LOCO_ACK_FAILURES_MAX);
	assert_int_equal(dropped, extra);
	assert_int_equal(out[LOCO_ACK_FAILURES_MAX - 1].node, 2 + (LOCO_ACK_FAILURES_MAX - 1) % 3);
	printf("failures: %u held, %zu dropped of %u\n", LOCO_ACK_FAILURES_MAX, dropped, total);
}

/* failures__pending_kept_across_timeout -- a wait that times out keeps the list growing. */
static void failures__pending_kept_across_timeout(void **state)
{
	struct fixture *f = *state;
	struct loco_ack_failure out[2];
	uint64_t w1, w2;

	assert_int_equal(lc_ack_attach(f->key, &w1), 0);
	assert_int_equal(lc_ack_attach(f->key, &w2), 0);
	assert_int_equal(lc_ack_complete_node(&f->t, w1, -ECONNRESET, 3), 0);
	assert_int_equal(lc_ack_wait(f->key, 0), LC_ACK_BUSY);
	assert_int_equal(lc_ack_complete_node(&f->t, w2, -ETIMEDOUT, 4), 0);
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET);
	assert_int_equal(lc_ack_failures(f->key, out, 2, NULL), 2);
	assert_int_equal(out[0].node, 3);
	assert_int_equal(out[1].node, 4);
	assert_int_equal(out[1].error, -EHOSTDOWN); /* a peer that stopped answering */
}

/* ignore_left__gone_peer_not_reported -- with the flag, a failure to a gone peer gives 0. */
static void ignore_left__gone_peer_not_reported(void **state)
{
	struct fixture *f = *state;
	static const uint32_t nodes[2] = {2, 3};
	static const int errs[2] = {0, -ECONNRESET};
	struct loco_ack_failure out[2];

	f->key->flags = LOCO_ACK_IGNORE_LEFT;
	f->gone[3] = 1;
	post(f, f->key, 2, nodes, errs);
	assert_int_equal(lc_ack_wait(f->key, 0), 0);
	assert_int_equal(lc_ack_failures(f->key, out, 2, NULL), 1); /* still listed */
	assert_int_equal(out[0].node, 3);
	assert_int_equal(out[0].left, 1);
}

/* ignore_left__present_peer_reported -- with the flag, a peer still in the view counts. */
static void ignore_left__present_peer_reported(void **state)
{
	struct fixture *f = *state;
	static const uint32_t nodes[3] = {3, 2, 4};
	static const int errs[3] = {-ECONNRESET, -EACCES, -ECANCELED};
	struct loco_ack_failure out[3];

	f->key->flags = LOCO_ACK_IGNORE_LEFT;
	f->gone[3] = 1;
	post(f, f->key, 3, nodes, errs);
	/* node 3 is gone; node 2's error is the first that counts */
	assert_int_equal(lc_ack_wait(f->key, 0), -EACCES);
	assert_int_equal(lc_ack_failures(f->key, out, 3, NULL), 3);
	assert_int_equal(out[0].left, 1);
	assert_int_equal(out[1].left, 0);
	assert_int_equal(out[2].left, 0);
}

/* ignore_left__without_flag_reported -- without the flag the gone peer's error stands. */
static void ignore_left__without_flag_reported(void **state)
{
	struct fixture *f = *state;
	static const uint32_t nodes[1] = {3};
	static const int errs[1] = {-ECONNRESET};
	struct loco_ack_failure out[1];

	f->gone[3] = 1;
	post(f, f->key, 1, nodes, errs);
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET);
	assert_int_equal(lc_ack_failures(f->key, out, 1, NULL), 1);
	assert_int_equal(out[0].left, 1);
}

/* ignore_left__dropped_failures_reported -- failures that did not fit cannot be checked. */
static void ignore_left__dropped_failures_reported(void **state)
{
	struct fixture *f = *state;
	uint64_t w;

	f->key->flags = LOCO_ACK_IGNORE_LEFT;
	f->gone[3] = 1;
	for (unsigned i = 0; i < LOCO_ACK_FAILURES_MAX + 1; i++) {
		assert_int_equal(lc_ack_attach(f->key, &w), 0);
		assert_int_equal(lc_ack_complete_node(&f->t, w, -ECONNRESET, 3), 0);
	}
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET);
}

/* failures__fan_reaches_both_keys -- one failed fan-out operation is listed in each key. */
static void failures__fan_reaches_both_keys(void **state)
{
	struct fixture *f = *state;
	loco_ack_key_t *keys[2] = {f->key, f->other};
	struct loco_ack_failure out[1];
	uint64_t w;

	assert_int_equal(lc_ack_attach_n(&f->t, keys, 2, &w), 0);
	assert_int_equal(lc_ack_complete_node(&f->t, w, -ECONNRESET, 6), 0);
	assert_int_equal(lc_ack_wait(f->key, 0), -ECONNRESET);
	assert_int_equal(lc_ack_wait(f->other, 0), -ECONNRESET);
	assert_int_equal(lc_ack_failures(f->key, out, 1, NULL), 1);
	assert_int_equal(out[0].node, 6);
	assert_int_equal(lc_ack_failures(f->other, out, 1, NULL), 1);
	assert_int_equal(out[0].node, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(failures__name_node_and_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(failures__max_bounds_the_copy, setup, teardown),
	    cmocka_unit_test_setup_teardown(failures__fail_now_recorded, setup, teardown),
	    cmocka_unit_test_setup_teardown(failures__bounded_storage_counts_dropped, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(failures__pending_kept_across_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(ignore_left__gone_peer_not_reported, setup, teardown),
	    cmocka_unit_test_setup_teardown(ignore_left__present_peer_reported, setup, teardown),
	    cmocka_unit_test_setup_teardown(ignore_left__without_flag_reported, setup, teardown),
	    cmocka_unit_test_setup_teardown(ignore_left__dropped_failures_reported, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(failures__fan_reaches_both_keys, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
