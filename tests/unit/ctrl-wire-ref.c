/* SPDX-License-Identifier: BSD-2-Clause */
/* ctrl-wire-ref.c -- the ctrl-wire tests' reference messages and independent encoder (the .h) */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl-wire-ref.h"

/* wire lengths of the minimal and the maximal message of each type, from the header comment */
const long want_len[LC_MSG_MAX_][2] = {
    [LC_MSG_HELLO] = {24 + 32 + 4 + 2 + 16, 24 + 32 + 4 + 18 + 144},
    [LC_MSG_CHALLENGE] = {24 + 64, 24 + 64},
    [LC_MSG_AUTH] = {24 + 32, 24 + 32},
    [LC_MSG_WELCOME] = {24 + 4, 24 + 4 + LC_MAX_MEMBERS * 144},
    [LC_MSG_REFUSE] = {24 + 4 + 2, 24 + 4 + 2 + LC_NAME_MAX},
    [LC_MSG_MEMBER_JOIN] = {24 + 16, 24 + 144},
    [LC_MSG_MEMBER_LEAVE] = {24 + 16, 24 + 16},
    [LC_MSG_HEARTBEAT] = {24 + 8, 24 + 8},
    [LC_MSG_CHAN] = {24 + 2 + 20, 24 + 2 + LC_NAME_MAX + 20 + LC_MAX_REGIONS * 154},
    [LC_MSG_CHAN_LEAVE] = {24 + 2, 24 + 2 + LC_NAME_MAX},
    [LC_MSG_LEAVE] = {24, 24},
    [LC_MSG_VC] = {24 + 48, 24 + 48 + LC_MAX_MEMBERS * 144},
    [LC_MSG_OBJ] = {24 + 2 + 2 + 4, 24 + 2 * (2 + LC_NAME_MAX) + 4 + LC_OBJ_MSG_MAX},
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
struct lc_msg *msg_new(unsigned type, enum shape s)
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
		/* the last page of the longest announcement */
		m->u.chan.first = LC_CHAN_ENTRIES_MAX - LC_MAX_REGIONS;
		m->u.chan.total = LC_CHAN_ENTRIES_MAX;
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
	case LC_MSG_OBJ:
		fill_str(m->u.obj.chan, LC_NAME_MAX, 19);
		fill_str(m->u.obj.obj, LC_NAME_MAX, 23);
		m->u.obj.len = LC_OBJ_MSG_MAX;
		for (unsigned i = 0; i < LC_OBJ_MSG_MAX; i++)
			m->u.obj.data[i] = (uint8_t)(i * 7 + 1); /* NULs included: raw bytes */
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
void assert_msg_equal(const struct lc_msg *x, const struct lc_msg *y)
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
		assert_int_equal(x->u.chan.first, y->u.chan.first);
		assert_int_equal(x->u.chan.total, y->u.chan.total);
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
	case LC_MSG_OBJ:
		assert_string_equal(x->u.obj.chan, y->u.obj.chan);
		assert_string_equal(x->u.obj.obj, y->u.obj.obj);
		assert_int_equal(x->u.obj.len, y->u.obj.len);
		if (x->u.obj.len > 0 && x->u.obj.len <= LC_OBJ_MSG_MAX)
			assert_memory_equal(x->u.obj.data, y->u.obj.data, x->u.obj.len);
		break;
	default:
		break;
	}
}

/* ---- the independent encoder, with twists ----------------------------- */

const struct twist no_twist = {.str_at = -1};

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
void hand_encode(struct bld *b, const struct lc_msg *m, const struct twist *t)
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
		b_le(b, m->u.chan.first, 4);
		b_le(b, m->u.chan.total, 4);
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
	case LC_MSG_OBJ:
		b_str(b, m->u.obj.chan, LC_NAME_MAX);
		b_str(b, m->u.obj.obj, LC_NAME_MAX);
		extra = b_count(b, m->u.obj.len);
		b_bytes(b, m->u.obj.data, m->u.obj.len);
		for (uint32_t i = 0; i < extra; i++)
			b_le(b, 'X', 1);
		break;
	default:
		break;
	}
	for (int i = 0; i < 4; i++)
		b->b[i] = (uint8_t)(b->n >> (8 * i));
}

void set_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* encode_new -- lc_ctrl_encode() of @m into a buffer of exactly its length; *@len gets it. */
uint8_t *encode_new(const struct lc_msg *m, size_t *len)
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
void expect_rejected(const uint8_t *buf, size_t len, int err)
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
