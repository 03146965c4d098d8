/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * spin-spread.c -- the spin policy's start (LOCO_SPREAD, liboco/spread.c):
 * every node joins one channel, and after the join its thread may use the
 * CPUs it could use before (the library moved it, it did not bind it).
 * Prints the CPU it runs on after the join and how many it may use;
 * spin-spread.sh runs it under the policies and checks the log lines that
 * say where each node was placed.
 */
#include <sched.h>
#include <stdio.h>

#include <loco/barrier.h>

#include "scenario.h"

int main(int argc, char **argv)
{
	cpu_set_t before, after;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	int cpu;

	sc_init("spin-spread", argc, argv, 60);
	m = sc_start();
	SC_ASSERT(sched_getaffinity(0, sizeof(before), &before) == 0);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "spread", sc_nodes(), &ch));
	SC_ASSERT_OK(loco_barrier_create(ch, "done", &b));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	cpu = sched_getcpu();
	SC_ASSERT(sched_getaffinity(0, sizeof(after), &after) == 0);
	if (!CPU_EQUAL(&before, &after))
		SC_FAIL("node %u: the join changed the thread's CPU mask (%d CPUs, was %d)",
		        loco_manager_node_id(m), CPU_COUNT(&after), CPU_COUNT(&before));
	printf("spin-spread: node %u: on CPU %d after the join, mask kept (%d CPUs)\n",
	       loco_manager_node_id(m), cpu, CPU_COUNT(&after));
	/* nobody leaves before every node is past its join */
	SC_ASSERT_OK(loco_barrier_wait(b, 20 * SC_NS));
	loco_barrier_destroy(b);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return 0;
}
