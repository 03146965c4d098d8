/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hello.c -- N nodes join channel "hello"; each writes its id into its
 * slot of every peer's shared region, waits on its ack key, waits until
 * every peer's id has arrived in its own copy, and checks each one.
 * Exits non-zero on any mismatch. Run: loco-run -n 4 ./hello, or
 * mpirun -n 4 ./hello, or srun --mpi=pmix -n 4 ./hello
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/shared_region.h>

#define MAX_NODES 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	uint32_t nodes, me, peers[MAX_NODES];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_shared_region_t *sr;
	loco_ack_key_t *ack;
	volatile uint64_t *slot;
	int ret, npeers, bad = 0;
	double deadline;

	ret = loco_init(NULL, &m);
	if (ret) {
		fprintf(stderr, "loco_init: %s\n", loco_strerror(ret));
		return 1;
	}
	me = loco_manager_node_id(m);
	/* LOCO_NODES from loco-run, or the job size from mpirun / srun (PMIx) */
	nodes = loco_manager_job_size(m) ? loco_manager_job_size(m) : 1;
	if ((ret = loco_channel_create(m, NULL, "hello", nodes, &ch)) ||
	    (ret = loco_shared_region_create(ch, "ids", MAX_NODES * 8,
	                                     LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &sr)) ||
	    (ret = loco_ack_key_create(m, &ack)) ||
	    (ret = loco_channel_join(ch, 20ll * 1000000000))) {
		fprintf(stderr, "setup: %s\n", loco_strerror(ret));
		return 1;
	}
	slot = loco_shared_region_ptr(sr);
	if (me >= MAX_NODES) {
		fprintf(stderr, "node id %u too large for this demo\n", me);
		return 1;
	}
	slot[me] = me;
	npeers = loco_channel_peers(ch, peers, MAX_NODES);
	for (int i = 0; i < npeers; i++) {
		ret = loco_shared_region_write(sr, peers[i], me * 8, 8, ack);
		if (ret) {
			fprintf(stderr, "write to node %u: %s\n", peers[i], loco_strerror(ret));
			return 1;
		}
	}
	ret = loco_ack_wait(ack, 10ll * 1000000000);
	if (ret) {
		fprintf(stderr, "ack wait: %s\n", loco_strerror(ret));
		return 1;
	}
	/* every peer writes its id into our copy: wait (bounded) for all of them */
	deadline = now_s() + 10;
	for (int i = 0; i < npeers; i++) {
		while (__atomic_load_n(&slot[peers[i]], __ATOMIC_ACQUIRE) != peers[i] &&
		       now_s() < deadline)
			usleep(100);
		if (slot[peers[i]] != peers[i]) {
			fprintf(stderr, "slot %u holds %llu, expected %u\n", peers[i],
			        (unsigned long long)slot[peers[i]], peers[i]);
			bad++;
		}
	}
	printf("node %u: %d peer(s), %s\n", me, npeers, bad ? "MISMATCH" : "all ids ok");
	/* wait for every peer to finish reading before leaving */
	sleep(1);
	loco_ack_key_destroy(ack);
	loco_shared_region_destroy(sr);
	loco_channel_destroy(ch);
	loco_fini(m);
	return bad || (uint32_t)npeers + 1 != nodes;
}
