/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * send-recv.c -- SEND and WRITE_IMM consume RECVs posted at the target;
 * when none is posted the request waits, is never lost, and the link's
 * later requests wait behind it (fabric.h).
 *
 * Two fabs in one process, A (timeout_ms 800) connected to B:
 * 1. B posts four RECVs in one call; A SENDs 1, 100, 512 and 0 bytes with
 *    immediate data: B's completions come in RECV order with the sent
 *    lengths, immediates, link context and bytes; bytes past the length
 *    are untouched.
 * 2. WRITE_IMM: the data is in B's region when B's RECV_IMM completion
 *    (with the immediate and the length) arrives; the RECV buffer is not
 *    written.
 * 3. A SEND (then a WRITE_IMM) with no RECV posted, then a WRITE and a READ
 *    behind it: for 1.5 x timeout_ms nothing completes on either side and
 *    the WRITE has not landed (the peer is alive, so no -ETIMEDOUT either);
 *    once B posts a RECV, the waiting request is delivered intact, then the
 *    WRITE lands, and A's three completions arrive in order.
 * 4. The other direction: B SENDs to a RECV posted by A, three SENDs in one
 *    post.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define CTX_A   0xaaaa0001ull
#define CTX_B   0xbbbb0002ull
#define RSZ     512u
#define TIMEOUT 800
#define TMO     5000

static struct fab *a, *b;
static struct fab_link *la, *lb;
static uint8_t *abuf, *rbuf, *bdata;
static struct fab_mr *amr, *rmr, *bmr;
static uint64_t wrid = 1;

static void expect_recv(struct fab *fab, struct fab_link *l, uint64_t ctx, uint64_t id, int op,
                        uint32_t len, uint32_t imm)
{
	struct fab_wc wc;
	char s[256];

	T_EXPECT_WC(fab, id, op, 0, TMO, &wc);
	if (wc.len != len || wc.imm != imm || (imm != 0 && !wc.has_imm) || wc.link_ctx != ctx ||
	    wc.link_id != l->id)
		T_FAIL("receive completion %s: expected len %u, imm 0x%x, link_ctx 0x%llx, link_id "
		       "%u",
		       t_wc_str(&wc, s, sizeof(s)), len, imm, (unsigned long long)ctx, l->id);
}

static void send_recv(void)
{
	static const uint32_t sizes[] = {1, 100, RSZ, 0};
	struct fab_recv_wr rw[4];

	memset(rbuf, 0xee, 8 * RSZ);
	for (int i = 0; i < 4; i++)
		rw[i] = (struct fab_recv_wr){
		    .wrid = 100 + i, .local = rbuf + i * RSZ, .len = RSZ, .lkey = rmr->lkey};
	T_ASSERT_OK(fab_post_recv(lb, rw, 4));
	for (int i = 0; i < 4; i++) {
		struct fab_wr wr = t_wr_rdma(FAB_OP_SEND, wrid++, FAB_WR_SIGNALED, abuf + i * RSZ,
		                             sizes[i], amr->lkey, 0, 0);

		wr.imm = 0x11111111u * (i + 1);
		t_fill(abuf + i * RSZ, RSZ, 10 + i);
		T_ASSERT_OK(fab_post(la, &wr, 1));
		T_EXPECT_WC(a, wr.wrid, FAB_OP_SEND, 0, TMO, NULL);
	}
	for (int i = 0; i < 4; i++) {
		expect_recv(b, lb, CTX_B, 100 + i, FAB_OP_RECV, sizes[i], 0x11111111u * (i + 1));
		T_ASSERT(t_mem_equal(rbuf + i * RSZ, abuf + i * RSZ, sizes[i], "received bytes"));
		for (uint32_t k = sizes[i]; k < RSZ; k++)
			if (rbuf[i * RSZ + k] != 0xee)
				T_FAIL("RECV %d: byte %u past the message was written", i, k);
	}
	T_EXPECT_NONE(a, 20);
	T_EXPECT_NONE(b, 20);
	printf("SEND/RECV with immediates, lengths 1, 100, %u, 0: ok\n", RSZ);
}

