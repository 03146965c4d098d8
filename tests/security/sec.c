/* SPDX-License-Identifier: BSD-2-Clause */
/* sec.c -- helpers of the security tests (sec.h). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "chan.h"
#include "manager.h"
#include "sec.h"

#define LOG_MAX (4u << 20)

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_buf;
static size_t log_len;
static int log_out = -1;

static void *log_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char b[4096];
	ssize_t n;

	while ((n = read(fd, b, sizeof(b))) > 0) {
		if (write(log_out, b, (size_t)n) < 0) {
			/* the test's own stderr is gone: keep collecting */
		}
		pthread_mutex_lock(&log_lock);
		if (log_len + (size_t)n < LOG_MAX) {
			memcpy(log_buf + log_len, b, (size_t)n);
			log_len += (size_t)n;
			log_buf[log_len] = '\0';
		}
		pthread_mutex_unlock(&log_lock);
	}
	return NULL;
}

void sec_log_start(void)
{
	pthread_t t;
	int p[2];

	log_buf = calloc(1, LOG_MAX + 1);
	T_ASSERT(log_buf != NULL);
	T_ASSERT(pipe(p) == 0);
	log_out = dup(STDERR_FILENO);
	T_ASSERT(log_out >= 0);
	T_ASSERT(dup2(p[1], STDERR_FILENO) == STDERR_FILENO);
	close(p[1]);
	T_ASSERT(pthread_create(&t, NULL, log_main, (void *)(intptr_t)p[0]) == 0);
	pthread_detach(t);
}

unsigned sec_log_count(const char *needle)
{
	unsigned n = 0;

	pthread_mutex_lock(&log_lock);
	for (const char *p = log_buf; p != NULL && (p = strstr(p, needle)) != NULL; p++)
		n++;
	pthread_mutex_unlock(&log_lock);
	return n;
}

loco_manager_t *sec_node(uint32_t id, const char *join, const char *secret)
{
	loco_config_t cfg = {0};
	loco_manager_t *m;
	int ret;

	/* the environment would override the fields */
	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	unsetenv("LOCO_SECRET");
	unsetenv("LOCO_ADDR");
	setenv("LOCO_MANY_MANAGERS", "1", 1); /* several nodes in this one process, on purpose */
	cfg.addr = t_listen_addr(T_SIDE_A);
	cfg.node_id = id;
	cfg.join = join;
	cfg.secret = secret;
	ret = loco_init(&cfg, &m);
	if (ret)
		T_FAIL("node %u did not start: %s", id, loco_strerror(ret));
	return m;
}

const char *sec_fab_addr(loco_manager_t *m)
{
	return m->fab_addr;
}

uint64_t sec_node_inc(loco_manager_t *m)
{
	return m->inc;
}

void sec_region(loco_manager_t *m, const char *chan, uint32_t nodes, size_t len, uint64_t seed,
                struct sec_region *out)
{
	memset(out, 0, sizeof(*out));
	T_ASSERT_OK(loco_channel_create(m, NULL, chan, nodes, &out->ch));
	T_ASSERT_OK(loco_object_create(out->ch, "o", NULL, NULL, &out->obj));
	T_ASSERT_OK(loco_region_create(out->obj, "v", len,
	                               LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC,
	                               &out->r));
	t_fill(loco_region_ptr(out->r), len, seed);
	out->addr = (uintptr_t)out->r->ptr;
	out->rkey = out->r->mr->rkey;
	out->len = len;
	out->seed = seed;
}

int sec_region_intact(const struct sec_region *s)
{
	uint8_t *want = malloc(s->len);
	int ok;

	T_ASSERT(want != NULL);
	t_fill(want, s->len, s->seed);
	ok = t_mem_equal(loco_region_ptr(s->r), want, s->len, "the node's region");
	free(want);
	return ok;
}

void sec_region_free(struct sec_region *s)
{
	loco_object_destroy(s->obj);
	T_ASSERT_OK(loco_channel_destroy(s->ch));
}

