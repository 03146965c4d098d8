/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * churn-ids.c -- node ids come back for good: 3,000 joins and leaves
 * through 1,500 distinct node ids against two long-lived nodes.
 *
 * Nodes 1 and 2 (the survivors) are child processes of this program, each
 * with one manager. This process is the joiners: JOINERS threads, each
 * starting a manager that joins the survivors (LOCO_MANY_MANAGERS=1) and
 * ending it (loco_fini(): a graceful leave), one after the other. The
 * schedule is CYCLES joins: ids 3..1502 once each (more than the 1,024
 * link slots a manager used to have, one per id it ever met), then 1,500
 * more through ids 3..302, so each of those comes back 5 times as a new
 * incarnation. It runs in chunks of CHUNK joins (no id twice in a chunk);
 * after each chunk:
 *   - a probe: the chunk's last id joins once more and both survivors
 *     WRITE to it in a fresh channel (3 nodes, a shared region); the
 *     joiner sees both writes land. A survivor whose link table has no
 *     room for the id fails here (-ENOTCONN);
 *   - after every CRASH_EVERY-th chunk, one more joiner, in a child process,
 *     is SIGKILLed once it joined: the survivors see it fail, not leave,
 *     and its id comes back later as usual;
 *   - each survivor waits until its members are {1, 2} again and reports
 *     its RSS and open fds.
 * Checks: every join and probe succeeds, each join within JOIN_SLOW_MS
 * (a joiner used to wait for a member that left during its join, another
 * joiner, until the join timeout); the survivors' RSS at the end
 * (the least of the last END_CHUNKS measures) is at most RSS_SLACK_KB above
 * that after the warm-up (the most of the measures after chunks
 * WARM_CHUNKS .. BASE_CHUNKS: RSS moves by a few hundred KiB and back, as
 * the allocator takes and gives back, while a leak only grows), and their
 * open fds at the end at most FD_SLACK above those after the warm-up (all
 * printed); the last probe, after the last chunk, works (the cluster still
 * works). A leak of 300 bytes a leave is caught (tried: +944 KiB). The
 * survivors end with loco_fini() and exit 0; every process is ended by PID.
 * About 10-30 s on a loaded 2-core machine (tcp and shm).
 *
 * Run directly (not under loco-run): `scenario-churn-ids`, with
 * LOCO_FABRIC (tcp by default).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/shared_region.h>

#include "../rss.h"

#define CYCLES       3000u /* joins (and leaves) in all */
#define DISTINCT     1500u /* distinct joiner ids: 3 .. DISTINCT + 2 */
#define BACK         300u  /* ids 3 .. BACK + 2 come back in the second half */
#define CHUNK        100u  /* joins between two probes */
#define WARM_CHUNKS  3u    /* chunks before the first measure that counts */
#define BASE_CHUNKS  10u   /* ... and the last measure of the base line */
#define END_CHUNKS   5u    /* the measures at the end: the last ones */
#define JOINERS      3     /* joiner threads */
#define CRASH_EVERY  3u    /* chunks: a joiner that is SIGKILLed after every third */
#define RSS_SLACK_KB 512   /* growth allowed from the warm-up to the end */
#define FD_SLACK     2
#define JOIN_SLOW_MS 5000 /* a join slower than this waited for a member that had left */
#define REGION_LEN   4096
#define NS           1000000000ll
#define TIMEOUT_S    300 /* the alarm: the test's own bound */

static pid_t survivors[2];
static char addrs[2][128];

static void kill_survivors(void)
{
	for (int i = 0; i < 2; i++) {
		if (survivors[i] > 0) {
			kill(survivors[i], SIGKILL);
			waitpid(survivors[i], NULL, 0);
			survivors[i] = 0;
		}
	}
}

