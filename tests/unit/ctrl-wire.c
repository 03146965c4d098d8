/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctrl-wire.c -- lc_ctrl_encode/decode/peek and lc_msg_type_str (control-plane
 * codec): the encoder's layout and refusals, accepted messages, peek, type
 * names. Malformed and hostile input to the decoder: ctrl-wire-hostile.c; the
 * reference messages and the independent encoder: ctrl-wire-ref.c.
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

/* ---- encode ---------------------------------------------------------- */

static void encode__header_layout_matches_documented_offsets(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_HEARTBEAT, MIN);
	const uint8_t want[32] = {
	    32,   0,    0,    0,    2,    0,    LC_MSG_HEARTBEAT,
	    0,    0x11, 0x12, 0x13, 0x14, 0,    0,
	    0,    0,    0x21, 0x22, 0x23, 0x24, 0x25,
	    0x26, 0x27, 0x28, 0x31, 0x32, 0x33, 0x34,
	    0x35, 0x36, 0x37, 0x38,
	};
	uint8_t buf[32 + GUARD];

	(void)state;
	/* configure */
	m->src_node = 0x14131211u;
	m->src_inc = 0x2827262524232221ull;
	m->u.heartbeat.seq = 0x3837363534333231ull;
	memset(buf, POISON, sizeof(buf));

	/* run */
	assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), 32);

	/* verify: little-endian at the documented offsets, nothing written past the message */
	assert_memory_equal(buf, want, sizeof(want));
	for (size_t i = sizeof(want); i < sizeof(buf); i++)
		assert_int_equal(buf[i], POISON);
	free(m);
}

static void encode__string_and_array_layout(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_WELCOME, MIN);
	const uint8_t want_body[] = {
	    1,    0,    0,    0,                /* count */
	    0x04, 0x03, 0x02, 0x01,             /* node */
	    8,    7,    6,    5,    4, 3, 2, 1, /* inc */
	    2,    0,    'a',  'b',              /* ctrl_addr */
	    0,    0,                            /* fab_addr, empty */
	};
	uint8_t buf[LC_CTRL_HDR_LEN + sizeof(want_body)];

	(void)state;
	/* configure */
	m->u.welcome.n = 1;
	m->u.welcome.m[0].node = 0x01020304u;
	m->u.welcome.m[0].inc = 0x0102030405060708ull;
	strcpy(m->u.welcome.m[0].ctrl_addr, "ab");

	/* run */
	assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), sizeof(buf));

	/* verify */
	assert_int_equal(buf[0], sizeof(buf));
	assert_memory_equal(buf + LC_CTRL_HDR_LEN, want_body, sizeof(want_body));
	free(m);
}

static void encode__matches_hand_built_bytes(void **state)
{
	static struct bld b;

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		for (int s = MIN; s <= MAX; s++) {
			/* configure */
			struct lc_msg *m = msg_new(type, (enum shape)s);
			size_t len;
			uint8_t *buf;

			hand_encode(&b, m, &no_twist);

			/* run */
			buf = encode_new(m, &len);

			/* verify: both encoders agree, with the length the header comment gives */
			assert_int_equal(len, want_len[type][s]);
			assert_int_equal(b.n, len);
			assert_memory_equal(buf, b.b, len);
			free(buf);
			free(m);
		}
	}
}

static void encode__too_small_buffer_is_enospc(void **state)
{
	static uint8_t buf[LC_CTRL_MAX_MSG + GUARD];

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		for (int s = MIN; s <= MAX; s++) {
			/* configure */
			struct lc_msg *m = msg_new(type, (enum shape)s);
			size_t need = (size_t)want_len[type][s];

			memset(buf, POISON, need + GUARD);

			/* run: every cap below the length (cap 0 also with a NULL buffer) */
			assert_int_equal(lc_ctrl_encode(m, NULL, 0), -ENOSPC);
			for (size_t cap = 0; cap < need; cap++) {
				assert_int_equal(lc_ctrl_encode(m, buf, cap), -ENOSPC);
				for (size_t i = cap; i < cap + GUARD; i++)
					assert_int_equal(buf[i], POISON);
			}

			/* verify: nothing was written, then exactly @need bytes fit */
			for (size_t i = 0; i < need + GUARD; i++)
				assert_int_equal(buf[i], POISON);
			assert_int_equal(lc_ctrl_encode(m, buf, need), (long)need);
			for (size_t i = need; i < need + GUARD; i++)
				assert_int_equal(buf[i], POISON);
			free(m);
		}
	}
}