void sec_stranger_open(struct sec_stranger *st)
{
	struct fab_attr attr = {.listen_addr = t_listen_addr(T_SIDE_B), .timeout_ms = 1000};

	st->buf = t_alloc(64 * 1024);
	st->fab = t_fab_open(&attr);
	st->mr =
	    t_mr_reg(st->fab, st->buf, 64 * 1024,
	             FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE);
}

void sec_stranger_close(struct sec_stranger *st)
{
	fab_mr_dereg(st->mr);
	fab_close(st->fab);
	t_free(st->buf, 64 * 1024);
}

int sec_stranger_link(struct sec_stranger *st, const char *addr, const void *priv, size_t len,
                      struct fab_link **out)
{
	struct fab_addr fa;

	T_ASSERT_OK(fab_addr_parse(addr, 0, &fa));
	return fab_connect(st->fab, &fa, 99, priv, len, 3000, out);
}

/* run -- post @wr (signaled) on @link and wait up to 2 s for its completion; its status. */
static int run(struct sec_stranger *st, struct fab_link *link, struct fab_wr *wr)
{
	struct fab_wc wc;
	int ret;

	wr->flags |= FAB_WR_SIGNALED;
	ret = fab_post(link, wr, 1);
	if (ret)
		return ret;
	for (int i = 0; i < 64; i++) {
		ret = t_poll_one(st->fab, &wc, 2000);
		if (ret)
			return ret;
		if (wc.wrid == wr->wrid)
			return wc.status;
	}
	return -EPROTO;
}

int sec_stranger_access(struct sec_stranger *st, struct fab_link *link, const struct sec_region *s,
                        size_t *leaked)
{
	size_t len = s->len < 4096 ? s->len : 4096;
	uint8_t *want = malloc(len);
	struct fab_wr wr;
	int ok = 0;

	T_ASSERT(want != NULL);
	t_fill(want, len, s->seed);
	*leaked = 0;
	memset(st->buf, 0, len);
	wr = (struct fab_wr){.wrid = 1,
	                     .opcode = FAB_OP_READ,
	                     .local = st->buf,
	                     .len = (uint32_t)len,
	                     .lkey = st->mr->lkey,
	                     .remote_addr = s->addr,
	                     .rkey = s->rkey};
	if (run(st, link, &wr) == 0) {
		ok++;
		for (size_t i = 0; i < len; i++)
			*leaked += st->buf[i] == want[i] && want[i] != 0;
	}
	memset(st->buf, 0xee, len);
	wr = (struct fab_wr){.wrid = 2,
	                     .opcode = FAB_OP_WRITE,
	                     .local = st->buf,
	                     .len = (uint32_t)len,
	                     .lkey = st->mr->lkey,
	                     .remote_addr = s->addr,
	                     .rkey = s->rkey};
	if (run(st, link, &wr) == 0)
		ok++;
	wr = (struct fab_wr){.wrid = 3,
	                     .opcode = FAB_OP_FAA,
	                     .local = st->buf,
	                     .len = 8,
	                     .lkey = st->mr->lkey,
	                     .remote_addr = s->addr,
	                     .rkey = s->rkey,
	                     .swap = 1};
	if (run(st, link, &wr) == 0)
		ok++;
	free(want);
	return ok;
}

void sec_random(void *buf, size_t len)
{
	randombytes_buf(buf, len);
}

long sec_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int sec_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

int sec_attempt(struct sec_stranger *st, const char *addr, const struct sec_region *s,
                const char *what, const void *priv, size_t len, int *served, size_t *leaked)
{
	struct fab_link *link;
	int ret = sec_stranger_link(st, addr, priv, len, &link);
	size_t leak = 0;

	printf("  %s: connect %s", what, t_errname(ret));
	if (ret == 0) {
		int ok = sec_stranger_access(st, link, s, &leak);

		printf(", %d of READ/WRITE/FAA served, %zu bytes leaked", ok, leak);
		*served += ok;
		*leaked += leak;
		fab_link_close(link);
	}
	printf("\n");
	return ret;
}
