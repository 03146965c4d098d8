/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-rec.c -- shm_rec_check() (liboco/fabric/shm/shm.h): the records of a
 * SEND ring are written by the peer, so the reader takes only those that
 * lie inside the ring and inside what the peer produced. Regression: a
 * record near the ring's end with a long span made deliver() copy past
 * the ring.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include "shm/shm.h"

#define A SHM_REC_ALIGN

static struct shm_rec rec(uint32_t span, uint32_t len, uint8_t op)
{
	return (struct shm_rec){.span = span, .len = len, .op = op};
}

static int check(struct shm_rec r, uint64_t cons, uint64_t prod)
{
	return shm_rec_check(&r, cons, prod);
}

static void honest_records(void **state)
{
	(void)state;
	/* a SEND of 100 bytes: header + payload rounded up to the alignment */
	assert_int_equal(check(rec(2 * A + A, 100, FAB_OP_SEND), 0, 3 * A), 0);
	assert_int_equal(check(rec(A, 7, FAB_OP_WRITE_IMM), 5 * A, 6 * A), 0);
	/* a pad record that skips to the end of the ring, then a record at its start */
	assert_int_equal(check(rec(2 * A, 0, 0), SHM_RING - 2 * A, SHM_RING + A), 0);
	assert_int_equal(check(rec(A, 1, FAB_OP_SEND), SHM_RING, SHM_RING + A), 0);
	/* a whole-ring message, and the counters far into their life */
	assert_int_equal(check(rec(SHM_RING, SHM_RING - sizeof(struct shm_rec), FAB_OP_SEND),
	                       7ull * SHM_RING, 8ull * SHM_RING),
	                 0);
}

static void crossing_the_end(void **state)
{
	(void)state;
	/* the bug: a long record a little before the end (the copy ran past the ring) */
	assert_int_equal(check(rec(4 * A, 3 * A, FAB_OP_SEND), SHM_RING - A, SHM_RING + 3 * A),
	                 -EPROTO);
	/* a pad that does not reach the end, or runs past it */
	assert_int_equal(check(rec(A, 0, 0), SHM_RING - 2 * A, SHM_RING), -EPROTO);
	assert_int_equal(check(rec(3 * A, 0, 0), SHM_RING - 2 * A, SHM_RING + A), -EPROTO);
}

static void bad_spans_and_lengths(void **state)
{
	(void)state;
	assert_int_equal(check(rec(0, 0, FAB_OP_SEND), 0, A), -EPROTO);         /* no progress */
	assert_int_equal(check(rec(A + 8, 0, FAB_OP_SEND), 0, 2 * A), -EPROTO); /* unaligned */
	assert_int_equal(check(rec(2 * A, 0, FAB_OP_SEND), 0, A), -EPROTO); /* past the producer */
	assert_int_equal(check(rec(A, A, FAB_OP_SEND), 0, A), -EPROTO);  /* payload past the span */
	assert_int_equal(check(rec(A, 0, 99), 0, A), -EPROTO);           /* no such operation */
	assert_int_equal(check(rec(A, 0, FAB_OP_WRITE), 0, A), -EPROTO); /* WRITEs use no ring */
	/* the producer claims more than the ring holds */
	assert_int_equal(check(rec(A, 1, FAB_OP_SEND), 0, SHM_RING + A), -EPROTO);
	/* a producer behind the consumer wraps to a huge count */
	assert_int_equal(check(rec(A, 1, FAB_OP_SEND), 10 * A, 9 * A), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(honest_records),
	    cmocka_unit_test(crossing_the_end),
	    cmocka_unit_test(bad_spans_and_lengths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
