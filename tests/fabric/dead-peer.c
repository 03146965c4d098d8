/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dead-peer.c -- a dead peer turns its outstanding and later requests into
 * error completions within a bounded time; nothing hangs (DESIGN §3).
 *
 * 0. Killed while busy: the initiator keeps READs in flight to a running
 *    target and SIGKILLs it. Completions are successes, then errors only:
 *    the first error (-ECONNRESET) within 5 s of the kill, then every
 *    outstanding request fails too (-ECONNRESET or -ECANCELED), and so
 *    does every request posted afterwards.
 * 1. Killed peer: the target is stopped (so requests stay outstanding:
 *    READs, a WRITE far larger than the socket buffers, atomics, signaled
 *    and unsignaled), then SIGKILLed. Every request must complete, the first
 *    with -ECONNRESET, the others -ECONNRESET or -ECANCELED, within 5 s of
 *    the kill; so must requests posted afterwards; connecting to the dead
 *    address fails; closing the link and the fab returns promptly.
 * 2. Silent peer: with fab_attr.timeout_ms = 800 the target is stopped
 *    (SIGSTOP: its kernel still acknowledges TCP, its NIC thread is frozen)
 *    with the same requests outstanding. They must complete, the first
 *    with -ETIMEDOUT, no sooner than half the timeout after the peer went
 *    silent and no later than the timeout plus 3 s after they were posted.
 *    Then the target is killed and reaped.
 * No completion may arrive while the peer is merely stopped and the
 * timeout has not passed: nothing was executed. Parts 1 and 2 need a
 * stopped process to be silent (t_stop_silences_peer(): tcp); on other
 * providers they are skipped with a note.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define REG     (4u * 1024u * 1024u)
#define BUF     (REG + 1024u * 1024u)
#define NREQ    15
#define TIMEOUT 800 /* ms, part 2 */

struct side {
	struct fab *fab;
	uint8_t *buf;
	struct fab_mr *mr;
	struct fab_link *link;
	struct t_target *t;
	uint64_t wrid;
};

/* post_outstanding -- NREQ requests of every kind; returns the first wrid */
static uint64_t post_outstanding(struct side *s)
{
	const struct t_region *r = &s->t->reg[0];
	uint64_t first = s->wrid + 1;
	struct fab_wr wr[NREQ];
	int n = 0;

	for (int i = 0; i < 8; i++)
		wr[n++] = t_wr_rdma(FAB_OP_READ, ++s->wrid, FAB_WR_SIGNALED, s->buf + i * 65536,
		                    65536, s->mr->lkey, r->addr + i * 65536, r->rkey);
	wr[n++] = t_wr_rdma(FAB_OP_WRITE, ++s->wrid, FAB_WR_SIGNALED, s->buf + 1024 * 1024, REG,
	                    s->mr->lkey, r->addr, r->rkey);
	for (int i = 0; i < 4; i++)
		wr[n++] = t_wr_rdma(FAB_OP_WRITE, ++s->wrid, 0, s->buf + 600000 + i * 8, 8,
		                    s->mr->lkey, r->addr + 8 * i, r->rkey);
	wr[n++] = t_wr_faa(++s->wrid, FAB_WR_SIGNALED, (uint64_t *)(s->buf + 700000), s->mr->lkey,
	                   r->addr + 64, r->rkey, 1);
	wr[n++] = t_wr_cas(++s->wrid, 0, (uint64_t *)(s->buf + 700008), s->mr->lkey, r->addr + 72,
	                   r->rkey, 0, 1);
	T_ASSERT_EQ(n, NREQ);
	/* some one at a time, the rest in one post */
	for (int i = 0; i < 5; i++)
		T_ASSERT_OK(fab_post(s->link, &wr[i], 1));
	T_ASSERT_OK(fab_post(s->link, &wr[5], NREQ - 5));
	return first;
}

/*
 * collect -- every one of the @n requests from wrid @first completes with an
 * error before @deadline_ms: with @err or -ECANCELED, and the first with @err
 * when @strict. Returns when the first error arrived (ms).
 */
