/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/atomic_var.h -- a 64-bit word hosted on one node of a channel, that
 * every member reads, writes, compare-and-swaps and fetch-and-adds with
 * one-sided fabric operations on the host's copy.
 *
 * All nodes create the object with the same name and the same host. The
 * host's program takes no part in the others' operations. Fabric atomics
 * are atomic with respect to other fabric atomics on the same word, not to
 * CPU atomics (as on real NICs): the host's own operations therefore go
 * through the fabric too, over the manager's link to its own endpoint.
 * Only if a node has no such link (its set-up failed, which is logged)
 * does the host fall back to sequentially consistent CPU atomics on its
 * copy, atomic with respect to the tcp fabric's atomics but not to a
 * hardware NIC's. See loco_atomic_var(3).
 *
 * Thread safety: MT-safe. The synchronous calls of one object take turns
 * (an internal flag; a thread that finds it taken waits by the wait
 * policy, within its timeout); an asynchronous call's slot belongs to one
 * operation at a time.
 */
#ifndef LOCO_ATOMIC_VAR_H
#define LOCO_ATOMIC_VAR_H

#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_atomic_var loco_atomic_var_t;

/* Result slots of the asynchronous calls: 0 .. LOCO_ATOMIC_VAR_SLOTS - 1. */
#define LOCO_ATOMIC_VAR_SLOTS 16

/*
 * loco_atomic_var_create -- atomic variable @name in @ch, hosted on node
 * @host (>= 1; this node or a peer; every node passes the same). The
 * host's word starts at 0. Create it before loco_channel_join().
 * Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOSPC, -ENOMEM.
 */
int loco_atomic_var_create(loco_channel_t *ch, const char *name, uint32_t host,
                           loco_atomic_var_t **out);

/* loco_atomic_var_destroy -- wait for its operations, then free it. NULL-safe. */
void loco_atomic_var_destroy(loco_atomic_var_t *av);

/* loco_atomic_var_host -- the host's node id (0 for NULL). */
uint32_t loco_atomic_var_host(const loco_atomic_var_t *av);

/*
 * Synchronous operations: post, then wait up to @timeout_ns (< 0: as long
 * as the fabric takes, which is bounded) for the result.
 * loco_atomic_var_cas() succeeded when *@old == @expected. @old may be NULL.
 * Return 0; -ENOENT (the host is not paired, yet), -ECONNRESET (the host
 * left or failed after it was paired: the word is gone for good),
 * -ENOTCONN, -ETIMEDOUT (the operation may still take effect), -EINVAL,
 * or the operation's error (-ECANCELED, -EACCES...).
 */
int loco_atomic_var_read(loco_atomic_var_t *av, uint64_t *value, int64_t timeout_ns);
int loco_atomic_var_write(loco_atomic_var_t *av, uint64_t value, int64_t timeout_ns);
int loco_atomic_var_faa(loco_atomic_var_t *av, uint64_t add, uint64_t *old, int64_t timeout_ns);
int loco_atomic_var_cas(loco_atomic_var_t *av, uint64_t expected, uint64_t desired, uint64_t *old,
                        int64_t timeout_ns);

/*
 * Asynchronous operations: post, attached to @ack (NULL: fire-and-forget).
 * The value read or the old value lands in result slot @slot; a write
 * copies @value into @slot and writes from there. After loco_ack_wait(@ack)
 * returns 0, loco_atomic_var_slot() gives it. Return 0 when posted (on the
 * host without a fabric path to itself: done); -EINVAL (bad slot), -ENOENT,
 * -ECONNRESET, -ENOTCONN, -EAGAIN (retry later).
 */
int loco_atomic_var_read_async(loco_atomic_var_t *av, unsigned slot, loco_ack_key_t *ack);
int loco_atomic_var_write_async(loco_atomic_var_t *av, uint64_t value, unsigned slot,
                                loco_ack_key_t *ack);
int loco_atomic_var_faa_async(loco_atomic_var_t *av, uint64_t add, unsigned slot,
                              loco_ack_key_t *ack);
int loco_atomic_var_cas_async(loco_atomic_var_t *av, uint64_t expected, uint64_t desired,
                              unsigned slot, loco_ack_key_t *ack);

/* loco_atomic_var_slot -- result slot @slot (0 for a bad slot). */
uint64_t loco_atomic_var_slot(const loco_atomic_var_t *av, unsigned slot);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_ATOMIC_VAR_H */
