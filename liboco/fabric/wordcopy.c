/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wordcopy.c -- how the software providers (tcp, shm) move bytes into and
 * out of memory that other CPUs read and write at the same time (DESIGN
 * §3): aligned 8-byte words with one atomic load or store each, so they
 * are never torn; WRITEs land in ascending address order within a line,
 * or, with the slow-write knob, lines in a shuffled order with a pause
 * between words (the worst a legal NIC does). provider.h declares them.
 */
#include <string.h>

#include "../clock.h"
#include "provider.h"

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = lc_now_ns() + ns;

	while (lc_now_ns() < end)
		lc_cpu_relax();
}

void fab_copy_out(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	while (len && ((uintptr_t)s & 7)) {
		*d++ = __atomic_load_n(s++, __ATOMIC_RELAXED);
		len--;
	}
	for (; len >= 8; len -= 8, s += 8, d += 8) {
		uint64_t w = __atomic_load_n((const uint64_t *)s, __ATOMIC_RELAXED);

		memcpy(d, &w, 8);
	}
	while (len--)
		*d++ = __atomic_load_n(s++, __ATOMIC_RELAXED);
}

void fab_copy_in(void *dst, const void *src, size_t len, uint64_t pause_ns)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	while (len && ((uintptr_t)d & 7)) {
		__atomic_store_n(d++, __atomic_load_n(s++, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
		len--;
	}
	if (pause_ns == 0 && ((uintptr_t)s & 7) == 0) {
		/* the common case, both aligned (a tcp WRITE lands so): a load and a store a word,
		 * not a call (a 4 KiB landing was 4 % of a tcp allreduce's CPU) */
		for (; len >= 8; len -= 8, s += 8, d += 8)
			__atomic_store_n(
			    (uint64_t *)(void *)d,
			    __atomic_load_n((const uint64_t *)(const void *)s, __ATOMIC_RELAXED),
			    __ATOMIC_RELAXED);
	}
	for (; len >= 8; len -= 8, s += 8, d += 8) {
		uint64_t w;

		fab_copy_out(&w, s, 8); /* the source may be shared memory too (shm) */
		__atomic_store_n((uint64_t *)d, w, __ATOMIC_RELAXED);
		if (pause_ns)
			spin_ns(pause_ns);
	}
	while (len--)
		__atomic_store_n(d++, __atomic_load_n(s++, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

void fab_land_write(uint64_t slow_ns, uint64_t *rng, void *dst, const void *src, size_t len)
{
	uintptr_t start = (uintptr_t)dst, end = start + len, first, nlines;
	uint64_t a = 1, b;

	if (slow_ns == 0 || len == 0) {
		fab_copy_in(dst, src, len, 0);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		return;
	}
	first = start & ~(uintptr_t)63;
	nlines = (end - first + 63) / 64;
	/* a permutation of the lines without memory: i -> (a * i + b) mod nlines, gcd(a, nlines) 1 */
	b = xorshift(rng) % nlines;
	for (int tries = 0; tries < 16 && nlines > 1; tries++) {
		uint64_t c = xorshift(rng) % nlines, x = c, y = nlines;

		while (y) {
			uint64_t t = x % y;

			x = y;
			y = t;
		}
		if (c && x == 1) {
			a = c;
			break;
		}
	}
	for (uint64_t i = 0; i < nlines; i++) {
		uintptr_t lo = first + (uintptr_t)((a * i + b) % nlines) * 64, hi = lo + 64;

		if (lo < start)
			lo = start;
		if (hi > end)
			hi = end;
		fab_copy_in((void *)lo, (const uint8_t *)src + (lo - start), hi - lo, slow_ns);
	}
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
