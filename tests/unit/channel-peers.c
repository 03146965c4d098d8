/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * channel-peers.c -- a channel's peer table and its announcements as the
 * receiver sees them (liboco/channel.c), on one node, by feeding the
 * channel layer the events membership raises (m->members.ev: CHAN messages from
 * made-up members, members gone) under m->lock, as the progress thread
 * does.
 *
 *  - churn: a channel pairs with CHURN_NODES distinct node ids over its
 *    life, WINDOW at a time, far more than the LC_CHAN_PEERS positions of
 *    its table: retired peers give their positions back, and their
 *    structs are freed once their grace passed. A reader thread resolves
 *    references and lists peers without a lock all along (under ASan, a
 *    use after free would show).
 *  - pages: an announcement in several CHAN pages is acted on only when
 *    its last page came after the others in order; a page out of order
 *    drops what came; a node that leaves in the middle is retired.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <loco.h>

#include "chan.h"
#include "manager.h"

#define CHURN_NODES 1500u /* distinct node ids over the channel's life (> LC_CHAN_PEERS) */
#define WINDOW      100u  /* present at once */
#define FIRST_ID    2u

static unsigned joins, leaves; /* atomic: counted by the callbacks */

static void on_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)obj, (void)node, (void)view, (void)arg;
	__atomic_add_fetch(&joins, 1, __ATOMIC_RELEASE);
}

static void on_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)obj, (void)node, (void)view, (void)arg;
	__atomic_add_fetch(&leaves, 1, __ATOMIC_RELEASE);
}

static const struct loco_object_ops ops = {.peer_join = on_join, .peer_leave = on_leave};

struct fixture {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
	struct lc_msg *msg;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
	setenv("LOCO_FAIL_TIMEOUT_MS", "100", 1); /* retired peers wait 200 ms */
	if (f == NULL || loco_init(NULL, &f->m) != 0)
		return -1;
	f->msg = calloc(1, sizeof(*f->msg));
	if (f->msg == NULL || loco_channel_create(f->m, NULL, "churn", 1, &f->ch) != 0 ||
	    loco_object_create(f->ch, "o", &ops, NULL, &f->obj) != 0 ||
	    loco_region_create(f->obj, "r", 64, LOCO_ACCESS_READ, &f->r) != 0 ||
	    loco_channel_join(f->ch, 5000000000ll) != 0)
		return -1;
	__atomic_store_n(&joins, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&leaves, 0, __ATOMIC_RELAXED);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	loco_object_destroy(f->obj);
	assert_int_equal(loco_channel_destroy(f->ch), 0);
	loco_fini(f->m);
	free(f->msg);
	free(f);
	return 0;
}

/* entry -- entry @i of an announcement: "o/r" (rkey @node) at @at, else a region of another object. */
static void entry(struct lc_region_info *e, uint32_t i, uint32_t at, uint32_t node)
{
	memset(e, 0, sizeof(*e));
	if (i == at)
		snprintf(e->name, sizeof(e->name), "o/r");
	else
		snprintf(e->name, sizeof(e->name), "other/e%u", i);
	e->addr = 0x100000ull * node + i * 64;
	e->len = 64;
	e->rkey = node;
	e->access = LOCO_ACCESS_READ;
}

/* page -- CHAN page [@first, @first + @n) of a @total-entry announcement from @node, delivered. */
static void page(struct fixture *f, uint32_t node, uint32_t first, uint32_t n, uint32_t total,
                 uint32_t at)
{
	struct lc_member from;
	struct lc_msg *msg = f->msg;

	memset(&from, 0, sizeof(from));
	from.info.node = node;
	from.up = 1; /* no connection: the channel's replies go nowhere */
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_CHAN;
	snprintf(msg->u.chan.name, sizeof(msg->u.chan.name), "churn");
	msg->u.chan.nodes = 2;
	msg->u.chan.first = first;
	msg->u.chan.total = total;
	msg->u.chan.n = n;
	for (uint32_t i = 0; i < n; i++)
		entry(&msg->u.chan.r[i], first + i, at, node);
	pthread_mutex_lock(&f->m->lock);
	f->m->members.ev.msg(f->m, &from, msg);
	pthread_mutex_unlock(&f->m->lock);
}

