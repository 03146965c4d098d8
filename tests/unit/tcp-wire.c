/* SPDX-License-Identifier: BSD-2-Clause */
/* tcp-wire.c -- tcp_wire_encode/decode and tcp_hello_encode/decode (tcp provider frame codec) */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "tcp/wire.h"

#define POISON 0xa5

/* types whose payload length must be 0 */
static const uint8_t fixed_types[] = {
    TCP_F_READ, TCP_F_CAS, TCP_F_FAA, TCP_F_ACK, TCP_F_ATOMIC_RESP, TCP_F_NAK, TCP_F_CREDIT,
};

/* types that carry a variable payload of 0..TCP_MAX_SEG bytes */
static const uint8_t var_types[] = {
    TCP_F_WRITE,
    TCP_F_WRITE_IMM,
    TCP_F_SEND,
    TCP_F_READ_RESP,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* frame_ref -- a valid frame of @type with every field set to a distinct, wide value. */
static struct tcp_frame frame_ref(uint8_t type)
{
	struct tcp_frame f = {
	    .type = type,
	    .flags = TCP_FL_FIRST | TCP_FL_LAST,
	    .len = 0,
	    .psn = 0xfedcba98u,
	    .key = 0x89abcdefu,
	    .addr = 0x0123456789abcdefull,
	    .a = 0x8877665544332211ull,
	    .b = 0xf0e1d2c3b4a59687ull,
	};

	if (type == TCP_F_HELLO || type == TCP_F_HELLO_ACK)
		f.len = TCP_HELLO_LEN;
	else if (type == TCP_F_WRITE || type == TCP_F_WRITE_IMM || type == TCP_F_SEND ||
	         type == TCP_F_READ_RESP)
		f.len = 1000 + type;
	if (type == TCP_F_READ)
		f.a = 4096;
	return f;
}

static void assert_frame_equal(const struct tcp_frame *x, const struct tcp_frame *y)
{
	assert_int_equal(x->type, y->type);
	assert_int_equal(x->flags, y->flags);
	assert_int_equal(x->len, y->len);
	assert_int_equal(x->psn, y->psn);
	assert_int_equal(x->key, y->key);
	assert_int_equal(x->addr, y->addr);
	assert_int_equal(x->a, y->a);
	assert_int_equal(x->b, y->b);
}

/* expect_rejected -- decoding @hdr gives -EPROTO and leaves the output untouched. */
static void expect_rejected(const uint8_t *hdr)
{
	struct tcp_frame f, poison;

	memset(&f, POISON, sizeof(f));
	memset(&poison, POISON, sizeof(poison));
	assert_int_equal(tcp_wire_decode(hdr, TCP_HDR_LEN, &f), -EPROTO);
	assert_memory_equal(&f, &poison, sizeof(f));
}

static void put32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void encode__layout_matches_documented_offsets(void **state)
{
	const struct tcp_frame f = {
	    .type = TCP_F_CAS,
	    .flags = TCP_FL_ACKREQ,
	    .len = 0x04030201u,
	    .psn = 0x14131211u,
	    .key = 0x24232221u,
	    .addr = 0x3837363534333231ull,
	    .a = 0x4847464544434241ull,
	    .b = 0x5857565554535251ull,
	};
	const uint8_t want[TCP_HDR_LEN] = {
	    TCP_F_CAS, TCP_FL_ACKREQ, 0,    0,    0x01, 0x02, 0x03, 0x04, 0x11, 0x12,
	    0x13,      0x14,          0x21, 0x22, 0x23, 0x24, 0x31, 0x32, 0x33, 0x34,
	    0x35,      0x36,          0x37, 0x38, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46,
	    0x47,      0x48,          0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
	};
	uint8_t buf[TCP_HDR_LEN + 8];

	(void)state;
	/* configure */
	memset(buf, POISON, sizeof(buf));

	/* run */
	tcp_wire_encode(&f, buf);

	/* verify: little-endian at the documented offsets, nothing written past the header */
	assert_memory_equal(buf, want, TCP_HDR_LEN);
	for (size_t i = TCP_HDR_LEN; i < sizeof(buf); i++)
		assert_int_equal(buf[i], POISON);
}

static void decode__round_trip_every_type(void **state)
{
	(void)state;
	for (uint8_t type = 1; type < TCP_F_MAX_; type++) {
		/* configure */
		struct tcp_frame in = frame_ref(type), out;
		uint8_t buf[TCP_HDR_LEN];
		long ret;

		tcp_wire_encode(&in, buf);
		memset(&out, 0, sizeof(out));

		/* run */
		ret = tcp_wire_decode(buf, sizeof(buf), &out);

		/* verify */
		assert_int_equal(ret, TCP_HDR_LEN + (long)in.len);
		assert_frame_equal(&in, &out);
	}
}

static void decode__round_trip_every_flag_combination(void **state)
{
	(void)state;
	for (unsigned flags = 0; flags <= TCP_FL_ALL_; flags++) {
		/* configure */
		struct tcp_frame in = frame_ref(TCP_F_SEND), out;
		uint8_t buf[TCP_HDR_LEN];

		in.flags = (uint8_t)flags;
		tcp_wire_encode(&in, buf);

		/* run */
		assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out), TCP_HDR_LEN + in.len);

		/* verify */
		assert_frame_equal(&in, &out);
	}
}

