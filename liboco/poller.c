/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * poller.c -- functions the progress thread calls on every turn of its
 * loop (loco_poller_add()), and the wake period they impose on it.
 *
 * The pollers are a list under ps->lock, in the order they were added.
 * The progress thread walks it holding the lock, and drops the lock only
 * around each call, with ps->running naming the poller being called:
 * so a poller's function may add and remove pollers, and a remover on
 * another thread waits on ps->cond until the call it races with has
 * returned. A poller that removes itself from inside its own call is only
 * marked; the walk frees it once the call has returned.
 *
 * Parking: a function that returns LOCO_POLLER_PARK has nothing to watch
 * until its object kicks it (an rpc endpoint with no batch waiting). The
 * walk raises @parked, then calls it once more: a kicker publishes its
 * work, then reads @parked (loco_poller_kick(), a fence between), so
 * either that call sees the work or the kicker sees the flag. A parked
 * poller is not called and does not count for the period, so an idle
 * node's progress thread sleeps instead of waking every period for it.
 *
 * Nothing here allocates after loco_poller_add(): the walk takes a mutex
 * twice per poller and calls it.
 */
#include <errno.h>
#include <stdlib.h>

#include "handle.h"
#include "log.h"
#include "poller.h"

enum poller_state {
	P_ACTIVE = 1,
	P_DONE,         /* returned LOCO_POLLER_DONE: kept, not called */
	P_SELF_REMOVED, /* removed from inside its own call: the walk frees it */
	P_REMOVING,     /* a remover on another thread waits for its call to return */
};

struct loco_poller {
	struct lc_pollers *ps;
	int (*fn)(void *arg);
	void *arg;
	int64_t period_ns;
	int state;  /* enum poller_state, under ps->lock */
	int parked; /* atomic: returned LOCO_POLLER_PARK, not kicked since */
	struct loco_poller *next;
};

struct lc_pollers {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* a call returned: removers waiting for it look again */
	void (*wake)(void *arg); /* wakes the progress thread */
	void *wake_arg;
	const pthread_t *progress;
	struct loco_poller *head, *tail;
	struct loco_poller *running; /* the poller being called, or NULL */
	unsigned waiting;            /* removers blocked on cond */
	int64_t period_ns;           /* the smallest period of the active pollers; 0: none */
};

int lc_pollers_init(struct lc_pollers **out, void (*wake)(void *), void *arg,
                    const pthread_t *progress)
{
	struct lc_pollers *ps = calloc(1, sizeof(*ps));

	if (ps == NULL)
		return -ENOMEM;
	pthread_mutex_init(&ps->lock, NULL);
	pthread_cond_init(&ps->cond, NULL);
	ps->wake = wake;
	ps->wake_arg = arg;
	ps->progress = progress;
	*out = ps;
	return 0;
}

void lc_pollers_fini(struct lc_pollers *ps)
{
	unsigned left = 0;

	if (ps == NULL)
		return;
	while (ps->head != NULL) {
		struct loco_poller *p = ps->head;

		ps->head = p->next;
		lc_handle_bury(p);
		left++;
	}
	if (left)
		lc_log_warn("manager: %u poller(s) not removed before loco_fini; freed", left);
	pthread_cond_destroy(&ps->cond);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}

/* period_update -- the smallest period of the active pollers (ps->lock held). */
static void period_update(struct lc_pollers *ps)
{
	int64_t min = 0;

	for (struct loco_poller *p = ps->head; p != NULL; p = p->next)
		if (p->state == P_ACTIVE && !__atomic_load_n(&p->parked, __ATOMIC_RELAXED) &&
		    (min == 0 || p->period_ns < min))
			min = p->period_ns;
	ps->period_ns = min;
}

/* unlink -- take @p out of the list (ps->lock held); the caller frees it. */
static void unlink_poller(struct lc_pollers *ps, struct loco_poller *p)
{
	struct loco_poller **pp = &ps->head, *prev = NULL;

	while (*pp != NULL && *pp != p) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp == NULL)
		return;
	*pp = p->next;
	if (ps->tail == p)
		ps->tail = prev;
	period_update(ps);
}

