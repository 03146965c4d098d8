/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst_priv.h -- objects/-private extras of the sst for the barrier, which
 * is built on it. Not installed.
 *
 * Thread safety: as the sst's own-row calls (owner-only).
 */
#ifndef LOCO_OBJECTS_SST_PRIV_H
#define LOCO_OBJECTS_SST_PRIV_H

#include <stdint.h>

#include <loco/sst.h>

/*
 * sst_direct -- push this node's row straight from the table instead of
 * through the staging ring: one WRITE per peer instead of two with an ack
 * key. Only for rows of at most 8 bytes, where the fabric reads the word
 * whole whenever it reads it; a push may then carry a store made after
 * the call, which a counter that only grows does not mind. Call it before
 * the first push. Returns 0; -EINVAL (larger rows).
 */
int sst_direct(loco_sst_t *sst);

/*
 * sst_fetch_post -- READ @node's own row, at the source (its copy of its
 * own row, not our replica of it), into this node's fetch slot for
 * @node, attached to @ack; sst_fetch_result() gives it once @ack
 * completed. Rows of at most 8 bytes only (an aligned word is read
 * whole). The fetch slot is zeroed first, so a failed READ leaves 0.
 * Returns 0 when posted; -EINVAL, -ENOENT (@node has no copy), -ENOTCONN,
 * -EAGAIN.
 */
int sst_fetch_post(loco_sst_t *sst, uint32_t node, loco_ack_key_t *ack);
uint64_t sst_fetch_result(const loco_sst_t *sst, uint32_t node);

#endif /* LOCO_OBJECTS_SST_PRIV_H */
