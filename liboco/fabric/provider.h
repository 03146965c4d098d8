/* SPDX-License-Identifier: BSD-2-Clause */
/* provider.h -- helpers that only providers use (libfabric's prov/util). */
#ifndef LOCO_FABRIC_PROVIDER_H
#define LOCO_FABRIC_PROVIDER_H

#include <stddef.h>

#include "fabric.h"

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

/* fab_ops_fill -- copy @src into @dst, replacing NULL ops with -EOPNOTSUPP stubs. */
void fab_ops_fill(struct fab_ops *dst, const struct fab_ops *src);

#endif
