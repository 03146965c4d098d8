/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc.c -- remote allocation of registered memory (loco/ralloc.h),
 * built only on the public object-author API (loco/channel.h).
 *
 * Every node's object has three regions: "heap" (nslices slices of
 * slice_len bytes, read/write/atomic), "table" (one 8-byte owner word per
 * slice, atomic) and "scratch" (local only: a copy of a host's table read
 * by a refill, then one CAS result slot per slice, then one slot the
 * give-back CASes write their old values into).
 *
 * Table word of slice i on host H: 0 when free, else (node << 32 | tag),
 * the owner's id and the low 32 bits of the generation of its shadow of
 * H (never 0). Only three things change a word: a claim (CAS 0 -> word,
 * by the claimer), a give-back (CAS word -> 0, by the owner), and H's own
 * CPU, which resets every word of a node that left the view
 * (ra_peer_leave, on the progress thread). The membership layer closes
 * the departed node's data link before peer_leave runs, so none of its
 * CASes or WRITEs can execute at H after the reset.
 *
 * The shadow (struct ra_host): what this node knows of its slices on one
 * host. A slice is FREE (not ours), EMPTY (ours, no block: kept in the
 * host's cache list), CLASS (cut into blocks of 1 << cls bytes, with a
 * bitmap of the taken ones; on the partial list of its class while one
 * is free), RUN / BODY (the first and the later slices of a block of
 * whole slices), or RESV (being claimed into a run). Allocation and free
 * are local operations on the shadow; a refill claims slices, a
 * give-back returns EMPTY ones beyond the cache's mark, in a batch.
 *
 * Locks: @lock guards every shadow and is never held across a wait;
 * @refill_lock serializes the refills, which wait for the fabric (and own
 * the claim ack key, the scratch copy and the result slots). Callbacks
 * take @lock only.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco.h>
#include <loco/ralloc.h>

#include "obj_util.h"

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

static uint64_t *snap(loco_ralloc_t *ra)
{
	return loco_region_ptr(ra->scratch);
}

static uint64_t *res(loco_ralloc_t *ra)
{
	return (uint64_t *)loco_region_ptr(ra->scratch) + ra->nslices;
}

static size_t res_off(const loco_ralloc_t *ra, uint32_t i)
{
	return ((size_t)ra->nslices + i) * 8;
}

static size_t junk_off(const loco_ralloc_t *ra)
{
	return (size_t)ra->nslices * 16;
}

/* ---- lists of slices, by index (-1: none) ---------------------------- */

static void list_push(struct ra_host *h, int32_t *head, uint32_t i)
{
	struct ra_slice *s = &h->sl[i];

	s->prev = -1;
	s->next = *head;
	if (*head >= 0)
		h->sl[*head].prev = (int32_t)i;
	*head = (int32_t)i;
}

static void list_del(struct ra_host *h, int32_t *head, uint32_t i)
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

/* ---- the shadow of one host --------------------------------------------- */

static unsigned ceil_log2(size_t n)
{
	return n <= 1 ? 0 : 64u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
}

/* host_reset -- under lock: forget every slice of @h (it left, or is new). */
static void host_reset(loco_ralloc_t *ra, struct ra_host *h)
{
	for (uint32_t i = 0; i < ra->nslices; i++)
		h->sl[i] = (struct ra_slice){.kind = K_FREE, .prev = -1, .next = -1};
	h->empty = -1;
	h->nempty = 0;
	h->owned = 0;
	for (unsigned c = 0; c < RA_CLASSES; c++)
		h->partial[c] = -1;
	h->gen++;
	if ((uint32_t)h->gen == 0)
		h->gen++; /* the tag is never 0 */
	h->word = (uint64_t)ra->me << 32 | (uint32_t)h->gen;
	h->have_rr = 0;
}

static struct ra_host *host_new(loco_ralloc_t *ra, uint32_t node)
{
	struct ra_host *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	h->sl = calloc(ra->nslices, sizeof(*h->sl));
	h->bits = calloc((size_t)ra->nslices * ra->bwords, sizeof(uint64_t));
	if (h->sl == NULL || h->bits == NULL) {
		free(h->sl);
		free(h->bits);
		free(h);
		return NULL;
	}
	h->node = node;
	/* spread the nodes' first windows over the table: fewer lost CASes */
	h->cursor = (uint32_t)(((uint64_t)ra->me * 0x9e3779b97f4a7c15ull >> 32) % ra->nslices);
	host_reset(ra, h);
	return h;
}

static void host_free(struct ra_host *h)
{
	if (h == NULL)
		return;
	free(h->sl);
	free(h->bits);
	free(h);
}

/* host_find -- under lock: @node's shadow, or NULL. */
static struct ra_host *host_find(loco_ralloc_t *ra, uint32_t node)
{
	for (size_t i = 0; i < ra->nhosts; i++)
		if (ra->hosts[i]->node == node)
			return ra->hosts[i];
	return NULL;
}

/*
 * host_add -- make @node's shadow if it has none (allocates: called at
 * create and from peer_join, never on the data path); mark it present.
 */
