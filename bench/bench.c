/* SPDX-License-Identifier: BSD-2-Clause */
/* bench.c -- what the benchmark programs share: see bench.h. */
#include <errno.h> /* program_invocation_short_name */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>

#include "bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

noreturn void bench_die(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, loco_strerror(err));
	exit(1);
}

int bench_poll(int (*poll)(void *arg), void (*idle)(void *arg), void *arg, unsigned sleep_us,
               int64_t timeout_ms)
{
	uint64_t deadline = 0;

	for (;;) {
		int ret = poll(arg);
		uint64_t now;

		if (ret != 0)
			return ret;
		now = bench_now_ns();
		if (deadline == 0)
			deadline = now + (uint64_t)timeout_ms * 1000000ull;
		else if (now > deadline)
			return 0;
		if (idle != NULL)
			idle(arg);
		else if (sleep_us > 0)
			usleep(sleep_us);
	}
}

/* mkdir -p @dir (modified in place, restored). Returns 0 or -errno. */
static int mkdir_parents(char *dir)
{
	for (char *p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		int rc = mkdir(dir, 0777) == 0 || errno == EEXIST ? 0 : -errno;

		*p = c;
		if (rc != 0)
			return rc;
		if (c == '\0')
			return 0;
	}
}

char *bench_result_path(char *buf, size_t len, const char *fmt, ...)
{
	char dir[PATH_MAX], name[256];
	const char *env = getenv("LOCO_BENCH_OUT");
	va_list ap;
	int n;

	if (env != NULL && env[0] != '\0') {
		n = snprintf(dir, sizeof(dir), "%s", env);
	} else {
		ssize_t got = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
		char *slash;

		if (got <= 0)
			bench_die("readlink /proc/self/exe", got < 0 ? -errno : -ENOENT);
		dir[got] = '\0';
		slash = strrchr(dir, '/');
		if (slash != NULL)
			*slash = '\0';
		n = (int)strlen(dir);
		if ((size_t)n + sizeof("/results") > sizeof(dir))
			bench_die("results directory", -ENAMETOOLONG);
		memcpy(dir + n, "/results", sizeof("/results"));
	}
	if (n < 0 || (size_t)n >= sizeof(dir))
		bench_die("results directory", -ENAMETOOLONG);
	va_start(ap, fmt);
	n = vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(name))
		bench_die("result file name", -ENAMETOOLONG);
	n = snprintf(buf, len, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= len)
		bench_die("result path", -ENAMETOOLONG);
	n = mkdir_parents(dir);
	if (n != 0) {
		fprintf(stderr, "%s: cannot make %s\n", program_invocation_short_name, dir);
		bench_die("mkdir", n);
	}
	return buf;
}

int bench_rpc_echo(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg;
	if (msg->len <= cap) {
		memcpy(ret, msg->data, msg->len);
		*rl = msg->len;
	}
	return 0;
}

int bench_rpc_stop(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)msg, (void)ret, (void)cap, (void)rl;
	__atomic_store_n((int *)arg, 1, __ATOMIC_RELAXED);
	return 0;
}

void bench_rpc_serve(loco_rpc_ep_t *const *ep, int n, loco_manager_t *m, const int *fin)
{
	loco_waiter_t w;

	loco_waiter_init(&w, m);
	while (!__atomic_load_n(fin, __ATOMIC_RELAXED)) {
		int got = 0;

		for (int e = 0; e < n; e++) {
			int r = loco_rpc_progress(ep[e], 256);

			if (r < 0)
				bench_die("progress", r);
			got += r;
		}
		if (got)
			loco_waiter_reset(&w);
		else
			loco_waiter_pause(&w);
	}
}
