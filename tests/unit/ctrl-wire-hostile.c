/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctrl-wire-hostile.c -- lc_ctrl_decode of malformed and hostile input: short,
 * long, mismatched lengths, other versions, reserved bits, unknown types,
 * twisted strings and counts (made by the independent encoder of
 * ctrl-wire-ref.c), every truncation, trailing bytes, NULL arguments. Each
 * is refused and leaves the output message untouched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl-wire-ref.h"

/* ---- decode: rejected messages --------------------------------------- */

static void decode__short_is_eproto(void **state)
{
	size_t len;
	struct lc_msg *m = msg_new(LC_MSG_LEAVE, MAX);
	uint8_t *buf = encode_new(m, &len);

	(void)state;
	/* a header cut short, its length field saying so or not */
	for (size_t n = 0; n < LC_CTRL_HDR_LEN; n++) {
		expect_rejected(buf, n, -EPROTO);
		set_le(buf, n, 4);
		expect_rejected(buf, n, -EPROTO);
		set_le(buf, len, 4);
	}
	/* a whole header that says it is shorter than a header */
	for (uint32_t n = 0; n < LC_CTRL_HDR_LEN; n++) {
		set_le(buf, n, 4);
		expect_rejected(buf, len, -EPROTO);
	}
	free(buf);
	free(m);
}

static void decode__long_is_eproto(void **state)
{
	const size_t lens[] = {LC_CTRL_MAX_MSG + 1, LC_CTRL_MAX_MSG + 1000};

	(void)state;
	for (size_t i = 0; i < NELEM(lens); i++) {
		/* configure: a REFUSE header whose length matches the buffer */
		uint8_t *buf = calloc(1, lens[i]);

		assert_non_null(buf);
		set_le(buf, lens[i], 4);
		set_le(buf + 4, LC_CTRL_VERSION, 2);
		set_le(buf + 6, LC_MSG_REFUSE, 2);

		/* run, verify */
		expect_rejected(buf, lens[i], -EPROTO);
		free(buf);
	}
}

static void decode__length_mismatch_is_eproto(void **state)
{
	const long delta[] = {-1, 1, -24, 1000};

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		struct lc_msg *m = msg_new(type, MAX);
		size_t len;
		uint8_t *buf = encode_new(m, &len);

		for (size_t i = 0; i < NELEM(delta); i++) {
			/* the length field says more or less than the buffer holds */
			set_le(buf, (uint64_t)((long)len + delta[i]), 4);
			expect_rejected(buf, len, -EPROTO);
			set_le(buf, UINT32_MAX, 4);
			expect_rejected(buf, len, -EPROTO);
			set_le(buf, len, 4);
		}
		/* the buffer holds less than the (valid) length field says */
		expect_rejected(buf, len - 1, -EPROTO);
		free(buf);
		free(m);
	}
}

static void decode__other_version_is_eprotonosupport(void **state)
{
	const uint16_t versions[] = {0, LC_CTRL_VERSION + 1, 0x0100, UINT16_MAX};

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		struct lc_msg *m = msg_new(type, MAX);
		size_t len;
		uint8_t *buf = encode_new(m, &len);

		for (size_t i = 0; i < NELEM(versions); i++) {
			set_le(buf + 4, versions[i], 2);
			expect_rejected(buf, len, -EPROTONOSUPPORT);
		}
		free(buf);
		free(m);
	}
}

static void decode__reserved_nonzero_is_eproto(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_HEARTBEAT, MAX);
	size_t len;
	uint8_t *buf = encode_new(m, &len);

	(void)state;
	for (size_t byte = 12; byte < 16; byte++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			buf[byte] = (uint8_t)(1u << bit);
			expect_rejected(buf, len, -EPROTO);
			buf[byte] = 0;
		}
	}
	free(buf);
	free(m);
}

