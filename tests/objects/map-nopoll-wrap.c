/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-nopoll-wrap.c -- linked into a map test with
 * -Wl,--wrap=loco_poller_add: the map's poller (map_poll, which takes the
 * records of a key holder's inbound logs in the background) never takes
 * any. A replica then takes its records only where it must: before it
 * serves as an owner (map_absorb), before its own writes and copies, for
 * the census. What the test checks must hold without the poller's help.
 */
#include <loco/channel.h>

int map_poll(void *arg);
int __real_loco_poller_add(loco_manager_t *m, int (*fn)(void *arg), void *arg, int64_t period_ns,
                           loco_poller_t **out);
int __wrap_loco_poller_add(loco_manager_t *m, int (*fn)(void *arg), void *arg, int64_t period_ns,
                           loco_poller_t **out);

static int idle(void *arg)
{
	(void)arg;
	return LOCO_POLLER_IDLE;
}

int __wrap_loco_poller_add(loco_manager_t *m, int (*fn)(void *arg), void *arg, int64_t period_ns,
                           loco_poller_t **out)
{
	return __real_loco_poller_add(m, fn == map_poll ? idle : fn, arg, period_ns, out);
}
