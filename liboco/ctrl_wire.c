/* SPDX-License-Identifier: BSD-2-Clause */
/* ctrl_wire.c -- encode and check control-plane messages (pure, fuzzed). */
/*
 * Both directions run twice over a message. The encoder first walks it
 * without a buffer, to check every string and count and to learn the
 * length, then writes it: an error leaves @buf untouched. The decoder
 * first checks the whole message without an output, then fills *@m from
 * the checked bytes: an error leaves *@m untouched. Every read and write
 * goes through a cursor that checks the bounds and keeps the first error.
 */
#include <errno.h>
#include <string.h>

#include "ctrl_wire.h"

/* wire sizes of the longest member, region and message bodies */
#define STR_WIRE(max)   (2 + (max))
#define MEMBER_WIRE_MAX (4 + 8 + 2 * STR_WIRE(LC_ADDR_MAX))
#define REGION_WIRE_MAX (STR_WIRE(LC_NAME_MAX) + 8 + 8 + 4 + 4)

_Static_assert(LC_NAME_MAX <= UINT16_MAX && LC_ADDR_MAX <= UINT16_MAX &&
                   LC_FABRIC_MAX <= UINT16_MAX,
               "string lengths travel as u16");
_Static_assert(LC_CTRL_HDR_LEN + 4 + (size_t)LC_MAX_MEMBERS * MEMBER_WIRE_MAX <= LC_CTRL_MAX_MSG,
               "the longest WELCOME fits in LC_CTRL_MAX_MSG");
_Static_assert(LC_CTRL_HDR_LEN + STR_WIRE(LC_NAME_MAX) + 20 +
                       (size_t)LC_MAX_REGIONS * REGION_WIRE_MAX <=
                   LC_CTRL_MAX_MSG,
               "the longest CHAN fits in LC_CTRL_MAX_MSG");
_Static_assert(LC_CTRL_HDR_LEN + 2 * STR_WIRE(LC_NAME_MAX) + 4 + LC_OBJ_MSG_MAX <= LC_CTRL_MAX_MSG,
               "the longest OBJ fits in LC_CTRL_MAX_MSG");
_Static_assert(LC_CTRL_HDR_LEN + 52 + (size_t)LC_MAX_MEMBERS * MEMBER_WIRE_MAX <= LC_CTRL_MAX_MSG,
               "the longest VC fits in LC_CTRL_MAX_MSG");
_Static_assert(LC_CTRL_HDR_LEN + LC_NONCE_LEN + 4 + STR_WIRE(LC_FABRIC_MAX) + MEMBER_WIRE_MAX <=
                   LC_CTRL_MAX_MSG,
               "the longest HELLO fits in LC_CTRL_MAX_MSG");