static void decode__round_trip_extreme_field_values(void **state)
{
	const uint64_t vals[] = {0, 1, UINT32_MAX, (uint64_t)UINT32_MAX + 1, UINT64_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(vals); i++) {
		/* configure: all-zero / all-one patterns of every width */
		struct tcp_frame in = frame_ref(TCP_F_CAS), out;
		uint8_t buf[TCP_HDR_LEN];

		in.psn = (uint32_t)vals[i];
		in.key = (uint32_t)vals[i];
		in.addr = vals[i];
		in.a = vals[i];
		in.b = ~vals[i];
		tcp_wire_encode(&in, buf);

		/* run */
		assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out), TCP_HDR_LEN);

		/* verify */
		assert_frame_equal(&in, &out);
	}
}

static void decode__variable_payload_bounds(void **state)
{
	const uint32_t lens[] = {0, 1, TCP_MAX_SEG - 1, TCP_MAX_SEG};

	(void)state;
	for (size_t t = 0; t < NELEM(var_types); t++) {
		for (size_t i = 0; i < NELEM(lens); i++) {
			/* configure */
			struct tcp_frame in = frame_ref(var_types[t]), out;
			uint8_t buf[TCP_HDR_LEN];

			in.len = lens[i];
			tcp_wire_encode(&in, buf);

			/* run + verify */
			assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out),
			                 TCP_HDR_LEN + (long)lens[i]);
			assert_int_equal(out.len, lens[i]);
		}
	}
}

static void decode__short_header_needs_more(void **state)
{
	const size_t avails[] = {0, 1, TCP_HDR_LEN / 2, TCP_HDR_LEN - 1};
	struct tcp_frame in = frame_ref(TCP_F_ACK), f, poison;
	uint8_t buf[TCP_HDR_LEN];

	(void)state;
	/* configure */
	tcp_wire_encode(&in, buf);
	memset(&poison, POISON, sizeof(poison));

	for (size_t i = 0; i < NELEM(avails); i++) {
		memset(&f, POISON, sizeof(f));

		/* run */
		assert_int_equal(tcp_wire_decode(buf, avails[i], &f), 0);

		/* verify: nothing written */
		assert_memory_equal(&f, &poison, sizeof(f));
	}
}

static void decode__short_header_of_garbage_needs_more(void **state)
{
	uint8_t buf[TCP_HDR_LEN];
	struct tcp_frame f;

	(void)state;
	/* configure: a header that would be rejected once complete */
	memset(buf, 0xff, sizeof(buf));

	/* run + verify: too short to judge yet */
	assert_int_equal(tcp_wire_decode(buf, TCP_HDR_LEN - 1, &f), 0);
	assert_int_equal(tcp_wire_decode(buf, TCP_HDR_LEN, &f), -EPROTO);
}

