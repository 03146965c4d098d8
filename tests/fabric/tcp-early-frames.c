/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-early-frames.c -- a stranger speaking the tcp wire gets nothing
 * executed before admission (loco-fabric-tcp(7), SECURITY).
 *
 * A raw TCP client knows a registered region's address and key (as if it
 * had guessed them) and sends a well-formed HELLO followed by WRITE, READ
 * and CAS frames for that region:
 *  1. all in one send, and nobody accepts the link: nothing is executed,
 *     no byte comes back, and the provider closes the connection after
 *     the hold bound (2 s);
 *  2. HELLO first, the frames 200 ms later, and the target accepts and
 *     admits the link: admission finds the early frames and refuses the
 *     link (-EPROTO); nothing executed, nothing returned;
 *  3. frames without a HELLO: closed at once.
 * Each time the region still holds its pattern.
 */
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"
#include "tcp/wire.h"

#define LEN 4096
#define TMO 10000

static struct fab *fab;
static struct fab_addr addr;
static uint8_t *buf, pattern[LEN];
static uint32_t rkey;

/* frames -- HELLO (if @hello) then WRITE, READ, CAS for the region; returns the bytes. */
static size_t frames(uint8_t *out, int hello, int requests)
{
	struct tcp_hello h = {
	    .magic = TCP_MAGIC, .version = TCP_VERSION, .sq_depth = 256, .read_window = 256 * 1024};
	struct tcp_frame f;
	size_t n = 0;

	if (hello) {
		f = (struct tcp_frame){.type = TCP_F_HELLO, .len = TCP_HELLO_LEN};
		tcp_wire_encode(&f, out + n);
		tcp_hello_encode(&h, out + n + TCP_HDR_LEN);
		n += TCP_HDR_LEN + TCP_HELLO_LEN;
	}
	if (!requests)
		return n;
	f = (struct tcp_frame){.type = TCP_F_WRITE,
	                       .flags = TCP_FL_FIRST | TCP_FL_LAST | TCP_FL_ACKREQ,
	                       .len = 64,
	                       .psn = 0,
	                       .key = rkey,
	                       .addr = (uintptr_t)buf,
	                       .a = 64};
	tcp_wire_encode(&f, out + n);
	memset(out + n + TCP_HDR_LEN, 0xee, 64);
	n += TCP_HDR_LEN + 64;
	f = (struct tcp_frame){
	    .type = TCP_F_READ, .psn = 1, .key = rkey, .addr = (uintptr_t)(buf + 512), .a = 64};
	tcp_wire_encode(&f, out + n);
	n += TCP_HDR_LEN;
	f = (struct tcp_frame){.type = TCP_F_CAS,
	                       .psn = 2,
	                       .key = rkey,
	                       .addr = (uintptr_t)(buf + 1024),
	                       .a = 0x0101010101010101ull * 0x5a,
	                       .b = 0xdeadbeefull};
	tcp_wire_encode(&f, out + n);
	n += TCP_HDR_LEN;
	return n;
}

static int raw_connect(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	if (connect(fd, (struct sockaddr *)&addr.ss, addr.len) != 0)
		T_FAIL("connect: %s", strerror(errno));
	return fd;
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
	T_ASSERT_EQ(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* expect_closed -- no byte arrives on @fd, and it is closed within @ms. Returns when (ms). */
static int64_t expect_closed(int fd, int ms)
{
	int64_t t0 = t_now_ms();
	uint8_t junk[256];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = ms - (t_now_ms() - t0);
		ssize_t n;

		if (left <= 0)
			T_FAIL("the stranger's connection still open after %d ms", ms);
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);
		if (n > 0)
			T_FAIL("the stranger received %zd bytes (type %u)", n, junk[0]);
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return t_now_ms() - t0;
	}
}

static void expect_untouched(const char *what)
{
	if (!t_mem_equal(buf, pattern, LEN, what))
		T_FAIL("%s: the region changed", what);
}

int main(void)
{
	uint8_t out[1024];
	struct fab_mr *mr;
	struct fab_link *link;
	int64_t ms;
	int fd;

	t_init("tcp-early-frames", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("tcp only");
	fab = t_fab_open(NULL);
	T_ASSERT_OK(fab_get_addr(fab, &addr));
	buf = t_alloc(LEN);
	memset(pattern, 0x5a, LEN);
	memcpy(buf, pattern, LEN);
	mr = t_mr_reg(fab, buf, LEN,
	              FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ |
	                  FAB_ACCESS_REMOTE_ATOMIC);
	rkey = mr->rkey;

	/* 1. everything at once, nobody accepts */
	fd = raw_connect();
	send_all(fd, out, frames(out, 1, 1));
	ms = expect_closed(fd, 5000);
	close(fd);
	expect_untouched("HELLO + requests, not accepted");
	if (ms < 1500)
		T_FAIL("closed after %lld ms: before the hold bound", (long long)ms);
	printf("HELLO + WRITE/READ/CAS, never accepted: nothing executed or returned, closed "
	       "after %lld ms: ok\n",
	       (long long)ms);

	/* 2. HELLO, then requests before admission; the target admits */
	fd = raw_connect();
	send_all(fd, out, frames(out, 1, 0));
	link = t_accept_held(fab, 1, TMO, NULL, NULL);
	send_all(fd, out, frames(out, 0, 1));
	t_sleep_ms(200);
	expect_untouched("requests on a held link");
	T_ASSERT_ERR(fab_link_admit(link), -EPROTO);
	ms = expect_closed(fd, 3000);
	close(fd);
	expect_untouched("requests before admission");
	T_ASSERT_OK(fab_link_close(link));
	printf("requests sent before admission: admission refuses the link (-EPROTO), nothing "
	       "executed: ok\n");

	/* 3. requests without a HELLO */
	fd = raw_connect();
	send_all(fd, out, frames(out, 0, 1));
	ms = expect_closed(fd, 3000);
	close(fd);
	expect_untouched("requests without HELLO");
	printf("requests without a HELLO: closed after %lld ms: ok\n", (long long)ms);

	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);
	t_free(buf, LEN);
	printf("tcp-early-frames: PASS\n");
	return T_EXIT_PASS;
}