static const char *const type_names[LC_MSG_MAX_] = {
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

const char *lc_msg_type_str(unsigned type)
{
	if (type == 0 || type >= LC_MSG_MAX_)
		return "?";
	return type_names[type];
}

/*
 * A cursor over a buffer. For the encoder, buf == NULL is the sizing pass:
 * nothing is written, off only counts. err keeps the first error; once it
 * is set every put and get is a no-op.
 */
struct wcur {
	uint8_t *buf;
	size_t len;
	size_t off;
	int err;
};

struct rcur {
	const uint8_t *buf;
	size_t len;
	size_t off; /* always <= len */
	int err;
};

/* ---- encoder ---- */

/* put_le -- append the @n low bytes of @v, least significant first. */
static void put_le(struct wcur *c, uint64_t v, size_t n)
{
	if (c->err)
		return;
	if (c->buf != NULL) {
		if (n > c->len - c->off) {
			c->err = -ENOSPC;
			return;
		}
		for (size_t i = 0; i < n; i++)
			c->buf[c->off + i] = (uint8_t)(v >> (8 * i));
	}
	c->off += n;
}

static void put_u16(struct wcur *c, uint16_t v)
{
	put_le(c, v, 2);
}

static void put_u32(struct wcur *c, uint32_t v)
{
	put_le(c, v, 4);
}

static void put_u64(struct wcur *c, uint64_t v)
{
	put_le(c, v, 8);
}

static void put_bytes(struct wcur *c, const void *p, size_t n)
{
	if (c->err)
		return;
	if (c->buf != NULL) {
		if (n > c->len - c->off) {
			c->err = -ENOSPC;
			return;
		}
		memcpy(c->buf + c->off, p, n);
	}
	c->off += n;
}

/*
 * put_str -- a u16 length and the bytes of @s, a field of @max + 1 bytes.
 * -EINVAL when @s has no NUL within its field (longer than @max).
 */
static void put_str(struct wcur *c, const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (c->err)
		return;
	if (n > max) {
		c->err = -EINVAL;
		return;
	}
	put_u16(c, (uint16_t)n);
	put_bytes(c, s, n);
}

/* put_count -- an array's u32 count; -EINVAL above @max. */
static void put_count(struct wcur *c, uint32_t n, uint32_t max)
{
	if (c->err)
		return;
	if (n > max) {
		c->err = -EINVAL;
		return;
	}
	put_u32(c, n);
}

static void enc_member(struct wcur *c, const struct lc_member_info *mi)
{
	put_u32(c, mi->node);
	put_u64(c, mi->inc);
	put_str(c, mi->ctrl_addr, LC_ADDR_MAX);
	put_str(c, mi->fab_addr, LC_ADDR_MAX);
}

static void enc_region(struct wcur *c, const struct lc_region_info *ri)
{
	put_str(c, ri->name, LC_NAME_MAX);
	put_u64(c, ri->addr);
	put_u64(c, ri->len);
	put_u32(c, ri->rkey);
	put_u32(c, ri->access);
}

/* enc_body -- the body of @m, in the field order of the header comment. */
static void enc_body(struct wcur *c, const struct lc_msg *m)
{
	switch (m->type) {
	case LC_MSG_HELLO:
		put_bytes(c, m->u.hello.nonce, LC_NONCE_LEN);
		put_u32(c, m->u.hello.flags);
		put_str(c, m->u.hello.fabric, LC_FABRIC_MAX);
		enc_member(c, &m->u.hello.self);
		break;
	case LC_MSG_CHALLENGE:
		put_bytes(c, m->u.challenge.nonce, LC_NONCE_LEN);
		put_bytes(c, m->u.challenge.mac, LC_MAC_LEN);
		break;
	case LC_MSG_AUTH:
		put_bytes(c, m->u.auth.mac, LC_MAC_LEN);
		break;
	case LC_MSG_WELCOME:
		put_count(c, m->u.welcome.n, LC_MAX_MEMBERS);
		for (uint32_t i = 0; i < m->u.welcome.n && i < LC_MAX_MEMBERS && !c->err; i++)
			enc_member(c, &m->u.welcome.m[i]);
		break;
	case LC_MSG_REFUSE:
		put_u32(c, m->u.refuse.err);
		put_str(c, m->u.refuse.reason, LC_NAME_MAX);
		break;
	case LC_MSG_MEMBER_JOIN:
		enc_member(c, &m->u.member_join);
		break;
	case LC_MSG_MEMBER_LEAVE:
		put_u32(c, m->u.member_leave.node);
		put_u64(c, m->u.member_leave.inc);
		put_u32(c, m->u.member_leave.reason);
		break;
	case LC_MSG_HEARTBEAT:
		put_u64(c, m->u.heartbeat.seq);
		break;
	case LC_MSG_CHAN:
		put_str(c, m->u.chan.name, LC_NAME_MAX);
		put_u32(c, m->u.chan.flags);
		put_u32(c, m->u.chan.nodes);
		if (!c->err &&
		    (m->u.chan.total > LC_CHAN_ENTRIES_MAX || m->u.chan.first > m->u.chan.total ||
		     m->u.chan.n > m->u.chan.total - m->u.chan.first))
			c->err = -EINVAL;
		put_u32(c, m->u.chan.first);
		put_u32(c, m->u.chan.total);
		put_count(c, m->u.chan.n, LC_MAX_REGIONS);
		for (uint32_t i = 0; i < m->u.chan.n && i < LC_MAX_REGIONS && !c->err; i++)
			enc_region(c, &m->u.chan.r[i]);
		break;
	case LC_MSG_CHAN_LEAVE:
		put_str(c, m->u.chan_leave.name, LC_NAME_MAX);
		break;
	case LC_MSG_LEAVE:
		break;
	case LC_MSG_VC:
		put_u32(c, m->u.vc.kind);
		put_u64(c, m->u.vc.view);
		put_u64(c, m->u.vc.ballot);
		put_u64(c, m->u.vc.abal);
		put_u32(c, m->u.vc.node);
		put_u64(c, m->u.vc.inc);
		put_u32(c, m->u.vc.flag);
		put_count(c, m->u.vc.n, LC_MAX_MEMBERS);
		for (uint32_t i = 0; i < m->u.vc.n && i < LC_MAX_MEMBERS && !c->err; i++)
			enc_member(c, &m->u.vc.m[i]);
		break;
	case LC_MSG_OBJ:
		put_str(c, m->u.obj.chan, LC_NAME_MAX);
		put_str(c, m->u.obj.obj, LC_NAME_MAX);
		put_count(c, m->u.obj.len, LC_OBJ_MSG_MAX);
		if (!c->err)
			put_bytes(c, m->u.obj.data, m->u.obj.len);
		break;
	default:
		c->err = -EINVAL;
		break;
	}
}

/* enc_msg -- header (with length @len) and body of @m. */
static void enc_msg(struct wcur *c, const struct lc_msg *m, uint32_t len)
{
	put_u32(c, len);
	put_u16(c, LC_CTRL_VERSION);
	put_u16(c, m->type);
	put_u32(c, m->src_node);
	put_u32(c, 0); /* reserved */
	put_u64(c, m->src_inc);
	enc_body(c, m);
}

long lc_ctrl_encode(const struct lc_msg *m, uint8_t *buf, size_t cap)
{
	struct wcur c = {0};
	size_t len;

	if (m == NULL || (buf == NULL && cap != 0))
		return -EINVAL;

	/* sizing pass: checks every string and count, writes nothing */
	enc_msg(&c, m, 0);
	if (c.err)
		return c.err;
	len = c.off;
	if (len > LC_CTRL_MAX_MSG)
		return -EINVAL; /* unreachable: see the static assertions */
	if (len > cap)
		return -ENOSPC;

	c = (struct wcur){.buf = buf, .len = cap};
	enc_msg(&c, m, (uint32_t)len);
	if (c.err)
		return c.err; /* unreachable: the sizing pass saw the same fields */
	return (long)len;
}

/* ---- decoder ---- */

/* take -- the next @n bytes, or NULL (and -EPROTO) when fewer are left. */
static const uint8_t *take(struct rcur *c, size_t n)
{
	const uint8_t *p;

	if (c->err)
		return NULL;
	if (n > c->len - c->off) {
		c->err = -EPROTO;
		return NULL;
	}
	p = c->buf + c->off;
	c->off += n;
	return p;
}

/* get_le -- @n bytes, least significant first; 0 on error. */
static uint64_t get_le(struct rcur *c, size_t n)
{
	const uint8_t *p = take(c, n);
	uint64_t v = 0;

	if (p == NULL)
		return 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint16_t get_u16(struct rcur *c)
{
	return (uint16_t)get_le(c, 2);
}

static uint32_t get_u32(struct rcur *c)
{
	return (uint32_t)get_le(c, 4);
}

static uint64_t get_u64(struct rcur *c)
{
	return get_le(c, 8);
}

/* get_bytes -- @n raw bytes into @dst (NULL: check only). */
static void get_bytes(struct rcur *c, void *dst, size_t n)
{
	const uint8_t *p = take(c, n);

	if (p != NULL && dst != NULL)
		memcpy(dst, p, n);
}

/*
 * get_str -- a u16 length and that many bytes into @dst, a field of @max + 1
 * bytes (NULL: check only), NUL-padded to its end. -EPROTO when the length
 * is over @max, the bytes are not all there, or they hold a NUL.
 */
static void get_str(struct rcur *c, char *dst, size_t max)
{
	size_t n = get_u16(c);
	const uint8_t *p;

	if (c->err)
		return;
	if (n > max) {
		c->err = -EPROTO;
		return;
	}
	p = take(c, n);
	if (p == NULL)
		return;
	if (memchr(p, 0, n) != NULL) {
		c->err = -EPROTO;
		return;
	}
	if (dst != NULL) {
		memcpy(dst, p, n);
		memset(dst + n, 0, max + 1 - n);
	}
}

/* get_count -- an array's u32 count; -EPROTO above @max, before any entry is read. */
static uint32_t get_count(struct rcur *c, uint32_t max)
{
	uint32_t n = get_u32(c);

	if (c->err)
		return 0;
	if (n > max) {
		c->err = -EPROTO;
		return 0;
	}
	return n;
}

/* In the decoders below, a NULL output means the checking pass. */

static void dec_member(struct rcur *c, struct lc_member_info *mi)
{
	uint32_t node = get_u32(c);
	uint64_t inc = get_u64(c);

	get_str(c, mi != NULL ? mi->ctrl_addr : NULL, LC_ADDR_MAX);
	get_str(c, mi != NULL ? mi->fab_addr : NULL, LC_ADDR_MAX);
	if (mi != NULL) {
		mi->node = node;
		mi->inc = inc;
	}
}

static void dec_region(struct rcur *c, struct lc_region_info *ri)
{
	uint64_t addr, len;
	uint32_t rkey, access;

	get_str(c, ri != NULL ? ri->name : NULL, LC_NAME_MAX);
	addr = get_u64(c);
	len = get_u64(c);
	rkey = get_u32(c);
	access = get_u32(c);
	if (ri != NULL) {
		ri->addr = addr;
		ri->len = len;
		ri->rkey = rkey;
		ri->access = access;
	}
}

/* dec_vc -- a VC body into @m (NULL: check only). */
static void dec_vc(struct rcur *c, struct lc_msg *m)
{
	uint32_t kind = get_u32(c), node, flag, n;
	uint64_t view = get_u64(c), ballot = get_u64(c), abal = get_u64(c), inc;

	node = get_u32(c);
	inc = get_u64(c);
	flag = get_u32(c);
	n = get_count(c, LC_MAX_MEMBERS);
	for (uint32_t i = 0; i < n && !c->err; i++)
		dec_member(c, m != NULL ? &m->u.vc.m[i] : NULL);
	if (m != NULL) {
		m->u.vc.kind = kind;
		m->u.vc.view = view;
		m->u.vc.ballot = ballot;
		m->u.vc.abal = abal;
		m->u.vc.node = node;
		m->u.vc.inc = inc;
		m->u.vc.flag = flag;
		m->u.vc.n = n;
	}
}

/* dec_body -- the body of a message of @type (known) into @m (NULL: check only). */
static void dec_body(struct rcur *c, unsigned type, struct lc_msg *m)
{
	uint32_t n, u32a, u32b, first, total;
	uint64_t u64;

	switch (type) {
	case LC_MSG_HELLO:
		get_bytes(c, m != NULL ? m->u.hello.nonce : NULL, LC_NONCE_LEN);
		u32a = get_u32(c);
		get_str(c, m != NULL ? m->u.hello.fabric : NULL, LC_FABRIC_MAX);
		dec_member(c, m != NULL ? &m->u.hello.self : NULL);
		if (m != NULL)
			m->u.hello.flags = u32a;
		break;
	case LC_MSG_CHALLENGE:
		get_bytes(c, m != NULL ? m->u.challenge.nonce : NULL, LC_NONCE_LEN);
		get_bytes(c, m != NULL ? m->u.challenge.mac : NULL, LC_MAC_LEN);
		break;
	case LC_MSG_AUTH:
		get_bytes(c, m != NULL ? m->u.auth.mac : NULL, LC_MAC_LEN);
		break;
	case LC_MSG_WELCOME:
		n = get_count(c, LC_MAX_MEMBERS);
		for (uint32_t i = 0; i < n && !c->err; i++)
			dec_member(c, m != NULL ? &m->u.welcome.m[i] : NULL);
		if (m != NULL)
			m->u.welcome.n = n;
		break;
	case LC_MSG_REFUSE:
		u32a = get_u32(c);
		get_str(c, m != NULL ? m->u.refuse.reason : NULL, LC_NAME_MAX);
		if (m != NULL)
			m->u.refuse.err = u32a;
		break;
	case LC_MSG_MEMBER_JOIN:
		dec_member(c, m != NULL ? &m->u.member_join : NULL);
		break;
	case LC_MSG_MEMBER_LEAVE:
		u32a = get_u32(c);
		u64 = get_u64(c);
		u32b = get_u32(c);
		if (m != NULL) {
			m->u.member_leave.node = u32a;
			m->u.member_leave.inc = u64;
			m->u.member_leave.reason = u32b;
		}
		break;
	case LC_MSG_HEARTBEAT:
		u64 = get_u64(c);
		if (m != NULL)
			m->u.heartbeat.seq = u64;
		break;
	case LC_MSG_CHAN:
		get_str(c, m != NULL ? m->u.chan.name : NULL, LC_NAME_MAX);
		u32a = get_u32(c);
		u32b = get_u32(c);
		first = get_u32(c);
		total = get_u32(c);
		n = get_count(c, LC_MAX_REGIONS);
		/* a page inside its announcement, the announcement within the bound */
		if (!c->err && (total > LC_CHAN_ENTRIES_MAX || first > total || n > total - first))
			c->err = -EPROTO;
		for (uint32_t i = 0; i < n && !c->err; i++)
			dec_region(c, m != NULL ? &m->u.chan.r[i] : NULL);
		if (m != NULL) {
			m->u.chan.flags = u32a;
			m->u.chan.nodes = u32b;
			m->u.chan.first = first;
			m->u.chan.total = total;
			m->u.chan.n = n;
		}
		break;
	case LC_MSG_CHAN_LEAVE:
		get_str(c, m != NULL ? m->u.chan_leave.name : NULL, LC_NAME_MAX);
		break;
	case LC_MSG_LEAVE:
		break;
	case LC_MSG_VC:
		dec_vc(c, m);
		break;
	case LC_MSG_OBJ:
		get_str(c, m != NULL ? m->u.obj.chan : NULL, LC_NAME_MAX);
		get_str(c, m != NULL ? m->u.obj.obj : NULL, LC_NAME_MAX);
		n = get_count(c, LC_OBJ_MSG_MAX);
		get_bytes(c, m != NULL ? m->u.obj.data : NULL, n);
		if (m != NULL)
			m->u.obj.len = n;
		break;
	default:
		c->err = -EPROTO;
		break;
	}
}

/* dec_msg -- one whole message of @len bytes into @m (NULL: check only). 0 or -errno. */
static int dec_msg(const uint8_t *buf, size_t len, struct lc_msg *m)
{
	struct rcur c = {.buf = buf, .len = len};
	uint32_t msg_len, src_node, reserved;
	uint16_t version, type;
	uint64_t src_inc;

	msg_len = get_u32(&c);
	version = get_u16(&c);
	type = get_u16(&c);
	src_node = get_u32(&c);
	reserved = get_u32(&c);
	src_inc = get_u64(&c);
	if (c.err)
		return c.err;
	if (msg_len != len)
		return -EPROTO;
	if (version != LC_CTRL_VERSION)
		return -EPROTONOSUPPORT;
	if (reserved != 0 || type == 0 || type >= LC_MSG_MAX_)
		return -EPROTO;

	dec_body(&c, type, m);
	if (c.err)
		return c.err;
	if (c.off != len)
		return -EPROTO; /* trailing bytes */
	if (m != NULL) {
		m->type = type;
		m->src_node = src_node;
		m->src_inc = src_inc;
	}
	return 0;
}

int lc_ctrl_decode(const uint8_t *buf, size_t len, struct lc_msg *m)
{
	int ret;

	if (m == NULL || (buf == NULL && len != 0))
		return -EINVAL;
	if (len < LC_CTRL_HDR_LEN || len > LC_CTRL_MAX_MSG)
		return -EPROTO;

	/* checking pass: *m is written only once the whole message is known good */
	ret = dec_msg(buf, len, NULL);
	if (ret)
		return ret;
	return dec_msg(buf, len, m);
}

long lc_ctrl_peek(const uint8_t *buf, size_t avail)
{
	uint32_t len;

	if (avail < 4 || buf == NULL)
		return 0;
	len = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
	      (uint32_t)buf[3] << 24;
	if (len < LC_CTRL_HDR_LEN || len > LC_CTRL_MAX_MSG)
		return -EPROTO;
	return (long)len;
}