static void decode__payload_need_not_be_available(void **state)
{
	struct tcp_frame in = frame_ref(TCP_F_WRITE), out;
	uint8_t buf[TCP_HDR_LEN];

	(void)state;
	/* configure */
	in.len = TCP_MAX_SEG;
	tcp_wire_encode(&in, buf);

	/* run: only the header is available */
	assert_int_equal(tcp_wire_decode(buf, TCP_HDR_LEN, &out), TCP_HDR_LEN + (long)TCP_MAX_SEG);

	/* verify */
	assert_frame_equal(&in, &out);
}

static void decode__more_than_one_frame_available(void **state)
{
	struct tcp_frame a = frame_ref(TCP_F_ACK), b = frame_ref(TCP_F_CREDIT), out;
	uint8_t buf[2 * TCP_HDR_LEN];
	long n;

	(void)state;
	/* configure */
	a.psn = 1;
	b.psn = 2;
	tcp_wire_encode(&a, buf);
	tcp_wire_encode(&b, buf + TCP_HDR_LEN);

	/* run */
	n = tcp_wire_decode(buf, sizeof(buf), &out);

	/* verify: the first frame only, then the second one */
	assert_int_equal(n, TCP_HDR_LEN);
	assert_frame_equal(&a, &out);
	assert_int_equal(tcp_wire_decode(buf + n, sizeof(buf) - (size_t)n, &out), TCP_HDR_LEN);
	assert_frame_equal(&b, &out);
}

static void decode__type_zero_is_eproto(void **state)
{
	struct tcp_frame in = frame_ref(TCP_F_ACK);
	uint8_t buf[TCP_HDR_LEN];

	(void)state;
	/* configure */
	tcp_wire_encode(&in, buf);
	buf[0] = 0;

	/* run + verify */
	expect_rejected(buf);
}

static void decode__unknown_type_is_eproto(void **state)
{
	const unsigned types[] = {TCP_F_MAX_, TCP_F_MAX_ + 1, 0x7f, 0x80, 0xff};

	(void)state;
	for (size_t i = 0; i < NELEM(types); i++) {
		/* configure: an otherwise valid zero-payload header */
		struct tcp_frame in = frame_ref(TCP_F_ACK);
		uint8_t buf[TCP_HDR_LEN];

		tcp_wire_encode(&in, buf);
		buf[0] = (uint8_t)types[i];

		/* run + verify */
		expect_rejected(buf);
	}
}

static void decode__unknown_flag_bits_is_eproto(void **state)
{
	(void)state;
	for (unsigned bit = 0; bit < 8; bit++) {
		/* configure */
		struct tcp_frame in = frame_ref(TCP_F_SEND), out;
		uint8_t buf[TCP_HDR_LEN];

		tcp_wire_encode(&in, buf);
		buf[1] = (uint8_t)(1u << bit);

		/* run + verify: the four defined bits pass, the others fail */
		if ((1u << bit) & TCP_FL_ALL_)
			assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out),
			                 TCP_HDR_LEN + (long)in.len);
		else
			expect_rejected(buf);
	}
}

static void decode__reserved_bytes_nonzero_is_eproto(void **state)
{
	const uint8_t vals[] = {0x01, 0x80, 0xff};

	(void)state;
	for (int byte = 2; byte <= 3; byte++) {
		for (size_t i = 0; i < NELEM(vals); i++) {
			/* configure */
			struct tcp_frame in = frame_ref(TCP_F_FAA);
			uint8_t buf[TCP_HDR_LEN];

			tcp_wire_encode(&in, buf);
			buf[byte] = vals[i];

			/* run + verify */
			expect_rejected(buf);
		}
	}
}

static void decode__payload_over_max_seg_is_eproto(void **state)
{
	const uint32_t lens[] = {TCP_MAX_SEG + 1, 2 * TCP_MAX_SEG, 0x7fffffffu, UINT32_MAX};

	(void)state;
	for (size_t t = 0; t < NELEM(var_types); t++) {
		for (size_t i = 0; i < NELEM(lens); i++) {
			/* configure */
			struct tcp_frame in = frame_ref(var_types[t]);
			uint8_t buf[TCP_HDR_LEN];

			in.len = lens[i];
			tcp_wire_encode(&in, buf);

			/* run + verify */
			expect_rejected(buf);
		}
	}
}