static int64_t collect(struct side *s, uint64_t first, int n, int err, bool strict,
                       int64_t deadline_ms, const char *what)
{
	bool seen[NREQ] = {false};
	int64_t t_first = 0;
	char str[256];

	T_ASSERT(n <= NREQ);
	for (int got = 0; got < n; got++) {
		int64_t left = deadline_ms - t_now_ms();
		struct fab_wc wc;

		if (left < 0 || t_poll_one(s->fab, &wc, (int)left) != 0)
			T_FAIL("%s: only %d of %d requests completed in time", what, got, n);
		if (got == 0)
			t_first = t_now_ms();
		if (wc.wrid < first || wc.wrid >= first + (uint64_t)n || seen[wc.wrid - first])
			T_FAIL("%s: unexpected completion %s", what,
			       t_wc_str(&wc, str, sizeof(str)));
		seen[wc.wrid - first] = true;
		if (got == 0 && strict && wc.status != err)
			T_FAIL("%s: first completion %s, expected status %s", what,
			       t_wc_str(&wc, str, sizeof(str)), t_errname(err));
		if (wc.status != err && wc.status != -ECANCELED)
			T_FAIL("%s: completion %s, expected %s or -ECANCELED", what,
			       t_wc_str(&wc, str, sizeof(str)), t_errname(err));
	}
	T_EXPECT_NONE(s->fab, 50);
	return t_first;
}

/* post_later -- requests posted on the dead link: 3 signaled, 2 unsignaled */
static uint64_t post_later(struct side *s)
{
	const struct t_region *r = &s->t->reg[0];
	uint64_t first = s->wrid + 1;

	for (int i = 0; i < 5; i++) {
		struct fab_wr wr = t_wr_rdma(i % 2 ? FAB_OP_READ : FAB_OP_WRITE, ++s->wrid,
		                             i < 3 ? FAB_WR_SIGNALED : 0, s->buf + i * 64, 64,
		                             s->mr->lkey, r->addr + i * 64, r->rkey);

		T_ASSERT_OK(fab_post(s->link, &wr, 1));
	}
	return first;
}

static void open_side(struct side *s, struct t_target *t, const struct fab_attr *attr, uint64_t ctx)
{
	s->t = t;
	s->fab = t_fab_open(attr);
	s->buf = t_alloc(BUF);
	s->mr = t_mr_reg(s->fab, s->buf, BUF, FAB_ACCESS_LOCAL_WRITE);
	s->link = t_connect(s->fab, &t->addr, ctx, NULL, 0);
	/* warm-up: the link works */
	T_ASSERT_EQ(t_run(s->link, &(struct fab_wr){.wrid = ++s->wrid,
	                                            .opcode = FAB_OP_READ,
	                                            .local = s->buf,
	                                            .len = 4096,
	                                            .lkey = s->mr->lkey,
	                                            .remote_addr = t->reg[0].addr,
	                                            .rkey = t->reg[0].rkey}),
	            0);
}

static void close_side(struct side *s, const char *what)
{
	int64_t t0 = t_now_ms();

	T_ASSERT_OK(fab_link_close(s->link));
	T_ASSERT_OK(fab_mr_dereg(s->mr));
	fab_close(s->fab);
	if (t_now_ms() - t0 > 3000)
		T_FAIL("%s: closing the link and the fab took %lld ms", what,
		       (long long)(t_now_ms() - t0));
	t_free(s->buf, BUF);
}

static void killed_busy(struct t_target *t)
{
	const struct t_region *r = &t->reg[0];
	const unsigned window = 8, seg = 65536;
	struct side s = {0};
	unsigned inflight = 0, ok = 0, failed = 0;
	int first_err = 0;
	int64_t t_kill = 0, t_first = 0;
	uint64_t first;
	char str[256];

	open_side(&s, t, NULL, 3);
	while (inflight > 0 || first_err == 0) {
		struct fab_wc wc;

		/* keep the window full until the first error */
		while (first_err == 0 && inflight < window) {
			uint64_t id = ++s.wrid;
			struct fab_wr wr =
			    t_wr_rdma(FAB_OP_READ, id, FAB_WR_SIGNALED, s.buf + (id % window) * seg,
			              seg, s.mr->lkey, r->addr + (id % 64) * seg, r->rkey);

			T_ASSERT_OK(fab_post(s.link, &wr, 1));
			inflight++;
		}
		if (ok == 200 && t_kill == 0) {
			t_kill = t_now_ms();
			t_target_kill(t);
		}
		if (t_poll_one(s.fab, &wc, 5000) != 0)
			T_FAIL("killed while busy: no completion for 5 s (%u in flight, %u ok, %u "
			       "failed)",
			       inflight, ok, failed);
		inflight--;
		if (wc.status == 0) {
			if (first_err != 0)
				T_FAIL("killed while busy: success %s after an error",
				       t_wc_str(&wc, str, sizeof(str)));
			ok++;
			continue;
		}
		if (first_err == 0) {
			first_err = wc.status;
			t_first = t_now_ms();
			if (wc.status != -ECONNRESET)
				T_FAIL("killed while busy: first error %s, expected -ECONNRESET",
				       t_wc_str(&wc, str, sizeof(str)));
			if (t_kill == 0)
				T_FAIL("killed while busy: error before the kill: %s",
				       t_wc_str(&wc, str, sizeof(str)));
		} else if (wc.status != -ECONNRESET && wc.status != -ECANCELED) {
			T_FAIL(
			    "killed while busy: completion %s, expected -ECONNRESET or -ECANCELED",
			    t_wc_str(&wc, str, sizeof(str)));
		}
		failed++;
		if (t_now_ms() - t_kill > 5000)
			T_FAIL("killed while busy: requests still completing 5 s after the kill");
	}
	T_EXPECT_NONE(s.fab, 50);
	printf("killed while busy: %u READs ok, then %u failed, the first %lld ms after the kill\n",
	       ok, failed, (long long)(t_first - t_kill));
	first = post_later(&s);
	collect(&s, first, 5, -ECONNRESET, false, t_now_ms() + 5000, "killed while busy, later");
	close_side(&s, "killed while busy");
}

