/* SPDX-License-Identifier: BSD-2-Clause */
/* ctrl-wire.c -- lc_ctrl_encode/decode/peek and lc_msg_type_str (control-plane codec) */
/*
 * The bytes the codec must produce and accept are also written here by a
 * second, independent encoder (hand_encode, a byte builder following the
 * header comment of ctrl_wire.h), which can also twist one string or one
 * count of a message to make the malformed inputs the decoder must refuse.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_wire.h"

#define POISON   0xa5
#define GUARD    64
#define BLD_CAP  (LC_CTRL_MAX_MSG + 4096)
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* the size of *m up to the union, plus the first bytes of the union: what the loops compare */
#define MSG_HEAD (offsetof(struct lc_msg, u) + 256)

enum shape {
	MIN,
	MAX
};

/* wire lengths of the minimal and the maximal message of each type, from the header comment */
static const long want_len[LC_MSG_MAX_][2] = {
    [LC_MSG_HELLO] = {24 + 32 + 4 + 2 + 16, 24 + 32 + 4 + 18 + 144},
    [LC_MSG_CHALLENGE] = {24 + 64, 24 + 64},
    [LC_MSG_AUTH] = {24 + 32, 24 + 32},
    [LC_MSG_WELCOME] = {24 + 4, 24 + 4 + LC_MAX_MEMBERS * 144},
    [LC_MSG_REFUSE] = {24 + 4 + 2, 24 + 4 + 2 + LC_NAME_MAX},
    [LC_MSG_MEMBER_JOIN] = {24 + 16, 24 + 144},
    [LC_MSG_MEMBER_LEAVE] = {24 + 16, 24 + 16},
    [LC_MSG_HEARTBEAT] = {24 + 8, 24 + 8},
    [LC_MSG_CHAN] = {24 + 2 + 12, 24 + 2 + LC_NAME_MAX + 12 + LC_MAX_REGIONS * 154},
    [LC_MSG_CHAN_LEAVE] = {24 + 2, 24 + 2 + LC_NAME_MAX},
    [LC_MSG_LEAVE] = {24, 24},
    [LC_MSG_VC] = {24 + 48, 24 + 48 + LC_MAX_MEMBERS * 144},
};

/* ---- reference messages ---------------------------------------------- */

/* fill_str -- @len printable bytes (never NUL) depending on @seed, then NUL. */
static void fill_str(char *dst, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		dst[i] = (char)('!' + (seed + i) % 94);
	dst[len] = '\0';
}

static void fill_member(struct lc_member_info *mi, unsigned seed, enum shape s)
{
	memset(mi, 0, sizeof(*mi));
	if (s == MIN)
		return;
	mi->node = 0x80706050u ^ seed;
	mi->inc = 0xf0e1d2c3b4a59687ull ^ ((uint64_t)seed << 32) ^ seed;
	fill_str(mi->ctrl_addr, LC_ADDR_MAX, seed);
	fill_str(mi->fab_addr, LC_ADDR_MAX, seed + 7);
}

static void fill_region(struct lc_region_info *ri, unsigned seed)
{
	memset(ri, 0, sizeof(*ri));
	fill_str(ri->name, LC_NAME_MAX, seed + 3);
	ri->addr = 0x8877665544332211ull ^ seed;
	ri->len = 0xfedcba9876543210ull - seed;
	ri->rkey = 0x89abcdefu ^ seed;
	ri->access = 0x80000001u + seed;
}

