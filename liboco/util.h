/* SPDX-License-Identifier: BSD-2-Clause */
/* util.h -- small helpers of the core (a leaf header). */
#ifndef LOCO_LC_UTIL_H
#define LOCO_LC_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline int lc_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* lc_sort_u32 -- sort @n ids ascending. */
static inline void lc_sort_u32(uint32_t *ids, size_t n)
{
	qsort(ids, n, sizeof(ids[0]), lc_cmp_u32);
}

#endif /* LOCO_LC_UTIL_H */
