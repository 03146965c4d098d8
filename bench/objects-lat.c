/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * objects-lat.c -- latency and rate of the owned_var, sst and barrier
 * operations, each beside the raw operation it is built on (DESIGN §8).
 *
 *   loco-run -n 3 build/bench/objects-lat [--iters N] [--json FILE]
 *
 * Node 1 measures; the other nodes hold replicas, look every millisecond
 * for node 1's go, then take part in the barrier rounds. Rows of the table, one per operation:
 *   owned_var push S:  a new S-byte value (memset) + store +
 *                      push_broadcast(ack) + ack wait;
 *                      raw: a new value (memset of S bytes) in registered
 *                      memory + loco_write of the encoded size to every
 *                      peer from there + ack wait: both sides make the
 *                      value they send.
 *   owned_var load S:  loco_owned_var_load() of a stable value;
 *                      raw: memcpy of the encoded size.
 *   sst push S:        store_mine + push_broadcast(ack) + ack wait;
 *                      raw: as for owned_var push.
 *   barrier wait:      loco_barrier_wait() on all nodes;
 *                      raw: the same algorithm by hand: an 8-byte
 *                      loco_write of the episode to every peer, polling
 *                      every peer's word, ack wait.
 * Each row: median and p99 of one operation (us), and operations per
 * second (1 / mean). Every row times the object's operation and its raw
 * operation alternately, one of each in turn (the barrier rounds too, on
 * every node), so that the ratio holds when the machine's speed drifts. Prints a table and writes
 * JSON (default RESULTS/objects-<provider>.json; RESULTS is $LOCO_BENCH_OUT, else results/ beside
 * the program: build/bench/results/).
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/owned_var.h>
#include <loco/sst.h>

#include "bench.h"

#define MAX_PEERS 16
#define NSIZES    3
#define WARMUP    200
#define RAW_SLOT  64 /* bytes between two nodes' words of the raw barrier */
#define WAIT_NS   (30ll * 1000000000)
#define OWNER     1
#define ENC_MAX   (16 + 4096)

static const size_t sizes[NSIZES] = {8, 48, 4096};
static const size_t data_off[NSIZES] = {0, 4, 16};        /* where the value is in its encoding */
static const size_t enc_len[NSIZES] = {8, 64, 16 + 4096}; /* loco_owned_var(3) encodings */

struct result {
	char op[48];
	char raw[48];
	double med_us, p99_us, ops_s;
	double raw_med_us, raw_p99_us, raw_ops_s;
};

struct bench {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_owned_var_t *ov[NSIZES];
	loco_sst_t *sst[NSIZES];
	loco_barrier_t *bar;
	loco_object_t *raw;
	loco_region_t *src; /* raw writes' source (ENC_MAX bytes) and raw barrier words */
	loco_region_t *dst; /* raw writes' target (ENC_MAX bytes) */
	loco_region_t *bw;  /* raw barrier: word of node n at n * RAW_SLOT */
	loco_ack_key_t *ack;
	uint32_t me, peers[MAX_PEERS];
	int npeers;
	long iters;
	double *lat;
	double *lat2; /* the raw operation's, in timed_pair() */
};

