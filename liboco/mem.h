/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mem.h -- registered-memory arenas (mem.c). The manager holds a struct lc_mem
 * (m->mem) and passes it to these functions; only mem.c touches its fields.
 */
#ifndef LOCO_LC_MEM_H
#define LOCO_LC_MEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct lc_arena;

struct lc_mem {
	struct lc_arena *arenas; /* one per NUMA node, allocated on first use */
	int narenas;
	pthread_mutex_t lock; /* guards the arenas */
};

void lc_mem_init(struct lc_mem *mm);
int lc_mem_alloc(struct lc_mem *mm, size_t len, void **out);
void lc_mem_free(struct lc_mem *mm, void *p, size_t len);
void lc_mem_fini(struct lc_mem *mm); /* frees the arenas and destroys the lock */
/*
 * lc_memlock_check -- warn, once per start, when RLIMIT_MEMLOCK is low (memlock.h)
 * and @device: a verbs device will pin what is registered. -ENOMEM then, else 0.
 */
int lc_memlock_check(bool device);

#endif /* LOCO_LC_MEM_H */
