/* SPDX-License-Identifier: BSD-2-Clause */
/* helpers.c -- shared helpers of the test programs: see helpers.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "proc.h"

#define T_MAX_KIDS 32
#define T_MAX_FDS  128

static const char *t_name = "test";
static unsigned t_timeout_s = 60;
static bool t_child;
static bool t_target_side;       /* this process is a t_target_spawn() target */
static pid_t t_kids[T_MAX_KIDS]; /* read by the SIGALRM handler */
static int t_nkids;
static int t_fds[T_MAX_FDS]; /* parent ends of open channels, closed in children */
static int t_nfds;

/* ---- failing ------------------------------------------------------------ */

/* t_kill_kids -- async-signal-safe: SIGKILL and reap every registered child. */
static void t_kill_kids(void)
{
	proc_kill_all(t_kids, t_nkids);
	t_nkids = 0;
}

static void t_vmsg(const char *tag, const char *file, int line, const char *fmt, va_list ap)
{
	char buf[1024];
	int n;

	if (file != NULL)
		n = snprintf(buf, sizeof(buf), "%s[%d]: %s%s:%d: ", t_name, (int)getpid(), tag,
		             file, line);
	else
		n = snprintf(buf, sizeof(buf), "%s[%d]: %s", t_name, (int)getpid(), tag);
	if (n < 0 || (size_t)n >= sizeof(buf) - 2)
		n = 0;
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	n = (int)strlen(buf);
	buf[n++] = '\n';
	fflush(stdout);
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

noreturn void t_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vmsg("FAIL: ", file, line, fmt, ap);
	va_end(ap);
	t_kill_kids();
	_exit(T_EXIT_FAIL);
}

noreturn void t_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vmsg("SKIP: ", NULL, 0, fmt, ap);
	va_end(ap);
	t_kill_kids();
	_exit(T_EXIT_SKIP);
}

const char *t_errname(int err)
{
	switch (err) {
	case 0:
		return "0";
	case -EACCES:
		return "-EACCES";
	case -EAGAIN:
		return "-EAGAIN";
	case -EBUSY:
		return "-EBUSY";
	case -ECANCELED:
		return "-ECANCELED";
	case -ECONNREFUSED:
		return "-ECONNREFUSED";
	case -ECONNRESET:
		return "-ECONNRESET";
	case -EFAULT:
		return "-EFAULT";
	case -EINVAL:
		return "-EINVAL";
	case -EIO:
		return "-EIO";
	case -ENODEV:
		return "-ENODEV";
	case -ENOENT:
		return "-ENOENT";
	case -ENOMEM:
		return "-ENOMEM";
	case -ENOSPC:
		return "-ENOSPC";
	case -ENOSYS:
		return "-ENOSYS";
	case -ENOTCONN:
		return "-ENOTCONN";
	case -EOPNOTSUPP:
		return "-EOPNOTSUPP";
	case -EPIPE:
		return "-EPIPE";
	case -EPROTO:
		return "-EPROTO";
	case -ETIMEDOUT:
		return "-ETIMEDOUT";
	default:
		return err > 0 ? "(positive)" : "(other errno)";
	}
}

/* ---- set-up, time --------------------------------------------------------- */

