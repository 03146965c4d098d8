/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * netns.c -- one node of the network-namespace scenario (netns.sh runs
 * three, each in its own namespace behind a veth link to a bridge, with
 * LOCO_ADDR, LOCO_NODE_ID, LOCO_JOIN and LOCO_NODES=3 set).
 *
 * Every node waits for members {1, 2, 3}, joins channel "n" expecting 3
 * nodes, checks its peers, writes its id into every peer's shared region
 * and checks the ids that arrive. It then passes a barrier and creates
 * the file DIR/ready.ID (DIR is the argument). The driver cuts node 3's
 * link and writes the CLOCK_MONOTONIC time of the cut (ns) to DIR/cut.
 * Nodes 1 and 2 (a majority of the view) must drop node 3 within
 * LOCO_FAIL_TIMEOUT_MS + 1000 ms of the cut; node 3, alone, must not
 * carry on as a cluster of its own: it says it is partitioned
 * (loco_manager_partitioned()) within the same bound, its waits return
 * -LOCO_EPARTITION, and it still shows its last view. The detection times
 * are printed. Nodes 1 and 2 pass a last barrier before they leave.
 *
 * "netns --now" prints CLOCK_MONOTONIC in ns (the driver's clock).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

#define CUT      3
#define SLACK_MS 1000

/* read_cut -- the cut time from @path, or 0 while the file is missing or incomplete. */
static int64_t read_cut(const char *path)
{
	char buf[64];
	int64_t t = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || buf[n - 1] != '\n')
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%" SCNd64, &t) != 1)
		return 0;
	return t;
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	uint64_t view_paired;
	uint32_t me, others[2], alone[1], two[] = {1, 2}, ids[SC_MAX_NODES];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_shared_region_t *sr;
	loco_ack_key_t *ack;
	volatile uint64_t *slot;
	struct sc_sync sync;
	char path[4096], buf[128];
	int64_t t_gone, t_cut;
	int no = 0, n, fd;
	double ms;

	if (argc > 1 && strcmp(argv[1], "--now") == 0) {
		printf("%" PRId64 "\n", sc_now_ns());
		return 0;
	}
	sc_init("netns", argc, argv, 90);
	if (argc < 2)
		SC_FAIL("usage: netns DIR (run by netns.sh)");
	if (sc_nodes() != 3)
		SC_FAIL("LOCO_NODES=%u, expected 3", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT(me >= 1 && me <= 3);
	for (uint32_t i = 1; i <= 3; i++)
		if (i != me)
			others[no++] = i;
	alone[0] = me;
	sc_log("control %s", loco_manager_addr(m));

	/* all three see each other and pair in a channel */
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; !sc_members_are(m, all, 3); sc_sleep_ms(1))
		if (sc_now_ms() >= dl)
			SC_FAIL("members %s after %d ms, expected {1, 2, 3}",
			        sc_ids_str(ids, sc_members(m, ids), buf, sizeof(buf)), SC_WAIT_MS);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "n", 3, &ch));
	SC_ASSERT_OK(loco_shared_region_create(ch, "ids", SC_MAX_NODES * 8,
	                                       LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &sr));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	n = loco_channel_peers(ch, ids, SC_MAX_NODES);
	if (!sc_peers_are(ch, others, 2))
		SC_FAIL("channel n: peers %s", sc_ids_str(ids, n, buf, sizeof(buf)));
	slot = loco_shared_region_ptr(sr);
	__atomic_store_n(&slot[me], 0x1d00 + me, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		SC_ASSERT_OK(loco_shared_region_write(sr, others[i], me * 8, 8, ack));
	SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
	for (int i = 0; i < 2; i++)
		SC_WAIT_UNTIL(__atomic_load_n(&slot[others[i]], __ATOMIC_ACQUIRE) ==
		                  0x1d00 + others[i],
		              SC_WAIT_MS, "a peer's id in the shared region");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "paired", SC_WAIT_MS);
	sc_log("members {1, 2, 3}, paired in channel n, ids exchanged");
	view_paired =
	    loco_manager_view(m); /* the view with all three (2 or 3: joins may be batched) */

	/* tell the driver; it cuts node 3's link */
	snprintf(path, sizeof(path), "%s/ready.%u", argv[1], me);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		SC_FAIL("cannot create %s: %s", path, strerror(errno));
	close(fd);

	if (me == CUT)
		SC_WAIT_UNTIL(loco_manager_partitioned(m), SC_WAIT_MS + (int)sc_fail_timeout(),
		              "node 3 to see itself partitioned");
	else
		SC_WAIT_UNTIL(!sc_is_member(m, CUT), SC_WAIT_MS + (int)sc_fail_timeout(),
		              "node 3 to be dropped");
	t_gone = sc_now_ns();
	snprintf(path, sizeof(path), "%s/cut", argv[1]);
	SC_WAIT_UNTIL((t_cut = read_cut(path)) != 0, SC_WAIT_MS, "the driver's cut time");
	ms = (double)(t_gone - t_cut) / 1e6;
	sc_log("%s %.1f ms after the cut (fail timeout %u ms)",
	       me == CUT ? "partitioned" : "dropped node 3", ms, sc_fail_timeout());
	if (ms > sc_fail_timeout() + SLACK_MS)
		SC_FAIL("detection took %.1f ms, more than %u + %d ms", ms, sc_fail_timeout(),
		        SLACK_MS);
	if (ms < 0)
		SC_FAIL("dropped %.1f ms before the link was cut", -ms);

	if (me == CUT) {
		/* never a cluster of its own: no view without the others, waits refused */
		SC_ASSERT_EQ(loco_manager_view(m), view_paired);
		SC_ASSERT_EQ(loco_ack_wait(ack, SC_NS), -LOCO_EPARTITION);
		SC_ASSERT_EQ(loco_channel_partitioned(ch), 1);
		(void)alone;
	} else {
		SC_ASSERT(sc_members_are(m, two, 2));
		SC_ASSERT(sc_peers_are(ch, me == 1 ? two + 1 : two, 1));
		sc_sync_drop(&sync, CUT);
		sc_sync_wait(&sync, "nodes 1 and 2 checked", SC_WAIT_MS);
	}
	loco_ack_key_destroy(ack);
	loco_shared_region_destroy(sr);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
