/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wait.c -- blocking for completions and links (fabric.h): fab_wait(),
 * fab_arm() with fab_wait_fd(), and fab_accept() wake up for what they wait
 * for and respect their timeouts.
 *
 * 1. fab_wait() with nothing pending returns 0 or -ETIMEDOUT within its
 *    timeout (plus slack); fab_wait(-1) returns once another thread's
 *    request completes, and the completion can then be polled.
 * 2. fab_arm() returns -EAGAIN while a completion waits to be polled, 0
 *    once all were; the armed fd becomes readable when a completion
 *    arrives; fab_arm() again consumes the event (the fd is quiet).
 * 3. The same for a link a peer opened and nobody accepted yet.
 * 4. fab_wait() wakes the receiver of a SEND.
 * 5. fab_accept() with nothing to accept: -EAGAIN at once for timeout 0,
 *    and within its timeout (plus slack) otherwise.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define SLACK 1000 /* ms */
#define TMO   5000

static struct fab *a, *b;
static struct fab_link *la, *lb;
static uint8_t *abuf, *bbuf;
static struct fab_mr *amr, *bmr;
static uint64_t wrid = 1;

static struct fab_wr write_wr(void)
{
	return t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, abuf, 64, amr->lkey,
	                 (uint64_t)(uintptr_t)bbuf, bmr->rkey);
}

static bool fd_readable(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int r = poll(&pfd, 1, ms);

	if (r < 0)
		T_FAIL("poll on the wait fd: %s", strerror(errno));
	return r == 1 && (pfd.revents & POLLIN);
}

struct delayed {
	struct fab_wr wr;
	int ret;
};

static void *post_later(void *arg)
{
	struct delayed *d = arg;

	t_sleep_ms(200);
	d->ret = fab_post(la, &d->wr, 1); /* fab_post is MT-safe per link */
	return NULL;
}

static void wait_timeouts(void)
{
	struct delayed d = {.wr = write_wr()};
	struct fab_wc wc;
	pthread_t th;
	int64_t t0;
	int ret, n = 0;

	t0 = t_now_ms();
	ret = fab_wait(a, 300);
	if (ret != 0 && ret != -ETIMEDOUT)
		T_FAIL("fab_wait(300) with nothing pending returned %s", t_errname(ret));
	T_ASSERT(t_now_ms() - t0 <= 300 + SLACK);
	T_ASSERT_EQ(fab_poll(a, &wc, 1), 0);

	/* block with no timeout; another thread's request completes */
	T_ASSERT_OK(pthread_create(&th, NULL, post_later, &d));
	t0 = t_now_ms();
	for (;;) {
		ret = fab_wait(a, -1);
		if (ret != 0)
			T_FAIL("fab_wait(-1) returned %s", t_errname(ret));
		n = fab_poll(a, &wc, 1);
		if (n != 0 || t_now_ms() - t0 > TMO)
			break;
		/* a spurious wake-up is allowed; loop (bounded by TMO and alarm) */
	}
	T_ASSERT_OK(pthread_join(th, NULL));
	T_ASSERT_OK(d.ret);
	T_ASSERT_EQ(n, 1);
	T_ASSERT_EQX(wc.wrid, d.wr.wrid);
	T_ASSERT_EQ(wc.status, 0);
	printf("fab_wait: timeout respected; fab_wait(-1) woke after %lld ms for a completion: "
	       "ok\n",
	       (long long)(t_now_ms() - t0));
}

static void arm_and_fd(void)
{
	int fd = fab_wait_fd(a);
	struct fab_wr wr = write_wr();

	T_ASSERT(fd >= 0);
	/* a completion waits unpolled: arming refuses */
	T_ASSERT_OK(fab_post(la, &wr, 1));
	for (int64_t t0 = t_now_ms(); fab_arm(a) != -EAGAIN;) {
		if (t_now_ms() - t0 > TMO)
			T_FAIL("fab_arm kept returning 0 with a completion pending");
		t_sleep_ms(1);
	}
	T_EXPECT_WC(a, wr.wrid, FAB_OP_WRITE, 0, TMO, NULL);

	/* nothing pending: armed; a completion makes the fd readable */
	T_ASSERT_OK(fab_arm(a));
	wr = write_wr();
	T_ASSERT_OK(fab_post(la, &wr, 1));
	if (!fd_readable(fd, TMO))
		T_FAIL("armed wait fd not readable within %d ms of a completion", TMO);
	T_EXPECT_WC(a, wr.wrid, FAB_OP_WRITE, 0, TMO, NULL);
	/* arming again consumes the event */
	T_ASSERT_OK(fab_arm(a));
	if (fd_readable(fd, 0))
		T_FAIL("wait fd still readable after fab_arm consumed its event");
	T_EXPECT_NONE(a, 20);
	printf("fab_arm/fab_wait_fd: -EAGAIN with a completion pending, fd fires, re-arm "
	       "consumes: ok\n");
}

