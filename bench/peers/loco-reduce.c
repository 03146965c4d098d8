/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-reduce.c -- loco_reduce_run (sum of uint64) of 8 bytes and 4 KiB,
 * timed one call at a time on node 1, as mpi-allreduce.c times
 * MPI_Allreduce. Prints one line per size: "loco SIZE median_us p99_us
 * iters". Checks every result and that every round had every node.
 * Run: loco-run -n 4 loco-reduce [ITERS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <loco.h>
#include <loco/reduce.h>

#include "../bench.h"

int main(int argc, char **argv)
{
	static const int sizes[] = {8, 4096};
	int iters = argc > 1 ? atoi(argv[1]) : 5000, warm = iters / 10, ret;
	const char *env = getenv("LOCO_NODES");
	uint64_t n = env ? strtoull(env, NULL, 10) : 1, in[512], out[512];
	double *t = calloc((size_t)iters, sizeof(double));
	loco_reduce_t *r[2];
	loco_manager_t *m;
	loco_channel_t *ch;
	uint32_t me;

	if ((ret = loco_init(NULL, &m)) || (ret = loco_channel_create(m, NULL, "bench", n, &ch)))
		bench_die("setup", ret);
	for (int s = 0; s < 2; s++)
		if ((ret = loco_reduce_create(ch, s ? "r4k" : "r8", (size_t)sizes[s],
		                              LOCO_REDUCE_SUM_U64, NULL, NULL, &r[s])))
			bench_die("loco_reduce_create", ret);
	if ((ret = loco_channel_join(ch, 20ll * 1000000000)))
		bench_die("loco_channel_join", ret);
	me = loco_manager_node_id(m);
	for (int s = 0; s < 2; s++) {
		int cnt = sizes[s] / 8;

		for (int i = -warm; i < iters; i++) {
			struct loco_reduce_info info;
			uint64_t t0, rd = loco_reduce_round(r[s]) + 1; /* every node starts at 1 */

			for (int k = 0; k < cnt; k++)
				in[k] = (uint64_t)me * 1000 + rd + (uint64_t)k;
			t0 = bench_now_ns();
			ret = loco_reduce_run(r[s], in, out, &info, 10ll * 1000000000);
			if (ret)
				bench_die("loco_reduce_run", ret);
			if (i >= 0)
				t[i] = (double)(bench_now_ns() - t0) / 1000.0;
			for (int k = 0; k < cnt; k++)
				if (info.count != n || info.round != rd ||
				    out[k] != n * (n + 1) / 2 * 1000 + n * (rd + (uint64_t)k)) {
					fprintf(stderr, "node %u: wrong result in round %llu\n", me,
					        (unsigned long long)info.round);
					return 1;
				}
		}
		if (me == 1) {
			qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
			printf("loco %d %.2f %.2f %d\n", sizes[s], t[iters / 2],
			       t[(size_t)iters * 99 / 100], iters);
		}
	}
	/* one more round of each: no node leaves while another still needs its row */
	for (int s = 0; s < 2; s++)
		loco_reduce_run(r[s], in, out, NULL, 10ll * 1000000000);
	for (int s = 0; s < 2; s++)
		loco_reduce_destroy(r[s]);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(t);
	return 0;
}
