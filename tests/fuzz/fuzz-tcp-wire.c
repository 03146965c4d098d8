/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz-tcp-wire.c -- libFuzzer target: tcp frame decoder, hello decoder and key checks */
/*
 * The input is a byte stream as the tcp provider's receive loop sees it
 * (liboco/fabric/tcp/nic.c, link_input): decode a header at the current offset;
 * 0 means wait for more bytes, -EPROTO ends the link; a frame is consumed
 * only once all of it has arrived. Complete frames are handled like the
 * provider does: HELLO/HELLO_ACK payloads go through tcp_hello_decode(),
 * WRITE/WRITE_IMM/READ/CAS/FAA are checked with keytab_check() (with the
 * same lengths as tcp_exec_request) against a fixed table of regions in a
 * static arena, and a granted access then really touches the memory, so
 * ASan sees any region overrun. Every invariant is checked by hand and a
 * violation ends in __builtin_trap() after one line on stderr.
 *
 * Frame addresses are offsets from FUZZ_VBASE (a bijection onto the
 * 64-bit space, so wrap-around cases stay reachable): FUZZ_VBASE + off is
 * arena + off. The seed corpus (gen-corpus.c) uses the same layout.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fabric.h"
#include "keytab.h"
#include "tcp/wire.h"

#define FUZZ_VBASE 0x0000100000000000ull
#define ARENA_LEN  8192
#define ACC_RW     (FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_replay_summary(void);

/* The table: A read/write/atomic, B read-only, C removed (stale key), D atomic-only. */
static const struct region {
	const char *name;
	size_t off, len;
	unsigned access;
	int live;
} regions[] = {
    {"A", 0, 256, ACC_RW | FAB_ACCESS_REMOTE_ATOMIC, 1},
    {"B", 1024, 2048, FAB_ACCESS_REMOTE_READ, 1},
    {"C", 4096, 64, ACC_RW, 0},
    {"D", 6144, 64, FAB_ACCESS_REMOTE_ATOMIC, 1},
};

#define NREGIONS (sizeof(regions) / sizeof(regions[0]))

static uint8_t arena[ARENA_LEN] __attribute__((aligned(64)));
static uint8_t scratch[TCP_MAX_SEG];
static struct keytab kt;
static uint32_t keys[NREGIONS];
static int ready;

static struct {
	unsigned long inputs, frames, incomplete, eproto, hellos_ok, hellos_bad, grants, refusals;
} stats;

static void fail(const char *why)
{
	fprintf(stderr, "fuzz-tcp-wire: invariant violated: %s\n", why);
	__builtin_trap();
}

/* setup -- register A, B and C, remove C, then add D, which reuses C's slot. */
static void setup(void)
{
	if (keytab_init(&kt, 3) != 0) /* 3 slots: D must reuse C's */
		fail("keytab_init");
	for (size_t i = 0; i < 3; i++)
		if (keytab_add(&kt, arena + regions[i].off, regions[i].len, regions[i].access,
		               &keys[i]) != 0)
			fail("keytab_add");
	if (keytab_remove(&kt, keys[2]) != 0)
		fail("keytab_remove");
	/* D reuses C's slot with a new generation: C's key must stay refused */
	if (keytab_add(&kt, arena + regions[3].off, regions[3].len, regions[3].access, &keys[3]) !=
	    0)
		fail("keytab_add");
	ready = 1;
}

/* local_addr -- the arena address a wire address names (mod 2^64). */
static uint64_t local_addr(uint64_t wire)
{
	return wire - FUZZ_VBASE + (uint64_t)(uintptr_t)arena;
}

/* region_of -- the region a key was issued for, or NULL. */
static const struct region *region_of(uint32_t key)
{
	for (size_t i = 0; i < NREGIONS; i++)
		if (keys[i] == key)
			return &regions[i];
	return NULL;
}

/* within -- whether [p, p + len) lies inside region @r of the arena. */
static int within(const struct region *r, uint64_t p, uint64_t len)
{
	uint64_t base = (uint64_t)(uintptr_t)arena + r->off;

	return p >= base && p - base <= r->len && len <= r->len - (p - base);
}

/*
 * check -- keytab_check() of @len bytes at wire address @addr with @access,
 * plus the invariants of a grant. Returns the local pointer or NULL.
 */
