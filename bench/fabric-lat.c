/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fabric-lat.c -- latency and op rate of the fabric ops table: the floor
 * that every object's operations are measured against (DESIGN §8).
 *
 * The program forks a target process that opens its own fabric, registers
 * one 4 KiB region for remote READ, WRITE and atomics, sends the region's
 * address, rkey and its endpoint through a pipe, accepts the link and then
 * idles: the provider (on tcp, its NIC thread) serves every request. The
 * parent connects and measures, one operation at a time, 8-byte WRITE,
 * READ, CAS and FAA (post signaled, busy-poll for the completion, doing
 * the provider's work between polls as LOCO's waiters do: fab_progress()
 * without a wait, on tcp the socket read from this thread; a yield when
 * nothing came), then
 * the rate of pipelined 8-byte WRITEs, every 64th signaled, with at most
 * sq_depth requests outstanding. It prints a table and writes JSON.
 * With --poll wait, an empty poll blocks in fab_wait() instead of spinning.
 * At the end, and on any error, the parent kills and reaps the target by
 * PID.
 *
 *   fabric-lat [--iters N] [--warmup N] [--rate-ops N] [--poll spin|wait]
 *              [--provider NAME] [--json FILE]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <loco/version.h>

#include "bench.h"
#include "fabric.h"

#define REGION_LEN     4096u
#define SIGNAL_EVERY   64 /* rate test: one signaled WRITE per this many */
#define OP_TIMEOUT_NS  (10ull * 1000 * 1000 * 1000)
#define TARGET_WAIT_MS 10000 /* the target's setup must finish within this */
#define CONNECT_MS     5000

/* Where the measured words live in the target's region (one line each). */
#define OFF_WRITE 0u
#define OFF_CAS   64u
#define OFF_FAA   128u
#define OFF_RATE  1024u /* the rate test writes round-robin over [1024, 4096) */

/* What the target sends the parent once it is ready. */
struct target_info {
	int32_t status; /* 0, or the -errno of the step that failed */
	char step[28];  /* that step, for the message */
	uint32_t rkey;
	uint64_t addr;
	struct fab_addr ep;
};

struct opts {
	long iters;
	long warmup;
	long rate_ops;
	bool block; /* --poll wait: sleep in fab_wait() instead of spinning on fab_poll() */
	const char *provider;
	const char *json;
};

struct stats {
	const char *op;
	double median_us;
	double p99_us;
	double min_us;
	double max_us;
	double mean_us;
};

struct bench {
	const struct opts *o;
	struct fab *fab;
	struct fab_mr *mr;
	struct fab_link *link;
	uint64_t *buf; /* local registered buffer: sources and results */
	uint64_t raddr;
	uint32_t rkey;
	uint64_t *lat_ns;
};