static void decode__payload_on_fixed_size_type_is_eproto(void **state)
{
	const uint32_t lens[] = {1, 8, TCP_HELLO_LEN, TCP_MAX_SEG};

	(void)state;
	for (size_t t = 0; t < NELEM(fixed_types); t++) {
		for (size_t i = 0; i < NELEM(lens); i++) {
			/* configure */
			struct tcp_frame in = frame_ref(fixed_types[t]);
			uint8_t buf[TCP_HDR_LEN];

			in.len = lens[i];
			tcp_wire_encode(&in, buf);

			/* run + verify */
			expect_rejected(buf);
		}
	}
}

static void decode__hello_wrong_len_is_eproto(void **state)
{
	const uint32_t lens[] = {0, 1, TCP_HELLO_LEN - 1, TCP_HELLO_LEN + 1, TCP_MAX_SEG};
	const uint8_t types[] = {TCP_F_HELLO, TCP_F_HELLO_ACK};

	(void)state;
	for (size_t t = 0; t < NELEM(types); t++) {
		for (size_t i = 0; i < NELEM(lens); i++) {
			/* configure */
			struct tcp_frame in = frame_ref(types[t]);
			uint8_t buf[TCP_HDR_LEN];

			in.len = lens[i];
			tcp_wire_encode(&in, buf);

			/* run + verify */
			expect_rejected(buf);
		}
	}
}

static void decode__read_of_zero_bytes_is_eproto(void **state)
{
	struct tcp_frame in = frame_ref(TCP_F_READ);
	uint8_t buf[TCP_HDR_LEN];

	(void)state;
	/* configure */
	in.a = 0;
	tcp_wire_encode(&in, buf);

	/* run + verify */
	expect_rejected(buf);
}

static void decode__read_over_max_seg_is_eproto(void **state)
{
	/* 1 << 32 and 1 << 32 | 1 would pass a check done on a 32-bit truncation */
	const uint64_t as[] = {TCP_MAX_SEG + 1ull, 1ull << 32, (1ull << 32) | 1, UINT64_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(as); i++) {
		/* configure */
		struct tcp_frame in = frame_ref(TCP_F_READ);
		uint8_t buf[TCP_HDR_LEN];

		in.a = as[i];
		tcp_wire_encode(&in, buf);

		/* run + verify */
		expect_rejected(buf);
	}
}

static void decode__read_size_bounds_ok(void **state)
{
	const uint64_t as[] = {1, 8, TCP_MAX_SEG - 1, TCP_MAX_SEG};

	(void)state;
	for (size_t i = 0; i < NELEM(as); i++) {
		/* configure */
		struct tcp_frame in = frame_ref(TCP_F_READ), out;
		uint8_t buf[TCP_HDR_LEN];

		in.a = as[i];
		tcp_wire_encode(&in, buf);

		/* run */
		assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out), TCP_HDR_LEN);

		/* verify */
		assert_int_equal(out.a, as[i]);
	}
}

static void decode__a_is_unchecked_for_other_types(void **state)
{
	const uint8_t types[] = {TCP_F_WRITE, TCP_F_CAS, TCP_F_FAA, TCP_F_ATOMIC_RESP,
	                         TCP_F_CREDIT};

	(void)state;
	for (size_t t = 0; t < NELEM(types); t++) {
		/* configure: a == 0 and a huge are legal outside READ (compare, addend, count) */
		struct tcp_frame in = frame_ref(types[t]), out;
		uint8_t buf[TCP_HDR_LEN];

		in.a = 0;
		tcp_wire_encode(&in, buf);

		/* run + verify */
		assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out),
		                 TCP_HDR_LEN + (long)in.len);
		in.a = UINT64_MAX;
		tcp_wire_encode(&in, buf);
		assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &out),
		                 TCP_HDR_LEN + (long)in.len);
		assert_int_equal(out.a, UINT64_MAX);
	}
}

