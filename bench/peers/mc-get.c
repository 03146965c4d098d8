/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mc-get.c -- the peer of fabric-lat's tcp READ: memcached's GET round
 * trip from one client thread on the same loopback. It starts memcached
 * (one server thread, -t 1, on a free port of 127.0.0.1), sets one key
 * to a 100 B value, then times ITERS gets of it one at a time with
 * libmemcached (binary protocol, TCP_NODELAY: what kv-ycsb uses), checks
 * every value, and prints "memcached get median_us p99_us". The server
 * is killed and reaped by PID at the end and on any error.
 *
 *   mc-get [ITERS] [MEMCACHED]
 */
#include <errno.h>
#include <libmemcached/memcached.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VALUE_LEN 100
#define WARMUP    1000
#define START_MS  5000 /* memcached must answer within this */

static pid_t server = -1;

static void stop_server(void)
{
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
		server = -1;
	}
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* free_port -- a port of 127.0.0.1 nobody listens on now (bind to 0, read, close). */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "mc-get: %s: %s\n", what, why);
	stop_server();
	exit(1);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	const char *bin = argc > 2 ? argv[2] : "memcached";
	char port_s[16], value[VALUE_LEN], key[] = "loco-mc-get";
	memcached_return_t rc = MEMCACHED_FAILURE;
	memcached_st *mc;
	double *t;
	int port;

	if (iters < 10 || iters > 100000000)
		die("ITERS", "from 10 to 10^8");
	t = calloc((size_t)iters, sizeof(*t));
	port = free_port();
	if (t == NULL || port < 0)
		die("setup", strerror(errno));
	snprintf(port_s, sizeof(port_s), "%d", port);
	server = fork();
	if (server < 0)
		die("fork", strerror(errno));
	if (server == 0) {
		execlp(bin, bin, "-l", "127.0.0.1", "-p", port_s, "-U", "0", "-t", "1", "-u",
		       "root", (char *)NULL);
		fprintf(stderr, "mc-get: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	mc = memcached_create(NULL);
	if (mc == NULL)
		die("memcached_create", "out of memory");
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
	if (memcached_server_add(mc, "127.0.0.1", (in_port_t)port) != MEMCACHED_SUCCESS)
		die("memcached_server_add", memcached_last_error_message(mc));
	for (int i = 0; i < VALUE_LEN; i++)
		value[i] = (char)('a' + i % 26);
	/* the server needs a moment to listen: bounded retries */
	for (int ms = 0; ms < START_MS; ms += 10) {
		rc = memcached_set(mc, key, sizeof(key) - 1, value, VALUE_LEN, 0, 0);
		if (rc == MEMCACHED_SUCCESS || waitpid(server, NULL, WNOHANG) == server)
			break;
		usleep(10000);
	}
	if (rc != MEMCACHED_SUCCESS)
		die("set", memcached_last_error_message(mc));
	for (long i = -WARMUP; i < iters; i++) {
		size_t len = 0;
		uint32_t flags = 0;
		double t0 = now_us();
		char *v = memcached_get(mc, key, sizeof(key) - 1, &len, &flags, &rc);
		double dt = now_us() - t0;

		if (v == NULL || len != VALUE_LEN || memcmp(v, value, VALUE_LEN) != 0)
			die("get", v == NULL ? memcached_strerror(mc, rc) : "wrong value");
		free(v);
		if (i >= 0)
			t[i] = dt;
	}
	memcached_free(mc);
	stop_server();
	qsort(t, (size_t)iters, sizeof(*t), cmp);
	printf("memcached get %.3f %.3f\n", t[iters / 2], t[(size_t)iters * 99 / 100]);
	free(t);
	return 0;
}
