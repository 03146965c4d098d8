/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack-fan.c -- lc_ack_attach_n/detach_n: one operation completing into two
 * ack keys (what lets an owned_var push be one WRITE): both keys see it,
 * errors reach both, a failed attach leaves nothing attached, the fan
 * slots are bounded and given back, and forged fan WRIDs are ignored.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ack.h"

struct fixture {
	struct lc_ack_table t, other;
	loco_ack_key_t *a, *b, *c;
};

static int setup(void **state)
{
	static struct fixture fx;

	memset(&fx, 0, sizeof(fx));
	if (lc_ack_table_init(&fx.t, 4) != 0 || lc_ack_table_init(&fx.other, 1) != 0)
		return -1;
	if (lc_ack_key_new(&fx.t, NULL, &fx.a) || lc_ack_key_new(&fx.t, NULL, &fx.b) ||
	    lc_ack_key_new(&fx.other, NULL, &fx.c))
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	lc_ack_table_fini(&fx->t);
	lc_ack_table_fini(&fx->other);
	return 0;
}

/* attach_n__two_keys_one_completion -- one completion makes both keys idle. */
static void attach_n__two_keys_one_completion(void **state)
{
	struct fixture *fx = *state;
	loco_ack_key_t *keys[2] = {fx->a, fx->b};
	uint64_t w;

	/* configure: nothing; run */
	assert_int_equal(lc_ack_attach_n(&fx->t, keys, 2, &w), 0);
	/* verify */
	assert_int_equal(lc_wrid_type(w), LC_WRID_FAN);
	assert_int_equal(lc_ack_outstanding(fx->a), 1);
	assert_int_equal(lc_ack_outstanding(fx->b), 1);
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), 0);
	assert_true(lc_ack_idle(fx->a));
	assert_true(lc_ack_idle(fx->b));
	/* a duplicate completion of the same WRID touches nothing */
	assert_int_equal(lc_ack_complete(&fx->t, w, -EIO), -ENOENT);
	assert_int_equal(lc_ack_wait(fx->a, 0), 0);
	assert_int_equal(lc_ack_wait(fx->b, 0), 0);
}

/* attach_n__error_reaches_both -- a failed operation's error is each key's first error. */
static void attach_n__error_reaches_both(void **state)
{
	struct fixture *fx = *state;
	loco_ack_key_t *keys[2] = {fx->a, fx->b};
	uint64_t w;

	assert_int_equal(lc_ack_attach_n(&fx->t, keys, 2, &w), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w, -EACCES), 0);
	assert_int_equal(lc_ack_wait(fx->a, 0), -EACCES);
	assert_int_equal(lc_ack_wait(fx->b, 0), -EACCES);
}

/* attach_n__one_key_is_a_plain_attach -- NULL entries skipped; one key needs no fan slot. */
static void attach_n__one_key_is_a_plain_attach(void **state)
{
	struct fixture *fx = *state;
	loco_ack_key_t *keys[2] = {fx->a, NULL};
	uint64_t w;

	assert_int_equal(lc_ack_attach_n(&fx->t, keys, 2, &w), 0);
	assert_int_equal(lc_wrid_type(w), LC_WRID_ACK);
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), 0);
	assert_true(lc_ack_idle(fx->a));
}

/* attach_n__bad_arguments -- other tables, too many keys, none: -EINVAL, nothing attached. */
static void attach_n__bad_arguments(void **state)
{
	struct fixture *fx = *state;
	loco_ack_key_t *mixed[2] = {fx->a, fx->c}, *three[3] = {fx->a, fx->b, fx->a};
	loco_ack_key_t *none[2] = {NULL, NULL};
	uint64_t w = 0x1234;

	assert_int_equal(lc_ack_attach_n(&fx->t, mixed, 2, &w), -EINVAL);
	assert_int_equal(lc_ack_attach_n(&fx->t, three, 3, &w), -EINVAL);
	assert_int_equal(lc_ack_attach_n(&fx->t, none, 2, &w), -EINVAL);
	assert_int_equal(w, 0x1234); /* output written only on success */
	assert_true(lc_ack_idle(fx->a));
	assert_true(lc_ack_idle(fx->b));
}

/* attach_n__full_key_attaches_nothing -- -EAGAIN from the second key undoes the first. */
static void attach_n__full_key_attaches_nothing(void **state)
{
	static uint64_t ws[LC_ACK_SLOTS];
	struct fixture *fx = *state;
	loco_ack_key_t *keys[2] = {fx->a, fx->b};
	uint64_t w;

	for (unsigned i = 0; i < LC_ACK_SLOTS; i++)
		assert_int_equal(lc_ack_attach(fx->b, &ws[i]), 0);
	assert_int_equal(lc_ack_attach_n(&fx->t, keys, 2, &w), -EAGAIN);
	assert_true(lc_ack_idle(fx->a));
	for (unsigned i = 0; i < LC_ACK_SLOTS; i++)
		lc_ack_detach(fx->b, ws[i]);
	assert_true(lc_ack_idle(fx->b));
	/* and the fan slot it took was given back: the table still has all of them */
	for (unsigned i = 0; i < LC_ACK_FAN_SLOTS / 64; i++)
		assert_int_equal(fx->t.fan->bits[i], 0);
}

/* attach_n__detach_n_undoes -- a never-posted fan operation leaves no trace. */
static void attach_n__detach_n_undoes(void **state)
{
	struct fixture *fx = *state;
	loco_ack_key_t *keys[2] = {fx->a, fx->b};
	uint64_t w;

	assert_int_equal(lc_ack_attach_n(&fx->t, keys, 2, &w), 0);
	lc_ack_detach_n(&fx->t, keys, 2, w);
	assert_true(lc_ack_idle(fx->a));
	assert_true(lc_ack_idle(fx->b));
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), -ENOENT);
	assert_int_equal(lc_ack_wait(fx->a, 0), 0); /* no error recorded */
}

/* complete__forged_fan_wrids -- any value is safe: out of range, free slot, stray bits. */
static void complete__forged_fan_wrids(void **state)
{
	struct fixture *fx = *state;
	const uint64_t fan = (uint64_t)LC_WRID_FAN << 56;
	uint64_t bad[] = {fan | LC_ACK_FAN_SLOTS, fan | 0xffffff, fan | 7, fan | (1ull << 40) | 1,
	                  fan | ~0ull};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(lc_ack_complete(&fx->t, bad[i], -EIO), -ENOENT);
	assert_int_equal(lc_ack_wait(fx->a, 0), 0);
	assert_int_equal(lc_ack_wait(fx->b, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(attach_n__two_keys_one_completion, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach_n__error_reaches_both, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach_n__one_key_is_a_plain_attach, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach_n__bad_arguments, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach_n__full_key_attaches_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach_n__detach_n_undoes, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__forged_fan_wrids, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
