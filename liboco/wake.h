/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wake.h -- the progress thread's doorbell, for every part of the core
 * that hands it work (a leaf: nothing here calls into another file).
 */
#ifndef LOCO_LC_WAKE_H
#define LOCO_LC_WAKE_H

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "manager.h"

/* lc_wake -- wake the progress thread (any thread; never blocks). */
static inline void lc_wake(loco_manager_t *m)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is full, so the thread is woken anyway */
	if (write(m->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

/* lc_on_progress -- whether the calling thread is the progress thread. */
static inline int lc_on_progress(const loco_manager_t *m)
{
	return pthread_equal(pthread_self(), m->progress);
}

#endif /* LOCO_LC_WAKE_H */
