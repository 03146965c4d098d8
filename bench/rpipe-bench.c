/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-bench.c -- loco_rpipe between two nodes: message rate of 64 B and
 * 4 KiB messages, copying (write/read) and zero-copy (reserve/commit,
 * peek/release), and one-way latency of 8 B and 64 B messages (ping-pong
 * over two pipes, halved).
 *
 *   loco-run -n 2 build/bench/rpipe-bench [--msgs N] [--iters N] [--ring BYTES] [--json FILE]
 *
 * Rate: node 1 writes --msgs messages (default 1000000 of 64 B, a tenth
 * of that of 4 KiB) as fast as the pipe takes them; node 2 reads them all
 * and answers with one 8 B message; the rate is messages over the time
 * from node 1's first write to that answer. Latency: --iters round trips
 * (default 20000, after 1000 unmeasured) of one message each way, timed
 * one at a time on node 1; median and p99 of half the round trip.
 * Prints a table and machine-readable lines ("loco rate SIZE MODE msg/s",
 * "loco lat SIZE median_us p99_us") for bench/peers/run-rpipe.sh, and
 * writes JSON (default RESULTS/rpipe-<provider>.json; RESULTS is $LOCO_BENCH_OUT, else results/
 * beside the program: build/bench/results/).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/rpipe.h>

#include "bench.h"

#define SEC    1000000000ll
#define TMO    (30 * SEC)
#define WARMUP 1000

struct rate {
	size_t size;
	int zc;
	double msgs_s;
	double mb_s;
};

struct lat {
	size_t size;
	double med_us, p99_us;
};

static uint8_t buf[1 << 16];

static void die_if(const char *what, int ret)
{
	if (ret)
		bench_die(what, ret);
}

static void send_msg(loco_rpipe_t *p, size_t size, int zc, uint64_t k)
{
	if (zc) {
		void *ptr;

		die_if("reserve", loco_rpipe_reserve(p, size, &ptr, TMO));
		memcpy(ptr, &k, sizeof(k));
		die_if("commit", loco_rpipe_commit(p, size));
	} else {
		memcpy(buf, &k, sizeof(k));
		die_if("write", loco_rpipe_write(p, buf, size, TMO));
	}
}

static void recv_msg(loco_rpipe_t *p, size_t size, int zc, uint64_t k)
{
	const void *ptr = buf;
	size_t len;
	uint64_t got;

	if (zc)
		die_if("peek", loco_rpipe_peek(p, &ptr, &len, TMO));
	else
		die_if("read", loco_rpipe_read(p, buf, sizeof(buf), &len, TMO));
	memcpy(&got, ptr, sizeof(got));
	if (len != size || got != k) {
		fprintf(stderr, "rpipe-bench: message %llu: %zu B, number %llu\n",
		        (unsigned long long)k, len, (unsigned long long)got);
		exit(1);
	}
	if (zc)
		die_if("release", loco_rpipe_release(p));
}

/* rate -- node 1 sends @n messages through @ab, node 2 answers through @ba. */
static double rate(uint32_t me, loco_rpipe_t *ab, loco_rpipe_t *ba, size_t size, int zc, long n)
{
	uint64_t t0;

	/* both ends ready: one round trip first */
	if (me == 1) {
		send_msg(ab, 8, 0, 0);
		recv_msg(ba, 8, 0, 0);
	} else {
		recv_msg(ab, 8, 0, 0);
		send_msg(ba, 8, 0, 0);
	}
	t0 = bench_now_ns();
	for (long i = 1; i <= n; i++)
		if (me == 1)
			send_msg(ab, size, zc, (uint64_t)i);
		else
			recv_msg(ab, size, zc, (uint64_t)i);
	if (me == 1)
		recv_msg(ba, 8, 0, 1);
	else
		send_msg(ba, 8, 0, 1);
	return (double)n / ((double)(bench_now_ns() - t0) / 1e9);
}

/* latency -- @iters round trips of @size bytes; half of each into @t (node 1). */
static void latency(uint32_t me, loco_rpipe_t *ab, loco_rpipe_t *ba, size_t size, long iters,
                    double *t)
{
	for (long i = -WARMUP; i < iters; i++) {
		uint64_t t0 = bench_now_ns();

		if (me == 1) {
			send_msg(ab, size, 0, (uint64_t)i);
			recv_msg(ba, size, 0, (uint64_t)i);
			if (i >= 0)
				t[i] = (double)(bench_now_ns() - t0) / 2e3;
		} else {
			recv_msg(ab, size, 0, (uint64_t)i);
			send_msg(ba, size, 0, (uint64_t)i);
		}
	}
}

