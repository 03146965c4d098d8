/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * poller.h -- the progress thread's pollers (poller.c). The manager holds
 * a struct lc_pollers (m->pollers), opaque to every other file.
 */
#ifndef LOCO_LC_POLLER_H
#define LOCO_LC_POLLER_H

#include <pthread.h>
#include <stdint.h>

#include <loco.h>

struct lc_pollers;

int lc_pollers_init(struct lc_pollers **out, void (*wake)(void *), void *arg,
                    const pthread_t *progress);
void lc_pollers_fini(struct lc_pollers *ps);                   /* after the progress thread */
int lc_pollers_run(struct lc_pollers *ps, int64_t *period_ns); /* progress thread: busy? */
/*
 * lc_pollers_add -- loco_poller_add() on @ps, once @m (the new poller's
 * handle parent) was checked.
 */
int lc_pollers_add(struct lc_pollers *ps, loco_manager_t *m, int (*fn)(void *arg), void *arg,
                   int64_t period_ns, loco_poller_t **out);

#endif /* LOCO_LC_POLLER_H */
