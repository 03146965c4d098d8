/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz-rpc-frame.c -- libFuzzer target: the rpc's frame decoder (objects/rpc_frame.c) */
/*
 * The input is one ring message as a callee reads it from a caller's
 * rpipe: untrusted bytes. It is copied into a buffer of exactly its size
 * (so ASan sees any read past it) and walked with rf_next() to the end or
 * to the first refusal. Invariants: the walk advances at every frame and
 * never past the message; a frame's payload lies inside the message; its
 * kind is one of the seven; a callv's argument table and copied bytes fill
 * its payload (a buffer broadcast's: what follows its node list) exactly, its arguments are non-empty and their total fits
 * the pull room; a destination is non-empty and does not wrap; a tree's node list and arguments lie inside
 * its payload; a reply slot is below the limit; a pull's
 * extent is non-empty and inside the send region; the walk ends (a frame
 * takes at least RF_HDR bytes). Every violation ends in __builtin_trap()
 * after one line on stderr. Seeds: corpus/rpc-frame/ (written by
 * gen-rpc-corpus.py).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_replay_summary(void);

static const struct rf_limits lim = {.slots = 64, .pull_max = 1u << 20, .send_len = 1u << 20};

static struct {
	unsigned long inputs, frames, bad, empty, by_kind[8];
} stats;

static void fail(const char *why)
{
	fprintf(stderr, "fuzz-rpc-frame: invariant violated: %s\n", why);
	__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *msg = malloc(size ? size : 1);
	struct rf_frame f;
	size_t pos = 0, last;
	int r, n = 0;

	if (msg == NULL)
		return 0;
	memcpy(msg, data, size);
	stats.inputs++;
	for (;;) {
		last = pos;
		r = rf_next(msg, size, &pos, &lim, &f);
		if (r != 1)
			break;
		n++;
		stats.frames++;
		if (pos <= last || pos > size)
			fail("the position did not advance, or went past the message");
		if ((const uint8_t *)f.payload != msg + last + RF_HDR ||
		    last + RF_HDR + (size_t)f.h.plen > size)
			fail("payload outside the message");
		if (f.h.kind < 1 || f.h.kind > 7)
			fail("bad kind accepted");
		if ((f.h.kind == 4 || f.h.kind == 7) &&
		    (f.nsub > RF_TREE_MAX || f.sub != (const uint8_t *)f.payload + 8 ||
		     f.sub + (size_t)f.nsub * 4 != (const uint8_t *)f.args ||
		     (const uint8_t *)f.args + f.alen != (const uint8_t *)f.payload + f.h.plen))
			fail("tree list or arguments outside the payload");
		if (f.h.kind != 4 && f.h.kind != 7 && (f.args != f.payload || f.alen != f.h.plen))
			fail("arguments are not the payload");
		stats.by_kind[f.h.kind]++;
		if ((f.h.kind == 2 || f.h.kind == 3 || f.h.kind == 5 || f.h.kind == 7) &&
		    f.h.slot >= lim.slots)
			fail("reply slot out of range accepted");
		if (f.h.kind == 3 && (f.pull.len == 0 || f.pull.len > lim.pull_max ||
		                      f.pull.off + f.pull.len > lim.send_len ||
		                      f.pull.off + f.pull.len < f.pull.off))
			fail("pull extent out of range accepted");
		if (f.h.kind == 5 &&
		    (f.dest.len == 0 || f.dest.rsv != 0 || f.dest.addr + f.dest.len < f.dest.addr))
			fail("empty, reserved or wrapping destination accepted");
		if (f.h.kind == 6 || f.h.kind == 7) {
			/* a buffer broadcast's vec body follows its node list (f.args) */
			const uint8_t *body = f.h.kind == 6 ? f.payload : f.args;
			uint64_t total = 0, copied = 0;

			if (f.h.slot >= lim.slots || f.vn == 0 || f.vn > RF_VEC_MAX ||
			    f.varg != body + sizeof(struct rf_vec) ||
			    f.vcopy != f.varg + (size_t)f.vn * sizeof(struct rf_varg))
				fail("argument table out of range accepted");
			for (uint32_t i = 0; i < f.vn; i++) {
				struct rf_varg a;

				memcpy(&a, f.varg + (size_t)i * sizeof(a), sizeof(a));
				if (a.len == 0 || a.len > lim.pull_max || a.how > RF_VARG_READ)
					fail("empty, oversized or unknown argument accepted");
				total += a.len;
				copied += a.how == RF_VARG_COPY ? a.len : 0;
			}
			if (total != f.vlen || total > lim.pull_max ||
			    f.vcopy + copied != (const uint8_t *)f.payload + f.h.plen)
				fail("copied arguments outside the payload, or a wrong total");
		}
		if (n > (int)(size / RF_HDR) + 1)
			fail("more frames than the message can hold");
	}
	if (r == 0 && pos < size)
		fail("end reported before the end of the message");
	if (r != 0 && r != -EBADMSG)
		fail("unexpected return");
	if (r == -EBADMSG)
		stats.bad++;
	if (n == 0 && r == 0)
		stats.empty++;
	free(msg);
	return 0;
}

/* fuzz_replay_summary -- after the seeds: each kind decoded and a refusal met */
int fuzz_replay_summary(void)
{
	fprintf(
	    stderr,
	    "fuzz-rpc-frame: %lu inputs, %lu frames (call %lu, ret %lu, pull %lu, tree %lu, dest "
	    "%lu, vec %lu, treev %lu), %lu refused, %lu empty\n",
	    stats.inputs, stats.frames, stats.by_kind[1], stats.by_kind[2], stats.by_kind[3],
	    stats.by_kind[4], stats.by_kind[5], stats.by_kind[6], stats.by_kind[7], stats.bad,
	    stats.empty);
	return stats.by_kind[1] && stats.by_kind[2] && stats.by_kind[3] && stats.by_kind[4] &&
	               stats.by_kind[5] && stats.by_kind[6] && stats.by_kind[7] && stats.bad
	           ? 0
	           : 1;
}
