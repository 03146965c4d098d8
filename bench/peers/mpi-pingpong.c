/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi-pingpong.c -- the peer of rpipe-bench.c: Open MPI point-to-point
 * between 2 ranks. Ping-pong (MPI_Send/MPI_Recv) of 8 and 64 B, timed one
 * round trip at a time on rank 0: median and p99 of half the round trip;
 * and the 64 B message rate in windows of 64 (rank 0: 64 MPI_Isend +
 * MPI_Waitall; rank 1: 64 MPI_Irecv + MPI_Waitall), ended by a 1-byte
 * answer from rank 1. Prints "mpi lat SIZE median_us p99_us" and
 * "mpi rate 64 msgs_per_s". Checks every message's number.
 *
 *   mpirun -n 2 --mca btl tcp,self mpi-pingpong [ITERS] [WINDOWS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN 64

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void check(const uint8_t *b, uint64_t k, int rank)
{
	uint64_t got;

	memcpy(&got, b, sizeof(got));
	if (got != k) {
		fprintf(stderr, "rank %d: message %llu has number %llu\n", rank,
		        (unsigned long long)k, (unsigned long long)got);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

int main(int argc, char **argv)
{
	static const int lsizes[] = {8, 64};
	int iters = argc > 1 ? atoi(argv[1]) : 20000, windows = argc > 2 ? atoi(argv[2]) : 15625;
	int warm = 1000, rank, n;
	static uint8_t sbuf[WIN][64], rbuf[WIN][64];
	MPI_Request req[WIN];
	double *t = calloc((size_t)iters, sizeof(double)), t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi-pingpong: run with 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (int s = 0; s < 2; s++) {
		int sz = lsizes[s];

		for (int i = -warm; i < iters; i++) {
			uint64_t k = (uint64_t)(i + warm);

			t0 = MPI_Wtime();
			if (rank == 0) {
				memcpy(sbuf[0], &k, 8);
				MPI_Send(sbuf[0], sz, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
				MPI_Recv(rbuf[0], sz, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
				check(rbuf[0], k, rank);
				if (i >= 0)
					t[i] = (MPI_Wtime() - t0) * 1e6 / 2;
			} else {
				MPI_Recv(rbuf[0], sz, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
				check(rbuf[0], k, rank);
				MPI_Send(rbuf[0], sz, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
			}
		}
		if (rank == 0) {
			qsort(t, (size_t)iters, sizeof(double), cmp);
			printf("mpi lat %d %.3f %.3f\n", sz, t[iters / 2],
			       t[(size_t)iters * 99 / 100]);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int w = 0; w < windows; w++) {
		for (int j = 0; j < WIN; j++) {
			uint64_t k = (uint64_t)w * WIN + (uint64_t)j;

			if (rank == 0) {
				memcpy(sbuf[j], &k, 8);
				MPI_Isend(sbuf[j], 64, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[j]);
			} else {
				MPI_Irecv(rbuf[j], 64, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[j]);
			}
		}
		MPI_Waitall(WIN, req, MPI_STATUSES_IGNORE);
		if (rank == 1)
			for (int j = 0; j < WIN; j++)
				check(rbuf[j], (uint64_t)w * WIN + (uint64_t)j, rank);
	}
	if (rank == 0)
		MPI_Recv(rbuf[0], 1, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	else
		MPI_Send(sbuf[0], 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi rate 64 %.0f\n", (double)windows * WIN / (MPI_Wtime() - t0));
	free(t);
	MPI_Finalize();
	return 0;
}
