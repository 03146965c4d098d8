/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * halfway.c -- every node holds a number; each round, every number moves
 * halfway to the mean of the present nodes' numbers (one reduce call),
 * and the node with the lowest id among them increments an epoch counter
 * under a lock, which every node checks never goes back.
 *
 *   loco-run -n 4 ./halfway [ROUNDS]          (or: mpirun --oversubscribe -n 4 ./halfway)
 *
 * Nodes may join a running job and die (any but node 1, which hosts the
 * lock and the counter): the others go on. With the launcher:
 *
 *   loco-run -n 4 --keep-going --control /tmp/ctl ./halfway 40000 &
 *   loco-run --ctl /tmp/ctl add; loco-run --ctl /tmp/ctl kill 3 KILL
 *
 * (docs/examples/halfway-join-kill.sh). A node cut off from the majority, or whose round timed
 * out, tries the round again. Exits 0 when this node's number ended
 * within 1e-6 of the mean.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <loco.h>
#include <loco/atomic_var.h>
#include <loco/lock.h>
#include <loco/reduce.h>

#define SEC 1000000000ll

static int fail(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, loco_strerror(err));
	return 1;
}

/* bump -- under the lock: the epoch goes up by exactly one. */
static int bump(loco_lock_t *lk, loco_atomic_var_t *epoch)
{
	uint64_t e, again;
	int ret = loco_lock_acquire(lk, 10 * SEC);

	if (ret == 0 && (ret = loco_atomic_var_read(epoch, &e, SEC)) == 0 &&
	    (ret = loco_atomic_var_write(epoch, e + 1, SEC)) == 0 &&
	    (ret = loco_atomic_var_read(epoch, &again, SEC)) == 0 && again != e + 1) {
		fprintf(stderr, "epoch moved under the lock: %llu -> %llu\n", (unsigned long long)e,
		        (unsigned long long)again);
		ret = 1;
	}
	loco_lock_release(lk);
	return ret;
}

int main(int argc, char **argv)
{
	uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 100, seen = 0, e,
	         read_errors = 0;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_reduce_t *sum;
	loco_lock_t *lk;
	loco_atomic_var_t *epoch;
	struct loco_reduce_info info = {0};
	double x, total, mean = 0, count = 0;
	int ret;

	if ((ret = loco_init(NULL, &m)))
		return fail("loco_init", ret);
	/* the nodes the launcher started: loco-run -n or mpirun -n (an added node: the live ones) */
	if ((ret = loco_channel_create(m, NULL, "halfway",
	                               loco_manager_job_size(m) ? loco_manager_job_size(m) : 1,
	                               &ch)) ||
	    (ret = loco_reduce_create(ch, "x", sizeof(double), LOCO_REDUCE_SUM_DOUBLE, NULL, NULL,
	                              &sum)) ||
	    (ret = loco_lock_create(ch, "epoch-lock", 1, &lk)) ||
	    (ret = loco_atomic_var_create(ch, "epoch", 1, &epoch)) ||
	    (ret = loco_channel_join(ch, 20 * SEC)))
		return fail("setup", ret);
	x = 10.0 * loco_manager_node_id(m);
	for (;;) {
		uint32_t lowest = 1;

		ret = loco_reduce_run(sum, &x, &total, &info, 10 * SEC);
		if (ret == -LOCO_EPARTITION || ret == -ETIMEDOUT)
			continue; /* cut off for now, or a peer is slow: the round goes on */
		if (ret)
			return fail("reduce", ret);
		if (info.round > rounds)
			break; /* the extra round: nobody uses the lock or the counter any more */
		count = info.count;
		mean = total / count;
		x += (mean - x) / 2;
		while (!loco_reduce_contributed(&info, lowest))
			lowest++;
		if (lowest == loco_manager_node_id(m) && (ret = bump(lk, epoch)) == 1)
			return 1; /* other errors: the next round's lowest node bumps it */
		if ((ret = loco_atomic_var_read(epoch, &e, SEC)) != 0) {
			if (read_errors++ == 0) /* the host unreachable for now, or gone */
				fprintf(stderr, "round %llu: epoch read: %s\n",
				        (unsigned long long)info.round, loco_strerror(ret));
			continue;
		}
		if (e < seen) {
			fprintf(stderr, "epoch went back: %llu -> %llu\n", (unsigned long long)seen,
			        (unsigned long long)e);
			return 1;
		}
		seen = e;
	}
	printf(
	    "node %u: round %llu, %.0f nodes, x %.9f, mean %.9f, epoch %llu (%llu reads failed)\n",
	    loco_manager_node_id(m), (unsigned long long)rounds, count, x, mean,
	    (unsigned long long)seen, (unsigned long long)read_errors);
	loco_atomic_var_destroy(epoch);
	loco_lock_destroy(lk);
	loco_reduce_destroy(sum);
	loco_channel_destroy(ch);
	loco_fini(m);
	return fabs(x - mean) > 1e-6;
}
