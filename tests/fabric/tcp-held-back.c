/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-held-back.c -- a request of several segments that TCP holds back
 * part-way in, for longer than the dead-peer bound, does not fail a live
 * link: its target says it is alive on its timers while the request is
 * part-way in (loco-fabric-tcp(7), tcp_target_keepalive()).
 *
 * Two tcp fabs in one process, A posting to B with fab_attr.timeout_ms =
 * BOUND, through a proxy on loopback that this test runs: it forwards B's
 * bytes to A at once, and A's to B, except that once armed it forwards
 * ARM_BYTES of A's bytes and then holds the rest back for HOLD ms (what a
 * lost segment on a lossy link does to a long WRITE: the slow-link
 * scenario's failure in CI, "no answer from the peer for 1000 ms").
 *  1. a 1 MiB WRITE, held back part-way in for HOLD (3.5 bounds): it
 *     completes with success after the hold, and its bytes landed;
 *  2. the link still works: an 8-byte WRITE and a READ of it complete.
 * Without the keepalive, A hears nothing during the hold and fails the
 * link with -ETIMEDOUT about BOUND into it. A target whose process stopped
 * still says nothing: fabric-dead-peer's part 2 checks that.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"

#define LEN       (1024u * 1024u)
#define BOUND     400  /* ms: the dead-peer bound of both fabs */
#define HOLD      1400 /* ms: 3.5 bounds */
#define ARM_BYTES (256u * 1024u)
#define CHUNK     65536

struct proxy {
	int lfd;  /* where A connects */
	int a, b; /* A's connection, ours to B */
	struct fab_addr b_addr;
	int stop;      /* atomic: end the pump */
	int armed;     /* atomic: count A's bytes from now on, then hold */
	size_t budget; /* pump thread: A's bytes still to forward before the hold */
	int64_t hold_until;
	int64_t held_at; /* atomic: when the hold began (0: not yet) */
	pthread_t th;
};

static struct proxy px = {.lfd = -1, .a = -1, .b = -1};

/* write_all -- every byte of @buf to @fd (blocking), or fail the test */
static void write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			T_FAIL("proxy: write: %s", strerror(errno));
		buf += n;
		len -= (size_t)n;
	}
}

/* pump -- forward one read of @from to @to; returns 0 at EOF or a reset */
static int pump(int from, int to, size_t max)
{
	static uint8_t buf[CHUNK]; /* only the pump thread uses it */
	ssize_t n = read(from, buf, max < CHUNK ? max : CHUNK);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (n <= 0)
		return 0;
	write_all(to, buf, (size_t)n);
	return (int)n;
}

static void *proxy_run(void *arg)
{
	int64_t deadline = t_now_ms() + 60000; /* bounded, whatever the test does */

	(void)arg;
	while (!__atomic_load_n(&px.stop, __ATOMIC_ACQUIRE) && t_now_ms() < deadline) {
		int64_t now = t_now_ms();
		int hold = px.hold_until != 0 && now < px.hold_until;
		struct pollfd p[2] = {{.fd = px.b, .events = POLLIN},
		                      {.fd = hold ? -1 : px.a, .events = POLLIN}};
		int n;

		if (__atomic_load_n(&px.armed, __ATOMIC_ACQUIRE) == 1) {
			px.budget = ARM_BYTES;
			__atomic_store_n(&px.armed, 2, __ATOMIC_RELEASE);
		}
		n = poll(p, 2, 10);
		if (n < 0 && errno != EINTR)
			T_FAIL("proxy: poll: %s", strerror(errno));
		if (n <= 0)
			continue;
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && pump(px.b, px.a, CHUNK) == 0)
			break;
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			size_t max =
			    __atomic_load_n(&px.armed, __ATOMIC_ACQUIRE) == 2 ? px.budget : CHUNK;
			int got = pump(px.a, px.b, max);

			if (got == 0)
				break;
			if (__atomic_load_n(&px.armed, __ATOMIC_ACQUIRE) == 2) {
				px.budget -= (size_t)got;
				if (px.budget == 0) { /* the rest waits behind the "lost" segment */
					px.hold_until = t_now_ms() + HOLD;
					__atomic_store_n(&px.held_at, t_now_ms(), __ATOMIC_RELEASE);
					__atomic_store_n(&px.armed, 3, __ATOMIC_RELEASE);
				}
			}
		}
	}
	return NULL;
}

/* proxy_listen -- a loopback listener; fills *@a_addr with @b's address but ours */
static void proxy_listen(const struct fab_addr *b, struct fab_addr *a_addr)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);

	px.b_addr = *b;
	px.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(px.lfd >= 0);
	T_ASSERT_OK(bind(px.lfd, (struct sockaddr *)&sin, sizeof(sin)));
	T_ASSERT_OK(listen(px.lfd, 4));
	T_ASSERT_OK(getsockname(px.lfd, (struct sockaddr *)&sin, &len));
	*a_addr = *b; /* the tag is B's */
	memset(&a_addr->ss, 0, sizeof(a_addr->ss));
	memcpy(&a_addr->ss, &sin, sizeof(sin));
	a_addr->len = sizeof(sin);
}