static void decode__hand_built_header(void **state)
{
	uint8_t buf[TCP_HDR_LEN] = {0};
	struct tcp_frame f;

	(void)state;
	/* configure: bytes laid out by hand, not by the encoder */
	buf[0] = TCP_F_READ;
	buf[1] = TCP_FL_FIRST | TCP_FL_LAST | TCP_FL_ACKREQ;
	put32le(buf + 8, 0xdeadbeefu);
	put32le(buf + 12, 0x00030002u);
	put64le(buf + 16, 0x00007f0012345678ull);
	put64le(buf + 24, 512);
	put64le(buf + 32, 0x1122334455667788ull);

	/* run */
	assert_int_equal(tcp_wire_decode(buf, sizeof(buf), &f), TCP_HDR_LEN);

	/* verify */
	assert_int_equal(f.type, TCP_F_READ);
	assert_int_equal(f.flags, TCP_FL_FIRST | TCP_FL_LAST | TCP_FL_ACKREQ);
	assert_int_equal(f.len, 0);
	assert_int_equal(f.psn, 0xdeadbeefu);
	assert_int_equal(f.key, 0x00030002u);
	assert_int_equal(f.addr, 0x00007f0012345678ull);
	assert_int_equal(f.a, 512);
	assert_int_equal(f.b, 0x1122334455667788ull);
}

/* hello_ref -- a valid hello with a @priv_len-byte private part. */
static struct tcp_hello hello_ref(uint16_t priv_len)
{
	struct tcp_hello h = {
	    .magic = TCP_MAGIC,
	    .version = TCP_VERSION,
	    .priv_len = priv_len,
	    .sq_depth = 256,
	    .read_window = 1u << 20,
	};

	for (unsigned i = 0; i < TCP_PRIV_MAX; i++)
		h.priv[i] = i < priv_len ? (uint8_t)(0x40 + i) : 0;
	return h;
}

/* expect_hello_rejected -- @buf of @len bytes is refused and *h is untouched. */
static void expect_hello_rejected(const uint8_t *buf, size_t len)
{
	struct tcp_hello h, poison;

	memset(&h, POISON, sizeof(h));
	memset(&poison, POISON, sizeof(poison));
	assert_int_equal(tcp_hello_decode(buf, len, &h), -EPROTO);
	assert_memory_equal(&h, &poison, sizeof(h));
}

static void hello_encode__layout_matches_documented_offsets(void **state)
{
	struct tcp_hello h = hello_ref(3);
	uint8_t want[TCP_HELLO_LEN] = {0};
	uint8_t buf[TCP_HELLO_LEN + 8];

	(void)state;
	/* configure */
	h.sq_depth = 0x01020304u;
	h.read_window = 0x05060708u;
	put32le(want, TCP_MAGIC);
	want[4] = TCP_VERSION;
	want[6] = 3;
	put32le(want + 8, 0x01020304u);
	put32le(want + 12, 0x05060708u);
	want[16] = 0x40;
	want[17] = 0x41;
	want[18] = 0x42;
	memset(buf, POISON, sizeof(buf));

	/* run */
	tcp_hello_encode(&h, buf);

	/* verify: zero padding, nothing past TCP_HELLO_LEN */
	assert_memory_equal(buf, want, TCP_HELLO_LEN);
	for (size_t i = TCP_HELLO_LEN; i < sizeof(buf); i++)
		assert_int_equal(buf[i], POISON);
}

static void hello_decode__round_trip(void **state)
{
	const uint16_t lens[] = {0, 1, 17, TCP_PRIV_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(lens); i++) {
		/* configure */
		struct tcp_hello in = hello_ref(lens[i]), out;
		uint8_t buf[TCP_HELLO_LEN];

		tcp_hello_encode(&in, buf);
		memset(&out, POISON, sizeof(out));

		/* run */
		assert_int_equal(tcp_hello_decode(buf, sizeof(buf), &out), 0);

		/* verify: priv beyond priv_len comes back zeroed */
		assert_int_equal(out.magic, TCP_MAGIC);
		assert_int_equal(out.version, TCP_VERSION);
		assert_int_equal(out.priv_len, lens[i]);
		assert_int_equal(out.sq_depth, in.sq_depth);
		assert_int_equal(out.read_window, in.read_window);
		assert_memory_equal(out.priv, in.priv, TCP_PRIV_MAX);
	}
}

