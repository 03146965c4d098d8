/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-bench.c -- loco_rpipe between two nodes: message rate of 64 B and
 * 4 KiB messages, copying (write/read) and zero-copy (reserve/commit,
 * peek/release), and one-way latency of 8 B and 64 B messages (ping-pong
 * over two pipes, halved); push pipes (the default), pull pipes
 * (LOCO_RPIPE_PULL), or both, row by row in turn.
 *
 *   loco-run -n 2 build/bench/rpipe-bench [--msgs N] [--iters N] [--ring BYTES]
 *                                         [--mode push|pull|both] [--json FILE]
 *
 * Rate: node 1 writes --msgs messages (default 1000000 of 64 B, a tenth
 * of that of 4 KiB) as fast as the pipe takes them; node 2 reads them all
 * and answers with one 8 B message; the rate is messages over the time
 * from node 1's first write to that answer. Latency: --iters round trips
 * (default 20000, after 1000 unmeasured) of one message each way, timed
 * one at a time on node 1; median and p99 of half the round trip. Each
 * rate row also gives the CPU time per message of node 1's writing thread,
 * of node 1's process (its progress thread too: on tcp it serves a pull
 * reader's READs) and of node 2's process (CLOCK_*_CPUTIME_ID over the row;
 * the waits spin for a while, so an end that waits costs CPU as well).
 * Bursts: --msgs / 10 messages of 64 B, BURST at a time into an idle
 * reader, node 1 timing its write calls (the writer's cost per message
 * when it never waits for room) and each burst until node 2's answer.
 * Prints a table and machine-readable lines ("loco rate SIZE MODE msg/s",
 * "loco lat SIZE median_us p99_us"; pull rows "loco pull rate ..." and
 * "loco pull lat ...") for bench/peers/run-rpipe.sh, and
 * writes JSON (default RESULTS/rpipe-<provider>.json, -pull.json or
 * -both.json; RESULTS is $LOCO_BENCH_OUT, else results/
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
	int zc, pull;
	double msgs_s;
	double mb_s;
	double wt_us, wp_us,
	    rp_us; /* CPU per message: writer thread, writer and reader processes */
};

struct lat {
	size_t size;
	int pull;
	double med_us, p99_us;
};

struct burst {
	int pull;
	double call_us; /* node 1's time in its write calls, per message */
	double all_us;  /* from a burst's first write to node 2's answer, per message */
};

#define BURST 1000 /* messages of a burst (64 B: 88 KB of the ring, a third of a batch) */

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

static uint64_t cpu_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* recv_val -- an 8-byte message's number (node 2's CPU time). */
static uint64_t recv_val(loco_rpipe_t *p)
{
	size_t len;
	uint64_t v;

	die_if("read", loco_rpipe_read(p, &v, sizeof(v), &len, TMO));
	return v;
}

/*
 * rate -- node 1 sends @n messages through @ab, node 2 answers through @ba;
 * node 1 fills @r's rate and CPU figures.
 */
static void rate(uint32_t me, loco_rpipe_t *ab, loco_rpipe_t *ba, long n, struct rate *r)
{
	uint64_t t0, c0, ct0, rc;
	size_t size = r->size;
	int zc = r->zc;

	/* both ends ready: one round trip first */
	if (me == 1) {
		send_msg(ab, 8, 0, 0);
		recv_msg(ba, 8, 0, 0);
	} else {
		recv_msg(ab, 8, 0, 0);
		send_msg(ba, 8, 0, 0);
	}
	t0 = bench_now_ns();
	c0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	ct0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 1; i <= n; i++)
		if (me == 1)
			send_msg(ab, size, zc, (uint64_t)i);
		else
			recv_msg(ab, size, zc, (uint64_t)i);
	if (me == 1) {
		recv_msg(ba, 8, 0, 1);
		r->msgs_s = (double)n / ((double)(bench_now_ns() - t0) / 1e9);
		r->mb_s = r->msgs_s * (double)size / 1e6;
		r->wt_us = (double)(cpu_ns(CLOCK_THREAD_CPUTIME_ID) - ct0) / 1e3 / (double)n;
		r->wp_us = (double)(cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / 1e3 / (double)n;
		r->rp_us = (double)recv_val(ba) / 1e3 / (double)n;
	} else {
		send_msg(ba, 8, 0, 1);
		rc = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
		die_if("write", loco_rpipe_write(ba, &rc, sizeof(rc), TMO));
	}
}

/*
 * bursts -- node 1 writes @n messages of 64 B in bursts of BURST into an
 * idle reader, timing its write calls only, and waits for node 2's answer
 * after each burst: what a message costs the writer when the reader takes
 * them in batches, and how long a burst takes to get through.
 */