__attribute__((format(printf, 2, 3), noreturn)) static void fail_at(int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "churn-ids:%d: ", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (survivors[0] >= 0) /* (in a survivor both are 0) */
		kill_survivors();
	_exit(1);
}
#define FAIL(...) fail_at(__LINE__, __VA_ARGS__)
#define CHECK_OK(expr)                                                     \
	do {                                                               \
		int r_ = (expr);                                           \
		if (r_ != 0)                                               \
			FAIL("%s: %d (%s)", #expr, r_, loco_strerror(r_)); \
	} while (0)

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* read_full / write_full -- exactly @len bytes over a pipe, or fail. */
static void write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			FAIL("pipe write: %s", strerror(errno));
		p += w;
		len -= (size_t)w;
	}
}

static void read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t r = read(fd, p, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			FAIL("pipe read: %s", r == 0 ? "end of file" : strerror(errno));
		p += r;
		len -= (size_t)r;
	}
}

/* ---- the probe: a channel of 3 where both survivors WRITE to the joiner ------------- */

static const char *probe_name(unsigned k, char *buf, size_t len)
{
	snprintf(buf, len, "probe-%u", k);
	return buf;
}

static uint64_t marker(uint32_t survivor, unsigned k)
{
	return (uint64_t)survivor << 32 | (k + 1u);
}

/* survivor_probe -- survivor @me: join probe @k with the joiner @id and write our marker to it. */
static void survivor_probe(loco_manager_t *m, uint32_t me, unsigned k, uint32_t id)
{
	loco_shared_region_t *sr;
	loco_channel_t *ch;
	loco_ack_key_t *ack;
	char name[32];
	uint64_t *w;

	CHECK_OK(loco_channel_create(m, NULL, probe_name(k, name, sizeof(name)), 3, &ch));
	CHECK_OK(loco_shared_region_create(ch, "r", REGION_LEN,
	                                   LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &sr));
	CHECK_OK(loco_ack_key_create(m, &ack));
	CHECK_OK(loco_channel_join(ch, 20 * NS));
	w = loco_shared_region_ptr(sr);
	w[me] = marker(me, k);
	CHECK_OK(loco_shared_region_write(sr, id, me * 8, 8, ack));
	CHECK_OK(loco_ack_wait(ack, 20 * NS));
	/* the joiner writes its id to word 0 of ours once it saw both markers */
	for (int64_t dl = now_ms() + 20000; __atomic_load_n(&w[0], __ATOMIC_ACQUIRE) != id;) {
		if (now_ms() > dl)
			FAIL("node %u: probe %u: joiner %u never wrote back", me, k, id);
		sleep_ms(1);
	}
	loco_ack_key_destroy(ack);
	loco_shared_region_destroy(sr);
	CHECK_OK(loco_channel_destroy(ch));
}

/* joiner_probe -- joiner @m (id @id): probe @k; both survivors' markers must land here. */
static void joiner_probe(loco_manager_t *m, uint32_t id, unsigned k)
{
	loco_shared_region_t *sr;
	loco_channel_t *ch;
	loco_ack_key_t *ack;
	char name[32];
	uint64_t *w;

	CHECK_OK(loco_channel_create(m, NULL, probe_name(k, name, sizeof(name)), 3, &ch));
	CHECK_OK(loco_shared_region_create(ch, "r", REGION_LEN,
	                                   LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &sr));
	CHECK_OK(loco_ack_key_create(m, &ack));
	CHECK_OK(loco_channel_join(ch, 20 * NS));
	w = loco_shared_region_ptr(sr);
	for (int64_t dl = now_ms() + 20000;
	     __atomic_load_n(&w[1], __ATOMIC_ACQUIRE) != marker(1, k) ||
	     __atomic_load_n(&w[2], __ATOMIC_ACQUIRE) != marker(2, k);) {
		if (now_ms() > dl)
			FAIL("joiner %u: probe %u: the survivors' WRITEs did not land (%" PRIx64
			     ", %" PRIx64 ")",
			     id, k, w[1], w[2]);
		sleep_ms(1);
	}
	w[0] = id;
	for (uint32_t s = 1; s <= 2; s++)
		CHECK_OK(loco_shared_region_write(sr, s, 0, 8, ack));
	CHECK_OK(loco_ack_wait(ack, 20 * NS));
	loco_ack_key_destroy(ack);
	loco_shared_region_destroy(sr);
	CHECK_OK(loco_channel_destroy(ch));
}

