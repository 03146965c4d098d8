/* SPDX-License-Identifier: BSD-2-Clause */
/* ycsb.c -- the YCSB-style load generator (ycsb.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ycsb.h"

#define VAL_MAX   (1u << 20)
#define HDR_BYTES 16 /* a value: key index, version, then bytes made of both */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ycsb_cfg_default(struct ycsb_cfg *cfg)
{
	*cfg = (struct ycsb_cfg){.workload = 'B',
	                         .dist = YCSB_ZIPFIAN,
	                         .records = 10000,
	                         .value_size = 100,
	                         .duration_s = 10,
	                         .threads = 1,
	                         .clients = 1,
	                         .load = 1};
}

size_t ycsb_key(uint64_t i, char *buf, size_t len)
{
	int n = snprintf(buf, len, "user%012" PRIu64, i);

	return n < 0 ? 0 : (size_t)n;
}

/* ---- random numbers and the key choosers ----------------------------------- */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_01(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t fnv64(uint64_t v)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (int i = 0; i < 8; i++) {
		h ^= v & 0xff;
		h *= 0x100000001b3ull;
		v >>= 8;
	}
	return h;
}

/* YCSB's zipfian generator (Gray et al., "Quickly generating billion-record synthetic
 * databases") */
struct zipf {
	uint64_t n;
	double theta, alpha, zetan, eta, half_pow;
};

static void zipf_init(struct zipf *z, uint64_t n, double theta)
{
	double zeta2 = 1.0 + pow(0.5, theta);

	z->n = n;
	z->theta = theta;
	z->zetan = 0;
	for (uint64_t i = 1; i <= n; i++)
		z->zetan += 1.0 / pow((double)i, theta);
	z->alpha = 1.0 / (1.0 - theta);
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta2 / z->zetan);
	z->half_pow = 1.0 + pow(0.5, theta);
}

static uint64_t zipf_next(const struct zipf *z, uint64_t *s)
{
	double u = rng_01(s), uz = u * z->zetan;
	uint64_t r;

	if (uz < 1.0)
		return 0;
	if (uz < z->half_pow)
		return 1;
	r = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
	return r < z->n ? r : z->n - 1;
}

/* ---- latency histograms ------------------------------------------------------ */

static unsigned bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < 64)
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	if (msb > 45)
		return YCSB_HIST_BUCKETS - 1;
	return (msb - 5) * 64 + (unsigned)((ns >> (msb - 6)) & 63);
}

static uint64_t bucket_mid(unsigned b)
{
	unsigned msb;

	if (b < 64)
		return b;
	msb = b / 64 + 5;
	return ((uint64_t)(64 + b % 64) << (msb - 6)) + ((1ull << (msb - 6)) >> 1);
}

static void hist_add(struct ycsb_hist *h, uint64_t ns)
{
	h->n++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->b[bucket(ns)]++;
}

static void hist_merge(struct ycsb_hist *to, const struct ycsb_hist *from)
{
	to->n += from->n;
	to->sum_ns += from->sum_ns;
	if (from->max_ns > to->max_ns)
		to->max_ns = from->max_ns;
	for (unsigned i = 0; i < YCSB_HIST_BUCKETS; i++)
		to->b[i] += from->b[i];
}

double ycsb_pct(const struct ycsb_hist *h, double p)
{
	uint64_t want, seen = 0;

	if (h->n == 0)
		return 0;
	want = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < YCSB_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want)
			return (double)bucket_mid(i) / 1000.0;
	}
	return (double)h->max_ns / 1000.0;
}

/* ---- values ------------------------------------------------------------------ */

static void value_make(uint8_t *v, size_t len, uint64_t key, uint64_t version)
{
	memcpy(v, &key, 8);
	memcpy(v + 8, &version, 8);
	for (size_t i = HDR_BYTES; i < len; i++)
		v[i] = (uint8_t)(key * 31 + version * 7 + i);
}

/* value_check -- 0 when @v (of @len) is a whole value of @key: its version in *@version. */
static int value_check(const uint8_t *v, size_t len, size_t want_len, uint64_t key,
                       uint64_t *version)
{
	uint64_t k, ver;

	if (len != want_len || len < HDR_BYTES)
		return -EBADMSG;
	memcpy(&k, v, 8);
	memcpy(&ver, v + 8, 8);
	if (k != key)
		return -EBADMSG;
	for (size_t i = HDR_BYTES; i < len; i++)
		if (v[i] != (uint8_t)(key * 31 + ver * 7 + i))
			return -EBADMSG;
	*version = ver;
	return 0;
}

/* ---- the threads ------------------------------------------------------------- */

