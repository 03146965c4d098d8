/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz-ctrl-wire.c -- libFuzzer target: control-plane message codec (liboco/ctrl_wire.c) */
/*
 * The input is a byte stream as a manager's control connection sees it:
 * lc_ctrl_peek() at the current offset gives the next message's length
 * (0: wait for more bytes, -EPROTO: the connection is dropped); a message
 * is decoded once all of it is there, from a buffer of exactly its size
 * (so ASan sees any read past it), and the walk goes on with the next one.
 *
 * For each decoded message: encode(decode(x)) must give back x byte for
 * byte (with exact consumption of the body this pins down every field),
 * decoding that again must succeed and re-encode to x too (the canonical
 * comparison of the two structs, blind to padding and unused union
 * bytes), every string must be NUL-terminated within its field, every
 * count within its maximum, and the encoder must refuse each buffer one
 * byte too small without writing. A refused message must leave the output
 * untouched. Every violation ends in __builtin_trap() after one line on
 * stderr. The seed corpus comes from gen-ctrl-corpus.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_wire.h"

#define POISON 0x5a
#define GUARD  64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_replay_summary(void);

static struct lc_msg m, m2, poison; /* large: not on the stack */
static uint8_t again[LC_CTRL_MAX_MSG + GUARD];
static int ready;

static struct {
	unsigned long inputs, msgs, ok, eproto, eprotonosupport, incomplete, bad_len;
	unsigned long ok_by_type[LC_MSG_MAX_];
} stats;

