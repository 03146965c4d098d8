/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/lock.h -- a distributed mutual-exclusion lock on remote atomics.
 *
 * The lock is one 64-bit word on a host node (chosen at create; every node
 * passes the same): 0 when free, the holder's node id and incarnation when
 * held. Nodes take it with a fabric compare-and-swap and retry with
 * exponential back-off bounded at 1 ms between attempts. It is not
 * FIFO-fair: a waiter may be overtaken by later ones. A holder that fails or leaves while holding the lock loses it:
 * the host frees it when its channel reports the holder gone, and the next
 * node to take it learns it from loco_lock_recovered(). A host that fails
 * takes the lock with it: every later call returns -ECONNRESET.
 * See loco_lock(3).
 *
 * Thread safety: MT-safe. The lock is held by the node, not by a thread:
 * threads of one node take turns, and any of them may release it.
 */
#ifndef LOCO_LOCK_H
#define LOCO_LOCK_H

#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_lock loco_lock_t;

/*
 * loco_lock_create -- lock @name in @ch, hosted on node @host (>= 1; this
 * node or a peer; every node passes the same). Create it before
 * loco_channel_join(). Returns 0 and sets *@out; -EINVAL, -EEXIST,
 * -ENOSPC, -ENOMEM.
 */
int loco_lock_create(loco_channel_t *ch, const char *name, uint32_t host, loco_lock_t **out);

/* loco_lock_destroy -- release the lock if this node holds it, then free it. NULL-safe. */
void loco_lock_destroy(loco_lock_t *lk);

/*
 * loco_lock_acquire -- take the lock, trying until @timeout_ns passes
 * (< 0: forever). Returns 0 (held); -ETIMEDOUT; -ENOENT (the host is not
 * paired, yet); -ECONNRESET (the host left or failed); -ENOTCONN, or the
 * fabric's error of an attempt.
 */
int loco_lock_acquire(loco_lock_t *lk, int64_t timeout_ns);

/* loco_lock_try_acquire -- one attempt: 0 (held), -EBUSY, or acquire's errors. */
int loco_lock_try_acquire(loco_lock_t *lk);

/*
 * loco_lock_release -- release the lock this node holds. Returns 0;
 * -EPERM (this node does not hold it); -ENOLCK (the host had taken it back:
 * it declared this node failed); -ECONNRESET (the host is gone), or the
 * fabric's error. The lock is not held by this node afterwards in any case.
 */
int loco_lock_release(loco_lock_t *lk);

/*
 * loco_lock_recovered -- 1 when this node holds the lock and took it over
 * from a holder that failed or left while holding it (what that holder
 * protected may be half-updated), else 0.
 */
int loco_lock_recovered(const loco_lock_t *lk);

/*
 * loco_lock_holder -- read the lock word: *@node = the holder's id, or 0
 * when free. Returns 0; -ENOENT, -ECONNRESET, -ENOTCONN, -ETIMEDOUT.
 */
int loco_lock_holder(loco_lock_t *lk, uint32_t *node, int64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_LOCK_H */
