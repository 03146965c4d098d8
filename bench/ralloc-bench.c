/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc-bench.c -- what loco_ralloc_alloc/free cost: the fast path (a
 * block from this node's slices: no round trip), a stream of allocations
 * that refills every batch (the slow path amortized), and the slow path
 * alone (every allocation claims a slice: one READ of the table window
 * and one CAS), beside a raw loco_cas + loco_ack_wait round trip to the
 * same host in the same run.
 *
 *   loco-run -n 2 build/bench/ralloc-bench [--iters N] [--json FILE]
 *
 * Node 2 hosts the heaps and only serves (one-sided); node 1 measures.
 * Prints a table and writes JSON (default RESULTS/ralloc-<provider>.json;
 * RESULTS is $LOCO_BENCH_OUT, else results/ beside the program).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/ralloc.h>

#include "bench.h"

#define HOST 2
#define SEC  1000000000ll
#define TMO  (10 * SEC)

struct row {
	const char *what;
	double median_ns, ops_per_s;
	long n;
};

static double median(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n ? v[n / 2] : 0;
}

int main(int argc, char **argv)
{
	loco_ralloc_cfg_t small = {.heap_len = 64u << 20, .numa_node = -1};
	loco_ralloc_cfg_t one = {.heap_len = 64u << 20, .batch = 1, .keep = 1, .numa_node = -1};
	const char *json = NULL, *fab = getenv("LOCO_FABRIC");
	long iters = 100000, nslow;
	struct row rows[4];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_ralloc_t *ra, *ra1;
	loco_barrier_t *bar;
	loco_object_t *obj;
	loco_region_t *res;
	loco_ack_key_t *ack;
	loco_rptr_t *blk;
	loco_ralloc_stats_t st0, st;
	loco_rref_t rr;
	double *lat, t0;
	char path[4096];
	FILE *f;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			iters = atol(argv[++i]);
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
	}
	nslow = (long)(one.heap_len / LOCO_RALLOC_SLICE_DEFAULT);
	if ((ret = loco_init(NULL, &m)) ||
	    (ret = loco_channel_create(m, NULL, "ra-bench", 2, &ch)) ||
	    (ret = loco_ralloc_create(ch, "small", &small, &ra)) ||
	    (ret = loco_ralloc_create(ch, "one", &one, &ra1)) ||
	    (ret = loco_barrier_create(ch, "done", &bar)) ||
	    (ret = loco_object_create(ch, "raw", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "w", 64, LOCO_ACCESS_ATOMIC, &res)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_channel_join(ch, 20 * SEC)))
		bench_die("setup", ret);
	lat = malloc((size_t)(iters > nslow ? iters : nslow) * sizeof(*lat));
	blk = malloc((size_t)(iters > nslow ? iters : nslow) * sizeof(*blk));
	if (lat == NULL || blk == NULL)
		bench_die("malloc", -12);
	if (loco_manager_node_id(m) == HOST)
		goto done;

	/* the floor: one remote CAS and its ack */
	if ((ret = loco_region_remote(res, HOST, &rr)))
		bench_die("region_remote", ret);
	for (long i = 0; i < nslow; i++) {
		uint64_t t = bench_now_ns();

		if ((ret = loco_cas(res, 0, &rr, 8, 0, 0, ack)) || (ret = loco_ack_wait(ack, TMO)))
			bench_die("cas", ret);
		lat[i] = (double)(bench_now_ns() - t);
	}
	rows[0] = (struct row){"raw CAS + ack wait", median(lat, nslow), 0, nslow};

	/* fast path: alloc + free of 64 B, served by one slice */
	if ((ret = loco_ralloc_alloc(ra, HOST, 64, &blk[0], TMO)) ||
	    (ret = loco_ralloc_free(ra, &blk[0])))
		bench_die("warm-up", ret);
	loco_ralloc_stats(ra, &st0);
	t0 = bench_now_us();
	for (long i = 0; i < iters; i++) {
		uint64_t t = bench_now_ns();

		if ((ret = loco_ralloc_alloc(ra, HOST, 64, &blk[0], TMO)) ||
		    (ret = loco_ralloc_free(ra, &blk[0])))
			bench_die("fast path", ret);
		lat[i] = (double)(bench_now_ns() - t);
	}
	rows[1] = (struct row){"alloc + free, 64 B (fast path)", median(lat, iters),
	                       iters / ((bench_now_us() - t0) / 1e6), iters};
	loco_ralloc_stats(ra, &st);
	if (st.slow != st0.slow)
		fprintf(stderr, "fast path: %llu refills\n",
		        (unsigned long long)(st.slow - st0.slow));

	/* a stream of 4 KiB allocations: a refill every batch (4) x 16 blocks */
	{
		long n = iters < 8192 ? iters : 8192; /* half the heap */

		loco_ralloc_stats(ra, &st0);
		t0 = bench_now_us();
		for (long i = 0; i < n; i++)
			if ((ret = loco_ralloc_alloc(ra, HOST, 4096, &blk[i], TMO)))
				bench_die("stream", ret);
		rows[2] = (struct row){"alloc 4 KiB stream (mean, refills in)",
		                       (bench_now_us() - t0) * 1e3 / (double)n,
		                       n / ((bench_now_us() - t0) / 1e6), n};
		loco_ralloc_stats(ra, &st);
		printf("stream: %ld allocations, %llu refills\n", n,
		       (unsigned long long)(st.slow - st0.slow));
		for (long i = 0; i < n; i++)
			loco_ralloc_free(ra, &blk[i]);
	}

	/* the slow path alone: 64 KiB blocks, a batch of 1: every allocation claims a slice */
	t0 = bench_now_us();
	for (long i = 0; i < nslow; i++) {
		uint64_t t = bench_now_ns();

		if ((ret = loco_ralloc_alloc(ra1, HOST, LOCO_RALLOC_SLICE_DEFAULT, &blk[i], TMO)))
			bench_die("slow path", ret);
		lat[i] = (double)(bench_now_ns() - t);
	}
	rows[3] = (struct row){"alloc 64 KiB, batch 1 (slow path)", median(lat, nslow),
	                       nslow / ((bench_now_us() - t0) / 1e6), nslow};
	for (long i = 0; i < nslow; i++)
		loco_ralloc_free(ra1, &blk[i]);

	printf("%-40s %12s %14s %8s\n", "operation", "median ns", "ops/s", "n");
	for (int i = 0; i < 4; i++)
		printf("%-40s %12.0f %14.0f %8ld\n", rows[i].what, rows[i].median_ns,
		       rows[i].ops_per_s, rows[i].n);
	if (json == NULL)
		json = bench_result_path(path, sizeof(path), "ralloc-%s.json", fab ? fab : "tcp");
	f = fopen(json, "w");
	if (f != NULL) {
		fprintf(f, "{\"bench\": \"ralloc\", \"fabric\": \"%s\", \"rows\": [\n",
		        fab ? fab : "tcp");
		for (int i = 0; i < 4; i++)
			fprintf(f,
			        "  {\"op\": \"%s\", \"median_ns\": %.0f, \"ops_per_s\": %.0f, "
			        "\"n\": %ld}%s\n",
			        rows[i].what, rows[i].median_ns, rows[i].ops_per_s, rows[i].n,
			        i < 3 ? "," : "");
		fprintf(f, "]}\n");
		fclose(f);
	}
done:
	if ((ret = loco_barrier_wait(bar, 600 * SEC)))
		bench_die("barrier", ret);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_barrier_destroy(bar);
	loco_ralloc_destroy(ra1);
	loco_ralloc_destroy(ra);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(lat);
	free(blk);
	return 0;
}