static int host_add(loco_ralloc_t *ra, uint32_t node)
{
	struct ra_host *h, *n = NULL, **grown = NULL;
	int ret = 0;

	pthread_mutex_lock(&ra->lock);
	h = host_find(ra, node);
	if (h != NULL)
		h->gone = 0;
	pthread_mutex_unlock(&ra->lock);
	if (h != NULL)
		return 0;
	n = host_new(ra, node);
	if (n == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&ra->lock);
	if (host_find(ra, node) != NULL) {
		host_find(ra, node)->gone = 0;
		goto out; /* a racing add won */
	}
	if (ra->nhosts == ra->cap) {
		size_t cap = ra->cap ? 2 * ra->cap : 8;

		grown = realloc(ra->hosts, cap * sizeof(*grown));
		if (grown == NULL) {
			ret = -ENOMEM;
			goto out;
		}
		ra->hosts = grown;
		ra->cap = cap;
	}
	ra->hosts[ra->nhosts++] = n;
	n = NULL;
out:
	pthread_mutex_unlock(&ra->lock);
	host_free(n);
	return ret;
}

/* host_rr -- under lock: look up @h's table and heap once per pairing. */
static int host_rr(loco_ralloc_t *ra, struct ra_host *h)
{
	loco_rref_t t, hp;
	int ret;

	if (h->have_rr)
		return 0;
	ret = loco_region_remote(ra->table, h->node, &t);
	if (ret == 0)
		ret = loco_region_remote(ra->heap, h->node, &hp);
	if (ret)
		return ret;
	h->rr_table = t;
	h->rr_heap = hp;
	h->have_rr = 1;
	return 0;
}

/* slice_format -- under lock: EMPTY slice @i becomes a CLASS slice of blocks of 1 << @cls. */
static void slice_format(loco_ralloc_t *ra, struct ra_host *h, uint32_t i, unsigned cls)
{
	struct ra_slice *s = &h->sl[i];

	list_del(h, &h->empty, i);
	h->nempty--;
	s->kind = K_CLASS;
	s->cls = (uint8_t)cls;
	s->nblk = (uint32_t)(ra->slice_len >> cls);
	s->nfree = s->nblk;
	s->hint = 0;
	memset(&h->bits[(size_t)i * ra->bwords], 0, ra->bwords * sizeof(uint64_t));
	list_push(h, &h->partial[cls], i);
}

/* slice_take -- under lock: a free block of CLASS slice @i (which has one). */
static uint32_t slice_take(loco_ralloc_t *ra, struct ra_host *h, uint32_t i)
{
	struct ra_slice *s = &h->sl[i];
	uint64_t *b = &h->bits[(size_t)i * ra->bwords];
	uint32_t words = (s->nblk + 63) / 64, w = s->hint, blk = 0;

	for (uint32_t k = 0; k < words; k++, w = (w + 1 == words ? 0 : w + 1)) {
		uint64_t free_bits = ~b[w];

		if (w == words - 1 && s->nblk % 64)
			free_bits &= (1ull << (s->nblk % 64)) - 1;
		if (free_bits == 0)
			continue;
		blk = w * 64 + (uint32_t)__builtin_ctzll(free_bits);
		b[w] |= 1ull << (blk % 64);
		s->hint = w;
		break;
	}
	if (--s->nfree == 0)
		list_del(h, &h->partial[s->cls], i);
	return blk;
}

/*
 * give_back -- under lock: return EMPTY slices of @h to its host until
 * @h keeps @keep of them, with one CAS each (word -> 0) posted together
 * and not waited for: a later claim of the same slice is posted after
 * them and executes after them (requests to one node execute in order).
 * A full ack key leaves the rest in the cache for the next time.
 */
static void give_back(loco_ralloc_t *ra, struct ra_host *h, uint32_t keep)
{
	while (h->nempty > keep && h->empty >= 0) {
		uint32_t i = (uint32_t)h->empty;

		if (!h->gone && h->have_rr &&
		    (loco_ack_outstanding(ra->give_ack) >= RA_GIVE_MAX ||
		     loco_cas(ra->scratch, junk_off(ra), &h->rr_table, (size_t)i * 8, h->word, 0,
		              ra->give_ack) != 0))
			return;
		list_del(h, &h->empty, i);
		h->nempty--;
		h->owned--;
		h->sl[i].kind = K_FREE;
		ra->st.returned++;
		ra->give_seq++;
	}
}

/* ---- refills: claiming slices ------------------------------------------ */

