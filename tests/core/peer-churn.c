/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * peer-churn.c -- a channel pairs with more distinct nodes over its life
 * than its peer table has positions (512, liboco/chan.h): real managers,
 * several in this one process (LOCO_MANY_MANAGERS=1), one after another.
 *
 * Node 1 holds channel "churn" with object "o" (a region, peer_join and
 * peer_leave counting). Then node ids 2, 3, ... NODES + 1 come one at a
 * time, WINDOW of them alive at once: each starts a manager that joins
 * through node 1, makes the same channel, object and region, joins the
 * channel (pairing with node 1 and the others alive), is resolved by node
 * 1 (loco_region_remote(), and one READ of the word it put in its
 * region), and the oldest leaves (destroys its channel, loco_fini()).
 * Node 1 must see every node pair and every leaver leave, and never
 * more than WINDOW peers at once. Before the table gave positions back,
 * node 1 could pair with 511 distinct nodes only.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>

#include "helpers.h"

#define NODES   530u /* distinct nodes that come and go (> 512) */
#define WINDOW  3u   /* alive at once besides node 1 */
#define SECRET  "peer-churn secret"
#define JOIN_NS (20 * 1000000000ll)

static unsigned joins, leaves; /* atomic: node 1's callbacks */

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

struct node {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
};

static void node_start(struct node *n, uint32_t id, const char *join,
                       const struct loco_object_ops *ops)
{
	loco_config_t cfg = {0};
	int ret;

	cfg.addr = "127.0.0.1:0";
	cfg.node_id = id;
	cfg.join = join;
	cfg.secret = SECRET;
	ret = loco_init(&cfg, &n->m);
	if (ret)
		T_FAIL("node %u did not start: %s", id, loco_strerror(ret));
	T_ASSERT_OK(loco_channel_create(n->m, NULL, "churn", 1, &n->ch));
	T_ASSERT_OK(loco_object_create(n->ch, "o", ops, NULL, &n->obj));
	T_ASSERT_OK(loco_region_create(n->obj, "r", 64, LOCO_ACCESS_READ, &n->r));
	*(uint64_t *)loco_region_ptr(n->r) = 0x5eed000000000000ull | id;
	T_ASSERT_OK(loco_channel_join(n->ch, JOIN_NS));
}

static void node_stop(struct node *n)
{
	loco_object_destroy(n->obj);
	T_ASSERT_OK(loco_channel_destroy(n->ch));
	loco_fini(n->m);
	memset(n, 0, sizeof(*n));
}

static int peers_are(loco_channel_t *ch, uint32_t lo, uint32_t hi)
{
	uint32_t ids[16];
	int n = loco_channel_peers(ch, ids, 16);

	if (n != (int)(hi - lo + 1))
		return 0;
	for (int i = 0; i < n; i++)
		if (ids[i] != lo + (uint32_t)i)
			return 0;
	return 1;
}

int main(void)
{
	static const struct loco_object_ops ops = {.peer_join = on_join, .peer_leave = on_leave};
	struct node one, alive[WINDOW];
	loco_ack_key_t *ack;
	volatile uint64_t *got;
	uint64_t t0;

	t_init("peer-churn", 280);
	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	unsetenv("LOCO_SECRET");
	unsetenv("LOCO_ADDR");
	setenv("LOCO_MANY_MANAGERS", "1", 1); /* several nodes in this one process, on purpose */
	memset(alive, 0, sizeof(alive));
	node_start(&one, 1, NULL, &ops);
	T_ASSERT_OK(loco_ack_key_create(one.m, &ack));
	got = loco_region_ptr(one.r);
	t0 = t_now_ns();

	for (uint32_t k = 0; k < NODES; k++) {
		uint32_t id = 2 + k;
		struct node *n = &alive[k % WINDOW];
		loco_rref_t ref;
		uint64_t dl;

		if (n->m != NULL)
			node_stop(n); /* the oldest leaves: node id - WINDOW */
		node_start(n, id, loco_manager_addr(one.m), NULL);
		/* node 1 pairs with it (its CHAN reply may still be on the way) */
		dl = t_now_ns() + (uint64_t)JOIN_NS;
		while (!peers_are(one.ch, id >= 2 + WINDOW ? id - WINDOW + 1 : 2, id)) {
			if (t_now_ns() > dl) {
				uint32_t ids[16];
				int c = loco_channel_peers(one.ch, ids, 16);

				T_FAIL("node %u (the %u-th distinct node): node 1 has %d peer(s), "
				       "first %u",
				       id, k + 1, c, c > 0 ? ids[0] : 0);
			}
			t_sleep_us(200);
		}
		T_ASSERT_OK(loco_region_remote(one.r, id, &ref));
		T_ASSERT_OK(loco_read(one.r, 8, &ref, 0, 8, ack));
		T_ASSERT_OK(loco_ack_wait(ack, 10 * 1000000000ll));
		T_ASSERT_EQX(got[1], 0x5eed000000000000ull | id);
		if (k % 100 == 99)
			printf("peer-churn: %u distinct nodes paired with node 1 (%.1f s)\n", k + 1,
			       (double)(t_now_ns() - t0) / 1e9);
	}
	for (uint32_t i = 0; i < WINDOW; i++)
		node_stop(&alive[i]);
	for (int i = 0; i < 10000 && (__atomic_load_n(&joins, __ATOMIC_ACQUIRE) != NODES ||
	                              __atomic_load_n(&leaves, __ATOMIC_ACQUIRE) != NODES);
	     i++)
		t_sleep_ms(1);
	T_ASSERT_EQ(__atomic_load_n(&joins, __ATOMIC_ACQUIRE), NODES);
	T_ASSERT_EQ(__atomic_load_n(&leaves, __ATOMIC_ACQUIRE), NODES);
	T_ASSERT_EQ(loco_channel_peers(one.ch, NULL, 0), 0);
	printf("peer-churn: %u distinct nodes paired and left, at most %u at once (%.1f s)\n",
	       NODES, WINDOW, (double)(t_now_ns() - t0) / 1e9);
	loco_ack_key_destroy(ack);
	node_stop(&one);
	return T_EXIT_PASS;
}