/* ---- the survivors ------------------------------------------------------------------- */

struct cmd {
	char what; /* 'p': probe k with id; 'm': measure; 'q': quit */
	unsigned k;
	uint32_t id;
};

struct usage {
	long rss_kb;
	long fds;
};

static struct usage usage_now(void)
{
	struct usage u = {-1, 0};
	FILE *f = fopen("/proc/self/statm", "re");
	long size, rss;
	DIR *d;

	if (f != NULL && fscanf(f, "%ld %ld", &size, &rss) == 2)
		u.rss_kb = rss * (sysconf(_SC_PAGESIZE) / 1024);
	if (f != NULL)
		fclose(f);
	d = opendir("/proc/self/fd");
	if (d != NULL) {
		for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
			u.fds += e->d_name[0] != '.';
		u.fds--; /* the directory's own */
		closedir(d);
	}
	return u;
}

/* only_survivors -- whether @m's members are exactly {1, 2}. */
static int only_survivors(loco_manager_t *m)
{
	uint32_t ids[8];
	int n = loco_manager_members(m, ids, 8);

	return n == 2 && ids[0] == 1 && ids[1] == 2;
}

static int survivor(uint32_t me, int cmd_fd, int rep_fd)
{
	loco_config_t cfg = {.node_id = me, .addr = "127.0.0.1:0"};
	loco_manager_t *m;
	struct cmd c;

	survivors[0] = survivors[1] = 0;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(TIMEOUT_S);
	/*
	 * One malloc arena: glibc gives threads that meet contention arenas of
	 * their own, up to 8 per core, each a step of RSS that stays (bounded,
	 * but it reads as growth); with one, RSS measures what liboco keeps.
	 */
	mallopt(M_ARENA_MAX, 1);
	if (me == 2)
		cfg.join = addrs[0];
	CHECK_OK(loco_init(&cfg, &m));
	{
		char a[128] = {0};

		snprintf(a, sizeof(a), "%s", loco_manager_addr(m));
		write_full(rep_fd, a, sizeof(a));
	}
	for (;;) {
		read_full(cmd_fd, &c, sizeof(c));
		if (c.what == 'q')
			break;
		if (c.what == 'p') {
			survivor_probe(m, me, c.k, c.id);
		} else if (c.what == 'm') {
			struct usage u;
			int64_t dl = now_ms() + 20000;

			while (!only_survivors(m)) {
				if (now_ms() > dl)
					FAIL("node %u: the joiners did not all leave", me);
				sleep_ms(2);
			}
			u = usage_now();
			write_full(rep_fd, &u, sizeof(u));
			continue;
		}
		write_full(rep_fd, "k", 1);
	}
	loco_fini(m);
	return 0;
}

static int cmd_fds[2], rep_fds[2];

static void start_survivor(int i)
{
	int c[2], r[2];

	if (pipe(c) < 0 || pipe(r) < 0)
		FAIL("pipe: %s", strerror(errno));
	fflush(NULL);
	survivors[i] = fork();
	if (survivors[i] < 0)
		FAIL("fork: %s", strerror(errno));
	if (survivors[i] == 0) {
		close(c[1]);
		close(r[0]);
		for (int j = 0; j < i; j++) { /* the first survivor's pipes are not ours */
			close(cmd_fds[j]);
			close(rep_fds[j]);
		}
		_exit(survivor((uint32_t)i + 1, c[0], r[1]));
	}
	close(c[0]);
	close(r[1]);
	cmd_fds[i] = c[1];
	rep_fds[i] = r[0];
	read_full(rep_fds[i], addrs[i], sizeof(addrs[i]));
}

/* ---- the joiners --------------------------------------------------------------------- */

static uint32_t schedule[CYCLES];
static char join_list[300];