int lc_pollers_add(struct lc_pollers *ps, loco_manager_t *m, int (*fn)(void *arg), void *arg,
                   int64_t period_ns, loco_poller_t **out)
{
	struct loco_poller *p;

	if (fn == NULL || out == NULL || period_ns < 0)
		return -EINVAL;
	if (period_ns == 0)
		period_ns = LOCO_POLLER_PERIOD_NS;
	else if (period_ns < LOCO_POLLER_PERIOD_MIN_NS)
		period_ns = LOCO_POLLER_PERIOD_MIN_NS;
	p = lc_handle_alloc(m, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->ps = ps;
	p->fn = fn;
	p->arg = arg;
	p->period_ns = period_ns;
	p->state = P_ACTIVE;
	pthread_mutex_lock(&ps->lock);
	if (ps->tail != NULL)
		ps->tail->next = p;
	else
		ps->head = p;
	ps->tail = p;
	if (ps->period_ns == 0 || period_ns < ps->period_ns)
		ps->period_ns = period_ns;
	*out = p; /* before the unlock: the first call may come at once */
	pthread_mutex_unlock(&ps->lock);
	ps->wake(ps->wake_arg); /* a blocked progress thread learns the new period */
	return 0;
}

int loco_poller_kick(loco_poller_t *p)
{
	struct lc_pollers *ps;
	int ret = lc_handle_ok(p);

	if (ret)
		return ret;
	/* the caller's stores, then the flag: pairs with the fence in call_parking() */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&p->parked, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&p->parked, 0, __ATOMIC_ACQ_REL))
		return 0;
	ps = p->ps;
	pthread_mutex_lock(&ps->lock);
	period_update(ps);
	pthread_mutex_unlock(&ps->lock);
	ps->wake(ps->wake_arg); /* a blocked progress thread learns the period, and calls it */
	return 0;
}

/*
 * call_parking -- (ps->lock dropped) @p's function returned LOCO_POLLER_PARK:
 * raise the flag, then call it once more (see the top); its answer.
 */
static int call_parking(struct loco_poller *p)
{
	int r;

	__atomic_store_n(&p->parked, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the flag, then what the function reads */
	r = p->fn(p->arg);
	if (r != LOCO_POLLER_PARK)
		__atomic_store_n(&p->parked, 0, __ATOMIC_RELAXED);
	return r;
}

int loco_poller_remove(loco_poller_t *p)
{
	struct lc_pollers *ps;
	int ret = lc_handle_ok(p);

	if (ret)
		return ret;
	ps = p->ps;
	lc_handle_kill(p); /* a second remove is -EBADF, even before the walk buries it */
	pthread_mutex_lock(&ps->lock);
	if (ps->running == p && pthread_equal(pthread_self(), *ps->progress)) {
		/* from inside its own call: the walk frees it when the call returns */
		p->state = P_SELF_REMOVED;
		period_update(ps);
		pthread_mutex_unlock(&ps->lock);
		return 0;
	}
	if (ps->running == p) {
		p->state = P_REMOVING; /* the walk neither calls it again nor frees it */
		period_update(ps);
		ps->waiting++;
		while (ps->running == p)
			pthread_cond_wait(&ps->cond, &ps->lock);
		ps->waiting--;
	}
	unlink_poller(ps, p);
	pthread_mutex_unlock(&ps->lock);
	lc_handle_bury(p);
	return 0;
}

/*
 * lc_pollers_run -- on the progress thread: call every active poller once,
 * in the order they were added. Returns 1 when one of them said it was
 * busy, else 0; *@period_ns gets the period the progress thread must not
 * sleep past (0: no active poller).
 */
int lc_pollers_run(struct lc_pollers *ps, int64_t *period_ns)
{
	struct loco_poller *p, *next;
	int busy = 0;

	pthread_mutex_lock(&ps->lock);
	for (p = ps->head; p != NULL; p = next) {
		int r;

		if (p->state != P_ACTIVE || __atomic_load_n(&p->parked, __ATOMIC_ACQUIRE)) {
			next = p->next;
			continue;
		}
		ps->running = p;
		pthread_mutex_unlock(&ps->lock);
		r = p->fn(p->arg);
		if (r == LOCO_POLLER_PARK)
			r = call_parking(p);
		pthread_mutex_lock(&ps->lock);
		ps->running = NULL;
		/* @p is still linked: a remover waited, or left it to us */
		next = p->next;
		if (p->state == P_SELF_REMOVED) {
			unlink_poller(ps, p);
			lc_handle_bury(p);
		} else if (p->state == P_ACTIVE && r == LOCO_POLLER_DONE) {
			p->state = P_DONE;
			period_update(ps);
		} else if (r == LOCO_POLLER_BUSY) {
			busy = 1;
		}
		if (r == LOCO_POLLER_PARK)
			period_update(ps); /* without it (a kick meanwhile counted it again) */
		if (ps->waiting)
			pthread_cond_broadcast(&ps->cond);
	}
	*period_ns = ps->period_ns;
	pthread_mutex_unlock(&ps->lock);
	return busy;
}