static void t_on_alarm(int sig)
{
	static const char msg[] = ": FAIL: overall time limit reached (alarm)\n";

	(void)sig;
	if (write(STDERR_FILENO, t_name, strlen(t_name)) < 0 ||
	    write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(T_EXIT_FAIL);
	t_kill_kids();
	_exit(T_EXIT_FAIL);
}

const char *t_test_name(void)
{
	return t_name;
}

const char *t_provider(void)
{
	const char *p = getenv("LOCO_FABRIC");

	return p != NULL && *p != '\0' ? p : "tcp";
}

bool t_stop_silences_peer(void)
{
	return strcmp(t_provider(), "tcp") == 0;
}

bool t_is_child(void)
{
	return t_child;
}

const char *t_listen_addr(int side)
{
	const char *a = getenv(side == T_SIDE_B ? "LOCO_TEST_ADDR_B" : "LOCO_TEST_ADDR_A");

	return a != NULL && *a != '\0' ? a : "127.0.0.1:0";
}

static int t_probe(struct t_chan *ch, void *arg)
{
	struct fab_attr attr = {.listen_addr = t_listen_addr(T_SIDE_A)};
	struct fab *fab;
	int ret;

	(void)ch, (void)arg;
	ret = fab_open(NULL, &attr, &fab);
	if (ret == -ENOENT || ret == -ENODEV) {
		fprintf(stderr, "%s: provider %s is not available: %s\n", t_name, t_provider(),
		        t_errname(ret));
		return T_EXIT_SKIP;
	}
	if (ret != 0) {
		fprintf(stderr, "%s: fab_open(%s) failed: %d (%s)\n", t_name, t_provider(), ret,
		        t_errname(ret));
		return T_EXIT_FAIL;
	}
	fab_close(fab);
	return T_EXIT_PASS;
}

void t_init(const char *name, unsigned timeout_s)
{
	struct t_chan ch;
	pid_t pid;
	int st;

	t_name = name;
	t_timeout_s = timeout_s;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, t_on_alarm);
	alarm(timeout_s);
	printf("%s: provider %s\n", name, t_provider());

	/* probe in a child: a provider may not like being opened before a fork */
	pid = t_spawn(t_probe, NULL, &ch);
	st = t_reap(pid, 30000);
	t_chan_close(&ch);
	if (st == T_EXIT_SKIP)
		t_skip("provider %s cannot be opened here", t_provider());
	if (st != 0)
		T_FAIL("provider %s does not open (probe exit status %d)", t_provider(), st);
}

uint64_t t_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t t_now_ms(void)
{
	return (int64_t)(t_now_ns() / 1000000u);
}

void t_sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000u, .tv_nsec = (long)(us % 1000000u) * 1000};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void t_sleep_ms(unsigned ms)
{
	t_sleep_us(ms * 1000u);
}

uint64_t t_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static uint64_t t_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void t_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t w = 0;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			w = t_mix(seed * 0x100000001b3ull + i / 8);
		p[i] = (uint8_t)(w >> (8 * (i % 8)));
	}
}

bool t_mem_equal(const void *got, const void *want, size_t len, const char *what)
{
	const uint8_t *g = got, *w = want;

	if (memcmp(got, want, len) == 0)
		return true;
	for (size_t i = 0; i < len; i++) {
		if (g[i] != w[i]) {
			fprintf(stderr,
			        "%s: %s: first difference at offset %zu of %zu: 0x%02x, expected "
			        "0x%02x\n",
			        t_name, what, i, len, g[i], w[i]);
			break;
		}
	}
	return false;
}

/* ---- memory ------------------------------------------------------------- */

static void *t_map(size_t len, int flags)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		T_FAIL("mmap of %zu bytes: %s", len, strerror(errno));
	return p;
}

void *t_alloc(size_t len)
{
	return t_map(len, MAP_PRIVATE);
}

void *t_alloc_shared(size_t len)
{
	return t_map(len, MAP_SHARED);
}

void t_free(void *p, size_t len)
{
	if (p != NULL)
		munmap(p, len ? len : 1);
}

/* ---- processes and pipes -------------------------------------------------- */

static void t_kid_add(pid_t pid)
{
	if (t_nkids == T_MAX_KIDS) {
		kill(pid, SIGKILL);
		T_FAIL("more than %d children", T_MAX_KIDS);
	}
	t_kids[t_nkids++] = pid;
}

static void t_kid_del(pid_t pid)
{
	for (int i = 0; i < t_nkids; i++) {
		if (t_kids[i] == pid) {
			t_kids[i] = t_kids[--t_nkids];
			return;
		}
	}
}

static void t_fd_add(int fd)
{
	if (t_nfds < T_MAX_FDS)
		t_fds[t_nfds++] = fd;
}

