/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view-lock.h -- a lock loop for the partition scenarios (view-lock.c).
 */
#ifndef LOCO_TEST_VIEW_LOCK_H
#define LOCO_TEST_VIEW_LOCK_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <loco/lock.h>

struct vlock {
	loco_lock_t *lk;
	pthread_t th;
	int stop; /* atomic */
	FILE *f;
	uint32_t id;
	unsigned grants, epart;
};

/* vlock_create -- lock "l" of @ch, hosted on node 1 (before loco_channel_join()). */
int vlock_create(struct vlock *v, loco_channel_t *ch);

/* vlock_start -- run the loop on a thread, recording grants in @dir/lock.@id. */
int vlock_start(struct vlock *v, const char *dir, uint32_t id);

/* vlock_stop -- end the loop (the lock stays; destroy it with the channel's objects). */
void vlock_stop(struct vlock *v);

#endif /* LOCO_TEST_VIEW_LOCK_H */
