/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst-push-copy.c -- a direct push (loco_sst_set_direct) carries the row
 * as stored at the push call, not a store made after it.
 *
 * loco-run -n 2. Channel "sst-pc" holds a direct table "d" (8-byte rows)
 * and a variable "big" of BIG bytes owned by node 1. Each round r, node 1
 * pushes "big" (a WRITE that fills the link for a while, so the next
 * requests wait in its queue), stores 2r - 1 in its "d" row and pushes it,
 * then at once stores 2r without pushing. Node 2 must read 2r - 1: a WRITE
 * that read the row only when the fabric sent it (a queued tcp request, a
 * verbs DMA) would carry 2r, and then a row could show a value before a
 * WRITE posted after its push landed. The barrier's memory rule rests on
 * this (objects/barrier.c): barrier-stress saw a node leave an episode with
 * a peer's "entered" row one behind. On shm a WRITE is copied when posted,
 * so there the test passes either way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/owned_var.h>
#include <loco/sst.h>

#include "scenario.h"

#define BIG      (8u << 20) /* bytes of "big", divided by LOCO_TEST_SCALE */
#define ROUNDS   20u
#define MAX_ROWS 4

int main(int argc, char **argv)
{
	loco_channel_t *ch;
	loco_sst_t *d;
	loco_owned_var_t *big;
	loco_ack_key_t *ack;
	loco_manager_t *m;
	struct sc_sync sync;
	uint32_t me, big_len;
	uint8_t *buf;

	sc_init("sst-push-copy", argc, argv, 120);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	big_len = sc_scaled(BIG);
	buf = calloc(1, big_len);
	SC_ASSERT(buf != NULL);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "sst-pc", 2, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "d", 8, MAX_ROWS, &d));
	SC_ASSERT_OK(loco_sst_set_direct(d));
	SC_ASSERT_OK(loco_owned_var_create(ch, "big", 1, big_len, &big));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	for (uint64_t r = 1; r <= ROUNDS; r++) {
		uint64_t pushed = 2 * r - 1, later = 2 * r, got = 0;

		if (me == 1) {
			memset(buf, (int)r, big_len);
			SC_ASSERT_OK(loco_owned_var_store(big, buf));
			SC_ASSERT_EQ(loco_owned_var_push_broadcast(big, ack), 1);
			SC_ASSERT_OK(loco_sst_store_mine(d, &pushed));
			SC_ASSERT_EQ(loco_sst_push_broadcast(d, ack), 1);
			SC_ASSERT_OK(loco_sst_store_mine(d, &later)); /* not pushed */
			SC_ASSERT_OK(loco_ack_wait(ack, 30 * SC_NS));
		}
		sc_sync_wait(&sync, "pushed", SC_WAIT_MS);
		if (me == 2) {
			SC_ASSERT_OK(loco_sst_read(d, 1, &got));
			if (got != pushed)
				SC_FAIL("round %llu: the row pushed as %llu arrived as %llu",
				        (unsigned long long)r, (unsigned long long)pushed,
				        (unsigned long long)got);
			SC_ASSERT_OK(loco_owned_var_load(big, buf));
			SC_ASSERT_EQ(buf[big_len - 1], (uint8_t)r);
		}
		sc_sync_wait(&sync, "read", SC_WAIT_MS);
	}
	sc_log("%u rounds: every direct push carried the row as stored at the call", ROUNDS);

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_ack_key_destroy(ack);
	loco_owned_var_destroy(big);
	loco_sst_destroy(d);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	free(buf);
	return SC_EXIT_PASS;
}