static void t_fd_del(int fd)
{
	for (int i = 0; i < t_nfds; i++) {
		if (t_fds[i] == fd) {
			t_fds[i] = t_fds[--t_nfds];
			return;
		}
	}
}

pid_t t_spawn(int (*fn)(struct t_chan *ch, void *arg), void *arg, struct t_chan *ch)
{
	int p2c[2], c2p[2];
	pid_t parent = getpid(), pid;

	if (pipe2(p2c, O_CLOEXEC) < 0 || pipe2(c2p, O_CLOEXEC) < 0)
		T_FAIL("pipe2: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		T_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		/* child: forget the parent's children and channels, die with the parent */
		t_child = true;
		t_nkids = 0;
		for (int i = 0; i < t_nfds; i++)
			close(t_fds[i]);
		t_nfds = 0;
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(T_EXIT_FAIL);
		alarm(t_timeout_s);
		close(p2c[1]);
		close(c2p[0]);
		*ch = (struct t_chan){.rfd = p2c[0], .wfd = c2p[1], .peer = 0};
		_exit(fn(ch, arg));
	}
	close(p2c[0]);
	close(c2p[1]);
	*ch = (struct t_chan){.rfd = c2p[0], .wfd = p2c[1], .peer = pid};
	t_fd_add(ch->rfd);
	t_fd_add(ch->wfd);
	t_kid_add(pid);
	return pid;
}

int t_reap(pid_t pid, int timeout_ms)
{
	int st = proc_wait(pid, timeout_ms, 1);

	if (st == PROC_EWAIT)
		T_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
	if (st == PROC_TIMEOUT) {
		fprintf(stderr, "%s: child %d did not exit within %d ms, killing it\n", t_name,
		        (int)pid, timeout_ms);
		proc_kill(pid);
	}
	t_kid_del(pid);
	return st;
}

void t_kill(pid_t pid)
{
	proc_kill(pid);
	t_kid_del(pid);
}

void t_stop(pid_t pid)
{
	int st;

	if (kill(pid, SIGSTOP) < 0)
		T_FAIL("kill(%d, SIGSTOP): %s", (int)pid, strerror(errno));
	while (waitpid(pid, &st, WUNTRACED) < 0) {
		if (errno != EINTR)
			T_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
	}
	if (!WIFSTOPPED(st)) {
		t_kid_del(pid);
		T_FAIL("child %d ended (status %d) instead of stopping", (int)pid, proc_status(st));
	}
}

void t_cont(pid_t pid)
{
	int st;

	if (kill(pid, SIGCONT) < 0)
		T_FAIL("kill(%d, SIGCONT): %s", (int)pid, strerror(errno));
	while (waitpid(pid, &st, WCONTINUED) < 0) {
		if (errno != EINTR)
			T_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
	}
	if (!WIFCONTINUED(st)) {
		t_kid_del(pid);
		T_FAIL("child %d ended (status %d) instead of continuing", (int)pid,
		       proc_status(st));
	}
}

void t_send(struct t_chan *ch, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(ch->wfd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			T_FAIL("write to pipe: %s", n < 0 ? strerror(errno) : "short");
		p += n;
		len -= (size_t)n;
	}
}

