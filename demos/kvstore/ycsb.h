/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ycsb.h -- a YCSB-style load generator for key-value stores, behind a
 * small backend interface (a LOCO map, memcached, ...): the core
 * workloads A (50 % reads, 50 % updates), B (95/5), C (reads only) and W
 * (updates only), uniform or zipfian (theta 0.99, scrambled as YCSB
 * does) keys, a load phase and a timed run phase on N threads, latency
 * histograms per operation type (p50/p99/p999), a per-second timeline,
 * JSON out. Every key has one writer among all clients' threads (key
 * mod writers: an update goes to the nearest key the thread owns), so
 * "the newest acknowledged version" of a key is well defined. The
 * client-side check: every acknowledged write is remembered, and
 * ycsb_verify() reads every key back at the end (lost: missing or
 * older). A value carries its key and version in its first 16 bytes and
 * bytes made of both after them: a torn or foreign value is an error.
 *
 * Thread safety: ycsb_run() starts and joins its threads; a backend's
 * handle is used by one thread.
 */
#ifndef KV_YCSB_H
#define KV_YCSB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A store, as the generator sees it. Every call returns 0 or -errno. */
struct ycsb_backend {
	const char *name;
	/* a handle for thread @thread (0 .. threads - 1) */
	int (*open)(void *arg, unsigned thread, void **h);
	/* -ENOENT: no such key; *@vlen the value's length (copied up to @cap) */
	int (*get)(void *h, const char *key, size_t klen, void *val, size_t cap, size_t *vlen);
	int (*put)(void *h, const char *key, size_t klen, const void *val, size_t vlen);
	void (*close)(void *h);
	void *arg;
};

enum ycsb_dist {
	YCSB_UNIFORM,
	YCSB_ZIPFIAN
};
enum ycsb_op {
	YCSB_READ,
	YCSB_UPDATE,
	YCSB_NOPS
};

struct ycsb_cfg {
	char workload;       /* 'A', 'B', 'C' or 'W' */
	enum ycsb_dist dist; /* key choice */
	uint64_t records;    /* keys 0 .. records - 1 */
	size_t value_size;   /* bytes, >= 16 (a value carries its key and version) */
	double duration_s;   /* run phase */
	unsigned threads;    /* client threads of this process */
	unsigned clients;    /* client processes in all (each runs this) */
	unsigned client;     /* this one's number, 0 .. clients - 1 */
	int progress;        /* a line per second on stderr */
	int load;            /* run the load phase first (insert every record) */
	int verify;          /* remember acknowledged writes; ycsb_verify() at the end */
	/* called by ycsb_run() after each second S of the run phase (may be NULL) */
	void (*tick)(void *arg, uint32_t s);
	void *tick_arg;
};

#define YCSB_HIST_BUCKETS (41 * 64) /* 64 sub-buckets per power of two of nanoseconds */
#define YCSB_SECONDS_MAX  3600

struct ycsb_hist {
	uint64_t n, sum_ns, max_ns;
	uint64_t b[YCSB_HIST_BUCKETS];
};

struct ycsb_result {
	double secs; /* run phase, measured */
	uint64_t ops[YCSB_NOPS], errs[YCSB_NOPS], notfound;
	struct ycsb_hist hist[YCSB_NOPS]; /* successful operations */
	uint32_t nsec;                    /* seconds in the timeline */
	uint64_t *per_sec;                /* [nsec] operations completed in each second */
	uint64_t *acked;                  /* [records] newest acknowledged version (verify) */
	uint64_t verified, lost, corrupt; /* ycsb_verify() */
};

/* ycsb_cfg_default -- workload B, zipfian, 10,000 records of 100 bytes, 10 s, 1 thread. */
void ycsb_cfg_default(struct ycsb_cfg *cfg);

/* ycsb_run -- load (if asked) and run @cfg against @be; *@res filled. 0 or -errno. */
int ycsb_run(const struct ycsb_cfg *cfg, const struct ycsb_backend *be, struct ycsb_result *res);

/*
 * ycsb_verify -- read back every key this process wrote and acknowledged:
 * lost = keys whose value is missing or older than the newest
 * acknowledged version. Needs cfg->verify. 0 or -errno.
 */
int ycsb_verify(const struct ycsb_cfg *cfg, const struct ycsb_backend *be, struct ycsb_result *res);

/* ycsb_pct -- the @p-th percentile (0..100) of @h in microseconds (0 when empty). */
double ycsb_pct(const struct ycsb_hist *h, double p);

/*
 * ycsb_print / ycsb_json -- the summary table; the JSON document (with
 * "fabric": @fabric unless it is NULL: the store's transport).
 */
void ycsb_print(FILE *f, const struct ycsb_cfg *cfg, const struct ycsb_result *res,
                const char *store);
void ycsb_json(FILE *f, const struct ycsb_cfg *cfg, const struct ycsb_result *res,
               const char *store, const char *fabric);

void ycsb_result_free(struct ycsb_result *res);

/* ycsb_key -- the key string of record @i ("user" + 12 digits, as YCSB): its length. */
size_t ycsb_key(uint64_t i, char *buf, size_t len);

#endif
