/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * close-failed.c -- closing a link that is already in the error state
 * completes everything posted on it since it failed: every request and
 * every RECV completes exactly once, with an error status, within a
 * bounded time (fabric.h: fab_link_close, the error state; DESIGN §3).
 *
 * Regression test of 57ff652 (tcp: closing a link flushes what was posted
 * after it failed). A link already down was not flushed again when it was
 * closed, so requests and RECVs posted after the failure stayed queued and
 * an ack key waiting for them waited forever. The RECVs show it on every
 * run (before the fix the tcp NIC flushed a receive queue only when the
 * link failed); the requests whenever the close reaches the NIC before it
 * has taken the posts, which closing right after posting makes likely.
 * So even rounds post requests only, odd rounds requests and then RECVs.
 * Before the fix every run failed, within 5 s: of 20 runs, 13 lost all the
 * requests of the first round and the others the RECVs of the second.
 *
 * 1. Refused access, ROUNDS rounds: on a fresh link to a running target a
 *    signaled WRITE into a read-only region completes -EACCES, the link
 *    reports -EACCES (error state). Then NREQ requests of every kind
 *    (signaled but two), and NRECV RECVs in odd rounds, are posted, and
 *    the link is closed at once. Every one of them completes -ECANCELED
 *    within TMO ms, exactly once, with the link's context; none of the
 *    WRITEs landed.
 * 2. Killed peer: NLINK links to a second target, which is SIGKILLed; a
 *    signaled READ on each link completes with an error (every link is in
 *    the error state). Then on each link in turn the same posts and the
 *    close: every one completes within TMO ms, exactly once, with
 *    -ECANCELED or the link's own error (what fab_link_state() reported).
 * Closing a failed link returns within 3 s. Both targets are ended by PID.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define REG    65536u /* region 0 of each target: read, write, atomic */
#define ROREG  4096u  /* region 1: read-only, the refused access */
#define BUF    65536u
#define NREQ   12
#define NRECV  4
#define NPOST  (NREQ + NRECV)
#define ROUNDS 16
#define NLINK  8
#define TMO    5000 /* ms: bound of every flush after a close */

static struct fab *fab;
static uint8_t *buf;
static struct fab_mr *mr;
static uint64_t wrid = 1;

/*
 * post_after_failure -- NREQ requests, then @nrecv (at most NRECV) RECVs on
 * failed @link; returns the first wrid.
 */
static uint64_t post_after_failure(struct fab_link *link, const struct t_region *r, int nrecv)
{
	uint64_t first = wrid;
	struct fab_recv_wr rv[NRECV];
	struct fab_wr wr[NREQ];
	int n = 0;

	/* WRITEs of a marker to words 0..3, READs, atomics; two unsignaled */
	for (int i = 0; i < 4; i++)
		wr[n++] = t_wr_rdma(FAB_OP_WRITE, wrid++, i == 3 ? 0 : FAB_WR_SIGNALED, buf, 8,
		                    mr->lkey, r->addr + 8 * i, r->rkey);
	for (int i = 0; i < 4; i++)
		wr[n++] = t_wr_rdma(FAB_OP_READ, wrid++, i == 3 ? 0 : FAB_WR_SIGNALED,
		                    buf + 8192 + i * 1024, 1024, mr->lkey, r->addr + 1024, r->rkey);
	wr[n++] = t_wr_faa(wrid++, FAB_WR_SIGNALED, (uint64_t *)(buf + 16384), mr->lkey,
	                   r->addr + 64, r->rkey, 1);
	wr[n++] = t_wr_cas(wrid++, FAB_WR_SIGNALED, (uint64_t *)(buf + 16392), mr->lkey,
	                   r->addr + 72, r->rkey, 0, 1);
	wr[n++] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED | FAB_WR_INLINE, buf, 8, 0,
	                    r->addr + 32, r->rkey);
	wr[n++] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, buf, 4096, mr->lkey,
	                    r->addr + 4096, r->rkey);
	T_ASSERT_EQ(n, NREQ);
	for (int i = 0; i < nrecv; i++)
		rv[i] = (struct fab_recv_wr){
		    .wrid = wrid++, .local = buf + 4096 + i * 64, .len = 64, .lkey = mr->lkey};
	/* one alone, the rest in one post, the RECVs; the close follows at once */
	T_ASSERT_OK(fab_post(link, wr, 1));
	T_ASSERT_OK(fab_post(link, wr + 1, NREQ - 1));
	if (nrecv > 0)
		T_ASSERT_OK(fab_post_recv(link, rv, nrecv));
	return first;
}

