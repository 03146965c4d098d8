/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * objects-atomic.c -- atomic_var and lock against the operations they are
 * made of: latency and op rate of atomic_var FAA/CAS/read and of a lock
 * acquire + release, side by side with loco_faa/loco_cas + loco_ack_wait
 * (the public API an object is built on, measured in the same run) and the
 * raw fabric FAA/CAS of bench/fabric-lat (read from its JSON, the floor).
 *
 *   loco-run -n 3 build/bench/objects-atomic [--iters N] [--secs S]
 *            [--json FILE] [--fabric-json FILE]
 *
 * Node 2 hosts every object and only serves (one-sided). Node 1 measures
 * alone, one operation at a time (median, p99, and the op rate of that
 * loop), then pipelined (16 asynchronous FAAs per ack wait). Then nodes 1
 * and 3 both run for S seconds: atomic_var FAA, CAS increments and lock
 * acquire + release: node 1's median and p99, and the rate of both nodes
 * together. The nodes meet at barriers made of an atomic_var on node 2.
 * Prints a table and writes JSON (default RESULTS/objects-atomic-<provider>.json;
 * RESULTS is $LOCO_BENCH_OUT, else results/ beside the program).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/atomic_var.h>
#include <loco/lock.h>

#include "bench.h"

#define HOST    2
#define CLIENT2 3
#define NODES   3
#define WARMUP  500
#define BATCH   LOCO_ATOMIC_VAR_SLOTS
#define SEC     1000000000ll
#define TMO     (10 * SEC)
#define NROWS   16

struct row {
	const char *op;
	const char *what; /* "alone", "pipelined", "contended" */
	double median_us, p99_us, ops_per_s;
	long n;
};

struct bench {
	loco_manager_t *m;
	uint32_t me;
	loco_channel_t *ch;
	loco_atomic_var_t *av, *bar, *tally;
	loco_lock_t *lk;
	loco_object_t *raw;
	loco_region_t *rw; /* raw: word 0 FAA, word 8 CAS; node 2's is the target */
	loco_rref_t rr;
	loco_ack_key_t *ack;
	uint64_t phase;
	double *lat;
	long iters;
	struct row rows[NROWS];
	int nrows;
};

/* What bar_reached() waits for: "bar" on node 2 at @want or more. */
struct bar_wait {
	struct bench *b;
	uint64_t want;
};

/* bar_reached -- a bench_poll() check: 1 once "bar" reached w->want, or the read's error. */
static int bar_reached(void *arg)
{
	struct bar_wait *w = arg;
	uint64_t v = 0;
	int ret = loco_atomic_var_read(w->b->bar, &v, TMO);

	return ret ? ret : v >= w->want;
}

/* barrier -- every node adds 1 to "bar" on node 2, then waits for the others (60 s). */
static void barrier(struct bench *b)
{
	struct bar_wait w = {.b = b, .want = ++b->phase * NODES};
	int ret;

	if ((ret = loco_atomic_var_faa(b->bar, 1, NULL, TMO)))
		bench_die("barrier", ret);
	/* few polls (every 10 ms): node 1 may be measuring */
	if ((ret = bench_poll(bar_reached, NULL, &w, 10000, 60000)) <= 0)
		bench_die("barrier", ret ? ret : -ETIMEDOUT);
}

static struct row *add_row(struct bench *b, const char *op, const char *what, long n, double secs)
{
	struct row *r = &b->rows[b->nrows++];

	qsort(b->lat, (size_t)n, sizeof(*b->lat), bench_cmp_double);
	*r = (struct row){.op = op, .what = what, .n = n, .ops_per_s = (double)n / secs};
	if (n > 0) {
		r->median_us = b->lat[n / 2];
		r->p99_us = b->lat[n * 99 / 100];
	}
	return r;
}

enum op {
	OP_RAW_FAA,
	OP_RAW_CAS,
	OP_AV_FAA,
	OP_AV_CAS,
	OP_AV_READ,
	OP_LOCK,
	OP_N
};

static const char *const op_names[OP_N] = {
    "loco_faa+ack_wait", "loco_cas+ack_wait", "atomic_var_faa",
    "atomic_var_cas",    "atomic_var_read",   "lock acquire+release",
};