static void arm_for_links(void)
{
	int fd = fab_wait_fd(b);
	struct fab_link *l2, *acc;
	uint8_t priv[FAB_PRIV_MAX];
	size_t plen = sizeof(priv);
	static const char hello[] = "wait.c";
	struct t_connect_async c = {.fab = a, .ctx = 3, .priv = hello, .priv_len = sizeof(hello)};

	T_ASSERT(fd >= 0);
	T_ASSERT_OK(fab_get_addr(b, &c.addr));
	T_ASSERT_OK(fab_arm(b));
	/* a peer opens a link that b has not accepted: the fd fires, arming refuses */
	t_connect_start(&c);
	if (!fd_readable(fd, TMO))
		T_FAIL("armed wait fd not readable within %d ms of an incoming link", TMO);
	T_ASSERT_ERR(fab_arm(b), -EAGAIN);
	acc = t_accept(b, 4, 0, priv, &plen);
	T_ASSERT_EQ(plen, sizeof(hello));
	T_ASSERT(memcmp(priv, hello, plen) == 0);
	if (t_connect_join(&c) != 0)
		T_FAIL("fab_connect returned %d (%s)", c.ret, t_errname(c.ret));
	l2 = c.link;
	T_ASSERT_OK(fab_arm(b));
	if (fd_readable(fd, 0))
		T_FAIL("wait fd still readable after the link was accepted and fab_arm ran");
	T_ASSERT_OK(fab_link_close(l2));
	T_ASSERT_OK(fab_link_close(acc));
	printf("fab_arm/fab_wait_fd: an incoming link fires the fd, -EAGAIN until accepted: ok\n");
}

static void wait_for_send(void)
{
	const struct fab_recv_wr rw = {
	    .wrid = 77, .local = bbuf + 4096, .len = 256, .lkey = bmr->lkey};
	struct fab_wr wr =
	    t_wr_rdma(FAB_OP_SEND, wrid++, FAB_WR_SIGNALED, abuf, 100, amr->lkey, 0, 0);
	struct fab_wc wc;
	int64_t t0 = t_now_ms();
	int n = 0;

	T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
	wr.imm = 0x5e4d;
	T_ASSERT_OK(fab_post(la, &wr, 1));
	while (n == 0 && t_now_ms() - t0 < TMO) {
		int ret = fab_wait(b, 1000);

		if (ret != 0 && ret != -ETIMEDOUT)
			T_FAIL("fab_wait returned %s", t_errname(ret));
		n = fab_poll(b, &wc, 1);
	}
	T_ASSERT_EQ(n, 1);
	T_ASSERT_EQX(wc.wrid, 77);
	T_ASSERT_EQ(wc.status, 0);
	T_ASSERT_EQ(wc.opcode, FAB_OP_RECV);
	T_ASSERT_EQ(wc.len, 100);
	T_EXPECT_WC(a, wr.wrid, FAB_OP_SEND, 0, TMO, NULL);
	printf("fab_wait wakes the receiver of a SEND: ok\n");
}

static void accept_timeouts(void)
{
	struct fab_link *l = NULL;
	uint8_t priv[FAB_PRIV_MAX];
	size_t plen = sizeof(priv);
	int64_t t0 = t_now_ms();

	T_ASSERT_ERR(fab_accept(b, 0, 0, &l, priv, &plen), -EAGAIN);
	T_ASSERT(t_now_ms() - t0 <= SLACK);
	t0 = t_now_ms();
	T_ASSERT_ERR(fab_accept(b, 0, 300, &l, priv, &plen), -EAGAIN);
	T_ASSERT(t_now_ms() - t0 <= 300 + SLACK);
	T_ASSERT(l == NULL); /* output parameters are written only on success */
	printf("fab_accept with nothing to accept: -EAGAIN within its timeout: ok\n");
}

int main(void)
{
	t_init("wait", 60);
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(65536);
	bbuf = t_alloc(65536);
	amr = t_mr_reg(a, abuf, 65536, FAB_ACCESS_LOCAL_WRITE);
	bmr = t_mr_reg(b, bbuf, 65536,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);
	t_pair(a, b, 1, 2, &la, &lb);

	wait_timeouts();
	arm_and_fd();
	arm_for_links();
	wait_for_send();
	accept_timeouts();

	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, 65536);
	t_free(bbuf, 65536);
	printf("wait: PASS\n");
	return T_EXIT_PASS;
}
