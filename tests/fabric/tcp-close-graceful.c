/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-close-graceful.c -- a link closed while its peer still sends on it
 * ends with a close on the peer's side, never a reset: the peer logs
 * nothing above info (loco-fabric-tcp(7), "A link's close").
 *
 * B is a child process with one tcp fab and its stderr in a file; A is
 * this process. ROUNDS times: A connects to B; B streams WRITEs into A's
 * region (up to NWR in flight) until its link goes down; A closes its end
 * while they come. B's link must go down within TMO ms, and at the end
 * B's log (LOCO_LOG=warn) must be empty.
 *
 * Regression test: A's close read what had arrived and then close()d, so
 * a WRITE that landed between the two made A's kernel answer with a RST
 * instead of a FIN, which B logged as "tcp: link N down: Connection
 * reset by peer" (a graceful leave of scenario leave-together failed so
 * in CI, 1 run of ~150). A now half-closes and reads on to B's FIN
 * before it closes (tcp_linger()).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define ROUNDS 20
#define NWR    16
#define LEN    (64 * 1024)
#define WLEN   4096
#define TMO    3000

struct a_hello {
	uint64_t raddr;
	uint32_t rkey;
};

/* side B: per round, accept A's link and WRITE into A until the link goes down */
static int side_b(struct t_chan *ch, void *arg)
{
	char path[] = "/tmp/loco-close-graceful-XXXXXX", log[4096];
	struct fab_addr addr;
	struct a_hello h;
	struct fab *fb;
	struct fab_mr *mr;
	uint8_t *buf;
	uint64_t wrid = 1;
	ssize_t n;
	int fd;

	(void)arg;
	fd = mkstemp(path);
	T_ASSERT(fd >= 0);
	unlink(path);
	T_ASSERT(dup2(fd, 2) == 2); /* our log: warnings and errors only */
	setenv("LOCO_LOG", "warn", 1);
	fb = t_fab_open(&(struct fab_attr){.timeout_ms = 30000});
	buf = t_alloc(WLEN);
	mr = t_mr_reg(fb, buf, WLEN, FAB_ACCESS_LOCAL_WRITE);
	t_fill(buf, WLEN, 3);
	T_ASSERT_OK(fab_get_addr(fb, &addr));
	t_send(ch, &addr, sizeof(addr));
	t_recv(ch, &h, sizeof(h), 30000);
	for (int r = 0; r < ROUNDS; r++) {
		struct fab_link *lb = t_accept(fb, 2, 10000, NULL, NULL);
		unsigned inflight = 0, done = 0;
		int64_t t0 = t_now_ms();
		int down = 0;

		t_send_u64(ch, 1); /* streaming */
		while (t_now_ms() - t0 <= TMO) {
			struct fab_wc wc;

			down = fab_link_state(lb) != 0;
			while (!down && inflight < NWR) {
				uint64_t off = (wrid % (LEN / WLEN)) * WLEN;
				struct fab_wr wr =
				    t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, buf, WLEN,
				              mr->lkey, h.raddr + off, h.rkey);

				if (fab_post(lb, &wr, 1) != 0)
					break;
				inflight++;
			}
			while (inflight > 0 && fab_poll(fb, &wc, 1) == 1) {
				inflight--;
				done++;
			}
			if (down && inflight == 0)
				break;
			t_sleep_us(50);
		}
		t_send_u64(ch, down && inflight == 0 ? done : 0);
		T_ASSERT_OK(fab_link_close(lb));
		while (inflight > 0 && t_poll_one(fb, &(struct fab_wc){0}, TMO) == 0)
			inflight--;
	}
	fab_mr_dereg(mr);
	fab_close(fb);
	t_free(buf, WLEN);
	/* what we logged, to A */
	n = pread(fd, log, sizeof(log) - 1, 0);
	T_ASSERT(n >= 0);
	log[n] = '\0';
	t_send_u64(ch, (uint64_t)n);
	t_send(ch, log, (size_t)n);
	return 0;
}

int main(void)
{
	char log[4096];
	struct fab_addr addr;
	struct a_hello h;
	struct t_chan ch;
	struct fab *fa;
	struct fab_mr *mra;
	uint8_t *bufa;
	uint64_t n;
	pid_t b;

	t_init("tcp-close-graceful", 120);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("a test of the tcp provider");
	b = t_spawn(side_b, NULL, &ch);
	t_recv(&ch, &addr, sizeof(addr), 30000);
	fa = t_fab_open(NULL);
	bufa = t_alloc(LEN);
	mra = t_mr_reg(fa, bufa, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	h.raddr = (uintptr_t)bufa;
	h.rkey = mra->rkey;
	t_send(&ch, &h, sizeof(h));
	for (int r = 0; r < ROUNDS; r++) {
		struct fab_link *la = t_connect(fa, &addr, 1, NULL, 0);

		T_ASSERT_EQ(t_recv_u64(&ch, 10000), 1);
		t_sleep_ms(5 + (unsigned)r % 5); /* B's WRITEs come */
		T_ASSERT_OK(fab_link_close(la));
		n = t_recv_u64(&ch, TMO + 5000);
		if (n == 0)
			T_FAIL("round %d: B's link still up, or WRITEs outstanding, %d ms after A "
			       "closed its end",
			       r, TMO);
	}
	n = t_recv_u64(&ch, 10000);
	T_ASSERT(n < sizeof(log));
	t_recv(&ch, log, (size_t)n, 10000);
	log[n] = '\0';
	T_ASSERT_EQ(t_reap(b, 10000), 0);
	t_chan_close(&ch);
	if (n > 0)
		T_FAIL("B logged on links that A closed while B wrote (a reset, not a close):\n%s",
		       log);
	printf("tcp-close-graceful: %d links closed by A while B wrote on them: B logged "
	       "nothing\n",
	       ROUNDS);
	fab_mr_dereg(mra);
	fab_close(fa);
	t_free(bufa, LEN);
	return 0;
}
