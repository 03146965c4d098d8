/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc_impl.h -- objects/-private: the state of the remote allocator,
 * shared by ralloc.c (the API, the shadows, the callbacks) and
 * ralloc_claim.c (the refills that claim slices). The design is at the
 * top of ralloc.c. Not installed.
 *
 * Thread safety: as loco/ralloc.h; each field says what guards it.
 */
#ifndef LOCO_OBJECTS_RALLOC_IMPL_H
#define LOCO_OBJECTS_RALLOC_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include <loco.h>
#include <loco/ralloc.h>

enum ra_kind {
	K_FREE = 0,
	K_EMPTY,
	K_CLASS,
	K_RUN,
	K_BODY,
	K_RESV
};

#define RA_CLS_MIN    6    /* 64 B */
#define RA_CLASSES    21   /* up to 1 << 20: LOCO_RALLOC_SLICE_MAX */
#define RA_WINDOW     512u /* table entries one refill READ covers */
#define RA_RUN_TRIES  4
#define RA_SENTINEL   (~0ull) /* a result slot before its CAS completed */
#define RA_DESTROY_NS (5ll * 1000000000ll)
#define RA_PEERS_MAX  1024
#define RA_GIVE_MAX   64 /* give-backs in flight at most: more stay cached until later */

struct ra_slice {
	uint8_t kind;
	uint8_t cls;
	uint8_t cached; /* K_RESV: taken from the cache (ours already) */
	uint32_t nblk;
	uint32_t nfree;
	uint32_t hint; /* the bitmap word to look at first */
	uint32_t run;  /* K_RUN: slices in the run */
	int32_t prev, next;
};

struct ra_host {
	uint32_t node;
	int gone;     /* left the view: -ECONNRESET until it pairs again */
	int have_rr;  /* rr_table and rr_heap looked up */
	uint64_t gen; /* bumped by every reset (peer_leave) */
	uint64_t word;
	loco_rref_t rr_table, rr_heap;
	uint32_t cursor; /* where the next refill window starts */
	struct ra_slice *sl;
	uint64_t *bits; /* nslices * bwords */
	int32_t empty;  /* the cache: EMPTY slices */
	uint32_t nempty;
	uint32_t owned;
	int32_t partial[RA_CLASSES];
};

/* A batch of claim CASes (and READs) posted by a refill and not yet settled. */
struct ra_pend {
	int active;
	struct ra_host *h;
	uint64_t gen;
	uint32_t n;
	uint32_t *idx; /* nslices entries */
};

struct loco_ralloc {
	loco_object_t *obj;
	loco_manager_t *m;
	loco_region_t *heap, *table, *scratch;
	uint32_t me;
	size_t heap_len, slice_len;
	uint32_t nslices, bwords;
	unsigned slice_shift;
	unsigned batch, keep;
	pthread_mutex_t lock;
	pthread_mutex_t refill_lock;
	struct ra_host **hosts; /* under lock; entries never freed before destroy */
	size_t nhosts, cap;
	loco_ack_key_t *claim_ack; /* under refill_lock */
	loco_ack_key_t *give_ack;  /* posted under lock; only polled */
	struct ra_pend pend;       /* under refill_lock */
	loco_ralloc_stats_t st;    /* under lock (the host_* fields are filled by stats) */
	uint64_t give_seq;         /* under lock: give-backs posted */
	uint64_t reclaimed;        /* atomic */
};

static inline uint64_t *snap(loco_ralloc_t *ra)
{
	return loco_region_ptr(ra->scratch);
}

static inline uint64_t *res(loco_ralloc_t *ra)
{
	return (uint64_t *)loco_region_ptr(ra->scratch) + ra->nslices;
}

static inline size_t res_off(const loco_ralloc_t *ra, uint32_t i)
{
	return ((size_t)ra->nslices + i) * 8;
}

static inline size_t junk_off(const loco_ralloc_t *ra)
{
	return (size_t)ra->nslices * 16;
}

/* ---- lists of slices, by index (-1: none) ---------------------------- */

static inline void list_push(struct ra_host *h, int32_t *head, uint32_t i)
{
	struct ra_slice *s = &h->sl[i];

	s->prev = -1;
	s->next = *head;
	if (*head >= 0)
		h->sl[*head].prev = (int32_t)i;
	*head = (int32_t)i;
}

static inline void list_del(struct ra_host *h, int32_t *head, uint32_t i)
{
	struct ra_slice *s = &h->sl[i];

	if (s->prev >= 0)
		h->sl[s->prev].next = s->next;
	else
		*head = s->next;
	if (s->next >= 0)
		h->sl[s->next].prev = s->prev;
	s->prev = s->next = -1;
}

/* ra_host_rr -- under lock: look up @h's table and heap once per pairing (ralloc_claim.c). */
int ra_host_rr(loco_ralloc_t *ra, struct ra_host *h);

/* ra_give_back -- under lock: give back EMPTY slices of @h till it keeps @keep (ralloc_claim.c). */
void ra_give_back(loco_ralloc_t *ra, struct ra_host *h, uint32_t keep);

/* ra_pend_settle -- under refill_lock: settle and end an earlier claim batch (ralloc_claim.c). */
int ra_pend_settle(loco_ralloc_t *ra, int64_t deadline);

/*
 * ra_refill -- claim up to batch slices of @h into its cache (ralloc_claim.c).
 * Returns > 0 when the cache has some, or a negative error (-ENOMEM: none free).
 */
int ra_refill(loco_ralloc_t *ra, struct ra_host *h, int64_t deadline);

/* ra_run_claim -- claim a run of @n contiguous slices of @h; its first slice (ralloc_claim.c). */
int ra_run_claim(loco_ralloc_t *ra, struct ra_host *h, uint32_t n, int64_t deadline);

#endif /* LOCO_OBJECTS_RALLOC_IMPL_H */
