/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * region.c -- objects and their registered regions (chan.h has the
 * structures). loco_region_remote() is on the data path: it reads a
 * peer's sequence-locked reference without a lock or a name lookup.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "handle.h"
#include "log.h"

/*
 * The longest region: one fabric request moves at most 4 GiB - 1 bytes
 * (struct fab_wr's u32 length), so a region is at most 4 GiB; this also
 * keeps the arena's rounding far from SIZE_MAX.
 */
#define LC_REGION_MAX (4ull << 30)

/* a destroyed object's regions kept registered (region_bury): at most these, the oldest go first */
#define LC_GRAVES_MAX   64u
#define LC_GRAVES_BYTES (16u << 20)

static int name_ok(const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;

	return n > 0 && n <= LOCO_NAME_MAX && strchr(name, '/') == NULL;
}

int loco_object_create(loco_channel_t *ch, const char *name, const struct loco_object_ops *ops,
                       void *arg, loco_object_t **out)
{
	loco_object_t *o;
	loco_manager_t *m;
	int ret = lc_handle_ok(ch);

	if (ret)
		return ret;
	if (out == NULL || !name_ok(name))
		return -EINVAL;
	m = ch->m;
	o = lc_handle_alloc(m, sizeof(*o));
	if (o == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	for (loco_object_t *x = ch->objects; x != NULL; x = x->next) {
		if (strcmp(x->name, name) == 0) {
			pthread_mutex_unlock(&m->lock);
			lc_handle_bury(o);
			return -EEXIST;
		}
	}
	o->ch = ch;
	snprintf(o->name, sizeof(o->name), "%s", name);
	if (ops != NULL)
		o->ops = *ops;
	o->arg = arg;
	o->seq = lc_chan_seq_next(m);
	o->next = ch->objects;
	ch->objects = o;
	pthread_mutex_unlock(&m->lock);
	*out = o;
	return 0;
}

/* region_unpublish -- no peer reference names @r any more. m->lock held. */
static void region_unpublish(loco_channel_t *ch, struct loco_region *r)
{
	if (r->idx == LC_IDX_NONE)
		return; /* unlisted: never had one */
	struct lc_peer *p;

	for (uint32_t i = 0; (p = lc_peer_next(ch, &i)) != NULL;)
		lc_peer_rref_set(p, r->idx, 0, 0, 0);
	ch->region_used[r->idx / 64] &= ~(1ull << (r->idx % 64));
	ch->nentries--;
}

static void region_free(loco_manager_t *m, struct loco_region *r)
{
	int ret = fab_mr_dereg(r->mr);

	if (ret)
		lc_log_warn("manager: deregistering region %s: %s", r->full, strerror(-ret));
	if (!r->foreign)
		lc_mem_free(&m->mem, r->ptr, r->len);
	free(r);
}

/*
 * region_bury -- a destroyed object's region, peers told: keep it
 * registered for two failure bounds before it goes. The announcement that
 * it is gone and a peer's WRITE into it cross: one posted before the peer
 * read the announcement lands after it, and would meet a deregistered key,
 * a remote access error, which on RDMA (and so on every fabric) breaks the
 * data link with that peer for every channel. Landing in memory nobody
 * reads is harmless. Within two failure bounds a live peer has read the
 * announcement (the control connection is in order, and it answers our
 * heartbeats), and its WRITEs in flight have landed or failed. At most
 * LC_GRAVES_MAX regions and LC_GRAVES_BYTES are kept (a program that
 * churns objects would hold every key and much memory for that long): the
 * oldest go first, onto *@evicted, for the caller to free without the
 * lock; a crossing WRITE into one of those is refused as before, and the
 * manager rebuilds the link. m->lock.
 */
static void region_bury(loco_manager_t *m, struct loco_region *r, struct loco_region **evicted)
{
	r->due_ns = lc_now_ns() + 2ull * m->cfg.fail_timeout_ms * 1000000ull;
	r->next = m->graves.head;
	__atomic_store_n(&m->graves.head, r, __ATOMIC_RELAXED); /* lc_graves_reap's peek */
	m->graves.n++;
	m->graves.bytes += r->len;
	while (m->graves.head != NULL &&
	       (m->graves.n > LC_GRAVES_MAX || m->graves.bytes > LC_GRAVES_BYTES)) {
		struct loco_region **pp = &m->graves.head, *old;

		while ((*pp)->next != NULL)
			pp = &(*pp)->next;
		old = *pp;
		*pp = NULL;
		m->graves.n--;
		m->graves.bytes -= old->len;
		old->next = *evicted;
		*evicted = old;
	}
}

void lc_graves_reap(loco_manager_t *m, int all)
{
	struct loco_region *due = NULL, **pp;
	uint64_t now;

	if (!all && __atomic_load_n(&m->graves.head, __ATOMIC_RELAXED) == NULL)
		return; /* the usual case, every progress turn: no lock */
	now = lc_now_ns();
	pthread_mutex_lock(&m->lock);
	for (pp = &m->graves.head; *pp != NULL;) {
		struct loco_region *r = *pp;

		if (all || now >= r->due_ns) {
			*pp = r->next;
			m->graves.n--;
			m->graves.bytes -= r->len;
			r->next = due;
			due = r;
		} else {
			pp = &r->next;
		}
	}
	pthread_mutex_unlock(&m->lock);
	while (due != NULL) {
		struct loco_region *r = due;

		due = r->next;
		region_free(m, r);
	}
}

void loco_object_destroy(loco_object_t *obj)
{
	struct loco_region *regions, *evicted = NULL;
	loco_channel_t *ch;
	loco_manager_t *m;

	if (obj == NULL)
		return;
	if (lc_handle_ok(obj)) {
		lc_log_err("misuse: loco_object_destroy() of an object destroyed already (or of a "
		           "finished manager's): ignored");
		return;
	}
	ch = obj->ch;
	m = ch->m;
	pthread_mutex_lock(&m->lock);
	for (loco_object_t **pp = &ch->objects; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == obj) {
			*pp = obj->next;
			break;
		}
	}
	lc_chan_object_gone(m, obj); /* a callback of it running now returns first */
	for (struct loco_region *r = obj->regions; r != NULL; r = r->next)
		region_unpublish(ch, r);
	ch->nentries -= obj->nparams; /* unlinked above: no longer announced */
	/* peers forget its regions before they are deregistered (region_bury) */
	if (ch->joined && (obj->regions != NULL || obj->nparams > 0))
		lc_chan_announce(m, ch, NULL, 0, 1);
	regions = obj->regions;
	obj->regions = NULL;
	while (ch->joined && regions != NULL) {
		struct loco_region *r = regions;

		regions = r->next;
		region_bury(m, r, &evicted);
	}
	pthread_mutex_unlock(&m->lock);
	if (regions == NULL)
		regions = evicted; /* what was buried longest, freed now */
	while (regions != NULL) {  /* never announced (no peer has them), or evicted */
		struct loco_region *r = regions;

		regions = r->next;
		region_free(m, r);
	}
	lc_handle_bury(obj);
}

