/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/shared_region.h -- a raw region per node that peers read and write.
 *
 * Every node of the channel has its own copy of @len bytes. A node writes
 * a range of its own copy into the same range of a peer's copy, or reads
 * a range of a peer's copy into its own. It is the simplest channel
 * object, written only on the public object-author API (loco/channel.h).
 *
 * Thread safety: MT-safe (operations on one node's copy race as plain
 * memory does: coordinate them, e.g. with an ack key and a barrier).
 */
#ifndef LOCO_SHARED_REGION_H
#define LOCO_SHARED_REGION_H

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_shared_region loco_shared_region_t;

/*
 * loco_shared_region_create -- @len zeroed bytes on this node, remotely
 * accessible as @access says (LOCO_ACCESS_*), named @name in channel @ch.
 * Create it before loco_channel_join() so that peers pair with it at once.
 * Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOMEM.
 */
int loco_shared_region_create(loco_channel_t *ch, const char *name, size_t len, unsigned access,
                              loco_shared_region_t **out);

/* loco_shared_region_destroy -- free it (its operations must be complete). NULL-safe. */
void loco_shared_region_destroy(loco_shared_region_t *sr);

/* loco_shared_region_ptr / _len -- this node's copy. */
void *loco_shared_region_ptr(const loco_shared_region_t *sr);
size_t loco_shared_region_len(const loco_shared_region_t *sr);

/*
 * loco_shared_region_write -- write [@off, @off + @len) of this node's
 * copy into the same range of @node's copy; attached to @ack when given.
 * loco_shared_region_read -- the other way round.
 * Return 0 when posted; -EINVAL (range), -ENOENT (@node has no copy),
 * -ENOTCONN, -EAGAIN.
 */
int loco_shared_region_write(loco_shared_region_t *sr, uint32_t node, size_t off, size_t len,
                             loco_ack_key_t *ack);
int loco_shared_region_read(loco_shared_region_t *sr, uint32_t node, size_t off, size_t len,
                            loco_ack_key_t *ack);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_SHARED_REGION_H */
