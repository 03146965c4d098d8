/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * scenario.h -- helpers of the multi-node scenario programs (sc_ prefix).
 *
 * A scenario program is one LOCO node started by loco-run(1) (or by a
 * shell driver, or spawned by another node of the scenario). It links the
 * shared liboco and uses only the public API, as a user's program does.
 * It returns SC_EXIT_PASS, SC_EXIT_FAIL or SC_EXIT_SKIP (77).
 *
 * Every failure goes through sc_fail_at(): it prints "node N: file:line:
 * message", SIGKILLs and reaps every process this node spawned (by PID)
 * and exits 1. Every node arms alarm() in sc_init(), and every process a
 * node spawns dies with it (PR_SET_PDEATHSIG), so nothing outlives a run.
 * Every wait is bounded in time (SC_WAIT_UNTIL, sc_reap, sc_sync_wait).
 *
 * Thread safety: the main thread only, except SC_* asserts (any thread).
 */
#ifndef LOCO_SCENARIO_H
#define LOCO_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#include <loco.h>
#include <loco/shared_region.h>

#define SC_EXIT_PASS 0
#define SC_EXIT_FAIL 1
#define SC_EXIT_SKIP 77

#define SC_MAX_NODES 64    /* node ids of a scenario are < SC_MAX_NODES */
#define SC_WAIT_MS   20000 /* default bound of a wait for a state to arrive */
#define SC_NS        1000000000ll

/* ---- failing, asserting, printing -------------------------------------- */