static void encode__unknown_type_is_einval(void **state)
{
	const unsigned types[] = {0, LC_MSG_MAX_, LC_MSG_MAX_ + 1, UINT16_MAX};
	uint8_t buf[256];

	(void)state;
	for (size_t i = 0; i < NELEM(types); i++) {
		/* configure */
		struct lc_msg *m = msg_new(LC_MSG_LEAVE, MAX);

		m->type = (uint16_t)types[i];
		memset(buf, POISON, sizeof(buf));

		/* run */
		assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), -EINVAL);

		/* verify */
		for (size_t j = 0; j < sizeof(buf); j++)
			assert_int_equal(buf[j], POISON);
		free(m);
	}
}

/* string_fields -- the string fields of a MAX message @m (first and last array entries). */
static size_t string_fields(struct lc_msg *m, char **f, size_t *size)
{
	size_t n = 0;

#define ADD(field) (f[n] = (field), size[n++] = sizeof(field))
	switch (m->type) {
	case LC_MSG_HELLO:
		ADD(m->u.hello.fabric);
		ADD(m->u.hello.self.ctrl_addr);
		ADD(m->u.hello.self.fab_addr);
		break;
	case LC_MSG_WELCOME:
		ADD(m->u.welcome.m[0].ctrl_addr);
		ADD(m->u.welcome.m[LC_MAX_MEMBERS - 1].fab_addr);
		break;
	case LC_MSG_REFUSE:
		ADD(m->u.refuse.reason);
		break;
	case LC_MSG_MEMBER_JOIN:
		ADD(m->u.member_join.ctrl_addr);
		ADD(m->u.member_join.fab_addr);
		break;
	case LC_MSG_CHAN:
		ADD(m->u.chan.name);
		ADD(m->u.chan.r[0].name);
		ADD(m->u.chan.r[LC_MAX_REGIONS - 1].name);
		break;
	case LC_MSG_CHAN_LEAVE:
		ADD(m->u.chan_leave.name);
		break;
	case LC_MSG_OBJ:
		ADD(m->u.obj.chan);
		ADD(m->u.obj.obj);
		break;
	default:
		break;
	}
#undef ADD
	return n;
}

static void encode__unterminated_string_is_einval(void **state)
{
	static uint8_t buf[LC_CTRL_MAX_MSG];
	unsigned tested = 0;

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		struct lc_msg *m = msg_new(type, MAX);
		char *f[4];
		size_t size[4], n = string_fields(m, f, size);

		for (size_t i = 0; i < n; i++) {
			/* configure: no NUL within the field, i.e. longer than its maximum */
			char save[LC_NAME_MAX + 1];

			memcpy(save, f[i], size[i]);
			memset(f[i], 'x', size[i]);
			memset(buf, POISON, sizeof(buf));

			/* run */
			assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), -EINVAL);

			/* verify */
			for (size_t j = 0; j < sizeof(buf); j++)
				assert_int_equal(buf[j], POISON);
			memcpy(f[i], save, size[i]);
			assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), want_len[type][MAX]);
			tested++;
		}
		free(m);
	}
	assert_int_equal(tested, 14);
}

static void encode__count_over_max_is_einval(void **state)
{
	const uint32_t over[] = {1, 2, UINT32_MAX - LC_MAX_MEMBERS};
	static uint8_t buf[LC_CTRL_MAX_MSG];

	(void)state;
	for (size_t i = 0; i < NELEM(over); i++) {
		/* configure */
		struct lc_msg *w = msg_new(LC_MSG_WELCOME, MAX);
		struct lc_msg *c = msg_new(LC_MSG_CHAN, MAX);

		w->u.welcome.n = LC_MAX_MEMBERS + over[i];
		c->u.chan.n = LC_MAX_REGIONS + over[i];
		memset(buf, POISON, sizeof(buf));

		/* run */
		assert_int_equal(lc_ctrl_encode(w, buf, sizeof(buf)), -EINVAL);
		assert_int_equal(lc_ctrl_encode(c, buf, sizeof(buf)), -EINVAL);

		/* verify */
		for (size_t j = 0; j < sizeof(buf); j++)
			assert_int_equal(buf[j], POISON);
		free(w);
		free(c);
	}
}

