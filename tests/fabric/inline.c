/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * inline.c -- FAB_WR_INLINE copies the payload at post time, and a full
 * send queue makes fab_post() return -EAGAIN without queuing anything
 * (fabric.h).
 *
 * 1. Inline WRITEs of 1 .. max_inline bytes from an unregistered buffer
 *    (lkey 0) that is overwritten as soon as fab_post() returns: the target
 *    receives the original bytes. A payload above max_inline is -EMSGSIZE.
 * 2. With sq_depth 16 and the target stopped (nothing completes), signaled
 *    WRITEs are accepted up to at least sq_depth, then fab_post() returns
 *    -EAGAIN, for a single request and for a batch. Once the target runs
 *    again every accepted WRITE completes and lands, and no rejected one
 *    does.
 * 3. Again with one free slot: a post of two requests is refused whole
 *    (-EAGAIN, neither lands), a post of one is accepted.
 * Parts 2 and 3 need a stopped process to be silent (t_stop_silences_peer()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define REG   65536u
#define SLOTS 32768u /* offset of the 8-byte slots of parts 2 and 3 */
#define SQ    16u
#define TMO   10000

static struct t_target t;
static struct fab *fab;
static struct fab_link *link;
static uint64_t wrid = 1;

static void inline_writes(uint8_t *img)
{
	const uint32_t max = fab->attr.max_inline;
	uint8_t *src = malloc(max + 1), orig[4096];
	struct fab_wr wr;

	T_ASSERT(src != NULL && max >= 8 && max <= sizeof(orig));
	for (unsigned i = 0; i < 200; i++) {
		uint32_t len = i == 0 ? max : 1 + (i * 37) % max;
		uint64_t off = (i * 263) % (SLOTS - max);
		bool sig = i % 8 == 7 || i == 199;

		t_fill(src, len, 100 + i);
		memcpy(orig, src, len);
		memcpy(img + off, src, len);
		wr = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_INLINE | (sig ? FAB_WR_SIGNALED : 0),
		               src, len, 0, t.reg[0].addr + off, t.reg[0].rkey);
		T_ASSERT_OK(fab_post(link, &wr, 1));
		memset(src, 0xff - (int)(i & 0x7f), len); /* the provider must have copied it */
		if (sig)
			T_EXPECT_WC(fab, wr.wrid, FAB_OP_WRITE, 0, TMO, NULL);
	}
	T_EXPECT_NONE(fab, 20);
	if (!t_mem_equal(t.mem[0], img, REG, "target after inline WRITEs"))
		T_FAIL("an inline WRITE sent the overwritten buffer, not the posted bytes");

	wr = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_INLINE | FAB_WR_SIGNALED, src, max + 1, 0,
	               t.reg[0].addr, t.reg[0].rkey);
	T_ASSERT_ERR(fab_post(link, &wr, 1), -EMSGSIZE);
	T_EXPECT_NONE(fab, 20);
	free(src);
	printf("200 inline WRITEs of 1..%u bytes, source overwritten after post: ok\n", max);
}

static struct fab_wr slot_write(uint64_t *vals, struct fab_mr *mr, unsigned slot, uint64_t v)
{
	vals[slot] = v;
	return t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, &vals[slot], 8, mr->lkey,
	                 t.reg[0].addr + SLOTS + slot * 8, t.reg[0].rkey);
}

static uint64_t slot_value(unsigned slot)
{
	uint64_t v;

	memcpy(&v, t.mem[0] + SLOTS + slot * 8, 8);
	return v;
}