static void gone(struct fixture *f, uint32_t node)
{
	pthread_mutex_lock(&f->m->lock);
	f->m->members.ev.gone(f->m, node);
	pthread_mutex_unlock(&f->m->lock);
}

static int present(struct fixture *f, uint32_t node)
{
	struct lc_peer *p = lc_peer_get(f->ch, node);

	return p != NULL && __atomic_load_n(&p->present, __ATOMIC_ACQUIRE);
}

/* positions -- table positions holding a peer (not free, not a tombstone); retired structs. */
static void positions(struct fixture *f, unsigned *used, unsigned *graves)
{
	pthread_mutex_lock(&f->m->lock);
	*used = 0;
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++)
		*used += lc_peer_at(f->ch, i) != NULL;
	*graves = 0;
	for (struct lc_peer *p = f->ch->peer_graves; p != NULL; p = p->next)
		(*graves)++;
	pthread_mutex_unlock(&f->m->lock);
}

static void wait_count(unsigned *counter, unsigned want)
{
	for (int i = 0; i < 5000 && __atomic_load_n(counter, __ATOMIC_ACQUIRE) != want; i++)
		usleep(1000);
	assert_int_equal(__atomic_load_n(counter, __ATOMIC_ACQUIRE), want);
}

struct reader {
	struct fixture *f;
	int stop; /* atomic */
	unsigned long reads, resolved;
};

/* reader_run -- what the data path does without a lock, over every id the churn uses. */
static void *reader_run(void *arg)
{
	struct reader *rd = arg;
	uint32_t ids[LC_CHAN_PEERS];
	uint64_t x = 88172645463325252ull;

	while (!__atomic_load_n(&rd->stop, __ATOMIC_ACQUIRE)) {
		uint32_t node;
		loco_rref_t ref;
		int n;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		node = FIRST_ID + (uint32_t)(x % CHURN_NODES);
		if (loco_region_remote(rd->f->r, node, &ref) == 0) {
			if (ref.rkey != node || ref.node != node || ref.len != 64)
				fail_msg("node %u resolved to rkey %u node %u len %llu", node,
				         ref.rkey, ref.node, (unsigned long long)ref.len);
			rd->resolved++;
		}
		/*
		 * A snapshot taken without a lock: a node seen before it left and
		 * another seen after it paired may both be there, but every id once.
		 */
		n = loco_channel_peers(rd->f->ch, ids, LC_CHAN_PEERS);
		if (n < 0 || n > (int)LC_CHAN_PEERS)
			fail_msg("%d peers listed", n);
		for (int i = 1; i < n; i++)
			if (ids[i] <= ids[i - 1])
				fail_msg("peers listed out of order or twice: %u, %u", ids[i - 1],
				         ids[i]);
		rd->reads++;
	}
	return NULL;
}

static void churn__more_distinct_nodes_than_table_positions(void **state)
{
	struct fixture *f = *state;
	struct reader rd = {.f = f};
	unsigned used, graves, max_used = 0;
	pthread_t th;
	loco_rref_t ref;

	/* configure */
	assert_int_equal(pthread_create(&th, NULL, reader_run, &rd), 0);

	/* run: node ids come, WINDOW at a time, and go, each never to come back */
	for (uint32_t k = 0; k < CHURN_NODES; k++) {
		uint32_t node = FIRST_ID + k;

		page(f, node, 0, 1, 1, 0);
		assert_true(present(f, node));
		assert_int_equal(loco_region_remote(f->r, node, &ref), 0);
		assert_int_equal(ref.rkey, node);
		if (k >= WINDOW) {
			gone(f, node - WINDOW);
			assert_false(present(f, node - WINDOW));
			assert_int_equal(loco_region_remote(f->r, node - WINDOW, &ref), -ENOENT);
		}
		positions(f, &used, &graves);
		max_used = used > max_used ? used : max_used;
		if (k % 250 == 0)
			usleep(50000); /* let some graces pass: their structs are freed */
	}
	__atomic_store_n(&rd.stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(th, NULL), 0);

	/* verify: every node paired and every leaver left, the table never held more than the window */
	assert_int_equal(loco_channel_peers(f->ch, NULL, 0), WINDOW);
	wait_count(&joins, CHURN_NODES);
	wait_count(&leaves, CHURN_NODES - WINDOW);
	assert_true(max_used <= WINDOW + 1);
	print_message("# %u distinct nodes paired, at most %u positions used at once; reader: %lu "
	              "lookups, %lu resolved\n",
	              CHURN_NODES, max_used, rd.reads, rd.resolved);

	/* the retired structs go once their grace (2 x 100 ms) passed and a new node comes */
	usleep(300000);
	page(f, FIRST_ID + CHURN_NODES, 0, 1, 1, 0);
	positions(f, &used, &graves);
	assert_int_equal(graves, 0);
	assert_int_equal(used, WINDOW + 1);

	/* a node that left comes back: a new struct, paired again */
	page(f, FIRST_ID, 0, 1, 1, 0);
	assert_true(present(f, FIRST_ID));
	wait_count(&joins, CHURN_NODES + 2);
}

