/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc-storm.c -- every node allocates, writes, reads back and frees
 * blocks on one host's heap at the same time; no block ever holds what
 * another block's owner wrote, and the host's table agrees with the
 * allocators' shadows.
 *
 * loco-run -n 3 (or more). Every node holds allocator "ra" in channel
 * "ra-storm" (an 8 MiB heap of 64 KiB slices, batches of 4); node 1's heap
 * is the one used (node 1 allocates on itself too, through its self link).
 * Each node runs OPS random operations: allocate (1 B - 4 KiB mostly, up
 * to 64 KiB sometimes, and runs of 2-4 slices rarely; at most LIVE blocks
 * held), fill the block with a pattern naming (node, seq) by one WRITE;
 * read a live block back and check it; or free a live block, checked
 * first (and, every 25th free, freed twice: -EINVAL). Each new block must
 * be 64-byte aligned and overlap none of this node's live blocks; a
 * block that overlapped another node's would fail its check once that
 * node wrote its own pattern.
 *
 * Then two threads of every node run the same storm at once on one
 * allocator (it is MT-safe), each on its own blocks (TOPS operations,
 * TLIVE blocks at most), checking each other's blocks never overlap
 * theirs by content.
 *
 * Then, at a barrier with every block still held, node 1 checks that its
 * table's used slices come to exactly the sum of the slices each node holds
 * by its own count (claimed - given back). Every node frees everything
 * (checked), trims its cache; node 1's table must then be all free.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/ralloc.h>

#include "scenario.h"

#define HOST     1
#define HEAP     (8u << 20)
#define SLICE    (64u << 10)
#define LIVE     48
#define BUF      (4u * SLICE)
#define TMO      (10 * SC_NS)
#define BOX_HELD 16 /* + node id: the slices a node holds by its own count */
#define OPS_BASE 3000

#define TOPS  sc_scaled(1500)
#define TLIVE 16

