/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * clock.h -- the monotonic clock and the spin hint, for the core and the
 * providers alike (a leaf header: it includes nothing of liboco).
 */
#ifndef LOCO_LC_CLOCK_H
#define LOCO_LC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* lc_now_ns -- CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t lc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * lc_coarse_ns -- CLOCK_MONOTONIC_COARSE in nanoseconds: a few times
 * cheaper than lc_now_ns(), and at most a clock tick (1 to 10 ms) behind
 * it. For bounds far above a tick, checked on a hot path: a bound that
 * compares lc_coarse_ns() with an lc_now_ns() stamp is only met later.
 */
static inline uint64_t lc_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* lc_cpu_relax -- a spin-wait hint to the CPU. */
static inline void lc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif /* LOCO_LC_CLOCK_H */