struct shared {
	const struct ycsb_cfg *cfg;
	const struct ycsb_backend *be;
	struct zipf zipf;
	uint64_t *acked;     /* [records] newest acknowledged version (verify), or NULL */
	int64_t start, stop; /* run phase, ns */
	unsigned ready;      /* threads done with open and load (atomic) */
	int go;              /* the run phase may start (atomic) */
};

struct worker {
	struct shared *sh;
	unsigned id; /* thread */
	pthread_t thread;
	void *h;
	int ret;
	uint64_t seed, seq;
	uint64_t ops[YCSB_NOPS], errs[YCSB_NOPS], notfound;
	struct ycsb_hist hist[YCSB_NOPS];
	uint64_t per_sec[YCSB_SECONDS_MAX]; /* relaxed atomics: the progress line reads them */
	uint8_t *val;
};

static unsigned writers(const struct ycsb_cfg *c)
{
	return c->threads * (c->clients ? c->clients : 1);
}

/* writer_of -- the writer this process's thread @t is among all clients' threads. */
static unsigned writer_of(const struct ycsb_cfg *c, unsigned t)
{
	return c->client * c->threads + t;
}

/*
 * pick -- the next key; an update goes to a key this writer owns (key mod
 * writers), the nearest one at or below the chosen key, so that every key
 * has one writer and "the newest acknowledged version" is well defined.
 */
static uint64_t pick(struct worker *w, bool update)
{
	const struct ycsb_cfg *c = w->sh->cfg;
	uint64_t k = c->dist == YCSB_ZIPFIAN ? fnv64(zipf_next(&w->sh->zipf, &w->seed)) % c->records
	                                     : rng_next(&w->seed) % c->records;
	unsigned nw = writers(c), me = writer_of(c, w->id);

	if (update && nw > 1) {
		k = k - k % nw + me;
		if (k >= c->records)
			k = me < c->records ? me : 0;
	}
	return k;
}

static int do_put(struct worker *w, uint64_t k)
{
	const struct ycsb_cfg *c = w->sh->cfg;
	char key[32];
	size_t klen = ycsb_key(k, key, sizeof(key));
	uint64_t version = ((uint64_t)writer_of(c, w->id) << 40) | ++w->seq;
	int ret;

	value_make(w->val, c->value_size, k, version);
	ret = w->sh->be->put(w->h, key, klen, w->val, c->value_size);
	if (ret == 0 && w->sh->acked != NULL)
		__atomic_store_n(&w->sh->acked[k], w->seq, __ATOMIC_RELAXED);
	return ret;
}

static int do_get(struct worker *w, uint64_t k)
{
	const struct ycsb_cfg *c = w->sh->cfg;
	char key[32];
	size_t klen = ycsb_key(k, key, sizeof(key)), vlen = 0;
	uint64_t version;
	int ret = w->sh->be->get(w->h, key, klen, w->val, VAL_MAX, &vlen);

	if (ret == 0 && value_check(w->val, vlen, c->value_size, k, &version) != 0)
		ret = -EBADMSG; /* a torn or foreign value: never acceptable */
	return ret;
}