static void write_imm(void)
{
	const struct fab_recv_wr rw = {
	    .wrid = 200, .local = rbuf + 4 * RSZ, .len = RSZ, .lkey = rmr->lkey};
	struct fab_wr wr;

	T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
	t_fill(abuf, 3000, 20);
	wr = t_wr_rdma(FAB_OP_WRITE_IMM, wrid++, FAB_WR_SIGNALED, abuf, 3000, amr->lkey,
	               (uint64_t)(uintptr_t)bdata + 1000, bmr->rkey);
	wr.imm = 0xabcdef01u;
	T_ASSERT_OK(fab_post(la, &wr, 1));
	expect_recv(b, lb, CTX_B, 200, FAB_OP_RECV_IMM, 3000, 0xabcdef01u);
	T_ASSERT(t_mem_equal(bdata + 1000, abuf, 3000, "WRITE_IMM data at RECV_IMM"));
	for (uint32_t k = 0; k < RSZ; k++)
		if (rbuf[4 * RSZ + k] != 0xee)
			T_FAIL("WRITE_IMM wrote into the RECV buffer (byte %u)", k);
	T_EXPECT_WC(a, wr.wrid, FAB_OP_WRITE_IMM, 0, TMO, NULL);
	printf("WRITE_IMM consumes a RECV, data there at its completion: ok\n");
}

/*
 * rnr_wait -- @op (SEND or WRITE_IMM) posted while B has no RECV, a WRITE
 * and a READ behind it: nothing may move until B posts a RECV.
 */
static void rnr_wait(int op, uint64_t marker, uint64_t rwrid)
{
	const struct fab_recv_wr rw = {
	    .wrid = rwrid, .local = rbuf + 5 * RSZ, .len = RSZ, .lkey = rmr->lkey};
	const char *name = fab_opcode_str(op);
	uint64_t *mk = (uint64_t *)(abuf + 8192);
	uint8_t *payload = abuf + 4096;
	struct fab_wr wr[3];
	struct fab_wc wc;
	int64_t until;
	char s[256];

	*mk = marker;
	t_fill(payload, 64, marker);
	memset(abuf + 16384, 0, 3000);
	memset(rbuf + 5 * RSZ, 0xee, RSZ);
	wr[0] = t_wr_rdma(op, wrid++, FAB_WR_SIGNALED, payload, 64, amr->lkey,
	                  (uint64_t)(uintptr_t)bdata + 20000, bmr->rkey);
	wr[0].imm = (uint32_t)marker;
	wr[1] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, mk, 8, amr->lkey,
	                  (uint64_t)(uintptr_t)bdata, bmr->rkey);
	wr[2] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, abuf + 16384, 3000, amr->lkey,
	                  (uint64_t)(uintptr_t)bdata + 1000, bmr->rkey);
	T_ASSERT_OK(fab_post(la, &wr[0], 1));
	T_ASSERT_OK(fab_post(la, &wr[1], 2));

	/* no RECV at B: nothing moves, for longer than timeout_ms */
	until = t_now_ms() + TIMEOUT * 3 / 2;
	while (t_now_ms() < until) {
		if (t_poll_one(a, &wc, 10) == 0)
			T_FAIL("completion %s while the %s waits for a RECV",
			       t_wc_str(&wc, s, sizeof(s)), name);
		if (fab_poll(b, &wc, 1) != 0)
			T_FAIL("receiver completion %s with no RECV posted",
			       t_wc_str(&wc, s, sizeof(s)));
		if (__atomic_load_n((uint64_t *)bdata, __ATOMIC_ACQUIRE) == marker)
			T_FAIL("the WRITE behind a waiting %s landed before it", name);
	}
	T_ASSERT_EQ(fab_link_state(la), 0);

	/* a RECV arrives: the waiting request, then the WRITE, then the READ */
	T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
	if (op == FAB_OP_SEND) {
		expect_recv(b, lb, CTX_B, rwrid, FAB_OP_RECV, 64, (uint32_t)marker);
		T_ASSERT(t_mem_equal(rbuf + 5 * RSZ, payload, 64, "delayed SEND"));
	} else {
		expect_recv(b, lb, CTX_B, rwrid, FAB_OP_RECV_IMM, 64, (uint32_t)marker);
		T_ASSERT(t_mem_equal(bdata + 20000, payload, 64, "delayed WRITE_IMM"));
	}
	T_EXPECT_WC(a, wr[0].wrid, op, 0, TMO, NULL);
	T_EXPECT_WC(a, wr[1].wrid, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_WC(a, wr[2].wrid, FAB_OP_READ, 0, TMO, NULL);
	T_ASSERT_EQX(*(uint64_t *)bdata, marker);
	T_ASSERT(t_mem_equal(abuf + 16384, bdata + 1000, 3000, "READ behind a delayed request"));
	T_EXPECT_NONE(a, 20);
	T_EXPECT_NONE(b, 20);
	printf("%s before RECV: waited %d ms, not lost, later requests behind it: ok\n", name,
	       TIMEOUT * 3 / 2);
}