/* ra_settle -- wait for every operation on @ack by @deadline (polling): 0, its error, -ETIMEDOUT. */
static int ra_settle(loco_ralloc_t *ra, loco_ack_key_t *ack, int64_t deadline)
{
	loco_waiter_t w;
	int ret;

	loco_waiter_init(&w, ra->m);
	for (;;) {
		ret = loco_ack_wait(ack, 0); /* reaps and tests, no partition check */
		if (ret != -ETIMEDOUT || loco_ack_outstanding(ack) == 0)
			return ret;
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/*
 * pend_finish -- under refill_lock, once the pending batch settled: the
 * slices whose CAS found 0 are this node's (EMPTY, cached) unless the
 * host left since (then its reset covered them). A slot still holding
 * the sentinel is a CAS that failed on the link: whether it executed is
 * unknown, and adopt() finds it later if it did.
 */
static uint32_t pend_finish(loco_ralloc_t *ra)
{
	struct ra_pend *p = &ra->pend;
	struct ra_host *h = p->h;
	uint32_t won = 0;

	if (!p->active)
		return 0;
	pthread_mutex_lock(&ra->lock);
	for (uint32_t k = 0; k < p->n; k++) {
		uint32_t i = p->idx[k];
		uint64_t old = __atomic_load_n(&res(ra)[i], __ATOMIC_ACQUIRE);

		if (h->gen != p->gen)
			break;
		if (old == 0) { /* a run's slice (K_RESV, whose refill timed out) is cached too */
			h->sl[i].kind = K_EMPTY;
			list_push(h, &h->empty, i);
			h->nempty++;
			h->owned++;
			ra->st.claimed++;
			won++;
		} else {
			h->sl[i].kind = K_FREE;
			ra->st.lost += old != RA_SENTINEL;
		}
	}
	pthread_mutex_unlock(&ra->lock);
	p->active = 0;
	p->n = 0;
	return won;
}

/* pend_settle -- under refill_lock: settle and finish an earlier batch first. */
static int pend_settle(loco_ralloc_t *ra, int64_t deadline)
{
	int ret;

	if (!ra->pend.active && loco_ack_outstanding(ra->claim_ack) == 0)
		return 0;
	ret = ra_settle(ra, ra->claim_ack, deadline);
	if (ret == -ETIMEDOUT)
		return ret;
	pend_finish(ra);
	return 0;
}

/*
 * adopt -- under lock: slices whose word on the host is this node's but
 * which the shadow thinks free: a claim whose CAS executed but whose
 * completion failed on the link. Only when no give-back was in flight
 * when the READ of the table was posted, and none was posted since
 * (@gseq, from host_snapshot(), is still ra->give_seq): a give-back
 * that executes after the READ leaves this node's word in the copy.
 */
static void adopt(loco_ralloc_t *ra, struct ra_host *h, uint32_t start, uint32_t n, uint64_t gseq)
{
	if (gseq != ra->give_seq)
		return;
	for (uint32_t i = start; i < start + n; i++) {
		if (snap(ra)[i] != h->word || h->sl[i].kind != K_FREE)
			continue;
		h->sl[i].kind = K_EMPTY;
		list_push(h, &h->empty, i);
		h->nempty++;
		h->owned++;
		ra->st.claimed++;
	}
}

/*
 * post_retry -- post with @fn until it is not refused for a full queue
 * (-EAGAIN: the fabric drains it), by @deadline.
 */
static int post_retry(loco_ralloc_t *ra, int64_t deadline, int (*fn)(void *arg), void *arg)
{
	loco_waiter_t w;
	int ret;

	loco_waiter_init(&w, ra->m);
	while ((ret = fn(arg)) == -EAGAIN) {
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	return ret;
}

struct post_args {
	loco_ralloc_t *ra;
	const loco_rref_t *rt;
	uint32_t i, n; /* READ: entries [i, i + n); CAS: slice i */
	uint64_t word;
};

static int post_read(void *arg)
{
	struct post_args *a = arg;

	return loco_read(a->ra->scratch, (size_t)a->i * 8, a->rt, (size_t)a->i * 8,
	                 (size_t)a->n * 8, a->ra->claim_ack);
}

static int post_cas(void *arg)
{
	struct post_args *a = arg;

	return loco_cas(a->ra->scratch, res_off(a->ra, a->i), a->rt, (size_t)a->i * 8, 0, a->word,
	                a->ra->claim_ack);
}

/* read_table -- under refill_lock: entries [@start, @start + @n) of @h's table into snap(). */
static int read_table(loco_ralloc_t *ra, const loco_rref_t *rt, uint32_t start, uint32_t n,
                      int64_t deadline)
{
	struct post_args a = {.ra = ra, .rt = rt, .i = start, .n = n};
	int ret = post_retry(ra, deadline, post_read, &a);

	if (ret) /* -ETIMEDOUT: the queue stayed full; -ENOTCONN: no link */
		return ret != -ETIMEDOUT && obj_peer_gone_err(ret) ? -ECONNRESET : ret;
	ra->pend.active = 1; /* a READ in flight: the next refill settles it first */
	ra->pend.n = 0;
	ret = ra_settle(ra, ra->claim_ack, deadline);
	if (ret == -ETIMEDOUT && loco_ack_outstanding(ra->claim_ack) != 0)
		return ret;
	ra->pend.active = 0;
	/* the link failed: the host died, or the view is about to say so */
	return obj_peer_gone_err(ret) ? -ECONNRESET : ret;
}

/* post_claims -- under refill_lock: CAS 0 -> word for pend.idx[0 .. n); waits by @deadline. */
static int post_claims(loco_ralloc_t *ra, struct ra_host *h, const loco_rref_t *rt, uint64_t gen,
                       uint64_t word, int64_t deadline)
{
	struct ra_pend *p = &ra->pend;
	uint32_t posted = 0;
	int ret = 0;

	p->active = 1;
	p->h = h;
	p->gen = gen;
	for (uint32_t k = 0; k < p->n; k++) /* a slot not posted or failed keeps it */
		__atomic_store_n(&res(ra)[p->idx[k]], RA_SENTINEL, __ATOMIC_RELAXED);
	for (uint32_t k = 0; k < p->n; k++) {
		struct post_args a = {.ra = ra, .rt = rt, .i = p->idx[k], .word = word};

		ret = post_retry(ra, deadline, post_cas, &a);
		if (ret)
			break;
		posted++;
	}
	p->n = posted;
	if (posted == 0) {
		pend_finish(ra);
		return ret != -ETIMEDOUT && obj_peer_gone_err(ret) ? -ECONNRESET
		       : ret                                       ? ret
		                                                   : -EAGAIN;
	}
	ret = ra_settle(ra, ra->claim_ack, deadline);
	if (ret == -ETIMEDOUT)
		return ret;
	return 0; /* the results say what each did */
}

/*
 * host_snapshot -- under lock, before a READ of @h's table: @h's gen,
 * word and table rref, or its error; in *@gseq what adopt() needs.
 */
static int host_snapshot(loco_ralloc_t *ra, struct ra_host *h, uint64_t *gen, uint64_t *word,
                         loco_rref_t *rt, uint64_t *gseq)
{
	int ret;

	if (h->gone)
		return -ECONNRESET;
	ret = host_rr(ra, h);
	if (ret)
		return ret;
	*gen = h->gen;
	*word = h->word;
	*rt = h->rr_table;
	*gseq = loco_ack_outstanding(ra->give_ack) == 0 ? ra->give_seq : UINT64_MAX;
	return 0;
}

/*
 * refill -- claim up to batch slices of @h into its cache: READ a window
 * of its table from the cursor on, CAS the free entries, and move the
 * cursor on when a window has none left. Returns how many were won (> 0),
 * or -ENOMEM after a whole lap of the table found no free slice.
 */
static int refill(loco_ralloc_t *ra, struct ra_host *h, int64_t deadline)
{
	uint32_t nwin = (ra->nslices + RA_WINDOW - 1) / RA_WINDOW + 1;
	uint64_t gen, word, gseq;
	loco_rref_t rt;
	int ret;

	pthread_mutex_lock(&ra->refill_lock);
	ret = pend_settle(ra, deadline);
	if (ret)
		goto out;
	for (uint32_t w = 0; w <= nwin; w++) {
		uint32_t start = h->cursor, n = ra->nslices - start, nfree = 0;

		if (n > RA_WINDOW)
			n = RA_WINDOW;
		if (loco_channel_partitioned(loco_object_channel(ra->obj))) {
			ret = -LOCO_EPARTITION;
			goto out;
		}
		pthread_mutex_lock(&ra->lock);
		ret = host_snapshot(ra, h, &gen, &word, &rt, &gseq);
		if (ret == 0 && h->nempty > 0)
			ret = 1; /* another thread's refill came first */
		pthread_mutex_unlock(&ra->lock);
		if (ret)
			goto out;
		if (w == 0) {
			pthread_mutex_lock(&ra->lock);
			ra->st.slow++;
			pthread_mutex_unlock(&ra->lock);
		}
		ret = read_table(ra, &rt, start, n, deadline);
		if (ret)
			goto out;
		pthread_mutex_lock(&ra->lock);
		if (h->gen != gen) {
			pthread_mutex_unlock(&ra->lock);
			ret = -ECONNRESET;
			goto out;
		}
		adopt(ra, h, start, n, gseq);
		ra->pend.n = 0;
		for (uint32_t i = start; i < start + n; i++) {
			if (snap(ra)[i] != 0 || h->sl[i].kind != K_FREE)
				continue;
			nfree++;
			if (ra->pend.n < ra->batch)
				ra->pend.idx[ra->pend.n++] = i;
		}
		/* nothing left here after this batch: look further next time */
		if (nfree <= ra->pend.n)
			h->cursor = start + n == ra->nslices ? 0 : start + n;
		ret = h->nempty > 0;
		pthread_mutex_unlock(&ra->lock);
		if (ra->pend.n == 0) {
			if (ret)
				goto out; /* adopted some */
			continue;
		}
		ret = post_claims(ra, h, &rt, gen, word, deadline);
		if (ret)
			goto out;
		ret = (int)pend_finish(ra);
		pthread_mutex_lock(&ra->lock);
		if (h->nempty > 0)
			ret = ret > 0 ? ret : 1;
		pthread_mutex_unlock(&ra->lock);
		if (ret > 0)
			goto out;
	}
	ret = -ENOMEM;
out:
	pthread_mutex_unlock(&ra->refill_lock);
	return ret;
}

/*
 * run_claim -- claim a run of @n contiguous slices of @h for one block:
 * READ the whole table, take the first run whose slices are free there
 * (or this node's cached EMPTY ones), CAS the free ones; a lost CAS puts
 * what was won into the cache and tries again (RA_RUN_TRIES times).
 * Returns the run's first slice, or -ENOMEM.
 */
static int run_claim(loco_ralloc_t *ra, struct ra_host *h, uint32_t n, int64_t deadline)
{
	uint64_t gen, word, gseq;
	loco_rref_t rt;
	int ret;

	pthread_mutex_lock(&ra->refill_lock);
	ret = pend_settle(ra, deadline);
	if (ret)
		goto out;
	for (int t = 0; t < RA_RUN_TRIES; t++) {
		int32_t first = -1;
		bool all = true;
		int pret = 0;

		if (loco_channel_partitioned(loco_object_channel(ra->obj))) {
			ret = -LOCO_EPARTITION;
			goto out;
		}
		pthread_mutex_lock(&ra->lock);
		ret = host_snapshot(ra, h, &gen, &word, &rt, &gseq);
		if (ret == 0)
			ra->st.slow++;
		pthread_mutex_unlock(&ra->lock);
		if (ret)
			goto out;
		ret = read_table(ra, &rt, 0, ra->nslices, deadline);
		if (ret)
			goto out;
		pthread_mutex_lock(&ra->lock);
		if (h->gen != gen) {
			pthread_mutex_unlock(&ra->lock);
			ret = -ECONNRESET;
			goto out;
		}
		adopt(ra, h, 0, ra->nslices, gseq);
		for (uint32_t s = 0, len = 0; s < ra->nslices; s++) {
			const struct ra_slice *sl = &h->sl[s];

			if ((sl->kind == K_FREE && snap(ra)[s] == 0) || sl->kind == K_EMPTY)
				len++;
			else
				len = 0;
			if (len == n) {
				first = (int32_t)(s + 1 - n);
				break;
			}
		}
		if (first < 0) {
			pthread_mutex_unlock(&ra->lock);
			ret = -ENOMEM;
			goto out;
		}
		ra->pend.n = 0;
		for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
			struct ra_slice *sl = &h->sl[i];

			sl->cached = sl->kind == K_EMPTY;
			if (sl->cached) {
				list_del(h, &h->empty, i);
				h->nempty--;
			} else {
				ra->pend.idx[ra->pend.n++] = i;
			}
			sl->kind = K_RESV;
		}
		pthread_mutex_unlock(&ra->lock);
		if (ra->pend.n > 0)
			pret = post_claims(ra, h, &rt, gen, word, deadline);
		pthread_mutex_lock(&ra->lock);
		if (pret == -ETIMEDOUT) {
			/* the claimed ones go to the cache when they settle; the cached ones now */
			for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
				uint32_t k = 0;

				if (h->gen != gen)
					break;
				if (h->sl[i].kind != K_RESV)
					continue;
				if (h->sl[i].cached) {
					h->sl[i].kind = K_EMPTY;
					list_push(h, &h->empty, i);
					h->nempty++;
					continue;
				}
				while (k < ra->pend.n && ra->pend.idx[k] != i)
					k++;
				if (k == ra->pend.n) /* never posted */
					h->sl[i].kind = K_FREE;
			}
			pthread_mutex_unlock(&ra->lock);
			ret = pret;
			goto out;
		}
		/* settled: a claimed slice is ours when its CAS found 0 */
		ra->pend.active = 0;
		ra->pend.n = 0;
		if (h->gen != gen) { /* the host left: its reset cleared the run */
			pthread_mutex_unlock(&ra->lock);
			ret = -ECONNRESET;
			goto out;
		}
		for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
			struct ra_slice *sl = &h->sl[i];
			uint64_t old = __atomic_load_n(&res(ra)[i], __ATOMIC_ACQUIRE);

			if (sl->cached)
				continue;
			if (old == 0) {
				h->owned++;
				ra->st.claimed++;
				continue;
			}
			all = false;
			sl->kind = K_FREE;
			ra->st.lost += old != RA_SENTINEL;
		}
		for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
			struct ra_slice *sl = &h->sl[i];

			if (sl->kind != K_RESV)
				continue;
			sl->cached = 0;
			if (all) {
				sl->kind = i == (uint32_t)first ? K_RUN : K_BODY;
				sl->run = i == (uint32_t)first ? n : 0;
			} else {
				sl->kind = K_EMPTY;
				list_push(h, &h->empty, i);
				h->nempty++;
			}
		}
		if (!all)
			give_back(ra, h, ra->keep);
		pthread_mutex_unlock(&ra->lock);
		if (all) {
			ret = first;
			goto out;
		}
		if (pret) {
			ret = pret;
			goto out;
		}
	}
	ret = -ENOMEM;
