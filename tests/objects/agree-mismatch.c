/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * agree-mismatch.c -- nodes that disagree on an object's parameters fail
 * its pairing on both sides: every node's calls of the object return
 * -LOCO_EMISMATCH, and each node logs the object, both values and the peer.
 * (They used to pair anyway: an sst read zeros, an atomic_var counted
 * alone on each host.) Objects that agree are not touched.
 *
 * loco-run -n 3 (or more). Channel "mis" holds an sst "tab" whose rows are
 * 32 bytes on node 2 and 16 elsewhere, an atomic_var "ctr" hosted by node
 * 3 on node 3 and by node 1 elsewhere, and an owned_var "ok" every node
 * makes alike. Every node captures the library's log, waits (bounded)
 * until the table and the counter fail with -LOCO_EMISMATCH, looks for
 * the log lines, and pushes the agreed variable to everyone.
 */
#include <errno.h>
#include <stdio.h>

#include <loco/atomic_var.h>
#include <loco/owned_var.h>
#include <loco/sst.h>

#include "capture.h"
#include "scenario.h"

#define ODD_ROW  2 /* the node with 32-byte rows */
#define ODD_HOST 3 /* the node that names itself the host */

static void expect_log(struct capture *c, const char *line)
{
	if (!capture_has(c, line))
		SC_FAIL("the log lacks \"%s\"", line);
	sc_log("logged: %s", line);
}

int main(int argc, char **argv)
{
	uint8_t buf[32] = {0};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_sst_t *sst;
	loco_atomic_var_t *av;
	loco_owned_var_t *ok;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	struct capture cap;
	uint64_t old, v;
	uint32_t nodes, me, host;
	size_t row;
	char want[200];
	int ret;

	sc_init("agree-mismatch", argc, argv, 90);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n N, N >= 3 (LOCO_NODES=%u)", nodes);
	capture_start(&cap);
	m = sc_start();
	me = loco_manager_node_id(m);
	row = me == ODD_ROW ? 32 : 16;
	host = me == ODD_HOST ? ODD_HOST : 1;

	/* configure */
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "mis", nodes, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "tab", row, 64, &sst));
	SC_ASSERT_OK(loco_atomic_var_create(ch, "ctr", host, &av));
	SC_ASSERT_OK(loco_owned_var_create(ch, "ok", 1, sizeof(v), &ok));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* run + verify: the table fails on every node */
	ret = loco_sst_sync(sst, 20 * SC_NS);
	if (ret != -LOCO_EMISMATCH)
		SC_FAIL("loco_sst_sync returned %d (%s), expected -LOCO_EMISMATCH", ret,
		        loco_strerror(ret));
	SC_ASSERT_EQ(loco_sst_store_mine(sst, buf), -LOCO_EMISMATCH);
	SC_ASSERT_EQ(loco_sst_push_broadcast(sst, ack), -LOCO_EMISMATCH);
	SC_ASSERT_EQ(loco_sst_read(sst, me, buf), -LOCO_EMISMATCH);

	/* run + verify: the counter fails on every node, its host(s) included */
	SC_WAIT_UNTIL((ret = loco_atomic_var_faa(av, 1, &old, SC_NS)) == -LOCO_EMISMATCH,
	              SC_WAIT_MS, "the counter to fail with -LOCO_EMISMATCH");
	SC_ASSERT_EQ(loco_atomic_var_read(av, &old, SC_NS), -LOCO_EMISMATCH);

	/* verify: the log names the object, both values and the peer */
	if (me == ODD_ROW) {
		snprintf(want, sizeof(want),
		         "object tab: parameter row_size is 32 here but 16 on node 1");
		expect_log(&cap, want);
		snprintf(want, sizeof(want),
		         "object tab: parameter row_size is 32 here but 16 on node 3");
		expect_log(&cap, want);
	} else {
		snprintf(want, sizeof(want),
		         "object tab: parameter row_size is 16 here but 32 on node %d", ODD_ROW);
		expect_log(&cap, want);
	}
	if (me == ODD_HOST) {
		expect_log(&cap, "object ctr: parameter host is 3 here but 1 on node 1");
	} else {
		snprintf(want, sizeof(want),
		         "object ctr: parameter host is 1 here but %d on node %d", ODD_HOST,
		         ODD_HOST);
		expect_log(&cap, want);
	}
	capture_end(&cap);

	/* verify: the object all nodes agree on still works */
	SC_ASSERT_EQ(loco_owned_var_sync(ok, 20 * SC_NS), (int)nodes - 1);
	if (me == 1) {
		v = 77;
		SC_ASSERT_OK(loco_owned_var_store(ok, &v));
		SC_ASSERT_EQ(loco_owned_var_push_broadcast(ok, ack), (int)nodes - 1);
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
	}
	SC_WAIT_UNTIL(loco_owned_var_load(ok, &v) == 0 && v == 77, SC_WAIT_MS,
	              "the agreed variable");
	sc_log("table (rows %zu here) and counter (host %u here) refused; the agreed variable "
	       "works",
	       row, host);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	loco_owned_var_destroy(ok);
	loco_atomic_var_destroy(av);
	loco_sst_destroy(sst);
	loco_ack_key_destroy(ack);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	sc_log("PASS");
	return SC_EXIT_PASS;
}
