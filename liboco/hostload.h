/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hostload.h -- is this host oversubscribed: more threads runnable than
 * this process may use CPUs. Read from /proc/loadavg's runnable count at
 * most every LC_HOSTLOAD_LOOK_NS by the one thread that owns the struct
 * (the manager's progress thread for the wait policy, the tcp NIC thread
 * for its spin); anyone may read busy.
 *
 * Why: a spin that yields pays where a CPU would otherwise halt (the
 * thread waited for is then woken without a halted CPU's wake-up), and
 * costs the threads beside it where every CPU is taken. The spinners
 * (adaptive waits, the tcp NIC thread after work) ask this first.
 *
 * Thread safety: lc_hostload_look() by one thread at a time; busy is
 * atomic.
 */
#ifndef LOCO_LC_HOSTLOAD_H
#define LOCO_LC_HOSTLOAD_H

#include <stdint.h>

#define LC_HOSTLOAD_LOOK_NS 10000000ll /* how often the owner looks at the load */

struct lc_hostload {
	int busy;           /* atomic: more runnable threads than ncpu */
	int ncpu;           /* CPUs this process may use */
	int fd;             /* /proc/loadavg, or -1 (never busy) */
	uint64_t looked_ns; /* the owner's last look */
};

/* lc_hostload_init -- open /proc/loadavg (none: never busy) and count our CPUs. */
void lc_hostload_init(struct lc_hostload *h);

/* lc_hostload_fini -- close what lc_hostload_init() opened. */
void lc_hostload_fini(struct lc_hostload *h);

/*
 * lc_hostload_look -- (the owner) at @now, if LC_HOSTLOAD_LOOK_NS passed
 * since the last look, read the runnable count and set busy. Returns busy.
 */
int lc_hostload_look(struct lc_hostload *h, uint64_t now);

static inline int lc_hostload_busy(const struct lc_hostload *h)
{
	return __atomic_load_n(&h->busy, __ATOMIC_RELAXED);
}

#endif