/* msg_new -- a message of @type with every field empty/zero (MIN) or at its widest (MAX). */
static struct lc_msg *msg_new(unsigned type, enum shape s)
{
	struct lc_msg *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->type = (uint16_t)type;
	if (s == MIN)
		return m;
	m->src_node = 0xfedcba98u;
	m->src_inc = 0x0123456789abcdefull;
	switch (type) {
	case LC_MSG_HELLO:
		for (unsigned i = 0; i < LC_NONCE_LEN; i++)
			m->u.hello.nonce[i] = (uint8_t)(0x80 + i);
		m->u.hello.flags = 0xc0000000u | LC_HELLO_JOIN;
		fill_str(m->u.hello.fabric, LC_FABRIC_MAX, 1);
		fill_member(&m->u.hello.self, 2, MAX);
		break;
	case LC_MSG_CHALLENGE:
		for (unsigned i = 0; i < LC_NONCE_LEN; i++)
			m->u.challenge.nonce[i] = (uint8_t)(0xff - i);
		for (unsigned i = 0; i < LC_MAC_LEN; i++)
			m->u.challenge.mac[i] = (uint8_t)(0x40 + 3 * i);
		break;
	case LC_MSG_AUTH:
		for (unsigned i = 0; i < LC_MAC_LEN; i++)
			m->u.auth.mac[i] = (uint8_t)(0xa0 ^ i);
		break;
	case LC_MSG_WELCOME:
		m->u.welcome.n = LC_MAX_MEMBERS;
		for (unsigned i = 0; i < LC_MAX_MEMBERS; i++)
			fill_member(&m->u.welcome.m[i], i, MAX);
		break;
	case LC_MSG_REFUSE:
		m->u.refuse.err = 0x80000000u | EACCES;
		fill_str(m->u.refuse.reason, LC_NAME_MAX, 5);
		break;
	case LC_MSG_MEMBER_JOIN:
		fill_member(&m->u.member_join, 9, MAX);
		break;
	case LC_MSG_MEMBER_LEAVE:
		m->u.member_leave.node = 0xf1f2f3f4u;
		m->u.member_leave.inc = 0xe1e2e3e4e5e6e7e8ull;
		m->u.member_leave.reason = 0xd0000000u | LC_LEAVE_FAILED;
		break;
	case LC_MSG_HEARTBEAT:
		m->u.heartbeat.seq = 0xffeeddccbbaa9988ull;
		break;
	case LC_MSG_CHAN:
		fill_str(m->u.chan.name, LC_NAME_MAX, 11);
		m->u.chan.flags = 0x80000000u | LC_CHAN_REPLY;
		m->u.chan.nodes = 0x90000008u;
		m->u.chan.n = LC_MAX_REGIONS;
		for (unsigned i = 0; i < LC_MAX_REGIONS; i++)
			fill_region(&m->u.chan.r[i], i);
		break;
	case LC_MSG_CHAN_LEAVE:
		fill_str(m->u.chan_leave.name, LC_NAME_MAX, 13);
		break;
	case LC_MSG_VC:
		m->u.vc.kind = 0xc1c2c3c4u;
		m->u.vc.view = 0xb1b2b3b4b5b6b7b8ull;
		m->u.vc.ballot = 0xa1a2a3a4a5a6a7a8ull;
		m->u.vc.abal = 0x9192939495969798ull;
		m->u.vc.node = 0x81828384u;
		m->u.vc.inc = 0x7172737475767778ull;
		m->u.vc.flag = 0x61626364u;
		m->u.vc.n = LC_MAX_MEMBERS;
		for (unsigned i = 0; i < LC_MAX_MEMBERS; i++)
			fill_member(&m->u.vc.m[i], i + 17, MAX);
		break;
	default:
		break;
	}
	return m;
}

static void assert_member_equal(const struct lc_member_info *x, const struct lc_member_info *y)
{
	assert_int_equal(x->node, y->node);
	assert_int_equal(x->inc, y->inc);
	assert_string_equal(x->ctrl_addr, y->ctrl_addr);
	assert_string_equal(x->fab_addr, y->fab_addr);
}