/*
 * close_and_collect -- close failed @link (context @ctx) at once, then
 * every one of the @n posts from wrid @first (NREQ requests, then RECVs)
 * must complete, once, with -ECANCELED or @err, within TMO ms.
 */
static void close_and_collect(struct fab_link *link, uint64_t ctx, uint64_t first, int n, int err,
                              const char *what)
{
	bool seen[NPOST] = {false};
	int64_t t0 = t_now_ms(), deadline;
	int nreq = 0;
	char s[256];

	T_ASSERT_OK(fab_link_close(link));
	if (t_now_ms() - t0 > 3000)
		T_FAIL("%s: closing the failed link took %lld ms", what,
		       (long long)(t_now_ms() - t0));
	deadline = t_now_ms() + TMO;
	T_ASSERT(n <= NPOST);
	for (int got = 0; got < n; got++) {
		int64_t left = deadline - t_now_ms();
		struct fab_wc wc;

		if (left < 0 || t_poll_one(fab, &wc, (int)left) != 0)
			T_FAIL("%s: only %d of %d requests and RECVs posted on the failed link "
			       "completed within %d ms of its close (%d of %d requests)",
			       what, got, n, TMO, nreq, NREQ);
		if (wc.wrid < first || wc.wrid >= first + (uint64_t)n || seen[wc.wrid - first])
			T_FAIL("%s: unexpected or repeated completion %s", what,
			       t_wc_str(&wc, s, sizeof(s)));
		seen[wc.wrid - first] = true;
		nreq += wc.wrid < first + NREQ;
		if (wc.status != -ECANCELED && wc.status != err)
			T_FAIL("%s: completion %s, expected -ECANCELED or %s", what,
			       t_wc_str(&wc, s, sizeof(s)), t_errname(err));
		T_ASSERT_EQX(wc.link_ctx, ctx);
		if (wc.wrid >= first + NREQ && wc.opcode != FAB_OP_RECV)
			T_FAIL("%s: RECV completed as %s", what, t_wc_str(&wc, s, sizeof(s)));
	}
	T_EXPECT_NONE(fab, 50); /* nothing twice */
}

static void refused_access(struct t_target *t)
{
	const struct t_region *r = &t->reg[0], *ro = &t->reg[1];
	uint8_t zero[8192] = {0};

	memset(buf, 0x5a, 4096); /* the WRITEs' marker */
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t ctx = 0x100 + (uint64_t)i, first;
		struct fab_link *link = t_connect(fab, &t->addr, ctx, NULL, 0);
		struct fab_wr bad = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, buf, 8,
		                              mr->lkey, ro->addr, ro->rkey);

		T_ASSERT_OK(fab_post(link, &bad, 1));
		T_EXPECT_WC(fab, bad.wrid, 0, -EACCES, TMO, NULL);
		T_ASSERT_ERR(fab_link_state(link), -EACCES);
		first = post_after_failure(link, r, i % 2 ? NRECV : 0);
		close_and_collect(link, ctx, first, NREQ + (i % 2 ? NRECV : 0), -ECANCELED,
		                  "refused access");
	}
	if (!t_mem_equal(t->mem[0], zero, sizeof(zero), "target region after the rounds"))
		T_FAIL("refused access: a request posted on a failed link was executed");
	if (!t_mem_equal(t->mem[1], zero, 8, "read-only region"))
		T_FAIL("refused access: the refused WRITE landed");
	printf("refused access: %d rounds, %d requests (and %d RECVs in odd rounds) posted after "
	       "the failure each completed once with -ECANCELED after the close: ok\n",
	       ROUNDS, NREQ, NRECV);
}

