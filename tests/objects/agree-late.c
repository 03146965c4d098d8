/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * agree-late.c -- objects made after loco_channel_join are announced and
 * paired: after loco_sst_sync / loco_owned_var_sync, the first push
 * reaches every peer (it used to reach those that happened to have made
 * the object already, often none, without an error).
 *
 * loco-run -n 3 (or more). Every node joins channel "late" empty. Node 1
 * makes an sst "tab" and an owned_var "ov" (owner 1) at once; the other
 * nodes make theirs one after another, node n after (n - 1) x 200 ms, so
 * that node 1's sync has peers to wait for. Each node syncs both objects
 * (the count must be every peer), stores its row and pushes it once;
 * node 1 also stores and pushes the variable once. Then every node reads
 * every row and the variable: one push each, nothing pushed again.
 */
#include <errno.h>
#include <stdio.h>

#include <loco/owned_var.h>
#include <loco/sst.h>

#include "scenario.h"

#define OWNER 1

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_owned_var_t *ov;
	loco_sst_t *sst;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	uint64_t row, v;
	uint32_t nodes, me;
	int64_t t0, waited_ms;
	int ret;

	sc_init("agree-late", argc, argv, 90);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n N, N >= 3 (LOCO_NODES=%u)", nodes);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "late", nodes, &ch));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* configure: the objects, after the join, node 1 first and the others later */
	sc_sleep_ms((me - 1) * 200);
	SC_ASSERT_OK(loco_sst_create(ch, "tab", sizeof(row), 64, &sst));
	SC_ASSERT_OK(loco_owned_var_create(ch, "ov", OWNER, sizeof(v), &ov));

	/* run: sync, then exactly one push */
	t0 = sc_now_ns();
	ret = loco_sst_sync(sst, 20 * SC_NS);
	SC_ASSERT_EQ(ret, (int)nodes - 1);
	ret = loco_owned_var_sync(ov, 20 * SC_NS);
	SC_ASSERT_EQ(ret, (int)nodes - 1);
	waited_ms = (sc_now_ns() - t0) / 1000000;
	row = 1000 + me;
	SC_ASSERT_OK(loco_sst_store_mine(sst, &row));
	ret = loco_sst_push_broadcast(sst, ack);
	if (ret != (int)nodes - 1)
		SC_FAIL("the first push of the late table reached %d peer(s) of %u (%s)", ret,
		        nodes - 1, ret < 0 ? loco_strerror(ret) : "no error");
	if (me == OWNER) {
		v = 4242;
		SC_ASSERT_OK(loco_owned_var_store(ov, &v));
		ret = loco_owned_var_push_broadcast(ov, ack);
		if (ret != (int)nodes - 1)
			SC_FAIL("the first push of the late variable reached %d peer(s) of %u", ret,
			        nodes - 1);
	}
	SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
	sc_log("synced after %lld ms; the first pushes reached all %u peers", (long long)waited_ms,
	       nodes - 1);

	/* verify: every row and the variable arrived from that one push */
	for (uint32_t n = 1; n <= nodes; n++) {
		SC_WAIT_UNTIL(loco_sst_read(sst, n, &row) == 0 && row == 1000 + n, SC_WAIT_MS,
		              "every node's row");
	}
	SC_WAIT_UNTIL(loco_owned_var_load(ov, &v) == 0 && v == 4242, SC_WAIT_MS,
	              "the owner's value");
	sc_log("all %u rows and the variable read here", nodes);
	sc_sync_wait(&sync, "read", SC_WAIT_MS);

	loco_owned_var_destroy(ov);
	loco_sst_destroy(sst);
	loco_ack_key_destroy(ack);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	sc_log("PASS");
	return SC_EXIT_PASS;
}
