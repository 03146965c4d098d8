/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc-exhaust.c -- a small heap runs out (-ENOMEM), comes back as its
 * blocks are freed and trimmed (refills claim it again), shares exactly
 * among concurrent allocators, and serves a block as large as itself.
 *
 * loco-run -n 3. Allocator "ra" in channel "ra-ex": 16 slices of 4 KiB,
 * batches of 2, 4 empty slices kept; node 1's heap is used; blocks of
 * 256 B (16 a slice, 256 in the heap).
 *
 * 1. Node 2 alone allocates until -ENOMEM: exactly 256 blocks, every
 *    slice claimed, in at least 8 refills (the slow path, counted); the
 *    others then get -ENOMEM at once.
 * 2. Node 2 frees everything: it keeps at most 4 empty slices (the rest
 *    go back in batches); node 3 allocates until -ENOMEM and gets exactly
 *    the slices node 2 gave back; node 2 trims; node 3 allocates again
 *    (a refill after -ENOMEM) and now has the whole heap.
 * 3. Everyone frees and trims, then all three allocate at once until
 *    -ENOMEM: together exactly 256 blocks (no slice claimed twice, none
 *    lost).
 * 4. Node 2 allocates one block of the whole heap (a run of 16 slices),
 *    writes and reads it; heap + 1 B is -EMSGSIZE; node 3 gets -ENOMEM.
 *    After every free and trim, node 1's table is all free.
 *
 * Allocator "mm" is made with 8 KiB slices on node 3 and 4 KiB on the
 * others: every node's allocations on it fail with -LOCO_EMISMATCH.
 *
 * Beside it, allocator "numa" (a 2 MiB heap, a mapping of its own) asks
 * for NUMA node 0: its heap's pages must be there (on a machine whose
 * kernel knows NUMA nodes); a node the machine lacks is -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/ralloc.h>

#include "scenario.h"

#define HOST    1
#define SLICE   4096u
#define NSLICE  16u
#define HEAP    (NSLICE * SLICE)
#define BLK     256u
#define NBLK    (HEAP / BLK)
#define TMO     (10 * SC_NS)
#define BOX_CNT 16 /* + node id: 1 + blocks a node got in phase 3 */

static loco_rptr_t blocks[NBLK + 1];

/* fill_up -- allocate BLK-byte blocks on HOST until -ENOMEM, into blocks[@have...]. */
static unsigned fill_up(loco_ralloc_t *ra, unsigned have)
{
	int ret;

	for (;;) {
		SC_ASSERT(have <= NBLK);
		ret = loco_ralloc_alloc(ra, HOST, BLK, &blocks[have], TMO);
		if (ret == -ENOMEM)
			return have;
		SC_ASSERT_OK(ret);
		have++;
	}
}

static void free_all(loco_ralloc_t *ra, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		SC_ASSERT_OK(loco_ralloc_free(ra, &blocks[i]));
}

static loco_ralloc_stats_t stats(loco_ralloc_t *ra)
{
	loco_ralloc_stats_t st;

	SC_ASSERT_OK(loco_ralloc_stats(ra, &st));
	return st;
}

/* numa_check -- a heap bound to node 0 lives there; nodes that do not exist are refused. */
static void numa_check(loco_channel_t *ch)
{
	loco_ralloc_cfg_t nc = {.heap_len = 2u << 20, .numa_node = 0};
	loco_ralloc_t *ra;
	loco_ralloc_stats_t st;

	SC_ASSERT_OK(loco_ralloc_create(ch, "numa", &nc, &ra));
	SC_ASSERT_OK(loco_ralloc_stats(ra, &st));
	sc_log("a heap asked on NUMA node 0 is on node %d", st.heap_numa);
	if (access("/sys/devices/system/node/node0", F_OK) == 0)
		SC_ASSERT_EQ(st.heap_numa, 0);
	loco_ralloc_destroy(ra);
	nc.numa_node = 1 << 20;
	SC_ASSERT_EQ(loco_ralloc_create(ch, "numa", &nc, &ra), -EINVAL);
	nc.numa_node = -2;
	SC_ASSERT_EQ(loco_ralloc_create(ch, "numa", &nc, &ra), -EINVAL);
}

