/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/poller.h -- pollers: functions the manager's progress thread
 * calls on every turn, for objects that watch memory remote WRITEs
 * change. See loco_object(3). <loco/channel.h> includes this header.
 */
#ifndef LOCO_POLLER_H
#define LOCO_POLLER_H

#include <stdint.h>

#include <loco/manager.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Pollers: a function the manager's progress thread calls on every turn
 * of its loop, for objects that watch memory which remote WRITEs change
 * (such a WRITE gives the target no event). While a poller is active the
 * progress thread, which otherwise blocks when idle, wakes at least every
 * @period_ns (the smallest period among the active pollers), so @fn sees
 * a change within about one period, sooner when the node is busy. It
 * sleeps between wakes: it never spins for a poller.
 *
 * @fn returns one of enum loco_poller_ret. It runs on the progress
 * thread, never on two threads at once, under the rules of the object
 * callbacks (loco/object.h: short, no waiting) but without the
 * manager's lock. It may add and remove pollers, itself included.
 *
 * Thread safety: MT-safe. See loco_object(3).
 */
typedef struct loco_poller loco_poller_t;

enum loco_poller_ret {
	LOCO_POLLER_IDLE = 0, /* nothing done: the progress thread may sleep (one period at most) */
	LOCO_POLLER_BUSY = 1, /* work done: the progress thread turns again without sleeping */
	LOCO_POLLER_DONE =
	    2, /* finished: never called again; loco_poller_remove() still frees it */
	LOCO_POLLER_PARK = 3, /* nothing to watch until loco_poller_kick(): no period meanwhile */
};

#define LOCO_POLLER_PERIOD_NS     1000000ll /* period 0 means this: 1 ms */
#define LOCO_POLLER_PERIOD_MIN_NS 100000ll  /* shorter periods are raised to 100 us */

/*
 * loco_poller_add -- have the progress thread of @m call @fn(@arg) on every
 * turn, and turn at least every @period_ns (0: LOCO_POLLER_PERIOD_NS) while
 * @fn is active. Everything is allocated here: calling it allocates nothing.
 * The first call may come before this returns. Returns 0 and sets *@out;
 * -EINVAL (NULL @m, @fn or @out, @period_ns < 0), -ENOMEM.
 */
int loco_poller_add(loco_manager_t *m, int (*fn)(void *arg), void *arg, int64_t period_ns,
                    loco_poller_t **out);

/*
 * loco_poller_kick -- @p's function has something to watch again: a parked
 * poller (its function returned LOCO_POLLER_PARK) becomes active, its
 * period counts again and the progress thread is woken to learn it. The
 * caller publishes what the function will find first, then kicks: the
 * progress thread marks the poller parked, then calls the function once
 * more before it stays parked, so one of the two sees the other. A poller
 * that is not parked costs one fence and one load. Returns 0; -EINVAL
 * (NULL); -EBADF (removed already).
 */
int loco_poller_kick(loco_poller_t *p);

/*
 * loco_poller_remove -- stop calling @p's function and free @p. From any
 * thread but @p's own function, it waits for a call in progress to
 * return: afterwards the function is neither running nor called again.
 * From inside a poller's function (its own included) it does not wait: a
 * function that removes itself finishes its current call and is not
 * called again. Returns 0; -EINVAL (NULL); -EBADF (removed already).
 */
int loco_poller_remove(loco_poller_t *p);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_POLLER_H */