void t_recv(struct t_chan *ch, void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = t_now_ms() + timeout_ms;
	uint8_t *p = buf;

	while (len > 0) {
		struct pollfd pfd = {.fd = ch->rfd, .events = POLLIN};
		int wait = -1, r;
		ssize_t n;

		if (timeout_ms >= 0) {
			int64_t left = deadline - t_now_ms();

			wait = left > 0 ? (int)left : 0;
		}
		r = poll(&pfd, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			T_FAIL("poll on pipe: %s", strerror(errno));
		if (r == 0)
			T_FAIL("peer sent nothing within %d ms", timeout_ms);
		n = read(ch->rfd, p, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			T_FAIL("read from pipe: %s", strerror(errno));
		if (n == 0) {
			int st;

			if (ch->peer <= 0) {
				/* our parent is gone: nobody to report to */
				_exit(T_EXIT_FAIL);
			}
			st = t_reap(ch->peer, 5000);
			if (st == T_EXIT_SKIP)
				t_skip("child %d skipped: provider %s not available", (int)ch->peer,
				       t_provider());
			T_FAIL("child %d closed its pipe (exit status %d)", (int)ch->peer, st);
		}
		p += n;
		len -= (size_t)n;
	}
}

void t_send_u64(struct t_chan *ch, uint64_t v)
{
	t_send(ch, &v, sizeof(v));
}

uint64_t t_recv_u64(struct t_chan *ch, int timeout_ms)
{
	uint64_t v;

	t_recv(ch, &v, sizeof(v), timeout_ms);
	return v;
}

void t_chan_close(struct t_chan *ch)
{
	if (ch->rfd >= 0) {
		t_fd_del(ch->rfd);
		close(ch->rfd);
	}
	if (ch->wfd >= 0) {
		t_fd_del(ch->wfd);
		close(ch->wfd);
	}
	ch->rfd = ch->wfd = -1;
}

/* ---- fabric ----------------------------------------------------------------- */

/* the side of the next fab this process opens: targets are B, others alternate A, B */
static int t_next_side = T_SIDE_A;

void t_side_set_target(void)
{
	t_target_side = true;
	t_next_side = T_SIDE_B;
}

struct fab *t_fab_open(const struct fab_attr *attr)
{
	struct fab_attr a = {0};
	struct fab *fab = NULL;
	int ret;

	if (attr != NULL)
		a = *attr;
	if (a.listen_addr == NULL)
		a.listen_addr = t_listen_addr(t_next_side);
	if (!t_target_side)
		t_next_side = t_next_side == T_SIDE_A ? T_SIDE_B : T_SIDE_A;
	ret = fab_open(NULL, &a, &fab);

	if (ret == -ENOENT || ret == -ENODEV)
		t_skip("provider %s not available: fab_open returned %s", t_provider(),
		       t_errname(ret));
	if (ret != 0)
		T_FAIL("fab_open(%s) returned %d (%s)", t_provider(), ret, t_errname(ret));
	T_ASSERT(fab != NULL);
	return fab;
}

struct fab_mr *t_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access)
{
	struct fab_mr *mr = NULL;
	int ret = fab_mr_reg(fab, addr, len, access, &mr);

	if (ret != 0)
		T_FAIL("fab_mr_reg(%p, %zu, 0x%x) returned %d (%s)", addr, len, access, ret,
		       t_errname(ret));
	T_ASSERT(mr != NULL);
	T_ASSERT(mr->addr == addr && mr->len == len);
	return mr;
}

struct fab_link *t_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx,
                           const void *priv, size_t priv_len)
{
	struct fab_link *link = NULL;
	char a[FAB_ADDR_STRLEN] = "?";
	int ret = fab_connect(fab, peer, ctx, priv, priv_len, 5000, &link);

	if (ret != 0) {
		fab_addr_format(peer, a, sizeof(a));
		T_FAIL("fab_connect(%s) returned %d (%s)", a, ret, t_errname(ret));
	}
	T_ASSERT(link != NULL);
	T_ASSERT_EQX(link->ctx, ctx);
	return link;
}

struct fab_link *t_accept(struct fab *fab, uint64_t ctx, int timeout_ms, void *priv,
                          size_t *priv_len)
{
	struct fab_link *link = NULL;
	uint8_t scratch[FAB_PRIV_MAX];
	size_t slen = 0;
	int ret;

	ret = fab_accept(fab, ctx, timeout_ms, &link, priv ? priv : scratch,
	                 priv_len ? priv_len : &slen);
	if (ret != 0)
		T_FAIL("fab_accept returned %d (%s)", ret, t_errname(ret));
	T_ASSERT(link != NULL);
	T_ASSERT_EQX(link->ctx, ctx);
	ret = fab_link_admit(link);
	if (ret != 0)
		T_FAIL("fab_link_admit returned %d (%s)", ret, t_errname(ret));
	return link;
}

