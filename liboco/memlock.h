/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * memlock.h -- the one verdict on RLIMIT_MEMLOCK, for the manager's
 * warning at start (mem.c: only when a verbs device will be used) and for
 * loco-info's "ok" or "LOW". Registering memory with an RDMA device pins
 * it and counts against the soft limit, unless the process has
 * CAP_IPC_LOCK (root has it); the software fabrics (tcp, shm) pin nothing.
 */
#ifndef LOCO_LC_MEMLOCK_H
#define LOCO_LC_MEMLOCK_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

/* below this soft limit, registering an application's regions may fail */
#define LC_MEMLOCK_LOW (64ull << 20)

/* lc_memlock_low -- whether soft limit @rl is low for a process of effective uid @euid. */
static inline bool lc_memlock_low(const struct rlimit *rl, uid_t euid)
{
	return rl->rlim_cur != RLIM_INFINITY && rl->rlim_cur < LC_MEMLOCK_LOW && euid != 0;
}

#endif /* LOCO_LC_MEMLOCK_H */