int main(int argc, char **argv)
{
	const loco_ralloc_cfg_t cfg = {
	    .heap_len = HEAP, .slice_len = SLICE, .batch = 2, .keep = 4, .numa_node = -1};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_ralloc_t *ra, *mm;
	loco_ralloc_cfg_t mcfg = cfg;
	loco_object_t *bobj;
	loco_region_t *buf;
	loco_ack_key_t *ack;
	struct sc_sync sync;
	loco_ralloc_stats_t st, st0;
	loco_rptr_t p;
	uint32_t me;
	unsigned n = 0, kept, sum = 0;

	sc_init("ralloc-exhaust", argc, argv, 100);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ra-ex", 3, &ch));
	SC_ASSERT_OK(loco_ralloc_create(ch, "ra", &cfg, &ra));
	numa_check(ch);
	mcfg.slice_len = me == 3 ? 2 * SLICE : SLICE;
	SC_ASSERT_OK(loco_ralloc_create(ch, "mm", &mcfg, &mm));
	SC_ASSERT_OK(loco_object_create(ch, "src", NULL, NULL, &bobj));
	SC_ASSERT_OK(loco_region_create(bobj, "buf", HEAP, 0, &buf));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	SC_WAIT_UNTIL(loco_ralloc_alloc(mm, HOST, 1, &p, TMO) == -LOCO_EMISMATCH, SC_WAIT_MS,
	              "-LOCO_EMISMATCH from allocator mm");
	loco_ralloc_destroy(mm);

	/* 1. one node exhausts the heap */
	if (me == 2) {
		n = fill_up(ra, 0);
		st = stats(ra);
		sc_log("phase 1: %u blocks of %u B until -ENOMEM; %llu refills, %llu slices "
		       "claimed, %llu allocations served without a round trip",
		       n, BLK, (unsigned long long)st.slow, (unsigned long long)st.claimed,
		       (unsigned long long)(st.allocs - st.slow));
		SC_ASSERT_EQ(n, NBLK);
		SC_ASSERT_EQ(st.claimed, NSLICE);
		SC_ASSERT(st.slow >= NSLICE / cfg.batch && st.slow <= 2 * NSLICE);
	}
	sc_sync_wait(&sync, "exhausted", SC_WAIT_MS);
	if (me != 2)
		SC_ASSERT_EQ(loco_ralloc_alloc(ra, HOST, 1, &p, TMO), -ENOMEM);
	if (me == HOST)
		SC_ASSERT_EQ(stats(ra).host_used, NSLICE);
	sc_sync_wait(&sync, "refused", SC_WAIT_MS);

	/* 2. freed, kept, given back, trimmed, refilled */
	if (me == 2) {
		free_all(ra, n);
		st = stats(ra);
		kept = (unsigned)(st.claimed - st.returned);
		sc_log("phase 2: after %u frees node 2 keeps %u empty slices, gave back %llu", n,
		       kept, (unsigned long long)st.returned);
		SC_ASSERT(kept >= 1 && kept <= cfg.keep);
		sc_sync_put(&sync, 1, kept);
	}
	sc_sync_wait(&sync, "freed", SC_WAIT_MS);
	kept = (unsigned)sc_sync_get(&sync, 1);
	/* a free posts its give-backs and does not wait for them: they land soon after */
	if (me == HOST)
		SC_WAIT_UNTIL(stats(ra).host_used == kept, SC_WAIT_MS, "node 2's give-backs");
	sc_sync_wait(&sync, "given back", SC_WAIT_MS);
	if (me == 3) {
		n = fill_up(ra, 0);
		sc_log("phase 2: node 3 got %u blocks while node 2 kept %u slices", n, kept);
		SC_ASSERT_EQ(n, (NSLICE - kept) * (SLICE / BLK));
	}
	sc_sync_wait(&sync, "node 3 filled", SC_WAIT_MS);
	if (me == 2)
		SC_ASSERT_OK(loco_ralloc_trim(ra, TMO));
	sc_sync_wait(&sync, "trimmed", SC_WAIT_MS);
	if (me == 3) {
		st0 = stats(ra);
		n = fill_up(ra, n);
		st = stats(ra);
		sc_log("phase 2: after node 2's trim node 3 has %u blocks (%llu more refills)", n,
		       (unsigned long long)(st.slow - st0.slow));
		SC_ASSERT_EQ(n, NBLK);
		SC_ASSERT(st.slow > st0.slow);
		free_all(ra, n);
		SC_ASSERT_OK(loco_ralloc_trim(ra, TMO));
	}
	sc_sync_wait(&sync, "phase 2", SC_WAIT_MS);
	if (me == HOST)
		SC_ASSERT_EQ(stats(ra).host_used, 0);

	/* 3. all at once */
	sc_sync_wait(&sync, "phase 3 start", SC_WAIT_MS);
	st0 = stats(ra);
	n = fill_up(ra, 0);
	st = stats(ra);
	sc_log("phase 3: %u blocks, %llu slices claimed, %llu CASes lost to another node", n,
	       (unsigned long long)(st.claimed - st0.claimed),
	       (unsigned long long)(st.lost - st0.lost));
	SC_ASSERT_EQ(n % (SLICE / BLK), 0); /* every slice a node holds is full */
	sc_sync_put(&sync, BOX_CNT + me, 1 + (uint64_t)n);
	sc_sync_wait(&sync, "phase 3 counted", SC_WAIT_MS);
	for (uint32_t i = 1; i <= 3; i++)
		sum += (unsigned)sc_sync_get(&sync, BOX_CNT + i) - 1;
	if (me == HOST)
		sc_log("phase 3: %u blocks in all (the heap holds %u)", sum, NBLK);
	SC_ASSERT_EQ(sum, NBLK);
	free_all(ra, n);
	SC_ASSERT_OK(loco_ralloc_trim(ra, TMO));
	sc_sync_wait(&sync, "phase 3", SC_WAIT_MS);

	/* 4. one block of the whole heap */
	if (me == 2) {
		uint8_t *b = loco_region_ptr(buf);

		SC_ASSERT_EQ(loco_ralloc_alloc(ra, HOST, HEAP + 1, &p, TMO), -EMSGSIZE);
		SC_ASSERT_OK(loco_ralloc_alloc(ra, HOST, HEAP, &p, TMO));
		SC_ASSERT_EQ(p.rref.len, HEAP);
		for (unsigned i = 0; i < HEAP; i++)
			b[i] = (uint8_t)(i * 7 + 3);
		SC_ASSERT_OK(loco_write(buf, 0, &p.rref, 0, HEAP, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, TMO));
		memset(b, 0, HEAP);
		SC_ASSERT_OK(loco_read(buf, 0, &p.rref, 0, HEAP, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, TMO));
		for (unsigned i = 0; i < HEAP; i++)
			SC_ASSERT_EQ(b[i], (uint8_t)(i * 7 + 3));
		sc_log("phase 4: one block of the whole heap (%u B) written and read back", HEAP);
	}
	sc_sync_wait(&sync, "whole heap taken", SC_WAIT_MS);
	if (me == HOST)
		SC_ASSERT_EQ(stats(ra).host_used, NSLICE);
	if (me == 3)
		SC_ASSERT_EQ(loco_ralloc_alloc(ra, HOST, 1, &p, TMO), -ENOMEM);
	sc_sync_wait(&sync, "refused again", SC_WAIT_MS);
	if (me == 2) {
		SC_ASSERT_OK(loco_ralloc_free(ra, &p));
		SC_ASSERT_EQ(loco_ralloc_free(ra, &p), -EINVAL);
		SC_ASSERT_OK(loco_ralloc_trim(ra, TMO));
	}
	sc_sync_wait(&sync, "all free", SC_WAIT_MS);
	if (me == HOST) {
		st = stats(ra);
		sc_log("end: %llu of %llu slices used", (unsigned long long)st.host_used,
		       (unsigned long long)st.host_slices);
		SC_ASSERT_EQ(st.host_used, 0);
	}
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_ack_key_destroy(ack);
	loco_object_destroy(bobj);
	loco_ralloc_destroy(ra);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