loco_channel_t *loco_object_channel(const loco_object_t *obj)
{
	return lc_handle_ok(obj) == 0 ? obj->ch : NULL;
}

int loco_object_status(const loco_object_t *obj)
{
	int bad = lc_handle_ok(obj);

	if (bad)
		return bad;
	/* pairs with the release store of loco_channel_join() */
	if (!__atomic_load_n(&obj->ch->joined, __ATOMIC_ACQUIRE))
		return -LOCO_ENOTJOINED;
	bad = __atomic_load_n(&obj->bad, __ATOMIC_ACQUIRE);
	return bad ? -bad : 0;
}

int loco_object_agree(loco_object_t *obj, const char *key, uint64_t value)
{
	loco_channel_t *ch;
	loco_manager_t *m;
	unsigned k;
	int ret = lc_handle_ok(obj);

	if (ret)
		return ret;
	if (!name_ok(key) || strlen(obj->name) + 1 + strlen(key) > LOCO_NAME_MAX)
		return -EINVAL;
	ch = obj->ch;
	m = ch->m;
	pthread_mutex_lock(&m->lock);
	for (k = 0; k < obj->nparams; k++)
		if (strcmp(obj->params[k].key, key) == 0)
			break;
	if (k < obj->nparams) {
		pthread_mutex_unlock(&m->lock);
		return obj->params[k].value == value ? 0 : -EEXIST;
	}
	if (obj->nparams == LOCO_AGREE_MAX || lc_chan_entries(ch) >= LC_CHAN_ENTRIES_MAX) {
		pthread_mutex_unlock(&m->lock);
		return -ENOSPC;
	}
	snprintf(obj->params[k].key, sizeof(obj->params[k].key), "%s", key);
	obj->params[k].value = value;
	obj->nparams++;
	ch->nentries++;
	/* peers that announced the object before us: check now; later ones, when they do */
	struct lc_peer *p;

	for (uint32_t i = 0; (p = lc_peer_next(ch, &i)) != NULL;)
		lc_chan_agree_check(ch, p, obj);
	if (ch->joined) /* they check it against theirs */
		lc_chan_announce(m, ch, NULL, 0, 1);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/*
 * region_room -- -EEXIST for a taken name, -ENOSPC when the channel
 * announces LC_CHAN_ENTRIES_MAX entries already (a @listed region would
 * be one more). m->lock held.
 */
static int region_room(const loco_object_t *obj, const char *full, int listed)
{
	/* "object/region": only @obj's own regions can have its full name */
	for (const struct loco_region *x = obj->regions; x != NULL; x = x->next)
		if (strcmp(x->full, full) == 0)
			return -EEXIST;
	return !listed || lc_chan_entries(obj->ch) < LC_CHAN_ENTRIES_MAX ? 0 : -ENOSPC;
}

/* region_index -- the lowest free local index (region_room() said there is one). m->lock. */
static uint32_t region_index(loco_channel_t *ch)
{
	for (uint32_t w = 0; w < LC_RR_PAGES; w++) {
		if (ch->region_used[w] != UINT64_MAX) {
			uint32_t b = (uint32_t)__builtin_ctzll(~ch->region_used[w]);

			ch->region_used[w] |= 1ull << b;
			return w * 64 + b;
		}
	}
	return LC_IDX_NONE; /* never: fewer than LC_CHAN_ENTRIES_MAX are listed */
}

/* region_publish -- link @r into its object, resolve it against every peer. m->lock held. */
static void region_publish(loco_channel_t *ch, struct loco_region *r)
{
	r->idx = (r->access & LOCO_ACCESS_UNLISTED) ? LC_IDX_NONE : region_index(ch);
	ch->nentries += r->idx != LC_IDX_NONE;
	r->next = r->obj->regions;
	r->obj->regions = r;
	struct lc_peer *p;

	for (uint32_t i = 0; r->idx != LC_IDX_NONE && (p = lc_peer_next(ch, &i)) != NULL;) {
		if (__atomic_load_n(&p->present, __ATOMIC_RELAXED))
			lc_rref_resolve(p, r);
	}
}

static unsigned fab_access(unsigned access)
{
	unsigned fa = FAB_ACCESS_LOCAL_WRITE;

	if (access & LOCO_ACCESS_READ)
		fa |= FAB_ACCESS_REMOTE_READ;
	if (access & LOCO_ACCESS_WRITE)
		fa |= FAB_ACCESS_REMOTE_WRITE;
	if (access & LOCO_ACCESS_ATOMIC)
		fa |= FAB_ACCESS_REMOTE_ATOMIC;
	return fa;
}

int loco_region_create(loco_object_t *obj, const char *name, size_t len, unsigned access,
                       loco_region_t **out)
{
	loco_manager_t *m;
	struct loco_region *r;
	int ret = lc_handle_ok(obj), n;

	if (ret)
		return ret;
	if (out == NULL || !name_ok(name) || len == 0 || len > LC_REGION_MAX ||
	    (access & ~(unsigned)(LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC |
	                          LOCO_ACCESS_UNLISTED)))
		return -EINVAL;
	m = obj->ch->m;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	n = snprintf(r->full, sizeof(r->full), "%s/%s", obj->name, name);
	if (n < 0 || n > LOCO_NAME_MAX) {
		free(r);
		return -EINVAL;
	}
	/* check the name and the channel's room before allocating anything */
	pthread_mutex_lock(&m->lock);
	ret = region_room(obj, r->full, !(access & LOCO_ACCESS_UNLISTED));
	pthread_mutex_unlock(&m->lock);
	if (ret)
		goto err_free;
	ret = lc_mem_alloc(&m->mem, len, &r->ptr);
	if (ret && __atomic_load_n(&m->graves.head, __ATOMIC_RELAXED) != NULL) {
		lc_graves_reap(m, 1); /* destroyed objects' memory before an error */
		ret = lc_mem_alloc(&m->mem, len, &r->ptr);
	}
	if (ret)
		goto err_free;
	memset(r->ptr, 0, len);
	ret = fab_mr_reg(m->fab, r->ptr, len, fab_access(access), &r->mr);
	if (ret && __atomic_load_n(&m->graves.head, __ATOMIC_RELAXED) != NULL) {
		lc_graves_reap(m, 1); /* their keys before an error */
		ret = fab_mr_reg(m->fab, r->ptr, len, fab_access(access), &r->mr);
	}
	if (ret) {
		lc_log_err("manager: cannot register %zu bytes for %s: %s", len, r->full,
		           strerror(-ret));
		goto err_mem;
	}
	r->obj = obj;
	r->len = len;
	r->access = access;

	pthread_mutex_lock(&m->lock);
	/* again: another thread may have raced us */
	ret = region_room(obj, r->full, !(access & LOCO_ACCESS_UNLISTED));
	if (ret) {
		pthread_mutex_unlock(&m->lock);
		goto err_dereg;
	}
	region_publish(obj->ch, r);
	if (r->idx != LC_IDX_NONE) {
		/* peers that announced the object before us: check its length now */
		struct lc_peer *p;

		for (uint32_t i = 0; (p = lc_peer_next(obj->ch, &i)) != NULL;)
			lc_chan_agree_check(obj->ch, p, obj);
		if (obj->ch->joined) /* late region: tell the peers */
			lc_chan_announce(m, obj->ch, NULL, 0, 1);
	}
	pthread_mutex_unlock(&m->lock);
	*out = r;
	return 0;

err_dereg:
	fab_mr_dereg(r->mr);
err_mem:
	lc_mem_free(&m->mem, r->ptr, len);
err_free:
	free(r);
	return ret;
}

/* mapped -- whether every page of [@ptr, @ptr + @len) is mapped in this process */
static int mapped(const void *ptr, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t s = (uintptr_t)ptr & ~(uintptr_t)(pg - 1), e = (uintptr_t)ptr + len;
	unsigned char vec[64]; /* pages per mincore(2) call */

	/* mincore(2) fails with ENOMEM on a range with an unmapped page */
	for (; s < e; s += sizeof(vec) * pg) {
		size_t n = e - s < sizeof(vec) * pg ? e - s : sizeof(vec) * pg;

		if (mincore((void *)s, n, vec) != 0 && errno == ENOMEM)
			return 0;
	}
	return 1;
}

int loco_region_register(loco_object_t *obj, void *ptr, size_t len, unsigned access,
                         loco_region_t **out)
{
	static unsigned long serial; /* names the regions apart (atomic) */
	loco_manager_t *m;
	struct loco_region *r;
	int ret = lc_handle_ok(obj);

	if (ret)
		return ret;
	if (out == NULL || ptr == NULL || len == 0 || len > LC_REGION_MAX ||
	    (uintptr_t)ptr + len < (uintptr_t)ptr ||
	    (access & ~(unsigned)(LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC |
	                          LOCO_ACCESS_UNLISTED)))
		return -EINVAL;
	if (!mapped(ptr, len))
		return -EFAULT;
	m = obj->ch->m;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	snprintf(r->full, sizeof(r->full), "%.*s/@%lu", LOCO_NAME_MAX - 24, obj->name,
	         __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
	ret = fab_mr_reg(m->fab, ptr, len, fab_access(access), &r->mr);
	if (ret) {
		lc_log_warn("manager: cannot register %zu bytes at %p for %s: %s", len, ptr,
		            obj->name, strerror(-ret));
		free(r);
		return ret;
	}
	r->obj = obj;
	r->ptr = ptr;
	r->len = len;
	r->access = access | LOCO_ACCESS_UNLISTED; /* the caller's memory is never announced */
	r->foreign = 1;
	pthread_mutex_lock(&m->lock);
	region_publish(obj->ch, r);
	pthread_mutex_unlock(&m->lock);
	*out = r;
	return 0;
}

int loco_region_unregister(loco_region_t *r)
{
	loco_manager_t *m;
	struct loco_region **pp;

	if (r == NULL || !r->foreign)
		return -EINVAL;
	m = r->obj->ch->m;
	pthread_mutex_lock(&m->lock);
	for (pp = &r->obj->regions; *pp != NULL && *pp != r; pp = &(*pp)->next)
		;
	if (*pp == r)
		*pp = r->next;
	pthread_mutex_unlock(&m->lock);
	region_free(m, r); /* deregistered now: the caller said no peer reaches it any more */
	return 0;
}

int loco_region_valid(const loco_region_t *r)
{
	if (r == NULL)
		return -EINVAL;
	return !r->foreign || mapped(r->ptr, r->len) ? 0 : -EFAULT;
}

void *loco_region_ptr(const loco_region_t *r)
{
	return r ? r->ptr : NULL;
}

size_t loco_region_len(const loco_region_t *r)
{
	return r ? r->len : 0;
}

int loco_region_remote(const loco_region_t *r, uint32_t node, loco_rref_t *out)
{
	loco_channel_t *ch;
	loco_manager_t *m;
	struct lc_rref *rr;
	struct lc_peer *p;
	int ret;

	if (r == NULL || out == NULL)
		return -EINVAL;
	ch = r->obj->ch;
	m = ch->m;
	ret = loco_object_status(r->obj); /* not joined, or a peer disagreed: nowhere */
	if (ret)
		return ret;
	if (r->idx == LC_IDX_NONE)
		return -ENOENT; /* unlisted: no peer knows it (loco_region_rref()) */
	if (node == m->node_id) {
		if (!lc_linkin_has_self(m))
			return -ENOENT;
		/* our own copy, reached through our own NIC */
		*out = (loco_rref_t){
		    .node = node, .rkey = r->mr->rkey, .addr = (uintptr_t)r->ptr, .len = r->len};
		return 0;
	}
	p = lc_peer_get(ch, node);
	if (p == NULL || !__atomic_load_n(&p->present, __ATOMIC_ACQUIRE))
		return -ENOENT;
	rr = lc_peer_rref(p, r->idx);
	if (rr == NULL)
		return -ENOENT; /* its page was never written: unresolved */
	return lc_rref_read(rr, node, out);
}

int loco_region_rref(const loco_region_t *r, loco_rref_t *out)
{
	if (r == NULL || out == NULL)
		return -EINVAL;
	*out = (loco_rref_t){.node = r->obj->ch->m->node_id,
	                     .rkey = r->mr->rkey,
	                     .addr = (uintptr_t)r->ptr,
	                     .len = r->len};
	return 0;
}
