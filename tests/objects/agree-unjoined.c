/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * agree-unjoined.c -- objects of a channel that was never joined fail with
 * -LOCO_ENOTJOINED on every node, the host of an atomic_var and a lock and
 * the owner of an owned_var included (they used to work alone there while
 * the other nodes failed with -ENOENT); once joined they work. And a join
 * that times out says how many of the expected peers paired and which
 * members did not.
 *
 * loco-run -n 3 (or more). Channel "unj" holds an atomic_var and a lock
 * hosted by node 1, an owned_var owned by node 1, an sst and a barrier.
 * Before the join every call that reaches other nodes, and the stores
 * that feed them, fail with -LOCO_ENOTJOINED; loads of the local copy
 * work. (A barrier wait refused before the join must leave nothing
 * behind: the counter read after the joined barrier counts every node.) Then every
 * node joins, adds 1 to the atomic_var, takes and releases the lock, and
 * the counter reads the node count. Last, node 1 alone joins a channel
 * "half" that the others never make: after a 1 s timeout the log names
 * them.
 */
#include <errno.h>
#include <stdio.h>

#include <loco/atomic_var.h>
#include <loco/barrier.h>
#include <loco/lock.h>
#include <loco/owned_var.h>
#include <loco/sst.h>

#include "capture.h"
#include "scenario.h"

#define HOST 1

/* expect_notjoined -- @what returned @ret: it must be -LOCO_ENOTJOINED. */
static void expect_notjoined(const char *what, int ret, unsigned *count)
{
	if (ret != -LOCO_ENOTJOINED)
		SC_FAIL("%s before the join returned %d (%s), expected -LOCO_ENOTJOINED", what, ret,
		        loco_strerror(ret));
	(*count)++;
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch, *half;
	loco_atomic_var_t *av;
	loco_lock_t *lk;
	loco_owned_var_t *ov;
	loco_sst_t *sst;
	loco_barrier_t *b;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	struct capture cap;
	uint64_t v = 7, row = 5, old;
	uint32_t nodes, me;
	unsigned refused = 0;
	char want[160];

	sc_init("agree-unjoined", argc, argv, 90);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n N, N >= 3 (LOCO_NODES=%u)", nodes);
	m = sc_start();
	me = loco_manager_node_id(m);
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);

	/* configure: every object, no join */
	SC_ASSERT_OK(loco_channel_create(m, NULL, "unj", nodes, &ch));
	SC_ASSERT_OK(loco_atomic_var_create(ch, "ctr", HOST, &av));
	SC_ASSERT_OK(loco_lock_create(ch, "lk", HOST, &lk));
	SC_ASSERT_OK(loco_owned_var_create(ch, "ov", HOST, sizeof(v), &ov));
	SC_ASSERT_OK(loco_sst_create(ch, "tab", sizeof(row), 64, &sst));
	SC_ASSERT_OK(loco_barrier_create(ch, "bar", &b));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	/* the others made theirs too: a peer that has the objects changes nothing */
	sc_sync_wait(&sync, "created", SC_WAIT_MS);

	/* run + verify: everything that reaches other nodes is refused, on every node */
	expect_notjoined("atomic_var_faa", loco_atomic_var_faa(av, 1, &old, SC_NS), &refused);
	expect_notjoined("atomic_var_read", loco_atomic_var_read(av, &old, SC_NS), &refused);
	expect_notjoined("atomic_var_faa_async", loco_atomic_var_faa_async(av, 1, 0, ack),
	                 &refused);
	expect_notjoined("lock_acquire", loco_lock_acquire(lk, SC_NS), &refused);
	expect_notjoined("lock_try_acquire", loco_lock_try_acquire(lk), &refused);
	if (me == HOST) {
		expect_notjoined("owned_var_store", loco_owned_var_store(ov, &v), &refused);
		expect_notjoined("owned_var_push_broadcast", loco_owned_var_push_broadcast(ov, ack),
		                 &refused);
		expect_notjoined("owned_var_push_to", loco_owned_var_push_to(ov, 2, ack), &refused);
	}
	SC_ASSERT_OK(loco_owned_var_load(ov, &v)); /* the local copy: allowed */
	SC_ASSERT_OK(loco_sst_read(sst, me, &row));
	expect_notjoined("sst_store_mine", loco_sst_store_mine(sst, &row), &refused);
	expect_notjoined("sst_push_broadcast", loco_sst_push_broadcast(sst, ack), &refused);
	expect_notjoined("sst_push_to", loco_sst_push_to(sst, me == 1 ? 2 : 1, ack), &refused);
	expect_notjoined("barrier_wait", loco_barrier_wait(b, SC_NS), &refused);
	expect_notjoined("sst_sync", loco_sst_sync(sst, 0), &refused);
	SC_ASSERT_EQ(loco_ack_outstanding(ack), 0); /* nothing was posted */
	sc_log("before the join: %u calls refused with -LOCO_ENOTJOINED (%s)", refused,
	       loco_strerror(-LOCO_ENOTJOINED));
	sc_sync_wait(&sync, "refused", SC_WAIT_MS);

	/* run + verify: joined, the same objects work on every node */
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_atomic_var_faa(av, 1, &old, 10 * SC_NS));
	SC_ASSERT_OK(loco_lock_acquire(lk, 10 * SC_NS));
	SC_ASSERT_OK(loco_lock_release(lk));
	SC_ASSERT_OK(loco_barrier_wait(b, 20 * SC_NS));
	SC_ASSERT_OK(loco_atomic_var_read(av, &v, 10 * SC_NS));
	SC_ASSERT_EQ(v, nodes);
	sc_log("joined: the counter hosted by node %d reads %llu (one add per node)", HOST,
	       (unsigned long long)v);
	sc_sync_wait(&sync, "counted", SC_WAIT_MS);

	/* run + verify: a join that times out names the members that did not pair */
	if (me == 1) {
		capture_start(&cap);
		SC_ASSERT_OK(loco_channel_create(m, NULL, "half", nodes + 1, &half));
		SC_ASSERT_EQ(loco_channel_join(half, SC_NS), -ETIMEDOUT);
		snprintf(want, sizeof(want),
		         "channel half: join timed out: 0 of %u expected peer(s) paired; members "
		         "that did not pair: %u (nodes",
		         nodes, nodes - 1);
		if (!capture_has(&cap, want))
			SC_FAIL("the log of the timed-out join lacks \"%s\"", want);
		if (!capture_has(&cap, "expected nodes that are not members: 1"))
			SC_FAIL("the log of the timed-out join does not count the non-member");
		capture_end(&cap);
		sc_log("the timed-out join logged: %s ...", want);
		SC_ASSERT_OK(loco_channel_destroy(half));
	}
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_ack_key_destroy(ack);
	loco_barrier_destroy(b);
	loco_sst_destroy(sst);
	loco_owned_var_destroy(ov);
	loco_lock_destroy(lk);
	loco_atomic_var_destroy(av);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	sc_log("PASS");
	return SC_EXIT_PASS;
}
