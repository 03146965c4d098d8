/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * region-size.c -- loco_region_create() and loco_shared_region_create()
 * refuse a length the fabric cannot serve (above 4 GiB, one request's
 * reach) or the arena cannot round (near SIZE_MAX) with -EINVAL, without
 * crashing and without writing the output (issue 10); lc_mem_alloc()
 * refuses a length whose rounding would overflow.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <loco.h>
#include <loco/shared_region.h>

#include "manager.h"

static const size_t bad_len[] = {
    SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX - 63, (size_t)(4ull << 30) + 1, (size_t)(8ull << 30),
};

static int setup(void **state)
{
	loco_manager_t *m;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
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

static void region_create__too_long_is_einval(void **state)
{
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r = (loco_region_t *)0x1;

	/* configure */
	assert_int_equal(loco_channel_create(*state, NULL, "sizes", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);
	/* run + verify: refused, nothing written, and the object still works */
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++)
		assert_int_equal(loco_region_create(obj, "big", bad_len[i], LOCO_ACCESS_READ, &r),
		                 -EINVAL);
	assert_ptr_equal(r, (loco_region_t *)0x1);
	assert_int_equal(loco_region_create(obj, "big", 4096, LOCO_ACCESS_READ, &r), 0);
	assert_int_equal(loco_region_len(r), 4096);
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void shared_region_create__too_long_is_einval(void **state)
{
	loco_channel_t *ch;
	loco_shared_region_t *s = (loco_shared_region_t *)0x1;

	/* configure */
	assert_int_equal(loco_channel_create(*state, NULL, "shsizes", 1, &ch), 0);
	/* run + verify */
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++)
		assert_int_equal(
		    loco_shared_region_create(ch, "big", bad_len[i], LOCO_ACCESS_READ, &s),
		    -EINVAL);
	assert_ptr_equal(s, (loco_shared_region_t *)0x1);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void mem_alloc__rounding_overflow_is_enomem(void **state)
{
	loco_manager_t *m = calloc(1, sizeof(*m));
	void *p = (void *)0x1;

	(void)state;
	assert_non_null(m);
	lc_mem_init(&m->mem);
	/* run + verify: no wrap-around to a tiny allocation, output untouched */
	assert_int_equal(lc_mem_alloc(&m->mem, SIZE_MAX, &p), -ENOMEM);
	assert_int_equal(lc_mem_alloc(&m->mem, SIZE_MAX - 4096, &p), -ENOMEM);
	assert_int_equal(lc_mem_alloc(&m->mem, SIZE_MAX - (2u << 20), &p), -ENOMEM);
	assert_ptr_equal(p, (void *)0x1);
	lc_mem_fini(&m->mem);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(region_create__too_long_is_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(shared_region_create__too_long_is_einval, setup,
	                                    teardown),
	    cmocka_unit_test(mem_alloc__rounding_overflow_is_enomem),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
