/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-bench.c -- loco_rpc between two nodes, Seriema's Table 2 form:
 * calls/s and MB/s of one-way calls with 8, 64 and 256 B of arguments,
 * with no aggregation, "trad" and "overflow", beside the raw pipelined
 * WRITE rate of the same bytes (one loco_write per message, unsignaled
 * but for one per window of WIN, two windows in flight) in the same run; call_return 8 B
 * latency beside a raw WRITE round trip (write a flag, wait for the peer
 * to write it back); and the one-sided operations MPI's RMA is compared
 * with (8 B write, read, FAA, CAS, each + its completion).
 *
 *   loco-run -n 2 build/bench/rpc-bench [--calls N] [--iters N] [--agg-bytes N] [--json FILE]
 *            [--size 8|64|256] [--modes LIST]
 *
 * --size and --modes run a part of the rates only: one size, and the
 * modes LIST names (comma-separated: none, trad, overflow, raw), with no
 * latencies and no JSON: one rate at a time, without what runs before it
 * (the state a fabric is left in, its threads parked or spinning, moves
 * the next rate by 2-4x on tcp).
 *
 * Node 2 serves: it runs loco_rpc_progress() on the three endpoints
 * (one per aggregation mode), pausing by the manager's wait policy
 * (LOCO_WAIT) when idle. Rate: node 1 makes --calls calls (default
 * 200000), flushes, and makes one call_return that answers how many the
 * sink counted (checked): calls over that time. Latency: --iters
 * (default 20000, after 1000 unmeasured), median and p99 of the whole
 * round trip. Prints a table, lines for bench/peers/run-rpc.sh ("loco
 * ..."), and JSON (default RESULTS/rpc-<provider>-<wait>.json; RESULTS is $LOCO_BENCH_OUT, else
 * results/ beside the program: build/bench/results/).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/rpc.h>

#include "bench.h"

#define SEC    1000000000ll
#define TMO    (30 * SEC)
#define WARMUP 1000
#define WIN    256
#define RAWBUF (1u << 20)

static const uint32_t nodes[] = {1, 2};
static const char *mode_name[] = {"none", "trad", "overflow"};

static uint64_t sunk;
static int fin;
static long g_iters;

/* the raw WRITE side: an object of our own in the same channel */
static loco_object_t *raw;
static loco_region_t *rdst, *rsrc, *rflag, *rlocal;
static loco_rref_t peer_dst, peer_flag;

struct rate {
	size_t size;
	int mode; /* 0..2, 3: raw WRITE */
	double calls_s, mb_s;
};

static void die_if(const char *what, int ret)
{
	if (ret)
		bench_die(what, ret);
}

static int sink(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg, (void)ret, (void)cap, (void)rl;
	sunk++;
	return 0;
}

static int count(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg;
	if (cap >= sizeof(sunk)) {
		memcpy(ret, &sunk, sizeof(sunk));
		*rl = sizeof(sunk);
	}
	sunk = 0;
	return 0;
}

static volatile uint64_t *flag_word(void)
{
	return (volatile uint64_t *)loco_region_ptr(rflag);
}

/* pong: node 2 answers node 1's raw flag WRITEs, inside a handler (node 1 started it) */
static int pong(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t *src = loco_region_ptr(rlocal);
	int64_t dl = (int64_t)bench_now_ns() + 120 * SEC;
	loco_waiter_t w;

	(void)arg, (void)ret, (void)cap, (void)rl;
	loco_waiter_init(&w, loco_channel_manager(loco_object_channel(raw)));
	(void)msg;
	for (long i = 1; i <= WARMUP + g_iters; i++) {
		loco_waiter_reset(&w);
		while (__atomic_load_n(flag_word(), __ATOMIC_ACQUIRE) != (uint64_t)i) {
			if ((int64_t)bench_now_ns() > dl)
				return -ETIMEDOUT;
			loco_waiter_pause(&w); /* the manager's policy, as the rpc's waits */
		}
		src[0] = (uint64_t)i;
		die_if("pong write", loco_write(rlocal, 0, &peer_flag, 0, 8, NULL));
	}
	return 0;
}