noreturn void sc_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define SC_FAIL(...) sc_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define SC_ASSERT(cond)                                         \
	do {                                                    \
		if (!(cond))                                    \
			SC_FAIL("assertion failed: %s", #cond); \
	} while (0)

#define SC_ASSERT_EQ(a, b)                                                              \
	do {                                                                            \
		long long sc_a_ = (long long)(a), sc_b_ = (long long)(b);               \
		if (sc_a_ != sc_b_)                                                     \
			SC_FAIL("%s == %s failed: %lld != %lld", #a, #b, sc_a_, sc_b_); \
	} while (0)

/* @expr must return 0; otherwise the error is printed by name */
#define SC_ASSERT_OK(expr)                                                                  \
	do {                                                                                \
		int sc_r_ = (int)(expr);                                                    \
		if (sc_r_ != 0)                                                             \
			SC_FAIL("%s returned %d (%s)", #expr, sc_r_, loco_strerror(sc_r_)); \
	} while (0)

/*
 * SC_WAIT_UNTIL -- poll @cond every millisecond (sleeping between polls)
 * until it holds; fail after @timeout_ms naming @what.
 */
#define SC_WAIT_UNTIL(cond, timeout_ms, what)                                                      \
	do {                                                                                       \
		int64_t sc_dl_ = sc_now_ms() + (timeout_ms);                                       \
		while (!(cond)) {                                                                  \
			if (sc_now_ms() >= sc_dl_)                                                 \
				SC_FAIL("timed out after %d ms waiting for %s", (int)(timeout_ms), \
				        what);                                                     \
			sc_sleep_ms(1);                                                            \
		}                                                                                  \
	} while (0)

/* sc_log -- "node N: message" on stdout (line-buffered). */
void sc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- set-up, environment, time ----------------------------------------- */

/*
 * sc_init -- start scenario @name in this process: remember argv[0] (for
 * sc_spawn), line-buffer stdout, arm alarm(@timeout_s), default
 * LOCO_FAIL_TIMEOUT_MS to 1000 when unset, and read LOCO_NODE_ID and
 * LOCO_NODES.
 */
void sc_init(const char *name, int argc, char **argv, unsigned timeout_s);

uint32_t sc_env_u32(const char *var, uint32_t def);
uint32_t sc_node_id(void);      /* LOCO_NODE_ID (0 when unset) */
uint32_t sc_nodes(void);        /* LOCO_NODES (1 when unset) */
uint32_t sc_fail_timeout(void); /* LOCO_FAIL_TIMEOUT_MS */

/*
 * sc_scaled -- @n divided by LOCO_TEST_SCALE (default 1), at least 1: the
 * iteration counts of a test whose fabric is much slower (Soft-RoCE under
 * an emulated CPU) shrink by one factor set where the test is registered.
 */
uint32_t sc_scaled(uint32_t n);

int64_t sc_now_ns(void); /* CLOCK_MONOTONIC: one clock for every process of the host */
int64_t sc_now_ms(void);
void sc_sleep_ms(unsigned ms);

/* ---- manager and membership -------------------------------------------- */

/* sc_start -- loco_init(NULL) or fail. */
loco_manager_t *sc_start(void);

/* sc_members -- loco_manager_members() into @ids (SC_MAX_NODES); the count. */
int sc_members(loco_manager_t *m, uint32_t *ids);
bool sc_is_member(loco_manager_t *m, uint32_t node);
/* sc_members_are -- whether the members are exactly @want[0..@n) (ascending). */
bool sc_members_are(loco_manager_t *m, const uint32_t *want, int n);
/* sc_peers_are -- whether the peers of @ch are exactly @want[0..@n) (ascending). */
bool sc_peers_are(loco_channel_t *ch, const uint32_t *want, int n);
bool sc_is_peer(loco_channel_t *ch, uint32_t node);
/* sc_ids_str -- "{1, 2, 3}" into @buf; returns @buf. */
char *sc_ids_str(const uint32_t *ids, int n, char *buf, size_t len);

/* ---- processes --------------------------------------------------------- */

/*
 * sc_spawn -- start this program again (/proc/self/exe) as "argv0 @role",
 * with the environment of this process changed by @env ("NAME=VALUE"
 * strings, NULL-terminated; may be NULL). The child dies with this process
 * and is registered for cleanup. With @report_fd, a pipe is made: the
 * child finds its write end in SC_REPORT_FD (see sc_report) and *@report_fd
 * is the read end. Returns the child's PID.
 */
pid_t sc_spawn(const char *role, const char *const *env, int *report_fd);

/*
 * sc_spawn_node -- sc_spawn() this program as @role, a node with id @id
 * that joins through this node's manager @m (LOCO_JOIN, LOCO_NODE_ID,
 * LOCO_ADDR on loopback). Returns its PID; @report_fd as sc_spawn().
 */
pid_t sc_spawn_node(loco_manager_t *m, const char *role, uint32_t id, int *report_fd);

/*
 * sc_victim_wait -- a node that another one kills: log that it is ready,
 * report "ready" to its spawner, then wait for the SIGKILL (the alarm
 * fails it if nobody sends one).
 */
noreturn void sc_victim_wait(loco_manager_t *m);

/*
 * sc_standing_regions -- object @name in @ch with @n small regions whose
 * names are long (about 110 bytes): every announcement of the channel
 * then carries them, which makes control-plane traffic heavy on purpose.
 */
loco_object_t *sc_standing_regions(loco_channel_t *ch, const char *name, int n);

/* sc_report -- in a spawned child: one line to the parent's report pipe. */
void sc_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * sc_read_line -- read one line (without '\n') from @fd into @buf within
 * @timeout_ms; fails the scenario on timeout or end of file.
 */
void sc_read_line(int fd, char *buf, size_t len, int timeout_ms);

/*
 * sc_reap -- wait up to @timeout_ms for child @pid to exit. Returns its exit
 * status, 128 + signal if a signal ended it, or -1 if it did not exit in
 * time (it is then SIGKILLed and reaped).
 */
int sc_reap(pid_t pid, int timeout_ms);

/* sc_kill -- SIGKILL child @pid and reap it; returns 128 + SIGKILL or its status. */
int sc_kill(pid_t pid);

/* sc_stop -- SIGSTOP child @pid and wait (bounded) until it is stopped. */
void sc_stop(pid_t pid);

/* ---- a barrier and mailboxes among the nodes of a scenario -------------- */

/*
 * A channel "sc-sync" with one shared region: word i of the first half is
 * node i's barrier phase, word i of the second half is mailbox i (each
 * mailbox written by one node only). Writes are acknowledged before a node
 * waits, so a node that passed a barrier has every peer's earlier writes.
 */
struct sc_sync {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_shared_region_t *sr;
	loco_ack_key_t *ack;
	uint32_t me;
	uint32_t peers[SC_MAX_NODES];
	int npeers;
	uint64_t phase;
};

/* sc_sync_open -- join "sc-sync" with @nodes nodes (this one included). */
void sc_sync_open(struct sc_sync *s, loco_manager_t *m, uint32_t nodes);

/* sc_sync_wait -- a barrier among the current participants; @what names it. */
void sc_sync_wait(struct sc_sync *s, const char *what, int timeout_ms);

/* sc_sync_drop -- @node no longer takes part in barriers (it left). */
void sc_sync_drop(struct sc_sync *s, uint32_t node);

/* sc_sync_put -- set mailbox @box to @v here and at every participant. */
void sc_sync_put(struct sc_sync *s, unsigned box, uint64_t v);

/* sc_sync_get -- mailbox @box as this node sees it (0 until written). */
uint64_t sc_sync_get(struct sc_sync *s, unsigned box);

/* sc_sync_close -- free the region, the ack key and the channel. */
void sc_sync_close(struct sc_sync *s);

#endif /* LOCO_SCENARIO_H */
