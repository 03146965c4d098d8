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

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "../clock.h"
#include "provider.h"

/*
 * wide -- copy the 16-byte blocks of [@d, @d + @len) from @s in ascending
 * order, one SSE load and one SSE store each, where both ends are 16-byte
 * aligned and the CPU makes such accesses atomic: x86 CPUs that have AVX
 * carry out 16-byte aligned SSE loads and stores atomically (Intel SDM
 * vol. 3A, 9.1.1; AMD APM vol. 2, 7.3.2), so each aligned word of either
 * side is still read or written whole, and the words of a line land in
 * ascending order (the two of a block at once). Returns the bytes copied:
 * 0 where it does not apply (the caller goes on word by word). A WRITE of
 * 4 KiB then takes 256 stores, not 512 words at about 7 instructions each
 * (shm, a 296-byte rpc record landed: 258 -> 125 instructions, callgrind).
 */
static size_t wide(uint8_t *d, const uint8_t *s, size_t len)
{
#if defined(__x86_64__)
	size_t n = len & ~(size_t)15;

	if ((((uintptr_t)d | (uintptr_t)s) & 15) != 0 || n == 0 || !__builtin_cpu_supports("avx"))
		return 0;
	size_t i = 0;
	__m128i a, b, c, e;

	/* volatile: the compiler keeps the accesses whole, apart and in this order */
	for (; i + 64 <= n; i += 64) { /* a line a turn: loads first, stores ascending */
		a = *(const volatile __m128i *)(const void *)(s + i);
		b = *(const volatile __m128i *)(const void *)(s + i + 16);
		c = *(const volatile __m128i *)(const void *)(s + i + 32);
		e = *(const volatile __m128i *)(const void *)(s + i + 48);
		*(volatile __m128i *)(void *)(d + i) = a;
		*(volatile __m128i *)(void *)(d + i + 16) = b;
		*(volatile __m128i *)(void *)(d + i + 32) = c;
		*(volatile __m128i *)(void *)(d + i + 48) = e;
	}
	for (; i < n; i += 16)
		*(volatile __m128i *)(void *)(d + i) =
		    *(const volatile __m128i *)(const void *)(s + i);
	return n;
#else
	(void)d, (void)s, (void)len;
	return 0;
#endif
}

/*
 * copy_aligned -- @dst and @src both 8-byte aligned: a word by word head
 * until @dst is 16-byte aligned, the blocks with wide(), then the tail
 * word by word: every aligned word of @dst stored once, whole, in
 * ascending order; every aligned word of @src loaded whole.
 */
static void copy_aligned(uint8_t *d, const uint8_t *s, size_t len)
{
	size_t n;

	if (((uintptr_t)d & 15) != 0 && len >= 8) {
		__atomic_store_n(
		    (uint64_t *)(void *)d,
		    __atomic_load_n((const uint64_t *)(const void *)s, __ATOMIC_RELAXED),
		    __ATOMIC_RELAXED);
		d += 8, s += 8, len -= 8;
	}
	n = wide(d, s, len);
	d += n, s += n, len -= n;
	for (; len >= 8; len -= 8, s += 8, d += 8)
		__atomic_store_n(
		    (uint64_t *)(void *)d,
		    __atomic_load_n((const uint64_t *)(const void *)s, __ATOMIC_RELAXED),
		    __ATOMIC_RELAXED);
	while (len--)
		__atomic_store_n(d++, __atomic_load_n(s++, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

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
	if (((uintptr_t)d & 7) == 0) {
		copy_aligned(d, s, len);
		return;
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
	if (pause_ns == 0 && (((uintptr_t)s | (uintptr_t)d) & 7) == 0) {
		/* the common case, both aligned (a tcp WRITE lands so): blocks, then words, not a
		 * call a word (a 4 KiB landing was 4 % of a tcp allreduce's CPU) */
		copy_aligned(d, s, len);
		return;
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
		if (((start | (uintptr_t)src) & 7) == 0)
			copy_aligned(dst, src, len); /* the common case: no byte head to look for */
		else
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