static void encode__einval_wins_over_enospc(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_CHAN_LEAVE, MAX);
	uint8_t buf[8];

	(void)state;
	/* configure */
	memset(m->u.chan_leave.name, 'x', sizeof(m->u.chan_leave.name));

	/* run, verify: the message is wrong whatever the buffer */
	assert_int_equal(lc_ctrl_encode(m, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(lc_ctrl_encode(m, NULL, 0), -EINVAL);
	free(m);
}

static void encode__null_arguments_are_einval(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_LEAVE, MIN);
	uint8_t buf[64];

	(void)state;
	assert_int_equal(lc_ctrl_encode(NULL, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(lc_ctrl_encode(m, NULL, sizeof(buf)), -EINVAL);
	free(m);
}

/* ---- decode: accepted messages --------------------------------------- */

static void decode__round_trip_every_type(void **state)
{
	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		for (int s = MIN; s <= MAX; s++) {
			/* configure */
			struct lc_msg *in = msg_new(type, (enum shape)s);
			struct lc_msg *out = malloc(sizeof(*out));
			size_t len;
			uint8_t *buf = encode_new(in, &len);

			assert_non_null(out);
			memset(out, POISON, sizeof(*out));

			/* run */
			assert_int_equal(lc_ctrl_decode(buf, len, out), 0);

			/* verify */
			assert_msg_equal(in, out);
			free(buf);
			free(out);
			free(in);
		}
	}
}

static void decode__strings_are_nul_padded(void **state)
{
	struct lc_msg *in = msg_new(LC_MSG_HELLO, MAX);
	struct lc_msg *out = malloc(sizeof(*out));
	size_t len;
	uint8_t *buf;

	(void)state;
	/* configure: short strings, a poisoned output */
	strcpy(in->u.hello.fabric, "tcp");
	strcpy(in->u.hello.self.ctrl_addr, "");
	strcpy(in->u.hello.self.fab_addr, "10.0.0.1:7000");
	buf = encode_new(in, &len);
	assert_non_null(out);
	memset(out, POISON, sizeof(*out));

	/* run */
	assert_int_equal(lc_ctrl_decode(buf, len, out), 0);

	/* verify: each string is NUL-terminated and the rest of its field zeroed */
	assert_string_equal(out->u.hello.fabric, "tcp");
	for (size_t i = 3; i < sizeof(out->u.hello.fabric); i++)
		assert_int_equal(out->u.hello.fabric[i], 0);
	for (size_t i = 0; i < sizeof(out->u.hello.self.ctrl_addr); i++)
		assert_int_equal(out->u.hello.self.ctrl_addr[i], 0);
	assert_string_equal(out->u.hello.self.fab_addr, "10.0.0.1:7000");
	assert_msg_equal(in, out);
	free(buf);
	free(out);
	free(in);
}

static void decode__stream_of_messages_with_peek(void **state)
{
	static uint8_t stream[3 * LC_CTRL_MAX_MSG];
	const unsigned types[] = {LC_MSG_HELLO, LC_MSG_HEARTBEAT, LC_MSG_CHAN, LC_MSG_LEAVE};
	struct lc_msg *in[NELEM(types)], *out = malloc(sizeof(*out));
	size_t used = 0, off = 0;

	(void)state;
	/* configure */
	assert_non_null(out);
	for (size_t i = 0; i < NELEM(types); i++) {
		long n;

		in[i] = msg_new(types[i], i % 2 ? MIN : MAX);
		n = lc_ctrl_encode(in[i], stream + used, sizeof(stream) - used);
		assert_true(n > 0);
		used += (size_t)n;
	}

	/* run, verify: each message comes out in order, then the stream is empty */
	for (size_t i = 0; i < NELEM(types); i++) {
		long n = lc_ctrl_peek(stream + off, used - off);

		assert_int_equal(n, want_len[types[i]][i % 2 ? MIN : MAX]);
		assert_int_equal(lc_ctrl_decode(stream + off, (size_t)n, out), 0);
		assert_msg_equal(in[i], out);
		off += (size_t)n;
		free(in[i]);
	}
	assert_int_equal(off, used);
	assert_int_equal(lc_ctrl_peek(stream + off, 0), 0);
	free(out);
}

/* ---- peek, type names ------------------------------------------------ */

static void peek__fewer_than_four_bytes_is_zero(void **state)
{
	const uint8_t buf[4] = {0xff, 0xff, 0xff, 0xff};

	(void)state;
	for (size_t n = 0; n < 4; n++)
		assert_int_equal(lc_ctrl_peek(buf, n), 0);
	assert_int_equal(lc_ctrl_peek(NULL, 0), 0);
}

static void peek__length_bounds(void **state)
{
	const struct {
		uint32_t len;
		long want;
	} cases[] = {
	    {0, -EPROTO},
	    {1, -EPROTO},
	    {LC_CTRL_HDR_LEN - 1, -EPROTO},
	    {LC_CTRL_HDR_LEN, LC_CTRL_HDR_LEN},
	    {LC_CTRL_HDR_LEN + 1, LC_CTRL_HDR_LEN + 1},
	    {LC_CTRL_MAX_MSG - 1, LC_CTRL_MAX_MSG - 1},
	    {LC_CTRL_MAX_MSG, LC_CTRL_MAX_MSG},
	    {LC_CTRL_MAX_MSG + 1, -EPROTO},
	    {0x01000018u, -EPROTO}, /* 24 with a stray high byte */
	    {UINT32_MAX, -EPROTO},
	};

	(void)state;
	for (size_t i = 0; i < NELEM(cases); i++) {
		/* configure: exactly 4 bytes, so ASan sees a read past them */
		uint8_t *buf = malloc(4);

		assert_non_null(buf);
		set_le(buf, cases[i].len, 4);

		/* run, verify: the rest of the message need not be there */
		assert_int_equal(lc_ctrl_peek(buf, 4), cases[i].want);
		free(buf);
	}
}

static void peek__reads_only_the_length(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_CHAN, MAX);
	size_t len;
	uint8_t *buf = encode_new(m, &len);

	(void)state;
	/* a bad version or type is decode's business, not peek's */
	set_le(buf + 4, 7, 2);
	set_le(buf + 6, 0, 2);
	for (size_t avail = 4; avail <= len; avail += 97)
		assert_int_equal(lc_ctrl_peek(buf, avail), (long)len);
	free(buf);
	free(m);
}

