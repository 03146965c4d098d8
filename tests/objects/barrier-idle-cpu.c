/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * barrier-idle-cpu.c -- a node waiting in a barrier that the others do
 * not reach yet does not burn a core under the default wait policy
 * (LOCO_WAIT=sleep, issue 11 "Waiting").
 *
 * loco-run -n 3. The nodes pass one barrier round (warm-up), then node 1
 * enters the next round at once while nodes 2 and 3 sleep IDLE_MS first.
 * Node 1 measures its process's CPU time (user + sys, getrusage: every
 * thread, the progress and NIC threads included) over its wait and
 * asserts it is below BOUND_PCT of one core. The bound is loose on
 * purpose: the machine is shared and a wake-up may be charged late, but
 * a spinning waiter uses ~100 % (LOCO_WAIT=spin makes this test fail).
 * The figures are printed; the target of the policy is <= 5 %. Under
 * emulation (the verbs VM, LOCO_TEST_SCALE > 1) every wake-up costs ~10x:
 * the waiter used 18.6 % there (2-4 % natively), so the bound is
 * BOUND_EMU_PCT, which a spinner still exceeds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <loco/barrier.h>

#include "scenario.h"

#define IDLE_MS       2000
#define BOUND_PCT     30.0
#define BOUND_EMU_PCT 60.0

/* cpu_ns -- this process's user and system CPU time so far. */
static void cpu_ns(int64_t *user, int64_t *sys)
{
	struct rusage ru;

	SC_ASSERT(getrusage(RUSAGE_SELF, &ru) == 0);
	*user = ru.ru_utime.tv_sec * SC_NS + ru.ru_utime.tv_usec * 1000ll;
	*sys = ru.ru_stime.tv_sec * SC_NS + ru.ru_stime.tv_usec * 1000ll;
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	int64_t u0, s0, u1, s1, t0, t1;
	double pct;
	const char *policy = getenv("LOCO_WAIT");
	double bound = sc_scaled(1000) == 1000 ? BOUND_PCT : BOUND_EMU_PCT;

	sc_init("barrier-idle-cpu", argc, argv, 60);
	if (sc_nodes() < 2)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	SC_ASSERT_OK(loco_channel_create(m, NULL, "idle-cpu", sc_nodes(), &ch));
	SC_ASSERT_OK(loco_barrier_create(ch, "B", &b));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_barrier_wait(b, 20 * SC_NS)); /* warm-up: everyone paired and passed */

	if (loco_manager_node_id(m) != 1) {
		sc_sleep_ms(IDLE_MS);
		SC_ASSERT_OK(loco_barrier_wait(b, 20 * SC_NS));
	} else {
		t0 = sc_now_ns();
		cpu_ns(&u0, &s0);
		SC_ASSERT_OK(loco_barrier_wait(b, 20 * SC_NS));
		cpu_ns(&u1, &s1);
		t1 = sc_now_ns();
		pct = 100.0 * (double)(u1 - u0 + s1 - s0) / (double)(t1 - t0);
		printf(
		    "barrier-idle-cpu: policy %s: waited %.0f ms, cpu user %.1f ms + sys %.1f ms = "
		    "%.1f %% of a core (bound %.0f %%)\n",
		    policy != NULL && *policy != '\0' ? policy : "sleep (default)",
		    (double)(t1 - t0) / 1e6, (double)(u1 - u0) / 1e6, (double)(s1 - s0) / 1e6, pct,
		    bound);
		SC_ASSERT(t1 - t0 >=
		          (IDLE_MS / 2) * 1000000ll); /* it really waited for the others */
		if (pct >= bound)
			SC_FAIL("an idle barrier wait used %.1f %% of a core (bound %.0f %%)", pct,
			        bound);
	}
	SC_ASSERT_OK(loco_barrier_wait(b, 20 * SC_NS)); /* nobody leaves before node 1 measured */
	loco_barrier_destroy(b);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