static loco_manager_t *join_as(uint32_t id)
{
	loco_config_t cfg = {.node_id = id, .addr = "127.0.0.1:0", .join = join_list};
	loco_manager_t *m;
	int ret = loco_init(&cfg, &m);

	if (ret)
		FAIL("joiner %u: loco_init: %s", id, loco_strerror(ret));
	return m;
}

static int64_t slowest_ms; /* the slowest loco_init() of a joiner so far */

struct chunk {
	unsigned from, to; /* schedule indexes */
	unsigned next;     /* atomic */
};

static void *joiner(void *arg)
{
	struct chunk *c = arg;

	for (;;) {
		unsigned i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED) + c->from;
		loco_manager_t *m;
		uint32_t ids[4];
		int n;

		int64_t t;

		if (i >= c->to)
			return NULL;
		t = now_ms();
		m = join_as(schedule[i]);
		t = now_ms() - t;
		if (t > __atomic_load_n(&slowest_ms, __ATOMIC_RELAXED))
			__atomic_store_n(&slowest_ms, t, __ATOMIC_RELAXED); /* (a statistic) */
		n = loco_manager_members(m, ids, 4);
		if (n < 3 || ids[0] != 1 || ids[1] != 2)
			FAIL("joiner %u: %d member(s), the survivors not among them", schedule[i],
			     n);
		loco_fini(m);
	}
}

static void send_cmd(int i, struct cmd c)
{
	write_full(cmd_fds[i], &c, sizeof(c));
}

static void expect_ok(int i)
{
	char k;

	read_full(rep_fds[i], &k, 1);
	if (k != 'k')
		FAIL("survivor %d: bad answer", i + 1);
}

/* probe -- probe @k with joiner @id: both survivors WRITE to it. */
static void probe(unsigned k, uint32_t id)
{
	loco_manager_t *m;

	for (int i = 0; i < 2; i++)
		send_cmd(i, (struct cmd){.what = 'p', .k = k, .id = id});
	m = join_as(id);
	joiner_probe(m, id, k);
	loco_fini(m);
	for (int i = 0; i < 2; i++)
		expect_ok(i);
}

/*
 * crash -- a joiner @id in a child process that is SIGKILLed once it joined: the survivors
 * see it fail (not leave), and reclaim what it held the same way (measure() waits for it).
 * Forked between chunks, while this process runs no manager.
 */
static void crash(uint32_t id)
{
	int p[2], st;
	pid_t pid;
	char ok;

	if (pipe(p) < 0)
		FAIL("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		loco_manager_t *m;

		survivors[0] = survivors[1] = 0; /* (not this process's to end) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		close(p[0]);
		m = join_as(id);
		write_full(p[1], "k", 1);
		pause(); /* until the SIGKILL */
		loco_fini(m);
		_exit(1);
	}
	close(p[1]);
	read_full(p[0], &ok, 1);
	close(p[0]);
	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st))
		FAIL("the crashing joiner %u did not die by SIGKILL (%d)", id, st);
}

static void measure(struct usage u[2])
{
	for (int i = 0; i < 2; i++)
		send_cmd(i, (struct cmd){.what = 'm'});
	for (int i = 0; i < 2; i++)
		read_full(rep_fds[i], &u[i], sizeof(u[i]));
}