static void type_str__every_type(void **state)
{
	const char *want[LC_MSG_MAX_] = {
	    [LC_MSG_HELLO] = "HELLO",
	    [LC_MSG_CHALLENGE] = "CHALLENGE",
	    [LC_MSG_AUTH] = "AUTH",
	    [LC_MSG_WELCOME] = "WELCOME",
	    [LC_MSG_REFUSE] = "REFUSE",
	    [LC_MSG_MEMBER_JOIN] = "MEMBER_JOIN",
	    [LC_MSG_MEMBER_LEAVE] = "MEMBER_LEAVE",
	    [LC_MSG_HEARTBEAT] = "HEARTBEAT",
	    [LC_MSG_CHAN] = "CHAN",
	    [LC_MSG_CHAN_LEAVE] = "CHAN_LEAVE",
	    [LC_MSG_LEAVE] = "LEAVE",
	    [LC_MSG_VC] = "VC",
	    [LC_MSG_OBJ] = "OBJ",
	};

	(void)state;
	for (unsigned type = 1; type < LC_MSG_MAX_; type++)
		assert_string_equal(lc_msg_type_str(type), want[type]);
	assert_string_equal(lc_msg_type_str(0), "?");
	assert_string_equal(lc_msg_type_str(LC_MSG_MAX_), "?");
	assert_string_equal(lc_msg_type_str(UINT16_MAX), "?");
	assert_string_equal(lc_msg_type_str(~0u), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(encode__header_layout_matches_documented_offsets),
	    cmocka_unit_test(encode__string_and_array_layout),
	    cmocka_unit_test(encode__matches_hand_built_bytes),
	    cmocka_unit_test(encode__too_small_buffer_is_enospc),
	    cmocka_unit_test(encode__unknown_type_is_einval),
	    cmocka_unit_test(encode__unterminated_string_is_einval),
	    cmocka_unit_test(encode__count_over_max_is_einval),
	    cmocka_unit_test(encode__einval_wins_over_enospc),
	    cmocka_unit_test(encode__null_arguments_are_einval),
	    cmocka_unit_test(decode__round_trip_every_type),
	    cmocka_unit_test(decode__strings_are_nul_padded),
	    cmocka_unit_test(decode__stream_of_messages_with_peek),
	    cmocka_unit_test(peek__fewer_than_four_bytes_is_zero),
	    cmocka_unit_test(peek__length_bounds),
	    cmocka_unit_test(peek__reads_only_the_length),
	    cmocka_unit_test(type_str__every_type),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