static void decode__unknown_type_is_eproto(void **state)
{
	const uint16_t types[] = {0, LC_MSG_MAX_, LC_MSG_MAX_ + 1, 0x0100, UINT16_MAX};
	struct lc_msg *m = msg_new(LC_MSG_LEAVE, MAX);
	size_t len;
	uint8_t *buf = encode_new(m, &len);

	(void)state;
	for (size_t i = 0; i < NELEM(types); i++) {
		set_le(buf + 6, types[i], 2);
		expect_rejected(buf, len, -EPROTO);
	}
	free(buf);
	free(m);
}

static void decode__twisted_string_is_eproto(void **state)
{
	static struct bld b;
	unsigned tested = 0;

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		for (int s = MIN; s <= MAX; s++) {
			struct lc_msg *m = msg_new(type, (enum shape)s);
			int nstr;

			hand_encode(&b, m, &no_twist);
			nstr = b.nstr;
			/* every string of the message: too long, or holding a NUL anywhere */
			for (int at = 0; at < nstr; at++) {
				for (int mode = TW_LONG; mode < TW_MODES_; mode++) {
					const struct twist t = {.str_at = at,
					                        .mode = (enum twist_mode)mode};

					hand_encode(&b, m, &t);
					expect_rejected(b.b, b.n, -EPROTO);
					tested++;
				}
			}
			free(m);
		}
	}
	/*
	 * HELLO 3 + 3, WELCOME 512, REFUSE 1 + 1, MEMBER_JOIN 2 + 2, CHAN 65 + 1, CHAN_LEAVE 1 + 1,
	 * VC 512, OBJ 2 + 2
	 */
	assert_int_equal(tested, 4 * (6 + 512 + 2 + 4 + 66 + 2 + 512 + 4));
}

static void decode__string_length_over_buffer_is_eproto(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_CHAN_LEAVE, MIN);
	uint8_t buf[LC_CTRL_HDR_LEN + 2];
	size_t len;
	uint8_t *enc = encode_new(m, &len);

	(void)state;
	/* configure: an empty name whose length field says 1, LC_NAME_MAX, 0xffff */
	assert_int_equal(len, sizeof(buf));
	memcpy(buf, enc, len);
	for (uint32_t n = 1; n <= UINT16_MAX; n = n * 2 + 1) {
		set_le(buf + LC_CTRL_HDR_LEN, n, 2);
		expect_rejected(buf, sizeof(buf), -EPROTO);
	}
	free(enc);
	free(m);
}

static void decode__count_over_max_is_eproto(void **state)
{
	static struct bld b;
	const unsigned types[] = {LC_MSG_WELCOME, LC_MSG_CHAN, LC_MSG_VC, LC_MSG_OBJ};

	(void)state;
	for (size_t i = 0; i < NELEM(types); i++) {
		struct lc_msg *m = msg_new(types[i], MAX);
		const struct twist over = {.str_at = -1, .count_over = 1};
		const struct twist huge = {.str_at = -1, .count_huge = 1};

		/* max + 1 well-formed entries */
		hand_encode(&b, m, &over);
		expect_rejected(b.b, b.n, -EPROTO);
		/* a count of UINT32_MAX, followed by max entries or by none */
		hand_encode(&b, m, &huge);
		expect_rejected(b.b, b.n, -EPROTO);
		free(m);
		m = msg_new(types[i], MIN);
		hand_encode(&b, m, &huge);
		expect_rejected(b.b, b.n, -EPROTO);
		free(m);
	}
}

/*
 * decode__every_truncation_is_eproto -- every prefix of every valid message,
 * as a buffer of exactly that size: with the original length field, and
 * with the length field saying the prefix length (so the body parser itself
 * must find the missing bytes).
 */