/* proxy_accept -- take A's connection, open ours to B, start the pump */
static void *proxy_accept(void *arg)
{
	int one = 1;

	(void)arg;
	px.a = accept4(px.lfd, NULL, NULL, SOCK_CLOEXEC);
	if (px.a < 0)
		T_FAIL("proxy: accept: %s", strerror(errno));
	px.b = socket(px.b_addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (px.b < 0 || connect(px.b, (struct sockaddr *)&px.b_addr.ss, px.b_addr.len) != 0)
		T_FAIL("proxy: connect to B: %s", strerror(errno));
	(void)setsockopt(px.a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(px.b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return proxy_run(NULL);
}

int main(void)
{
	struct fab_attr attr = {.timeout_ms = BOUND};
	struct t_connect_async c = {.timeout_ms = 5000, .ctx = 1};
	struct fab *fa, *fb;
	struct fab_link *la, *lb;
	struct fab_mr *mra, *mrb;
	struct fab_addr b_addr;
	uint8_t *bufa, *bufb;
	struct fab_wr wr;
	int64_t t0, held, took;

	t_init("tcp-held-back", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("tcp only");
	fa = t_fab_open(&attr);
	fb = t_fab_open(&attr);
	bufa = t_alloc(2 * LEN);
	bufb = t_alloc(2 * LEN);
	mra = t_mr_reg(fa, bufa, 2 * LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	mrb = t_mr_reg(fb, bufb, 2 * LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);

	/* A connects to the proxy, which connects to B */
	T_ASSERT_OK(fab_get_addr(fb, &b_addr));
	proxy_listen(&b_addr, &c.addr);
	T_ASSERT_OK(pthread_create(&px.th, NULL, proxy_accept, NULL));
	c.fab = fa;
	t_connect_start(&c);
	lb = t_accept(fb, 2, 5000, NULL, NULL);
	T_ASSERT_OK(t_connect_join(&c));
	la = c.link;

	/* 1. a 1 MiB WRITE, the rest of it held back for HOLD after ARM_BYTES */
	t_fill(bufa, LEN, 0x5eed);
	__atomic_store_n(&px.armed, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&px.armed, __ATOMIC_ACQUIRE) == 1)
		t_sleep_ms(1);
	t0 = t_now_ms();
	wr = t_wr_rdma(FAB_OP_WRITE, 10, FAB_WR_SIGNALED, bufa, LEN, mra->lkey, (uintptr_t)bufb,
	               mrb->rkey);
	T_ASSERT_OK(fab_post(la, &wr, 1));
	T_EXPECT_WC(fa, 10, FAB_OP_WRITE, 0, HOLD + 10000, NULL);
	took = t_now_ms() - t0;
	held = __atomic_load_n(&px.held_at, __ATOMIC_ACQUIRE);
	if (held == 0)
		T_FAIL("the proxy never held the WRITE back (%lld ms)", (long long)took);
	if (took < HOLD)
		T_FAIL(
		    "the WRITE completed after %lld ms, within the hold of %d ms: nothing was held",
		    (long long)took, HOLD);
	T_ASSERT(memcmp(bufa, bufb, LEN) == 0);
	printf("1 MiB WRITE held back for %d ms (bound %d ms) after %u bytes: completed after "
	       "%lld ms: ok\n",
	       HOLD, BOUND, ARM_BYTES, (long long)took);

	/* 2. the link is still up */
	t_fill(bufa + LEN, 8, 0xbeef);
	wr = t_wr_rdma(FAB_OP_WRITE, 11, FAB_WR_SIGNALED, bufa + LEN, 8, mra->lkey,
	               (uintptr_t)bufb + LEN, mrb->rkey);
	T_ASSERT_EQ(t_run(la, &wr), 0);
	wr = t_wr_rdma(FAB_OP_READ, 12, FAB_WR_SIGNALED, bufa + LEN + 64, 8, mra->lkey,
	               (uintptr_t)bufb + LEN, mrb->rkey);
	T_ASSERT_EQ(t_run(la, &wr), 0);
	T_ASSERT(memcmp(bufa + LEN, bufa + LEN + 64, 8) == 0);
	printf("the link still works after the hold: ok\n");

	T_EXPECT_NONE(fa, 50);
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	__atomic_store_n(&px.stop, 1, __ATOMIC_RELEASE);
	T_ASSERT_OK(pthread_join(px.th, NULL));
	close(px.a);
	close(px.b);
	close(px.lfd);
	T_ASSERT_OK(fab_mr_dereg(mra));
	T_ASSERT_OK(fab_mr_dereg(mrb));
	fab_close(fa);
	fab_close(fb);
	t_free(bufa, 2 * LEN);
	t_free(bufb, 2 * LEN);
	printf("tcp-held-back: PASS\n");
	return T_EXIT_PASS;
}
