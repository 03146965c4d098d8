/* SPDX-License-Identifier: BSD-2-Clause */
/* bench.c -- what the benchmark programs share: see bench.h. */
#include <errno.h> /* program_invocation_short_name */
#include <stdio.h>
#include <stdlib.h>
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
