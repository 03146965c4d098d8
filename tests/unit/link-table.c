/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * link-table.c -- the node -> data link table (liboco/links.c): node ids
 * come back for good.
 *
 *   distinct_ids    4,000 distinct node ids, each linked and unlinked in
 *                   turn, with up to 257 linked at once (LC_MAX_NODES
 *                   members and this node): every lookup finds its own
 *                   link (a table whose slots kept their node for the
 *                   manager's life ran out after LC_LINK_SLOTS ids)
 *   incarnations    one id relinked 10,000 times, with a new link each time
 *   probe_bound     after any churn, lookups probe a short run: max_probe
 *                   stays far below the table's size
 *   concurrent      2 posters hold and release links of ids that collide
 *                   (same home slot) while the writer links, unlinks and
 *                   re-keys their slots: a poster never gets another
 *                   node's link, nor one the writer has closed; with
 *                   membarrier(2) (posters store their record plainly) and
 *                   without (posters fence)
 *   records_reused  a posting thread's hazard record serves the next thread
 *                   once it is gone: 200 threads in turn leave one record
 *   cached          lc_links_hold_cached() (a bound handle's post): the kept
 *                   slot while the node has it; after the node moved to
 *                   another slot, left, or for a slot kept from another
 *                   table or garbage, the probe's answer (and the cache
 *                   follows). The concurrent posters use it every other hold.
 *
 * Thread safety: the table's rules (links.h): one writer, posters on any thread.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "links.h"

#define IDS       4000u
#define AT_ONCE   257u
#define COLLIDERS 16u   /* ids sharing one home slot, for the concurrent test */
#define ROUNDS    20000 /* writer rounds of the concurrent test */

/* A fake link per (node, incarnation): posters check it is theirs and still open. */
struct fake {
	struct fab_link link; /* first: the table holds &fake->link */
	uint32_t node;
	int closed; /* atomic */
};

static struct lc_links *table_new(void)
{
	struct lc_links *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	assert_int_equal(lc_links_init(t), 0);
	return t;
}

static void table_free(struct lc_links *t)
{
	lc_links_fini(t);
	free(t);
}

/* hold -- lc_links_hold()'s link (it must not fail here); *@hz for the release. */
static struct fab_link *hold(struct lc_links *t, uint32_t node, struct lc_link_hazard **hz)
{
	struct fab_link *l;

	assert_int_equal(lc_links_hold(t, node, &l, hz), 0);
	return l;
}

static void distinct_ids(void **state)
{
	struct lc_links *t = table_new();
	static struct fake f[IDS + 1];
	struct lc_link_hazard *s;

	(void)state;
	for (uint32_t id = 1; id <= IDS; id++) {
		f[id].node = id;
		assert_null(lc_links_set(t, id, &f[id].link));
		if (id > AT_ONCE) /* the oldest leaves: AT_ONCE linked at once */
			assert_ptr_equal(lc_links_set(t, id - AT_ONCE, NULL),
			                 &f[id - AT_ONCE].link);
		for (uint32_t k = id > AT_ONCE ? id - AT_ONCE + 1 : 1; k <= id; k += 37) {
			assert_ptr_equal(hold(t, k, &s), &f[k].link);
			lc_links_release(s);
		}
		assert_ptr_equal(hold(t, id, &s), &f[id].link);
		lc_links_release(s);
		if (id > AT_ONCE)
			assert_false(lc_links_has(t, id - AT_ONCE));
	}
	assert_int_equal(t->nodes, AT_ONCE);
	for (uint32_t id = IDS - AT_ONCE + 1; id <= IDS; id++)
		assert_ptr_equal(lc_links_set(t, id, NULL), &f[id].link);
	assert_int_equal(t->nodes, 0);
	assert_int_equal(t->max_probe, 0);
	assert_false(lc_links_has(t, 1));
	assert_false(lc_links_has(t, IDS));
	table_free(t);
}

static void incarnations(void **state)
{
	struct lc_links *t = table_new();
	struct fake a = {.node = 7}, b = {.node = 7};
	struct lc_link_hazard *s;

	(void)state;
	for (int i = 0; i < 10000; i++) {
		struct fake *now = i % 2 ? &b : &a;

		assert_null(lc_links_set(t, 7, &now->link));
		assert_ptr_equal(hold(t, 7, &s), &now->link);
		lc_links_release(s);
		/* a neighbour comes and goes too, so slots are re-keyed between ids */
		assert_null(lc_links_set(t, 7 + LC_LINK_SLOTS, &a.link));
		assert_ptr_equal(lc_links_set(t, 7, NULL), &now->link);
		assert_null(hold(t, 7, &s));
		lc_links_release(s);
		assert_ptr_equal(lc_links_set(t, 7 + LC_LINK_SLOTS, NULL), &a.link);
	}
	assert_int_equal(t->nodes, 0);
	table_free(t);
}

static void probe_bound(void **state)
{
	struct lc_links *t = table_new();
	static struct fake f[AT_ONCE];
	uint64_t rnd = 88172645463325252ull;
	uint32_t ids[AT_ONCE];

	(void)state;
	for (uint32_t i = 0; i < AT_ONCE; i++) {
		ids[i] = i + 1;
		assert_null(lc_links_set(t, ids[i], &f[i].link));
	}
	for (int round = 0; round < 200000; round++) {
		uint32_t i;

		rnd ^= rnd << 13;
		rnd ^= rnd >> 7;
		rnd ^= rnd << 17;
		i = (uint32_t)(rnd % AT_ONCE);
		assert_ptr_equal(lc_links_set(t, ids[i], NULL), &f[i].link);
		ids[i] = (uint32_t)(rnd >> 32) | 1u; /* any id, most of them new */
		if (lc_links_has(t, ids[i])) {
			ids[i] = (uint32_t)round + 1u; /* (taken by another entry) */
			if (lc_links_has(t, ids[i]))
				ids[i] = UINT32_MAX - (uint32_t)round;
		}
		assert_null(lc_links_set(t, ids[i], &f[i].link));
	}
	for (uint32_t i = 0; i < AT_ONCE; i++) {
		struct lc_link_hazard *s;

		assert_ptr_equal(hold(t, ids[i], &s), &f[i].link);
		lc_links_release(s);
	}
	/* 257 nodes in 1,024 slots: runs stay short, tombstones or not */
	assert_true(t->max_probe < 64);
	table_free(t);
}

/* ---- concurrent: posters against a writer that re-keys slots ---------------------- */

struct conc {
	struct lc_links *t;
	uint32_t ids[COLLIDERS];
	int stop; /* atomic */
	unsigned long held, wrong;
};

static void *poster(void *arg)
{
	struct conc *c = arg;
	unsigned long held = 0, wrong = 0;
	uint64_t cache[COLLIDERS] = {0}; /* as bound handles keep them */

	for (unsigned i = 0; !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE); i++) {
		uint32_t id = c->ids[i % COLLIDERS];
		struct lc_link_hazard *s;
		struct fab_link *l;
		int ret = (i / COLLIDERS) % 2
		              ? lc_links_hold_cached(c->t, id, &cache[i % COLLIDERS], &l, &s)
		              : lc_links_hold(c->t, id, &l, &s);

		if (ret != 0) {
			wrong++; /* (no record: cmocka cannot fail from this thread) */
			continue;
		}
		if (l != NULL) {
			struct fake *f = (struct fake *)l;

			held++;
			/* ours, and not closed while held (a while: a post takes time) */
			for (unsigned k = 0; k < i % 64; k++)
				lc_cpu_relax();
			if (f->node != id || __atomic_load_n(&f->closed, __ATOMIC_SEQ_CST))
				wrong++;
		}
		lc_links_release(s);
	}
	__atomic_add_fetch(&c->held, held, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->wrong, wrong, __ATOMIC_RELAXED);
	return NULL;
}

