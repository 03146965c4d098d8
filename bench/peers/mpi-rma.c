/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi-rma.c -- the peer of rpc-bench.c's one-sided figures: Open MPI RMA
 * between 2 ranks in a passive-target epoch (MPI_Win_lock_all). Rank 0
 * times, one at a time, 8 B MPI_Put, MPI_Get, MPI_Fetch_and_op (sum) and
 * MPI_Compare_and_swap on rank 1's window, each followed by
 * MPI_Win_flush(1) (its completion at the target: what loco_ack_wait()
 * gives); then MPI_Barrier on both ranks. Median and p99 of each;
 * prints "mpi op NAME median_us p99_us", "mpi barrier-mean mean_us" (as
 * wait-cpu's round) and "mpi barrier median_us p99_us". Checks the FAA and
 * CAS results.
 *
 *   mpirun -n 2 --mca btl tcp,self mpi-rma [ITERS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void report(const char *what, double *t, int n)
{
	qsort(t, (size_t)n, sizeof(double), cmp);
	printf("mpi %s %.3f %.3f\n", what, t[n / 2], t[(size_t)n * 99 / 100]);
}

int main(int argc, char **argv)
{
	static const char *names[] = {"op put", "op get", "op faa", "op cas"};
	int iters = argc > 1 ? atoi(argv[1]) : 20000, warm = 1000, rank;
	double *t = calloc((size_t)iters, sizeof(double));
	uint64_t *base, v = 0, r = 0, one = 1;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (t == NULL || iters < 10)
		MPI_Abort(MPI_COMM_WORLD, 2);
	MPI_Win_allocate(64, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i < 8; i++)
		base[i] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, win);
	if (rank == 0) {
		for (int op = 0; op < 4; op++) {
			for (int i = -warm; i < iters; i++) {
				double t0 = MPI_Wtime();

				v = (uint64_t)i;
				switch (op) {
				case 0:
					MPI_Put(&v, 1, MPI_UINT64_T, 1, 0, 1, MPI_UINT64_T, win);
					break;
				case 1:
					MPI_Get(&r, 1, MPI_UINT64_T, 1, 0, 1, MPI_UINT64_T, win);
					break;
				case 2:
					MPI_Fetch_and_op(&one, &r, MPI_UINT64_T, 1, 1, MPI_SUM,
					                 win);
					break;
				default: {
					uint64_t cmpv = (uint64_t)(i + warm), swp = cmpv + 1;

					MPI_Compare_and_swap(&swp, &cmpv, &r, MPI_UINT64_T, 1, 2,
					                     win);
					break;
				}
				}
				MPI_Win_flush(1, win);
				if (i >= 0)
					t[i] = (MPI_Wtime() - t0) * 1e6;
				if ((op == 2 || op == 3) && r != (uint64_t)(i + warm)) {
					fprintf(stderr, "mpi-rma: %s %d gave %llu\n", names[op], i,
					        (unsigned long long)r);
					MPI_Abort(MPI_COMM_WORLD, 1);
				}
			}
			report(names[op], t, iters);
		}
	}
	MPI_Win_unlock_all(win);
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = -warm; i < iters; i++) {
		double t0 = MPI_Wtime();

		MPI_Barrier(MPI_COMM_WORLD);
		if (i >= 0)
			t[i] = (MPI_Wtime() - t0) * 1e6;
	}
	if (rank == 0) {
		double sum = 0;

		for (int i = 0; i < iters; i++)
			sum += t[i];
		printf("mpi barrier-mean %.3f\n",
		       sum / iters); /* as wait-cpu's round: wall / rounds */
		report("barrier", t, iters);
	}
	MPI_Win_free(&win);
	MPI_Finalize();
	free(t);
	return 0;
}