static double call_rate(loco_rpc_ep_t *ep, size_t size, long n)
{
	uint8_t args[256] = {0};
	uint64_t got = 0, t0 = bench_now_ns();
	uint32_t id = loco_rpc_id("sink");

	for (long i = 0; i < n; i++) {
		memcpy(args, &i, sizeof(i));
		die_if("call", loco_rpc_call(ep, 2, id, args, size, TMO));
	}
	die_if("flush", loco_rpc_flush(ep, 0, TMO));
	die_if("count", loco_rpc_call_return(ep, 2, loco_rpc_id("count"), NULL, 0, &got,
	                                     sizeof(got), NULL, TMO));
	if (got != (uint64_t)n) {
		fprintf(stderr, "rpc-bench: the sink counted %llu calls of %ld\n",
		        (unsigned long long)got, n);
		exit(1);
	}
	return (double)n / ((double)(bench_now_ns() - t0) / 1e9);
}

/*
 * raw_rate -- @n WRITEs of @size bytes into node 2, pipelined as rpipe
 * posts its own: unsignaled, except the last of each window of WIN,
 * attached to one of two keys (WRITEs to one node execute in order, so
 * its completion covers the window); at most two windows in flight.
 */
static double raw_rate(loco_manager_t *m, size_t size, long n)
{
	loco_ack_key_t *k[2];
	uint64_t t0 = bench_now_ns();
	size_t off = 0;
	loco_waiter_t w;
	long i = 0;
	int cur = 0;

	loco_waiter_init(&w, m);
	die_if("ack", loco_ack_key_create(m, &k[0]));
	die_if("ack", loco_ack_key_create(m, &k[1]));
	while (i < n) {
		for (int j = 0; j < WIN && i < n; j++, i++) {
			loco_ack_key_t *a = j == WIN - 1 || i == n - 1 ? k[cur] : NULL;
			int ret;

			if (off + size > RAWBUF)
				off = 0;
			/* -EAGAIN: the fabric's queue is full: wait as rpipe does (a spin waiter drives it) */
			loco_waiter_reset(&w);
			while ((ret = loco_write(rsrc, off, &peer_dst, off, size, a)) == -EAGAIN)
				loco_waiter_pause(&w);
			die_if("write", ret);
			off += size;
		}
		cur ^= 1;
		die_if("ack wait", loco_ack_wait(k[cur], TMO)); /* the window before */
	}
	die_if("ack wait", loco_ack_wait(k[0], TMO));
	die_if("ack wait", loco_ack_wait(k[1], TMO));
	loco_ack_key_destroy(k[0]);
	loco_ack_key_destroy(k[1]);
	return (double)n / ((double)(bench_now_ns() - t0) / 1e9);
}

static void median_p99(double *t, long n, double *med, double *p99)
{
	qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
	*med = t[n / 2];
	*p99 = t[(size_t)n * 99 / 100];
}

static void lat_call_return(loco_rpc_ep_t *ep, long iters, double *t)
{
	uint32_t id = loco_rpc_id("echo");

	for (long i = -WARMUP; i < iters; i++) {
		uint64_t v = (uint64_t)i, r = 0, t0 = bench_now_ns();

		die_if("call_return", loco_rpc_call_return(ep, 2, id, &v, 8, &r, 8, NULL, TMO));
		if (i >= 0)
			t[i] = (double)(bench_now_ns() - t0) / 1e3;
		if (r != v) {
			fprintf(stderr, "rpc-bench: echo %llu gave %llu\n", (unsigned long long)v,
			        (unsigned long long)r);
			exit(1);
		}
	}
}

static void lat_raw_rtt(loco_rpc_ep_t *ep, long iters, double *t)
{
	uint64_t *src = loco_region_ptr(rlocal);
	loco_rpc_ticket_t tk;
	loco_waiter_t w;
	int st = 0;

	loco_waiter_init(&w, loco_channel_manager(loco_object_channel(raw)));
	die_if("pong",
	       loco_rpc_call_return(ep, 2, loco_rpc_id("pong"), NULL, 0, NULL, 0, &tk, TMO));
	die_if("pong flush", loco_rpc_flush(ep, 0, TMO));
	for (long i = 1; i <= WARMUP + iters; i++) {
		uint64_t t0 = bench_now_ns();

		src[0] = (uint64_t)i;
		die_if("ping write", loco_write(rlocal, 0, &peer_flag, 0, 8, NULL));
		loco_waiter_reset(&w);
		while (__atomic_load_n(flag_word(), __ATOMIC_ACQUIRE) != (uint64_t)i)
			loco_waiter_pause(&w);
		if (i > WARMUP)
			t[i - WARMUP - 1] = (double)(bench_now_ns() - t0) / 1e3;
	}
	die_if("pong wait", loco_rpc_wait(ep, &tk, &st, NULL, TMO));
	die_if("pong status", st);
}

