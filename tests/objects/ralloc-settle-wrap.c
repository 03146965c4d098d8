/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc-settle-wrap.c -- linked into ralloc-exhaust as the test
 * ralloc-settle-race (with -Wl,--wrap=loco_ack_wait, against the static
 * library, so that the objects' calls come here): a test of a key
 * (timeout 0) that finds it busy returns only after the progress thread
 * reaped the key's last completion (bounded: 1 s). That holds open the
 * window in which ralloc's settle loop once read the count after the
 * test, saw 0, and took the busy key's -ETIMEDOUT for the operations'
 * result (refills failed "at once" with -ETIMEDOUT or -ECONNRESET, most
 * often on shm). What the caller gets is what the test said.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <loco.h>

int __real_loco_ack_wait(loco_ack_key_t *key, int64_t timeout_ns);
int __wrap_loco_ack_wait(loco_ack_key_t *key, int64_t timeout_ns);

static unsigned long widened;

int __wrap_loco_ack_wait(loco_ack_key_t *key, int64_t timeout_ns)
{
	int ret = __real_loco_ack_wait(key, timeout_ns);
	const struct timespec ts = {0, 50000};

	if (timeout_ns != 0 || ret != -ETIMEDOUT || loco_ack_outstanding(key) == 0)
		return ret;
	for (int i = 0; i < 20000 && loco_ack_outstanding(key) > 0; i++)
		nanosleep(&ts, NULL);
	__atomic_add_fetch(&widened, 1, __ATOMIC_RELAXED);
	return ret;
}

/* the figure: how many busy tests were held open (0 would mean the race was never staged) */
__attribute__((destructor)) static void report(void)
{
	printf("ralloc-settle-race: %lu busy key tests held until the key was idle\n",
	       __atomic_load_n(&widened, __ATOMIC_RELAXED));
}
