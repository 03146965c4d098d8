/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * links.c -- the node -> data link table (rules in links.h) and opening
 * data links.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "links.h"
#include "log.h"

#define KEY_NODE(k) ((uint32_t)((k)&0xffffffffu))
#define KEY_GEN(k)  ((uint32_t)((k) >> 32))

static uint32_t hash(uint32_t node)
{
	return (node * 2654435761u) % LC_LINK_SLOTS;
}

/*
 * find -- @node's slot and the key it was seen with, or NULL (lock-free).
 * It probes at most max_probe + 1 slots, past tombstones and other nodes,
 * and stops at a never-used slot.
 */
static struct lc_link_slot *find(struct lc_links *t, uint32_t node, uint64_t *key)
{
	uint32_t h = hash(node), max = __atomic_load_n(&t->max_probe, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i <= max && i < LC_LINK_SLOTS; i++) {
		struct lc_link_slot *s = &t->slot[(h + i) % LC_LINK_SLOTS];
		uint64_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (KEY_NODE(k) == node) {
			*key = k;
			return s;
		}
		if (k == 0)
			return NULL;
	}
	return NULL;
}

int lc_links_init(struct lc_links *t)
{
	int ret = pthread_key_create(&t->hz_key, NULL);

	if (ret)
		return -ret;
	pthread_mutex_init(&t->hz_lock, NULL);
	/* per process and idempotent; then a remover's barrier reaches every poster */
	t->hz_membarrier =
	    syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	return 0;
}

void lc_links_fini(struct lc_links *t)
{
	struct lc_link_hazard *h, *next;

	/* no destructor: a thread's value for the deleted key is never read again */
	pthread_key_delete(t->hz_key);
	for (h = t->hz; h != NULL; h = next) {
		next = h->next;
		free(h);
	}
	t->hz = NULL;
	pthread_mutex_destroy(&t->hz_lock);
}

/*
 * hazard_new -- the calling thread's first hold: a record of a thread that
 * is gone (it held nothing when it went: a hold never outlives a post), or
 * a new one. NULL: no memory.
 */
static struct lc_link_hazard *hazard_new(struct lc_links *t)
{
	pid_t self = (pid_t)syscall(SYS_gettid), pid = getpid();
	struct lc_link_hazard *h;

	pthread_mutex_lock(&t->hz_lock);
	for (h = t->hz; h != NULL; h = h->next) {
		if (h->tid == 0 || (syscall(SYS_tgkill, pid, h->tid, 0) < 0 && errno == ESRCH))
			break;
	}
	if (h == NULL) {
		h = calloc(1, sizeof(*h));
		if (h != NULL) {
			h->next = t->hz;
			t->hz = h;
		}
	}
	if (h != NULL) {
		h->tid = self;
		if (pthread_setspecific(t->hz_key, h) != 0) {
			h->tid = 0; /* free for another thread */
			h = NULL;
		}
	}
	pthread_mutex_unlock(&t->hz_lock);
	return h;
}

/*
 * wait_posters -- after @s's key or link changed: until no poster that may
 * have seen the old one still holds @s (posting never blocks: short).
 */