int main(void)
{
	struct usage warm[2] = {0}, end[2] = {{LONG_MAX, 0}, {LONG_MAX, 0}}, u[2];
	const unsigned chunks = CYCLES / CHUNK;
	int64_t t0 = now_ms();
	unsigned joins = 0, probes = 0, crashes = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(TIMEOUT_S);
	/* this program sets each manager's identity itself */
	unsetenv("LOCO_NODE_ID");
	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_ADDR");
	unsetenv("LOCO_NODES");
	setenv("LOCO_MANY_MANAGERS", "1", 1);
	for (unsigned i = 0; i < CYCLES; i++)
		schedule[i] = i < DISTINCT ? 3 + i : 3 + (i - DISTINCT) * 7 % BACK;
	start_survivor(0);
	start_survivor(1);
	snprintf(join_list, sizeof(join_list), "%s,%s", addrs[0], addrs[1]);
	printf("churn-ids: survivors 1 (%s) and 2 (%s); %u joins through %u ids, %d at a time\n",
	       addrs[0], addrs[1], CYCLES, DISTINCT, JOINERS);
	for (unsigned k = 0; k * CHUNK < CYCLES; k++) {
		struct chunk c = {.from = k * CHUNK, .to = (k + 1) * CHUNK};
		pthread_t th[JOINERS];

		for (int t = 0; t < JOINERS; t++)
			if (pthread_create(&th[t], NULL, joiner, &c) != 0)
				FAIL("pthread_create");
		for (int t = 0; t < JOINERS; t++)
			pthread_join(th[t], NULL);
		joins += CHUNK;
		probe(k, schedule[c.to - 1]);
		probes++;
		if (k % CRASH_EVERY == 1) {
			crash(schedule[c.to - 2]);
			crashes++;
		}
		measure(u);
		printf("churn-ids: %4u joins (%u probes) at %5.1f s (slowest join %" PRId64
		       " ms): node 1 RSS %ld KiB, %ld fds; node 2 RSS %ld KiB, %ld fds\n",
		       joins, probes, (double)(now_ms() - t0) / 1000, slowest_ms, u[0].rss_kb,
		       u[0].fds, u[1].rss_kb, u[1].fds);
		/* a joiner waited for another that left meanwhile until the join timeout (10 s) */
		if (slowest_ms > JOIN_SLOW_MS)
			FAIL("a join took %" PRId64 " ms (more than %d)", slowest_ms, JOIN_SLOW_MS);
		for (int i = 0; i < 2; i++) {
			if (k + 1 >= WARM_CHUNKS && k + 1 <= BASE_CHUNKS) {
				warm[i].rss_kb =
				    u[i].rss_kb > warm[i].rss_kb ? u[i].rss_kb : warm[i].rss_kb;
				warm[i].fds = u[i].fds > warm[i].fds ? u[i].fds : warm[i].fds;
			}
			if (k + END_CHUNKS >= chunks) {
				end[i].rss_kb =
				    u[i].rss_kb < end[i].rss_kb ? u[i].rss_kb : end[i].rss_kb;
				end[i].fds = u[i].fds; /* the last */
			}
		}
	}
	for (int i = 0; i < 2; i++) {
		printf("churn-ids: node %d: after the warm-up RSS %ld KiB, %ld fds; at the end RSS "
		       "%ld "
		       "KiB (%+ld), %ld fds (%+ld)\n",
		       i + 1, warm[i].rss_kb, warm[i].fds, end[i].rss_kb,
		       end[i].rss_kb - warm[i].rss_kb, end[i].fds, end[i].fds - warm[i].fds);
		if (RSS_CHECKED && end[i].rss_kb > warm[i].rss_kb + RSS_SLACK_KB)
			FAIL("node %d: RSS grew by %ld KiB (more than %d)", i + 1,
			     end[i].rss_kb - warm[i].rss_kb, RSS_SLACK_KB);
		if (end[i].fds > warm[i].fds + FD_SLACK)
			FAIL("node %d: open fds grew by %ld", i + 1, end[i].fds - warm[i].fds);
	}
	for (int i = 0; i < 2; i++) {
		int st;

		send_cmd(i, (struct cmd){.what = 'q'});
		for (int64_t dl = now_ms() + 20000; waitpid(survivors[i], &st, WNOHANG) == 0;) {
			if (now_ms() > dl)
				FAIL("survivor %d did not end", i + 1);
			sleep_ms(5);
		}
		survivors[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			FAIL("survivor %d ended with status %d", i + 1, st);
	}
	printf("churn-ids: PASS: %u joins and leaves, %u probes, %u crashed joiners, in %.1f s\n",
	       joins, probes, crashes, (double)(now_ms() - t0) / 1000);
	return 0;
}