static void reverse(void)
{
	struct fab_recv_wr rw[3];
	struct fab_wr wr[3];
	uint8_t *src = bdata + 8192, *dst = abuf + 32768;

	memset(dst, 0xee, 3 * RSZ);
	for (int i = 0; i < 3; i++) {
		rw[i] = (struct fab_recv_wr){
		    .wrid = 500 + i, .local = dst + i * RSZ, .len = RSZ, .lkey = amr->lkey};
		T_ASSERT_OK(fab_post_recv(la, &rw[i], 1));
		t_fill(src + i * RSZ, 200 + i, 40 + i);
		wr[i] = t_wr_rdma(FAB_OP_SEND, wrid++, i == 2 ? FAB_WR_SIGNALED : 0, src + i * RSZ,
		                  200 + i, bmr->lkey, 0, 0);
		wr[i].imm = 0x600 + i;
	}
	T_ASSERT_OK(fab_post(lb, wr, 3));
	for (int i = 0; i < 3; i++) {
		expect_recv(a, la, CTX_A, 500 + i, FAB_OP_RECV, 200 + i, 0x600 + i);
		T_ASSERT(t_mem_equal(dst + i * RSZ, src + i * RSZ, 200 + i, "reverse SEND"));
	}
	T_EXPECT_WC(b, wr[2].wrid, FAB_OP_SEND, 0, TMO, NULL);
	T_EXPECT_NONE(b, 20);
	printf("SENDs from the acceptor side, three in one post: ok\n");
}

int main(void)
{
	struct fab_attr aattr = {.timeout_ms = TIMEOUT};

	t_init("send-recv", 60);
	a = t_fab_open(&aattr);
	b = t_fab_open(NULL);
	abuf = t_alloc(65536);
	rbuf = t_alloc(8 * RSZ);
	bdata = t_alloc(65536);
	amr = t_mr_reg(a, abuf, 65536, FAB_ACCESS_LOCAL_WRITE);
	rmr = t_mr_reg(b, rbuf, 8 * RSZ, FAB_ACCESS_LOCAL_WRITE);
	bmr = t_mr_reg(b, bdata, 65536,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);
	t_pair(a, b, CTX_A, CTX_B, &la, &lb);

	send_recv();
	write_imm();
	rnr_wait(FAB_OP_SEND, 0x6d61726b65720001ull, 400);
	rnr_wait(FAB_OP_WRITE_IMM, 0x6d61726b65720002ull, 401);
	reverse();

	T_ASSERT_EQ(fab_link_state(la), 0);
	T_ASSERT_EQ(fab_link_state(lb), 0);
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(rmr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, 65536);
	t_free(rbuf, 8 * RSZ);
	t_free(bdata, 65536);
	printf("send-recv: PASS\n");
	return T_EXIT_PASS;
}
