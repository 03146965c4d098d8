/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctrl-wire-ref.h -- what the ctrl-wire unit tests share: reference messages
 * of every type (MIN and MAX shapes), a field-by-field comparison, and a
 * second, independent encoder (hand_encode, a byte builder following the
 * header comment of ctrl_wire.h) that can also twist one string or one count
 * of a message to make the malformed inputs the decoder must refuse.
 * Defined in ctrl-wire-ref.c; include after <cmocka.h>.
 */
#ifndef LOCO_TESTS_UNIT_CTRL_WIRE_REF_H
#define LOCO_TESTS_UNIT_CTRL_WIRE_REF_H

#include <stddef.h>
#include <stdint.h>

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
extern const long want_len[LC_MSG_MAX_][2];

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
	int count_over; /* WELCOME/CHAN/VC/OBJ: the count says n + 1, and n + 1 entries follow */
	int count_huge; /* WELCOME/CHAN/VC/OBJ: the count says UINT32_MAX */
};

extern const struct twist no_twist;

struct bld {
	uint8_t b[BLD_CAP];
	size_t n;
	int nstr; /* strings written so far */
	const struct twist *t;
};

/* msg_new -- a message of @type with every field empty/zero (MIN) or at its widest (MAX). */
struct lc_msg *msg_new(unsigned type, enum shape s);

/* assert_msg_equal -- every field that the type of @x uses, one by one. */
void assert_msg_equal(const struct lc_msg *x, const struct lc_msg *y);

/* hand_encode -- @m as the header comment of ctrl_wire.h lays it out, twisted by @t. */
void hand_encode(struct bld *b, const struct lc_msg *m, const struct twist *t);

/* set_le -- @v as @n little-endian bytes at @p. */
void set_le(uint8_t *p, uint64_t v, size_t n);

/* encode_new -- lc_ctrl_encode() of @m into a buffer of exactly its length; *@len gets it. */
uint8_t *encode_new(const struct lc_msg *m, size_t *len);

/* expect_rejected -- decoding @len bytes of @buf gives @err and leaves *m untouched. */
void expect_rejected(const uint8_t *buf, size_t len, int err);

#endif