static void bursts(uint32_t me, loco_rpipe_t *ab, loco_rpipe_t *ba, long n, struct burst *b)
{
	uint64_t in_calls = 0, t_all = 0;
	long nb = n / BURST > 0 ? n / BURST : 1;

	for (long k = 0; k < nb; k++) {
		uint64_t t0 = bench_now_ns();

		for (long i = 0; i < BURST; i++)
			if (me == 1)
				send_msg(ab, 64, 0, (uint64_t)(k * BURST + i));
			else
				recv_msg(ab, 64, 0, (uint64_t)(k * BURST + i));
		if (me == 1) {
			in_calls += bench_now_ns() - t0;
			recv_msg(ba, 8, 0, (uint64_t)k);
			t_all += bench_now_ns() - t0;
		} else {
			send_msg(ba, 8, 0, (uint64_t)k);
		}
	}
	b->call_us = (double)in_calls / 1e3 / (double)(nb * BURST);
	b->all_us = (double)t_all / 1e3 / (double)(nb * BURST);
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
                      const struct rate *r, int nr, const struct lat *l, int nl,
                      const struct burst *b, int nbu)
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
		        "    {\"size\": %zu, \"mode\": \"%s\", \"pipe\": \"%s\", "
		        "\"msgs_per_s\": %.0f, \"mb_per_s\": %.1f, \"writer_thread_cpu_us\": %.3f, "
		        "\"writer_cpu_us\": %.3f, \"reader_cpu_us\": %.3f}%s\n",
		        r[i].size, r[i].zc ? "zero-copy" : "copy", r[i].pull ? "pull" : "push",
		        r[i].msgs_s, r[i].mb_s, r[i].wt_us, r[i].wp_us, r[i].rp_us,
		        i + 1 < nr ? "," : "");
	fprintf(f, "  ],\n  \"latency\": [\n");
	for (int i = 0; i < nl; i++)
		fprintf(f,
		        "    {\"size\": %zu, \"pipe\": \"%s\", \"one_way_median_us\": %.3f, "
		        "\"one_way_p99_us\": %.3f}%s\n",
		        l[i].size, l[i].pull ? "pull" : "push", l[i].med_us, l[i].p99_us,
		        i + 1 < nl ? "," : "");
	fprintf(f, "  ],\n  \"burst\": [\n");
	for (int i = 0; i < nbu; i++)
		fprintf(f,
		        "    {\"size\": 64, \"burst\": %d, \"pipe\": \"%s\", "
		        "\"writer_call_us\": %.3f, \"delivered_us\": %.3f}%s\n",
		        BURST, b[i].pull ? "pull" : "push", b[i].call_us, b[i].all_us,
		        i + 1 < nbu ? "," : "");
	fprintf(f, "  ]\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* make -- the pipe @name from @w to @r, push or pull */
static loco_rpipe_t *make(loco_channel_t *ch, const char *name, uint32_t w, uint32_t r, size_t ring,
                          int pull)
{
	loco_rpipe_cfg_t cfg;
	loco_rpipe_t *p;

	loco_rpipe_cfg_default(&cfg);
	cfg.ring_bytes = ring;
	cfg.mode = pull ? LOCO_RPIPE_PULL : LOCO_RPIPE_PUSH;
	die_if(name, loco_rpipe_create_cfg(ch, name, w, r, &cfg, &p));
	return p;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"msgs", required_argument, NULL, 'm'}, {"iters", required_argument, NULL, 'i'},
	    {"ring", required_argument, NULL, 'r'}, {"mode", required_argument, NULL, 'o'},
	    {"json", required_argument, NULL, 'j'}, {NULL, 0, NULL, 0},
	};
	static const size_t sizes[] = {64, 4096}, lsizes[] = {8, 64};
	static const char *const pname[2][2] = {{"ab", "ba"}, {"ab-pull", "ba-pull"}};
	const char *json = NULL, *prov = getenv("LOCO_FABRIC"), *mode = "push";
	long msgs = 1000000, iters = 20000;
	size_t ring = 1 << 20;
	char json_default[4096];
	struct rate r[8];
	struct lat l[4];
	struct burst bu[2];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpipe_t *ab[2] = {NULL, NULL}, *ba[2] = {NULL, NULL};
	double *t;
	uint32_t me;
	int c, nr = 0, nl = 0, nbu = 0, first, last;

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
		case 'o':
			mode = optarg;
			break;
		case 'j':
			json = optarg;
			break;
		default:
			fprintf(stderr, "usage: loco-run -n 2 rpipe-bench [--msgs N] [--iters N] "
			                "[--ring BYTES] [--mode push|pull|both] [--json FILE]\n");
			return 2;
		}
	}
	if (prov == NULL)
		prov = "tcp";
	if (msgs < 10 || iters < 1)
		return 2;
	/* the pipe modes to run: [first, last] of push (0), pull (1) */
	if (strcmp(mode, "push") == 0) {
		first = last = 0;
	} else if (strcmp(mode, "pull") == 0) {
		first = last = 1;
	} else if (strcmp(mode, "both") == 0) {
		first = 0;
		last = 1;
	} else {
		fprintf(stderr, "rpipe-bench: --mode push, pull or both\n");
		return 2;
	}
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
	for (int k = first; k <= last; k++) {
		ab[k] = make(ch, pname[k][0], 1, 2, ring, k);
		ba[k] = make(ch, pname[k][1], 2, 1, ring, k);
	}
	die_if("join", loco_channel_join(ch, 20 * SEC));
	for (int k = first; k <= last; k++) {
		die_if("sync", loco_rpipe_sync(ab[k], 20 * SEC));
		die_if("sync", loco_rpipe_sync(ba[k], 20 * SEC));
	}

	/* each row in every mode asked for, one after the other */
	for (int s = 0; s < 2; s++)
		for (int zc = 0; zc < 2; zc++)
			for (int k = first; k <= last; k++) {
				r[nr] = (struct rate){.size = sizes[s], .zc = zc, .pull = k};
				rate(me, ab[k], ba[k], sizes[s] > 1024 ? msgs / 10 : msgs, &r[nr]);
				nr++;
			}
	for (int k = first; k <= last; k++) {
		bu[nbu].pull = k;
		bursts(me, ab[k], ba[k], msgs / 10, &bu[nbu]);
		nbu++;
	}
	for (int s = 0; s < 2; s++)
		for (int k = first; k <= last; k++) {
			latency(me, ab[k], ba[k], lsizes[s], iters, t);
			qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
			l[nl].size = lsizes[s];
			l[nl].pull = k;
			l[nl].med_us = t[iters / 2];
			l[nl].p99_us = t[(size_t)iters * 99 / 100];
			nl++;
		}
	if (me == 1) {
		printf("rpipe-bench: provider %s, ring %zu B, wait policy %s, %ld messages (4 KiB: "
		       "%ld), %ld round trips, pipes %s\n",
		       prov, ring, getenv("LOCO_WAIT") ? getenv("LOCO_WAIT") : "default", msgs,
		       msgs / 10, iters, mode);
		printf("%-6s %-10s %-5s %12s %9s %16s\n", "size", "mode", "pipe", "msgs/s", "MB/s",
		       "CPU us/msg w-thr w rd");
		for (int i = 0; i < nr; i++)
			printf("%-6zu %-10s %-5s %12.0f %9.1f %6.3f %6.3f %6.3f\n", r[i].size,
			       r[i].zc ? "zero-copy" : "copy", r[i].pull ? "pull" : "push",
			       r[i].msgs_s, r[i].mb_s, r[i].wt_us, r[i].wp_us, r[i].rp_us);
		printf("bursts of %d x 64 B into an idle reader (%ld messages):\n", BURST,
		       msgs / 10 / BURST * BURST);
		printf("%-5s %22s %22s\n", "pipe", "writer's calls us/msg", "delivered us/msg");
		for (int i = 0; i < nbu; i++)
			printf("%-5s %22.3f %22.3f\n", bu[i].pull ? "pull" : "push", bu[i].call_us,
			       bu[i].all_us);
		printf("%-6s %-5s %14s %10s\n", "size", "pipe", "one-way us", "p99 us");
		for (int i = 0; i < nl; i++)
			printf("%-6zu %-5s %14.2f %10.2f\n", l[i].size, l[i].pull ? "pull" : "push",
			       l[i].med_us, l[i].p99_us);
		for (int i = 0; i < nr; i++)
			printf("loco %srate %zu %s %.0f\n", r[i].pull ? "pull " : "", r[i].size,
			       r[i].zc ? "zc" : "copy", r[i].msgs_s);
		for (int i = 0; i < nl; i++)
			printf("loco %slat %zu %.3f %.3f\n", l[i].pull ? "pull " : "", l[i].size,
			       l[i].med_us, l[i].p99_us);
		for (int i = 0; i < nbu; i++)
			printf("loco %sburst 64 %.3f %.3f\n", bu[i].pull ? "pull " : "",
			       bu[i].call_us, bu[i].all_us);
		if (json == NULL) {
			bench_result_path(json_default, sizeof(json_default), "rpipe-%s%s%s.json",
			                  prov, first == last && first == 0 ? "" : "-",
			                  first == last && first == 0 ? "" : mode);
			json = json_default;
		}
		if (write_json(json, prov, ring, msgs, iters, r, nr, l, nl, bu, nbu) == 0)
			printf("results: %s\n", json);
	}
	/* node 2 leaves after node 1 read its last answer: one more round trip */
	if (me == 1) {
		send_msg(ab[first], 8, 0, 7);
		recv_msg(ba[first], 8, 0, 7);
	} else {
		recv_msg(ab[first], 8, 0, 7);
		send_msg(ba[first], 8, 0, 7);
	}
	for (int k = first; k <= last; k++) {
		loco_rpipe_destroy(ba[k]);
		loco_rpipe_destroy(ab[k]);
	}
	loco_channel_destroy(ch);
	loco_fini(m);
	free(t);
	return 0;
}