static double read_share(char workload)
{
	switch (workload) {
	case 'A':
		return 0.5;
	case 'B':
		return 0.95;
	case 'C':
		return 1.0;
	default:
		return 0.0; /* W */
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	const struct ycsb_cfg *c = sh->cfg;
	double reads = read_share(c->workload);

	w->ret = sh->be->open(sh->be->arg, w->id, &w->h);
	/* load: this thread inserts the keys it owns (key mod writers) */
	for (uint64_t k = writer_of(c, w->id); c->load && w->ret == 0 && k < c->records;
	     k += writers(c))
		w->ret = do_put(w, k);
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
	if (w->ret)
		return NULL;
	while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
		nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
	for (;;) {
		int64_t t0 = now_ns(), t1;
		enum ycsb_op op;
		int ret;

		if (t0 >= sh->stop)
			break;
		op = rng_01(&w->seed) < reads ? YCSB_READ : YCSB_UPDATE;
		ret = op == YCSB_READ ? do_get(w, pick(w, false)) : do_put(w, pick(w, true));
		t1 = now_ns();
		w->ops[op]++;
		if (ret == -ENOENT && op == YCSB_READ) {
			w->notfound++;
		} else if (ret) {
			w->errs[op]++;
			continue;
		}
		hist_add(&w->hist[op], (uint64_t)(t1 - t0));
		if (t1 > sh->start && (t1 - sh->start) / 1000000000 < YCSB_SECONDS_MAX)
			__atomic_add_fetch(&w->per_sec[(t1 - sh->start) / 1000000000], 1,
			                   __ATOMIC_RELAXED);
	}
	return NULL;
}

int ycsb_run(const struct ycsb_cfg *cfg, const struct ycsb_backend *be, struct ycsb_result *res)
{
	struct shared sh = {.cfg = cfg, .be = be};
	struct worker *w;
	int ret = 0;
	unsigned started = 0;

	if (cfg->records == 0 || cfg->threads == 0 || cfg->value_size < HDR_BYTES ||
	    cfg->value_size > VAL_MAX || cfg->duration_s <= 0 ||
	    cfg->duration_s > YCSB_SECONDS_MAX - 1 || strchr("ABCW", cfg->workload) == NULL ||
	    cfg->workload == '\0')
		return -EINVAL;
	memset(res, 0, sizeof(*res));
	if (cfg->dist == YCSB_ZIPFIAN)
		zipf_init(&sh.zipf, cfg->records, 0.99);
	if (cfg->verify) {
		sh.acked = calloc(cfg->records, sizeof(*sh.acked));
		if (sh.acked == NULL)
			return -ENOMEM;
	}
	w = calloc(cfg->threads, sizeof(*w));
	if (w == NULL) {
		free(sh.acked);
		return -ENOMEM;
	}
	for (unsigned t = 0; t < cfg->threads; t++) {
		w[t].sh = &sh;
		w[t].id = t;
		w[t].seed = 0x5eed0000ull + (uint64_t)writer_of(cfg, t) * 7919;
		w[t].val = malloc(VAL_MAX);
		if (w[t].val == NULL ||
		    pthread_create(&w[t].thread, NULL, worker_main, &w[t]) != 0) {
			ret = -ENOMEM;
			break;
		}
		started++;
	}
	/* the run phase starts once every thread opened its handle and loaded its share */
	while (ret == 0 && __atomic_load_n(&sh.ready, __ATOMIC_ACQUIRE) < started)
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	sh.start = now_ns();
	sh.stop = sh.start + (int64_t)(cfg->duration_s * 1e9);
	__atomic_store_n(&sh.go, 1, __ATOMIC_RELEASE);
	/* each second: the progress line, and the caller's tick (a kill or a join at S) */
	for (uint32_t s = 1; ret == 0 && now_ns() < sh.stop; s++) {
		int64_t until = sh.start + (int64_t)s * 1000000000;
		uint64_t n = 0;

		while (now_ns() < until && now_ns() < sh.stop)
			nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
		for (unsigned t = 0; t < started; t++)
			n += __atomic_load_n(&w[t].per_sec[s - 1], __ATOMIC_RELAXED);
		if (cfg->progress)
			fprintf(stderr, "kv-ycsb: %4u s  %10" PRIu64 " ops/s\n", s, n);
		if (cfg->tick != NULL)
			cfg->tick(cfg->tick_arg, s);
	}
	for (unsigned t = 0; t < started; t++)
		pthread_join(w[t].thread, NULL);
	res->secs = (double)(now_ns() - sh.start) / 1e9;
	if (res->secs > cfg->duration_s + 0.5)
		res->secs = cfg->duration_s; /* the last op ends past stop: count the asked span */
	res->nsec = (uint32_t)ceil(cfg->duration_s);
	res->per_sec = calloc(res->nsec ? res->nsec : 1, sizeof(*res->per_sec));
	for (unsigned t = 0; t < started; t++) {
		if (w[t].ret && ret == 0)
			ret = w[t].ret;
		for (int o = 0; o < YCSB_NOPS; o++) {
			res->ops[o] += w[t].ops[o];
			res->errs[o] += w[t].errs[o];
			hist_merge(&res->hist[o], &w[t].hist[o]);
		}
		res->notfound += w[t].notfound;
		for (uint32_t s = 0; res->per_sec != NULL && s < res->nsec; s++)
			res->per_sec[s] += w[t].per_sec[s];
		if (w[t].h != NULL)
			be->close(w[t].h);
	}
	for (unsigned t = 0; t < cfg->threads; t++)
		free(w[t].val);
	free(w);
	res->acked = sh.acked; /* NULL without verify */
	return ret;
}

int ycsb_verify(const struct ycsb_cfg *cfg, const struct ycsb_backend *be, struct ycsb_result *res)
{
	uint8_t *val;
	void *h;
	int ret;

	if (res->acked == NULL)
		return -EINVAL;
	val = malloc(VAL_MAX);
	if (val == NULL)
		return -ENOMEM;
	ret = be->open(be->arg, 0, &h);
	if (ret) {
		free(val);
		return ret;
	}
	res->verified = res->lost = res->corrupt = 0;
	for (unsigned t = 0; t < cfg->threads; t++) {
		unsigned me = writer_of(cfg, t);

		for (uint64_t k = me; k < cfg->records; k += writers(cfg)) {
			uint64_t want = __atomic_load_n(&res->acked[k], __ATOMIC_RELAXED),
			         version = 0;
			char key[32];
			size_t klen = ycsb_key(k, key, sizeof(key)), vlen = 0;
			int r;

			if (want == 0)
				continue; /* never acknowledged */
			res->verified++;
			r = be->get(h, key, klen, val, VAL_MAX, &vlen);
			if (r == 0 && value_check(val, vlen, cfg->value_size, k, &version) != 0) {
				res->corrupt++;
				continue;
			}
			/* the value may be newer (a write in flight at the end), never older */
			if (r != 0 || version >> 40 != me || (version & ((1ull << 40) - 1)) < want)
				res->lost++;
		}
	}
	be->close(h);
	free(val);
	return 0;
}

void ycsb_result_free(struct ycsb_result *res)
{
	free(res->per_sec);
	free(res->acked);
	res->per_sec = NULL;
	res->acked = NULL;
}

static const char *const op_names[YCSB_NOPS] = {"read", "update"};

void ycsb_print(FILE *f, const struct ycsb_cfg *cfg, const struct ycsb_result *res,
                const char *store)
{
	uint64_t total = res->ops[YCSB_READ] + res->ops[YCSB_UPDATE];

	fprintf(f,
	        "kv-ycsb: %s, workload %c, %s keys, %" PRIu64 " records of %zu B, %u thread(s), "
	        "%.1f s\n",
	        store, cfg->workload, cfg->dist == YCSB_ZIPFIAN ? "zipfian 0.99" : "uniform",
	        cfg->records, cfg->value_size, cfg->threads, res->secs);
	fprintf(f, "%-8s %12s %10s %10s %10s %10s %8s\n", "op", "ops/s", "p50 us", "p99 us",
	        "p999 us", "mean us", "errors");
	for (int o = 0; o < YCSB_NOPS; o++) {
		const struct ycsb_hist *h = &res->hist[o];

		if (res->ops[o] == 0)
			continue;
		fprintf(f, "%-8s %12.0f %10.1f %10.1f %10.1f %10.1f %8" PRIu64 "\n", op_names[o],
		        (double)h->n / res->secs, ycsb_pct(h, 50), ycsb_pct(h, 99),
		        ycsb_pct(h, 99.9), h->n ? (double)h->sum_ns / (double)h->n / 1000.0 : 0.0,
		        res->errs[o]);
	}
	fprintf(f, "%-8s %12.0f\n", "total", (double)total / res->secs);
	if (res->notfound)
		fprintf(f, "kv-ycsb: %" PRIu64 " read(s) found no value\n", res->notfound);
	if (res->acked != NULL)
		fprintf(f,
		        "kv-ycsb: check: %" PRIu64 " acknowledged key(s) read back, %" PRIu64
		        " lost, %" PRIu64 " corrupt\n",
		        res->verified, res->lost, res->corrupt);
}

void ycsb_json(FILE *f, const struct ycsb_cfg *cfg, const struct ycsb_result *res,
               const char *store, const char *fabric)
{
	fprintf(f, "{\n  \"store\": \"%s\", ", store);
	if (fabric != NULL)
		fprintf(f, "\"fabric\": \"%s\", ", fabric);
	fprintf(f,
	        "\"workload\": \"%c\", \"dist\": \"%s\", \"records\": %" PRIu64
	        ", \"value_size\": %zu, \"threads\": %u, \"secs\": %.3f,\n  \"ops\": {",
	        cfg->workload, cfg->dist == YCSB_ZIPFIAN ? "zipfian" : "uniform", cfg->records,
	        cfg->value_size, cfg->threads, res->secs);
	for (int o = 0, first = 1; o < YCSB_NOPS; o++) {
		const struct ycsb_hist *h = &res->hist[o];

		if (res->ops[o] == 0)
			continue;
		fprintf(f,
		        "%s\n    \"%s\": {\"ops_per_s\": %.1f, \"p50_us\": %.2f, "
		        "\"p99_us\": %.2f, \"p999_us\": %.2f, \"errors\": %" PRIu64 "}",
		        first ? "" : ",", op_names[o], (double)h->n / res->secs, ycsb_pct(h, 50),
		        ycsb_pct(h, 99), ycsb_pct(h, 99.9), res->errs[o]);
		first = 0;
	}
	fprintf(f, "\n  },\n  \"per_second\": [");
	for (uint32_t s = 0; res->per_sec != NULL && s < res->nsec; s++)
		fprintf(f, "%s%" PRIu64, s ? ", " : "", res->per_sec[s]);
	fprintf(f, "]");
	if (res->acked != NULL)
		fprintf(f,
		        ",\n  \"check\": {\"verified\": %" PRIu64 ", \"lost\": %" PRIu64
		        ", \"corrupt\": %" PRIu64 "}",
		        res->verified, res->lost, res->corrupt);
	fprintf(f, "\n}\n");
}