out:
	pthread_mutex_unlock(&ra->refill_lock);
	return ret;
}

/* ---- callbacks ------------------------------------------------------------- */

/*
 * ra_peer_leave -- on the progress thread: @node left the view. As its
 * host, reset its slices in this node's table to free (its data link is
 * closed already: nothing of it lands after this); as an allocator,
 * forget this node's shadow of its heap (its blocks are gone with it).
 */
static void ra_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_ralloc_t *ra = arg;
	uint64_t *t = loco_region_ptr(ra->table), n = 0;
	struct ra_host *h;

	(void)obj;
	(void)view;
	if (node == ra->me)
		return;
	for (uint32_t i = 0; i < ra->nslices; i++) {
		uint64_t v = __atomic_load_n(&t[i], __ATOMIC_ACQUIRE);

		if (v != 0 && v >> 32 == node &&
		    __atomic_compare_exchange_n(&t[i], &v, 0, false, __ATOMIC_SEQ_CST,
		                                __ATOMIC_RELAXED))
			n++;
	}
	__atomic_add_fetch(&ra->reclaimed, n, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ra->lock);
	h = host_find(ra, node);
	if (h != NULL) {
		host_reset(ra, h);
		h->gone = 1;
	}
	pthread_mutex_unlock(&ra->lock);
}

