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
 * Files: this one has the API, the shadows and the callbacks;
 * ralloc_claim.c the refills (the slow path); ralloc_impl.h their state.
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

#include "obj_util.h"
#include "ralloc_impl.h"

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

void loco_ralloc_cfg_default(loco_ralloc_cfg_t *cfg, size_t heap_len)
{
	if (cfg != NULL)
		*cfg = (loco_ralloc_cfg_t){.heap_len = heap_len, .numa_node = -1};
}

int loco_ralloc_create(loco_channel_t *ch, const char *name, const loco_ralloc_cfg_t *cfg,
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
	ret = loco_handle_alloc(ch, sizeof(*ra), (void **)&ra);
	if (ret)
		return ret;
	ra->m = loco_channel_manager(ch);
	ra->me = loco_manager_node_id(ra->m);
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
	ret = loco_ack_key_create_cfg(ra->m, &(loco_ack_key_cfg_t){.flags = LOCO_ACK_IGNORE_LEFT},
	                              &ra->give_ack);
	if (ret)
		goto err_destroy_claim;
	ret = loco_object_create(ch, name, &ra_ops, ra, &ra->obj);
	if (ret)
		goto err_destroy_give;
	ret = loco_object_agree(ra->obj, "slice_len", slice);
	if (ret == 0)
		ret = loco_object_agree(ra->obj, "heap_len", cfg->heap_len);
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
	loco_handle_free(ra);
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
	ret = ra_host_rr(ra, h);
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

	OBJ_CHECK(ra);
	if (out == NULL || len == 0)
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
		first = ra_run_claim(ra, h, n, deadline);
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
		ret = ra_refill(ra, h, deadline); /* the slow path */
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

	OBJ_CHECK(ra);
	if (p == NULL)
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
		ra_give_back(ra, h, ra->keep / 2);
out:
	pthread_mutex_unlock(&ra->lock);
	return ret;
}

/* give_all -- under lock: post the give-back of every EMPTY slice (or, @all, every slice). */
static void give_all(loco_ralloc_t *ra, bool all)
{
	for (size_t k = 0; k < ra->nhosts; k++) {
		struct ra_host *h = ra->hosts[k];

		ra_give_back(ra, h, 0);
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

	OBJ_CHECK(ra);
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

	OBJ_CHECK(ra);
	if (out == NULL)
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

	OBJ_DESTROY_CHECK(ra);
	deadline = obj_deadline(RA_DESTROY_NS);
	pthread_mutex_lock(&ra->refill_lock);
	if (ra_pend_settle(ra, deadline) == 0) {
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
	loco_handle_free(ra);
}