static void fail(const char *why)
{
	fprintf(stderr, "fuzz-ctrl-wire: invariant violated: %s\n", why);
	__builtin_trap();
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* terminated -- whether string field @s of @size bytes holds a NUL. */
static int terminated(const char *s, size_t size)
{
	return memchr(s, 0, size) != NULL;
}

static int member_ok(const struct lc_member_info *mi)
{
	return terminated(mi->ctrl_addr, sizeof(mi->ctrl_addr)) &&
	       terminated(mi->fab_addr, sizeof(mi->fab_addr));
}

/* fields_ok -- the decoded message's type is known, its strings end and its counts fit. */
static int fields_ok(const struct lc_msg *d)
{
	switch (d->type) {
	case LC_MSG_HELLO:
		return terminated(d->u.hello.fabric, sizeof(d->u.hello.fabric)) &&
		       member_ok(&d->u.hello.self);
	case LC_MSG_WELCOME:
		if (d->u.welcome.n > LC_MAX_MEMBERS)
			return 0;
		for (uint32_t i = 0; i < d->u.welcome.n; i++)
			if (!member_ok(&d->u.welcome.m[i]))
				return 0;
		return 1;
	case LC_MSG_REFUSE:
		return terminated(d->u.refuse.reason, sizeof(d->u.refuse.reason));
	case LC_MSG_MEMBER_JOIN:
		return member_ok(&d->u.member_join);
	case LC_MSG_CHAN:
		if (!terminated(d->u.chan.name, sizeof(d->u.chan.name)) ||
		    d->u.chan.n > LC_MAX_REGIONS || d->u.chan.total > LC_CHAN_ENTRIES_MAX ||
		    d->u.chan.first > d->u.chan.total ||
		    d->u.chan.n > d->u.chan.total - d->u.chan.first)
			return 0;
		for (uint32_t i = 0; i < d->u.chan.n; i++)
			if (!terminated(d->u.chan.r[i].name, sizeof(d->u.chan.r[i].name)))
				return 0;
		return 1;
	case LC_MSG_CHAN_LEAVE:
		return terminated(d->u.chan_leave.name, sizeof(d->u.chan_leave.name));
	case LC_MSG_OBJ:
		return terminated(d->u.obj.chan, sizeof(d->u.obj.chan)) &&
		       terminated(d->u.obj.obj, sizeof(d->u.obj.obj)) &&
		       d->u.obj.len <= LC_OBJ_MSG_MAX;
	case LC_MSG_VC:
		if (d->u.vc.n > LC_MAX_MEMBERS)
			return 0;
		for (uint32_t i = 0; i < d->u.vc.n; i++)
			if (!member_ok(&d->u.vc.m[i]))
				return 0;
		return 1;
	case LC_MSG_CHALLENGE:
	case LC_MSG_AUTH:
	case LC_MSG_MEMBER_LEAVE:
	case LC_MSG_HEARTBEAT:
	case LC_MSG_LEAVE:
		return 1;
	default:
		return 0;
	}
}

/* on_decoded -- the invariants of a message @x of @n bytes that decoded into m. */
static void on_decoded(const uint8_t *x, size_t n)
{
	long r;

	if (!fields_ok(&m) || strcmp(lc_msg_type_str(m.type), "?") == 0)
		fail("decode accepted an unknown type, an unterminated string or a count over max");
	if (m.type != (x[6] | x[7] << 8) || m.src_node != le32(x + 8))
		fail("decoded header fields differ from the bytes");

	/* encode(decode(x)) == x, nothing written past it (the guard: GUARD bytes after n) */
	memset(again, POISON, n + GUARD);
	r = lc_ctrl_encode(&m, again, n + GUARD);
	if (r < 0)
		fail("encode refused a message that decode accepted");
	if ((size_t)r != n || memcmp(again, x, n) != 0)
		fail("encode(decode(x)) differs from x");
	for (size_t i = n; i < n + GUARD; i++)
		if (again[i] != POISON)
			fail("encode wrote past the message");

	/* decode(encode(decode(x))) re-encodes to x as well: the structs are equal */
	if (lc_ctrl_decode(again, n, &m2) != 0)
		fail("decode refused encode(decode(x))");
	memset(again, POISON, n);
	if (lc_ctrl_encode(&m2, again, n) != (long)n || memcmp(again, x, n) != 0)
		fail("the second decode differs from the first");

	/* one byte too small: -ENOSPC, nothing written */
	memset(again, POISON, n);
	if (lc_ctrl_encode(&m, again, n - 1) != -ENOSPC)
		fail("encode into a buffer one byte too small is not -ENOSPC");
	for (size_t i = 0; i < n; i++)
		if (again[i] != POISON)
			fail("encode wrote into a buffer too small");
}

/* on_message -- decode one whole message of @n bytes at @p. */
static void on_message(const uint8_t *p, size_t n)
{
	uint8_t *x = malloc(n); /* exactly n bytes: ASan sees a read past them */
	int ret;

	if (x == NULL)
		fail("out of memory");
	memcpy(x, p, n);
	memset(&m, POISON, sizeof(m));
	ret = lc_ctrl_decode(x, n, &m);
	stats.msgs++;
	if (ret == 0) {
		stats.ok++;
		stats.ok_by_type[m.type < LC_MSG_MAX_ ? m.type : 0]++;
		on_decoded(x, n);
	} else if (ret == -EPROTO || ret == -EPROTONOSUPPORT) {
		if (memcmp(&m, &poison, sizeof(m)) != 0)
			fail("decode wrote its output on failure");
		if (ret == -EPROTONOSUPPORT) {
			if ((x[4] | x[5] << 8) == LC_CTRL_VERSION)
				fail("-EPROTONOSUPPORT for the supported version");
			stats.eprotonosupport++;
		} else {
			stats.eproto++;
		}
	} else {
		fail("decode returned neither 0, -EPROTO nor -EPROTONOSUPPORT");
	}
	free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (!ready) {
		memset(&poison, POISON, sizeof(poison));
		ready = 1;
	}
	stats.inputs++;

	/* each round consumes at least LC_CTRL_HDR_LEN bytes or ends the walk */
	for (size_t round = 0; round <= size / LC_CTRL_HDR_LEN; round++) {
		size_t avail = size - off;
		long n = lc_ctrl_peek(data + off, avail);

		if (n == 0) {
			if (avail >= 4)
				fail("peek wants more bytes although a length is there");
			break;
		}
		if (avail < 4)
			fail("peek gave a result without 4 bytes");
		if (n < 0) {
			uint32_t len = le32(data + off);

			if (n != -EPROTO)
				fail("peek returned a negative value other than -EPROTO");
			if (len >= LC_CTRL_HDR_LEN && len <= LC_CTRL_MAX_MSG)
				fail("peek refused a length within bounds");
			stats.bad_len++;
			break; /* the connection is dropped */
		}
		if ((uint32_t)n != le32(data + off) || n < LC_CTRL_HDR_LEN || n > LC_CTRL_MAX_MSG)
			fail("peek length is not the length field, or out of bounds");
		if ((size_t)n > avail) {
			stats.incomplete++;
			break; /* wait for the rest */
		}
		on_message(data + off, (size_t)n);
		off += (size_t)n;
	}
	return 0;
}

/*
 * fuzz_replay_summary -- called by replay.c after the seed corpus: print
 * what the seeds reached, and fail when they stopped reaching the paths
 * they were made for (every type decoded, every kind of refusal).
 */
int fuzz_replay_summary(void)
{
	int ret = 0;

	fprintf(stderr,
	        "fuzz-ctrl-wire: %lu inputs, %lu messages: %lu ok, %lu malformed, %lu other "
	        "version; %lu incomplete, %lu bad lengths\n",
	        stats.inputs, stats.msgs, stats.ok, stats.eproto, stats.eprotonosupport,
	        stats.incomplete, stats.bad_len);
	for (unsigned t = 1; t < LC_MSG_MAX_; t++) {
		if (stats.ok_by_type[t] == 0) {
			fprintf(stderr, "fuzz-ctrl-wire: no seed decodes as %s\n",
			        lc_msg_type_str(t));
			ret = -1;
		}
	}
	if (stats.eproto == 0 || stats.eprotonosupport == 0 || stats.incomplete == 0 ||
	    stats.bad_len == 0)
		ret = -1;
	if (ret)
		fprintf(stderr, "fuzz-ctrl-wire: the seed corpus no longer covers every path\n");
	return ret;
}
