/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * one-sided.c -- WRITE, READ, CAS and FAA are served with no work from the
 * target application (DESIGN §3, first guarantee).
 *
 * The target process registers a region, sends its address and key over a
 * pipe, then its main thread blocks reading that pipe: it never polls (a
 * helper thread only accepts and admits the link). The initiator writes and reads ranges of every
 * size and alignment (one byte to the whole region, several wire segments), runs CAS that succeeds
 * and fails and FAA (with wrap-around), checks every result and completion, and at the end the
 * target compares its own memory with the image the initiator expects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define REG (1536u * 1024u) /* target region; larger than one 64 KiB tcp segment */
#define CTX 0x0123456789abcdefull
#define TMO 10000 /* ms */

static struct fab *fab;
static struct fab_link *link;
static struct fab_mr *src_mr, *dst_mr;
static uint8_t *src, *dst, *mirror;
static struct t_target tgt;
static uint64_t next_wrid = 1;

/* run -- post @wr signaled, check its completion in full, return its status */
static void run_ok(struct fab_wr wr, uint32_t want_len)
{
	struct fab_wc wc;

	wr.flags |= FAB_WR_SIGNALED;
	T_ASSERT_OK(fab_post(link, &wr, 1));
	T_EXPECT_WC(fab, wr.wrid, wr.opcode, 0, TMO, &wc);
	T_ASSERT_EQX(wc.link_ctx, CTX);
	T_ASSERT_EQ(wc.link_id, link->id);
	if (wr.opcode == FAB_OP_READ || wr.opcode == FAB_OP_WRITE)
		T_ASSERT_EQ(wc.len, want_len);
}

static void write_range(size_t loff, size_t off, size_t len)
{
	struct t_region *r = &tgt.reg[0];

	t_fill(src + loff, len, next_wrid * 977 + off);
	run_ok(t_wr_rdma(FAB_OP_WRITE, next_wrid++, 0, src + loff, (uint32_t)len, src_mr->lkey,
	                 r->addr + off, r->rkey),
	       (uint32_t)len);
	memcpy(mirror + off, src + loff, len);
}

static void read_check(size_t loff, size_t off, size_t len)
{
	struct t_region *r = &tgt.reg[0];
	char what[96];

	memset(dst + loff, 0x5a, len);
	run_ok(t_wr_rdma(FAB_OP_READ, next_wrid++, 0, dst + loff, (uint32_t)len, dst_mr->lkey,
	                 r->addr + off, r->rkey),
	       (uint32_t)len);
	snprintf(what, sizeof(what), "READ of [%zu, +%zu)", off, len);
	if (!t_mem_equal(dst + loff, mirror + off, len, what))
		T_FAIL("READ returned other bytes than were written");
}

static uint64_t mirror_word(size_t off)
{
	uint64_t v;

	memcpy(&v, mirror + off, 8);
	return v;
}

static void set_mirror_word(size_t off, uint64_t v)
{
	memcpy(mirror + off, &v, 8);
}

/* cas -- CAS at @off; returns the old value the fabric reported */
static uint64_t cas(size_t off, uint64_t compare, uint64_t swap)
{
	uint64_t *res = (uint64_t *)(dst + 64);

	*res = 0xa5a5a5a5a5a5a5a5ull; /* must be overwritten */
	run_ok(t_wr_cas(next_wrid++, 0, res, dst_mr->lkey, tgt.reg[0].addr + off, tgt.reg[0].rkey,
	                compare, swap),
	       8);
	return *res;
}

static uint64_t faa(size_t off, uint64_t add)
{
	uint64_t *res = (uint64_t *)(dst + 64);

	*res = 0xa5a5a5a5a5a5a5a5ull;
	run_ok(t_wr_faa(next_wrid++, 0, res, dst_mr->lkey, tgt.reg[0].addr + off, tgt.reg[0].rkey,
	                add),
	       8);
	return *res;
}

static void test_write_read(void)
{
	static const struct {
		size_t off, len;
	} r[] = {
	    {0, 1},         {3, 7},           {8, 8},       {61, 63},
	    {64, 64},       {127, 65},        {4096, 4096}, {5000, 65536},
	    {70001, 65537}, {200000, 300000}, {REG - 1, 1}, {REG - 3 * 65536 - 5, 3 * 65536 + 5},
	    {0, REG},       {1000, 2000},
	};

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		/* vary the local offset too, when it fits */
		size_t loff = r[i].len + 512 <= REG ? (i * 13) % 512 : 0;

		write_range(loff, r[i].off, r[i].len);
		read_check((i * 29) % 512 * (r[i].len + 512 <= REG), r[i].off, r[i].len);
	}
	read_check(0, 0, REG);
	printf("write/read: %zu ranges ok\n", sizeof(r) / sizeof(r[0]));
}