/* lat_op -- 8 B one-sided operation @op (0 write, 1 read, 2 faa, 3 cas) + its completion */
static void lat_op(loco_manager_t *m, int op, long iters, double *t)
{
	loco_ack_key_t *k;

	die_if("ack", loco_ack_key_create(m, &k));
	for (long i = -WARMUP; i < iters; i++) {
		uint64_t t0 = bench_now_ns();

		switch (op) {
		case 0:
			die_if("write", loco_write(rlocal, 8, &peer_flag, 8, 8, k));
			break;
		case 1:
			die_if("read", loco_read(rlocal, 8, &peer_flag, 8, 8, k));
			break;
		case 2:
			die_if("faa", loco_faa(rlocal, 8, &peer_flag, 16, 1, k));
			break;
		default:
			die_if("cas", loco_cas(rlocal, 8, &peer_flag, 24, (uint64_t)i,
			                       (uint64_t)i + 1, k));
			break;
		}
		die_if("ack wait", loco_ack_wait(k, TMO));
		if (i >= 0)
			t[i] = (double)(bench_now_ns() - t0) / 1e3;
	}
	loco_ack_key_destroy(k);
}

static int usage(void)
{
	fprintf(stderr, "usage: loco-run -n 2 rpc-bench [--calls N] [--iters N] [--agg-bytes N] "
	                "[--json FILE] [--size 8|64|256] [--modes none,trad,overflow,raw]\n");
	return 2;
}