/* ra_peer_join -- on the progress thread: @node paired: a shadow of its heap, usable. */
static void ra_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)obj;
	(void)view;
	host_add(arg, node); /* -ENOMEM: allocations on it say -ENOENT */
}

static const struct loco_object_ops ra_ops = {
    .peer_join = ra_peer_join,
    .peer_leave = ra_peer_leave,
};

/* ---- the API --------------------------------------------------------------- */

/*
 * heap_numa_ok -- whether @node can hold memory here: -1 (no choice), a
 * node libnuma knows and this process may use, or 0 on a machine without
 * NUMA support (then nothing is applied).
 */
static int heap_numa_ok(int node)
{
	struct bitmask *allowed;
	int ok;

	if (node < 0)
		return node == -1 ? 0 : -EINVAL;
	if (numa_available() < 0)
		return node == 0 ? 0 : -EINVAL;
	if (node > numa_max_node())
		return -EINVAL;
	allowed = numa_get_mems_allowed();
	ok = allowed != NULL && numa_bitmask_isbitset(allowed, (unsigned)node);
	numa_bitmask_free(allowed);
	return ok ? 0 : -EINVAL;
}

/*
 * heap_bind -- move the heap's whole pages to @node and keep them there
 * (mbind MPOL_BIND with MPOL_MF_MOVE: the region is zeroed, so its pages
 * exist already). A heap of more than 1 MiB has a mapping of its own; a
 * smaller one shares its first and last pages with other regions, which
 * stay where they are.
 */
