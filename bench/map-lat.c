/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-lat.c -- latency of the map's GET and PUT beside the raw operation
 * each is built on.
 *
 *   loco-run -n 3 build/bench/map-lat [--iters N] [--replicas R] [--size S] [--json FILE]
 *
 * Nodes 1..n hold keys (R replicas, default 2). Node 1 measures on keys
 * owned by node 2; the others serve, and look every millisecond for node
 * 1's end. Rows, one per value size S (8 B, 256 B, 4 KiB; key_max 16):
 *   map get S:  loco_map_get() of a key node 2 owns: a READ of node 2's
 *               info word (8 B) and one of the key's slot group (4
 *               slots), posted together, one wait, and the checks;
 *               raw: loco_read of the group's size from node 2 + ack wait.
 *   map put S:  loco_map_put() of a key node 2 owns: a call to node 2,
 *               which WRITEs the write into the logs of its R - 1
 *               replicas (in parallel, waiting for the completions),
 *               applies it and replies: one round trip;
 *               raw: loco_write of one slot's size to node 2 + ack wait.
 * --size S measures value size S only (one map: one server thread per
 * node). Each row: median and p99 of one operation (us) and operations per
 * second (1 / mean); the object's operation and the raw one are timed
 * alternately so that their ratio holds on a noisy machine. Prints a
 * table and writes JSON (default RESULTS/map-<provider>.json; RESULTS is $LOCO_BENCH_OUT, else
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
#include <loco/map.h>

#include "bench.h"

#define MAX_NODES 8
#define NSIZES    3
#define WARMUP    200
#define KEY_MAX   16
#define WAIT_NS   (30ll * 1000000000)
#define TMO       (10ll * 1000000000)
#define TARGET    2

static const size_t sizes[NSIZES] = {8, 256, 4096};

struct result {
	char op[48];
	char raw[48];
	double med_us, p99_us, ops_s;
	double raw_med_us, raw_p99_us, raw_ops_s;
};

struct bench {
	loco_manager_t *m;
	loco_channel_t *ch[NSIZES]; /* one per map: a map takes 27 of a channel's 64 entries */
	loco_map_t *map[NSIZES];
	char key[NSIZES][KEY_MAX];
	size_t klen[NSIZES];
	loco_object_t *raw;
	loco_region_t *buf; /* raw READ/WRITE landing and source, and the end flag */
	loco_ack_key_t *ack;
	uint32_t me;
	long iters;
	double *lat, *lat2;
	uint8_t val[4096];
};

#define CHECK(expr)                             \
	do {                                    \
		int ret_ = (expr);              \
		if (ret_ < 0)                   \
			bench_die(#expr, ret_); \
	} while (0)

static size_t slot_len(size_t vmax)
{
	return 32 + ((KEY_MAX + 7) & ~7ul) + ((vmax + 7) & ~7ul);
}

#define BUF_LEN (LOCO_MAP_GROUP * (32 + KEY_MAX + 4096) + 64)

static void stats(double *lat, long n, double total_us, double *med, double *p99, double *ops)
{
	qsort(lat, (size_t)n, sizeof(*lat), bench_cmp_double);
	*med = lat[n / 2];
	*p99 = lat[(long)((double)n * 0.99)];
	*ops = (double)n / (total_us / 1e6);
}

static void timed_pair(struct bench *b, void (*fn)(struct bench *, int),
                       void (*raw)(struct bench *, int), int arg, struct result *r)
{
	double t, sum = 0, raw_sum = 0;

	for (int i = 0; i < WARMUP; i++) {
		fn(b, arg);
		raw(b, arg);
	}
	for (long i = 0; i < b->iters; i++) {
		t = bench_now_us();
		fn(b, arg);
		b->lat[i] = bench_now_us() - t;
		sum += b->lat[i];
		t = bench_now_us();
		raw(b, arg);
		b->lat2[i] = bench_now_us() - t;
		raw_sum += b->lat2[i];
	}
	stats(b->lat, b->iters, sum, &r->med_us, &r->p99_us, &r->ops_s);
	stats(b->lat2, b->iters, raw_sum, &r->raw_med_us, &r->raw_p99_us, &r->raw_ops_s);
}

static void map_get(struct bench *b, int k)
{
	size_t len;

	CHECK(loco_map_get(b->map[k], b->key[k], b->klen[k], b->val, sizeof(b->val), &len, NULL,
	                   TMO));
}

static void map_put(struct bench *b, int k)
{
	CHECK(loco_map_put(b->map[k], b->key[k], b->klen[k], b->val, sizes[k], NULL, TMO));
}

static void raw_io(struct bench *b, size_t len, int write)
{
	loco_rref_t rr;

	CHECK(loco_region_remote(b->buf, TARGET, &rr));
	if (write)
		CHECK(loco_write(b->buf, 0, &rr, 0, len, b->ack));
	else
		CHECK(loco_read(b->buf, 0, &rr, 0, len, b->ack));
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

static void raw_get(struct bench *b, int k)
{
	raw_io(b, LOCO_MAP_GROUP * slot_len(sizes[k]), 0);
}

static void raw_put(struct bench *b, int k)
{
	raw_io(b, slot_len(sizes[k]), 1);
}

static int end_seen(void *arg)
{
	struct bench *b = arg;
	volatile uint64_t *w = (uint64_t *)((uint8_t *)loco_region_ptr(b->buf) + BUF_LEN - 8);

	return __atomic_load_n(w, __ATOMIC_ACQUIRE) != 0;
}

static void end_all(struct bench *b, uint32_t nodes)
{
	uint64_t *w = (uint64_t *)((uint8_t *)loco_region_ptr(b->buf) + BUF_LEN - 8);

	*w = 1;
	for (uint32_t n = 1; n <= nodes; n++) {
		loco_rref_t rr;

		if (n == b->me)
			continue;
		CHECK(loco_region_remote(b->buf, n, &rr));
		CHECK(loco_write(b->buf, BUF_LEN - 8, &rr, BUF_LEN - 8, 8, b->ack));
	}
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

static int write_json(const char *path, const char *prov, uint32_t nodes, uint32_t reps, long iters,
                      const struct result *r, int n, int argc, char **argv)
{
	FILE *f = fopen(path, "w");
	char host[256] = "?", date[64];
	time_t t = time(NULL);

	if (f == NULL) {
		fprintf(stderr, "map-lat: %s: %s\n", path, strerror(errno));
		return -1;
	}
	gethostname(host, sizeof(host) - 1);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	fprintf(f,
	        "{\n  \"bench\": \"map-lat\", \"loco_version\": \"%u.%u\", \"provider\": \"%s\",\n",
	        loco_version() >> 16, loco_version() & 0xffff, prov);
	fprintf(f, "  \"command\": [");
	for (int i = 0; i < argc; i++)
		fprintf(f, "%s\"%s\"", i ? ", " : "", argv[i]);
	fprintf(f,
	        "],\n  \"host\": \"%s\", \"cpus\": %ld, \"date\": \"%s\", \"nodes\": %u, "
	        "\"replicas\": %u, \"iters\": %ld, \"warmup\": %d,\n  \"ops\": [\n",
	        host, sysconf(_SC_NPROCESSORS_ONLN), date, nodes, reps, iters, WARMUP);
	for (int i = 0; i < n; i++)
		fprintf(
		    f,
		    "    {\"op\": \"%s\", \"median_us\": %.3f, \"p99_us\": %.3f, \"ops_per_s\": "
		    "%.0f,\n     \"raw\": \"%s\", \"raw_median_us\": %.3f, \"raw_p99_us\": %.3f, "
		    "\"raw_ops_per_s\": %.0f, \"ratio_median\": %.3f}%s\n",
		    r[i].op, r[i].med_us, r[i].p99_us, r[i].ops_s, r[i].raw, r[i].raw_med_us,
		    r[i].raw_p99_us, r[i].raw_ops_s, r[i].med_us / r[i].raw_med_us,
		    i + 1 < n ? "," : "");
	fprintf(f, "  ]\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"iters", required_argument, NULL, 'i'}, {"replicas", required_argument, NULL, 'r'},
	    {"json", required_argument, NULL, 'j'},  {"size", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
	};
	static struct bench b = {.iters = 5000};
	struct result res[2 * NSIZES];
	const char *env = getenv("LOCO_NODES"), *json = NULL, *prov = getenv("LOCO_FABRIC");
	uint32_t nodes = env ? (uint32_t)atoi(env) : 1, reps = 2, ids[MAX_NODES];
	char json_default[4096];
	int c, nres = 0;
	size_t only = 0; /* --size: that value size only (one map, one server thread) */
	int k0 = 0, k1 = NSIZES;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			b.iters = strtol(optarg, NULL, 10);
			break;
		case 'r':
			reps = (uint32_t)atoi(optarg);
			break;
		case 'j':
			json = optarg;
			break;
		case 's':
			only = (size_t)atol(optarg);
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
			        "usage: loco-run -n N map-lat [--iters N] [--replicas R] [--size "
			        "8|256|4096] [--json FILE]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (b.iters < 100 || nodes < 2 || nodes > MAX_NODES || reps < 1 || reps > nodes) {
		fprintf(stderr,
		        "map-lat: run under loco-run -n N (2..%d), --iters >= 100, "
		        "1 <= --replicas <= N\n",
		        MAX_NODES);
		return 2;
	}
	if (prov == NULL || *prov == '\0')
		prov = "tcp";
	if (json == NULL) {
		bench_result_path(json_default, sizeof(json_default), "map-%s.json", prov);
		json = json_default;
	}
	for (int k = 0; k < NSIZES && only; k++)
		if (sizes[k] == only) {
			k0 = k;
			k1 = k + 1;
		}
	if (only && k1 - k0 != 1) {
		fprintf(stderr, "map-lat: --size is 8, 256 or 4096\n");
		return 2;
	}
	b.lat = calloc((size_t)b.iters, sizeof(*b.lat));
	b.lat2 = calloc((size_t)b.iters, sizeof(*b.lat2));
	if (b.lat == NULL || b.lat2 == NULL)
		bench_die("calloc", -ENOMEM);
	for (uint32_t i = 0; i < nodes; i++)
		ids[i] = i + 1;
	memset(b.val, 'v', sizeof(b.val));

	CHECK(loco_init(NULL, &b.m));
	b.me = loco_manager_node_id(b.m);
	for (int k = k0; k < k1; k++) {
		loco_map_cfg_t cfg;
		char name[24];

		snprintf(name, sizeof(name), "map-lat%d", k);
		CHECK(loco_channel_create(b.m, NULL, name, nodes, &b.ch[k]));
		loco_map_cfg_default(&cfg, ids, nodes);
		cfg.key_max = KEY_MAX;
		cfg.value_max = sizes[k];
		cfg.replicas = reps;
		cfg.capacity = 256;
		snprintf(name, sizeof(name), "m%zu", sizes[k]);
		CHECK(loco_map_create(b.ch[k], name, &cfg, &b.map[k]));
	}
	CHECK(loco_object_create(b.ch[k0], "raw", NULL, NULL, &b.raw));
	CHECK(loco_region_create(b.raw, "buf", BUF_LEN, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE,
	                         &b.buf));
	CHECK(loco_ack_key_create(b.m, &b.ack));
	for (int k = k0; k < k1; k++)
		CHECK(loco_channel_join(b.ch[k], WAIT_NS));
	for (int k = k0; k < k1; k++)
		CHECK(loco_map_sync(b.map[k], WAIT_NS));

	if (b.me == 1) {
		/* a key node 2 owns, in each map */
		for (int k = k0; k < k1; k++) {
			for (int i = 0;; i++) {
				snprintf(b.key[k], KEY_MAX, "key-%d", i);
				b.klen[k] = strlen(b.key[k]);
				if (loco_map_owner(b.map[k], b.key[k], b.klen[k]) == TARGET)
					break;
			}
			map_put(&b, k);
		}
		for (int k = k0; k < k1; k++) {
			struct result *r = &res[nres++];

			snprintf(r->op, sizeof(r->op), "map get %zu B", sizes[k]);
			snprintf(r->raw, sizeof(r->raw), "loco_read %zu B + ack",
			         LOCO_MAP_GROUP * slot_len(sizes[k]));
			timed_pair(&b, map_get, raw_get, k, r);
		}
		for (int k = k0; k < k1; k++) {
			struct result *r = &res[nres++];

			snprintf(r->op, sizeof(r->op), "map put %zu B (%u replicas)", sizes[k],
			         reps);
			snprintf(r->raw, sizeof(r->raw), "loco_write %zu B + ack",
			         slot_len(sizes[k]));
			timed_pair(&b, map_put, raw_put, k, r);
		}
		end_all(&b, nodes);
		printf("map-lat: provider %s, %u nodes, %u replicas, %ld iterations after %d "
		       "warm-up\n",
		       prov, nodes, reps, b.iters, WARMUP);
		printf("%-28s %9s %9s %10s | %-24s %9s %9s %10s %6s\n", "operation", "median us",
		       "p99 us", "ops/s", "raw operation", "median us", "p99 us", "ops/s", "ratio");
		for (int i = 0; i < nres; i++)
			printf("%-28s %9.2f %9.2f %10.0f | %-24s %9.2f %9.2f %10.0f %6.2f\n",
			       res[i].op, res[i].med_us, res[i].p99_us, res[i].ops_s, res[i].raw,
			       res[i].raw_med_us, res[i].raw_p99_us, res[i].raw_ops_s,
			       res[i].med_us / res[i].raw_med_us);
		if (write_json(json, prov, nodes, reps, b.iters, res, nres, argc, argv) == 0)
			printf("results: %s\n", json);
		else
			return 1;
		fflush(stdout);
	} else if (bench_poll(end_seen, NULL, &b, 1000, 600000) == 0) {
		bench_die("waiting for node 1", -ETIMEDOUT);
	}
	usleep(200000); /* the last calls and acks of the others */
	for (int k = k0; k < k1; k++)
		loco_map_destroy(b.map[k]);
	loco_ack_key_destroy(b.ack);
	loco_object_destroy(b.raw);
	for (int k = k0; k < k1; k++)
		CHECK(loco_channel_destroy(b.ch[k]));
	loco_fini(b.m);
	free(b.lat);
	free(b.lat2);
	return 0;
}
