/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mem.c -- registered-memory arenas, one per NUMA node (libnuma).
 *
 * An arena takes 2 MiB chunks, 2 MiB aligned and advised for transparent
 * hugepages, bound to its node, and carves regions out of them first-fit
 * in 64-byte (cache line) units; freed blocks coalesce with their
 * neighbours. A region larger than half a chunk gets a mapping of its
 * own. Regions are registered by channel.c when they are created, never
 * on the data path.
 */
#include <errno.h>
#include <numa.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "memlock.h"

#define LC_CHUNK (2u << 20)
#define LC_ALIGN 64u
/* the longest region: its rounding and map_aligned()'s span (len + LC_CHUNK) cannot wrap */
#define LC_MEM_MAX (SIZE_MAX - 2 * (size_t)LC_CHUNK)

struct lc_block { /* a free block; kept in address order */
	uintptr_t addr;
	size_t len;
	struct lc_block *next;
};

struct lc_chunk {
	void *base;
	struct lc_chunk *next;
};

struct lc_arena {
	struct lc_chunk *chunks;
	struct lc_block *free;
};

/* map_aligned -- @len bytes, 2 MiB aligned, advised for hugepages, bound to @node. */
static void *map_aligned(size_t len, int node)
{
	size_t span = len + LC_CHUNK;
	uint8_t *raw, *p;

	raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)raw + LC_CHUNK - 1) & ~(uintptr_t)(LC_CHUNK - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + span > p + len)
		munmap(p + len, (size_t)(raw + span - (p + len)));
	madvise(p, len, MADV_HUGEPAGE);
	if (node >= 0 && numa_available() >= 0)
		numa_tonode_memory(p, len, node);
	return p;
}

static int current_node(void)
{
	int cpu;

	if (numa_available() < 0)
		return -1;
	cpu = sched_getcpu();
	return cpu < 0 ? 0 : numa_node_of_cpu(cpu);
}

static size_t round_len(size_t len)
{
	return (len + LC_ALIGN - 1) & ~(size_t)(LC_ALIGN - 1);
}

/* arena_take -- first fit in @a's free list. */
static void *arena_take(struct lc_arena *a, size_t len)
{
	for (struct lc_block **pp = &a->free; *pp != NULL; pp = &(*pp)->next) {
		struct lc_block *b = *pp;
		void *p = (void *)b->addr;

		if (b->len < len)
			continue;
		b->addr += len;
		b->len -= len;
		if (b->len == 0) {
			*pp = b->next;
			free(b);
		}
		return p;
	}
	return NULL;
}

