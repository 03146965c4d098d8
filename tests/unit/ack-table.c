/* SPDX-License-Identifier: BSD-2-Clause */
/* ack-table.c -- lc_ack_table_init/fini, lc_ack_key_new/free: indexes, generations, limits */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ack.h"

#define NKEYS     4
#define BOGUS_MGR ((loco_manager_t *)(uintptr_t)0x5a5a5a5a)

static void table_init__bad_args_are_einval(void **state)
{
	struct lc_ack_table t;

	(void)state;
	/* configure mocks: none */
	memset(&t, 0x5a, sizeof(t));

	/* run test, verify the results */
	assert_int_equal(lc_ack_table_init(NULL, 1), -EINVAL);
	assert_int_equal(lc_ack_table_init(&t, 0), -EINVAL);
	assert_int_equal(lc_ack_table_init(&t, LC_ACK_MAX_KEYS + 1), -EINVAL);
	assert_int_equal(lc_ack_table_init(&t, UINT32_MAX), -EINVAL);
}

static void table_init__limits_ok(void **state)
{
	struct lc_ack_table t;

	(void)state;
	/* configure mocks: none */

	/* run test, verify the results */
	assert_int_equal(lc_ack_table_init(&t, 1), 0);
	assert_int_equal(t.max_keys, 1);
	assert_int_equal(t.nkeys, 0);
	lc_ack_table_fini(&t);
	assert_int_equal(lc_ack_table_init(&t, LC_ACK_MAX_KEYS), 0);
	assert_int_equal(t.max_keys, LC_ACK_MAX_KEYS);
	lc_ack_table_fini(&t);
}

static void table_fini__frees_live_keys(void **state)
{
	struct lc_ack_table t;
	loco_ack_key_t *k[NKEYS];
	uint64_t wrid;
	unsigned i;

	(void)state;
	/* configure mocks */
	assert_int_equal(lc_ack_table_init(&t, NKEYS), 0);
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(lc_ack_key_new(&t, NULL, &k[i]), 0);
	assert_int_equal(lc_ack_attach(k[1], &wrid), 0);

	/* run test */
	lc_ack_table_fini(&t); /* the leak checker of the sanitizer builds verifies */

	/* verify the results */
	assert_null(t.keys);
	assert_int_equal(t.nkeys, 0);
	lc_ack_table_fini(&t); /* a second fini is harmless */
}

static void key_new__bad_args_are_einval(void **state)
{
	struct lc_ack_table t;
	loco_ack_key_t *k = (loco_ack_key_t *)(uintptr_t)0x1;

	(void)state;
	/* configure mocks */
	assert_int_equal(lc_ack_table_init(&t, NKEYS), 0);

	/* run test */
	assert_int_equal(lc_ack_key_new(NULL, NULL, &k), -EINVAL);
	assert_int_equal(lc_ack_key_new(&t, NULL, NULL), -EINVAL);

	/* verify the results: nothing written, nothing taken */
	assert_ptr_equal(k, (loco_ack_key_t *)(uintptr_t)0x1);
	assert_int_equal(t.nkeys, 0);
	lc_ack_table_fini(&t);
}

static void key_new__fills_lowest_index_first(void **state)
{
	struct lc_ack_table t;
	loco_ack_key_t *k[NKEYS];
	unsigned i;

	(void)state;
	/* configure mocks */
	assert_int_equal(lc_ack_table_init(&t, NKEYS), 0);

	/* run test */
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(lc_ack_key_new(&t, i == 2 ? BOGUS_MGR : NULL, &k[i]), 0);

	/* verify the results */
	for (i = 0; i < NKEYS; i++) {
		assert_int_equal(k[i]->idx, i);
		assert_int_equal(k[i]->gen, 1);
		assert_ptr_equal(k[i]->table, &t);
		assert_ptr_equal(k[i]->manager, i == 2 ? BOGUS_MGR : NULL);
		assert_ptr_equal(t.keys[i], k[i]);
		assert_int_equal(k[i]->first_err, 0);
		assert_true(lc_ack_idle(k[i]));
		assert_int_equal(lc_ack_outstanding(k[i]), 0);
	}
	assert_int_equal(t.nkeys, NKEYS);
	lc_ack_table_fini(&t);
}

static void key_new__full_table_is_enospc(void **state)
{
	struct lc_ack_table t;
	loco_ack_key_t *k[NKEYS], *extra = NULL;
	unsigned i;

	(void)state;
	/* configure mocks */
	assert_int_equal(lc_ack_table_init(&t, NKEYS), 0);
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(lc_ack_key_new(&t, NULL, &k[i]), 0);

	/* run test */
	assert_int_equal(lc_ack_key_new(&t, NULL, &extra), -ENOSPC);

	/* verify the results */
	assert_null(extra);
	assert_int_equal(t.nkeys, NKEYS);
	lc_ack_table_fini(&t);
}

static void key_free__reuse_bumps_generation(void **state)
{
	struct lc_ack_table t;
	loco_ack_key_t *k[NKEYS], *again;
	unsigned i, round;

	(void)state;
	/* configure mocks */
	assert_int_equal(lc_ack_table_init(&t, NKEYS), 0);
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(lc_ack_key_new(&t, NULL, &k[i]), 0);

	/* run test: free index 2 and take it again, several times */
	for (round = 0; round < 5; round++) {
		lc_ack_key_free(k[2]);
		assert_null(t.keys[2]);
		assert_int_equal(t.nkeys, NKEYS - 1);
		assert_int_equal(lc_ack_key_new(&t, NULL, &again), 0);

		/* verify the results */
		assert_int_equal(again->idx, 2);
		assert_int_equal(again->gen, round + 2);
		assert_ptr_equal(t.keys[2], again);
		k[2] = again;
	}
	assert_int_equal(t.nkeys, NKEYS);
	lc_ack_table_fini(&t);
}

static void key_free__null_is_noop(void **state)
{
	(void)state;
	/* configure mocks: none */

	/* run test */
	lc_ack_key_free(NULL);

	/* verify the results: no crash */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(table_init__bad_args_are_einval),
	    cmocka_unit_test(table_init__limits_ok),
	    cmocka_unit_test(table_fini__frees_live_keys),
	    cmocka_unit_test(key_new__bad_args_are_einval),
	    cmocka_unit_test(key_new__fills_lowest_index_first),
	    cmocka_unit_test(key_new__full_table_is_enospc),
	    cmocka_unit_test(key_free__reuse_bumps_generation),
	    cmocka_unit_test(key_free__null_is_noop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
