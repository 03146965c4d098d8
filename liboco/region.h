/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * region.h -- the regions of destroyed objects, kept registered until due
 * (region.c). The manager holds a struct lc_graves (m->graves); only
 * region.c touches its fields.
 */
#ifndef LOCO_LC_REGION_H
#define LOCO_LC_REGION_H

#include <stddef.h>

#include <loco.h>

struct loco_region;

struct lc_graves {
	struct loco_region *head; /* newest first; m->lock (lc_graves_reap() peeks without it) */
	unsigned n;
	size_t bytes;
};

/* lc_graves_reap -- free the destroyed objects' regions that are due (@all: every one, at the end) */
void lc_graves_reap(loco_manager_t *m, int all);

#endif /* LOCO_LC_REGION_H */