static void heap_bind(void *p, size_t len, int node)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + len) & ~(pg - 1);
	unsigned long mask[16] = {0};

	if (node < 0 || numa_available() < 0 || e <= a || (unsigned)node >= sizeof(mask) * 8)
		return;
	mask[node / (8 * sizeof(long))] = 1ul << (node % (8 * sizeof(long)));
	mbind((void *)a, e - a, MPOL_BIND, mask, sizeof(mask) * 8, MPOL_MF_MOVE);
}

int loco_ralloc_create(loco_channel_t *ch, const char *name, const loco_ralloc_config_t *cfg,
                       loco_ralloc_t **out)
{
	size_t slice;
	uint32_t ids[RA_PEERS_MAX];
	loco_ralloc_t *ra;
	int ret, np;

	if (ch == NULL || name == NULL || cfg == NULL || out == NULL)
		return -EINVAL;
	slice = cfg->slice_len ? cfg->slice_len : LOCO_RALLOC_SLICE_DEFAULT;
	if (slice < LOCO_RALLOC_SLICE_MIN || slice > LOCO_RALLOC_SLICE_MAX ||
	    (slice & (slice - 1)) || cfg->heap_len < slice || cfg->heap_len % slice ||
	    cfg->heap_len / slice > INT32_MAX / 2 || cfg->batch > LOCO_RALLOC_BATCH_MAX ||
	    heap_numa_ok(cfg->numa_node))
		return -EINVAL;
	ra = calloc(1, sizeof(*ra));
	if (ra == NULL)
		return -ENOMEM;
	ra->m = loco_channel_manager(ch);
	ra->me = loco_node_id(ra->m);
	ra->heap_len = cfg->heap_len;
	ra->slice_len = slice;
	ra->slice_shift = ceil_log2(slice);
	ra->nslices = (uint32_t)(cfg->heap_len / slice);
	ra->bwords = (uint32_t)((slice >> RA_CLS_MIN) + 63) / 64;
	ra->batch = cfg->batch ? cfg->batch : LOCO_RALLOC_BATCH_DEFAULT;
	ra->keep = cfg->keep ? cfg->keep : 2 * ra->batch;
	pthread_mutex_init(&ra->lock, NULL);
	pthread_mutex_init(&ra->refill_lock, NULL);
	ra->pend.idx = calloc(ra->nslices, sizeof(*ra->pend.idx));
	if (ra->pend.idx == NULL) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = loco_ack_key_create(ra->m, &ra->claim_ack);
	if (ret)
		goto err_free;
	ret = loco_ack_key_create_flags(ra->m, LOCO_ACK_IGNORE_LEFT, &ra->give_ack);
	if (ret)
		goto err_destroy_claim;
	ret = loco_object_create(ch, name, &ra_ops, ra, &ra->obj);
	if (ret)
		goto err_destroy_give;
	ret = loco_object_agree(ra->obj, "slice", slice);
	if (ret == 0)
		ret = loco_object_agree(ra->obj, "heap", cfg->heap_len);
	if (ret)
		goto err_destroy_obj;
	ret = loco_region_create(ra->obj, "table", (size_t)ra->nslices * 8,
	                         LOCO_ACCESS_READ | LOCO_ACCESS_ATOMIC, &ra->table);
	if (ret)
		goto err_destroy_obj;
	ret = loco_region_create(ra->obj, "heap", cfg->heap_len,
	                         LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC,
	                         &ra->heap);
	if (ret)
		goto err_destroy_obj;
	ret = loco_region_create(ra->obj, "scratch", (size_t)ra->nslices * 16 + 8, 0, &ra->scratch);
	if (ret)
		goto err_destroy_obj;
	heap_bind(loco_region_ptr(ra->heap), cfg->heap_len, cfg->numa_node);
	/* this node, and the peers paired before the object existed (later ones: peer_join) */
	ret = host_add(ra, ra->me);
	np = loco_channel_peers(ch, ids, RA_PEERS_MAX);
	for (int i = 0; ret == 0 && i < np && i < RA_PEERS_MAX; i++)
		ret = host_add(ra, ids[i]);
	if (ret)
		goto err_destroy_obj;
	*out = ra;
	return 0;

err_destroy_obj:
	loco_object_destroy(ra->obj);
err_destroy_give:
	loco_ack_key_destroy(ra->give_ack);
err_destroy_claim:
	loco_ack_key_destroy(ra->claim_ack);
err_free:
	for (size_t i = 0; i < ra->nhosts; i++)
		host_free(ra->hosts[i]);
	free(ra->hosts);
	free(ra->pend.idx);
	pthread_mutex_destroy(&ra->refill_lock);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
	return ret;
}