static void hello_decode__priv_after_priv_len_is_ignored(void **state)
{
	struct tcp_hello in = hello_ref(2), out;
	uint8_t buf[TCP_HELLO_LEN];

	(void)state;
	/* configure: junk in the unused private bytes */
	tcp_hello_encode(&in, buf);
	memset(buf + 16 + 2, 0xee, TCP_PRIV_MAX - 2);

	/* run */
	assert_int_equal(tcp_hello_decode(buf, sizeof(buf), &out), 0);

	/* verify */
	assert_int_equal(out.priv[0], 0x40);
	assert_int_equal(out.priv[1], 0x41);
	for (unsigned i = 2; i < TCP_PRIV_MAX; i++)
		assert_int_equal(out.priv[i], 0);
}

static void hello_decode__limits_ok(void **state)
{
	const uint32_t sq[] = {1, 65536};
	const uint32_t rw[] = {TCP_MAX_SEG, 64u << 20};

	(void)state;
	for (size_t i = 0; i < NELEM(sq); i++) {
		for (size_t j = 0; j < NELEM(rw); j++) {
			/* configure */
			struct tcp_hello in = hello_ref(TCP_PRIV_MAX), out;
			uint8_t buf[TCP_HELLO_LEN];

			in.sq_depth = sq[i];
			in.read_window = rw[j];
			tcp_hello_encode(&in, buf);

			/* run */
			assert_int_equal(tcp_hello_decode(buf, sizeof(buf), &out), 0);

			/* verify */
			assert_int_equal(out.sq_depth, sq[i]);
			assert_int_equal(out.read_window, rw[j]);
		}
	}
}

static void hello_decode__bad_magic_is_eproto(void **state)
{
	const uint32_t magics[] = {0, TCP_MAGIC ^ 1, TCP_MAGIC ^ 0x80000000u, 0x4f434f4cu};

	(void)state;
	for (size_t i = 0; i < NELEM(magics); i++) {
		/* configure */
		struct tcp_hello in = hello_ref(4);
		uint8_t buf[TCP_HELLO_LEN];

		in.magic = magics[i];
		tcp_hello_encode(&in, buf);

		/* run + verify */
		expect_hello_rejected(buf, sizeof(buf));
	}
}

static void hello_decode__bad_version_is_eproto(void **state)
{
	const uint16_t versions[] = {0, TCP_VERSION + 1, 0x0100, 0xffff};

	(void)state;
	for (size_t i = 0; i < NELEM(versions); i++) {
		/* configure */
		struct tcp_hello in = hello_ref(4);
		uint8_t buf[TCP_HELLO_LEN];

		in.version = versions[i];
		tcp_hello_encode(&in, buf);

		/* run + verify */
		expect_hello_rejected(buf, sizeof(buf));
	}
}

static void hello_decode__priv_len_over_max_is_eproto(void **state)
{
	const uint16_t lens[] = {TCP_PRIV_MAX + 1, TCP_HELLO_LEN, 0x100, 0xffff};

	(void)state;
	for (size_t i = 0; i < NELEM(lens); i++) {
		/* configure */
		struct tcp_hello in = hello_ref(TCP_PRIV_MAX);
		uint8_t buf[TCP_HELLO_LEN];

		in.priv_len = lens[i];
		tcp_hello_encode(&in, buf);

		/* run + verify */
		expect_hello_rejected(buf, sizeof(buf));
	}
}

static void hello_decode__bad_sq_depth_is_eproto(void **state)
{
	const uint32_t depths[] = {0, 65537, 1u << 20, UINT32_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(depths); i++) {
		/* configure */
		struct tcp_hello in = hello_ref(0);
		uint8_t buf[TCP_HELLO_LEN];

		in.sq_depth = depths[i];
		tcp_hello_encode(&in, buf);

		/* run + verify */
		expect_hello_rejected(buf, sizeof(buf));
	}
}