static int write_json(const char *path, const char *prov, size_t ring, long msgs, long iters,
                      const struct rate *r, int nr, const struct lat *l, int nl)
{
	FILE *f = fopen(path, "w");
	char host[256] = "?", date[64];
	time_t now = time(NULL);

	if (f == NULL) {
		fprintf(stderr, "rpipe-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	gethostname(host, sizeof(host) - 1);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	fprintf(f,
	        "{\n  \"bench\": \"rpipe-bench\", \"loco_version\": \"%u.%u\", \"provider\": "
	        "\"%s\",\n  \"host\": \"%s\", \"cpus\": %ld, \"date\": \"%s\", \"wait\": \"%s\", "
	        "\"ring\": %zu, \"msgs\": %ld, \"iters\": %ld,\n  \"rate\": [\n",
	        loco_version() >> 16, loco_version() & 0xffff, prov, host,
	        sysconf(_SC_NPROCESSORS_ONLN), date, getenv("LOCO_WAIT") ? getenv("LOCO_WAIT") : "",
	        ring, msgs, iters);
	for (int i = 0; i < nr; i++)
		fprintf(f,
		        "    {\"size\": %zu, \"mode\": \"%s\", \"msgs_per_s\": %.0f, "
		        "\"mb_per_s\": %.1f}%s\n",
		        r[i].size, r[i].zc ? "zero-copy" : "copy", r[i].msgs_s, r[i].mb_s,
		        i + 1 < nr ? "," : "");
	fprintf(f, "  ],\n  \"latency\": [\n");
	for (int i = 0; i < nl; i++)
		fprintf(f,
		        "    {\"size\": %zu, \"one_way_median_us\": %.3f, \"one_way_p99_us\": "
		        "%.3f}%s\n",
		        l[i].size, l[i].med_us, l[i].p99_us, i + 1 < nl ? "," : "");
	fprintf(f, "  ]\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"msgs", required_argument, NULL, 'm'},
	    {"iters", required_argument, NULL, 'i'},
	    {"ring", required_argument, NULL, 'r'},
	    {"json", required_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	static const size_t sizes[] = {64, 4096}, lsizes[] = {8, 64};
	const char *json = NULL, *prov = getenv("LOCO_FABRIC");
	long msgs = 1000000, iters = 20000;
	size_t ring = 1 << 20;
	char json_default[4096];
	struct rate r[4];
	struct lat l[2];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpipe_t *ab, *ba;
	double *t;
	uint32_t me;
	int c, nr = 0;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			msgs = atol(optarg);
			break;
		case 'i':
			iters = atol(optarg);
			break;
		case 'r':
			ring = (size_t)atol(optarg);
			break;
		case 'j':
			json = optarg;
			break;
		default:
			fprintf(stderr, "usage: loco-run -n 2 rpipe-bench [--msgs N] [--iters N] "
			                "[--ring BYTES] [--json FILE]\n");
			return 2;
		}
	}
	if (prov == NULL)
		prov = "tcp";
	if (msgs < 10 || iters < 1)
		return 2;
	t = calloc((size_t)iters, sizeof(double));
	if (t == NULL)
		return 1;
	die_if("init", loco_init(NULL, &m));
	me = loco_manager_node_id(m);
	if (me != 1 && me != 2) {
		fprintf(stderr, "rpipe-bench: run with loco-run -n 2\n");
		return 2;
	}
	die_if("channel", loco_channel_create(m, NULL, "rpipe-bench", 2, &ch));
	die_if("pipe ab", loco_rpipe_create(ch, "ab", 1, 2, ring, &ab));
	die_if("pipe ba", loco_rpipe_create(ch, "ba", 2, 1, ring, &ba));
	die_if("join", loco_channel_join(ch, 20 * SEC));
	die_if("sync", loco_rpipe_sync(ab, 20 * SEC));
	die_if("sync", loco_rpipe_sync(ba, 20 * SEC));

	for (int s = 0; s < 2; s++)
		for (int zc = 0; zc < 2; zc++) {
			long n = sizes[s] > 1024 ? msgs / 10 : msgs;

			r[nr].size = sizes[s];
			r[nr].zc = zc;
			r[nr].msgs_s = rate(me, ab, ba, sizes[s], zc, n);
			r[nr].mb_s = r[nr].msgs_s * (double)sizes[s] / 1e6;
			nr++;
		}
	for (int s = 0; s < 2; s++) {
		latency(me, ab, ba, lsizes[s], iters, t);
		qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
		l[s].size = lsizes[s];
		l[s].med_us = t[iters / 2];
		l[s].p99_us = t[(size_t)iters * 99 / 100];
	}
	if (me == 1) {
		printf("rpipe-bench: provider %s, ring %zu B, wait policy %s, %ld messages (4 KiB: "
		       "%ld), %ld round trips\n",
		       prov, ring, getenv("LOCO_WAIT") ? getenv("LOCO_WAIT") : "default", msgs,
		       msgs / 10, iters);
		printf("%-10s %-10s %14s %10s\n", "size", "mode", "msgs/s", "MB/s");
		for (int i = 0; i < nr; i++)
			printf("%-10zu %-10s %14.0f %10.1f\n", r[i].size,
			       r[i].zc ? "zero-copy" : "copy", r[i].msgs_s, r[i].mb_s);
		printf("%-10s %14s %10s\n", "size", "one-way us", "p99 us");
		for (int i = 0; i < 2; i++)
			printf("%-10zu %14.2f %10.2f\n", l[i].size, l[i].med_us, l[i].p99_us);
		for (int i = 0; i < nr; i++)
			printf("loco rate %zu %s %.0f\n", r[i].size, r[i].zc ? "zc" : "copy",
			       r[i].msgs_s);
		for (int i = 0; i < 2; i++)
			printf("loco lat %zu %.3f %.3f\n", l[i].size, l[i].med_us, l[i].p99_us);
		if (json == NULL) {
			bench_result_path(json_default, sizeof(json_default), "rpipe-%s.json",
			                  prov);
			json = json_default;
		}
		if (write_json(json, prov, ring, msgs, iters, r, nr, l, 2) == 0)
			printf("results: %s\n", json);
	}
	/* node 2 leaves after node 1 read its last answer: one more round trip */
	if (me == 1) {
		send_msg(ab, 8, 0, 7);
		recv_msg(ba, 8, 0, 7);
	} else {
		recv_msg(ab, 8, 0, 7);
		send_msg(ba, 8, 0, 7);
	}
	loco_rpipe_destroy(ba);
	loco_rpipe_destroy(ab);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(t);
	return 0;
}
