/* SPDX-License-Identifier: BSD-2-Clause */
/* hostload.c -- is this host oversubscribed (hostload.h). */
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostload.h"

void lc_hostload_init(struct lc_hostload *h)
{
	cpu_set_t set;

	memset(h, 0, sizeof(*h));
	h->ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	if (h->ncpu < 1)
		h->ncpu = 1;
	h->fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
}

void lc_hostload_fini(struct lc_hostload *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

int lc_hostload_look(struct lc_hostload *h, uint64_t now)
{
	char b[128], *p = b;
	unsigned long running;
	ssize_t n;

	if (h->fd < 0 || now - h->looked_ns < (uint64_t)LC_HOSTLOAD_LOOK_NS)
		return lc_hostload_busy(h);
	h->looked_ns = now;
	/* "0.52 0.58 0.59 3/517 12345": the fourth field counts the runnable threads */
	n = pread(h->fd, b, sizeof(b) - 1, 0);
	if (n <= 0)
		return lc_hostload_busy(h);
	b[n] = '\0';
	for (int field = 0; field < 3 && p != NULL; field++)
		if ((p = strchr(p, ' ')) != NULL)
			p++;
	if (p == NULL)
		return lc_hostload_busy(h);
	running = strtoul(p, NULL, 10);
	/* this thread, reading, is one of them */
	__atomic_store_n(&h->busy, running > (unsigned long)h->ncpu + 1, __ATOMIC_RELAXED);
	return lc_hostload_busy(h);
}