/* one -- operation @op once, waited for. @i numbers it (the CASes succeed). */
static void one(struct bench *b, int op, uint64_t i)
{
	uint64_t old;
	int ret = 0;

	switch (op) {
	case OP_RAW_FAA:
		ret = loco_faa(b->rw, 16, &b->rr, 0, 1, b->ack);
		if (ret == 0)
			ret = loco_ack_wait(b->ack, TMO);
		break;
	case OP_RAW_CAS:
		ret = loco_cas(b->rw, 24, &b->rr, 8, i, i + 1, b->ack);
		if (ret == 0)
			ret = loco_ack_wait(b->ack, TMO);
		if (ret == 0 && *(uint64_t *)((char *)loco_region_ptr(b->rw) + 24) != i)
			ret = -EPROTO;
		break;
	case OP_AV_FAA:
		ret = loco_atomic_var_faa(b->av, 1, NULL, TMO);
		break;
	case OP_AV_CAS:
		ret = loco_atomic_var_cas(b->av, i, i + 1, &old, TMO);
		if (ret == 0 && old != i)
			ret = -EPROTO;
		break;
	case OP_AV_READ:
		ret = loco_atomic_var_read(b->av, &old, TMO);
		break;
	case OP_LOCK:
		ret = loco_lock_acquire(b->lk, TMO);
		if (ret == 0)
			ret = loco_lock_release(b->lk);
		break;
	}
	if (ret)
		bench_die(op_names[op], ret);
}

/* alone -- node 1 by itself: @op one at a time. */
static void alone(struct bench *b, int op)
{
	uint64_t base = 0; /* the CASes count up from 0 */
	double t0, t;

	if (op == OP_AV_CAS && loco_atomic_var_write(b->av, 0, TMO))
		bench_die("reset", -EIO);
	for (long i = 0; i < WARMUP; i++)
		one(b, op, base + (uint64_t)i);
	t0 = bench_now_us();
	for (long i = 0; i < b->iters; i++) {
		t = bench_now_us();
		one(b, op, base + (uint64_t)(WARMUP + i));
		b->lat[i] = bench_now_us() - t;
	}
	add_row(b, op_names[op], "alone", b->iters, (bench_now_us() - t0) / 1e6);
}

/* pipelined -- node 1: BATCH FAAs posted at once, one ack wait per batch. */
static void pipelined(struct bench *b, int raw)
{
	long n = b->iters - b->iters % BATCH;
	double t0 = bench_now_us(), t;
	int ret = 0;

	for (long i = 0; i < n; i += BATCH) {
		t = bench_now_us();
		for (int s = 0; s < BATCH && ret == 0; s++)
			ret = raw ? loco_faa(b->rw, 32 + 8 * (size_t)s, &b->rr, 0, 1, b->ack)
			          : loco_atomic_var_faa_async(b->av, 1, (unsigned)s, b->ack);
		if (ret == 0)
			ret = loco_ack_wait(b->ack, TMO);
		if (ret)
			bench_die("pipelined FAA", ret);
		b->lat[i / BATCH] = bench_now_us() - t;
	}
	/* median: of one batch of BATCH operations */
	add_row(b, raw ? "loco_faa x16+ack_wait" : "atomic_var_faa_async x16", "pipelined",
	        n / BATCH, (bench_now_us() - t0) / 1e6)
	    ->ops_per_s *= BATCH;
}

static uint64_t sum_clients(struct bench *b, uint64_t v);

/*
 * contended -- nodes 1 and 3 run @op for @secs; returns node 1's row with
 * the rate of both (their counts are added up in "tally" on node 2).
 */
static void contended(struct bench *b, int op, double secs, uint64_t *fails)
{
	double t0, t, end;
	uint64_t guess = 0, old, total = 0;
	long n = 0;
	int ret = 0;

	if (b->me == 1 && (ret = loco_atomic_var_write(b->av, 0, TMO)))
		bench_die("reset", ret);
	barrier(b);
	if (b->me != HOST) {
		t0 = bench_now_us();
		end = t0 + secs * 1e6;
		while ((t = bench_now_us()) < end && n < b->iters) {
			if (op == OP_AV_CAS) {
				/* one increment: CAS until it succeeds */
				for (;;) {
					ret =
					    loco_atomic_var_cas(b->av, guess, guess + 1, &old, TMO);
					if (ret)
						bench_die("contended CAS", ret);
					if (old == guess)
						break;
					(*fails)++;
					guess = old;
				}
				guess++;
			} else {
				one(b, op, 0);
			}
			b->lat[n++] = bench_now_us() - t;
		}
		secs = (bench_now_us() - t0) / 1e6;
	}
	total = sum_clients(b, (uint64_t)n);
	if (b->me == 1) {
		struct row *r =
		    add_row(b, op == OP_AV_CAS ? "atomic_var_cas increment" : op_names[op],
		            "contended", n, secs);

		r->ops_per_s = (double)total / secs; /* both clients ran about @secs */
	}
}