static uint8_t *check(uint32_t key, uint64_t addr, uint64_t len, unsigned access)
{
	const struct region *r = region_of(key);
	void *p = (void *)&stats; /* any value that a grant must overwrite */
	uint64_t want = local_addr(addr);
	int ret = keytab_check(&kt, key, want, len, access, &p);

	if (ret == -EACCES) {
		if (p != (void *)&stats)
			fail("keytab_check wrote *ptr on refusal");
		if (r != NULL && r->live && (r->access & access) == access && within(r, want, len))
			fail("keytab_check refused a legal access");
		stats.refusals++;
		return NULL;
	}
	if (ret != 0)
		fail("keytab_check returned neither 0 nor -EACCES");
	if (r == NULL || !r->live)
		fail("keytab_check granted an unknown or removed key");
	if ((r->access & access) != access)
		fail("keytab_check granted a right the region lacks");
	if ((uint64_t)(uintptr_t)p != want)
		fail("keytab_check pointer is not the requested address");
	if (!within(r, want, len))
		fail("keytab_check granted a range outside the key's region");
	stats.grants++;
	return p;
}

/* exec_request -- what the target does with a request frame (tcp/target.c, tcp_exec_request). */
static void exec_request(const struct tcp_frame *f, const uint8_t *payload)
{
	uint8_t *p;

	switch (f->type) {
	case TCP_F_WRITE:
	case TCP_F_WRITE_IMM:
		/* the span the provider checks: shared code, so the fuzzer tests the real rule */
		p = check(f->key, f->addr, tcp_wire_write_span(f), FAB_ACCESS_REMOTE_WRITE);
		if (p == NULL)
			break;
		if (!within(region_of(f->key), (uint64_t)(uintptr_t)p, f->len))
			fail("WRITE payload lands outside the range its check granted");
		memcpy(p, payload, f->len);
		break;
	case TCP_F_READ:
		p = check(f->key, f->addr, f->a, FAB_ACCESS_REMOTE_READ);
		if (p != NULL)
			memcpy(scratch, p, f->a); /* a <= TCP_MAX_SEG: tcp_wire_decode checked it */
		break;
	case TCP_F_CAS:
	case TCP_F_FAA:
		p = check(f->key, f->addr, 8, FAB_ACCESS_REMOTE_ATOMIC);
		if (p == NULL || (f->addr & 7))
			break; /* the provider refuses a misaligned atomic itself */
		if (f->type == TCP_F_CAS) {
			uint64_t expected = f->a;

			__atomic_compare_exchange_n((uint64_t *)p, &expected, f->b, 0,
			                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		} else {
			__atomic_fetch_add((uint64_t *)p, f->a, __ATOMIC_SEQ_CST);
		}
		break;
	default:
		break;
	}
}

/* on_hello -- tcp_hello_decode() of a HELLO/HELLO_ACK payload, and its invariants. */
static void on_hello(const uint8_t *payload, size_t len)
{
	struct tcp_hello h, poison;
	uint8_t again[TCP_HELLO_LEN];
	int ret;

	memset(&h, 0x5a, sizeof(h));
	memset(&poison, 0x5a, sizeof(poison));
	ret = tcp_hello_decode(payload, len, &h);
	if (ret == -EPROTO) {
		if (memcmp(&h, &poison, sizeof(h)) != 0)
			fail("tcp_hello_decode wrote its output on failure");
		stats.hellos_bad++;
		return;
	}
	if (ret != 0)
		fail("tcp_hello_decode returned neither 0 nor -EPROTO");
	if (len != TCP_HELLO_LEN || h.magic != TCP_MAGIC || h.version != TCP_VERSION ||
	    h.priv_len > TCP_PRIV_MAX || h.sq_depth == 0 || h.sq_depth > 65536 ||
	    h.read_window < TCP_MAX_SEG || h.read_window > (64u << 20))
		fail("tcp_hello_decode accepted an out-of-range hello");
	for (size_t i = h.priv_len; i < TCP_PRIV_MAX; i++)
		if (h.priv[i] != 0)
			fail("tcp_hello_decode left bytes past priv_len");
	tcp_hello_encode(&h, again);
	if (memcmp(again, payload, 16 + (size_t)h.priv_len) != 0)
		fail("hello encode(decode(x)) differs from x");
	stats.hellos_ok++;
}

/* frame_checks -- invariants of one successful header decode at @hdr. */
static void frame_checks(const uint8_t *hdr, const struct tcp_frame *f, long n)
{
	struct tcp_frame g;
	uint8_t again[TCP_HDR_LEN];

	if (n != (long)TCP_HDR_LEN + (long)f->len || f->len > TCP_MAX_SEG)
		fail("frame length is not TCP_HDR_LEN + len, or len > TCP_MAX_SEG");
	if (f->type == 0 || f->type >= TCP_F_MAX_ || (f->flags & ~TCP_FL_ALL_))
		fail("decoded an unknown type or flag");
	if (f->type == TCP_F_READ && (f->a == 0 || f->a > TCP_MAX_SEG))
		fail("decoded a READ of 0 or more than TCP_MAX_SEG bytes");
	if ((f->type == TCP_F_HELLO || f->type == TCP_F_HELLO_ACK) && f->len != TCP_HELLO_LEN)
		fail("decoded a hello frame of the wrong length");
	/* the result depends on the header alone, and re-encodes to the same bytes */
	if (tcp_wire_decode(hdr, TCP_HDR_LEN, &g) != n)
		fail("decode result depends on bytes after the header");
	tcp_wire_encode(f, again);
	if (memcmp(again, hdr, TCP_HDR_LEN) != 0)
		fail("encode(decode(x)) differs from x");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (!ready)
		setup();
	memset(arena, 0, sizeof(arena));
	stats.inputs++;

	/* each round consumes at least TCP_HDR_LEN bytes or ends the walk */
	for (size_t round = 0; round <= size / TCP_HDR_LEN; round++) {
		struct tcp_frame f, poison;
		size_t avail = size - off;
		long n;

		memset(&f, 0x5a, sizeof(f));
		memset(&poison, 0x5a, sizeof(poison));
		n = tcp_wire_decode(data + off, avail, &f);
		if (n == 0) {
			if (avail >= TCP_HDR_LEN)
				fail("decode wants more bytes although a header is there");
			if (memcmp(&f, &poison, sizeof(f)) != 0)
				fail("decode wrote its output without a header");
			break;
		}
		if (n < 0) {
			if (n != -EPROTO)
				fail("decode returned a negative value other than -EPROTO");
			if (avail < TCP_HDR_LEN || memcmp(&f, &poison, sizeof(f)) != 0)
				fail("decode failed on a short buffer, or wrote its output");
			stats.eproto++;
			break; /* the provider takes the link down */
		}
		frame_checks(data + off, &f, n);
		if ((size_t)n > avail) {
			stats.incomplete++;
			break; /* wait for the rest of the frame */
		}
		stats.frames++;
		if (f.type == TCP_F_HELLO || f.type == TCP_F_HELLO_ACK)
			on_hello(data + off + TCP_HDR_LEN, f.len);
		else
			exec_request(&f, data + off + TCP_HDR_LEN);
		off += (size_t)n;
		if (off > size)
			fail("consumed more than was available");
	}
	return 0;
}

/*
 * fuzz_replay_summary -- called by replay.c after the seed corpus: print
 * what the seeds reached, and fail when they stopped reaching the paths
 * they were made for (e.g. after a change of the key layout).
 */
int fuzz_replay_summary(void)
{
	fprintf(stderr,
	        "fuzz-tcp-wire: %lu inputs, %lu frames (%lu incomplete, %lu malformed), "
	        "hellos %lu ok %lu refused, key checks %lu granted %lu refused\n",
	        stats.inputs, stats.frames, stats.incomplete, stats.eproto, stats.hellos_ok,
	        stats.hellos_bad, stats.grants, stats.refusals);
	if (stats.frames == 0 || stats.incomplete == 0 || stats.eproto == 0 ||
	    stats.hellos_ok == 0 || stats.hellos_bad == 0 || stats.grants == 0 ||
	    stats.refusals == 0) {
		fprintf(stderr, "fuzz-tcp-wire: the seed corpus no longer covers every path\n");
		return -1;
	}
	return 0;
}
