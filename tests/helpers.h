/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * helpers.h -- shared helpers of the test programs (liburing's t_ prefix).
 *
 * A test program returns T_EXIT_PASS, T_EXIT_FAIL or T_EXIT_SKIP (77, which
 * meson counts as a skip). Every failure goes through t_fail_at(): it prints
 * "file:line: message", kills every child the process spawned (by PID) and
 * exits 1. Children die with their parent (PR_SET_PDEATHSIG) and carry
 * their own alarm(), so no path leaves a process behind.
 *
 * Fabric helpers are written only against liboco/fabric/fabric.h; the
 * provider comes from LOCO_FABRIC (default "tcp").
 *
 * Thread safety: the T_* macros may be used from any thread (a failure ends
 * the process); the process and channel helpers belong to the main thread.
 */
#ifndef LOCO_TESTS_HELPERS_H
#define LOCO_TESTS_HELPERS_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#include "fabric.h"

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

/* ---- failing, skipping, asserting ------------------------------------- */

noreturn void t_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
noreturn void t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define T_FAIL(...) t_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define T_ASSERT(cond)                                         \
	do {                                                   \
		if (!(cond))                                   \
			T_FAIL("assertion failed: %s", #cond); \
	} while (0)

/* signed comparison, values printed in decimal (errno values, counts) */
#define T_ASSERT_EQ(a, b)                                                            \
	do {                                                                         \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);              \
		if (t_a_ != t_b_)                                                    \
			T_FAIL("%s == %s failed: %lld != %lld", #a, #b, t_a_, t_b_); \
	} while (0)

/* unsigned comparison, values printed in hex (addresses, words) */
#define T_ASSERT_EQX(a, b)                                                               \
	do {                                                                             \
		unsigned long long t_a_ = (unsigned long long)(a);                       \
		unsigned long long t_b_ = (unsigned long long)(b);                       \
		if (t_a_ != t_b_)                                                        \
			T_FAIL("%s == %s failed: 0x%llx != 0x%llx", #a, #b, t_a_, t_b_); \
	} while (0)

/* @expr must return 0; otherwise the error is printed by name */
#define T_ASSERT_OK(expr)                                                            \
	do {                                                                         \
		int t_r_ = (int)(expr);                                              \
		if (t_r_ != 0)                                                       \
			T_FAIL("%s returned %d (%s)", #expr, t_r_, t_errname(t_r_)); \
	} while (0)

/* @expr must return exactly @err (a negative errno) */
#define T_ASSERT_ERR(expr, err)                                                      \
	do {                                                                         \
		int t_r_ = (int)(expr), t_e_ = (int)(err);                           \
		if (t_r_ != t_e_)                                                    \
			T_FAIL("%s returned %d (%s), expected %d (%s)", #expr, t_r_, \
			       t_errname(t_r_), t_e_, t_errname(t_e_));              \
	} while (0)

/* t_errname -- "-EACCES", "0", ... for a 0-or-negative-errno value (static string) */
const char *t_errname(int err);

/* ---- set-up, time ------------------------------------------------------ */

/*
 * t_init -- start test @name: print its name and provider, arm an overall
 * alarm of @timeout_s seconds (also armed in every child), and check in a
 * child process that the provider opens: exit 77 if it is absent
 * (-ENOENT, -ENODEV), fail if it opens with any other error.
 */
void t_init(const char *name, unsigned timeout_s);

/* t_provider -- the provider under test: LOCO_FABRIC, default "tcp". */
const char *t_provider(void);

/* t_test_name -- the name given to t_init() ("test" before it). */
const char *t_test_name(void);

/*
 * t_stop_silences_peer -- whether SIGSTOP of a process silences its end of
 * the fabric. True for tcp, whose provider thread plays the NIC inside the
 * process; with a hardware or kernel NIC (verbs, rxe) the memory of a
 * stopped process is still served, so tests that need a silent peer skip
 * that part (the network-namespace tests cut links instead).
 */
bool t_stop_silences_peer(void);

/* t_is_child -- whether this process was made by t_spawn(). */
bool t_is_child(void);

uint64_t t_now_ns(void); /* CLOCK_MONOTONIC */
int64_t t_now_ms(void);
void t_sleep_ms(unsigned ms);
void t_sleep_us(unsigned us);

/* t_rand -- xorshift64* on *@state (never 0); deterministic per seed. */
uint64_t t_rand(uint64_t *state);

/* t_fill -- fill @len bytes with a pattern derived from @seed and the offset. */
void t_fill(void *buf, size_t len, uint64_t seed);

/* t_mem_equal -- memcmp; on mismatch print @what and the first differing offset. */
bool t_mem_equal(const void *got, const void *want, size_t len, const char *what);

/* ---- memory ------------------------------------------------------------ */

/* t_alloc -- @len zeroed bytes, page-aligned, private to this process. */
void *t_alloc(size_t len);
/* t_alloc_shared -- @len zeroed bytes, page-aligned, shared with children forked later. */
void *t_alloc_shared(size_t len);
void t_free(void *p, size_t len); /* either kind */

/* ---- processes and pipes ----------------------------------------------- */

/* A pair of pipes between a parent and one child it spawned. */
struct t_chan {
	int rfd;
	int wfd;
	pid_t peer; /* the child (in the parent), or 0 (in the child) */
};

/*
 * t_spawn -- fork a child that runs @fn(@ch, @arg) and exits with its
 * return value. The child forgets its parent's children, dies with its
 * parent and arms its own alarm. In the parent, @ch talks to the child.
 * Returns the child's PID (registered for cleanup).
 */
pid_t t_spawn(int (*fn)(struct t_chan *ch, void *arg), void *arg, struct t_chan *ch);

/*
 * t_reap -- wait up to @timeout_ms for child @pid to exit. Returns its exit
 * status, 128 + signal if it was killed, or -1 if it did not exit in time
 * (then it is killed and reaped).
 */
int t_reap(pid_t pid, int timeout_ms);

/* t_kill -- SIGKILL child @pid and reap it. */
void t_kill(pid_t pid);

/* t_stop / t_cont -- SIGSTOP / SIGCONT child @pid and wait until it took effect. */
void t_stop(pid_t pid);
void t_cont(pid_t pid);

/*
 * t_send / t_recv -- move exactly @len bytes; a broken or silent peer fails
 * the test. t_recv waits up to @timeout_ms in all (-1: no limit but the
 * alarm).
 */
void t_send(struct t_chan *ch, const void *buf, size_t len);
void t_recv(struct t_chan *ch, void *buf, size_t len, int timeout_ms);
void t_send_u64(struct t_chan *ch, uint64_t v);
uint64_t t_recv_u64(struct t_chan *ch, int timeout_ms);
void t_chan_close(struct t_chan *ch);

/* ---- fabric ------------------------------------------------------------ */

/*
 * Listen addresses of the two sides of a test, so that their traffic can
 * cross a real link (tests/vm: rxe0 and rxe1): LOCO_TEST_ADDR_A and
 * LOCO_TEST_ADDR_B, "ip" or "ip:port", default 127.0.0.1:0 for both.
 */
#define T_SIDE_A 0
#define T_SIDE_B 1

#define T_IO_TIMEOUT 20000 /* ms: bound of every pipe exchange with a live peer */

/* t_side_set_target -- this process is a forked target (target.c): its fabs listen on side B. */
void t_side_set_target(void);

/* t_listen_addr -- the listen address of side @side (T_SIDE_A, T_SIDE_B). */
const char *t_listen_addr(int side);

/*
 * t_fab_open -- open the provider under test with @attr (may be NULL).
 * Unless @attr gives a listen_addr, a forked target (t_target_spawn)
 * listens on side B, and any other process alternates: its first fab on
 * side A, the second on B, the third on A... (t_pair(a, b) of two fabs
 * opened in that order joins A to B). Skips (77) when the provider is
 * absent; fails on any other error.
 */
struct fab *t_fab_open(const struct fab_attr *attr);

/* t_mr_reg -- register or fail. */
struct fab_mr *t_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access);

/* t_connect -- fab_connect or fail (5 s bound). */
struct fab_link *t_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx,
                           const void *priv, size_t priv_len);

/* t_accept -- fab_accept, then fab_link_admit, or fail (waits up to @timeout_ms). */
struct fab_link *t_accept(struct fab *fab, uint64_t ctx, int timeout_ms, void *priv,
                          size_t *priv_len);

/* t_accept_held -- fab_accept or fail, without admitting: the link stays held. */
struct fab_link *t_accept_held(struct fab *fab, uint64_t ctx, int timeout_ms, void *priv,
                               size_t *priv_len);

/*
 * t_connect_start / t_connect_join -- fab_connect() on a thread of its own
 * (a connect returns only once the acceptor admitted the link). Fill
 * fab, addr, ctx, priv, priv_len and timeout_ms (0: 5 s) first; join
 * returns fab_connect()'s result, and the link is in @link. @done turns 1
 * (acquire) when fab_connect() returned.
 */
struct t_connect_async {
	struct fab *fab;
	struct fab_addr addr;
	uint64_t ctx;
	const void *priv;
	size_t priv_len;
	int timeout_ms;
	struct fab_link *link;
	int ret;
	int done;
	pthread_t th;
};

void t_connect_start(struct t_connect_async *c);
int t_connect_join(struct t_connect_async *c);

/*
 * t_pair -- within one process, connect @a to @b: *@la is @a's end (ctx
 * @ctx_a), *@lb is @b's accepted end (ctx @ctx_b). The connect runs on a
 * helper thread while this thread accepts, so a provider may need either.
 */
void t_pair(struct fab *a, struct fab *b, uint64_t ctx_a, uint64_t ctx_b, struct fab_link **la,
            struct fab_link **lb);

/*
 * t_poll_one -- wait up to @timeout_ms for one completion (spin on
 * fab_poll, then block in fab_wait). Returns 0 and fills *@wc, or
 * -ETIMEDOUT. A negative fab_poll or an unexpected fab_wait error fails.
 */
int t_poll_one(struct fab *fab, struct fab_wc *wc, int timeout_ms);

/*
 * T_EXPECT_WC -- the next completion on @fab must arrive within
 * @timeout_ms and carry @wrid and @status, and @opcode when the status is
 * 0 (@opcode 0: any; verbs leaves the opcode of failed requests undefined).
 * It is copied to @out when @out is not NULL.
 */
#define T_EXPECT_WC(fab, wrid, opcode, status, timeout_ms, out) \
	t_expect_wc_at(__FILE__, __LINE__, fab, wrid, opcode, status, timeout_ms, out)
void t_expect_wc_at(const char *file, int line, struct fab *fab, uint64_t wrid, int opcode,
                    int status, int timeout_ms, struct fab_wc *out);

/* T_EXPECT_NONE -- no completion may arrive on @fab within @ms. */
#define T_EXPECT_NONE(fab, ms) t_expect_none_at(__FILE__, __LINE__, fab, ms)
void t_expect_none_at(const char *file, int line, struct fab *fab, int ms);

/* t_wc_str -- one-line description of @wc into @buf; returns @buf. */
char *t_wc_str(const struct fab_wc *wc, char *buf, size_t len);

/*
 * t_run -- post @wr signaled on @link, wait for its completion (it must be
 * the next one on @link's fab, with @wr's wrid and opcode) and return its
 * status.
 */
int t_run(struct fab_link *link, const struct fab_wr *wr);

/* Work request builders. */
struct fab_wr t_wr_rdma(int opcode, uint64_t wrid, unsigned flags, void *local, uint32_t len,
                        uint32_t lkey, uint64_t raddr, uint32_t rkey);
struct fab_wr t_wr_cas(uint64_t wrid, unsigned flags, uint64_t *local, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, uint64_t compare, uint64_t swap);
struct fab_wr t_wr_faa(uint64_t wrid, unsigned flags, uint64_t *local, uint32_t lkey,
                       uint64_t raddr, uint32_t rkey, uint64_t add);

/* ---- a forked one-sided target ------------------------------------------ */

#define T_MAX_REG 6
#define T_CANARY  0xc5 /* byte value of the guard zones around target regions */

/* What the initiator knows of one remote region. */
struct t_region {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t access;
};

/* Numbers an application thread of the target reports back. */
struct t_report {
	int32_t status; /* the thread's return value: 0 ok, else failed */
	int32_t pad;
	int64_t v[8];  /* meaning defined by each test */
	char msg[256]; /* first problem seen, or "" */
};

/* What an application thread of the target sees. */
struct t_app {
	int nreg;
	uint8_t *base[T_MAX_REG]; /* the registered bytes */
	size_t len[T_MAX_REG];
	void *arg;
	struct t_report rep;
	int stop; /* set (release) when the parent asks the target to quit */
};

/* t_app_stopped -- whether the application thread should return. */
static inline bool t_app_stopped(const struct t_app *app)
{
	return __atomic_load_n(&app->stop, __ATOMIC_ACQUIRE) != 0;
}

struct t_target_opts {
	struct fab_attr attr;      /* the target's fab */
	const char *slow_write_ns; /* LOCO_TCP_SLOW_WRITE for the target; NULL: unset */
	int nreg;
	struct {
		size_t len;
		unsigned access;
	} reg[T_MAX_REG];
	size_t guard; /* canary bytes before and after each region (multiple of 64) */
	/* optional application thread, started once the regions are registered */
	int (*app)(struct t_app *app);
	void *app_arg;
};

struct t_target {
	pid_t pid;
	struct t_chan ch;
	struct fab_addr addr; /* where to connect */
	int nreg;
	struct t_region reg[T_MAX_REG];
	uint8_t *mem[T_MAX_REG]; /* the target's registered bytes, mapped shared */
	size_t guard;
	uint32_t dead_rkey; /* rkey of a region the target registered, then deregistered */
	uint64_t dead_addr; /* its address (still mapped in the target) */
};

/*
 * t_target_spawn -- fork a target: it opens its own fab (with the slow
 * write knob if asked), registers the regions (memory shared with the
 * parent, zeroed, guards filled with T_CANARY), registers and deregisters
 * one more region (dead_rkey), starts the optional application thread and
 * sends its address and keys. A thread of its own accepts and admits
 * every link opened to it (links are held until admitted). Its main
 * thread then only blocks reading commands from the pipe: it never
 * polls, never touches the regions (one-sided operations need no work
 * from it).
 */
void t_target_spawn(const struct t_target_opts *o, struct t_target *t);

/*
 * t_target_check -- ask the target process to compare its own bytes
 * [@off, @off + @len) of region @reg with @want. Returns -1 when equal,
 * else the first differing offset (relative to @off).
 */
int64_t t_target_check(struct t_target *t, int reg, size_t off, const void *want, size_t len);

/* t_guard_intact -- whether the canaries around region @reg are untouched. */
bool t_guard_intact(const struct t_target *t, int reg);

/*
 * t_target_quit -- stop the application thread, let the target close its
 * fab and exit; fails unless it exits 0 in time. Fills *@rep (may be NULL)
 * with the application thread's report.
 */
void t_target_quit(struct t_target *t, struct t_report *rep);

/* t_target_kill -- SIGKILL the target and reap it. */
void t_target_kill(struct t_target *t);

/* t_target_free -- unmap the shared regions (after quit or kill). */
void t_target_free(struct t_target *t);

#endif /* LOCO_TESTS_HELPERS_H */
