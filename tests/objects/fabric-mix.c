/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fabric-mix.c -- LOCO_FABRIC=auto picks the fabric per peer: shm to the
 * nodes of this host, tcp to the others; and one channel works across
 * the mix.
 *
 * loco-run -n 4 with LOCO_FABRIC=auto and LOCO_TEST_HOSTS=2: nodes 1 and
 * 3 act as one host, 2 and 4 as another (scenario.c gives each its
 * LOCO_SHM_HOST). Every node checks that loco_manager_member_fabric() says shm
 * for the peer on its "host" and tcp for the two others (and the
 * argument errors), then runs ROUNDS rounds of an sst with 64-byte rows
 * (store, push_broadcast on an ack key, wait for it, barrier) and checks
 * after each barrier that every peer's row is that peer's row of the
 * round, whatever link carried it; the pushes count WRITEs over both
 * fabrics. With LOCO_TEST_HOSTS unset every link is shm, with
 * LOCO_AUTO_SHM=0 every link is tcp, and with LOCO_FABRIC=tcp|shm|verbs
 * every link is that one: the test checks what it saw against the
 * environment, so it runs on every fabric. fabric-mix-auto-verbs (in the
 * Soft-RoCE VM) expects verbs between the pretend hosts
 * (LOCO_TEST_REMOTE=verbs): shm stacked beside verbs, on the device's keys.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/barrier.h>
#include <loco/sst.h>

#include "scenario.h"

#define NODES  4
#define ROUNDS 200
#define ROW    64

/* expected -- the fabric the environment says @me's link to @peer uses. */
static const char *expected(uint32_t me, uint32_t peer)
{
	const char *no_shm = getenv("LOCO_AUTO_SHM"), *fabric = getenv("LOCO_FABRIC");
	uint32_t hosts = sc_env_u32("LOCO_TEST_HOSTS", 0);

	if (fabric == NULL || *fabric == '\0')
		fabric = "auto"; /* the default */
	if (strcmp(fabric, "auto") != 0)
		return fabric; /* one fabric for every link */
	if (no_shm != NULL && strcmp(no_shm, "0") == 0)
		return "tcp";
	if (hosts == 0 || (me - 1) % hosts == (peer - 1) % hosts)
		return "shm";
	return getenv("LOCO_TEST_REMOTE") != NULL ? getenv("LOCO_TEST_REMOTE") : "tcp";
}

/* rdma_device -- whether the kernel has an RDMA device (/sys/class/infiniband/ not empty). */
static bool rdma_device(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool any = false;

	while (d != NULL && (e = readdir(d)) != NULL)
		any |= e->d_name[0] != '.';
	if (d != NULL)
		closedir(d);
	return any;
}

static void make_row(uint8_t *row, uint32_t node, uint32_t round)
{
	for (int i = 0; i < ROW; i++)
		row[i] = (uint8_t)(node * 31 + round * 7 + (uint32_t)i);
}

int main(int argc, char **argv)
{
	static const uint32_t all[NODES] = {1, 2, 3, 4};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_sst_t *sst;
	loco_barrier_t *bar;
	loco_ack_key_t *ack;
	const char *name = "unchanged";
	uint32_t me;
	int shm = 0, tcp = 0, verbs = 0;

	sc_init("fabric-mix", argc, argv, 120);
	if (getenv("LOCO_TEST_REMOTE") != NULL &&
	    strcmp(getenv("LOCO_TEST_REMOTE"), "verbs") == 0 && !rdma_device()) {
		sc_log("SKIP: auto picks verbs between hosts only where an RDMA device is");
		return 77;
	}
	if (sc_nodes() != NODES)
		SC_FAIL("run with loco-run -n %d (LOCO_NODES=%u)", NODES, sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "mix", NODES, &ch));
	SC_ASSERT_OK(loco_sst_create(ch, "rows", ROW, NODES + 1, &sst));
	SC_ASSERT_OK(loco_barrier_create(ch, "b", &bar));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	SC_WAIT_UNTIL(sc_members_are(m, all, NODES), SC_WAIT_MS, "members {1, 2, 3, 4}");

	/* the choice, per peer */
	SC_ASSERT_EQ(loco_manager_member_fabric(NULL, 1, &name), -EINVAL);
	SC_ASSERT_EQ(loco_manager_member_fabric(m, 1, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_manager_member_fabric(m, me, &name), -ENOENT);
	SC_ASSERT_EQ(loco_manager_member_fabric(m, 99, &name), -ENOENT);
	SC_ASSERT(strcmp(name, "unchanged") == 0); /* outputs only on success */
	for (uint32_t peer = 1; peer <= NODES; peer++) {
		if (peer == me)
			continue;
		SC_ASSERT_OK(loco_manager_member_fabric(m, peer, &name));
		if (strcmp(name, expected(me, peer)) != 0)
			SC_FAIL("link to node %u on %s, expected %s", peer, name,
			        expected(me, peer));
		shm += strcmp(name, "shm") == 0;
		tcp += strcmp(name, "tcp") == 0;
		verbs += strcmp(name, "verbs") == 0;
	}

	/* one channel across both */
	for (uint32_t r = 1; r <= ROUNDS; r++) {
		uint8_t row[ROW], want[ROW], got[ROW];

		make_row(row, me, r);
		SC_ASSERT_OK(loco_sst_store_mine(sst, row));
		SC_ASSERT_EQ(loco_sst_push_broadcast(sst, ack),
		             NODES - 1); /* a WRITE to each peer */
		SC_ASSERT_OK(loco_ack_wait(ack, (int64_t)SC_WAIT_MS * 1000000));
		SC_ASSERT_OK(loco_barrier_wait(bar, (int64_t)SC_WAIT_MS * 1000000));
		for (uint32_t peer = 1; peer <= NODES; peer++) {
			if (peer == me)
				continue;
			make_row(want, peer, r);
			SC_ASSERT_OK(loco_sst_read(sst, peer, got));
			if (memcmp(got, want, ROW) != 0)
				SC_FAIL("round %u: node %u's row is not its row of the round", r,
				        peer);
		}
		/* nobody stores round r + 1 before everyone read round r */
		SC_ASSERT_OK(loco_barrier_wait(bar, (int64_t)SC_WAIT_MS * 1000000));
	}
	sc_log("links: %d on shm, %d on tcp, %d on verbs; %d rounds of 64-byte rows over them", shm,
	       tcp, verbs, ROUNDS);
	loco_ack_key_destroy(ack);
	loco_barrier_destroy(bar);
	loco_sst_destroy(sst);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
