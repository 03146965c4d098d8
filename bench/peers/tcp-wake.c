/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-wake.c -- the peer of wake-lat on tcp: how soon a thread asleep in
 * epoll_wait(2) sees 8 bytes another process sends it over loopback TCP,
 * with nothing of LOCO in between. It is the floor of wake-lat's tcp
 * figure on this machine: the kernel's loopback path and the wake-up of
 * the receiver (and, after a gap, of the sender's idle CPU).
 *
 *   tcp-wake [--pings N] [--gap-us US] [--poll]
 *
 * A child process connects to the parent (127.0.0.1, a port the kernel
 * picks, TCP_NODELAY) and sends its CLOCK_MONOTONIC time, one 8-byte
 * message every --gap-us (default 5000, wake-lat's 5 ms), --pings times
 * (default 200). The parent waits for each in epoll_wait(2) with no
 * timeout (--poll: with timeout 0 in a loop, a receiver that never
 * sleeps), reads it and takes the time since it was sent (one host: one
 * clock). It prints the median, p90 and max in us. The child is ended
 * by PID on every path; every wait is bounded (10 s).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS   10000 /* no message for this long: fail */
#define PINGS_MAX 100000

static pid_t child = -1;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void end_child(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
}

static int die(const char *what)
{
	fprintf(stderr, "tcp-wake: %s: %s\n", what, strerror(errno));
	end_child();
	return 1;
}

/* sender -- the child: connect to @a, send the time every @gap_us, @pings times */
static void sender(const struct sockaddr_in *a, long pings, long gap_us)
{
	struct timespec gap = {.tv_sec = gap_us / 1000000, .tv_nsec = (gap_us % 1000000) * 1000};
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (s < 0 || connect(s, (const struct sockaddr *)a, sizeof(*a)) != 0 ||
	    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		_exit(1);
	for (long i = 0; i < pings; i++) {
		uint64_t t;

		nanosleep(&gap, NULL);
		t = now_ns();
		if (send(s, &t, sizeof(t), 0) != (ssize_t)sizeof(t))
			_exit(1);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"pings", required_argument, NULL, 'p'},
	    {"gap-us", required_argument, NULL, 'g'},
	    {"poll", no_argument, NULL, 'P'},
	    {NULL, 0, NULL, 0},
	};
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct epoll_event ev = {.events = EPOLLIN};
	long pings = 200, gap_us = 5000, n = 0;
	socklen_t alen = sizeof(a);
	int c, ls, s, ep, poll = 0;
	double *lat;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pings = atol(optarg);
			break;
		case 'g':
			gap_us = atol(optarg);
			break;
		case 'P':
			poll = 1;
			break;
		default:
			fprintf(stderr, "usage: tcp-wake [--pings N] [--gap-us US] [--poll]\n");
			return 2;
		}
	}
	if (pings < 2 || pings > PINGS_MAX || gap_us < 0 || gap_us > 1000000) {
		fprintf(stderr, "tcp-wake: --pings 2..%d, --gap-us 0..1000000\n", PINGS_MAX);
		return 2;
	}
	lat = calloc((size_t)pings, sizeof(*lat));
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (lat == NULL || ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) != 0 || listen(ls, 1) != 0)
		return die("listen");
	child = fork();
	if (child < 0)
		return die("fork");
	if (child == 0)
		sender(&a, pings, gap_us);
	s = accept(ls, NULL, NULL);
	ep = epoll_create1(0);
	if (s < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0)
		return die("accept");
	while (n < pings) {
		uint64_t t0 = now_ns(), t;
		struct epoll_event e;
		int r;

		do
			r = epoll_wait(ep, &e, 1, poll ? 0 : WAIT_MS);
		while ((r == 0 && poll && now_ns() - t0 < WAIT_MS * 1000000ull) ||
		       (r < 0 && errno == EINTR));
		if (r <= 0) {
			errno = r == 0 ? ETIMEDOUT : errno;
			return die("epoll_wait");
		}
		if (recv(s, &t, sizeof(t), MSG_WAITALL) != (ssize_t)sizeof(t))
			return die("recv");
		lat[n++] = (double)(now_ns() - t) / 1e3;
	}
	end_child();
	qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
	printf("tcp-wake: %ld pings, one every %ld us, receiver %s: median %.1f us, p90 %.1f, "
	       "max %.1f\n",
	       n, gap_us, poll ? "polls" : "sleeps in epoll_wait", lat[n / 2], lat[n * 9 / 10],
	       lat[n - 1]);
	free(lat);
	close(s);
	close(ep);
	close(ls);
	return 0;
}