struct blk {
	loco_rptr_t p;
	uint64_t seq;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* fill -- the pattern of block (@node, @seq): a stream seeded by both. */
static void fill(uint8_t *b, size_t len, uint32_t node, uint64_t seq)
{
	uint64_t s = (uint64_t)node << 40 ^ seq, w = 0;

	for (size_t j = 0; j < len; j++) {
		if (j % 8 == 0)
			w = rng_next(&s);
		b[j] = (uint8_t)(w >> (j % 8 * 8));
	}
}

static size_t pick_len(uint64_t *rng)
{
	uint64_t r = rng_next(rng) % 1000;

	if (r < 900)
		return 1 + rng_next(rng) % 4096;
	if (r < 990)
		return 4097 + rng_next(rng) % (SLICE - 4096);
	return SLICE + 1 + rng_next(rng) % (3 * SLICE); /* a run of 2-4 slices */
}

struct ctx {
	loco_ralloc_t *ra;
	loco_region_t *buf;
	loco_ack_key_t *ack;
	uint8_t *want;
	uint32_t me;
	uint64_t checked;
};

static void check(struct ctx *c, const struct blk *b)
{
	size_t len = b->p.rref.len;

	memset(loco_region_ptr(c->buf), 0, len);
	SC_ASSERT_OK(loco_read(c->buf, 0, &b->p.rref, 0, len, c->ack));
	SC_ASSERT_OK(loco_ack_wait(c->ack, TMO));
	fill(c->want, len, c->me, b->seq);
	if (memcmp(loco_region_ptr(c->buf), c->want, len) != 0) {
		const uint8_t *got = loco_region_ptr(c->buf);
		size_t j = 0;

		while (got[j] == c->want[j])
			j++;
		SC_FAIL("block seq %llu at %#llx (%zu B): byte %zu is %#x, not %#x: overwritten",
		        (unsigned long long)b->seq, (unsigned long long)b->p.rref.addr, len, j,
		        got[j], c->want[j]);
	}
	c->checked++;
}

/* One thread of the threaded storm: its own buffer, ack key and blocks, the node's allocator. */
struct tctx {
	struct ctx c;
	uint32_t tag; /* the pattern's node field: node id + 100 * (thread + 1) */
	uint64_t allocs;
};

static void *thread_storm(void *arg)
{
	struct tctx *t = arg;
	struct blk live[TLIVE];
	uint64_t rng = 0xabcdefull * t->tag, seq = 0;
	int nlive = 0;

	for (uint32_t op = 0; op < TOPS; op++) {
		uint64_t r = rng_next(&rng) % 100;

		if (nlive < TLIVE && (nlive == 0 || r < 50)) {
			struct blk *b = &live[nlive++];
			size_t len = 1 + rng_next(&rng) % 8192;

			SC_ASSERT_OK(loco_ralloc_alloc(t->c.ra, HOST, len, &b->p, TMO));
			b->seq = ++seq;
			fill(loco_region_ptr(t->c.buf), len, t->tag, b->seq);
			SC_ASSERT_OK(loco_write(t->c.buf, 0, &b->p.rref, 0, len, t->c.ack));
			SC_ASSERT_OK(loco_ack_wait(t->c.ack, TMO));
			t->allocs++;
		} else {
			int k = (int)(rng_next(&rng) % (uint64_t)nlive);

			check(&t->c, &live[k]);
			if (r < 80)
				continue;
			SC_ASSERT_OK(loco_ralloc_free(t->c.ra, &live[k].p));
			live[k] = live[--nlive];
		}
	}
	while (nlive > 0) {
		check(&t->c, &live[nlive - 1]);
		SC_ASSERT_OK(loco_ralloc_free(t->c.ra, &live[--nlive].p));
	}
	return NULL;
}

/* threaded -- two threads of this node storm on one allocator at once. */
static void threaded(loco_manager_t *m, loco_ralloc_t *ra, loco_region_t *tbuf[2], uint32_t me)
{
	struct tctx t[2];
	pthread_t th[2];

	for (int i = 0; i < 2; i++) {
		t[i] = (struct tctx){.c = {.ra = ra, .buf = tbuf[i], .me = me + 100u * (i + 1)},
		                     .tag = me + 100u * (i + 1)};
		t[i].c.want = malloc(8192);
		SC_ASSERT(t[i].c.want != NULL);
		SC_ASSERT_OK(loco_ack_key_create(m, &t[i].c.ack));
	}
	for (int i = 0; i < 2; i++)
		SC_ASSERT(pthread_create(&th[i], NULL, thread_storm, &t[i]) == 0);
	for (int i = 0; i < 2; i++)
		SC_ASSERT(pthread_join(th[i], NULL) == 0);
	sc_log("two threads: %llu + %llu blocks allocated, written and checked on one allocator",
	       (unsigned long long)t[0].allocs, (unsigned long long)t[1].allocs);
	for (int i = 0; i < 2; i++) {
		loco_ack_key_destroy(t[i].c.ack);
		free(t[i].c.want);
	}
}

int main(int argc, char **argv)
{
	const loco_ralloc_cfg_t cfg = {.heap_len = HEAP, .slice_len = SLICE, .numa_node = -1};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *bobj;
	loco_region_t *tbuf[2];
	struct sc_sync sync;
	struct blk live[LIVE];
	struct ctx c = {0};
	loco_ralloc_stats_t st;
	uint64_t rng, seq = 0, held_sum = 0, frees = 0;
	uint32_t ops, nodes;
	int nlive = 0;
	int64_t t0;
	double ms;

	sc_init("ralloc-storm", argc, argv, 200);
	nodes = sc_nodes();
	if (nodes < 3)
		SC_FAIL("run with loco-run -n 3 or more (LOCO_NODES=%u)", nodes);
	ops = sc_scaled(OPS_BASE);
	m = sc_start();
	c.me = loco_manager_node_id(m);
	rng = 0x1234567ull * c.me;
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ra-storm", nodes, &ch));
	SC_ASSERT_OK(loco_ralloc_create(ch, "ra", &cfg, &c.ra));
	SC_ASSERT_OK(loco_object_create(ch, "src", NULL, NULL, &bobj));
	SC_ASSERT_OK(loco_region_create(bobj, "buf", BUF, 0, &c.buf));
	SC_ASSERT_OK(loco_region_create(bobj, "t0", 8192, 0, &tbuf[0]));
	SC_ASSERT_OK(loco_region_create(bobj, "t1", 8192, 0, &tbuf[1]));
	SC_ASSERT_OK(loco_ack_key_create(m, &c.ack));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	c.want = malloc(BUF);
	SC_ASSERT(c.want != NULL);
	sc_sync_open(&sync, m, nodes);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	t0 = sc_now_ns();
	for (uint32_t op = 0; op < ops; op++) {
		uint64_t r = rng_next(&rng) % 100;

		if (nlive < LIVE && (nlive == 0 || r < 50)) {
			struct blk *b = &live[nlive];
			size_t len = pick_len(&rng);
			uint64_t a;

			SC_ASSERT_OK(loco_ralloc_alloc(c.ra, HOST, len, &b->p, TMO));
			b->seq = ++seq;
			a = b->p.rref.addr;
			SC_ASSERT_EQ(b->p.rref.node, HOST);
			SC_ASSERT_EQ(b->p.rref.len, len);
			SC_ASSERT_EQ(a % 64, 0);
			for (int k = 0; k < nlive; k++) {
				uint64_t a2 = live[k].p.rref.addr, l2 = live[k].p.rref.len;

				if (a < a2 + l2 && a2 < a + len)
					SC_FAIL(
					    "block %#llx + %zu overlaps live block %#llx + %llu",
					    (unsigned long long)a, len, (unsigned long long)a2,
					    (unsigned long long)l2);
			}
			fill(loco_region_ptr(c.buf), len, c.me, b->seq);
			SC_ASSERT_OK(loco_write(c.buf, 0, &b->p.rref, 0, len, c.ack));
			SC_ASSERT_OK(loco_ack_wait(c.ack, TMO));
			nlive++;
		} else if (r < 80) {
			check(&c, &live[rng_next(&rng) % (uint64_t)nlive]);
		} else {
			int k = (int)(rng_next(&rng) % (uint64_t)nlive);
			struct blk b = live[k];

			check(&c, &b);
			SC_ASSERT_OK(loco_ralloc_free(c.ra, &b.p));
			if (++frees % 25 == 0)
				SC_ASSERT_EQ(loco_ralloc_free(c.ra, &b.p), -EINVAL);
			live[k] = live[--nlive];
		}
	}
	ms = (double)(sc_now_ns() - t0) / 1e6;
	SC_ASSERT_OK(loco_ralloc_stats(c.ra, &st));
	sc_log("%u ops in %.0f ms: %llu allocs, %llu frees, %llu checks; %llu refills "
	       "(%.2f%% of allocs), %llu slices claimed, %llu CASes lost, %llu given back",
	       ops, ms, (unsigned long long)st.allocs, (unsigned long long)st.frees,
	       (unsigned long long)c.checked, (unsigned long long)st.slow,
	       st.allocs ? 100.0 * (double)st.slow / (double)st.allocs : 0.0,
	       (unsigned long long)st.claimed, (unsigned long long)st.lost,
	       (unsigned long long)st.returned);
	SC_ASSERT(st.slow < st.allocs / 4); /* most allocations take no round trip */
	threaded(m, c.ra, tbuf, c.me);
	SC_ASSERT_OK(loco_ralloc_stats(c.ra, &st));

	/* the table agrees with the shadows while every node holds its blocks */
	sc_sync_put(&sync, BOX_HELD + c.me, 1 + st.claimed - st.returned);
	sc_sync_wait(&sync, "held counted", SC_WAIT_MS);
	if (c.me == HOST) {
		for (uint32_t n = 1; n < SC_MAX_NODES - BOX_HELD; n++)
			if (sc_sync_get(&sync, BOX_HELD + n) != 0)
				held_sum += sc_sync_get(&sync, BOX_HELD + n) - 1;
		/* a free posts its give-backs and does not wait for them: they land soon after */
		SC_WAIT_UNTIL(loco_ralloc_stats(c.ra, &st) == 0 && st.host_used == held_sum,
		              SC_WAIT_MS, "the table to match the allocators' counts");
		sc_log("host table: %llu of %llu slices used; the allocators hold %llu",
		       (unsigned long long)st.host_used, (unsigned long long)st.host_slices,
		       (unsigned long long)held_sum);
		SC_ASSERT(held_sum > 0);
	}
	sc_sync_wait(&sync, "table checked", SC_WAIT_MS);

	while (nlive > 0) {
		check(&c, &live[nlive - 1]);
		SC_ASSERT_OK(loco_ralloc_free(c.ra, &live[--nlive].p));
	}
	SC_ASSERT_OK(loco_ralloc_trim(c.ra, TMO));
	sc_sync_wait(&sync, "all freed", SC_WAIT_MS);
	if (c.me == HOST) {
		SC_ASSERT_OK(loco_ralloc_stats(c.ra, &st));
		sc_log("host table after every free and trim: %llu of %llu slices used",
		       (unsigned long long)st.host_used, (unsigned long long)st.host_slices);
		SC_ASSERT_EQ(st.host_used, 0);
	}
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	free(c.want);
	loco_ack_key_destroy(c.ack);
	loco_object_destroy(bobj);
	loco_ralloc_destroy(c.ra);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
