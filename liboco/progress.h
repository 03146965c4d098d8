/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * progress.h -- the progress thread (progress.c). The manager holds a
 * struct lc_prog (m->prog); only progress.c touches its fields. The thread
 * itself (m->progress), the epoll set and the wake-up eventfd stay in the
 * manager: the control plane (member.c, conn.c) adds its fds to the set.
 */
#ifndef LOCO_LC_PROGRESS_H
#define LOCO_LC_PROGRESS_H

#include <pthread.h>
#include <stdint.h>

#include <loco.h>

struct lc_prog {
	pthread_mutex_t poll_lock; /* fab_poll() is serialized: who holds it reaps */
	int stop;                  /* atomic: the thread is to end */
	int waiters;               /* atomic: threads in loco_ack_wait(), reaping themselves */
	uint64_t last_wait_ns;     /* atomic: when the last of them left (lc_coarse_ns()) */
	int no_pwait2;             /* progress thread: the kernel has no epoll_pwait2() */
	int fab_watched;           /* progress thread: the fab's wait fd is in epfd (armed) */
};

void lc_progress_init(loco_manager_t *m); /* before the fabric opens */
void lc_progress_fini(loco_manager_t *m); /* after the thread stopped (or never ran) */
int lc_progress_start(loco_manager_t *m);
void lc_progress_stop(loco_manager_t *m);
void lc_progress_reap(void *arg); /* ack waiters reap through this (no membership work) */
/* lc_progress_fab_watched -- at start-up: the fab's wait fd was put in m->epfd */
void lc_progress_fab_watched(loco_manager_t *m);
/*
 * lc_progress_waiter_enter, _leave -- a thread in loco_ack_wait() reaps
 * completions itself: while it does (and 5 ms after), the progress thread
 * does not arm the completion queue.
 */
void lc_progress_waiter_enter(loco_manager_t *m);
void lc_progress_waiter_leave(loco_manager_t *m);

#endif /* LOCO_LC_PROGRESS_H */
