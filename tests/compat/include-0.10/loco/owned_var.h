/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/owned_var.h -- a single-writer variable replicated to readers.
 *
 * One node of the channel, the owner, stores the value locally and pushes
 * it with one-sided WRITEs into every reader's replica; readers load their
 * replica locally, with no fabric operation. A reader never gets a torn
 * value: up to 8 bytes the value is one aligned word; up to 56 bytes it is
 * one 64-byte line with a sequence number before and after the data; larger
 * values carry an xxhash over sequence and data. A load that finds the
 * value unstable retries with back-off, and gives up with -LOCO_ETORN after
 * a bound. See loco_owned_var(3).
 *
 * Thread safety: owner-only for loco_owned_var_store() and the push calls
 * (the owner node, one thread at a time); MT-safe for loco_owned_var_load()
 * and the accessors.
 */
#ifndef LOCO_OWNED_VAR_H
#define LOCO_OWNED_VAR_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_owned_var loco_owned_var_t;

/* Counters of a value object (owned_var, sst); each a running total. */
typedef struct loco_value_stats {
	uint64_t loads;       /* validated loads returned */
	uint64_t retries;     /* attempts that found the value unstable and were retried */
	uint64_t torn;        /* loads that gave up with -LOCO_ETORN */
	uint64_t pushes;      /* WRITEs posted by the push calls (one per peer) */
	uint64_t push_errors; /* earlier pushes found failed when their staging slot was reused */
} loco_value_stats_t;

#define LOCO_OWNED_VAR_MAX_SIZE (1u << 30) /* bytes of the largest value */

/*
 * loco_owned_var_create -- variable @name of @size bytes (1 ..
 * LOCO_OWNED_VAR_MAX_SIZE) in @ch, owned by node @owner (>= 1; every node
 * passes the same). It starts as zeros everywhere. Create it before
 * loco_channel_join(). Returns 0 and sets *@out; -EINVAL, -EEXIST,
 * -ENOSPC, -ENOMEM.
 */
int loco_owned_var_create(loco_channel_t *ch, const char *name, uint32_t owner, size_t size,
                          loco_owned_var_t **out);

/* loco_owned_var_destroy -- wait for its pushes in flight, then free it. NULL-safe. */
void loco_owned_var_destroy(loco_owned_var_t *ov);

/*
 * loco_owned_var_sync -- loco_object_sync() of the variable: wait until
 * every peer paired in the channel holds it (needed before the first push
 * of a variable made after loco_channel_join()). Every node agrees on
 * @size and @owner: a node that differs makes every node's calls of the
 * variable return -LOCO_EMISMATCH. Returns the number of peers;
 * -ETIMEDOUT, -LOCO_ENOTJOINED, -LOCO_EMISMATCH, -LOCO_EPARTITION,
 * -EINVAL. Appeared in loco 0.4.
 */
int loco_owned_var_sync(loco_owned_var_t *ov, int64_t timeout_ns);

/*
 * loco_owned_var_store -- owner: set the value to the @size bytes at @val,
 * locally. Readers see it after a push. Returns 0; -EPERM (not the
 * owner), -EINVAL.
 */
int loco_owned_var_store(loco_owned_var_t *ov, const void *val);

/*
 * loco_owned_var_push_to -- owner: write the value as last stored into
 * @node's replica; with @ack, attached to it (loco_ack_wait() then means
 * it landed). Returns 0; -EPERM, -EINVAL (@node is this node), -ENOENT
 * (@node holds no such variable, yet), -ENOTCONN, -EAGAIN.
 * loco_owned_var_push_broadcast -- the same to every peer of the channel
 * that holds the variable. Returns how many peers it was posted to, or the
 * first error (the pushes posted before it stay attached to @ack).
 */
int loco_owned_var_push_to(loco_owned_var_t *ov, uint32_t node, loco_ack_key_t *ack);
int loco_owned_var_push_broadcast(loco_owned_var_t *ov, loco_ack_key_t *ack);

/*
 * loco_owned_var_load -- copy the value into the @size bytes at @val: a
 * reader's replica, or on the owner the value as last stored. Validated:
 * never torn. Returns 0; -LOCO_ETORN (the value stayed unstable past the
 * retry bound, about 50 ms; @val is untouched), -EINVAL.
 */
int loco_owned_var_load(loco_owned_var_t *ov, void *val);

/* loco_owned_var_size / _owner -- the value's size and its owner (0 for NULL). */
size_t loco_owned_var_size(const loco_owned_var_t *ov);
uint32_t loco_owned_var_owner(const loco_owned_var_t *ov);

/* loco_owned_var_stats -- this node's counters of @ov into *@st. */
void loco_owned_var_stats(const loco_owned_var_t *ov, loco_value_stats_t *st);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_OWNED_VAR_H */
