/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * conn-arrival.c -- lc_conn_recv() dates what it reads by the kernel's
 * arrival time (SO_TIMESTAMPNS), not by when it was read: bytes that sat
 * in the socket for 300 ms are 300 ms old. This is what keeps a process
 * stopped past the failure bound from taking the heartbeats queued
 * meanwhile for news (liboco/view.c, lc_view_heard()). On the old code
 * last_rx_ns was the read time, and the first case fails.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "conn.h"

/* tcp_pair -- a connected TCP pair on loopback: fds[0] connects, fds[1] accepted. */
static void tcp_pair(int fds[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fds[0], (struct sockaddr *)&a, sizeof(a)), 0);
	fds[1] = accept(l, NULL, NULL);
	assert_true(fds[1] >= 0);
	close(l);
}

static void sleep_ms(long ms)
{
	nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
}

static void test_backlog_is_old(void **state)
{
	int fds[2];
	struct lc_conn *c;
	uint64_t sent, read_at;

	(void)state;
	tcp_pair(fds);
	c = lc_conn_new(fds[1], 0, 1, 1);
	assert_non_null(c);
	sent = lc_now_ns();
	assert_int_equal(send(fds[0], "heartbeat", 9, 0), 9);
	sleep_ms(300); /* the bytes wait in the socket, as while the reader is stopped */
	assert_int_equal(lc_conn_recv(c), 9);
	read_at = lc_now_ns();
	assert_true(read_at - sent >= 300000000ull);
	/* dated at arrival: within the send and well before the read */
	assert_true(c->last_rx_ns + 250000000ull <= read_at);
	assert_true(c->last_rx_ns + 1000000ull >= sent);
	close(fds[0]);
	lc_conn_free(c);
}

static void test_fresh_is_fresh(void **state)
{
	int fds[2];
	struct lc_conn *c;
	uint64_t sent;

	(void)state;
	tcp_pair(fds);
	c = lc_conn_new(fds[1], 0, 1, 1);
	assert_non_null(c);
	sleep_ms(300); /* the connection is old, the bytes are not */
	sent = lc_now_ns();
	assert_int_equal(send(fds[0], "0123456789", 10, 0), 10);
	for (int i = 0; i < 1000 && lc_conn_recv(c) == 0; i++)
		sleep_ms(1);
	assert_true(c->last_rx_ns + 1000000ull >= sent);
	assert_true(c->last_rx_ns <= lc_now_ns());
	close(fds[0]);
	lc_conn_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_backlog_is_old),
	    cmocka_unit_test(test_fresh_is_fresh),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