static int write_full(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len > 0) {
		ssize_t n = write(fd, c, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -errno;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* read_full -- read @len bytes within @timeout_ms; -ETIMEDOUT, -EPIPE (EOF), -errno. */
static int read_full(int fd, void *p, size_t len, int timeout_ms)
{
	uint64_t deadline = bench_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	char *c = p;

	while (len > 0) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t t = bench_now_ns();
		ssize_t n;
		int r;

		if (t >= deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)((deadline - t) / 1000000ull) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			continue;
		n = read(fd, c, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * target_main -- the child: open a fabric, register the region, report,
 * accept the link, then idle until the parent kills it or closes @ctl_fd.
 * Never returns.
 */
static void target_main(const struct opts *o, pid_t parent, int info_fd, int ctl_fd)
{
	unsigned access = FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ |
	                  FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC;
	struct target_info ti = {0};
	struct fab_link *link = NULL;
	struct fab_mr *mr = NULL;
	struct fab *fab = NULL;
	void *region;
	int ret;

	/* die with the parent, whatever way it goes */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);

	region = aligned_alloc(4096, REGION_LEN);
	if (region == NULL) {
		ret = -ENOMEM;
		snprintf(ti.step, sizeof(ti.step), "aligned_alloc");
		goto report;
	}
	memset(region, 0, REGION_LEN);

	ret = fab_open(o->provider, NULL, &fab);
	if (ret) {
		snprintf(ti.step, sizeof(ti.step), "fab_open");
		goto report;
	}
	ret = fab_mr_reg(fab, region, REGION_LEN, access, &mr);
	if (ret) {
		snprintf(ti.step, sizeof(ti.step), "fab_mr_reg");
		goto report;
	}
	ret = fab_get_addr(fab, &ti.ep);
	if (ret) {
		snprintf(ti.step, sizeof(ti.step), "fab_get_addr");
		goto report;
	}
	ti.addr = (uint64_t)(uintptr_t)region;
	ti.rkey = mr->rkey;

report:
	ti.status = ret;
	if (write_full(info_fd, &ti, sizeof(ti)) != 0 || ret != 0)
		_exit(1);
	close(info_fd);

	/*
	 * The link serves one-sided requests from the moment it is up; accept
	 * it anyway so that the provider's queue of new links stays empty.
	 * Stop when the parent closes its end of @ctl_fd.
	 */
	for (;;) {
		struct pollfd pfd = {.fd = ctl_fd, .events = POLLIN};
		char priv[FAB_PRIV_MAX], c;
		size_t priv_len = sizeof(priv);

		if (link == NULL) {
			ret = fab_accept(fab, 1, 100, &link, priv, &priv_len);
			if (ret == 0 &&
			    fab_link_admit(link) != 0) /* links are held until admitted */
				break;
			if (ret != 0 && ret != -EAGAIN && ret != -ETIMEDOUT)
				break;
			if (poll(&pfd, 1, 0) > 0)
				break;
			continue;
		}
		ssize_t r = read(ctl_fd, &c, 1);

		if (r == 0 || (r < 0 && errno != EINTR))
			break;
	}
	fab_link_close(link);
	fab_mr_dereg(mr);
	fab_close(fab);
	_exit(0);
}

/* idle -- nothing to reap: block until a completion may be ready (--poll wait). */
static void idle(struct bench *b)
{
	int ret = fab_wait(b->fab, 100);

	if (ret != 0 && ret != -ETIMEDOUT)
		sched_yield(); /* a provider without wait */
}

/*
 * reap -- one fab_poll() of up to 16 completions into @wc. Returns their
 * count, or the fab_poll() error or the status of a failed completion
 * (both reported).
 */
static int reap(struct bench *b, struct fab_wc *wc)
{
	int n = fab_poll(b->fab, wc, 16);

	if (n < 0) {
		fprintf(stderr, "fabric-lat: fab_poll: %s\n", strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		if (wc[i].status != 0) {
			fprintf(stderr, "fabric-lat: %s wrid %" PRIu64 " completed with %s\n",
			        fab_opcode_str(wc[i].opcode), wc[i].wrid, strerror(-wc[i].status));
			return wc[i].status;
		}
	}
	return n;
}

/* What wrid_seen() waits for. */
struct wrid_wait {
	struct bench *b;
	uint64_t wrid;
};

/* wrid_seen -- a bench_poll() check: 1 once the completion of w->wrid is reaped, or an error. */
static int wrid_seen(void *arg)
{
	struct wrid_wait *w = arg;
	struct fab_wc wc[16];
	int n = reap(w->b, wc);

	for (int i = 0; i < n; i++)
		if (wc[i].wrid == w->wrid)
			return 1;
	return n < 0 ? n : 0;
}

static void wrid_idle(void *arg)
{
	idle(((struct wrid_wait *)arg)->b);
}

/*
 * wrid_drive -- busy-poll: between polls, do the provider's work from this
 * thread (fab_progress() without a wait: tcp reads its sockets here, no
 * thread hop to its NIC thread), as LOCO's waiting threads do. Providers
 * whose hardware does it say -EOPNOTSUPP; -EBUSY: another thread does it.
 */
static void wrid_drive(void *arg)
{
	/*
	 * Nothing came: yield, as LOCO's spinning waiters do. On 2 CPUs the
	 * target's NIC thread may wake on this one, and a poller that keeps
	 * it adds a scheduler tick to the round trip (12 us became 32-40).
	 */
	if (fab_progress(((struct wrid_wait *)arg)->b->fab, 0) == 0)
		sched_yield();
}

/* wait_wrid -- poll until the completion of @wrid; returns 0 or the failed status. */
static int wait_wrid(struct bench *b, uint64_t wrid)
{
	struct wrid_wait w = {.b = b, .wrid = wrid};
	int ret = bench_poll(wrid_seen, b->o->block ? wrid_idle : wrid_drive, &w, 0,
	                     OP_TIMEOUT_NS / 1000000);

	if (ret == 0) {
		fprintf(stderr, "fabric-lat: no completion for wrid %" PRIu64 " in 10 s\n", wrid);
		return -ETIMEDOUT;
	}
	return ret > 0 ? 0 : ret;
}

/* post_one -- post @wr, retrying while the send queue is full. */
static int post_one(struct bench *b, const struct fab_wr *wr)
{
	int ret;

	while ((ret = fab_post(b->link, wr, 1)) == -EAGAIN) {
		struct fab_wc wc[16];
		int n = fab_poll(b->fab, wc, 16);

		if (n < 0)
			return n;
	}
	if (ret)
		fprintf(stderr, "fabric-lat: fab_post %s: %s\n", fab_opcode_str(wr->opcode),
		        strerror(-ret));
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void compute_stats(uint64_t *ns, long n, const char *op, struct stats *s)
{
	double sum = 0;
	long p99;

	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	for (long i = 0; i < n; i++)
		sum += (double)ns[i];
	p99 = (long)((double)n * 0.99 + 0.999999) - 1; /* ceil(0.99 n) - 1 */
	if (p99 < 0)
		p99 = 0;
	s->op = op;
	s->median_us =
	    (n % 2 ? (double)ns[n / 2] : ((double)ns[n / 2 - 1] + (double)ns[n / 2]) / 2) / 1e3;
	s->p99_us = (double)ns[p99] / 1e3;
	s->min_us = (double)ns[0] / 1e3;
	s->max_us = (double)ns[n - 1] / 1e3;
	s->mean_us = sum / (double)n / 1e3;
}

/*
 * measure -- warm-up, then o->iters operations of @opcode one at a time;
 * checks every result the target's memory implies.
 */
static int measure(struct bench *b, int opcode, struct stats *s)
{
	const struct opts *o = b->o;
	uint64_t *res = &b->buf[1]; /* READ and atomic results land here */
	static uint64_t cas_expect, faa_expect, last_written;
	const char *name = fab_opcode_str(opcode);

	for (long i = 0; i < o->warmup + o->iters; i++) {
		struct fab_wr wr = {
		    .wrid = (uint64_t)i,
		    .opcode = (uint8_t)opcode,
		    .flags = FAB_WR_SIGNALED,
		    .local = res,
		    .len = 8,
		    .lkey = b->mr->lkey,
		    .rkey = b->rkey,
		};
		uint64_t t0, t1;
		int ret;

		switch (opcode) {
		case FAB_OP_WRITE:
			b->buf[0] = (uint64_t)i + 1;
			wr.local = &b->buf[0];
			wr.flags |= FAB_WR_INLINE;
			wr.remote_addr = b->raddr + OFF_WRITE;
			break;
		case FAB_OP_READ:
			wr.remote_addr = b->raddr + OFF_WRITE;
			break;
		case FAB_OP_CAS:
			wr.remote_addr = b->raddr + OFF_CAS;
			wr.compare = cas_expect;
			wr.swap = cas_expect + 1;
			break;
		case FAB_OP_FAA:
			wr.remote_addr = b->raddr + OFF_FAA;
			wr.swap = 1;
			break;
		}

		t0 = bench_now_ns();
		ret = post_one(b, &wr);
		if (ret == 0)
			ret = wait_wrid(b, wr.wrid);
		t1 = bench_now_ns();
		if (ret)
			return ret;
		if (i >= o->warmup)
			b->lat_ns[i - o->warmup] = t1 - t0;

		/* the results say whether the target really did the work */
		switch (opcode) {
		case FAB_OP_WRITE:
			last_written = (uint64_t)i + 1;
			break;
		case FAB_OP_READ:
			if (*res != last_written)
				goto wrong;
			break;
		case FAB_OP_CAS:
			if (*res != cas_expect)
				goto wrong;
			cas_expect++;
			break;
		case FAB_OP_FAA:
			if (*res != faa_expect)
				goto wrong;
			faa_expect++;
			break;
		}
	}
	compute_stats(b->lat_ns, o->iters, name, s);
	return 0;

wrong:
	fprintf(stderr, "fabric-lat: %s returned %" PRIu64 ", expected %" PRIu64 "\n", name, *res,
	        opcode == FAB_OP_READ  ? last_written
	        : opcode == FAB_OP_CAS ? cas_expect
	                               : faa_expect);
	return -EIO;
}

/*
 * measure_rate -- o->rate_ops 8-byte inline WRITEs posted in chunks of
 * SIGNAL_EVERY, the last of each chunk signaled, at most @window outstanding.
 * A signaled completion retires every earlier request on the link.
 */
static int measure_rate(struct bench *b, uint32_t window, double *seconds, double *ops_per_s)
{
	uint64_t total = (uint64_t)b->o->rate_ops, posted = 0, done = 0, t0, t1;
	uint32_t chunk = window < SIGNAL_EVERY ? window : SIGNAL_EVERY;
	uint64_t slots = (REGION_LEN - OFF_RATE) / 8;
	uint64_t last_progress;
	struct fab_wr wr[SIGNAL_EVERY];
	struct fab_wc wc[16];

	b->buf[0] = 0x5a5a5a5a5a5a5a5aull;
	t0 = bench_now_ns();
	last_progress = t0;
	while (done < total) {
		while (posted < total && posted - done + chunk <= window) {
			uint32_t n = total - posted < chunk ? (uint32_t)(total - posted) : chunk;
			int ret;

			for (uint32_t k = 0; k < n; k++) {
				uint64_t id = posted + k;

				wr[k] = (struct fab_wr){
				    .wrid = id,
				    .opcode = FAB_OP_WRITE,
				    .flags = FAB_WR_INLINE | (k == n - 1 ? FAB_WR_SIGNALED : 0),
				    .local = &b->buf[0],
				    .len = 8,
				    .lkey = b->mr->lkey,
				    .remote_addr = b->raddr + OFF_RATE + (id % slots) * 8,
				    .rkey = b->rkey,
				};
			}
			ret = fab_post(b->link, wr, (int)n);
			if (ret == -EAGAIN)
				break;
			if (ret) {
				fprintf(stderr, "fabric-lat: fab_post: %s\n", strerror(-ret));
				return ret;
			}
			posted += n;
		}

		int n = reap(b, wc);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++)
			if (wc[i].wrid + 1 > done)
				done = wc[i].wrid + 1;
		if (n > 0) {
			last_progress = bench_now_ns();
		} else if (bench_now_ns() - last_progress > OP_TIMEOUT_NS) {
			fprintf(stderr,
			        "fabric-lat: rate test stalled at %" PRIu64 " of %" PRIu64 "\n",
			        done, total);
			return -ETIMEDOUT;
		} else if (b->o->block && posted - done + chunk > window) {
			idle(b); /* the window is full: sleep until a completion */
		}
	}
	t1 = bench_now_ns();
	*seconds = (double)(t1 - t0) / 1e9;
	*ops_per_s = (double)total / *seconds;
	return 0;
}

/* mkdir_parents -- create the folders leading to file @path. */
static void mkdir_parents(const char *path)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(buf, 0777); /* EEXIST is fine; fopen reports the rest */
		*p = '/';
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int write_json(const struct opts *o, int argc, char **argv, const struct stats *st, int nst,
                      uint32_t window, double seconds, double ops_per_s)
{
	struct utsname u;
	char when[32];
	time_t t = time(NULL);
	FILE *f;

	mkdir_parents(o->json);
	f = fopen(o->json, "w");
	if (f == NULL) {
		fprintf(stderr, "fabric-lat: cannot write %s: %s\n", o->json, strerror(errno));
		return -errno;
	}
	if (uname(&u) != 0)
		snprintf(u.nodename, sizeof(u.nodename), "?");
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));

	fprintf(f, "{\n  \"bench\": \"fabric-lat\",\n  \"loco_version\": \"%s\",\n",
	        LOCO_VERSION_STRING);
	fprintf(f, "  \"provider\": ");
	json_str(f, o->provider);
	fprintf(f, ",\n  \"command\": [");
	for (int i = 0; i < argc; i++) {
		if (i)
			fputs(", ", f);
		json_str(f, argv[i]);
	}
	fprintf(f, "],\n  \"host\": ");
	json_str(f, u.nodename);
	fprintf(f, ",\n  \"cpus\": %ld,\n  \"date\": \"%s\",\n", sysconf(_SC_NPROCESSORS_ONLN),
	        when);
	fprintf(f, "  \"size_bytes\": 8,\n  \"iters\": %ld,\n  \"warmup\": %ld,\n", o->iters,
	        o->warmup);
	fprintf(f, "  \"poll\": \"%s\",\n", o->block ? "wait" : "spin");
	fprintf(f, "  \"latency_us\": {\n");
	for (int i = 0; i < nst; i++)
		fprintf(
		    f,
		    "    \"%s\": {\"median\": %.3f, \"p99\": %.3f, \"min\": %.3f, \"max\": %.3f, "
		    "\"mean\": %.3f}%s\n",
		    st[i].op, st[i].median_us, st[i].p99_us, st[i].min_us, st[i].max_us,
		    st[i].mean_us, i + 1 < nst ? "," : "");
	fprintf(f, "  },\n");
	fprintf(f,
	        "  \"rate\": {\"op\": \"WRITE\", \"size_bytes\": 8, \"signal_every\": %d, "
	        "\"window\": %u, \"ops\": %ld, \"seconds\": %.6f, \"ops_per_s\": %.0f}\n}\n",
	        SIGNAL_EVERY, window, o->rate_ops, seconds, ops_per_s);
	if (fclose(f) != 0) {
		fprintf(stderr, "fabric-lat: writing %s: %s\n", o->json, strerror(errno));
		return -EIO;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: fabric-lat [--iters N] [--warmup N] [--rate-ops N] [--poll spin|wait]\n"
	           "                  [--provider NAME] [--json FILE]\n"
	           "  --iters N       measured operations per op type (default 20000)\n"
	           "  --warmup N      unmeasured operations first (default 1000)\n"
	           "  --rate-ops N    WRITEs in the op-rate test (default 1000000)\n"
	           "  --poll MODE     spin: busy-poll fab_poll(), fab_progress() between "
	           "(default); wait: block in fab_wait()\n"
	           "  --provider P    fabric provider (default $LOCO_FABRIC, else tcp)\n"
	           "  --json FILE     results (default RESULTS/fabric-<provider>.json; RESULTS is\n"
	           "                  $LOCO_BENCH_OUT, else results/ beside this program)\n");
}

static long parse_count(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end != '\0' || v <= 0 || v > 100000000) {
		fprintf(stderr, "fabric-lat: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"iters", required_argument, NULL, 'i'},    {"warmup", required_argument, NULL, 'w'},
	    {"rate-ops", required_argument, NULL, 'r'}, {"poll", required_argument, NULL, 'P'},
	    {"provider", required_argument, NULL, 'p'}, {"json", required_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	static const int ops[] = {FAB_OP_WRITE, FAB_OP_READ, FAB_OP_CAS, FAB_OP_FAA};
	struct opts o = {.iters = 20000, .warmup = 1000, .rate_ops = 1000000};
	struct stats st[4];
	struct bench b = {.o = &o};
	struct target_info ti;
	char json_default[4096];
	int info[2] = {-1, -1}, ctl[2] = {-1, -1};
	double seconds = 0, ops_per_s = 0;
	uint32_t window;
	pid_t parent = getpid(), pid = -1;
	int c, ret, status = 1;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o.iters = parse_count(optarg, "--iters");
			break;
		case 'w':
			o.warmup = parse_count(optarg, "--warmup");
			break;
		case 'r':
			o.rate_ops = parse_count(optarg, "--rate-ops");
			break;
		case 'P':
			if (strcmp(optarg, "spin") != 0 && strcmp(optarg, "wait") != 0) {
				fprintf(stderr, "fabric-lat: --poll takes spin or wait\n");
				return 2;
			}
			o.block = strcmp(optarg, "wait") == 0;
			break;
		case 'p':
			o.provider = optarg;
			break;
		case 'j':
			o.json = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (o.provider == NULL)
		o.provider = getenv("LOCO_FABRIC");
	if (o.provider == NULL || *o.provider == '\0')
		o.provider = "tcp";
	if (o.json == NULL) {
		bench_result_path(json_default, sizeof(json_default), "fabric-%s.json", o.provider);
		o.json = json_default;
	}

	b.lat_ns = calloc((size_t)o.iters, sizeof(*b.lat_ns));
	b.buf = aligned_alloc(4096, REGION_LEN);
	if (b.lat_ns == NULL || b.buf == NULL) {
		fprintf(stderr, "fabric-lat: out of memory\n");
		goto out;
	}
	memset(b.buf, 0, REGION_LEN);

	/* fork before any fabric exists: the target starts single-threaded */
	if (pipe2(info, O_CLOEXEC) != 0 || pipe2(ctl, O_CLOEXEC) != 0) {
		fprintf(stderr, "fabric-lat: pipe: %s\n", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "fabric-lat: fork: %s\n", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(info[0]);
		close(ctl[1]);
		target_main(&o, parent, info[1], ctl[0]);
	}
	close(info[1]);
	info[1] = -1;
	close(ctl[0]);
	ctl[0] = -1;

	ret = read_full(info[0], &ti, sizeof(ti), TARGET_WAIT_MS);
	if (ret) {
		fprintf(stderr, "fabric-lat: no word from the target (pid %d): %s\n", (int)pid,
		        strerror(-ret));
		goto out;
	}
	if (ti.status != 0) {
		ti.step[sizeof(ti.step) - 1] = '\0';
		fprintf(stderr, "fabric-lat: target: %s(%s) failed: %s\n", ti.step, o.provider,
		        strerror(-ti.status));
		goto out;
	}
	b.raddr = ti.addr;
	b.rkey = ti.rkey;

	ret = fab_open(o.provider, NULL, &b.fab);
	if (ret) {
		fprintf(stderr, "fabric-lat: fab_open(%s): %s\n", o.provider, strerror(-ret));
		goto out;
	}
	ret = fab_mr_reg(b.fab, b.buf, REGION_LEN, FAB_ACCESS_LOCAL_WRITE, &b.mr);
	if (ret) {
		fprintf(stderr, "fabric-lat: fab_mr_reg: %s\n", strerror(-ret));
		goto out;
	}
	ret = fab_connect(b.fab, &ti.ep, 1, NULL, 0, CONNECT_MS, &b.link);
	if (ret) {
		char addr[FAB_ADDR_STRLEN] = "?";

		fab_addr_format(&ti.ep, addr, sizeof(addr));
		fprintf(stderr, "fabric-lat: fab_connect to %s: %s\n", addr, strerror(-ret));
		goto out;
	}
	window = b.fab->attr.sq_depth;

	for (int i = 0; i < 4; i++) {
		ret = measure(&b, ops[i], &st[i]);
		if (ret)
			goto out;
	}
	ret = measure_rate(&b, window, &seconds, &ops_per_s);
	if (ret)
		goto out;

	printf("fabric-lat: provider %s, 8-byte operations, %ld iterations after %ld warm-up, %s\n",
	       o.provider, o.iters, o.warmup, o.block ? "blocking in fab_wait()" : "busy-polling");
	printf("%-6s %11s %11s %11s\n", "op", "median us", "p99 us", "min us");
	for (int i = 0; i < 4; i++)
		printf("%-6s %11.2f %11.2f %11.2f\n", st[i].op, st[i].median_us, st[i].p99_us,
		       st[i].min_us);
	printf("op rate: %.0f ops/s (%ld 8-byte WRITEs, every %dth signaled, window %u, %.3f s)\n",
	       ops_per_s, o.rate_ops, SIGNAL_EVERY, window, seconds);

	if (write_json(&o, argc, argv, st, 4, window, seconds, ops_per_s) != 0)
		goto out;
	printf("results: %s\n", o.json);
	status = 0;

out:
	fab_link_close(b.link);
	fab_mr_dereg(b.mr);
	fab_close(b.fab);
	if (ctl[1] >= 0)
		close(ctl[1]);
	if (info[0] >= 0)
		close(info[0]);
	if (pid > 0) {
		kill(pid, SIGTERM);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(b.buf);
	free(b.lat_ns);
	return status;
}