struct fab_link *t_accept_held(struct fab *fab, uint64_t ctx, int timeout_ms, void *priv,
                               size_t *priv_len)
{
	struct fab_link *link = NULL;
	uint8_t scratch[FAB_PRIV_MAX];
	size_t slen = 0;
	int ret;

	ret = fab_accept(fab, ctx, timeout_ms, &link, priv ? priv : scratch,
	                 priv_len ? priv_len : &slen);
	if (ret != 0)
		T_FAIL("fab_accept returned %d (%s)", ret, t_errname(ret));
	T_ASSERT(link != NULL);
	T_ASSERT_EQX(link->ctx, ctx);
	return link;
}

static void *t_connect_async_main(void *arg)
{
	struct t_connect_async *c = arg;

	c->ret =
	    fab_connect(c->fab, &c->addr, c->ctx, c->priv, c->priv_len, c->timeout_ms, &c->link);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

void t_connect_start(struct t_connect_async *c)
{
	c->link = NULL;
	c->ret = -EINPROGRESS;
	c->done = 0;
	if (c->timeout_ms == 0)
		c->timeout_ms = 5000;
	T_ASSERT_OK(pthread_create(&c->th, NULL, t_connect_async_main, c));
}

int t_connect_join(struct t_connect_async *c)
{
	T_ASSERT_OK(pthread_join(c->th, NULL));
	return c->ret;
}

struct t_pair_conn {
	struct fab *fab;
	struct fab_addr addr;
	uint64_t ctx;
	struct fab_link *link;
	int ret;
};

static const char t_pair_priv[] = "t_pair private data";

static void *t_pair_connect(void *arg)
{
	struct t_pair_conn *c = arg;

	c->ret =
	    fab_connect(c->fab, &c->addr, c->ctx, t_pair_priv, sizeof(t_pair_priv), 5000, &c->link);
	return NULL;
}

void t_pair(struct fab *a, struct fab *b, uint64_t ctx_a, uint64_t ctx_b, struct fab_link **la,
            struct fab_link **lb)
{
	struct t_pair_conn c = {.fab = a, .ctx = ctx_a};
	uint8_t priv[FAB_PRIV_MAX];
	size_t priv_len = 0;
	pthread_t th;

	T_ASSERT_OK(fab_get_addr(b, &c.addr));
	T_ASSERT_OK(pthread_create(&th, NULL, t_pair_connect, &c));
	*lb = t_accept(b, ctx_b, 5000, priv, &priv_len);
	T_ASSERT_OK(pthread_join(th, NULL));
	if (c.ret != 0)
		T_FAIL("fab_connect returned %d (%s)", c.ret, t_errname(c.ret));
	*la = c.link;
	T_ASSERT(*la != NULL);
	T_ASSERT_EQX((*la)->ctx, ctx_a);
	T_ASSERT_EQ(priv_len, sizeof(t_pair_priv));
	T_ASSERT(memcmp(priv, t_pair_priv, sizeof(t_pair_priv)) == 0);
}

int t_poll_one(struct fab *fab, struct fab_wc *wc, int timeout_ms)
{
	uint64_t start = t_now_ns();
	uint64_t deadline = start + (uint64_t)timeout_ms * 1000000u;
	uint64_t spin_until = start + 100000u; /* 100 us */

	for (;;) {
		uint64_t now;
		int n = fab_poll(fab, wc, 1), ret;

		if (n == 1)
			return 0;
		if (n != 0)
			T_FAIL("fab_poll returned %d (%s)", n, t_errname(n));
		now = t_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now < spin_until)
			continue;
		uint64_t left_ms = (deadline - now) / 1000000u + 1;
		ret = fab_wait(fab, left_ms > 100 ? 100 : (int)left_ms);
		if (ret != 0 && ret != -ETIMEDOUT && ret != -EINTR)
			T_FAIL("fab_wait returned %d (%s)", ret, t_errname(ret));
	}
}