static void killed_peer(struct t_target *t)
{
	struct side s = {0};
	struct fab_link *l2 = NULL;
	uint64_t first;
	int64_t t_kill, t_first, t0;
	int ret;

	open_side(&s, t, NULL, 1);
	t_stop(t->pid);
	first = post_outstanding(&s);
	T_EXPECT_NONE(s.fab, 200); /* the peer executes nothing while stopped */
	t_kill = t_now_ms();
	t_target_kill(t);
	t_first = collect(&s, first, NREQ, -ECONNRESET, true, t_kill + 5000, "killed peer");
	printf("killed peer: %d outstanding requests failed, the first %lld ms after the kill\n",
	       NREQ, (long long)(t_first - t_kill));
	T_ASSERT_ERR(fab_link_state(s.link), -ECONNRESET);

	first = post_later(&s);
	collect(&s, first, 5, -ECONNRESET, false, t_now_ms() + 5000, "killed peer, later");
	printf("killed peer: 5 requests posted later failed too\n");

	/* nobody listens there any more */
	t0 = t_now_ms();
	ret = fab_connect(s.fab, &t->addr, 9, NULL, 0, 3000, &l2);
	if (ret == 0)
		T_FAIL("fab_connect to a dead peer succeeded");
	T_ASSERT(t_now_ms() - t0 < 5000);
	printf("killed peer: connecting again fails with %s\n", t_errname(ret));
	close_side(&s, "killed peer");
}

static void silent_peer(struct t_target *t)
{
	struct fab_attr attr = {.timeout_ms = TIMEOUT};
	struct side s = {0};
	uint64_t first;
	int64_t t_stop_ms, t_post, t_first;

	open_side(&s, t, &attr, 2);
	t_stop_ms = t_now_ms();
	t_stop(t->pid);
	first = post_outstanding(&s);
	t_post = t_now_ms();
	t_first =
	    collect(&s, first, NREQ, -ETIMEDOUT, true, t_post + TIMEOUT + 3000, "silent peer");
	printf("silent peer: %d outstanding requests failed -ETIMEDOUT, the first %lld ms after "
	       "the peer stopped (timeout_ms %d)\n",
	       NREQ, (long long)(t_first - t_stop_ms), TIMEOUT);
	if (t_first - t_stop_ms < TIMEOUT / 2)
		T_FAIL("silent peer: timed out after %lld ms, well before timeout_ms %d",
		       (long long)(t_first - t_stop_ms), TIMEOUT);
	T_ASSERT_ERR(fab_link_state(s.link), -ETIMEDOUT);

	first = post_later(&s);
	collect(&s, first, 5, -ETIMEDOUT, false, t_now_ms() + TIMEOUT + 3000, "silent peer, later");
	printf("silent peer: 5 requests posted later failed too\n");
	close_side(&s, "silent peer");
	t_target_kill(t);
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{REG,
	             FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC}},
	};
	struct t_target t0, t1, t2;

	t_init("dead-peer", 100);
	t_target_spawn(&o, &t0);
	t_target_spawn(&o, &t1);
	t_target_spawn(&o, &t2);
	killed_busy(&t0);
	if (t_stop_silences_peer()) {
		killed_peer(&t1);
		silent_peer(&t2);
	} else {
		printf("a stopped process is still served by the %s NIC: parts 1 and 2 skipped\n",
		       t_provider());
		t_target_kill(&t1);
		t_target_kill(&t2);
	}
	t_target_free(&t0);
	t_target_free(&t1);
	t_target_free(&t2);
	printf("dead-peer: PASS\n");
	return T_EXIT_PASS;
}
