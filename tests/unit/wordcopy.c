/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wordcopy.c -- fab_copy_out(), fab_copy_in() and fab_land_write()
 * (liboco/fabric/wordcopy.c): every length and every alignment of source
 * and destination (the 16-byte blocks where both line up, the words
 * before and after them, the per-word path, with and without a pause,
 * the slow-write line shuffle) copies exactly the bytes asked for and
 * touches nothing around them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "provider.h"

#define MAXLEN 4232
#define GUARD  16

static uint8_t src[MAXLEN + 2 * GUARD] __attribute__((aligned(64)));
static uint8_t dst[MAXLEN + 2 * GUARD] __attribute__((aligned(64)));

static void fill(void)
{
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memset(dst, 0xee, sizeof(dst));
}

/* check -- dst[GUARD + doff, + len) holds src[GUARD + soff, + len); the rest is still 0xee. */
static void check(size_t doff, size_t soff, size_t len)
{
	for (size_t i = 0; i < sizeof(dst); i++) {
		size_t lo = GUARD + doff, hi = lo + len;
		uint8_t want = i >= lo && i < hi ? src[GUARD + soff + (i - lo)] : 0xee;

		if (dst[i] != want)
			fail_msg("doff %zu soff %zu len %zu: byte %zu is %#x, want %#x", doff, soff,
			         len, i, dst[i], want);
	}
}

static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 127, 200, 4096, 4104};

static void copy_in__every_alignment(void **state)
{
	(void)state;
	for (size_t d = 0; d < 8; d++)
		for (size_t s = 0; s < 8; s++)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
				fill();
				fab_copy_in(dst + GUARD + d, src + GUARD + s, lens[k], 0);
				check(d, s, lens[k]);
			}
}

static void copy_in__with_pause(void **state)
{
	(void)state;
	for (size_t d = 0; d < 8; d += 3)
		for (size_t s = 0; s < 8; s += 4) {
			fill();
			fab_copy_in(dst + GUARD + d, src + GUARD + s, 100, 1);
			check(d, s, 100);
		}
}

static void copy_out__every_alignment(void **state)
{
	(void)state;
	for (size_t d = 0; d < 8; d++)
		for (size_t s = 0; s < 8; s++)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
				fill();
				fab_copy_out(dst + GUARD + d, src + GUARD + s, lens[k]);
				check(d, s, lens[k]);
			}
}

/* copy_one -- @len bytes at @d from @s, in (fab_copy_in) or out, then check() */
static void copy_one(int out, size_t d, size_t s, size_t len)
{
	fill();
	if (out)
		fab_copy_out(dst + GUARD + d, src + GUARD + s, len);
	else
		fab_copy_in(dst + GUARD + d, src + GUARD + s, len, 0);
	check(d, s, len);
}

/*
 * the 16-byte blocks' head and tail, in and out: both ends 8-byte aligned,
 * 16-byte aligned or not, each length to 40 and the long ones
 */
static void copy_blocks__word_offsets(void **state)
{
	(void)state;
	for (int out = 0; out < 2; out++)
		for (size_t d = 0; d < 32; d += 8)
			for (size_t s = 0; s < 32; s += 8) {
				for (size_t len = 0; len <= 40; len++)
					copy_one(out, d, s, len);
				for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
					copy_one(out, d, s, lens[k]);
			}
}

static void land_write__plain_and_shuffled(void **state)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	(void)state;
	for (uint64_t slow = 0; slow < 2; slow++)
		for (size_t d = 0; d < 8; d += 5)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
				fill();
				fab_land_write(slow, &rng, dst + GUARD + d, src + GUARD, lens[k]);
				check(d, 0, lens[k]);
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(copy_in__every_alignment),
	    cmocka_unit_test(copy_in__with_pause),
	    cmocka_unit_test(copy_out__every_alignment),
	    cmocka_unit_test(copy_blocks__word_offsets),
	    cmocka_unit_test(land_write__plain_and_shuffled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