/* churn -- @f is linked as its node, then unlinked and "closed" once no poster holds it. */
static void churn(struct lc_links *t, struct fake *f, int twice)
{
	for (int k = 0; k < (twice ? 2 : 1); k++) {
		__atomic_store_n(&f->closed, 0, __ATOMIC_SEQ_CST); /* opened before it is linked */
		assert_null(lc_links_set(t, f->node, &f->link));
		assert_ptr_equal(lc_links_set(t, f->node, NULL), &f->link);
		__atomic_store_n(&f->closed, 1, __ATOMIC_SEQ_CST); /* no poster holds it now */
	}
}

static void concurrent_run(int membarrier)
{
	static struct fake f[COLLIDERS];
	struct conc c = {.t = table_new()};
	const uint32_t half = COLLIDERS / 2;
	pthread_t th[2];

	if (!membarrier)
		c.t->hz_membarrier = 0; /* as on a kernel without it */
	else if (!c.t->hz_membarrier)
		skip(); /* (this kernel has no membarrier(2)) */
	memset(f, 0, sizeof(f));
	for (uint32_t i = 0; i < COLLIDERS; i++) {
		c.ids[i] = 5 + i * LC_LINK_SLOTS; /* one home slot for all */
		f[i].node = c.ids[i];
	}
	/* the second half stays linked (until the writer moves one), the first half churns */
	for (uint32_t i = half; i < COLLIDERS; i++)
		assert_null(lc_links_set(c.t, c.ids[i], &f[i].link));
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, poster, &c), 0);
	for (int round = 0; round < ROUNDS; round++) {
		/* the churning ids take turns in the same free slot: it is re-keyed every time */
		churn(c.t, &f[(uint32_t)round % half], round % 3 == 0);
		if (round % 50 == 0) { /* a resident leaves and comes back: its slot moves */
			struct fake *r = &f[half + (uint32_t)(round / 50) % half];

			assert_ptr_equal(lc_links_set(c.t, r->node, NULL), &r->link);
			__atomic_store_n(&r->closed, 1, __ATOMIC_SEQ_CST);
			churn(c.t, &f[(uint32_t)(round + 1) % half], 0); /* takes its slot */
			__atomic_store_n(&r->closed, 0, __ATOMIC_SEQ_CST);
			assert_null(lc_links_set(c.t, r->node, &r->link));
		}
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	print_message("concurrent (%s): %lu holds found a link, %lu wrong\n",
	              membarrier ? "membarrier" : "fences", c.held, c.wrong);
	assert_int_equal(c.wrong, 0);
	assert_true(c.held > 0);
	assert_int_equal(c.t->nodes, half);
	table_free(c.t);
}

