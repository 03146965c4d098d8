/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock-close.c -- lc_sock_close_all() (liboco/sock.h) closes TCP sockets
 * with a FIN and no RST while their peers still send: each peer reads its
 * EOF and never ECONNRESET or EPIPE; a peer that sends its own FIN ends
 * the wait, a silent one costs the bound and no more. (lc_sock_close(),
 * the read-then-close it replaces at the manager's end, reset such peers:
 * the first case fails with it, "peer 3: Connection reset by peer, not
 * EOF".)
 *
 * Each case: connected pairs on loopback; a thread per peer WRITEs 4 KiB
 * at a time and reads without blocking, until it reads EOF (it then
 * closes: its FIN) or an error (a reset).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "sock.h"

#define PAIRS  8
#define ROUNDS 10
#define CHUNK  4096
#define BOUND  250

struct peer {
	pthread_t t;
	int fd;
	int go;     /* atomic: 1 while it should send */
	int result; /* 0: reading still; 1: read EOF; -errno: an error (a reset) */
	int silent; /* never closes: waits to be told (go = 0) */
};

/* pair -- a connected TCP pair on loopback: *a (ours) and *b (the peer's) */
static void pair(int *a, int *b)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	*b = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(*b >= 0);
	assert_int_equal(connect(*b, (struct sockaddr *)&sin, sizeof(sin)), 0);
	*a = accept(l, NULL, NULL);
	assert_true(*a >= 0);
	close(l);
}

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	uint8_t buf[CHUNK];
	uint64_t end = lc_now_ns() + 5000000000ull;

	memset(buf, 7, sizeof(buf));
	while (lc_now_ns() < end) {
		ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0) {
			__atomic_store_n(&p->result, 1, __ATOMIC_RELEASE);
			if (!p->silent)
				break;
		} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			__atomic_store_n(&p->result, -errno, __ATOMIC_RELEASE);
			break;
		}
		if (!__atomic_load_n(&p->go, __ATOMIC_ACQUIRE))
			break;
		if (__atomic_load_n(&p->result, __ATOMIC_ACQUIRE) == 0 &&
		    send(p->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
		    errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			__atomic_store_n(&p->result, -errno, __ATOMIC_RELEASE);
			break;
		}
		usleep(20);
	}
	close(p->fd); /* our FIN */
	return NULL;
}

/*
 * run -- PAIRS pairs, peers sending; close ours with @graceful (or
 * lc_sock_close() one by one); the peers' results into @res; the close's
 * time in ms.
 */
static unsigned run(int graceful, int silent, int res[PAIRS])
{
	struct peer p[PAIRS];
	int fd[PAIRS];
	uint64_t t0;

	for (int i = 0; i < PAIRS; i++) {
		p[i] = (struct peer){.go = 1, .silent = silent};
		pair(&fd[i], &p[i].fd);
		assert_int_equal(pthread_create(&p[i].t, NULL, peer_main, &p[i]), 0);
	}
	usleep(2000); /* their bytes come */
	t0 = lc_now_ns();
	if (graceful) {
		lc_sock_close_all(fd, PAIRS, BOUND);
		for (int i = 0; i < PAIRS; i++)
			assert_int_equal(fd[i], -1);
	} else {
		for (int i = 0; i < PAIRS; i++)
			lc_sock_close(fd[i]);
	}
	t0 = (lc_now_ns() - t0) / 1000000ull;
	usleep(20000); /* what the close sends reaches the peers */
	for (int i = 0; i < PAIRS; i++) {
		__atomic_store_n(&p[i].go, 0, __ATOMIC_RELEASE);
		pthread_join(p[i].t, NULL);
		res[i] = p[i].result;
	}
	return (unsigned)t0;
}

/* peers that send until they read our EOF: every one reads it, none is reset */
static void close_all__peers_sending_read_eof_never_reset(void **state)
{
	int res[PAIRS];

	(void)state;
	for (int r = 0; r < ROUNDS; r++) {
		run(1, 0, res);
		for (int i = 0; i < PAIRS; i++)
			if (res[i] != 1)
				fail_msg("round %d, peer %d: %s, not EOF", r, i,
				         res[i] == 0 ? "nothing" : strerror(-res[i]));
	}
}

/* a peer that reads our EOF but never closes: the wait ends at the bound */
static void close_all__silent_peer_ends_at_the_bound(void **state)
{
	int res[PAIRS];
	unsigned ms;

	(void)state;
	ms = run(1, 1, res);
	assert_true(ms >= BOUND - 1);
	assert_true(ms < BOUND + 2000);
	for (int i = 0; i < PAIRS; i++)
		assert_int_equal(res[i], 1);
}

/* empty, and -1 entries: nothing to do, no wait */
static void close_all__skips_negative_fds(void **state)
{
	int fd[3] = {-1, -1, -1};
	uint64_t t0 = lc_now_ns();

	(void)state;
	lc_sock_close_all(fd, 3, BOUND);
	lc_sock_close_all(NULL, 0, BOUND);
	assert_true(lc_now_ns() - t0 < (uint64_t)BOUND * 1000000ull);
	assert_int_equal(fd[0], -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(close_all__peers_sending_read_eof_never_reset),
	    cmocka_unit_test(close_all__silent_peer_ends_at_the_bound),
	    cmocka_unit_test(close_all__skips_negative_fds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
