/* SPDX-License-Identifier: BSD-2-Clause */
/* provider.h -- helpers that only providers use (libfabric's prov/util). */
#ifndef LOCO_FABRIC_PROVIDER_H
#define LOCO_FABRIC_PROVIDER_H

#include <pthread.h>
#include <stddef.h>

#include "fabric.h"

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

/*
 * fab_wait_nonnull -- with @lock held, wait on @cond until *@slot is not
 * NULL or @timeout_ms passes (0: do not wait; < 0: forever). The accept
 * queues of the providers use it. Returns 0 when *@slot is set, -EAGAIN.
 */
int fab_wait_nonnull(pthread_cond_t *cond, pthread_mutex_t *lock, void *const *slot,
                     int timeout_ms);

/* fab_ops_fill -- copy @src into @dst, replacing NULL ops with -EOPNOTSUPP stubs. */
void fab_ops_fill(struct fab_ops *dst, const struct fab_ops *src);

#endif
