/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi-allreduce.c -- the peer of loco-reduce.c: MPI_Allreduce (sum of
 * uint64) of 8 bytes and 4 KiB, timed one call at a time on rank 0.
 * Prints one line per size: "mpi SIZE median_us p99_us iters". Checks
 * every result. Run: mpirun -n 4 [--mca btl tcp,self] mpi-allreduce [ITERS]
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

int main(int argc, char **argv)
{
	static const int sizes[] = {8, 4096};
	int iters = argc > 1 ? atoi(argv[1]) : 5000, warm = iters / 10, rank, n;
	uint64_t in[512], out[512];
	double *t = calloc((size_t)iters, sizeof(double));

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	for (int s = 0; s < 2; s++) {
		int cnt = sizes[s] / 8;

		for (int i = -warm; i < iters; i++) {
			double t0;

			for (int k = 0; k < cnt; k++)
				in[k] = (uint64_t)(rank + 1) * 1000 + (uint64_t)(i + warm) + k;
			t0 = MPI_Wtime();
			MPI_Allreduce(in, out, cnt, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
			if (i >= 0)
				t[i] = (MPI_Wtime() - t0) * 1e6;
			for (int k = 0; k < cnt; k++) {
				uint64_t want = (uint64_t)n * (n + 1) / 2 * 1000 +
				                (uint64_t)n * ((uint64_t)(i + warm) + k);

				if (out[k] != want) {
					fprintf(stderr, "rank %d: wrong sum at %d\n", rank, i);
					MPI_Abort(MPI_COMM_WORLD, 1);
				}
			}
		}
		if (rank == 0) {
			qsort(t, (size_t)iters, sizeof(double), cmp);
			printf("mpi %d %.2f %.2f %d\n", sizes[s], t[iters / 2],
			       t[(size_t)iters * 99 / 100], iters);
		}
	}
	free(t);
	MPI_Finalize();
	return 0;
}