#define CHECK(expr)                             \
	do {                                    \
		int ret_ = (expr);              \
		if (ret_ < 0)                   \
			bench_die(#expr, ret_); \
	} while (0)

/* stats -- median, p99 and rate of @n latencies in @lat (sorted here) over @total_us. */
static void stats(double *lat, long n, double total_us, double *med, double *p99, double *ops)
{
	qsort(lat, (size_t)n, sizeof(*lat), bench_cmp_double);
	*med = lat[n / 2];
	*p99 = lat[(long)((double)n * 0.99)];
	*ops = (double)n / (total_us / 1e6);
}

/*
 * timed_pair -- @fn and its raw operation @raw alternately, @iters times
 * each after WARMUP: a slow spell of the machine hits both alike, so
 * their ratio holds on a noisy machine. Fills both rows of @r.
 */
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

/* ---- the operations --------------------------------------------------- */

static uint64_t counter;

static void ov_push(struct bench *b, int k)
{
	uint8_t val[4096];

	memset(val, (int)(++counter & 0xff), sizes[k]);
	CHECK(loco_owned_var_store(b->ov[k], val));
	CHECK(loco_owned_var_push_broadcast(b->ov[k], b->ack));
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

static void sst_push(struct bench *b, int k)
{
	uint8_t row[4096];

	memset(row, (int)(++counter & 0xff), sizes[k]);
	CHECK(loco_sst_store_mine(b->sst[k], row));
	CHECK(loco_sst_push_broadcast(b->sst[k], b->ack));
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

static void raw_push(struct bench *b, int k)
{
	/* the value, made where it is sent from, as the object's caller makes it in val */
	memset((uint8_t *)loco_region_ptr(b->src) + data_off[k], (int)(++counter & 0xff), sizes[k]);
	for (int i = 0; i < b->npeers; i++) {
		loco_rref_t rr;

		CHECK(loco_region_remote(b->dst, b->peers[i], &rr));
		CHECK(loco_write(b->src, 0, &rr, 0, enc_len[k], b->ack));
	}
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

static volatile uint64_t sink;

static void ov_load(struct bench *b, int k)
{
	uint64_t val[4096 / 8];

	CHECK(loco_owned_var_load(b->ov[k], val));
	sink += val[0];
}

static void raw_load(struct bench *b, int k)
{
	uint64_t val[ENC_MAX / 8];

	memcpy(val, loco_region_ptr(b->src), enc_len[k]);
	__asm__ __volatile__("" : : "r"(val) : "memory");
	sink += val[0];
}

static void bar_wait(struct bench *b, int k)
{
	(void)k;
	CHECK(loco_barrier_wait(b->bar, WAIT_NS));
}

/* raw barrier: the same algorithm as the barrier's, on a plain region */
static uint64_t raw_episode;

static void raw_bar_wait(struct bench *b, int k)
{
	volatile uint64_t *w = loco_region_ptr(b->bw);
	uint64_t e = ++raw_episode;
	unsigned spin = 0;

	(void)k;
	__atomic_store_n(&w[b->me * RAW_SLOT / 8], e, __ATOMIC_RELEASE);
	for (int i = 0; i < b->npeers; i++) {
		loco_rref_t rr;

		CHECK(loco_region_remote(b->bw, b->peers[i], &rr));
		CHECK(loco_write(b->bw, b->me * RAW_SLOT, &rr, b->me * RAW_SLOT, 8, b->ack));
	}
	for (int i = 0; i < b->npeers; i++) {
		double dl = bench_now_us() + WAIT_NS / 1000;

		while (__atomic_load_n(&w[b->peers[i] * RAW_SLOT / 8], __ATOMIC_ACQUIRE) < e) {
			/* as the barrier waits: spin, yield, then sleep */
			struct timespec ts = {.tv_nsec = 1000};

			if (++spin < 64)
				continue;
			if (bench_now_us() > dl)
				bench_die("raw barrier", -ETIMEDOUT);
			if (spin < 80)
				sched_yield();
			else
				nanosleep(&ts, NULL);
		}
	}
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

/* ---- set-up ------------------------------------------------------------ */

static void setup(struct bench *b, uint32_t nodes)
{
	char name[16];

	CHECK(loco_init(NULL, &b->m));
	b->me = loco_manager_node_id(b->m);
	if (b->me * RAW_SLOT >= 4096) {
		fprintf(stderr, "objects-lat: node ids up to %d\n", 4096 / RAW_SLOT - 1);
		exit(2);
	}
	CHECK(loco_channel_create(b->m, NULL, "objects-lat", nodes, &b->ch));
	for (int k = 0; k < NSIZES; k++) {
		snprintf(name, sizeof(name), "ov%zu", sizes[k]);
		CHECK(loco_owned_var_create(b->ch, name, OWNER, sizes[k], &b->ov[k]));
		snprintf(name, sizeof(name), "sst%zu", sizes[k]);
		CHECK(loco_sst_create(b->ch, name, sizes[k], 64, &b->sst[k]));
	}
	CHECK(loco_barrier_create(b->ch, "bar", &b->bar));
	CHECK(loco_object_create(b->ch, "raw", NULL, NULL, &b->raw));
	CHECK(loco_region_create(b->raw, "src", ENC_MAX, 0, &b->src));
	CHECK(loco_region_create(b->raw, "dst", ENC_MAX, LOCO_ACCESS_WRITE, &b->dst));
	CHECK(loco_region_create(b->raw, "bw", 4096, LOCO_ACCESS_WRITE, &b->bw));
	CHECK(loco_ack_key_create(b->m, &b->ack));
	CHECK(loco_channel_join(b->ch, WAIT_NS));
	b->npeers = loco_channel_peers(b->ch, b->peers, MAX_PEERS);
	if (b->npeers != (int)nodes - 1) {
		fprintf(stderr, "objects-lat: %d peers, expected %u\n", b->npeers, nodes - 1);
		exit(1);
	}
}

static void teardown(struct bench *b)
{
	loco_ack_key_destroy(b->ack);
	loco_object_destroy(b->raw);
	loco_barrier_destroy(b->bar);
	for (int k = 0; k < NSIZES; k++) {
		loco_sst_destroy(b->sst[k]);
		loco_owned_var_destroy(b->ov[k]);
	}
	CHECK(loco_channel_destroy(b->ch));
	loco_fini(b->m);
}

/*
 * go / go_wait -- node 1 tells the others to start the barrier rounds
 * (word 0 of "bw"); until then they look every millisecond, so that they
 * stay out of the way of node 1's measurements.
 */
static void go(struct bench *b)
{
	volatile uint64_t *w = loco_region_ptr(b->bw);

	w[0] = 1;
	for (int i = 0; i < b->npeers; i++) {
		loco_rref_t rr;

		CHECK(loco_region_remote(b->bw, b->peers[i], &rr));
		CHECK(loco_write(b->bw, 0, &rr, 0, 8, b->ack));
	}
	CHECK(loco_ack_wait(b->ack, WAIT_NS));
}

/* go_seen -- a bench_poll() check: whether node 1's go (word 0 of "bw") arrived. */
static int go_seen(void *arg)
{
	struct bench *b = arg;
	volatile uint64_t *w = loco_region_ptr(b->bw);

	return __atomic_load_n(&w[0], __ATOMIC_ACQUIRE) != 0;
}

static void go_wait(struct bench *b)
{
	if (bench_poll(go_seen, NULL, b, 1000, 600000) == 0)
		bench_die("waiting for node 1", -ETIMEDOUT);
}

/* barriers -- the raw and the loco barrier rounds, in turn, on every node (same count). */
static void barriers(struct bench *b, struct result *r)
{
	struct result tmp;

	timed_pair(b, bar_wait, raw_bar_wait, 0, r != NULL ? r : &tmp);
	bar_wait(b, 0); /* nobody leaves while a peer still waits */
}

static int write_json(const char *path, const char *prov, uint32_t nodes, long iters,
                      const struct result *r, int n, int argc, char **argv)
{
	FILE *f = fopen(path, "w");
	char host[256] = "?";
	time_t t = time(NULL);
	char date[64];

	if (f == NULL) {
		fprintf(stderr, "objects-lat: %s: %s\n", path, strerror(errno));
		return -1;
	}
	gethostname(host, sizeof(host) - 1);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	fprintf(
	    f,
	    "{\n  \"bench\": \"objects-lat\", \"loco_version\": \"%u.%u\", \"provider\": \"%s\",\n",
	    loco_version() >> 16, loco_version() & 0xffff, prov);
	fprintf(f, "  \"command\": [");
	for (int i = 0; i < argc; i++)
		fprintf(f, "%s\"%s\"", i ? ", " : "", argv[i]);
	fprintf(f,
	        "],\n  \"host\": \"%s\", \"cpus\": %ld, \"date\": \"%s\", \"nodes\": %u, "
	        "\"iters\": %ld, \"warmup\": %d,\n  \"ops\": [\n",
	        host, sysconf(_SC_NPROCESSORS_ONLN), date, nodes, iters, WARMUP);
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
	    {"iters", required_argument, NULL, 'i'},
	    {"json", required_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct bench b = {.iters = 5000};
	struct result res[3 * NSIZES + 1];
	const char *env = getenv("LOCO_NODES"), *json = NULL, *prov = getenv("LOCO_FABRIC");
	uint32_t nodes = env ? (uint32_t)atoi(env) : 1;
	char json_default[4096];
	int c, nres = 0;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			b.iters = strtol(optarg, NULL, 10);
			break;
		case 'j':
			json = optarg;
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
			        "usage: loco-run -n N objects-lat [--iters N] [--json FILE]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (b.iters < 100 || nodes < 2 || nodes > MAX_PEERS) {
		fprintf(stderr, "objects-lat: run under loco-run -n N (2..%d), --iters >= 100\n",
		        MAX_PEERS);
		return 2;
	}
	if (prov == NULL || *prov == '\0')
		prov = "tcp";
	if (json == NULL) {
		bench_result_path(json_default, sizeof(json_default), "objects-%s.json", prov);
		json = json_default;
	}
	b.lat = calloc((size_t)b.iters, sizeof(*b.lat));
	b.lat2 = calloc((size_t)b.iters, sizeof(*b.lat2));
	if (b.lat == NULL || b.lat2 == NULL)
		bench_die("calloc", -ENOMEM);
	setup(&b, nodes);

	if (b.me == OWNER) {
		for (int k = 0; k < NSIZES; k++) {
			struct result *r = &res[nres++];

			snprintf(r->op, sizeof(r->op), "owned_var push %zu B", sizes[k]);
			snprintf(r->raw, sizeof(r->raw), "loco_write %zu B x%d + ack", enc_len[k],
			         b.npeers);
			timed_pair(&b, ov_push, raw_push, k, r);
		}
		for (int k = 0; k < NSIZES; k++) {
			struct result *r = &res[nres++];

			snprintf(r->op, sizeof(r->op), "owned_var load %zu B", sizes[k]);
			snprintf(r->raw, sizeof(r->raw), "memcpy %zu B", enc_len[k]);
			timed_pair(&b, ov_load, raw_load, k, r);
		}
		for (int k = 0; k < NSIZES; k++) {
			struct result *r = &res[nres++];

			snprintf(r->op, sizeof(r->op), "sst push %zu B", sizes[k]);
			snprintf(r->raw, sizeof(r->raw), "loco_write %zu B x%d + ack", enc_len[k],
			         b.npeers);
			timed_pair(&b, sst_push, raw_push, k, r);
		}
		go(&b);
		snprintf(res[nres].op, sizeof(res[nres].op), "barrier wait (%u nodes)", nodes);
		snprintf(res[nres].raw, sizeof(res[nres].raw),
		         "hand-made: 8 B write x%d, poll, ack", b.npeers);
		barriers(&b, &res[nres++]);
	} else {
		go_wait(&b);
		barriers(&b, NULL);
	}

	if (b.me == OWNER) {
		printf("objects-lat: provider %s, %u nodes, %ld iterations after %d warm-up\n",
		       prov, nodes, b.iters, WARMUP);
		printf("%-26s %9s %9s %10s | %-30s %9s %9s %10s %6s\n", "operation", "median us",
		       "p99 us", "ops/s", "raw operation", "median us", "p99 us", "ops/s", "ratio");
		for (int i = 0; i < nres; i++)
			printf("%-26s %9.2f %9.2f %10.0f | %-30s %9.2f %9.2f %10.0f %6.2f\n",
			       res[i].op, res[i].med_us, res[i].p99_us, res[i].ops_s, res[i].raw,
			       res[i].raw_med_us, res[i].raw_p99_us, res[i].raw_ops_s,
			       res[i].med_us / res[i].raw_med_us);
		if (write_json(json, prov, nodes, b.iters, res, nres, argc, argv) == 0)
			printf("results: %s\n", json);
		else
			return 1;
		fflush(stdout);
	}
	usleep(200000); /* the last acks of the others */
	teardown(&b);
	free(b.lat);
	free(b.lat2);
	return 0;
}