/* parse_modes -- "none,raw" -> a mask (bit 0..2 the rpc modes, 3 raw); 0 when a name is unknown */
static unsigned parse_modes(const char *list)
{
	static const char *const names[] = {"none", "trad", "overflow", "raw"};
	unsigned mask = 0;

	while (*list != '\0') {
		size_t n = strcspn(list, ",");
		unsigned i;

		for (i = 0; i < 4; i++)
			if (strlen(names[i]) == n && strncmp(list, names[i], n) == 0)
				break;
		if (i == 4)
			return 0;
		mask |= 1u << i;
		list += n + (list[n] == ',');
	}
	return mask;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"calls", required_argument, NULL, 'c'},
	    {"iters", required_argument, NULL, 'i'},
	    {"json", required_argument, NULL, 'j'},
	    {"agg-bytes", required_argument, NULL, 'a'},
	    {"size", required_argument, NULL, 's'},
	    {"modes", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	static const size_t sizes[] = {8, 64, 256};
	static const char *opn[] = {"write", "read", "faa", "cas"};
	const char *json = NULL, *prov = getenv("LOCO_FABRIC"), *wait = getenv("LOCO_WAIT");
	long calls = 200000, iters = 20000;
	size_t agg_bytes = 0; /* 0: the endpoint's default (4 KiB) */
	char json_default[4096];
	struct rate r[12];
	double lat[2][2], ops[4][2], *t;
	loco_rpc_ep_t *ep[3];
	loco_manager_t *m;
	loco_channel_t *ch;
	uint32_t me;
	int c, nr = 0, part = 0;
	size_t only_size = 0; /* --size: 0 = all */
	unsigned modes = 0xf; /* --modes: bit 0..2 the rpc modes, bit 3 raw */

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			calls = atol(optarg);
			break;
		case 'i':
			iters = atol(optarg);
			break;
		case 'j':
			json = optarg;
			break;
		case 'a':
			agg_bytes = (size_t)atol(optarg);
			break;
		case 's':
			only_size = (size_t)atol(optarg);
			part = 1;
			if (only_size != 8 && only_size != 64 && only_size != 256)
				return usage();
			break;
		case 'm':
			modes = parse_modes(optarg);
			part = 1;
			if (modes == 0)
				return usage();
			break;
		default:
			return usage();
		}
	}
	if (prov == NULL)
		prov = "tcp";
	if (wait == NULL)
		wait = "default";
	if (calls < 10 || iters < 10)
		return 2;
	g_iters = iters;
	t = calloc((size_t)iters, sizeof(double));
	if (t == NULL)
		return 1;
	die_if("init", loco_init(NULL, &m));
	me = loco_manager_node_id(m);
	if (me != 1 && me != 2) {
		fprintf(stderr, "rpc-bench: run with loco-run -n 2\n");
		return 2;
	}
	die_if("channel", loco_channel_create(m, NULL, "rpc-bench", 2, &ch));
	for (int e = 0; e < 3; e++) {
		loco_rpc_cfg_t cfg;

		loco_rpc_cfg_default(&cfg, nodes, 2);
		cfg.ring_bytes = 1u << 20;
		cfg.pull_bytes = 64u * 1024;
		cfg.agg = e;
		cfg.agg_bytes = agg_bytes;
		die_if("rpc", loco_rpc_create(ch, mode_name[e], &cfg, &ep[e]));
		die_if("register", loco_rpc_register(ep[e], "sink", sink, NULL, NULL));
		die_if("register", loco_rpc_register(ep[e], "count", count, NULL, NULL));
		die_if("register", loco_rpc_register(ep[e], "echo", bench_rpc_echo, NULL, NULL));
		die_if("register", loco_rpc_register(ep[e], "pong", pong, NULL, NULL));
		die_if("register", loco_rpc_register(ep[e], "fin", bench_rpc_stop, &fin, NULL));
	}
	die_if("raw", loco_object_create(ch, "raw", NULL, NULL, &raw));
	die_if("raw dst", loco_region_create(raw, "dst", RAWBUF, LOCO_ACCESS_WRITE, &rdst));
	die_if("raw src", loco_region_create(raw, "src", RAWBUF, 0, &rsrc));
	die_if("raw flag", loco_region_create(
	                       raw, "flag", 64,
	                       LOCO_ACCESS_WRITE | LOCO_ACCESS_READ | LOCO_ACCESS_ATOMIC, &rflag));
	die_if("raw local", loco_region_create(raw, "local", 64, 0, &rlocal));
	die_if("join", loco_channel_join(ch, 20 * SEC));
	for (int e = 0; e < 3; e++)
		die_if("sync", loco_rpc_sync(ep[e], 20 * SEC));
	die_if("object sync", loco_object_sync(raw, 20 * SEC) < 0 ? -ETIMEDOUT : 0);
	die_if("peer dst", loco_region_remote(rdst, 3 - me, &peer_dst));
	die_if("peer flag", loco_region_remote(rflag, 3 - me, &peer_flag));

	if (me == 2) {
		bench_rpc_serve(ep, 3, m, &fin);
	} else {
		for (int s = 0; s < 3; s++) {
			if (only_size != 0 && sizes[s] != only_size)
				continue;
			for (int e = 0; e < 4; e++) {
				if (!(modes & (1u << e)))
					continue;
				r[nr].size = sizes[s];
				r[nr].mode = e;
				r[nr].calls_s = e < 3 ? call_rate(ep[e], sizes[s], calls)
				                      : raw_rate(m, sizes[s], calls);
				r[nr].mb_s = r[nr].calls_s * (double)sizes[s] / 1e6;
				nr++;
			}
		}
		if (part) {
			die_if("fin", loco_rpc_call(ep[0], 2, loco_rpc_id("fin"), NULL, 0, TMO));
			printf(
			    "rpc-bench: provider %s, wait policy %s, %ld calls per rate (a part: "
			    "no latencies, no JSON)\n",
			    prov, wait, calls);
			printf("%-6s %-10s %12s %10s\n", "size", "mode", "calls/s", "MB/s");
			for (int i = 0; i < nr; i++)
				printf("%-6zu %-10s %12.0f %10.2f\n", r[i].size,
				       r[i].mode == 3 ? "raw WRITE" : mode_name[r[i].mode],
				       r[i].calls_s, r[i].mb_s);
			goto out;
		}
		lat_call_return(ep[0], iters, t);
		median_p99(t, iters, &lat[0][0], &lat[0][1]);
		lat_raw_rtt(ep[0], iters, t);
		median_p99(t, iters, &lat[1][0], &lat[1][1]);
		for (int o = 0; o < 4; o++) {
			lat_op(m, o, iters, t);
			median_p99(t, iters, &ops[o][0], &ops[o][1]);
		}
		die_if("fin", loco_rpc_call(ep[0], 2, loco_rpc_id("fin"), NULL, 0, TMO));

		printf(
		    "rpc-bench: provider %s, wait policy %s, %ld calls per rate, %ld round trips, "
		    "batches of %zu B\n",
		    prov, wait, calls, iters, agg_bytes ? agg_bytes : (size_t)4096);
		printf("%-6s %-10s %12s %10s %10s\n", "size", "mode", "calls/s", "MB/s", "x raw");
		for (int i = 0; i < nr; i++) {
			const struct rate *rw = &r[(i / 4) * 4 + 3];

			printf("%-6zu %-10s %12.0f %10.2f %10.2f\n", r[i].size,
			       r[i].mode == 3 ? "raw WRITE" : mode_name[r[i].mode], r[i].calls_s,
			       r[i].mb_s, r[i].calls_s / rw->calls_s);
		}
		printf("%-26s %10s %10s\n", "round trip (8 B)", "median us", "p99 us");
		printf("%-26s %10.2f %10.2f\n", "call_return", lat[0][0], lat[0][1]);
		printf("%-26s %10.2f %10.2f\n", "raw WRITE + written back", lat[1][0], lat[1][1]);
		for (int o = 0; o < 4; o++)
			printf("%-26s %10.2f %10.2f\n", opn[o], ops[o][0], ops[o][1]);
		for (int i = 0; i < nr; i++)
			printf("loco rate %zu %s %.0f %.3f\n", r[i].size,
			       r[i].mode == 3 ? "raw" : mode_name[r[i].mode], r[i].calls_s,
			       r[i].mb_s);
		printf("loco lat call_return %.3f %.3f\n", lat[0][0], lat[0][1]);
		printf("loco lat rawrtt %.3f %.3f\n", lat[1][0], lat[1][1]);
		for (int o = 0; o < 4; o++)
			printf("loco op %s %.3f %.3f\n", opn[o], ops[o][0], ops[o][1]);
		if (json == NULL) {
			bench_result_path(json_default, sizeof(json_default), "rpc-%s-%s.json",
			                  prov, wait);
			json = json_default;
		}
		{
			FILE *f = fopen(json, "w");
			char host[256] = "?", date[64];
			time_t now = time(NULL);

			if (f == NULL) {
				fprintf(stderr, "rpc-bench: %s: %s\n", json, strerror(errno));
			} else {
				gethostname(host, sizeof(host) - 1);
				strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
				fprintf(
				    f,
				    "{\n  \"bench\": \"rpc-bench\", \"loco_version\": \"%u.%u\", "
				    "\"provider\": \"%s\",\n  \"host\": \"%s\", \"cpus\": %ld, "
				    "\"date\": \"%s\", \"wait\": \"%s\", \"calls\": %ld, "
				    "\"iters\": "
				    "%ld,\n  \"rate\": [\n",
				    loco_version() >> 16, loco_version() & 0xffff, prov, host,
				    sysconf(_SC_NPROCESSORS_ONLN), date, wait, calls, iters);
				for (int i = 0; i < nr; i++)
					fprintf(f,
					        "    {\"size\": %zu, \"mode\": \"%s\", "
					        "\"calls_per_s\": "
					        "%.0f, \"mb_per_s\": %.3f}%s\n",
					        r[i].size,
					        r[i].mode == 3 ? "raw" : mode_name[r[i].mode],
					        r[i].calls_s, r[i].mb_s, i + 1 < nr ? "," : "");
				fprintf(
				    f,
				    "  ],\n  \"latency_us\": {\"call_return_8\": [%.3f, %.3f], "
				    "\"raw_write_rtt_8\": [%.3f, %.3f], \"write\": [%.3f, %.3f], "
				    "\"read\": [%.3f, %.3f], \"faa\": [%.3f, %.3f], \"cas\": "
				    "[%.3f, "
				    "%.3f]}\n}\n",
				    lat[0][0], lat[0][1], lat[1][0], lat[1][1], ops[0][0],
				    ops[0][1], ops[1][0], ops[1][1], ops[2][0], ops[2][1],
				    ops[3][0], ops[3][1]);
				if (fclose(f) == 0)
					printf("results: %s\n", json);
			}
		}
	}
out:
	/* node 2 left its loop on "fin"; let node 1's last call land before leaving */
	sleep(1);
	for (int e = 0; e < 3; e++)
		loco_rpc_destroy(ep[e]);
	loco_object_destroy(raw);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(t);
	return 0;
}
