/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * slow-link.c -- one node of the slow-link scenario (slow-link.sh runs two,
 * each in its own network namespace, joined by a veth pair whose ends send
 * at most a few Mbit/s, with LOCO_ADDR, LOCO_NODE_ID, LOCO_JOIN and
 * LOCO_NODES=2 set).
 *
 * A WRITE that takes longer than the failure bound to cross a slow link is
 * not a dead peer. Node 1 owns the owned_var "big" (BIG bytes) and pushes it
 * to node 2 ROUNDS times, every byte of round r being r; node 2 checks that
 * each value arrived whole. Checked:
 *   - every push completes (its ack) and returns 1 (node 2 stayed a peer);
 *   - node 1: the slowest push took more than twice the failure bound (else
 *     the link was too fast for the test to mean anything);
 *   - both: the other node stayed a member, in the view the pair joined in.
 * The times are printed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/owned_var.h>

#include "scenario.h"

#define BIG    (1u << 20) /* bytes: 4.2 s at 2 Mbit/s */
#define ROUNDS 2u

int main(int argc, char **argv)
{
	static const uint32_t both[] = {1, 2};
	uint32_t me, other, ids[SC_MAX_NODES];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_owned_var_t *big;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	uint64_t view;
	int64_t slowest = 0;
	uint8_t *buf;
	char str[128];

	sc_init("slow-link", argc, argv, 100);
	if (sc_nodes() != 2)
		SC_FAIL("LOCO_NODES=%u, expected 2 (run by slow-link.sh)", sc_nodes());
	buf = malloc(BIG);
	SC_ASSERT(buf != NULL);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT(me == 1 || me == 2);
	other = 3 - me;
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; !sc_members_are(m, both, 2); sc_sleep_ms(1))
		if (sc_now_ms() >= dl)
			SC_FAIL("members %s after %d ms, expected {1, 2}",
			        sc_ids_str(ids, sc_members(m, ids), str, sizeof(str)), SC_WAIT_MS);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "slow", 2, &ch));
	SC_ASSERT_OK(loco_owned_var_create(ch, "big", 1, BIG, &big));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	view = loco_manager_view(m);

	for (unsigned r = 1; r <= ROUNDS; r++) {
		if (me == 1) {
			int64_t t0 = sc_now_ns(), ns;

			memset(buf, (int)r, BIG);
			SC_ASSERT_OK(loco_owned_var_store(big, buf));
			SC_ASSERT_EQ(loco_owned_var_push_broadcast(big, ack), 1);
			SC_ASSERT_OK(loco_ack_wait(ack, 60 * SC_NS));
			ns = sc_now_ns() - t0;
			slowest = ns > slowest ? ns : slowest;
			sc_log("round %u: %u KiB pushed in %.0f ms (failure bound %u ms)", r,
			       BIG >> 10, (double)ns / 1e6, sc_fail_timeout());
		}
		sc_sync_wait(&sync, "pushed", 60000);
		if (me == 2) {
			SC_ASSERT_OK(loco_owned_var_load(big, buf));
			for (size_t i = 0; i < BIG; i++)
				if (buf[i] != (uint8_t)r)
					SC_FAIL("round %u: byte %zu is %u", r, i, buf[i]);
		}
		SC_ASSERT(sc_is_member(m, other));
		SC_ASSERT(sc_is_peer(ch, other));
	}
	if (me == 1 && slowest <= 2 * (int64_t)sc_fail_timeout() * 1000000)
		SC_FAIL("the slowest push took %.0f ms, not more than twice the failure bound (%u "
		        "ms): the link is too fast for this test",
		        (double)slowest / 1e6, sc_fail_timeout());
	if (loco_manager_view(m) != view)
		SC_FAIL("the view changed from %" PRIu64 " to %" PRIu64 " while the pushes crossed",
		        view, loco_manager_view(m));
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	sc_log("%u pushes of %u KiB over the slow link; no peer dropped, view %" PRIu64, ROUNDS,
	       BIG >> 10, view);
	loco_ack_key_destroy(ack);
	loco_owned_var_destroy(big);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	free(buf);
	return SC_EXIT_PASS;
}