/* ra_block -- under lock: *@out for bytes [@off, @off + @len) of @h's heap. */
static void ra_block(const struct ra_host *h, size_t off, size_t len, loco_rptr_t *out)
{
	out->rref = h->rr_heap;
	out->rref.addr = h->rr_heap.addr + off;
	out->rref.len = len;
	out->gen = h->gen;
}

/* host_usable -- under lock: @node's shadow, ready to allocate on, or the error. */
static int host_usable(loco_ralloc_t *ra, uint32_t node, struct ra_host **out)
{
	struct ra_host *h = host_find(ra, node);
	int ret;

	if (h == NULL)
		return -ENOENT;
	if (h->gone)
		return -ECONNRESET;
	ret = host_rr(ra, h);
	if (ret)
		return ret;
	*out = h;
	return 0;
}

int loco_ralloc_alloc(loco_ralloc_t *ra, uint32_t node, size_t len, loco_rptr_t *out,
                      int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	struct ra_host *h;
	unsigned cls;
	int ret, first;

	if (ra == NULL || out == NULL || len == 0)
		return -EINVAL;
	if (len > ra->heap_len)
		return -EMSGSIZE;
	ret = loco_object_status(ra->obj);
	if (ret)
		return ret;
	if (len > ra->slice_len) {
		uint32_t n = (uint32_t)((len + ra->slice_len - 1) >> ra->slice_shift);

		pthread_mutex_lock(&ra->lock);
		ret = host_usable(ra, node, &h);
		pthread_mutex_unlock(&ra->lock);
		if (ret)
			return ret;
		first = run_claim(ra, h, n, deadline);
		if (first < 0)
			return first;
		pthread_mutex_lock(&ra->lock);
		ret = host_usable(ra, node, &h);
		if (ret == 0 && h->sl[first].kind != K_RUN)
			ret = -ECONNRESET; /* the host left and came back meanwhile */
		if (ret == 0) {
			ra_block(h, (size_t)first << ra->slice_shift, len, out);
			ra->st.allocs++;
		}
		pthread_mutex_unlock(&ra->lock);
		return ret;
	}
	cls = ceil_log2(len);
	if (cls < RA_CLS_MIN)
		cls = RA_CLS_MIN;
	for (;;) {
		int32_t i;

		pthread_mutex_lock(&ra->lock);
		ret = host_usable(ra, node, &h);
		if (ret) {
			pthread_mutex_unlock(&ra->lock);
			return ret;
		}
		i = h->partial[cls];
		if (i < 0 && h->empty >= 0) {
			i = h->empty;
			slice_format(ra, h, (uint32_t)i, cls);
		}
		if (i >= 0) {
			uint32_t blk = slice_take(ra, h, (uint32_t)i);

			ra_block(h, ((size_t)i << ra->slice_shift) + ((size_t)blk << cls), len,
			         out);
			ra->st.allocs++;
			pthread_mutex_unlock(&ra->lock);
			return 0;
		}
		pthread_mutex_unlock(&ra->lock);
		ret = refill(ra, h, deadline); /* the slow path */
		if (ret < 0)
			return ret;
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
	}
}

