/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * signaled.c -- completion of a signaled request implies completion of all
 * earlier requests on its link; a successful unsignaled request produces
 * no completion (DESIGN §3, fabric.h).
 *
 * The target lands WRITEs slowly (LOCO_TCP_SLOW_WRITE), so a completion
 * reported before the earlier WRITEs landed would be caught.
 * 1. N unsignaled WRITEs and one signaled WRITE (N = 1 .. 255), posted one
 *    by one, in one post or in posts of 16: exactly one completion arrives,
 *    and the moment it does, the target's memory holds all N WRITEs.
 * 2. Unsignaled READ and FAA, then a signaled WRITE: when the WRITE
 *    completes, the READ's data and the FAA's old value are in local memory.
 * 3. One post of eight signaled requests of every kind: eight completions,
 *    in order, right opcodes and results.
 * 4. One post of signaled and unsignaled requests mixed: one completion per
 *    signaled request, nothing else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define CH   4096u
#define NMAX 255u
#define REG  (NMAX * CH + CH) /* the chunks, then a page of words */
#define WRD  (NMAX * CH)      /* offset of the words page */
#define TMO  10000

static struct t_target t;
static struct fab *fab;
static struct fab_link *link;
static uint8_t *src, *dst, *img; /* img: what the target's region must hold */
static struct fab_mr *src_mr, *dst_mr;
static uint64_t wrid = 1;

static struct fab_wr write_wr(unsigned flags, size_t loff, size_t roff, uint32_t len)
{
	return t_wr_rdma(FAB_OP_WRITE, wrid++, flags, src + loff, len, src_mr->lkey,
	                 t.reg[0].addr + roff, t.reg[0].rkey);
}

static void check_image(const char *what)
{
	if (!t_mem_equal(t.mem[0], img, REG, what))
		T_FAIL("%s: the target does not hold every earlier WRITE", what);
}

static void n_plus_one(unsigned n, int how, uint64_t round)
{
	struct fab_wr wr[NMAX + 1];
	uint64_t v = 0xf1a9000000000000ull | round;

	for (unsigned i = 0; i < n; i++) {
		t_fill(src + i * CH, CH, round * 1000 + i);
		memcpy(img + i * CH, src + i * CH, CH);
		wr[i] = write_wr(0, i * CH, i * CH, CH);
	}
	memcpy(src + NMAX * CH, &v, 8);
	memcpy(img + WRD, &v, 8);
	wr[n] = write_wr(FAB_WR_SIGNALED, NMAX * CH, WRD, 8);
	switch (how) {
	case 0:
		for (unsigned i = 0; i <= n; i++)
			T_ASSERT_OK(fab_post(link, &wr[i], 1));
		break;
	case 1:
		T_ASSERT_OK(fab_post(link, wr, (int)n + 1));
		break;
	default:
		for (unsigned i = 0; i <= n; i += 16)
			T_ASSERT_OK(fab_post(link, &wr[i], n + 1 - i < 16 ? (int)(n + 1 - i) : 16));
		break;
	}
	T_EXPECT_WC(fab, wr[n].wrid, FAB_OP_WRITE, 0, TMO, NULL);
	check_image("at the signaled completion"); /* at once: no waiting */
	T_EXPECT_NONE(fab, 50);
}

static void reads_before_signal(void)
{
	const struct t_region *r = &t.reg[0];

	for (unsigned i = 0; i < 20; i++) {
		uint64_t *res = (uint64_t *)(dst + 2 * CH), old;
		struct fab_wr wr[3];
		size_t chunk = (i * 37) % NMAX;

		memset(dst, 0, CH);
		*res = 0;
		memcpy(&old, img + WRD + 64, 8);
		wr[0] = t_wr_rdma(FAB_OP_READ, wrid++, 0, dst, CH, dst_mr->lkey,
		                  r->addr + chunk * CH, r->rkey);
		wr[1] = t_wr_faa(wrid++, 0, res, dst_mr->lkey, r->addr + WRD + 64, r->rkey, 3);
		wr[2] = write_wr(FAB_WR_SIGNALED, NMAX * CH + 8, WRD + 128, 8);
		memcpy(img + WRD + 128, src + NMAX * CH + 8, 8);
		T_ASSERT_OK(fab_post(link, wr, 3));
		T_EXPECT_WC(fab, wr[2].wrid, FAB_OP_WRITE, 0, TMO, NULL);
		if (!t_mem_equal(dst, img + chunk * CH, CH, "unsignaled READ"))
			T_FAIL("an unsignaled READ before a completed signaled WRITE has no data");
		T_ASSERT_EQX(*res, old);
		old += 3;
		memcpy(img + WRD + 64, &old, 8);
		T_EXPECT_NONE(fab, 10);
	}
	check_image("after unsignaled READs and FAAs");
	printf("unsignaled READ and FAA before a signaled WRITE: 20 rounds ok\n");
}

