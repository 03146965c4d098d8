/* SPDX-License-Identifier: BSD-2-Clause */
/* mem-arena.c -- the registered-memory arenas of liboco/mem.c */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem.h"

#define CHUNK (2u << 20)

static int setup(void **state)
{
	struct lc_mem *mm = calloc(1, sizeof(*mm));

	if (mm == NULL)
		return -1;
	lc_mem_init(mm);
	*state = mm;
	return 0;
}

static int teardown(void **state)
{
	struct lc_mem *mm = *state;

	lc_mem_fini(mm);
	free(mm);
	return 0;
}

static void alloc__zero_len_is_einval(void **state)
{
	void *p = (void *)0x1;

	/* run */
	assert_int_equal(lc_mem_alloc(*state, 0, &p), -EINVAL);
	/* verify: output untouched */
	assert_ptr_equal(p, (void *)0x1);
}

static void alloc__lines_aligned_disjoint_writable(void **state)
{
	enum {
		N = 200
	};
	void *p[N];
	size_t len[N];

	/* configure: sizes from 1 byte to ~8 KiB */
	srand(7);
	for (int i = 0; i < N; i++)
		len[i] = 1 + (size_t)(rand() % 8192);

	/* run */
	for (int i = 0; i < N; i++) {
		assert_int_equal(lc_mem_alloc(*state, len[i], &p[i]), 0);
		memset(p[i], i & 0xff, len[i]);
	}

	/* verify: 64-byte aligned, contents intact (no overlap), then free */
	for (int i = 0; i < N; i++) {
		assert_int_equal((uintptr_t)p[i] & 63, 0);
		for (size_t k = 0; k < len[i]; k++)
			assert_int_equal(((uint8_t *)p[i])[k], i & 0xff);
	}
	for (int i = 0; i < N; i++)
		lc_mem_free(*state, p[i], len[i]);
}

static void free__coalesces_back_into_one_block(void **state)
{
	enum {
		N = 64
	};
	void *p[N], *first, *big;
	size_t piece = CHUNK / N;

	/* configure: fill a whole chunk with N pieces */
	for (int i = 0; i < N; i++)
		assert_int_equal(lc_mem_alloc(*state, piece, &p[i]), 0);
	first = p[0];

	/* run: free in a scattered order */
	for (int i = 0; i < N; i += 2)
		lc_mem_free(*state, p[i], piece);
	for (int i = N - 1; i > 0; i -= 2)
		lc_mem_free(*state, p[i], piece);

	/* verify: the largest arena block fits at the chunk's start again */
	assert_int_equal(lc_mem_alloc(*state, CHUNK / 2, &big), 0);
	assert_ptr_equal(big, first);
	lc_mem_free(*state, big, CHUNK / 2);
}

static void alloc__large_gets_aligned_mapping(void **state)
{
	void *p;
	size_t len = 5u << 20;

	/* run */
	assert_int_equal(lc_mem_alloc(*state, len, &p), 0);

	/* verify: its own hugepage-aligned mapping, fully usable */
	assert_int_equal((uintptr_t)p & (CHUNK - 1), 0);
	memset(p, 0xab, len);
	assert_int_equal(((uint8_t *)p)[len - 1], 0xab);
	lc_mem_free(*state, p, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(alloc__zero_len_is_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(alloc__lines_aligned_disjoint_writable, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(free__coalesces_back_into_one_block, setup, teardown),
	    cmocka_unit_test_setup_teardown(alloc__large_gets_aligned_mapping, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