int loco_ralloc_free(loco_ralloc_t *ra, const loco_rptr_t *p)
{
	struct ra_host *h;
	struct ra_slice *s;
	uint64_t off, *b;
	uint32_t i, blk;
	int ret = -EINVAL;

	if (ra == NULL || p == NULL)
		return -EINVAL;
	pthread_mutex_lock(&ra->lock);
	h = host_find(ra, p->rref.node);
	if (h == NULL)
		goto out;
	if (h->gone || p->gen != h->gen) {
		ret = p->gen <= h->gen ? -ECONNRESET : -EINVAL;
		goto out;
	}
	if (!h->have_rr || p->rref.rkey != h->rr_heap.rkey || p->rref.addr < h->rr_heap.addr ||
	    p->rref.addr - h->rr_heap.addr >= ra->heap_len)
		goto out;
	off = p->rref.addr - h->rr_heap.addr;
	i = (uint32_t)(off >> ra->slice_shift);
	s = &h->sl[i];
	if (s->kind == K_RUN && (off & (ra->slice_len - 1)) == 0) {
		uint32_t end = i + s->run;

		for (uint32_t k = i; k < end; k++) {
			h->sl[k].kind = K_EMPTY;
			h->sl[k].run = 0;
			list_push(h, &h->empty, k);
			h->nempty++;
		}
	} else if (s->kind == K_CLASS) {
		if (off & ((1ull << s->cls) - 1))
			goto out;
		blk = (uint32_t)((off & (ra->slice_len - 1)) >> s->cls);
		b = &h->bits[(size_t)i * ra->bwords + blk / 64];
		if (!(*b & 1ull << (blk % 64)))
			goto out; /* not allocated: a double free */
		*b &= ~(1ull << (blk % 64));
		if (s->nfree++ == 0)
			list_push(h, &h->partial[s->cls], i);
		if (s->nfree == s->nblk) {
			list_del(h, &h->partial[s->cls], i);
			s->kind = K_EMPTY;
			list_push(h, &h->empty, i);
			h->nempty++;
		}
	} else {
		goto out;
	}
	ra->st.frees++;
	ret = 0;
	/* batched: past the mark, back down to half of it in one go */
	if (h->nempty > ra->keep)
		give_back(ra, h, ra->keep / 2);
out:
	pthread_mutex_unlock(&ra->lock);
	return ret;
}

/* give_all -- under lock: post the give-back of every EMPTY slice (or, @all, every slice). */
static void give_all(loco_ralloc_t *ra, bool all)
{
	for (size_t k = 0; k < ra->nhosts; k++) {
		struct ra_host *h = ra->hosts[k];

		give_back(ra, h, 0);
		if (!all || h->gone || !h->have_rr)
			continue;
		for (uint32_t i = 0; i < ra->nslices; i++) {
			if (h->sl[i].kind == K_FREE || h->sl[i].kind == K_RESV)
				continue;
			if (loco_cas(ra->scratch, junk_off(ra), &h->rr_table, (size_t)i * 8,
			             h->word, 0, ra->give_ack) != 0)
				return;
			h->sl[i].kind = K_FREE;
			ra->st.returned++;
			ra->give_seq++;
		}
	}
}

/* give_wait -- poll until no give-back is in flight, by @deadline. */
static int give_wait(loco_ralloc_t *ra, int64_t deadline)
{
	loco_waiter_t w;

	loco_waiter_init(&w, ra->m);
	while (loco_ack_outstanding(ra->give_ack) != 0) {
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	return 0;
}

int loco_ralloc_trim(loco_ralloc_t *ra, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	int ret;

	if (ra == NULL)
		return -EINVAL;
	for (;;) {
		bool left = false;

		pthread_mutex_lock(&ra->lock);
		give_all(ra, false);
		for (size_t k = 0; k < ra->nhosts; k++)
			left |= ra->hosts[k]->nempty > 0;
		pthread_mutex_unlock(&ra->lock);
		ret = give_wait(ra, deadline);
		if (ret || !left)
			return ret;
	}
}

int loco_ralloc_stats(loco_ralloc_t *ra, loco_ralloc_stats_t *out)
{
	const uint64_t *t;
	loco_ralloc_stats_t s;
	int node = -1;

	if (ra == NULL || out == NULL)
		return -EINVAL;
	pthread_mutex_lock(&ra->lock);
	s = ra->st;
	pthread_mutex_unlock(&ra->lock);
	t = loco_region_ptr(ra->table);
	s.host_used = 0;
	for (uint32_t i = 0; i < ra->nslices; i++)
		s.host_used += __atomic_load_n(&t[i], __ATOMIC_ACQUIRE) != 0;
	s.host_slices = ra->nslices;
	s.reclaimed = __atomic_load_n(&ra->reclaimed, __ATOMIC_RELAXED);
	if (numa_available() < 0 ||
	    get_mempolicy(&node, NULL, 0, loco_region_ptr(ra->heap), MPOL_F_NODE | MPOL_F_ADDR))
		node = -1;
	s.heap_numa = node;
	*out = s;
	return 0;
}

void loco_ralloc_destroy(loco_ralloc_t *ra)
{
	int64_t deadline;

	if (ra == NULL)
		return;
	deadline = obj_deadline(RA_DESTROY_NS);
	pthread_mutex_lock(&ra->refill_lock);
	if (pend_settle(ra, deadline) == 0) {
		pthread_mutex_lock(&ra->lock);
		give_all(ra, true);
		pthread_mutex_unlock(&ra->lock);
	}
	pthread_mutex_unlock(&ra->refill_lock);
	give_wait(ra, deadline);
	/* the keys wait for what is still in flight: it lands in scratch, freed below */
	loco_ack_key_destroy(ra->claim_ack);
	loco_ack_key_destroy(ra->give_ack);
	loco_object_destroy(ra->obj);
	for (size_t i = 0; i < ra->nhosts; i++)
		host_free(ra->hosts[i]);
	free(ra->hosts);
	free(ra->pend.idx);
	pthread_mutex_destroy(&ra->refill_lock);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
}
