/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * atomic_var-faa.c -- racing fetch-and-adds from every node on one word.
 *
 * loco-run -n N (N >= 3). Every node creates atomic_var "ctr" hosted on
 * node 1 in channel "av-faa". Before the join, a node other than the host
 * gets -ENOENT (the host is not paired). After a barrier, every node does
 * K synchronous FAA(1), then K more FAA(1) posted asynchronously in
 * batches of LOCO_ATOMIC_VAR_SLOTS on its own ack key, all at once.
 * Checks:
 *   - the old values one node sees strictly increase (its FAAs execute in
 *     order at the host), and every one is below N * 2K;
 *   - after a barrier, every node reads exactly N * 2K;
 *   - the old values are all distinct across nodes: the sum of every old
 *     value any node saw (each node publishes its sum in an sc-sync
 *     mailbox) is 0 + 1 + ... + (N * 2K - 1).
 * Node 1 (the host) uses the same calls; without a fabric path to itself
 * its operations are CPU atomics, which must serialize with the others':
 * it paces its operations (100 us apart) so that they overlap theirs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <loco/atomic_var.h>

#include "scenario.h"

#define K    2000
#define HOST 1

static int iters; /* K divided by LOCO_TEST_SCALE (sc_scaled) */

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_atomic_var_t *av;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	uint64_t old, prev = 0, sum = 0, total, v, expect_sum;
	uint32_t nodes, me;
	int64_t t0;
	bool first = true;

	sc_init("atomic_var-faa", argc, argv, 90);
	iters = (int)sc_scaled(K);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n N, N >= 3 (LOCO_NODES=%u)", nodes);
	m = sc_start();
	me = loco_manager_node_id(m);
	total = (uint64_t)nodes * 2 * iters;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "av-faa", nodes, &ch));
	SC_ASSERT_EQ(loco_atomic_var_create(ch, "ctr", 0, &av), -EINVAL);
	SC_ASSERT_OK(loco_atomic_var_create(ch, "ctr", HOST, &av));
	SC_ASSERT_EQ(loco_atomic_var_create(ch, "ctr", HOST, &av), -EEXIST);
	SC_ASSERT_EQ(loco_atomic_var_host(av), HOST);
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	/* not joined yet: refused on every node, the host included */
	SC_ASSERT_EQ(loco_atomic_var_faa(av, 1, &old, SC_NS), -LOCO_ENOTJOINED);
	SC_ASSERT_EQ(loco_atomic_var_faa_async(av, 1, LOCO_ATOMIC_VAR_SLOTS, ack), -EINVAL);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* 1. iters synchronous FAAs */
	t0 = sc_now_ns();
	for (int i = 0; i < iters; i++) {
		if (me == HOST)
			usleep(100); /* a local FAA takes ns: spread them over the others' */
		SC_ASSERT_OK(loco_atomic_var_faa(av, 1, &old, 10 * SC_NS));
		if (!first && old <= prev)
			SC_FAIL("FAA %d: old value %llu after %llu", i, (unsigned long long)old,
			        (unsigned long long)prev);
		if (old >= total)
			SC_FAIL("FAA %d: old value %llu >= %llu", i, (unsigned long long)old,
			        (unsigned long long)total);
		first = false;
		prev = old;
		sum += old;
	}
	sc_log("%d synchronous FAAs in %.1f ms", iters, (double)(sc_now_ns() - t0) / 1e6);

	/* 2. iters asynchronous FAAs, a batch of LOCO_ATOMIC_VAR_SLOTS at a time */
	t0 = sc_now_ns();
	for (int i = 0; i < iters; i += LOCO_ATOMIC_VAR_SLOTS) {
		int n = iters - i < LOCO_ATOMIC_VAR_SLOTS ? iters - i : LOCO_ATOMIC_VAR_SLOTS;

		if (me == HOST)
			usleep(1000);
		for (int s = 0; s < n; s++)
			SC_ASSERT_OK(loco_atomic_var_faa_async(av, 1, (unsigned)s, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
		/* one link, in order: the batch's old values increase with the slot */
		for (int s = 0; s < n; s++) {
			old = loco_atomic_var_slot(av, (unsigned)s);
			if (old <= prev || old >= total)
				SC_FAIL("async FAA %d: old value %llu after %llu (total %llu)",
				        i + s, (unsigned long long)old, (unsigned long long)prev,
				        (unsigned long long)total);
			prev = old;
			sum += old;
		}
	}
	sc_log("%d asynchronous FAAs in %.1f ms", iters, (double)(sc_now_ns() - t0) / 1e6);

	/* 3. everyone done: the total is exact, and no old value was seen twice */
	sc_sync_put(&sync, me, sum);
	sc_sync_wait(&sync, "all added", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(av, &v, 10 * SC_NS));
	if (v != total)
		SC_FAIL("the word holds %llu, expected %u nodes x %d = %llu", (unsigned long long)v,
		        nodes, 2 * iters, (unsigned long long)total);
	sum = sc_sync_get(&sync, me);
	for (int k = 0; k < sync.npeers; k++)
		sum += sc_sync_get(&sync, sync.peers[k]);
	expect_sum = total * (total - 1) / 2;
	if (sum != expect_sum)
		SC_FAIL("the old values sum to %llu, expected %llu: some were seen twice",
		        (unsigned long long)sum, (unsigned long long)expect_sum);
	sc_log("word = %llu = %u x %d, every old value seen once", (unsigned long long)v, nodes,
	       2 * iters);

	/* 4. a write and a CAS from the host are seen by all */
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	if (me == HOST) {
		SC_ASSERT_OK(loco_atomic_var_write(av, 7, 10 * SC_NS));
		SC_ASSERT_OK(loco_atomic_var_cas(av, 7, 42, &old, 10 * SC_NS));
		SC_ASSERT_EQ(old, 7);
		SC_ASSERT_OK(loco_atomic_var_cas(av, 7, 43, &old, 10 * SC_NS));
		SC_ASSERT_EQ(old, 42); /* failed: the word stays 42 */
	}
	sc_sync_wait(&sync, "written", SC_WAIT_MS);
	SC_ASSERT_OK(loco_atomic_var_read(av, &v, 10 * SC_NS));
	SC_ASSERT_EQ(v, 42);
	SC_ASSERT_OK(loco_atomic_var_read_async(av, 3, ack));
	SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
	SC_ASSERT_EQ(loco_atomic_var_slot(av, 3), 42);

	/* the host goes last: the others' operations must be over */
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_ack_key_destroy(ack);
	loco_atomic_var_destroy(av);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
