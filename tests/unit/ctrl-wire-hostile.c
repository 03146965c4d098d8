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
	 * VC 512
	 */
	assert_int_equal(tested, 4 * (6 + 512 + 2 + 4 + 66 + 2 + 512));
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
	const unsigned types[] = {LC_MSG_WELCOME, LC_MSG_CHAN, LC_MSG_VC};

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
