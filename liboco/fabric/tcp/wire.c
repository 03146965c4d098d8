/* SPDX-License-Identifier: BSD-2-Clause */
/* wire.c -- encode and check tcp provider frames (pure, fuzzed). */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "wire.h"

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

void tcp_wire_encode(const struct tcp_frame *f, uint8_t *buf)
{
	buf[0] = f->type;
	buf[1] = f->flags;
	put16(buf + 2, 0);
	put32(buf + 4, f->len);
	put32(buf + 8, f->psn);
	put32(buf + 12, f->key);
	put64(buf + 16, f->addr);
	put64(buf + 24, f->a);
	put64(buf + 32, f->b);
}

/* payload_ok -- whether @len is a legal payload length for frame @type. */
static int payload_ok(uint8_t type, uint32_t len)
{
	switch (type) {
	case TCP_F_HELLO:
	case TCP_F_HELLO_ACK:
		return len == TCP_HELLO_LEN;
	case TCP_F_WRITE:
	case TCP_F_WRITE_IMM:
	case TCP_F_SEND:
	case TCP_F_READ_RESP:
		return len <= TCP_MAX_SEG;
	default:
		return len == 0;
	}
}

long tcp_wire_decode(const uint8_t *buf, size_t avail, struct tcp_frame *f)
{
	struct tcp_frame t;

	if (avail < TCP_HDR_LEN)
		return 0;
	t.type = buf[0];
	t.flags = buf[1];
	if (t.type == 0 || t.type >= TCP_F_MAX_ || (t.flags & ~TCP_FL_ALL_) || get16(buf + 2))
		return -EPROTO;
	t.len = get32(buf + 4);
	if (!payload_ok(t.type, t.len))
		return -EPROTO;
	t.psn = get32(buf + 8);
	t.key = get32(buf + 12);
	t.addr = get64(buf + 16);
	t.a = get64(buf + 24);
	t.b = get64(buf + 32);
	if (t.type == TCP_F_READ && (t.a == 0 || t.a > TCP_MAX_SEG))
		return -EPROTO;
	*f = t;
	return (long)TCP_HDR_LEN + t.len;
}

uint64_t tcp_wire_write_span(const struct tcp_frame *f)
{
	if ((f->flags & TCP_FL_FIRST) && f->a > f->len)
		return f->a;
	return f->len;
}

void tcp_hello_encode(const struct tcp_hello *h, uint8_t *buf)
{
	memset(buf, 0, TCP_HELLO_LEN);
	put32(buf, h->magic);
	put16(buf + 4, h->version);
	put16(buf + 6, h->priv_len);
	put32(buf + 8, h->sq_depth);
	put32(buf + 12, h->read_window);
	memcpy(buf + 16, h->priv, h->priv_len <= TCP_PRIV_MAX ? h->priv_len : TCP_PRIV_MAX);
}

int tcp_hello_decode(const uint8_t *buf, size_t len, struct tcp_hello *h)
{
	struct tcp_hello t;

	if (len != TCP_HELLO_LEN)
		return -EPROTO;
	memset(&t, 0, sizeof(t));
	t.magic = get32(buf);
	t.version = get16(buf + 4);
	t.priv_len = get16(buf + 6);
	t.sq_depth = get32(buf + 8);
	t.read_window = get32(buf + 12);
	if (t.magic != TCP_MAGIC || t.version != TCP_VERSION || t.priv_len > TCP_PRIV_MAX ||
	    t.sq_depth == 0 || t.sq_depth > 65536 || t.read_window < TCP_MAX_SEG ||
	    t.read_window > (64u << 20))
		return -EPROTO;
	memcpy(t.priv, buf + 16, t.priv_len);
	*h = t;
	return 0;
}
