/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wire.h -- the tcp provider's frame format.
 *
 * Each direction of a link's TCP stream carries frames: a fixed 40-byte
 * little-endian header, then @len payload bytes. One stream interleaves
 * the sender's requests and its responses to the peer's requests, at frame
 * boundaries. Every request carries the link's next PSN; responses and
 * cumulative ACKs name the PSN they answer.
 *
 *  off size field
 *    0    1 type      enum tcp_ftype
 *    1    1 flags     enum tcp_fflags
 *    2    2 reserved  must be 0
 *    4    4 len       payload bytes after the header (<= TCP_MAX_SEG)
 *    8    4 psn
 *   12    4 key       rkey (requests), positive errno (NAK), imm (SEND)
 *   16    8 addr      remote address (requests)
 *   24    8 a         WRITE: whole WR length on FIRST; READ: bytes to read;
 *                     CAS: compare; FAA: addend; RESP_ATOMIC: old value;
 *                     CREDIT: RECVs posted so far (cumulative)
 *   32    8 b         CAS: swap; WRITE_IMM: imm
 */
#ifndef LOCO_FABRIC_TCP_WIRE_H
#define LOCO_FABRIC_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define TCP_HDR_LEN   40
#define TCP_MAX_SEG   (64u * 1024) /* largest payload of one frame */
#define TCP_MAGIC     0x4c4f434fu  /* "LOCO" */
#define TCP_VERSION   2            /* 2: ACKREQ sent; a request without it may be ACKed late */
#define TCP_HELLO_LEN 64
#define TCP_PRIV_MAX  48

enum tcp_ftype {
	TCP_F_HELLO = 1, /* connector -> acceptor, payload: struct tcp_hello */
	TCP_F_HELLO_ACK, /* acceptor -> connector, payload: struct tcp_hello */
	TCP_F_WRITE,
	TCP_F_WRITE_IMM,
	TCP_F_READ,
	TCP_F_CAS,
	TCP_F_FAA,
	TCP_F_SEND,
	TCP_F_ACK,         /* all requests up to @psn executed */
	TCP_F_READ_RESP,   /* a segment of the READ @psn */
	TCP_F_ATOMIC_RESP, /* old value of the atomic @psn */
	TCP_F_NAK,         /* request @psn failed with errno @key; the link is down */
	TCP_F_CREDIT,      /* the sender has posted @a RECVs so far (also: alive, target.c) */
	TCP_F_MAX_,
};

enum tcp_fflags {
	TCP_FL_FIRST = 1 << 0,   /* first segment of a WR */
	TCP_FL_LAST = 1 << 1,    /* last segment of a WR */
	TCP_FL_ACKREQ = 1 << 2,  /* the initiator wants an ACK for this WR soon (not FAB_WR_LAZY) */
	TCP_FL_HAS_IMM = 1 << 3, /* SEND carries immediate data in @key */
	TCP_FL_ALL_ = 0x0f,
};

struct tcp_frame {
	uint8_t type;
	uint8_t flags;
	uint32_t len;
	uint32_t psn;
	uint32_t key;
	uint64_t addr;
	uint64_t a;
	uint64_t b;
};

struct tcp_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t priv_len;
	uint32_t sq_depth;    /* the sender's limit of outstanding requests */
	uint32_t read_window; /* bytes of READ responses the sender may have in flight */
	uint8_t priv[TCP_PRIV_MAX];
};

/* tcp_wire_encode -- write @f's header into @buf (TCP_HDR_LEN bytes). */
void tcp_wire_encode(const struct tcp_frame *f, uint8_t *buf);

/*
 * tcp_wire_decode -- parse and check the header at @buf, which holds @avail
 * bytes. Returns the whole frame's length (header + payload) and fills *@f;
 * 0 when @avail is too short for the header; -EPROTO for a malformed
 * header (unknown type or flags, non-zero reserved bits, a length beyond
 * TCP_MAX_SEG or wrong for the type, a READ of 0 or > TCP_MAX_SEG bytes).
 */
long tcp_wire_decode(const uint8_t *buf, size_t avail, struct tcp_frame *f);

/*
 * tcp_wire_write_span -- how many bytes from @f->addr a WRITE/WRITE_IMM
 * frame must be allowed to touch: the whole WR (@a) on its FIRST segment,
 * so that a refused WRITE writes nothing, and never less than the frame's
 * own payload, so that a peer announcing a short WR cannot write past
 * what was checked.
 */
uint64_t tcp_wire_write_span(const struct tcp_frame *f);

/* tcp_hello_encode / tcp_hello_decode -- TCP_HELLO_LEN-byte payload; decode: 0 or -EPROTO. */
void tcp_hello_encode(const struct tcp_hello *h, uint8_t *buf);
int tcp_hello_decode(const uint8_t *buf, size_t len, struct tcp_hello *h);

#endif