static void test_atomics(void)
{
	const size_t w = 8192;
	const uint64_t x = 0x1122334455667788ull;
	uint64_t v0 = mirror_word(w);

	/* CAS that succeeds: old value back, memory swapped */
	T_ASSERT_EQX(cas(w, v0, x), v0);
	set_mirror_word(w, x);
	read_check(128, w, 8);

	/* CAS that fails: old value back, memory unchanged */
	T_ASSERT_EQX(cas(w, x ^ 1, 0xdeaddeaddeaddeadull), x);
	read_check(128, w, 8);

	/* FAA: old value back, sum in memory, modulo 2^64 */
	T_ASSERT_EQX(faa(w, 5), x);
	T_ASSERT_EQX(faa(w, UINT64_MAX), x + 5);
	T_ASSERT_EQX(faa(w, 1ull << 63), x + 4);
	set_mirror_word(w, x + 4 + (1ull << 63));
	T_ASSERT_EQX(faa(w, 0), x + 4 + (1ull << 63));
	read_check(128, w, 8);

	/* the first and the last word of the region */
	T_ASSERT_EQX(cas(0, mirror_word(0), 42), mirror_word(0));
	set_mirror_word(0, 42);
	T_ASSERT_EQX(faa(REG - 8, 3), mirror_word(REG - 8));
	set_mirror_word(REG - 8, mirror_word(REG - 8) + 3);
	T_ASSERT_EQX(cas(REG - 8, 7, 9), mirror_word(REG - 8)); /* fails: 7 is not there */
	read_check(0, 0, 64);
	read_check(0, REG - 64, 64);
	printf("atomics: ok\n");
}

/* many unsignaled WRITEs and one signaled: one completion, all data there */
static void test_burst(void)
{
	const size_t base = 16384, n = 200;
	struct fab_wr wr;

	for (size_t i = 0; i < n; i++) {
		uint64_t v = 0xb0b0000000000000ull + i;

		memcpy(src + 65536 + i * 8, &v, 8);
		wr = t_wr_rdma(FAB_OP_WRITE, next_wrid++, 0, src + 65536 + i * 8, 8, src_mr->lkey,
		               tgt.reg[0].addr + base + i * 8, tgt.reg[0].rkey);
		T_ASSERT_OK(fab_post(link, &wr, 1));
		memcpy(mirror + base + i * 8, &v, 8);
	}
	run_ok(t_wr_rdma(FAB_OP_READ, next_wrid++, 0, dst, (uint32_t)(n * 8), dst_mr->lkey,
	                 tgt.reg[0].addr + base, tgt.reg[0].rkey),
	       (uint32_t)(n * 8));
	T_EXPECT_NONE(fab, 100);
	if (!t_mem_equal(dst, mirror + base, n * 8, "READ after unsignaled WRITEs"))
		T_FAIL("unsignaled WRITEs missing");
	printf("burst of %zu unsignaled writes: ok\n", n);
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{REG,
	             FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC}},
	    .guard = 4096,
	};
	int64_t diff;

	t_init("one-sided", 60);
	t_target_spawn(&o, &tgt); /* before this process opens its own fab */

	fab = t_fab_open(NULL);
	src = t_alloc(REG);
	dst = t_alloc(REG);
	mirror = calloc(1, REG);
	T_ASSERT(mirror != NULL);
	src_mr = t_mr_reg(fab, src, REG, FAB_ACCESS_LOCAL_WRITE);
	dst_mr = t_mr_reg(fab, dst, REG, FAB_ACCESS_LOCAL_WRITE);
	link = t_connect(fab, &tgt.addr, CTX, NULL, 0);
	T_ASSERT_EQ(fab_link_state(link), 0);

	test_write_read();
	test_atomics();
	test_burst();

	/* the target checks its own memory; the canaries around it are intact */
	diff = t_target_check(&tgt, 0, 0, mirror, REG);
	if (diff >= 0)
		T_FAIL("target memory differs from the expected image at offset %lld",
		       (long long)diff);
	T_ASSERT(t_guard_intact(&tgt, 0));
	T_ASSERT_EQ(fab_link_state(link), 0);

	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(src_mr));
	T_ASSERT_OK(fab_mr_dereg(dst_mr));
	fab_close(fab);
	t_target_quit(&tgt, NULL);
	t_target_free(&tgt);
	t_free(src, REG);
	t_free(dst, REG);
	free(mirror);
	printf("one-sided: PASS\n");
	return T_EXIT_PASS;
}