/* assert_msg_equal -- every field that the type of @x uses, one by one. */
static void assert_msg_equal(const struct lc_msg *x, const struct lc_msg *y)
{
	assert_int_equal(x->type, y->type);
	assert_int_equal(x->src_node, y->src_node);
	assert_int_equal(x->src_inc, y->src_inc);
	switch (x->type) {
	case LC_MSG_HELLO:
		assert_memory_equal(x->u.hello.nonce, y->u.hello.nonce, LC_NONCE_LEN);
		assert_int_equal(x->u.hello.flags, y->u.hello.flags);
		assert_string_equal(x->u.hello.fabric, y->u.hello.fabric);
		assert_member_equal(&x->u.hello.self, &y->u.hello.self);
		break;
	case LC_MSG_CHALLENGE:
		assert_memory_equal(x->u.challenge.nonce, y->u.challenge.nonce, LC_NONCE_LEN);
		assert_memory_equal(x->u.challenge.mac, y->u.challenge.mac, LC_MAC_LEN);
		break;
	case LC_MSG_AUTH:
		assert_memory_equal(x->u.auth.mac, y->u.auth.mac, LC_MAC_LEN);
		break;
	case LC_MSG_WELCOME:
		assert_int_equal(x->u.welcome.n, y->u.welcome.n);
		for (uint32_t i = 0; i < x->u.welcome.n && i < LC_MAX_MEMBERS; i++)
			assert_member_equal(&x->u.welcome.m[i], &y->u.welcome.m[i]);
		break;
	case LC_MSG_REFUSE:
		assert_int_equal(x->u.refuse.err, y->u.refuse.err);
		assert_string_equal(x->u.refuse.reason, y->u.refuse.reason);
		break;
	case LC_MSG_MEMBER_JOIN:
		assert_member_equal(&x->u.member_join, &y->u.member_join);
		break;
	case LC_MSG_MEMBER_LEAVE:
		assert_int_equal(x->u.member_leave.node, y->u.member_leave.node);
		assert_int_equal(x->u.member_leave.inc, y->u.member_leave.inc);
		assert_int_equal(x->u.member_leave.reason, y->u.member_leave.reason);
		break;
	case LC_MSG_HEARTBEAT:
		assert_int_equal(x->u.heartbeat.seq, y->u.heartbeat.seq);
		break;
	case LC_MSG_VC:
		assert_int_equal(x->u.vc.kind, y->u.vc.kind);
		assert_int_equal(x->u.vc.view, y->u.vc.view);
		assert_int_equal(x->u.vc.ballot, y->u.vc.ballot);
		assert_int_equal(x->u.vc.abal, y->u.vc.abal);
		assert_int_equal(x->u.vc.node, y->u.vc.node);
		assert_int_equal(x->u.vc.inc, y->u.vc.inc);
		assert_int_equal(x->u.vc.flag, y->u.vc.flag);
		assert_int_equal(x->u.vc.n, y->u.vc.n);
		for (uint32_t i = 0; i < x->u.vc.n && i < LC_MAX_MEMBERS; i++)
			assert_member_equal(&x->u.vc.m[i], &y->u.vc.m[i]);
		break;
	case LC_MSG_CHAN:
		assert_string_equal(x->u.chan.name, y->u.chan.name);
		assert_int_equal(x->u.chan.flags, y->u.chan.flags);
		assert_int_equal(x->u.chan.nodes, y->u.chan.nodes);
		assert_int_equal(x->u.chan.n, y->u.chan.n);
		for (uint32_t i = 0; i < x->u.chan.n && i < LC_MAX_REGIONS; i++) {
			const struct lc_region_info *a = &x->u.chan.r[i], *b = &y->u.chan.r[i];

			assert_string_equal(a->name, b->name);
			assert_int_equal(a->addr, b->addr);
			assert_int_equal(a->len, b->len);
			assert_int_equal(a->rkey, b->rkey);
			assert_int_equal(a->access, b->access);
		}
		break;
	case LC_MSG_CHAN_LEAVE:
		assert_string_equal(x->u.chan_leave.name, y->u.chan_leave.name);
		break;
	default:
		break;
	}
}

/* ---- the independent encoder, with twists ----------------------------- */

enum twist_mode {
	TW_NONE,
	TW_LONG,      /* the string is max + 1 bytes */
	TW_NUL_FIRST, /* a NUL as its first byte */
	TW_NUL_LAST,  /* a NUL as its last byte */
	TW_NUL_MID,   /* a NUL in its middle */
	TW_MODES_,
};

struct twist {
	int str_at; /* index (in wire order) of the string to twist, -1: none */
	enum twist_mode mode;
	int count_over; /* WELCOME/CHAN: the count says n + 1, and n + 1 entries follow */
	int count_huge; /* WELCOME/CHAN: the count says UINT32_MAX */
};

