/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/waiter.h -- waiters: how an object's wait loop waits, by the
 * manager's wait policy. See loco_object(3). <loco/channel.h> includes
 * this header.
 */
#ifndef LOCO_WAITER_H
#define LOCO_WAITER_H

#include <stdint.h>

#include <loco/manager.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Waiters: how an object's wait loop waits, by the manager's policy
 * (enum loco_wait_policy, LOCO_WAIT). A loop that waits for a condition:
 *
 *	loco_waiter_t w;
 *	loco_waiter_init(&w, m);        (or loco_waiter_reset() to reuse it)
 *	while (!condition())
 *		loco_waiter_pause(&w);  (check deadlines between pauses)
 *	loco_waiter_done(&w);           (optional: the policy learns)
 *
 * Each pause is one step of the policy: a spin, a yield, a sleep (at most
 * 1 ms) or a block on the manager's event count, which the completion
 * path and the progress thread signal; loco_waiter_wake() signals it too
 * (e.g. from a poller that saw the memory it watches change). Init and
 * reset take a snapshot of that count: call them before the first check
 * of the condition, and an event after it ends the next block at once.
 *
 * Thread safety: a waiter belongs to one thread; loco_waiter_wake() is
 * MT-safe and lock-free. See loco_object(3). Appeared in loco 0.4.
 */
/*
 * The waiter is the caller's (on its stack: a wait allocates nothing), so
 * its size and the offsets of the fields a caller may read are ABI, fixed
 * since loco 0.4: 40 bytes, 8-aligned. Everything else is reserved for
 * liboco (its private layout, asserted at build time to fit). Read
 * @policy and @pauses; write nothing but through the functions below.
 */
typedef struct loco_waiter {
	void *reserved0_;       /* private */
	int policy;             /* read-only: enum loco_wait_policy of the manager (never 0) */
	uint32_t reserved1_;    /* private */
	uint32_t pauses;        /* read-only: pauses since init or reset */
	uint32_t reserved2_;    /* private */
	uint64_t reserved3_[2]; /* private */
} loco_waiter_t;

#define LOCO_WAITER_SIZE 40 /* sizeof(loco_waiter_t), the same since loco 0.4 */

/* loco_waiter_init -- a waiter for @m's policy (@m NULL: sleep), reset. */
void loco_waiter_init(loco_waiter_t *w, loco_manager_t *m);

/* loco_waiter_reset -- start a new wait: spin first again, snapshot the event count. */
void loco_waiter_reset(loco_waiter_t *w);

/* loco_waiter_pause -- one step of the policy: spin, yield, sleep or block (<= 1 ms). */
void loco_waiter_pause(loco_waiter_t *w);

/*
 * loco_waiter_done -- the condition held: under the adaptive policy the
 * manager learns how long the wait took, and sizes its spin window by
 * the waits of its threads (waits never marked done do not count).
 * Nothing for other policies or NULL. Appeared in loco 0.11.
 */
void loco_waiter_done(loco_waiter_t *w);

/* loco_waiter_policy -- @w's policy (enum loco_wait_policy); -EINVAL for NULL. */
int loco_waiter_policy(const loco_waiter_t *w);

/* loco_waiter_wake -- wake @m's waiters blocked in loco_waiter_pause() (block policy). */
void loco_waiter_wake(loco_manager_t *m);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_WAITER_H */