static void wait_posters(struct lc_links *t, struct lc_link_slot *s)
{
	if (!t->hz_membarrier ||
	    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		__atomic_thread_fence(__ATOMIC_SEQ_CST); /* (posters fenced themselves) */
	pthread_mutex_lock(&t->hz_lock);
	for (struct lc_link_hazard *h = t->hz; h != NULL; h = h->next) {
		for (unsigned spins = 0; __atomic_load_n(&h->held, __ATOMIC_ACQUIRE) == s;
		     spins++) {
			if (spins < 256)
				lc_cpu_relax();
			else
				sched_yield();
		}
	}
	pthread_mutex_unlock(&t->hz_lock);
}

/* displacement -- how far slot @i is from the home of the node it holds. */
static uint32_t displacement(uint32_t i, uint32_t node)
{
	return (i + LC_LINK_SLOTS - hash(node)) % LC_LINK_SLOTS;
}

/* shrink_probe -- after a removal: the longest displacement of the nodes still present. */
static void shrink_probe(struct lc_links *t)
{
	uint32_t max = 0;

	for (uint32_t i = 0; i < LC_LINK_SLOTS; i++) {
		uint64_t k = __atomic_load_n(&t->slot[i].key, __ATOMIC_RELAXED);
		uint32_t d;

		if (KEY_NODE(k) == 0)
			continue;
		d = displacement(i, KEY_NODE(k));
		if (d > max)
			max = d;
	}
	/* every node present is within @max of its home: lookups may stop there */
	__atomic_store_n(&t->max_probe, max, __ATOMIC_RELEASE);
}

/* take_slot -- a free slot (never used or a tombstone) for @node, keyed to it; or NULL. */
static struct lc_link_slot *take_slot(struct lc_links *t, uint32_t node)
{
	uint32_t h = hash(node);

	for (uint32_t i = 0; i < LC_LINK_SLOTS; i++) {
		struct lc_link_slot *s = &t->slot[(h + i) % LC_LINK_SLOTS];
		uint64_t k = __atomic_load_n(&s->key, __ATOMIC_RELAXED);

		if (KEY_NODE(k) != 0)
			continue;
		/* lookups must probe this far before the node appears here */
		if (i > __atomic_load_n(&t->max_probe, __ATOMIC_RELAXED))
			__atomic_store_n(&t->max_probe, i, __ATOMIC_RELEASE);
		/* a new generation: a poster that saw the slot's old key sees the change */
		__atomic_store_n(&s->key, (uint64_t)(KEY_GEN(k) + 1u) << 32 | node,
		                 __ATOMIC_SEQ_CST);
		t->nodes++;
		return s;
	}
	return NULL;
}

struct fab_link *lc_links_set(struct lc_links *t, uint32_t node, struct fab_link *link)
{
	struct lc_link_slot *s;
	struct fab_link *old;
	uint64_t key = 0;

	if (node == 0)
		return NULL;
	s = find(t, node, &key);
	if (s == NULL && link == NULL)
		return NULL;
	if (s == NULL) {
		s = take_slot(t, node);
		if (s == NULL) {
			lc_log_err("manager: no room for a link to node %u (%u nodes linked)", node,
			           t->nodes);
			return NULL;
		}
	}
	if (link != NULL) /* before the link: whoever sees the new link sees its serial */
		__atomic_store_n(&s->serial, __atomic_add_fetch(&t->serials, 1, __ATOMIC_RELAXED),
		                 __ATOMIC_RELEASE);
	old = __atomic_exchange_n(&s->link, link, __ATOMIC_SEQ_CST);
	/* a poster that loaded @old named @s in its record first: wait until it has posted */
	if (old != NULL)
		wait_posters(t, s);
	if (link == NULL) {
		/*
		 * Free the slot: the tombstone keeps the generation. A poster that
		 * names the slot from now on sees the key changed and loads no link;
		 * one that saw it unchanged loaded NULL (stored above).
		 */
		__atomic_store_n(&s->key, (uint64_t)KEY_GEN(key) << 32, __ATOMIC_SEQ_CST);
		t->nodes--;
		shrink_probe(t);
	}
	return old;
}

/* cache_of -- what lc_links_hold_cached() keeps of slot @s seen with @key: its index + 1 and generation. */
static uint64_t cache_of(struct lc_links *t, struct lc_link_slot *s, uint64_t key)
{
	return s == NULL ? 0 : (uint64_t)KEY_GEN(key) << 32 | (uint64_t)(s - t->slot + 1);
}

/*
 * hold_slot -- name @s (seen keyed @key) in this thread's record, then load
 * its link if the key is still @key (else *@link stays NULL).
 */
static int hold_slot(struct lc_links *t, struct lc_link_slot *s, uint64_t key,
                     struct fab_link **link, struct lc_link_hazard **hz)
{
	struct lc_link_hazard *h = pthread_getspecific(t->hz_key);

	if (h == NULL && (h = hazard_new(t)) == NULL)
		return -ENOMEM;
	*hz = h;
	/* named before the loads: pairs with wait_posters()'s barrier */
	if (t->hz_membarrier) {
		__atomic_store_n(&h->held, s, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST); /* the store stays before the loads */
	} else {
		__atomic_store_n(&h->held, s, __ATOMIC_SEQ_CST);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	if (__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) != key)
		return 0; /* freed or given to another node since: no link through it */
	*link = __atomic_load_n(&s->link, __ATOMIC_ACQUIRE);
	return 0;
}

int lc_links_hold(struct lc_links *t, uint32_t node, struct fab_link **link,
                  struct lc_link_hazard **hz)
{
	struct lc_link_slot *s;
	uint64_t key = 0;

	*link = NULL;
	*hz = NULL;
	if (node == 0)
		return 0; /* (no node's id: it would name the free slots) */
	s = find(t, node, &key);
	return s == NULL ? 0 : hold_slot(t, s, key, link, hz);
}

int lc_links_hold_cached(struct lc_links *t, uint32_t node, uint64_t *cache, struct fab_link **link,
                         struct lc_link_hazard **hz)
{
	uint64_t c = __atomic_load_n(cache, __ATOMIC_RELAXED), key = 0;
	uint32_t i = (uint32_t)(c & 0xffffffffu);
	struct lc_link_slot *s;
	int ret;

	*link = NULL;
	*hz = NULL;
	if (node == 0)
		return 0;
	if (i >= 1 && i <= LC_LINK_SLOTS) {
		s = &t->slot[i - 1];
		key = (uint64_t)KEY_GEN(c) << 32 | node;
		if (__atomic_load_n(&s->key, __ATOMIC_RELAXED) == key) {
			ret = hold_slot(t, s, key, link, hz);
			if (ret || *link != NULL)
				return ret;
			lc_links_release(*hz); /* re-keyed under us, or no link now: probe */
			*hz = NULL;
		}
	}
	s = find(t, node, &key);
	c = cache_of(t, s, key);
	__atomic_store_n(cache, c, __ATOMIC_RELAXED);
	return s == NULL ? 0 : hold_slot(t, s, key, link, hz);
}

uint64_t lc_links_cache(struct lc_links *t, uint32_t node)
{
	struct lc_link_slot *s;
	uint64_t key = 0;

	if (node == 0)
		return 0;
	s = find(t, node, &key); /* (before cache_of() reads @key) */
	return cache_of(t, s, key);
}

int lc_links_serial(struct lc_links *t, uint32_t node, uint64_t *out)
{
	struct lc_link_slot *s;
	uint64_t key = 0, v;

	if (node == 0 || (s = find(t, node, &key)) == NULL ||
	    __atomic_load_n(&s->link, __ATOMIC_ACQUIRE) == NULL)
		return -ENOTCONN;
	v = __atomic_load_n(&s->serial, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) != key)
		return -ENOTCONN; /* freed or given to another node meanwhile */
	*out = v;
	return 0;
}

int lc_links_has(struct lc_links *t, uint32_t node)
{
	struct lc_link_hazard *h;
	struct fab_link *link;

	if (lc_links_hold(t, node, &link, &h) != 0)
		return find(t, node, &(uint64_t){0}) != NULL; /* (no record: a snapshot anyway) */
	lc_links_release(h);
	return link != NULL;
}

int lc_link_open(struct fab *fab, const char *fab_addr, const struct lc_link_proof *proof,
                 uint64_t counter, int timeout_ms, struct fab_link **out)
{
	uint8_t priv[LC_LINK_PRIV_LEN];
	struct fab_addr fa;
	int ret;

	lc_link_priv_make(proof, counter, priv);
	ret = fab_addr_parse(fab_addr, 0, &fa);
	if (ret == 0)
		ret = fab_connect(fab, &fa, proof->to_node, priv, sizeof(priv), timeout_ms, out);
	if (ret)
		lc_log_warn("manager: data link to node %u (%s) failed: %s", proof->to_node,
		            fab_addr, strerror(-ret));
	return ret;
}