static const struct twist no_twist = {.str_at = -1};

struct bld {
	uint8_t b[BLD_CAP];
	size_t n;
	int nstr; /* strings written so far */
	const struct twist *t;
};

static void b_le(struct bld *b, uint64_t v, size_t n)
{
	assert_true(b->n + n <= BLD_CAP);
	for (size_t i = 0; i < n; i++)
		b->b[b->n++] = (uint8_t)(v >> (8 * i));
}

static void b_bytes(struct bld *b, const void *p, size_t n)
{
	assert_true(b->n + n <= BLD_CAP);
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

/* b_str -- string @s of a field of at most @max bytes, or its twisted form. */
static void b_str(struct bld *b, const char *s, size_t max)
{
	size_t n = strlen(s), len, at;

	if (b->t->str_at != b->nstr++ || b->t->mode == TW_NONE) {
		b_le(b, n, 2);
		b_bytes(b, s, n);
		return;
	}
	if (b->t->mode == TW_LONG) {
		b_le(b, max + 1, 2);
		for (size_t i = 0; i <= max; i++)
			b_le(b, 'L', 1);
		return;
	}
	/* the same bytes (one 'N' for an empty string), one of them NUL */
	len = n ? n : 1;
	at = b->t->mode == TW_NUL_FIRST ? 0 : b->t->mode == TW_NUL_LAST ? len - 1 : len / 2;
	b_le(b, len, 2);
	for (size_t i = 0; i < len; i++)
		b_le(b, i == at ? 0 : i < n ? (uint8_t)s[i] : 'N', 1);
}

static void b_member(struct bld *b, const struct lc_member_info *mi)
{
	b_le(b, mi->node, 4);
	b_le(b, mi->inc, 8);
	b_str(b, mi->ctrl_addr, LC_ADDR_MAX);
	b_str(b, mi->fab_addr, LC_ADDR_MAX);
}

static void b_region(struct bld *b, const struct lc_region_info *ri)
{
	b_str(b, ri->name, LC_NAME_MAX);
	b_le(b, ri->addr, 8);
	b_le(b, ri->len, 8);
	b_le(b, ri->rkey, 4);
	b_le(b, ri->access, 4);
}

/* b_count -- an array's count, twisted or not; returns the number of extra entries to write. */
static uint32_t b_count(struct bld *b, uint32_t n)
{
	if (b->t->count_huge) {
		b_le(b, UINT32_MAX, 4);
		return 0;
	}
	b_le(b, n + (b->t->count_over ? 1u : 0u), 4);
	return b->t->count_over ? 1u : 0u;
}

/* hand_encode -- @m as the header comment of ctrl_wire.h lays it out, twisted by @t. */
static void hand_encode(struct bld *b, const struct lc_msg *m, const struct twist *t)
{
	uint32_t extra;

	b->n = 0;
	b->nstr = 0;
	b->t = t;
	b_le(b, 0, 4); /* len, patched below */
	b_le(b, LC_CTRL_VERSION, 2);
	b_le(b, m->type, 2);
	b_le(b, m->src_node, 4);
	b_le(b, 0, 4);
	b_le(b, m->src_inc, 8);
	switch (m->type) {
	case LC_MSG_HELLO:
		b_bytes(b, m->u.hello.nonce, LC_NONCE_LEN);
		b_le(b, m->u.hello.flags, 4);
		b_str(b, m->u.hello.fabric, LC_FABRIC_MAX);
		b_member(b, &m->u.hello.self);
		break;
	case LC_MSG_CHALLENGE:
		b_bytes(b, m->u.challenge.nonce, LC_NONCE_LEN);
		b_bytes(b, m->u.challenge.mac, LC_MAC_LEN);
		break;
	case LC_MSG_AUTH:
		b_bytes(b, m->u.auth.mac, LC_MAC_LEN);
		break;
	case LC_MSG_WELCOME:
		extra = b_count(b, m->u.welcome.n);
		for (uint32_t i = 0; i < m->u.welcome.n; i++)
			b_member(b, &m->u.welcome.m[i]);
		for (uint32_t i = 0; i < extra; i++)
			b_member(b, &m->u.welcome.m[0]);
		break;
	case LC_MSG_REFUSE:
		b_le(b, m->u.refuse.err, 4);
		b_str(b, m->u.refuse.reason, LC_NAME_MAX);
		break;
	case LC_MSG_MEMBER_JOIN:
		b_member(b, &m->u.member_join);
		break;
	case LC_MSG_MEMBER_LEAVE:
		b_le(b, m->u.member_leave.node, 4);
		b_le(b, m->u.member_leave.inc, 8);
		b_le(b, m->u.member_leave.reason, 4);
		break;
	case LC_MSG_HEARTBEAT:
		b_le(b, m->u.heartbeat.seq, 8);
		break;
	case LC_MSG_CHAN:
		b_str(b, m->u.chan.name, LC_NAME_MAX);
		b_le(b, m->u.chan.flags, 4);
		b_le(b, m->u.chan.nodes, 4);
		extra = b_count(b, m->u.chan.n);
		for (uint32_t i = 0; i < m->u.chan.n; i++)
			b_region(b, &m->u.chan.r[i]);
		for (uint32_t i = 0; i < extra; i++)
			b_region(b, &m->u.chan.r[0]);
		break;
	case LC_MSG_CHAN_LEAVE:
		b_str(b, m->u.chan_leave.name, LC_NAME_MAX);
		break;
	case LC_MSG_VC:
		b_le(b, m->u.vc.kind, 4);
		b_le(b, m->u.vc.view, 8);
		b_le(b, m->u.vc.ballot, 8);
		b_le(b, m->u.vc.abal, 8);
		b_le(b, m->u.vc.node, 4);
		b_le(b, m->u.vc.inc, 8);
		b_le(b, m->u.vc.flag, 4);
		extra = b_count(b, m->u.vc.n);
		for (uint32_t i = 0; i < m->u.vc.n; i++)
			b_member(b, &m->u.vc.m[i]);
		for (uint32_t i = 0; i < extra; i++)
			b_member(b, &m->u.vc.m[0]);
		break;
	default:
		break;
	}
	for (int i = 0; i < 4; i++)
		b->b[i] = (uint8_t)(b->n >> (8 * i));
}

static void set_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* encode_new -- lc_ctrl_encode() of @m into a buffer of exactly its length; *@len gets it. */
static uint8_t *encode_new(const struct lc_msg *m, size_t *len)
{
	static uint8_t tmp[LC_CTRL_MAX_MSG];
	long n = lc_ctrl_encode(m, tmp, sizeof(tmp));
	uint8_t *buf;

	assert_true(n >= LC_CTRL_HDR_LEN);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	memcpy(buf, tmp, (size_t)n);
	*len = (size_t)n;
	return buf;
}

/* expect_rejected -- decoding @len bytes of @buf gives @err and leaves *m untouched. */
static void expect_rejected(const uint8_t *buf, size_t len, int err)
{
	static struct lc_msg m, poison;
	uint8_t *copy = malloc(len ? len : 1);

	assert_non_null(copy);
	memcpy(copy, buf, len); /* exactly @len bytes, so ASan sees a read past the end */
	memset(&m, POISON, sizeof(m));
	memset(&poison, POISON, sizeof(poison));
	assert_int_equal(lc_ctrl_decode(copy, len, &m), err);
	assert_memory_equal(&m, &poison, sizeof(m));
	free(copy);
}

/* ---- encode ---------------------------------------------------------- */

static void encode__header_layout_matches_documented_offsets(void **state)
{
	struct lc_msg *m = msg_new(LC_MSG_HEARTBEAT, MIN);
	const uint8_t want[32] = {
	    32,   0,    0,    0,    1,    0,    LC_MSG_HEARTBEAT,
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
	assert_int_equal(tested, 12);
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
	    cmocka_unit_test(peek__fewer_than_four_bytes_is_zero),
	    cmocka_unit_test(peek__length_bounds),
	    cmocka_unit_test(peek__reads_only_the_length),
	    cmocka_unit_test(type_str__every_type),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