static void batch_of_all_kinds(void)
{
	const struct t_region *r = &t.reg[0];
	uint64_t *res = (uint64_t *)(dst + 3 * CH), w0;
	struct fab_wr wr[8];
	uint64_t a = WRD + 256, b = 0;

	t_fill(src, 2 * CH, 777);
	memcpy(&w0, img + a, 8);
	memset(dst, 0, 3 * CH);
	wr[0] = write_wr(FAB_WR_SIGNALED, 0, b, CH);
	wr[1] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, dst, CH, dst_mr->lkey, r->addr + b,
	                  r->rkey);
	wr[2] = t_wr_faa(wrid++, FAB_WR_SIGNALED, &res[0], dst_mr->lkey, r->addr + a, r->rkey, 10);
	wr[3] = t_wr_cas(wrid++, FAB_WR_SIGNALED, &res[1], dst_mr->lkey, r->addr + a, r->rkey,
	                 w0 + 10, 0xcafe);
	wr[4] = write_wr(FAB_WR_SIGNALED, CH, b + CH, CH);
	wr[5] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, dst + CH, CH, dst_mr->lkey,
	                  r->addr + b + CH, r->rkey);
	wr[6] = t_wr_faa(wrid++, FAB_WR_SIGNALED, &res[2], dst_mr->lkey, r->addr + a, r->rkey, 1);
	wr[7] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, &res[3], 8, dst_mr->lkey,
	                  r->addr + a, r->rkey);
	T_ASSERT_OK(fab_post(link, wr, 8));
	for (int i = 0; i < 8; i++)
		T_EXPECT_WC(fab, wr[i].wrid, wr[i].opcode, 0, TMO, NULL);
	T_EXPECT_NONE(fab, 50);
	T_ASSERT(t_mem_equal(dst, src, 2 * CH, "READs in a batch"));
	T_ASSERT_EQX(res[0], w0);
	T_ASSERT_EQX(res[1], w0 + 10);
	T_ASSERT_EQX(res[2], 0xcafe);
	T_ASSERT_EQX(res[3], 0xcaff);
	memcpy(img + b, src, 2 * CH);
	memcpy(img + a, &res[3], 8);
	check_image("after a batch of every kind");
	printf("one post of 8 signaled requests of every kind: ok\n");
}

static void mixed_signaling(void)
{
	static const unsigned flags[] = {0, FAB_WR_SIGNALED, 0, 0, FAB_WR_SIGNALED,
	                                 0, FAB_WR_SIGNALED};
	struct fab_wr wr[7];

	for (unsigned i = 0; i < 7; i++) {
		t_fill(src + i * CH, CH, 9000 + i);
		memcpy(img + (10 + i) * CH, src + i * CH, CH);
		wr[i] = write_wr(flags[i], i * CH, (10 + i) * CH, CH);
	}
	T_ASSERT_OK(fab_post(link, wr, 7));
	T_EXPECT_WC(fab, wr[1].wrid, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_WC(fab, wr[4].wrid, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_WC(fab, wr[6].wrid, FAB_OP_WRITE, 0, TMO, NULL);
	check_image("after mixed signaling");
	T_EXPECT_NONE(fab, 50);
	printf("one post with 3 of 7 requests signaled: 3 completions: ok\n");
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{REG,
	             FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC}},
	    .slow_write_ns = "50",
	    .guard = 4096,
	};
	static const unsigned ns[] = {1, 7, 64, 200, NMAX};
	static const char *const hows[] = {"one post each", "one post", "posts of 16"};
	uint64_t round = 0;

	t_init("signaled", 100);
	t_target_spawn(&o, &t);
	fab = t_fab_open(NULL);
	src = t_alloc(REG);
	dst = t_alloc(4 * CH);
	img = calloc(1, REG);
	T_ASSERT(img != NULL);
	src_mr = t_mr_reg(fab, src, REG, FAB_ACCESS_LOCAL_WRITE);
	dst_mr = t_mr_reg(fab, dst, 4 * CH, FAB_ACCESS_LOCAL_WRITE);
	link = t_connect(fab, &t.addr, 1, NULL, 0);

	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		for (int how = 0; how < 3; how++)
			n_plus_one(ns[k], how, ++round);
		printf("%u unsignaled WRITEs + 1 signaled (%s, %s, %s): 1 completion, all "
		       "landed: ok\n",
		       ns[k], hows[0], hows[1], hows[2]);
	}
	reads_before_signal();
	batch_of_all_kinds();
	mixed_signaling();

	T_ASSERT(t_guard_intact(&t, 0));
	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(src_mr));
	T_ASSERT_OK(fab_mr_dereg(dst_mr));
	fab_close(fab);
	t_target_quit(&t, NULL);
	t_target_free(&t);
	t_free(src, REG);
	t_free(dst, 4 * CH);
	free(img);
	printf("signaled: PASS\n");
	return T_EXIT_PASS;
}
