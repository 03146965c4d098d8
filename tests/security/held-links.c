/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * held-links.c -- data links waiting for their member's session are
 * bounded and closed after the handshake bound (issue 10).
 *
 * A stranger opens raw tcp data links to node 1 (failure bound 1 s, so
 * the handshake bound is 2 s) whose HELLO carries a well-formed proof
 * claiming a node that has no session: 8 links for each of 10 made-up
 * nodes, then one for each of 40 more. Expected: at most
 * LC_PENDING_PER_NODE links wait per claimed node and LC_PENDING_MAX in
 * all (the others are refused at once); within the bound plus a second
 * every link is closed by the node (the stranger reads EOF on each of
 * its 120 sockets), nothing waits any more, and node 1's refusals say
 * why.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "manager.h"
#include "sec.h"
#include "tcp/wire.h"

#define N1 80 /* 8 per node, 10 nodes */
#define N2 40 /* 1 per node, 40 nodes */

/*
 * open_claim -- a raw data link to @addr from 127.0.0.(2 + @src % 8)
 * (the fabric holds at most 16 links not admitted per source address:
 * spread over 8, the node's own bound is the one met), claiming @node.
 */
static int open_claim(const char *addr, uint32_t node, unsigned src)
{
	struct sockaddr_in from = {.sin_family = AF_INET};
	struct tcp_hello h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .sq_depth = 16};
	struct tcp_frame f = {.type = TCP_F_HELLO, .len = TCP_HELLO_LEN};
	uint8_t buf[TCP_HDR_LEN + TCP_HELLO_LEN];
	struct fab_addr fa;
	int fd;

	h.read_window = 1u << 20;
	h.priv_len = 40;
	sec_random(h.priv, sizeof(h.priv));
	h.priv[0] = 1;
	h.priv[1] = h.priv[2] = h.priv[3] = 0;
	memcpy(h.priv + 4, &node, 4);
	tcp_wire_encode(&f, buf);
	tcp_hello_encode(&h, buf + TCP_HDR_LEN);
	T_ASSERT_OK(fab_addr_parse(addr, 0, &fa));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	from.sin_addr.s_addr = htonl(0x7f000002u + src % 8);
	T_ASSERT(bind(fd, (struct sockaddr *)&from, sizeof(from)) == 0);
	T_ASSERT(connect(fd, (struct sockaddr *)&fa.ss, fa.len) == 0);
	T_ASSERT(send(fd, buf, sizeof(buf), MSG_NOSIGNAL) == (ssize_t)sizeof(buf));
	return fd;
}

/* closed -- whether the node closed @fd's connection (EOF or reset), reading what is there. */
static int closed(int fd)
{
	uint8_t b[4096];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 0) <= 0)
			return 0;
		r = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN))
			return 1;
		if (r < 0)
			return 0;
	}
}

/* waiting -- how many links wait at @m (its internals). */
static unsigned waiting(loco_manager_t *m, unsigned *max_per_node)
{
	unsigned n;

	pthread_mutex_lock(&m->lock);
	n = m->linkin.npending;
	*max_per_node = 0;
	for (struct lc_pending_link *p = m->linkin.pending; p != NULL; p = p->next) {
		unsigned same = 0;

		for (struct lc_pending_link *q = m->linkin.pending; q != NULL; q = q->next)
			same += q->priv.node == p->priv.node;
		if (same > *max_per_node)
			*max_per_node = same;
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

int main(void)
{
	int fd[N1 + N2], eof = 0;
	unsigned n, per;
	loco_manager_t *m;
	int64_t t0, t_all = -1;

	t_init("held-links", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("the stranger speaks the tcp wire");
	sec_log_start();
	m = sec_node(1, NULL, "held-links secret");
	for (int i = 0; i < N1; i++)
		fd[i] = open_claim(sec_fab_addr(m), 100 + (uint32_t)i / 8, (unsigned)i);
	t0 = t_now_ms();
	for (int i = 0; i < N2; i++)
		fd[N1 + i] = open_claim(sec_fab_addr(m), 200 + (uint32_t)i, (unsigned)i);
	/* let node 1 take them all */
	for (int64_t end = t_now_ms() + 1000; t_now_ms() < end;) {
		t_sleep_ms(20);
		if (sec_log_count("too many links wait") >= N1 + N2 - LC_PENDING_MAX)
			break;
	}
	n = waiting(m, &per);
	printf("waiting after %d links: %u (at most %u per node)\n", N1 + N2, n, per);
	T_ASSERT(n <= LC_PENDING_MAX);
	T_ASSERT(per <= LC_PENDING_PER_NODE);
	T_ASSERT_EQ(n, LC_PENDING_MAX); /* 10 x 4 + 24 of the 40: the bound, not less */

	/* every link is closed within the bound (2 s) plus a second */
	for (int64_t end = t0 + 3000; t_now_ms() < end && eof < N1 + N2; t_sleep_ms(20)) {
		eof = 0;
		for (int i = 0; i < N1 + N2; i++)
			eof += fd[i] < 0;
		for (int i = 0; i < N1 + N2; i++) {
			if (fd[i] >= 0 && closed(fd[i])) {
				close(fd[i]);
				fd[i] = -1;
				eof++;
			}
		}
		if (eof == N1 + N2)
			t_all = t_now_ms() - t0;
	}
	/* and none is left on node 1's list (the fabric may have closed them first) */
	for (int64_t end = t0 + 3500; (n = waiting(m, &per)) > 0 && t_now_ms() < end;)
		t_sleep_ms(20);
	printf("closed by node 1: %d of %d (all after %lld ms); waiting now: %u\n", eof, N1 + N2,
	       (long long)t_all, n);
	T_ASSERT_EQ(eof, N1 + N2);
	T_ASSERT_EQ(n, 0);
	T_ASSERT(sec_log_count("within the handshake bound") + sec_log_count("more data link") >=
	         1);
	for (int i = 0; i < N1 + N2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	loco_fini(m);
	printf("PASS\n");
	return T_EXIT_PASS;
}