static void hello_decode__bad_read_window_is_eproto(void **state)
{
	const uint32_t windows[] = {0, 1, TCP_MAX_SEG - 1, (64u << 20) + 1, UINT32_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(windows); i++) {
		/* configure */
		struct tcp_hello in = hello_ref(0);
		uint8_t buf[TCP_HELLO_LEN];

		in.read_window = windows[i];
		tcp_hello_encode(&in, buf);

		/* run + verify */
		expect_hello_rejected(buf, sizeof(buf));
	}
}

static void hello_decode__wrong_len_is_eproto(void **state)
{
	const size_t lens[] = {0, 16, TCP_HELLO_LEN - 1, TCP_HELLO_LEN + 1, 2 * TCP_HELLO_LEN};
	struct tcp_hello in = hello_ref(8);
	uint8_t buf[2 * TCP_HELLO_LEN] = {0};

	(void)state;
	/* configure: a valid hello at the start of the buffer */
	tcp_hello_encode(&in, buf);

	/* run + verify */
	for (size_t i = 0; i < NELEM(lens); i++)
		expect_hello_rejected(buf, lens[i]);
}

static void hello_encode__priv_len_over_max_stays_in_bounds(void **state)
{
	struct tcp_hello in = hello_ref(TCP_PRIV_MAX), out;
	uint8_t buf[TCP_HELLO_LEN + 16];

	(void)state;
	/* configure */
	in.priv_len = 200;
	memset(buf, POISON, sizeof(buf));

	/* run */
	tcp_hello_encode(&in, buf);

	/* verify: copies at most TCP_PRIV_MAX bytes, and the peer refuses the result */
	for (size_t i = TCP_HELLO_LEN; i < sizeof(buf); i++)
		assert_int_equal(buf[i], POISON);
	assert_memory_equal(buf + 16, in.priv, TCP_PRIV_MAX);
	assert_int_equal(tcp_hello_decode(buf, TCP_HELLO_LEN, &out), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(encode__layout_matches_documented_offsets),
	    cmocka_unit_test(decode__round_trip_every_type),
	    cmocka_unit_test(decode__round_trip_every_flag_combination),
	    cmocka_unit_test(decode__round_trip_extreme_field_values),
	    cmocka_unit_test(decode__variable_payload_bounds),
	    cmocka_unit_test(decode__short_header_needs_more),
	    cmocka_unit_test(decode__short_header_of_garbage_needs_more),
	    cmocka_unit_test(decode__payload_need_not_be_available),
	    cmocka_unit_test(decode__more_than_one_frame_available),
	    cmocka_unit_test(decode__type_zero_is_eproto),
	    cmocka_unit_test(decode__unknown_type_is_eproto),
	    cmocka_unit_test(decode__unknown_flag_bits_is_eproto),
	    cmocka_unit_test(decode__reserved_bytes_nonzero_is_eproto),
	    cmocka_unit_test(decode__payload_over_max_seg_is_eproto),
	    cmocka_unit_test(decode__payload_on_fixed_size_type_is_eproto),
	    cmocka_unit_test(decode__hello_wrong_len_is_eproto),
	    cmocka_unit_test(decode__read_of_zero_bytes_is_eproto),
	    cmocka_unit_test(decode__read_over_max_seg_is_eproto),
	    cmocka_unit_test(decode__read_size_bounds_ok),
	    cmocka_unit_test(decode__a_is_unchecked_for_other_types),
	    cmocka_unit_test(decode__hand_built_header),
	    cmocka_unit_test(hello_encode__layout_matches_documented_offsets),
	    cmocka_unit_test(hello_decode__round_trip),
	    cmocka_unit_test(hello_decode__priv_after_priv_len_is_ignored),
	    cmocka_unit_test(hello_decode__limits_ok),
	    cmocka_unit_test(hello_decode__bad_magic_is_eproto),
	    cmocka_unit_test(hello_decode__bad_version_is_eproto),
	    cmocka_unit_test(hello_decode__priv_len_over_max_is_eproto),
	    cmocka_unit_test(hello_decode__bad_sq_depth_is_eproto),
	    cmocka_unit_test(hello_decode__bad_read_window_is_eproto),
	    cmocka_unit_test(hello_decode__wrong_len_is_eproto),
	    cmocka_unit_test(hello_encode__priv_len_over_max_stays_in_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
