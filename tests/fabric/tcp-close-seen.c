/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-close-seen.c -- a link whose peer closed it goes down on this side
 * too, also when the close came right behind data and this side has
 * nothing outstanding to find it out with (loco-fabric-tcp(7), "A link's
 * close").
 *
 * B is a child process with one tcp fab and a region; A is this process.
 * ROUNDS times: A connects to B; B is stopped (SIGSTOP); A WRITEs into B,
 * lazy (B may hold their ACK back: LOCO_TCP_ACK_DELAY_US, 5 s here, so
 * that B sends nothing soon, whose reset would tell it), and closes its
 * end; B goes on (SIGCONT), so that its NIC finds the data and the close
 * in its socket together, in one edge of its edge-triggered socket. B's
 * end must then report an error (fab_link_state()) within TMO ms, with
 * nothing posted on it.
 *
 * Regression test: B's NIC took a read shorter than asked for as "the
 * socket is drained" and did not read again, so a close that came with
 * data went unseen and B's link stayed up for good. In the rpc tests a
 * data link so failed on one side only; the side that rebuilds links
 * never learned it, and the other waited for it (3 runs of 12 of
 * rpc-tree-buffer-linkfail failed). Before the fix this test failed in
 * round 0 of every run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define ROUNDS 8
#define NWR    4
#define LEN    4096
#define TMO    3000

struct b_hello {
	struct fab_addr addr;
	uint64_t raddr;
	uint32_t rkey;
};

/* side B: accept a link per round, then say whether it went down within TMO ms */
static int side_b(struct t_chan *ch, void *arg)
{
	struct b_hello h = {0};
	struct fab *fb;
	struct fab_mr *mr;
	uint8_t *buf;

	(void)arg;
	setenv("LOCO_TCP_ACK_DELAY_US", "5000000", 1);
	fb = t_fab_open(&(struct fab_attr){.timeout_ms = 30000});
	buf = t_alloc(LEN);
	mr = t_mr_reg(fb, buf, LEN,
	              FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);
	T_ASSERT_OK(fab_get_addr(fb, &h.addr));
	h.raddr = (uintptr_t)buf;
	h.rkey = mr->rkey;
	t_send(ch, &h, sizeof(h));
	for (int r = 0; r < ROUNDS; r++) {
		struct fab_link *lb = t_accept(fb, 2, 10000, NULL, NULL);
		int64_t t0;
		uint64_t down = 0;

		t_send_u64(ch, 1);                     /* accepted */
		T_ASSERT_EQ(t_recv_u64(ch, 30000), 2); /* A closed its end (we were stopped) */
		t0 = t_now_ms();
		while (t_now_ms() - t0 <= TMO && !(down = fab_link_state(lb) != 0))
			t_sleep_us(200);
		t_send_u64(ch, down);
		T_ASSERT_OK(fab_link_close(lb));
		T_EXPECT_NONE(fb, 0); /* nothing was posted on B */
	}
	fab_mr_dereg(mr);
	fab_close(fb);
	t_free(buf, LEN);
	return 0;
}

int main(void)
{
	struct b_hello h;
	struct t_chan ch;
	struct fab *fa;
	struct fab_mr *mra;
	uint8_t *bufa;
	uint64_t wrid = 1;
	pid_t b;

	t_init("tcp-close-seen", 120);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("a test of the tcp provider");
	b = t_spawn(side_b, NULL, &ch);
	t_recv(&ch, &h, sizeof(h), 30000);
	fa = t_fab_open(NULL);
	bufa = t_alloc(LEN);
	mra = t_mr_reg(fa, bufa, LEN, FAB_ACCESS_LOCAL_WRITE);
	t_fill(bufa, LEN, 7);

	for (int r = 0; r < ROUNDS; r++) {
		struct fab_link *la = t_connect(fa, &h.addr, 1, NULL, 0);
		struct fab_wr wr[NWR];
		struct fab_wc wc;

		T_ASSERT_EQ(t_recv_u64(&ch, 10000), 1);
		t_stop(b);
		for (int i = 0; i < NWR; i++)
			wr[i] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED | FAB_WR_LAZY,
			                  bufa + i * (LEN / NWR), LEN / NWR, mra->lkey,
			                  h.raddr + i * (LEN / NWR), h.rkey);
		T_ASSERT_OK(fab_post(la, wr, NWR));
		t_sleep_ms(20); /* the WRITEs leave */
		T_ASSERT_OK(fab_link_close(la));
		/* A's WRITEs complete, flushed by the close (B never ACKed): each once */
		for (int i = 0; i < NWR; i++)
			if (t_poll_one(fa, &wc, TMO) != 0)
				T_FAIL("round %d: only %d of A's %d WRITEs completed", r, i, NWR);
		t_sleep_ms(20); /* the close reaches B's socket, behind the data */
		t_cont(b);
		t_send_u64(&ch, 2);
		if (t_recv_u64(&ch, TMO + 5000) != 1)
			T_FAIL("round %d: B's link still up %d ms after A closed its end right "
			       "behind data (nothing posted on B)",
			       r, TMO);
	}
	T_ASSERT_EQ(t_reap(b, 10000), 0);
	t_chan_close(&ch);
	printf("tcp-close-seen: %d links: B saw every close of A, each right behind data\n",
	       ROUNDS);
	fab_mr_dereg(mra);
	fab_close(fa);
	t_free(bufa, LEN);
	return 0;
}
