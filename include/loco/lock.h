/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/lock.h -- a distributed mutual-exclusion lock on remote atomics,
 * with leases and fencing tokens.
 *
 * The lock is a 64-bit word on a host node (chosen at create; every node
 * passes the same) holding a fencing token, a renewal counter and a
 * free/held state. Nodes take it with a fabric compare-and-swap and retry
 * with exponential back-off bounded at 1 ms between attempts. It is not
 * FIFO (a waiter may be overtaken by later ones), but no node that keeps
 * asking is starved: a waiter that has waited 1 ms marks the word, and
 * the holder's release then passes the lock on to the others first
 * (loco_lock(3)). Every grant gets a
 * token greater than every earlier grant's (loco_lock_token()): a resource
 * that remembers the greatest token it saw can reject a stale holder.
 *
 * A hold is a lease of lease_ns (default 2 s) from the moment the holder
 * posted the CAS that granted or last renewed it (loco_lock_renew()); a
 * waiter takes the lock over from a holder that neither released nor
 * renewed after seeing its word unchanged for takeover_ns (default 3 s),
 * which exceeds the lease by more than the clock-drift margin: the
 * holder's lease has ended (loco_lock_held() = 0) before anyone else can
 * be granted the lock, and no two leases overlap. The watch of the word
 * is the handle's (this node's), not one call's: the looks of successive
 * acquires add up, however short each call, as long as no two looks are
 * more than takeover_ns / 4 (at most 256 lease_ns) apart. The node that
 * took over learns it from loco_lock_recovered().
 *
 * A host that leaves or fails (since loco 0.4): the lock moves to the
 * lowest id among the channel's present members holding it, at a new
 * epoch (the view that removed the host); tokens are epoch << 44 | the
 * host word's token, so they stay monotonic across hosts. The new host's
 * word starts free and its first grant reports loco_lock_recovered(); it
 * is used only one takeover time after the move, when every lease of the
 * old host has ended. A partitioned node never moves the lock; it (and a
 * lock created after a move) learns the current host from its peers on
 * its next acquire. See loco_lock(3).
 *
 * Thread safety: MT-safe. The lock is held by the node, not by a thread:
 * threads of one node take turns, and any of them may renew or release it.
 * The thread whose call took the hold gets -EDEADLK from acquire (it would
 * wait for its own release).
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
 * Lease configuration (every node of the lock must pass the same): fill
 * it with loco_lock_cfg_default() (a 2 s lease and a 3 s takeover), change
 * what differs, pass it to loco_lock_create_cfg(). Both 0 also means the
 * defaults. Otherwise 0 < lease_ns <= 1 hour and takeover_ns >= lease_ns *
 * (1 + 1/500) + 10 ms. Named loco_lock_config_t before loco 0.11 (the
 * same type).
 */
typedef struct loco_lock_config {
	int64_t lease_ns;    /* how long a grant or renewal holds */
	int64_t takeover_ns; /* how long a waiter sees a word unchanged before taking it over */
} loco_lock_cfg_t;

typedef loco_lock_cfg_t loco_lock_config_t; /* its name before loco 0.11 */

/* loco_lock_cfg_default -- the defaults into *@cfg: a 2 s lease, a 3 s takeover. NULL-safe. */
void loco_lock_cfg_default(loco_lock_cfg_t *cfg);

/*
 * loco_lock_create -- lock @name in @ch, hosted on node @host (>= 1; this
 * node or a peer; every node passes the same), with the default lease.
 * Create it before loco_channel_join(). Returns 0 and sets *@out;
 * -EINVAL, -EEXIST, -ENOSPC, -ENOMEM.
 */
int loco_lock_create(loco_channel_t *ch, const char *name, uint32_t host, loco_lock_t **out);

/*
 * loco_lock_create_cfg -- loco_lock_create() with the lease and takeover
 * times of @cfg (NULL: the defaults). -EINVAL also for times out of the
 * bounds above. Since loco 0.11.
 */
int loco_lock_create_cfg(loco_channel_t *ch, const char *name, uint32_t host,
                         const loco_lock_cfg_t *cfg, loco_lock_t **out);

