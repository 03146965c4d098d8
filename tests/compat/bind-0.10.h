/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bind-0.10.h -- forced into every compat program (-include): the symbol
 * versions a program linked to the 0.10 library would hold. Linked to this
 * library, a name it exports in two versions would bind to the newest
 * (the default); a program built against 0.10 was linked to 0.10, where
 * only the old one existed, and keeps that one when it runs on a newer
 * library. Each name here has a newer default version in liboco.map.
 */
#ifndef LOCO_COMPAT_BIND_0_10_H
#define LOCO_COMPAT_BIND_0_10_H

/* the 88-byte loco_map_stats_t of 0.10 (0.11 appended 24 bytes) */
__asm__(".symver loco_map_stats, loco_map_stats@LOCO_0.6");

#endif
