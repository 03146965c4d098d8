/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * obj-deadline.c -- the objects' lazy deadlines (objects/obj_util.h): a
 * call that does not wait reads no clock, and one that waits times out as
 * an eager deadline would.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <time.h>

#include "obj_util.h"

#define MS 1000000ll

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * MS};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void deadline__lazy_is_below_every_real_one(void **state)
{
	const int64_t t[] = {0, 1, 1000, 60 * 1000 * MS, INT64_MAX / 4};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t dl = obj_deadline_lazy(t[i]);

		/* code that only knows -1 (never) and real times must never be handed one */
		assert_true(dl <= OBJ_DL_LAZY);
		assert_int_equal(obj_left_ns(dl), t[i]);
	}
}

static void deadline__none_stays_none(void **state)
{
	int64_t dl = obj_deadline_lazy(-1);

	(void)state;
	assert_int_equal(dl, -1);
	assert_int_equal(obj_deadline_fix(&dl), -1);
	assert_false(obj_past(&dl));
	assert_int_equal(obj_left_ns(dl), -1);
}

static void deadline__zero_is_past_at_once(void **state)
{
	int64_t dl = obj_deadline_lazy(0);

	(void)state;
	assert_true(obj_past(&dl));
	assert_true(dl >= 0); /* worked out */
	assert_int_equal(obj_left_ns(dl), 0);
}

static void deadline__worked_out_at_the_first_wait(void **state)
{
	int64_t dl = obj_deadline_lazy(40 * MS), before, after;

	(void)state;
	sleep_ms(30); /* not waited on yet: the timeout starts at the first look */
	before = obj_now_ns();
	assert_false(obj_past(&dl));
	after = obj_now_ns();
	assert_true(dl >= before + 40 * MS && dl <= after + 40 * MS);
	/* a real deadline is left as it is */
	assert_int_equal(obj_deadline_fix(&dl), dl);
	assert_true(obj_left_ns(dl) > 0 && obj_left_ns(dl) <= 40 * MS);
	sleep_ms(50);
	assert_true(obj_past(&dl));
	assert_int_equal(obj_left_ns(dl), 0);
}

static void deadline__beyond_the_lazy_range_is_eager(void **state)
{
	int64_t dl = obj_deadline_lazy(INT64_MAX);

	(void)state;
	assert_int_equal(dl, INT64_MAX); /* obj_deadline()'s cap */
	assert_false(obj_past(&dl));
	dl = obj_deadline_lazy(INT64_MAX / 4 + 1);
	assert_true(dl > obj_now_ns());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(deadline__lazy_is_below_every_real_one),
	    cmocka_unit_test(deadline__none_stays_none),
	    cmocka_unit_test(deadline__zero_is_past_at_once),
	    cmocka_unit_test(deadline__worked_out_at_the_first_wait),
	    cmocka_unit_test(deadline__beyond_the_lazy_range_is_eager),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