static void decode__every_truncation_is_eproto(void **state)
{
	static struct lc_msg m, poison;

	(void)state;
	memset(&poison, POISON, sizeof(poison));
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		for (int s = MIN; s <= MAX; s++) {
			struct lc_msg *in = msg_new(type, (enum shape)s);
			size_t len;
			uint8_t *buf = encode_new(in, &len);

			for (size_t p = 0; p < len; p++) {
				uint8_t *cut = malloc(p ? p : 1);

				assert_non_null(cut);
				memcpy(cut, buf, p);
				memset(&m, POISON, MSG_HEAD);
				assert_int_equal(lc_ctrl_decode(cut, p, &m), -EPROTO);
				if (p >= 4) {
					set_le(cut, p, 4);
					assert_int_equal(lc_ctrl_decode(cut, p, &m), -EPROTO);
				}
				assert_memory_equal(&m, &poison, MSG_HEAD);
				free(cut);
			}
			free(buf);
			free(in);
		}
	}
}

static void decode__trailing_bytes_are_eproto(void **state)
{
	const size_t extra[] = {1, 2, 8, 200};

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		for (int s = MIN; s <= MAX; s++) {
			struct lc_msg *in = msg_new(type, (enum shape)s);
			size_t len;
			uint8_t *enc = encode_new(in, &len);

			for (size_t i = 0; i < NELEM(extra); i++) {
				/* configure: the message, then zeros (or 0xff), counted in len */
				uint8_t *buf = malloc(len + extra[i]);

				assert_non_null(buf);
				memcpy(buf, enc, len);
				memset(buf + len, i % 2 ? 0xff : 0, extra[i]);
				set_le(buf, len + extra[i], 4);

				/* run, verify */
				expect_rejected(buf, len + extra[i], -EPROTO);
				free(buf);
			}
			free(enc);
			free(in);
		}
	}
}

/*
 * decode__chan_page_outside_total_is_eproto -- a CHAN page is part of an
 * announcement of at most LC_CHAN_ENTRIES_MAX entries and lies inside it:
 * first + count <= total. Every count there is hostile: the receiver sizes
 * its buffer by them.
 */
static void decode__chan_page_outside_total_is_eproto(void **state)
{
	static struct bld b;
	static struct lc_msg out;
	const struct {
		uint32_t first, total, n;
		int ok;
	} cases[] = {
	    {0, 0, 0, 1},
	    {0, 3, 3, 1},
	    {0, 200, LC_MAX_REGIONS, 1},
	    {192, 200, 8, 1},
	    {LC_CHAN_ENTRIES_MAX - 1, LC_CHAN_ENTRIES_MAX, 1, 1},
	    {0, 2, 3, 0},                                /* more entries than the total */
	    {5, 4, 0, 0},                                /* first past the total */
	    {198, 200, 3, 0},                            /* the page runs past the total */
	    {0, LC_CHAN_ENTRIES_MAX + 1, 1, 0},          /* over the bound */
	    {0, UINT32_MAX, LC_MAX_REGIONS, 0},          /* far over it */
	    {UINT32_MAX, UINT32_MAX, 1, 0},              /* first + n wraps */
	    {UINT32_MAX - 1, LC_CHAN_ENTRIES_MAX, 3, 0}, /* and with a total in bounds */
	};

	(void)state;
	for (size_t i = 0; i < NELEM(cases); i++) {
		struct lc_msg *m = msg_new(LC_MSG_CHAN, MAX);

		m->u.chan.first = cases[i].first;
		m->u.chan.total = cases[i].total;
		m->u.chan.n = cases[i].n;
		hand_encode(&b, m, &no_twist);
		if (cases[i].ok) {
			assert_int_equal(lc_ctrl_decode(b.b, b.n, &out), 0);
			assert_msg_equal(m, &out);
		} else {
			expect_rejected(b.b, b.n, -EPROTO);
			/* and the encoder refuses to write it */
			assert_int_equal(lc_ctrl_encode(m, b.b, sizeof(b.b)), -EINVAL);
		}
		free(m);
	}
}

