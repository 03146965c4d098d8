/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * obj_hash.h -- objects/-private: xxhash, as every object includes it.
 *
 * Where libxxhash exports its run-time dispatch (x86-64 builds of 0.8),
 * the XXH3 calls go through it: the same hash values, computed with the
 * widest vector unit the CPU has (AVX2 here: 4 KiB in 77 ns, not 213 ns
 * with the SSE2 code the plain entry points are built with). meson.build
 * finds it and defines LOCO_HAVE_XXH_DISPATCH.
 */
#ifndef LOCO_OBJECTS_OBJ_HASH_H
#define LOCO_OBJECTS_OBJ_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>
#ifdef LOCO_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* #defines XXH3_64bits* to their _dispatch twins */
#endif

/* obj_key_mix -- @k scrambled (splitmix64's finalizer): a bijection, every bit of @k in each */
static inline uint64_t obj_key_mix(uint64_t k)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	return k ^ (k >> 31);
}

/*
 * obj_sum -- the check of @len bytes at @data under @key (a sequence, a
 * session): XXH3 of the data, unseeded, XOR the key scrambled. A record
 * checked under another key (a stale lap, another session) fails as
 * surely as with the key as XXH3's seed, and a torn one as surely as the
 * hash tells data apart. Not the seed: XXH3_64bits_withSeed() makes a
 * secret from a non-zero seed, and the AVX-512 code the dispatch picks on
 * an Intel Xeon did so on every call, whatever the length (15 % of a
 * caller's time in rpc-bench on shm, at the first 512-bit instruction).
 */
static inline uint64_t obj_sum(const void *data, size_t len, uint64_t key)
{
	return XXH3_64bits(data, len) ^ obj_key_mix(key);
}

#endif /* LOCO_OBJECTS_OBJ_HASH_H */