/* sum_clients -- the sum of @v over nodes 1 and 3, on node 1 (through "tally"). */
static uint64_t sum_clients(struct bench *b, uint64_t v)
{
	uint64_t total = 0;
	int ret = 0;

	if (b->me == 1)
		ret = loco_atomic_var_write(b->tally, 0, TMO);
	if (ret)
		bench_die("tally", ret);
	barrier(b);
	if (b->me != HOST && (ret = loco_atomic_var_faa(b->tally, v, NULL, TMO)))
		bench_die("tally", ret);
	barrier(b);
	if (b->me == 1 && (ret = loco_atomic_var_read(b->tally, &total, TMO)))
		bench_die("tally", ret);
	return total;
}

/* fabric_floor -- the median of @op ("FAA", "CAS") in fabric-lat's JSON, or -1. */
static double fabric_floor(const char *path, const char *op)
{
	char buf[8192], key[64];
	size_t n;
	char *p;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	snprintf(key, sizeof(key), "\"%s\": {\"median\": ", op);
	p = strstr(buf, key);
	return p ? strtod(p + strlen(key), NULL) : -1;
}

static void report(struct bench *b, const char *json, const char *fjson, const char *provider,
                   double secs, uint64_t cas_fails)
{
	double ffaa = fabric_floor(fjson, "FAA"), fcas = fabric_floor(fjson, "CAS");
	double lfaa = b->rows[0].median_us;
	FILE *f;

	printf("objects-atomic: provider %s, 3 nodes (node 2 hosts, node 1 measures), %ld "
	       "iterations after %d warm-up; contended: nodes 1 and 3 for %.1f s\n",
	       provider, b->iters, WARMUP, secs);
	printf("%-26s %-10s %10s %10s %12s %9s %9s\n", "op", "run", "median us", "p99 us", "ops/s",
	       "x loco", "x fabric");
	if (ffaa > 0)
		printf("%-26s %-10s %10.2f %10s %12s %9s %9.2f\n", "fabric FAA (fabric-lat)",
		       "alone", ffaa, "-", "-", "-", 1.0);
	if (fcas > 0)
		printf("%-26s %-10s %10.2f %10s %12s %9s %9.2f\n", "fabric CAS (fabric-lat)",
		       "alone", fcas, "-", "-", "-", 1.0);
	for (int i = 0; i < b->nrows; i++) {
		struct row *r = &b->rows[i];
		double fl = strstr(r->op, "cas") ? fcas : ffaa;
		char xf[16] = "-", xl[16] = "-";

		if (strcmp(r->what, "pipelined") != 0) {
			snprintf(xl, sizeof(xl), "%.2f", r->median_us / lfaa);
			if (fl > 0)
				snprintf(xf, sizeof(xf), "%.2f", r->median_us / fl);
		}
		printf("%-26s %-10s %10.2f %10.2f %12.0f %9s %9s\n", r->op, r->what, r->median_us,
		       r->p99_us, r->ops_per_s, xl, xf);
	}
	printf("pipelined: median and p99 are of one batch of %d; contended: ops/s of both "
	       "clients, %llu failed CASes\n",
	       BATCH, (unsigned long long)cas_fails);
	if (ffaa <= 0)
		printf("(no %s: run build/bench/fabric-lat first for the fabric floor)\n", fjson);

	f = fopen(json, "w");
	if (f == NULL) {
		fprintf(stderr,
		        "objects-atomic: cannot write %s (run from the source tree, or "
		        "--json)\n",
		        json);
		return;
	}
	fprintf(f,
	        "{\n  \"bench\": \"objects-atomic\",\n  \"loco_version\": %u,\n  \"provider\": "
	        "\"%s\",\n  \"nodes\": 3,\n  \"iters\": %ld,\n  \"warmup\": %d,\n  "
	        "\"contended_secs\": %.1f,\n  \"contended_cas_fails\": %llu,\n",
	        loco_version(), provider, b->iters, WARMUP, secs, (unsigned long long)cas_fails);
	fprintf(f, "  \"fabric_floor_us\": {\"FAA\": %.3f, \"CAS\": %.3f},\n", ffaa, fcas);
	fprintf(f, "  \"rows\": [\n");
	for (int i = 0; i < b->nrows; i++)
		fprintf(f,
		        "    {\"op\": \"%s\", \"run\": \"%s\", \"n\": %ld, \"median_us\": %.3f, "
		        "\"p99_us\": %.3f, \"ops_per_s\": %.0f}%s\n",
		        b->rows[i].op, b->rows[i].what, b->rows[i].n, b->rows[i].median_us,
		        b->rows[i].p99_us, b->rows[i].ops_per_s, i + 1 < b->nrows ? "," : "");
	fprintf(f, "  ]\n}\n");
	fclose(f);
	printf("results: %s\n", json);
}

