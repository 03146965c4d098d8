/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mem.h -- registered-memory arenas (mem.c). The manager holds a struct lc_mem
 * (m->mem); only mem.c touches its fields.
 */
#ifndef LOCO_LC_MEM_H
#define LOCO_LC_MEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <loco.h>

struct lc_arena;

struct lc_mem {
	struct lc_arena *arenas; /* one per NUMA node, allocated on first use */
	int narenas;
	pthread_mutex_t lock; /* guards the arenas */
};

void lc_mem_init(loco_manager_t *m);
int lc_mem_alloc(loco_manager_t *m, size_t len, void **out);
void lc_mem_free(loco_manager_t *m, void *p, size_t len);
void lc_mem_fini(loco_manager_t *m); /* frees the arenas and destroys the lock */
/*
 * lc_memlock_check -- warn, once per start, when RLIMIT_MEMLOCK is low (memlock.h)
 * and @device: a verbs device will pin what is registered. -ENOMEM then, else 0.
 */
int lc_memlock_check(bool device);

#endif /* LOCO_LC_MEM_H */
