/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-pattern.h -- the messages of the rpipe tests: message k of a
 * stream with seed s has a size and content that only (s, k) decide, so
 * a reader checks length, content, order, loss and duplicates at once.
 *
 * Sizes: 1 in 8 messages uniform in 1..@max (16 KiB in the tests), the
 * others uniform in 1..256 B: about 1.1 KiB on average. All uniform in
 * 1 B..16 KiB, 1 M messages (8 GB) took 26-30 s on tcp loopback here and
 * kept the 2 CPUs so busy that a node missed its heartbeats for 1.9 s
 * (a failure bound of 1 s): the large ones still wrap and fill the ring.
 */
#ifndef RPIPE_PATTERN_H
#define RPIPE_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t rp_mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* rp_size -- the size of message @k of stream @s, in 1..@max. */
static inline size_t rp_size(uint64_t s, uint64_t k, size_t max)
{
	uint64_t r = rp_mix(s * 1000003u ^ k);

	if ((r & 7) != 0 && max > 256)
		return 1 + (size_t)((r >> 8) % 256);
	return 1 + (size_t)((r >> 8) % max);
}

/* rp_word -- word @i of message @k of stream @s. */
static inline uint64_t rp_word(uint64_t base, size_t i)
{
	return base ^ (i * 0xD6E8FEB86659FD93ull);
}

/* rp_fill -- message @k's content into @buf (@len bytes). */
static inline void rp_fill(void *buf, size_t len, uint64_t s, uint64_t k)
{
	uint64_t base = rp_mix(s ^ (k << 20) ^ k), w;
	uint8_t *b = buf;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = rp_word(base, i / 8);
		memcpy(b + i, &w, 8);
	}
	w = rp_word(base, i / 8);
	memcpy(b + i, &w, len - i);
}

/* rp_check -- whether @buf holds message @k of stream @s, @len bytes. */
static inline int rp_check(const void *buf, size_t len, uint64_t s, uint64_t k)
{
	uint64_t base = rp_mix(s ^ (k << 20) ^ k), w;
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, b + i, 8);
		if (w != rp_word(base, i / 8))
			return 0;
	}
	w = rp_word(base, i / 8);
	return memcmp(b + i, &w, len - i) == 0;
}

#endif /* RPIPE_PATTERN_H */