static void concurrent(void **state)
{
	(void)state;
	concurrent_run(1);
}

static void concurrent_fences(void **state)
{
	(void)state;
	concurrent_run(0);
}

struct one_hold {
	struct lc_links *t;
	struct lc_link_hazard *hz;
};

static void *one_hold(void *arg)
{
	struct one_hold *o = arg;
	struct fab_link *l = NULL;

	if (lc_links_hold(o->t, 9, &l, &o->hz) == 0 && l != NULL)
		lc_links_release(o->hz);
	else
		o->hz = NULL;
	return NULL;
}

static void records_reused(void **state)
{
	struct lc_links *t = table_new();
	struct fake f = {.node = 9};
	struct lc_link_hazard *first = NULL;
	unsigned records = 0;

	(void)state;
	assert_null(lc_links_set(t, 9, &f.link));
	for (int i = 0; i < 200; i++) {
		struct one_hold o = {.t = t};
		pthread_t th;

		assert_int_equal(pthread_create(&th, NULL, one_hold, &o), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_non_null(o.hz);
		if (first == NULL)
			first = o.hz;
		assert_ptr_equal(o.hz, first);
		/*
		 * Joined, but its id lives on until the kernel has released the
		 * task (pthread_join() returns at the exit's tid clear, before):
		 * once tgkill() says ESRCH the next thread takes the same record.
		 */
		for (int k = 0; k < 10000 && !(syscall(SYS_tgkill, getpid(), first->tid, 0) < 0 &&
		                               errno == ESRCH);
		     k++)
			usleep(100);
	}
	for (struct lc_link_hazard *h = t->hz; h != NULL; h = h->next)
		records++;
	assert_int_equal(records, 1);
	assert_ptr_equal(lc_links_set(t, 9, NULL), &f.link);
	table_free(t);
}

/* hold_c -- lc_links_hold_cached()'s link (it must not fail here), released at once. */
static struct fab_link *hold_c(struct lc_links *t, uint32_t node, uint64_t *cache)
{
	struct lc_link_hazard *hz;
	struct fab_link *l;

	assert_int_equal(lc_links_hold_cached(t, node, cache, &l, &hz), 0);
	lc_links_release(hz);
	return l;
}

static void cached(void **state)
{
	struct lc_links *t = table_new(), *other = table_new();
	struct fake a = {.node = 7}, b = {.node = 7 + LC_LINK_SLOTS}, a2 = {.node = 7};
	uint64_t c, c0, c2;

	(void)state;
	assert_int_equal(lc_links_cache(t, 7), 0); /* no slot yet */
	assert_null(lc_links_set(t, 7, &a.link));
	c = c0 = lc_links_cache(t, 7);
	assert_true(c != 0);
	assert_ptr_equal(hold_c(t, 7, &c), &a.link);
	assert_true(c == c0); /* found where it was kept */
	/* the node leaves; another takes its home slot; it comes back next to it */
	assert_ptr_equal(lc_links_set(t, 7, NULL), &a.link);
	assert_null(hold_c(t, 7, &c));
	assert_true(c == 0); /* nothing to keep */
	c = c0;
	assert_null(lc_links_set(t, b.node, &b.link));
	assert_null(hold_c(t, 7, &c)); /* the kept slot is b's now: not b's link */
	assert_null(lc_links_set(t, 7, &a2.link));
	assert_ptr_equal(hold_c(t, 7, &c), &a2.link);
	assert_true(c != 0 && c != c0);
	c2 = c;
	assert_ptr_equal(hold_c(t, 7, &c), &a2.link);
	assert_true(c == c2);
	assert_ptr_equal(hold_c(t, b.node, &c0), &b.link); /* (c0 names b's slot, old generation) */
	/* a slot kept from another table, where 7 sits in its home slot */
	assert_null(lc_links_set(other, 7, &a.link));
	c = lc_links_cache(other, 7);
	assert_ptr_equal(hold_c(t, 7, &c), &a2.link);
	assert_true(c == c2);
	/* garbage */
	c = ~0ull;
	assert_ptr_equal(hold_c(t, 7, &c), &a2.link);
	c = (uint64_t)1 << 32 | (LC_LINK_SLOTS + 1);
	assert_ptr_equal(hold_c(t, 7, &c), &a2.link);
	assert_null(hold_c(t, 0, &c)); /* no node's id */
	assert_ptr_equal(lc_links_set(t, 7, NULL), &a2.link);
	assert_ptr_equal(lc_links_set(t, b.node, NULL), &b.link);
	assert_ptr_equal(lc_links_set(other, 7, NULL), &a.link);
	table_free(other);
	table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(distinct_ids),
	    cmocka_unit_test(incarnations),
	    cmocka_unit_test(probe_bound),
	    cmocka_unit_test(concurrent),
	    cmocka_unit_test(concurrent_fences),
	    cmocka_unit_test(records_reused),
	    cmocka_unit_test(cached),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