/* arena_give -- return [@addr, @addr + @len) to @a, merging with neighbours. */
static int arena_give(struct lc_arena *a, uintptr_t addr, size_t len)
{
	struct lc_block **pp = &a->free, *prev = NULL, *b;

	while (*pp != NULL && (*pp)->addr < addr) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (prev != NULL && prev->addr + prev->len == addr) {
		prev->len += len;
		if (prev->next != NULL && addr + len == prev->next->addr) {
			b = prev->next;
			prev->len += b->len;
			prev->next = b->next;
			free(b);
		}
		return 0;
	}
	if (*pp != NULL && addr + len == (*pp)->addr) {
		(*pp)->addr = addr;
		(*pp)->len += len;
		return 0;
	}
	b = malloc(sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	*b = (struct lc_block){.addr = addr, .len = len, .next = *pp};
	*pp = b;
	return 0;
}

int lc_mem_alloc(struct lc_mem *mm, size_t len, void **out)
{
	int node = current_node();
	int idx = node < 0 ? 0 : node;
	struct lc_arena *a;
	void *p;

	if (len == 0)
		return -EINVAL;
	if (len > LC_MEM_MAX)
		return -ENOMEM;
	len = round_len(len);
	if (len > LC_CHUNK / 2) {
		p = map_aligned(len, node);
		if (p == NULL)
			return -ENOMEM;
		*out = p;
		return 0;
	}
	pthread_mutex_lock(&mm->lock);
	if (idx >= mm->narenas) {
		struct lc_arena *n = realloc(mm->arenas, (size_t)(idx + 1) * sizeof(*n));

		if (n == NULL) {
			pthread_mutex_unlock(&mm->lock);
			return -ENOMEM;
		}
		memset(n + mm->narenas, 0, (size_t)(idx + 1 - mm->narenas) * sizeof(*n));
		mm->arenas = n;
		mm->narenas = idx + 1;
	}
	a = &mm->arenas[idx];
	p = arena_take(a, len);
	if (p == NULL) {
		struct lc_chunk *c = malloc(sizeof(*c));

		if (c != NULL)
			c->base = map_aligned(LC_CHUNK, node);
		if (c == NULL || c->base == NULL || arena_give(a, (uintptr_t)c->base, LC_CHUNK)) {
			if (c != NULL && c->base != NULL)
				munmap(c->base, LC_CHUNK);
			free(c);
			pthread_mutex_unlock(&mm->lock);
			return -ENOMEM;
		}
		c->next = a->chunks;
		a->chunks = c;
		p = arena_take(a, len);
	}
	pthread_mutex_unlock(&mm->lock);
	*out = p;
	return 0;
}

void lc_mem_init(struct lc_mem *mm)
{
	mm->arenas = NULL;
	mm->narenas = 0;
	pthread_mutex_init(&mm->lock, NULL);
}

void lc_mem_free(struct lc_mem *mm, void *p, size_t len)
{
	if (p == NULL || len > LC_MEM_MAX)
		return;
	len = round_len(len);
	if (len > LC_CHUNK / 2) {
		munmap(p, len);
		return;
	}
	pthread_mutex_lock(&mm->lock);
	for (int i = 0; i < mm->narenas; i++) {
		for (struct lc_chunk *c = mm->arenas[i].chunks; c != NULL; c = c->next) {
			if ((uintptr_t)p >= (uintptr_t)c->base &&
			    (uintptr_t)p < (uintptr_t)c->base + LC_CHUNK) {
				if (arena_give(&mm->arenas[i], (uintptr_t)p, len))
					lc_log_warn(
					    "manager: out of memory freeing a region: leaked");
				pthread_mutex_unlock(&mm->lock);
				return;
			}
		}
	}
	pthread_mutex_unlock(&mm->lock);
	lc_log_warn("manager: freeing memory that no arena owns");
}

void lc_mem_fini(struct lc_mem *mm)
{
	for (int i = 0; i < mm->narenas; i++) {
		struct lc_arena *a = &mm->arenas[i];

		while (a->chunks != NULL) {
			struct lc_chunk *c = a->chunks;

			a->chunks = c->next;
			munmap(c->base, LC_CHUNK);
			free(c);
		}
		while (a->free != NULL) {
			struct lc_block *b = a->free;

			a->free = b->next;
			free(b);
		}
	}
	free(mm->arenas);
	mm->arenas = NULL;
	mm->narenas = 0;
	pthread_mutex_destroy(&mm->lock);
}

int lc_memlock_check(bool device)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || !lc_memlock_low(&rl, geteuid()))
		return 0;
	if (!device) {
		lc_log_debug(
		    "manager: RLIMIT_MEMLOCK is %llu KiB (no verbs device: nothing is pinned)",
		    (unsigned long long)rl.rlim_cur / 1024);
		return 0;
	}
	lc_log_warn(
	    "manager: RLIMIT_MEMLOCK is %llu KiB: registering memory with the verbs device "
	    "may fail; raise it (ulimit -l unlimited, memlock in /etc/security/limits.conf, "
	    "or LimitMEMLOCK=infinity for a systemd service)",
	    (unsigned long long)rl.rlim_cur / 1024);
	return -ENOMEM;
}
