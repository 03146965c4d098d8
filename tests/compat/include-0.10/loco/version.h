/* SPDX-License-Identifier: BSD-2-Clause */
/* version.h -- loco 0.10.0's, as meson generated it (tests/compat). */
#ifndef LOCO_VERSION_H
#define LOCO_VERSION_H

#define LOCO_VERSION_MAJOR  0
#define LOCO_VERSION_MINOR  10
#define LOCO_VERSION_STRING "0.10.0"

/* LOCO_CHECK_VERSION -- true when the headers are at least major.minor. */
#define LOCO_CHECK_VERSION(major, minor) \
	(LOCO_VERSION_MAJOR > (major) || \
	 (LOCO_VERSION_MAJOR == (major) && LOCO_VERSION_MINOR >= (minor)))

#endif