/* drain -- the @n accepted WRITEs from wrid @first complete, in order */
static void drain(uint64_t first, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		T_EXPECT_WC(fab, first + k, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_NONE(fab, 200);
}

static void sq_full(uint64_t *vals, struct fab_mr *mr)
{
	const unsigned bound = 4 * SQ;
	unsigned c = 0, base;
	uint64_t first = wrid;
	struct fab_wr wr[2];
	int ret = 0;

	t_stop(t.pid);
	for (c = 0; c < bound; c++) {
		wr[0] = slot_write(vals, mr, c, 0x5100 + c);
		ret = fab_post(link, wr, 1);
		if (ret != 0)
			break;
	}
	if (ret != -EAGAIN)
		T_FAIL("send queue of depth %u: post %u returned %s, expected -EAGAIN by post %u",
		       SQ, c, t_errname(ret), bound);
	printf("send queue of depth %u: %u requests accepted, then -EAGAIN\n", SQ, c);
	T_ASSERT(c >= SQ);
	/* the refused request took wrid first + c: skip it */
	wr[0] = slot_write(vals, mr, bound, 0xbad1);
	wr[1] = slot_write(vals, mr, bound + 1, 0xbad2);
	T_ASSERT_ERR(fab_post(link, wr, 2), -EAGAIN);
	T_ASSERT_ERR(fab_post(link, wr, 1), -EAGAIN);
	t_cont(t.pid);
	drain(first, c);
	for (unsigned k = 0; k < c; k++)
		T_ASSERT_EQX(slot_value(k), 0x5100 + k);
	for (unsigned k = c; k < bound + 2; k++)
		if (slot_value(k) != 0)
			T_FAIL("slot %u: a refused WRITE landed (0x%llx)", k,
			       (unsigned long long)slot_value(k));
	printf("full send queue: refused requests never ran, accepted ones all did: ok\n");

	/* one free slot: a post of two is refused whole, a post of one fits */
	base = bound + 8;
	t_stop(t.pid);
	first = wrid;
	for (unsigned k = 0; k < c - 1; k++) {
		wr[0] = slot_write(vals, mr, base + k, 0x5200 + k);
		T_ASSERT_OK(fab_post(link, wr, 1));
	}
	wr[0] = slot_write(vals, mr, base + c, 0xbad3);
	wr[1] = slot_write(vals, mr, base + c + 1, 0xbad4);
	T_ASSERT_ERR(fab_post(link, wr, 2), -EAGAIN);
	wr[0] = slot_write(vals, mr, base + c - 1, 0x5200 + c - 1);
	T_ASSERT_OK(fab_post(link, wr, 1));
	t_cont(t.pid);
	/* wrids: c - 1 accepted, two refused, then the last accepted */
	for (unsigned k = 0; k < c - 1; k++)
		T_EXPECT_WC(fab, first + k, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_WC(fab, wr[0].wrid, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_NONE(fab, 200);
	T_ASSERT_EQX(slot_value(base + c - 1), 0x5200 + c - 1);
	for (unsigned k = 0; k < c; k++)
		T_ASSERT_EQX(slot_value(base + k), 0x5200 + k);
	T_ASSERT_EQX(slot_value(base + c), 0);
	T_ASSERT_EQX(slot_value(base + c + 1), 0);
	printf("one free slot: a post of 2 refused whole, a post of 1 accepted: ok\n");
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{REG, FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE}},
	    .guard = 4096,
	};
	struct fab_attr attr = {.sq_depth = SQ, .timeout_ms = 10000};
	uint8_t *img = calloc(1, REG);
	uint64_t *vals;
	struct fab_mr *mr;

	T_ASSERT(img != NULL);
	t_init("inline", 60);
	t_target_spawn(&o, &t);
	fab = t_fab_open(&attr);
	T_ASSERT_EQ(fab->attr.sq_depth, SQ);
	vals = t_alloc(65536);
	mr = t_mr_reg(fab, vals, 65536, FAB_ACCESS_LOCAL_WRITE);
	link = t_connect(fab, &t.addr, 1, NULL, 0);

	inline_writes(img);
	if (t_stop_silences_peer())
		sq_full(vals, mr);
	else
		printf("a stopped process is still served by the %s NIC: send queue part skipped\n",
		       t_provider());

	T_ASSERT(t_guard_intact(&t, 0));
	T_ASSERT_EQ(fab_link_state(link), 0);
	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);
	t_target_quit(&t, NULL);
	t_target_free(&t);
	t_free(vals, 65536);
	free(img);
	printf("inline: PASS\n");
	return T_EXIT_PASS;
}
