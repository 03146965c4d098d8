/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/ack.h -- ack keys: wait for a set of posted operations.
 *
 * Every operation LOCO posts gets a 64-bit WRID. An ack key is a set of
 * outstanding WRIDs: an object attaches the operations it posts, and
 * loco_ack_wait() returns once all of them completed, reporting the first
 * error. This is how objects give memory consistency: e.g. an owned_var
 * attaches the pushes of a new value and waits for their acks.
 *
 * Thread safety: MT-safe. Any thread may attach operations to a key while
 * the completion path removes them; loco_ack_wait() is serialized per key
 * (one waiter at a time). See loco_ack(3).
 */
#ifndef LOCO_ACK_H
#define LOCO_ACK_H

#include <stddef.h>
#include <stdint.h>

#include <loco/manager.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_manager loco_manager_t;
typedef struct loco_ack_key loco_ack_key_t;

/* Operations one key can hold outstanding; attaching one more fails with -EAGAIN. */
#define LOCO_ACK_KEY_SLOTS 1024u

/*
 * loco_ack_key_create -- a new, empty ack key of @manager.
 * Returns 0 and sets *@out; -EINVAL, -ENOMEM, -ENOSPC (too many keys).
 */
int loco_ack_key_create(loco_manager_t *manager, loco_ack_key_t **out);

/*
 * loco_ack_key_destroy -- wait for the key's outstanding operations (each
 * completes within the fabric's dead-peer bound), then free it. NULL-safe;
 * a second destroy logs the misuse and does nothing.
 */
void loco_ack_key_destroy(loco_ack_key_t *key);

/*
 * loco_ack_wait -- wait until every operation attached to @key completed,
 * spinning, then yielding. @timeout_ns < 0 waits forever, 0 only tests.
 * Returns 0; the first error of an attached operation since the last call
 * (which it clears); -ETIMEDOUT when operations are still outstanding at
 * the deadline, and only then: an operation whose peer stopped answering
 * fails with -EHOSTDOWN.
 */
int loco_ack_wait(loco_ack_key_t *key, int64_t timeout_ns);

/* loco_ack_outstanding -- how many attached operations have not completed. */
size_t loco_ack_outstanding(const loco_ack_key_t *key);

/*
 * Flags of a key (loco_ack_key_cfg_t).
 * LOCO_ACK_IGNORE_LEFT: loco_ack_wait() does not report the failure of an
 * operation to a peer that is not in the installed membership view when
 * the wait finds the key empty (it left, or the cluster removed it). A
 * failure on a link to a peer still in the view is reported. Appeared in
 * loco 0.4.
 */
#define LOCO_ACK_IGNORE_LEFT 1u

/*
 * LOCO_ACK_LAZY: nobody waits on the key's operations soon (a pushed row
 * whose answer comes back as the peer's own push). On the tcp fabric the
 * target of such an operation may hold its ACK back until it sends on that
 * link, or at most about 200 us (loco-fabric-tcp(7)), so that the ACK rides
 * with the answer instead of costing a frame of its own; a wait on the key
 * can take that much longer. An operation attached to several keys is lazy
 * when one of them is. Other fabrics ignore the flag. Appeared in loco 0.9.
 */
#define LOCO_ACK_LAZY 2u

/* Failed operations one key remembers per wait; more are counted as dropped. */
#define LOCO_ACK_FAILURES_MAX 64u

/* One failed operation (loco_ack_failures()). */
struct loco_ack_failure {
	uint32_t node; /* the peer the operation went to (0: unknown) */
	int error;     /* its negative errno, e.g. -ECONNRESET */
	int left;      /* 1: the peer was not in the view when the wait looked */
};

/*
 * Key configuration (since loco 0.11): fill it with
 * loco_ack_key_cfg_default(), change what differs, pass it to
 * loco_ack_key_create_cfg().
 */
typedef struct loco_ack_key_cfg {
	unsigned flags; /* LOCO_ACK_IGNORE_LEFT, LOCO_ACK_LAZY, both or 0 (the default) */
} loco_ack_key_cfg_t;

/* loco_ack_key_cfg_default -- the defaults into *@cfg (no flags). NULL-safe. */
void loco_ack_key_cfg_default(loco_ack_key_cfg_t *cfg);

/*
 * loco_ack_key_create_cfg -- loco_ack_key_create() configured by @cfg
 * (NULL: the defaults). Returns 0 and sets *@out; -EINVAL (NULL @out,
 * unknown flag), -ENOMEM, -ENOSPC. Since loco 0.11.
 */
int loco_ack_key_create_cfg(loco_manager_t *manager, const loco_ack_key_cfg_t *cfg,
                            loco_ack_key_t **out);

/*
 * loco_ack_failures -- the operations that failed among those the last
 * loco_ack_wait() that found @key empty covered (its return value other
 * than -ETIMEDOUT): up to @max written to @out in completion order.
 * *@dropped (may be NULL) gets how many failures did not fit the key's
 * LOCO_ACK_FAILURES_MAX. Returns the number of failures the key holds
 * (which may exceed @max); -EINVAL. Call it from the thread that waits
 * on the key, not during a wait. Appeared in loco 0.4.
 */
int loco_ack_failures(const loco_ack_key_t *key, struct loco_ack_failure *out, size_t max,
                      size_t *dropped);

/*
 * loco_ack_key_create_flags -- the name before loco 0.11 (0.4-0.10):
 * loco_ack_key_create_cfg() with a configuration of @flags. Kept so that
 * programs built against it link and run and their sources still build.
 */
int loco_ack_key_create_flags(loco_manager_t *manager, unsigned flags, loco_ack_key_t **out)
    LOCO_DEPRECATED("loco_ack_key_create_cfg()");

#ifdef __cplusplus
}
#endif

#endif /* LOCO_ACK_H */