int main(int argc, char **argv)
{
	const char *provider = getenv("LOCO_FABRIC"), *json = NULL;
	const char *fjson = NULL;
	char json_buf[4096], fjson_buf[4096];
	struct bench b = {.iters = 5000};
	double secs = 2;
	uint64_t cas_fails = 0;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			b.iters = atol(argv[++i]);
		else if (strcmp(argv[i], "--secs") == 0 && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else if (strcmp(argv[i], "--fabric-json") == 0 && i + 1 < argc)
			fjson = argv[++i];
		else {
			fprintf(stderr,
			        "usage: loco-run -n 3 %s [--iters N] [--secs S] [--json FILE] "
			        "[--fabric-json FILE]\n",
			        argv[0]);
			return 2;
		}
	}
	/* loco-run sets LOCO_NODES: say what is wrong now, not after a 20 s join */
	if (getenv("LOCO_NODES") == NULL || atoi(getenv("LOCO_NODES")) != NODES) {
		fprintf(stderr, "objects-atomic: run under loco-run -n %d (LOCO_NODES=%s)\n", NODES,
		        getenv("LOCO_NODES") ? getenv("LOCO_NODES") : "unset");
		return 2;
	}
	if (b.iters < 100)
		b.iters = 100;
	if (secs <= 0 || secs > 60)
		secs = 2;
	if (provider == NULL || *provider == '\0')
		provider = "tcp";
	if (json == NULL) {
		bench_result_path(json_buf, sizeof(json_buf), "objects-atomic-%s.json", provider);
		json = json_buf;
	}
	if (fjson == NULL) {
		bench_result_path(fjson_buf, sizeof(fjson_buf), "fabric-%s.json", provider);
		fjson = fjson_buf;
	}
	b.lat = calloc((size_t)b.iters, sizeof(*b.lat));
	if (b.lat == NULL)
		bench_die("calloc", -ENOMEM);
	alarm(600);

	if ((ret = loco_init(NULL, &b.m)))
		bench_die("loco_init", ret);
	b.me = loco_manager_node_id(b.m);
	if ((ret = loco_channel_create(b.m, NULL, "objects-atomic", NODES, &b.ch)) ||
	    (ret = loco_atomic_var_create(b.ch, "av", HOST, &b.av)) ||
	    (ret = loco_atomic_var_create(b.ch, "bar", HOST, &b.bar)) ||
	    (ret = loco_atomic_var_create(b.ch, "tally", HOST, &b.tally)) ||
	    (ret = loco_lock_create(b.ch, "lk", HOST, &b.lk)) ||
	    (ret = loco_object_create(b.ch, "raw", NULL, NULL, &b.raw)) ||
	    (ret = loco_region_create(b.raw, "w", 256, LOCO_ACCESS_ATOMIC, &b.rw)) ||
	    (ret = loco_ack_key_create(b.m, &b.ack)) || (ret = loco_channel_join(b.ch, 20 * SEC)))
		bench_die("setup", ret);
	if (b.me != HOST && (ret = loco_region_remote(b.rw, HOST, &b.rr)))
		bench_die("node 2's raw region", ret);

	barrier(&b);
	if (b.me == 1) {
		for (long i = 0; i < 4 * WARMUP; i++) /* wake every thread on the path up */
			one(&b, OP_RAW_FAA, 0);
		for (int op = 0; op < OP_N; op++)
			alone(&b, op);
		pipelined(&b, 1);
		pipelined(&b, 0);
	}
	barrier(&b);
	contended(&b, OP_AV_FAA, secs, &cas_fails);
	contended(&b, OP_AV_CAS, secs, &cas_fails);
	contended(&b, OP_LOCK, secs, &cas_fails);
	cas_fails = sum_clients(&b, cas_fails);
	if (b.me == 1)
		report(&b, json, fjson, provider, secs, cas_fails);
	barrier(&b);
	/* the host goes last: the others may still be reading "bar" */
	if (b.me != HOST && (ret = loco_atomic_var_faa(b.bar, 1, NULL, TMO)))
		bench_die("leaving", ret);
	if (b.me == HOST) {
		struct bar_wait w = {.b = &b, .want = b.phase * NODES + NODES - 1};

		bench_poll(bar_reached, NULL, &w, 10000, 30000); /* a failed read ends it too */
	}

	loco_ack_key_destroy(b.ack);
	loco_object_destroy(b.raw);
	loco_lock_destroy(b.lk);
	loco_atomic_var_destroy(b.tally);
	loco_atomic_var_destroy(b.bar);
	loco_atomic_var_destroy(b.av);
	loco_channel_destroy(b.ch);
	loco_fini(b.m);
	free(b.lat);
	return 0;
}
