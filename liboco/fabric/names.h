/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * names.h -- the names of the fabric providers built into this liboco, in
 * one place for the library (fab_provider_names(), and the error that
 * answers an unknown LOCO_FABRIC) and for loco-run (--fabric), which does
 * not link liboco. A build that found rdma-core defines LOCO_HAVE_VERBS
 * (liboco/meson.build, tools/meson.build).
 */
#ifndef LOCO_FABRIC_NAMES_H
#define LOCO_FABRIC_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* fab_names_built -- the providers' names, NULL-terminated (loco-info lists them in this order). */
static inline const char *const *fab_names_built(void)
{
	static const char *const names[] = {
	    "tcp",   "shm",
#ifdef LOCO_HAVE_VERBS
	    "verbs",
#endif
	    "auto",  NULL,
	};
	return names;
}

/* fab_names_known -- whether @name is one of them. */
static inline bool fab_names_known(const char *name)
{
	for (const char *const *n = fab_names_built(); name != NULL && *n != NULL; n++)
		if (strcmp(*n, name) == 0)
			return true;
	return false;
}

/* fab_names_list -- "tcp, shm, verbs, auto" into @buf (@len bytes, cut if short); returns @buf. */
static inline const char *fab_names_list(char *buf, size_t len)
{
	size_t used = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (const char *const *n = fab_names_built(); *n != NULL; n++) {
		const char *sep = n == fab_names_built() ? "" : ", ";

		for (const char *s = sep; *s != '\0' && used + 1 < len; s++)
			buf[used++] = *s;
		for (const char *s = *n; *s != '\0' && used + 1 < len; s++)
			buf[used++] = *s;
		buf[used] = '\0';
	}
	return buf;
}

#endif