/*
 * loco_lock_create_config -- the name before loco 0.11 (0.3-0.10) of
 * loco_lock_create_cfg(): the same function, kept so that programs built
 * against it link and run and their sources still build.
 */
int loco_lock_create_config(loco_channel_t *ch, const char *name, uint32_t host,
                            const loco_lock_config_t *cfg, loco_lock_t **out)
    LOCO_DEPRECATED("loco_lock_create_cfg()");

/* loco_lock_destroy -- release the lock if this node holds it, then free it. NULL-safe. */
void loco_lock_destroy(loco_lock_t *lk);

/*
 * loco_lock_acquire -- take the lock, trying until @timeout_ns passes
 * (< 0: forever); a lease left unrenewed for the takeover time is taken
 * over, also by a caller that waits in several shorter calls. Returns 0
 * (held, with a fresh lease); -ETIMEDOUT; -EDEADLK (this thread's call
 * took the hold this node has not released: at once, the hold untouched);
 * -ENOENT (the host is not paired, yet); -ECONNRESET (the lock could not
 * move); -LOCO_EPARTITION (this node cannot reach a majority); -ENOTCONN,
 * or the fabric's error of an attempt.
 */
int loco_lock_acquire(loco_lock_t *lk, int64_t timeout_ns);

/*
 * loco_lock_try_acquire -- one attempt, never a takeover: 0 (held), -EBUSY
 * (held by another node, or by this one: also when this thread holds it),
 * or acquire's errors but -EDEADLK.
 */
int loco_lock_try_acquire(loco_lock_t *lk);

/*
 * loco_lock_renew -- extend this node's lease to lease_ns from now (a call
 * within lease_ns / 64 of the last renewal does nothing). Returns 0;
 * -EPERM (not held); -ETIMEDOUT (the lease had expired: release the lock);
 * -ESTALE (another node took the lock over); -ECONNRESET (the lock moved
 * away from the host of this hold, or the CAS on it failed: the hold ends
 * with its lease); -LOCO_EPARTITION. The node still holds the lock until
 * it releases it.
 */
int loco_lock_renew(loco_lock_t *lk);

/*
 * loco_lock_release -- release the lock this node holds. Returns 0;
 * -EPERM (this node does not hold it); -ETIMEDOUT (the lease had expired
 * but nobody took the lock over: it is free now); -ESTALE (the lease had
 * expired and another node took the lock over: its grant is left alone);
 * -ECONNRESET (the host of this hold is gone, or the CAS on it failed,
 * whatever the fabric said: the hold ends with its lease); -LOCO_EPARTITION.
 * The lock is not held by this node afterwards in any case.
 */
int loco_lock_release(loco_lock_t *lk);

/*
 * loco_lock_held -- 1 when this node holds the lock and its lease has not
 * expired (on this node's clock), else 0. Check it before acting under
 * the lock.
 */
int loco_lock_held(const loco_lock_t *lk);

/*
 * loco_lock_lease_left -- the nanoseconds left on this node's lease; 0
 * when it expired or this node does not hold the lock.
 */
int64_t loco_lock_lease_left(const loco_lock_t *lk);

/*
 * loco_lock_token -- the fencing token of this node's hold: greater than
 * that of every earlier grant of the lock, on this host or an earlier
 * one (the host's epoch << 44 | the host word's token). Returns 0 and sets *@token;
 * -EINVAL; -EPERM (this node does not hold the lock).
 */
int loco_lock_token(const loco_lock_t *lk, uint64_t *token);

/*
 * loco_lock_recovered -- 1 when this node holds the lock and took it over
 * from a holder whose lease expired (it failed, hung, was cut off, or
 * neither renewed nor released in time: what it protected may be
 * half-updated), or holds the first grant of a host the lock moved to
 * (since loco 0.4), else 0.
 */
int loco_lock_recovered(const loco_lock_t *lk);

/*
 * loco_lock_holder -- read the lock: *@node = the holder's id, or 0 when
 * free. Returns 0; -EAGAIN (held, but the holder had not published its id
 * within @timeout_ns, or the takeover time: it died right after its
 * grant); -ENOENT,
 * -ECONNRESET, -ENOTCONN, -ETIMEDOUT.
 */
int loco_lock_holder(loco_lock_t *lk, uint32_t *node, int64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_LOCK_H */
