/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * membership-join.c -- N nodes start at once (loco-run -n N); each waits
 * until loco_manager_members() reports exactly the ids 1..N, joins channel "s"
 * expecting N nodes, and checks that loco_channel_peers() is exactly the
 * other N - 1 ids. A barrier keeps every node in until all have checked.
 */
#include <stdio.h>

#include "scenario.h"

int main(int argc, char **argv)
{
	uint32_t want[SC_MAX_NODES], others[SC_MAX_NODES], got[SC_MAX_NODES];
	uint32_t me, nodes;
	char buf[256];
	loco_manager_t *m;
	loco_channel_t *ch;
	struct sc_sync sync;
	int64_t t0 = sc_now_ms(), t_members, t_chan;
	int nothers = 0, n;

	sc_init("membership-join", argc, argv, 90);
	nodes = sc_nodes();
	if (nodes < 1 || nodes >= SC_MAX_NODES)
		SC_FAIL("LOCO_NODES=%u: expected 1..%d", nodes, SC_MAX_NODES - 1);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT(me >= 1 && me <= nodes);
	for (uint32_t i = 1; i <= nodes; i++) {
		want[i - 1] = i;
		if (i != me)
			others[nothers++] = i;
	}

	/* the member table converges to exactly 1..N: nobody missing, nobody extra */
	while (!sc_members_are(m, want, (int)nodes)) {
		if (sc_now_ms() - t0 > SC_WAIT_MS) {
			n = sc_members(m, got);
			SC_FAIL("members are %s after %d ms, expected 1..%u",
			        sc_ids_str(got, n, buf, sizeof(buf)), SC_WAIT_MS, nodes);
		}
		sc_sleep_ms(1);
	}
	t_members = sc_now_ms() - t0;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "s", nodes, &ch));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	n = loco_channel_peers(ch, got, SC_MAX_NODES);
	if (!sc_peers_are(ch, others, nothers))
		SC_FAIL("channel s: peers %s, expected %s", sc_ids_str(got, n, buf, sizeof(buf)),
		        sc_ids_str(others, nothers, buf + 128, sizeof(buf) - 128));
	t_chan = sc_now_ms() - t0;
	SC_ASSERT(sc_members_are(m, want, (int)nodes));

	/* nobody leaves before everybody has checked */
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "all checked", SC_WAIT_MS);
	SC_ASSERT(sc_peers_are(ch, others, nothers));
	sc_sync_wait(&sync, "done", SC_WAIT_MS);

	sc_log("%u members after %lld ms, paired in channel s with %d peer(s) after %lld ms", nodes,
	       (long long)t_members, nothers, (long long)t_chan);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