static void pages__acted_on_only_when_whole_and_in_order(void **state)
{
	struct fixture *f = *state;
	loco_rref_t ref;
	unsigned used, graves;

	/* run + verify: three pages of 150 entries, "o/r" in the last one */
	page(f, 7, 0, LC_MAX_REGIONS, 150, 140);
	assert_false(present(f, 7));
	page(f, 7, 64, LC_MAX_REGIONS, 150, 140);
	assert_false(present(f, 7));
	assert_int_equal(loco_region_remote(f->r, 7, &ref), -ENOENT);
	page(f, 7, 128, 150 - 128, 150, 140);
	assert_true(present(f, 7));
	assert_int_equal(loco_region_remote(f->r, 7, &ref), 0);
	assert_int_equal(ref.rkey, 7);
	assert_int_equal(ref.addr, 0x100000ull * 7 + 140 * 64);
	wait_count(&joins, 1);

	/* a page skipped: the announcement is dropped, the last page alone does nothing */
	page(f, 8, 0, LC_MAX_REGIONS, 150, 140);
	page(f, 8, 128, 150 - 128, 150, 140);
	assert_false(present(f, 8));
	/* a page without its first, or with another total */
	page(f, 8, 64, LC_MAX_REGIONS, 150, 140);
	assert_false(present(f, 8));
	page(f, 8, 0, LC_MAX_REGIONS, 150, 140);
	page(f, 8, 64, 150 - 64 < LC_MAX_REGIONS ? 150 - 64 : LC_MAX_REGIONS, 151, 140);
	page(f, 8, 128, 150 - 128, 150, 140);
	assert_false(present(f, 8));
	/* a new announcement replaces one in progress */
	page(f, 8, 0, LC_MAX_REGIONS, 150, 140);
	page(f, 8, 0, 3, 3, 1);
	assert_true(present(f, 8));
	assert_int_equal(loco_region_remote(f->r, 8, &ref), 0);
	assert_int_equal(ref.addr, 0x100000ull * 8 + 1 * 64);

	/* node 7 announces again without "o/r": unresolved, still paired */
	page(f, 7, 0, 2, 2, 99);
	assert_true(present(f, 7));
	assert_int_equal(loco_region_remote(f->r, 7, &ref), -ENOENT);

	/* a node gone in the middle of its announcement is retired without a callback */
	page(f, 9, 0, LC_MAX_REGIONS, 150, 140);
	gone(f, 9);
	assert_null(lc_peer_get(f->ch, 9));
	gone(f, 7);
	wait_count(&leaves, 1);
	usleep(300000);
	page(f, 10, 0, 1, 1, 0); /* a new node: due graves are freed */
	positions(f, &used, &graves);
	assert_int_equal(graves, 0);
	assert_int_equal(used, 2); /* nodes 8 and 10 */
	wait_count(&joins, 3);
	assert_int_equal(__atomic_load_n(&leaves, __ATOMIC_ACQUIRE), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(churn__more_distinct_nodes_than_table_positions, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(pages__acted_on_only_when_whole_and_in_order, setup,
	                                    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