char *t_wc_str(const struct fab_wc *wc, char *buf, size_t len)
{
	snprintf(
	    buf, len,
	    "{wrid 0x%llx, %s, status %d (%s), len %u, imm 0x%x%s, link_ctx 0x%llx, link_id %u}",
	    (unsigned long long)wc->wrid, fab_opcode_str(wc->opcode), wc->status,
	    t_errname(wc->status), wc->len, wc->imm, wc->has_imm ? "" : " (none)",
	    (unsigned long long)wc->link_ctx, wc->link_id);
	return buf;
}

void t_expect_wc_at(const char *file, int line, struct fab *fab, uint64_t wrid, int opcode,
                    int status, int timeout_ms, struct fab_wc *out)
{
	struct fab_wc wc;
	char s[256];

	if (t_poll_one(fab, &wc, timeout_ms) != 0)
		t_fail_at(file, line, "no completion within %d ms (expected wrid 0x%llx, %s, %s)",
		          timeout_ms, (unsigned long long)wrid, fab_opcode_str(opcode),
		          t_errname(status));
	if (wc.wrid != wrid || wc.status != status ||
	    (status == 0 && opcode != 0 && wc.opcode != opcode))
		t_fail_at(file, line, "completion %s, expected wrid 0x%llx, %s, %s",
		          t_wc_str(&wc, s, sizeof(s)), (unsigned long long)wrid,
		          fab_opcode_str(opcode), t_errname(status));
	if (out != NULL)
		*out = wc;
}

void t_expect_none_at(const char *file, int line, struct fab *fab, int ms)
{
	struct fab_wc wc;
	char s[256];

	if (t_poll_one(fab, &wc, ms) == 0)
		t_fail_at(file, line, "unexpected completion %s", t_wc_str(&wc, s, sizeof(s)));
}

int t_run(struct fab_link *link, const struct fab_wr *wr)
{
	struct fab_wr w = *wr;
	struct fab_wc wc;
	char s[256];
	int ret;

	w.flags |= FAB_WR_SIGNALED;
	ret = fab_post(link, &w, 1);
	if (ret != 0)
		T_FAIL("fab_post(%s) returned %d (%s)", fab_opcode_str(w.opcode), ret,
		       t_errname(ret));
	if (t_poll_one(link->fab, &wc, 10000) != 0)
		T_FAIL("no completion of %s wrid 0x%llx within 10 s", fab_opcode_str(w.opcode),
		       (unsigned long long)w.wrid);
	if (wc.wrid != w.wrid || (wc.status == 0 && wc.opcode != w.opcode))
		T_FAIL("completion %s, expected wrid 0x%llx %s", t_wc_str(&wc, s, sizeof(s)),
		       (unsigned long long)w.wrid, fab_opcode_str(w.opcode));
	return wc.status;
}

struct fab_wr t_wr_rdma(int opcode, uint64_t wrid, unsigned flags, void *local, uint32_t len,
                        uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	return (struct fab_wr){.wrid = wrid,
	                       .opcode = (uint8_t)opcode,
	                       .flags = (uint8_t)flags,
	                       .local = local,
	                       .len = len,
	                       .lkey = lkey,
	                       .remote_addr = raddr,
	                       .rkey = rkey};
}

struct fab_wr t_wr_cas(uint64_t wrid, unsigned flags, uint64_t *local, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, uint64_t compare, uint64_t swap)
{
	struct fab_wr w = t_wr_rdma(FAB_OP_CAS, wrid, flags, local, 8, lkey, raddr, rkey);

	w.compare = compare;
	w.swap = swap;
	return w;
}

struct fab_wr t_wr_faa(uint64_t wrid, unsigned flags, uint64_t *local, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, uint64_t add)
{
	struct fab_wr w = t_wr_rdma(FAB_OP_FAA, wrid, flags, local, 8, lkey, raddr, rkey);

	w.swap = add;
	return w;
}