/*
 * decode__obj_payload_lengths -- an OBJ's payload: every length up to
 * LC_OBJ_MSG_MAX round-trips (raw bytes, NULs included); a length over it,
 * or one that says more (or fewer) bytes than follow, is refused.
 */
static void decode__obj_payload_lengths(void **state)
{
	static struct bld b;
	static struct lc_msg out;
	const uint32_t lens[] = {0, 1, 2, 511, LC_OBJ_MSG_MAX - 1, LC_OBJ_MSG_MAX};
	const uint32_t bad[] = {LC_OBJ_MSG_MAX + 1, 2 * LC_OBJ_MSG_MAX, 1u << 16, 1u << 31,
	                        UINT32_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(lens); i++) {
		struct lc_msg *m = msg_new(LC_MSG_OBJ, MAX);
		uint8_t *enc;
		size_t len;

		m->u.obj.len = lens[i];
		hand_encode(&b, m, &no_twist);
		assert_int_equal(lc_ctrl_decode(b.b, b.n, &out), 0);
		assert_msg_equal(m, &out);
		enc = encode_new(m, &len);
		assert_int_equal(len, b.n);
		assert_memory_equal(enc, b.b, len);
		if (lens[i] > 0) {
			/* the length says one byte more than follow (the message length agrees) */
			size_t at = b.n - lens[i] - 4;

			set_le(b.b + at, lens[i] + 1, 4);
			expect_rejected(b.b, b.n, -EPROTO);
			/* one byte fewer: a trailing byte */
			set_le(b.b + at, lens[i] - 1, 4);
			expect_rejected(b.b, b.n, -EPROTO);
		}
		free(enc);
		free(m);
	}
	for (size_t i = 0; i < NELEM(bad); i++) {
		struct lc_msg *m = msg_new(LC_MSG_OBJ, MIN);
		uint8_t buf[LC_CTRL_HDR_LEN + 8 + 64];
		size_t n;

		/* a length over the maximum, followed by as many bytes as fit */
		hand_encode(&b, m, &no_twist);
		n = b.n;
		memcpy(buf, b.b, n);
		set_le(buf + n - 4, bad[i], 4);
		memset(buf + n, 'p', sizeof(buf) - n);
		set_le(buf, sizeof(buf), 4);
		expect_rejected(buf, sizeof(buf), -EPROTO);
		/* the encoder refuses it too (and writes nothing) */
		m->u.obj.len = bad[i];
		assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), -EINVAL);
		free(m);
	}
}

static void decode__null_arguments_are_einval(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_LEAVE, MIN);
	size_t len;
	uint8_t *buf = encode_new(m, &len);

	(void)state;
	assert_int_equal(lc_ctrl_decode(buf, len, NULL), -EINVAL);
	assert_int_equal(lc_ctrl_decode(NULL, len, m), -EINVAL);
	assert_int_equal(lc_ctrl_decode(NULL, 0, m), -EPROTO);
	free(buf);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(decode__short_is_eproto),
	    cmocka_unit_test(decode__long_is_eproto),
	    cmocka_unit_test(decode__length_mismatch_is_eproto),
	    cmocka_unit_test(decode__other_version_is_eprotonosupport),
	    cmocka_unit_test(decode__reserved_nonzero_is_eproto),
	    cmocka_unit_test(decode__unknown_type_is_eproto),
	    cmocka_unit_test(decode__twisted_string_is_eproto),
	    cmocka_unit_test(decode__string_length_over_buffer_is_eproto),
	    cmocka_unit_test(decode__count_over_max_is_eproto),
	    cmocka_unit_test(decode__every_truncation_is_eproto),
	    cmocka_unit_test(decode__trailing_bytes_are_eproto),
	    cmocka_unit_test(decode__null_arguments_are_einval),
	    cmocka_unit_test(decode__chan_page_outside_total_is_eproto),
	    cmocka_unit_test(decode__obj_payload_lengths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
