/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * handle.c -- handles that say when they are gone (loco(7), Misuse).
 *
 * A handle's memory starts with a hidden header whose magic word says
 * whether it is alive. Destroying a handle does not free that memory: it
 * marks it dead and parks it in the graveyard, so a later call on the
 * same pointer reads a dead magic and returns -EBADF instead of reading
 * freed memory. loco_fini() kills every handle of its manager still alive
 * (a channel or object the program did not destroy), and the manager's
 * own handle.
 *
 * Why process-wide state (DESIGN §2 keeps state in the manager): the
 * point is to answer calls made after loco_fini(), when the manager is
 * gone, so the graveyard cannot live in it. It is kept minimal: one
 * mutex, the list of live handles (so that loco_fini() finds those of its
 * manager) and the graveyard, a FIFO bounded by GRAVE_MAX handles and
 * GRAVE_BYTES bytes; beyond either bound the oldest dead handle is really
 * freed. Only create, destroy and loco_fini() take the mutex; a check is
 * one load of the magic, lock-free.
 *
 * What is not caught: a handle destroyed GRAVE_MAX destroys (or
 * GRAVE_BYTES) ago is freed memory again. Its magic is then overwritten
 * (the allocator keeps its free-list link in those first bytes) and the
 * check aborts with "misuse: ... is not a live LOCO handle"; but once
 * malloc gives the memory to a new handle the old pointer names the new
 * one, which no check can tell.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "handle.h"
#include "log.h"

#define HANDLE_LIVE 0x4c4f434f4c495645ull /* "LOCOLIVE" */
#define HANDLE_DEAD 0x4c4f434f44454144ull /* "LOCODEAD" */

#define GRAVE_MAX   1024u
#define GRAVE_BYTES (4u << 20)

/* 64 bytes: the handle behind it keeps malloc's 16-byte alignment */
struct lc_handle {
	uint64_t magic; /* HANDLE_LIVE or HANDLE_DEAD; first: see above */
	loco_manager_t *m;
	struct lc_handle *prev, *next; /* live: the live list; dead: the graveyard */
	size_t size;                   /* of the handle behind, header included */
	uint64_t buried;               /* 0: in the live list; 1: in the graveyard */
	void (*fini)(void *h);         /* called when the graveyard frees it (lc_handle_bury_fn) */
	uint64_t pad;
};
_Static_assert(sizeof(struct lc_handle) % 16 == 0, "handles keep malloc's alignment");

static pthread_mutex_t lc_handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lc_handle *lc_live;                       /* under lc_handles_lock */
static struct lc_handle *lc_grave_head, *lc_grave_tail; /* oldest first */
static size_t lc_grave_n, lc_grave_bytes;

static struct lc_handle *hdr(const void *h)
{
	return (struct lc_handle *)((uintptr_t)h - sizeof(struct lc_handle));
}

void *lc_handle_alloc(loco_manager_t *m, size_t size)
{
	struct lc_handle *hd = calloc(1, sizeof(*hd) + size);

	if (hd == NULL)
		return NULL;
	hd->m = m;
	hd->size = sizeof(*hd) + size;
	__atomic_store_n(&hd->magic, HANDLE_LIVE, __ATOMIC_RELAXED);
	pthread_mutex_lock(&lc_handles_lock);
	hd->next = lc_live;
	if (lc_live != NULL)
		lc_live->prev = hd;
	lc_live = hd;
	pthread_mutex_unlock(&lc_handles_lock);
	return hd + 1;
}

/* live_unlink / grave_push -- under lc_handles_lock */
static void live_unlink(struct lc_handle *hd)
{
	if (hd->prev != NULL)
		hd->prev->next = hd->next;
	else
		lc_live = hd->next;
	if (hd->next != NULL)
		hd->next->prev = hd->prev;
	hd->prev = hd->next = NULL;
}

static void grave_push(struct lc_handle *hd)
{
	hd->m = NULL;
	hd->buried = 1;
	hd->next = NULL;
	if (lc_grave_tail != NULL)
		lc_grave_tail->next = hd;
	else
		lc_grave_head = hd;
	lc_grave_tail = hd;
	lc_grave_n++;
	lc_grave_bytes += hd->size;
	while (lc_grave_n > GRAVE_MAX || (lc_grave_bytes > GRAVE_BYTES && lc_grave_n > 1)) {
		struct lc_handle *old = lc_grave_head;

		lc_grave_head = old->next;
		if (lc_grave_head == NULL)
			lc_grave_tail = NULL;
		lc_grave_n--;
		lc_grave_bytes -= old->size;
		if (old->fini != NULL)
			old->fini(old + 1);
		free(old);
	}
}

void lc_handle_kill(void *h)
{
	if (h != NULL)
		__atomic_store_n(&hdr(h)->magic, HANDLE_DEAD, __ATOMIC_RELEASE);
}

void lc_handle_bury(void *h)
{
	lc_handle_bury_fn(h, NULL);
}

void lc_handle_bury_fn(void *h, void (*fini)(void *h))
{
	struct lc_handle *hd;

	if (h == NULL)
		return;
	hd = hdr(h);
	hd->fini = fini;
	__atomic_store_n(&hd->magic, HANDLE_DEAD, __ATOMIC_RELEASE);
	pthread_mutex_lock(&lc_handles_lock);
	if (!hd->buried) { /* else loco_fini() buried it already */
		live_unlink(hd);
		grave_push(hd);
	}
	pthread_mutex_unlock(&lc_handles_lock);
}

void lc_handle_fini_manager(loco_manager_t *m, int keep)
{
	struct lc_handle *hd, *next;

	pthread_mutex_lock(&lc_handles_lock);
	for (hd = lc_live; hd != NULL; hd = next) {
		next = hd->next;
		if (hd->m != m)
			continue;
		__atomic_store_n(&hd->magic, HANDLE_DEAD, __ATOMIC_RELEASE);
		if (keep) /* stays in the live list, dead: never evicted, never freed */
			continue;
		live_unlink(hd);
		grave_push(hd);
	}
	pthread_mutex_unlock(&lc_handles_lock);
}

/* ------------------------------------------------------------------ */
/* the object-author API (channel.h)                                  */

int loco_handle_check(const void *h)
{
	uint64_t magic;

	if (h == NULL)
		return -EINVAL;
	magic = __atomic_load_n(&hdr(h)->magic, __ATOMIC_ACQUIRE);
	if (magic == HANDLE_LIVE)
		return 0;
	if (magic == HANDLE_DEAD)
		return -EBADF;
	/* freed long ago (past the graveyard), or never a handle: nothing is safe to do */
	fprintf(stderr,
	        "loco: misuse: %p is not a live LOCO handle (destroyed long before, "
	        "or never one); aborting\n",
	        h);
	abort();
}

void loco_handle_free(void *h)
{
	if (h == NULL)
		return;
	if (loco_handle_check(h) == 0) {
		lc_handle_bury(h);
		return;
	}
	/* the first to see it logs it: a destroy has no error to return */
	lc_log_err("misuse: handle %p destroyed twice, or after its manager's loco_fini(): "
	           "ignored",
	           h);
}
