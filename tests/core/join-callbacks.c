/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join-callbacks.c -- when loco_channel_join() returns, the peer_join
 * callbacks of the peers it paired with have run (loco_channel(3)).
 *
 * Every node makes channel "jc" with an object whose peer_join is slow on
 * purpose (it sleeps SLOW_MS before it counts the peer), joins, and checks
 * at once that every peer was counted. Callbacks run on the progress
 * thread after the pairing is visible; a join that returned on the pairing
 * alone would see 0 here. Then, for a leave: node 2 destroys its channel,
 * and the others must see exactly one peer_leave (node 2) within the wait.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <loco.h>

#include "scenario.h"

#define SLOW_MS 150

static unsigned joins, leaves; /* atomic: counted by the callbacks */

static void on_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)view;
	struct timespec ts = {.tv_nsec = SLOW_MS * 1000000L};

	(void)obj;
	(void)node;
	(void)arg;
	nanosleep(&ts, NULL); /* a slow callback: the join must wait for it */
	__atomic_add_fetch(&joins, 1, __ATOMIC_RELEASE);
}

static void on_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)view;
	(void)obj;
	(void)arg;
	if (node == 2)
		__atomic_add_fetch(&leaves, 1, __ATOMIC_RELEASE);
}

static const struct loco_object_ops ops = {.peer_join = on_join, .peer_leave = on_leave};

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	struct sc_sync sync;
	unsigned nodes, got;

	sc_init("join-callbacks", argc, argv, 60);
	nodes = sc_nodes();
	m = sc_start();
	sc_sync_open(&sync, m, nodes);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "jc", nodes, &ch));
	SC_ASSERT_OK(loco_object_create(ch, "slow", &ops, NULL, &obj));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	got = __atomic_load_n(&joins, __ATOMIC_ACQUIRE);
	sc_log("join returned with %u of %u peer_join callback(s) run", got, nodes - 1);
	SC_ASSERT_EQ(got, nodes - 1);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (loco_manager_node_id(m) == 2) {
		loco_object_destroy(obj);
		SC_ASSERT_OK(loco_channel_destroy(ch));
	} else {
		SC_WAIT_UNTIL(__atomic_load_n(&leaves, __ATOMIC_ACQUIRE) == 1, SC_WAIT_MS,
		              "node 2's peer_leave");
	}
	sc_sync_wait(&sync, "left", SC_WAIT_MS);
	SC_ASSERT_EQ(__atomic_load_n(&leaves, __ATOMIC_ACQUIRE),
	             loco_manager_node_id(m) == 2 ? 0 : 1);
	if (loco_manager_node_id(m) != 2) {
		loco_object_destroy(obj);
		SC_ASSERT_OK(loco_channel_destroy(ch));
	}
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
