/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * spread.c -- the spin policy's placement (wait.h): the nodes of one host
 * that spin start on different CPUs when they join, and are left free to
 * move.
 *
 * A spinning node never sleeps, so the scheduler places it once, at the
 * last wakeup before it starts to spin, and rarely moves it after (a
 * thread that ran a moment ago is "cache hot" to the load balancer). Where
 * it lands is where it last slept: at random. With 4 spinning nodes on 2
 * cores, 3 share one core in half of the runs, and every round of a
 * collective then needs 3 switches there instead of 2 (allreduce 8 B on
 * shm: 11 against 7.5 us on the machine where this was measured).
 *
 * And the start does not last: a thread that sleeps (the adaptive policy
 * sleeps past its window) is woken on its waker's CPU when that one is
 * free enough, so two nodes that answer each other end up on one CPU,
 * each spin yielding to the other, and every round trip costs two
 * context switches (shm, rpc call_return and a raw WRITE round trip:
 * 10-11.5 us in 3 runs of 5, 2.4-3.5 in the others, with the pair seen
 * sharing one CPU). So the spins bring the placed thread back
 * (lc_wait_set_home(), wait.c): where it runs is one sched_getcpu() away.
 * Where each node got a CPU of its own and none is spare (as many nodes
 * as CPUs), the node's other spinning threads (a map or rpc server
 * thread) follow it there, as guests: left to the scheduler, the owner's
 * server thread and the caller of a map PUT shared one CPU while the
 * other idled (shm, 2 nodes on 2 CPUs: 9-52 us against 2.3-2.5).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "manager.h"
#include "member.h"
#include "wait.h"

int lc_spread_cpu(const cpu_set_t *allowed, uint32_t index)
{
	int n = CPU_COUNT(allowed), k;

	if (n < 1)
		return -1;
	k = (int)(index % (uint32_t)n);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, allowed) && k-- == 0)
			return cpu;
	return -1;
}

void lc_spread(loco_manager_t *m)
{
	uint32_t below = 0, local = 1;
	struct fab_addr self, peer;
	cpu_set_t old;
	int cpu;

	if ((lc_wait_policy(&m->wait) != LOCO_WAIT_SPIN &&
	     lc_wait_policy(&m->wait) != LOCO_WAIT_ADAPTIVE) ||
	    !m->cfg.spread)
		return;
	pthread_mutex_lock(&m->lock);
	if (m->spread_done) {
		pthread_mutex_unlock(&m->lock);
		return;
	}
	m->spread_done = 1;
	/* this host's nodes: the members whose control address has our IP */
	if (fab_addr_parse(m->ctrl_addr, 0, &self) == 0) {
		for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL;
		     mb = mb->next) {
			if (mb->up && fab_addr_parse(mb->info.ctrl_addr, 0, &peer) == 0 &&
			    fab_same_host(&self, &peer)) {
				local++;
				below += mb->info.node < m->node_id;
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
	if (local < 2 || sched_getaffinity(0, sizeof(old), &old) != 0 || CPU_COUNT(&old) < 2)
		return; /* alone here, or nowhere to go */
	cpu = lc_spread_cpu(&old, below);
	if (cpu < 0)
		return;
	/* a start, not a binding: the scheduler may move it, and its spins bring it back */
	if (lc_wait_move(cpu, &old) != 0)
		return;
	/*
	 * guests: one CPU per node, none spare, so a node's other spinners stay
	 * on its CPU (with more nodes than CPUs the scheduler spreads them
	 * better: the KV demo's updates took 53-55 us against 42-49)
	 */
	lc_wait_set_home(&m->wait, cpu, local <= (uint32_t)CPU_COUNT(&old),
	                 local == (uint32_t)CPU_COUNT(&old));
	lc_log_info("wait: spin: node %u (index %u of the %u nodes on this host) starts on CPU %d "
	            "(of the %d it may use)",
	            (unsigned)m->node_id, (unsigned)below, (unsigned)local, cpu, CPU_COUNT(&old));
}