static void killed_peer(struct t_target *t)
{
	const struct t_region *r = &t->reg[0];
	struct fab_link *link[NLINK];
	int cause[NLINK];
	bool failed[NLINK] = {false};
	int64_t deadline;
	char s[256];

	for (int i = 0; i < NLINK; i++) {
		link[i] = t_connect(fab, &t->addr, 0x200 + (uint64_t)i, NULL, 0);
		T_ASSERT_EQ(t_run(link[i], &(struct fab_wr){.wrid = wrid++,
		                                            .opcode = FAB_OP_READ,
		                                            .local = buf,
		                                            .len = 64,
		                                            .lkey = mr->lkey,
		                                            .remote_addr = r->addr,
		                                            .rkey = r->rkey}),
		            0);
	}
	t_target_kill(t);

	/* a READ on each link finds the peer dead */
	for (int i = 0; i < NLINK; i++) {
		struct fab_wr probe = t_wr_rdma(FAB_OP_READ, 0x9000 + (uint64_t)i, FAB_WR_SIGNALED,
		                                buf, 64, mr->lkey, r->addr, r->rkey);

		T_ASSERT_OK(fab_post(link[i], &probe, 1));
	}
	deadline = t_now_ms() + 10000;
	for (int got = 0; got < NLINK; got++) {
		int64_t left = deadline - t_now_ms();
		struct fab_wc wc;
		uint64_t k;

		if (left < 0 || t_poll_one(fab, &wc, (int)left) != 0)
			T_FAIL("killed peer: only %d of %d links failed within 10 s of the kill",
			       got, NLINK);
		k = wc.wrid - 0x9000;
		if (k >= NLINK || failed[k] || wc.status == 0)
			T_FAIL("killed peer: completion %s, expected an error of a probe READ",
			       t_wc_str(&wc, s, sizeof(s)));
		failed[k] = true;
	}
	for (int i = 0; i < NLINK; i++) {
		cause[i] = fab_link_state(link[i]);
		if (cause[i] == 0)
			T_FAIL("killed peer: link %d is up after its READ failed", i);
	}

	for (int i = 0; i < NLINK; i++) {
		uint64_t first = post_after_failure(link[i], r, i % 2 ? NRECV : 0);

		close_and_collect(link[i], 0x200 + (uint64_t)i, first, NREQ + (i % 2 ? NRECV : 0),
		                  cause[i], "killed peer");
	}
	printf("killed peer: %d failed links (%s), %d requests (and %d RECVs on odd links) posted "
	       "on each after the failure completed once after the close: ok\n",
	       NLINK, t_errname(cause[0]), NREQ, NRECV);
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 2,
	    .reg = {{REG,
	             FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC},
	            {ROREG, FAB_ACCESS_REMOTE_READ}},
	};
	struct fab_attr attr = {.timeout_ms = 1000};
	struct t_target t0, t1;

	t_init("close-failed", 100);
	t_target_spawn(&o, &t0);
	t_target_spawn(&o, &t1);
	fab = t_fab_open(&attr);
	buf = t_alloc(BUF);
	mr = t_mr_reg(fab, buf, BUF, FAB_ACCESS_LOCAL_WRITE);

	refused_access(&t0);
	killed_peer(&t1);

	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);
	t_target_quit(&t0, NULL);
	t_target_free(&t0);
	t_target_free(&t1);
	t_free(buf, BUF);
	printf("close-failed: PASS\n");
	return T_EXIT_PASS;
}
