/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * callback-thread.c -- object callbacks run on the manager's progress
 * thread, never on an application thread that waits on an ack key (DESIGN
 * §4: the progress thread owns all membership work and callbacks; waiting
 * calls never do membership work themselves).
 *
 * loco-run -n 2. Every node adds a poller (loco_poller_add()): pollers run
 * on the progress thread, so the poller's pthread_self() names it. Then
 * ROUNDS rounds (ROUNDS_CI in CI's run, where its 4 runs took 100 s; ROUNDS with
 * LOCO_TEST_FULL=1), each with a victim: node 1 spawns node 3 + r in round r
 * (this program, role "victim"), so each round has 3 nodes.
 * In channel "cbt-<victim>", every node holds object "watch" (made with
 * loco_object_create(), with peer_join / peer_leave callbacks that record
 * the thread they run on) with a WLEN-byte region "buf".
 *
 *   - The blocker (node 1 in even rounds, node 2 in odd ones): a feeder thread
 *     keeps INFLIGHT WRITEs of WLEN bytes to the victim's "buf" attached to
 *     one ack key, and the main thread blocks in loco_ack_wait(key, 20 s)
 *     on that key until the victim is gone.
 *   - The looper (the other node): its main thread keeps INFLIGHT WRITEs
 *     to the victim posted and loops loco_ack_wait(key, 0) (a test only;
 *     sched_yield() between calls), timing every call, until it has heard
 *     the victim leave and the key is idle.
 *   - Node 1 (the victim's parent) SIGSTOPs the victim KILL_AFTER_MS after
 *     the blocker entered its wait (so WRITEs are surely in flight: the
 *     tcp fabric's target is the victim's own NIC thread), and SIGKILLs it
 *     STOP_MS later, by PID, from a killer thread (even rounds: node 1's
 *     main thread is blocked) or from its looping main thread (odd rounds).
 *     Who handles the death first (the data path's error completions or
 *     the control connection's end) is a race: several rounds give a wrong
 *     thread several chances to show.
 *
 * Checks, on both nodes, each round:
 *   - peer_leave(victim) runs exactly once, within the fail timeout +
 *     SLACK_MS of the kill, on the progress thread (the poller's thread),
 *     never on the main thread; every peer_join ran on the progress thread;
 *   - the victim is no member any more;
 *   - blocker: loco_ack_wait() returns within the fail timeout + SLACK_MS
 *     of the kill (the victim's WRITEs complete, with errors, within the
 *     fabric's dead-peer bound);
 *   - looper: no loco_ack_wait(key, 0) call took more than CALL_MAX_MS (a
 *     test must not do membership work, which can block).
 * A failed check is printed at once ("CHECK FAILED") and the rounds go on;
 * the node fails at the end. Figures printed: the callbacks' threads,
 * detection and wait times, the number and the longest of the looper's calls.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scenario.h"

#define ROUNDS        12
#define ROUNDS_CI     6           /* both kinds of round three times each */
#define VICTIM0       3           /* round r's victim is node VICTIM0 + r */
#define WLEN          (256 << 10) /* bytes of one WRITE, and of each region */
#define INFLIGHT      32          /* WRITEs kept outstanding on a key */
#define KILL_AFTER_MS 100         /* from the blocker entering its wait to the SIGSTOP */
#define STOP_MS       100         /* from the SIGSTOP to the SIGKILL */
#define SLACK_MS      3000        /* over the fail timeout: detection and the wait's return */
#define CALL_MAX_MS   500         /* the longest loco_ack_wait(key, 0) call allowed */
#define LOOP_MAX_MS   20000       /* bound of the blocker's and the looper's loops */
#define BOX_INWAIT    1           /* mailbox BOX_INWAIT + r: round r's blocker waits */
#define BOX_KILL      20          /* mailbox BOX_KILL + r: round r's kill time */

static int failures; /* checks failed so far: reported at once, failed at the end */
static pthread_t main_tid;
static pthread_t progress_tid;
static int progress_known; /* atomic: progress_tid is set */
static int poller_moved;   /* atomic: the poller ran on another thread once */

/* What the callbacks of one round's "watch" object saw, per node id. */
struct watch {
	int joins[SC_MAX_NODES];        /* atomic: peer_join calls */
	int leaves[SC_MAX_NODES];       /* atomic: peer_leave calls */
	int off_progress[SC_MAX_NODES]; /* atomic: callbacks not on the progress thread */
	int on_main[SC_MAX_NODES];      /* atomic: callbacks on the main thread */
	int64_t leave_ns[SC_MAX_NODES]; /* atomic: when peer_leave ran (the first) */
};

/* poller -- on the progress thread: remember which thread that is. */
static int poller(void *arg)
{
	(void)arg;
	if (!__atomic_load_n(&progress_known, __ATOMIC_ACQUIRE)) {
		progress_tid = pthread_self();
		__atomic_store_n(&progress_known, 1, __ATOMIC_RELEASE);
	} else if (!pthread_equal(progress_tid, pthread_self())) {
		__atomic_store_n(&poller_moved, 1, __ATOMIC_RELAXED);
	}
	return LOCO_POLLER_IDLE;
}

/* seen_thread -- a callback about @node runs: note where. */
static void seen_thread(struct watch *w, uint32_t node)
{
	pthread_t self = pthread_self();

	if (!__atomic_load_n(&progress_known, __ATOMIC_ACQUIRE) ||
	    !pthread_equal(self, progress_tid))
		__atomic_add_fetch(&w->off_progress[node], 1, __ATOMIC_RELAXED);
	if (pthread_equal(self, main_tid))
		__atomic_add_fetch(&w->on_main[node], 1, __ATOMIC_RELAXED);
}

static void on_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)view;
	struct watch *w = arg;

	(void)obj;
	if (node >= SC_MAX_NODES)
		return;
	seen_thread(w, node);
	__atomic_add_fetch(&w->joins[node], 1, __ATOMIC_RELEASE);
}

static void on_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)view;
	struct watch *w = arg;
	int64_t zero = 0;

	(void)obj;
	if (node >= SC_MAX_NODES)
		return;
	seen_thread(w, node);
	__atomic_compare_exchange_n(&w->leave_ns[node], &zero, sc_now_ns(), 0, __ATOMIC_RELAXED,
	                            __ATOMIC_RELAXED);
	__atomic_add_fetch(&w->leaves[node], 1, __ATOMIC_RELEASE);
}

/* check_failed -- report a failed check and go on (both variants report before the end). */
static void check_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void check_failed(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sc_log("CHECK FAILED: %s", buf);
	failures++;
}

static const struct loco_object_ops watch_ops = {.peer_join = on_join, .peer_leave = on_leave};

static void sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* victim_main -- node 3 or 4: hold "buf" in "cbt-<id>", report, wait for SIGKILL. */
static noreturn void victim_main(void)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *reg;
	char name[32];

	snprintf(name, sizeof(name), "cbt-%u", loco_manager_node_id(m));
	SC_ASSERT_OK(loco_channel_create(m, NULL, name, 3, &ch));
	SC_ASSERT_OK(loco_object_create(ch, "watch", NULL, NULL, &obj));
	SC_ASSERT_OK(
	    loco_region_create(obj, "buf", WLEN, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &reg));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_victim_wait(m);
}

static pid_t spawn_victim(loco_manager_t *m, uint32_t id, int *report)
{
	return sc_spawn_node(m, "victim", id, report);
}

/* victim_ready -- the victim's "ready" line (it joined its channel). */
static void victim_ready(int report, uint32_t id)
{
	char line[32];

	sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
	close(report);
	if (strcmp(line, "ready") != 0)
		SC_FAIL("victim node %u reported '%s'", id, line);
}

/* One round's state on a base node. */
struct round {
	uint32_t victim;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *reg;
	loco_ack_key_t *ack;
	loco_rref_t rr;     /* the victim's "buf" */
	int64_t t_wait_ret; /* blocker: when its blocked wait returned */
	struct watch w;
};

/* The blocker's feeder thread: keeps INFLIGHT WRITEs to the victim on the key. */
struct feeder {
	struct round *rd;
	int stop;      /* atomic */
	long posted;   /* atomic: WRITEs posted */
	long failed;   /* posts refused (other than -EAGAIN) */
	int first_err; /* the first refusal */
};

static void *feeder_main(void *arg)
{
	struct feeder *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		int ret;

		if (loco_ack_outstanding(f->rd->ack) >= INFLIGHT) {
			sleep_us(50);
			continue;
		}
		ret = loco_write(f->rd->reg, 0, &f->rd->rr, 0, WLEN, f->rd->ack);
		if (ret == 0) {
			__atomic_add_fetch(&f->posted, 1, __ATOMIC_RELEASE);
		} else if (ret != -EAGAIN) {
			/* the victim is gone (its link closed): expected after the kill */
			if (f->failed++ == 0)
				f->first_err = ret;
			sleep_us(1000);
		} else {
			sleep_us(50);
		}
	}
	return NULL;
}

/* The killer thread (round 0): node 1's main thread is blocked in its wait. */
struct killer {
	pid_t pid;
	const int *in_wait;  /* atomic: the main thread is about to wait */
	loco_ack_key_t *ack; /* the blocked key: its outstanding count at the kill */
	int64_t t_kill;      /* out: CLOCK_MONOTONIC of the SIGKILL */
	size_t outstanding;  /* out: WRITEs outstanding at the kill */
	int err;             /* out: errno of a failed kill(), or -1 if the wait never began */
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;
	int64_t deadline = sc_now_ms() + SC_WAIT_MS;

	while (!__atomic_load_n(k->in_wait, __ATOMIC_ACQUIRE)) {
		if (sc_now_ms() >= deadline) {
			k->err = -1;
			return NULL;
		}
		sc_sleep_ms(1);
	}
	sc_sleep_ms(KILL_AFTER_MS);
	if (kill(k->pid, SIGSTOP) < 0) {
		k->err = errno;
		return NULL;
	}
	sc_sleep_ms(STOP_MS);
	k->outstanding = loco_ack_outstanding(k->ack);
	k->t_kill = sc_now_ns();
	if (kill(k->pid, SIGKILL) < 0)
		k->err = errno;
	return NULL;
}

static void round_open(struct round *rd, loco_manager_t *m, uint32_t victim)
{
	char name[32];

	memset(rd, 0, sizeof(*rd));
	rd->victim = victim;
	snprintf(name, sizeof(name), "cbt-%u", victim);
	SC_ASSERT_OK(loco_channel_create(m, NULL, name, 3, &rd->ch));
	SC_ASSERT_OK(loco_object_create(rd->ch, "watch", &watch_ops, &rd->w, &rd->obj));
	SC_ASSERT_OK(loco_region_create(rd->obj, "buf", WLEN, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE,
	                                &rd->reg));
	SC_ASSERT_OK(loco_ack_key_create(m, &rd->ack));
}

static void round_close(struct round *rd)
{
	loco_ack_key_destroy(rd->ack);
	loco_object_destroy(rd->obj);
	SC_ASSERT_OK(loco_channel_destroy(rd->ch));
}

/* drain -- wait (bounded) until the key is idle; its result is not judged here. */
static void drain(struct round *rd)
{
	for (int i = 0; i < 20 && loco_ack_wait(rd->ack, SC_NS) == -ETIMEDOUT; i++)
		;
	if (loco_ack_outstanding(rd->ack) != 0)
		SC_FAIL("%zu WRITE(s) to the dead victim node %u still outstanding after 20 s",
		        loco_ack_outstanding(rd->ack), rd->victim);
}

/*
 * blocker -- keep WRITEs in flight from a feeder thread and block in
 * loco_ack_wait() until the victim is gone. Node 1 kills the victim from a
 * killer thread; node 2 tells node 1 through a mailbox that it waits.
 */
static void blocker(struct round *rd, struct sc_sync *sync, int r, pid_t pid, int64_t *t_kill)
{
	struct feeder f = {.rd = rd};
	struct killer k = {.pid = pid, .ack = rd->ack};
	pthread_t ft, kt;
	int in_wait = 0, ret = 0, wakes = 0;
	int64_t t_in, t_ret, deadline;
	uint32_t me = sync->me;

	k.in_wait = &in_wait;
	SC_ASSERT_OK(pthread_create(&ft, NULL, feeder_main, &f));
	/* (on shm a WRITE executes at post: none stays outstanding, the waits below find the key
	 * idle and wait again) */
	SC_WAIT_UNTIL(__atomic_load_n(&f.posted, __ATOMIC_ACQUIRE) > 0, SC_WAIT_MS,
	              "the feeder's first WRITE");
	if (me == 1)
		SC_ASSERT_OK(pthread_create(&kt, NULL, killer_main, &k));
	else
		sc_sync_put(sync, BOX_INWAIT + (unsigned)r, 1);
	__atomic_store_n(&in_wait, 1, __ATOMIC_RELEASE);
	t_in = sc_now_ns();
	deadline = sc_now_ms() + LOOP_MAX_MS;
	/*
	 * The key may go idle for a moment while the victim runs (the feeder
	 * then refills it): wait again until a WRITE failed or the victim left.
	 */
	for (;;) {
		ret = loco_ack_wait(rd->ack, (int64_t)LOOP_MAX_MS * 1000000);
		if (ret == -ETIMEDOUT)
			SC_FAIL("loco_ack_wait(key, %d s) timed out with %zu WRITE(s) to node %u "
			        "outstanding",
			        LOOP_MAX_MS / 1000, loco_ack_outstanding(rd->ack), rd->victim);
		if (ret != 0 || __atomic_load_n(&rd->w.leaves[rd->victim], __ATOMIC_ACQUIRE) > 0)
			break;
		wakes++;
		if (loco_ack_outstanding(rd->ack) == 0)
			sc_sleep_ms(1); /* nothing in flight (the feeder's posts are refused) */
		if (sc_now_ms() >= deadline)
			SC_FAIL("the victim node %u was not killed within %d ms", rd->victim,
			        LOOP_MAX_MS);
	}
	t_ret = sc_now_ns();
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	SC_ASSERT_OK(pthread_join(ft, NULL));
	drain(rd);
	if (me == 1) {
		SC_ASSERT_OK(pthread_join(kt, NULL));
		if (k.err == -1)
			SC_FAIL("the killer thread never saw the main thread wait");
		if (k.err)
			SC_FAIL("kill(%d): %s", (int)pid, strerror(k.err));
		SC_ASSERT_EQ(sc_reap(pid, 5000), 128 + SIGKILL);
		*t_kill = k.t_kill;
		sc_log("round %d: killed node %u with %zu WRITE(s) of %d KiB outstanding on the "
		       "blocked key",
		       r, rd->victim, k.outstanding, WLEN >> 10);
	}
	sc_log("round %d: blocker: loco_ack_wait returned %d (%s) after %.1f ms (%d idle "
	       "returns before), %ld WRITEs posted, %ld refused (first %s)",
	       r, ret, loco_strerror(ret), (double)(t_ret - t_in) / 1e6, wakes, f.posted, f.failed,
	       f.failed ? loco_strerror(f.first_err) : "-");
	rd->t_wait_ret = t_ret;
}

/*
 * looper -- keep WRITEs in flight and loop loco_ack_wait(key, 0), timing
 * each call, until the victim left and the key is idle. Node 1 stops and
 * kills the victim from here once node 2 (the blocker) waits.
 */
static void looper(struct round *rd, struct sc_sync *sync, int r, pid_t pid, int64_t *t_kill)
{
	int64_t t_start = sc_now_ns(), t_seen = 0, t_stop = 0, max_ns = 0, t;
	long calls = 0, posted = 0, refused = 0, errs = 0;
	int first_err = 0, ret = 0;
	bool left = false;

	for (;;) {
		int64_t t0;

		t = sc_now_ns();
		if (t - t_start > (int64_t)LOOP_MAX_MS * 1000000)
			SC_FAIL("round %d: looper: node %u not gone after %d ms (%zu outstanding)",
			        r, rd->victim, LOOP_MAX_MS, loco_ack_outstanding(rd->ack));
		if (!left && loco_ack_outstanding(rd->ack) < INFLIGHT) {
			int p = loco_write(rd->reg, 0, &rd->rr, 0, WLEN, rd->ack);

			if (p == 0)
				posted++;
			else if (p != -EAGAIN)
				refused++;
		}
		t0 = sc_now_ns();
		ret = loco_ack_wait(rd->ack, 0);
		t = sc_now_ns();
		calls++;
		if (t - t0 > max_ns)
			max_ns = t - t0;
		if (ret != 0 && ret != -ETIMEDOUT && errs++ == 0)
			first_err = ret;
		if (sync->me == 1) {
			if (t_seen == 0 && sc_sync_get(sync, BOX_INWAIT + (unsigned)r) != 0)
				t_seen = t;
			if (t_seen != 0 && t_stop == 0 && t - t_seen >= KILL_AFTER_MS * 1000000ll) {
				sc_stop(pid);
				t_stop = sc_now_ns();
			}
			if (t_stop != 0 && *t_kill == 0 && t - t_stop >= STOP_MS * 1000000ll) {
				sc_log(
				    "round %d: killing node %u with %zu WRITE(s) outstanding here",
				    r, rd->victim, loco_ack_outstanding(rd->ack));
				*t_kill = sc_now_ns();
				SC_ASSERT_EQ(sc_kill(pid), 128 + SIGKILL);
			}
		}
		if (!left && __atomic_load_n(&rd->w.leaves[rd->victim], __ATOMIC_ACQUIRE) > 0)
			left = true;
		else if (left && ret != -ETIMEDOUT)
			break; /* idle after the victim left (tested after the leave was seen) */
		sched_yield();
	}
	sc_log("round %d: looper: %ld loco_ack_wait(key, 0) calls, the longest %.3f ms; %ld "
	       "WRITEs posted, %ld refused; %ld error result(s) (first %s)",
	       r, calls, (double)max_ns / 1e6, posted, refused, errs,
	       errs ? loco_strerror(first_err) : "-");
	if (max_ns > CALL_MAX_MS * 1000000ll)
		check_failed(
		    "round %d: a loco_ack_wait(key, 0) call took %.1f ms (more than %d ms): a "
		    "test must not do membership work",
		    r, (double)max_ns / 1e6, CALL_MAX_MS);
}

/* check_callbacks -- round @r's callbacks on this node: where and how often they ran. */
static void check_callbacks(struct round *rd, int r, uint32_t other, int64_t t_kill, uint32_t ft)
{
	struct watch *w = &rd->w;
	uint32_t v = rd->victim;
	char what[64];
	double det;

	snprintf(what, sizeof(what), "peer_leave(%u)", v);
	SC_WAIT_UNTIL(__atomic_load_n(&w->leaves[v], __ATOMIC_ACQUIRE) > 0, (int)ft + SLACK_MS,
	              what);
	snprintf(what, sizeof(what), "node %u to be no member", v);
	SC_WAIT_UNTIL(!sc_is_member(loco_channel_manager(rd->ch), v), (int)ft + SLACK_MS, what);
	sc_sleep_ms(100); /* a second call would come now */
	det = (double)(__atomic_load_n(&w->leave_ns[v], __ATOMIC_RELAXED) - t_kill) / 1e6;
	sc_log("round %d: peer_leave(%u) ran %d time(s), %.1f ms after the kill, %s (%s the main "
	       "thread); peer_join(%u) %d, peer_join(%u) %d time(s)",
	       r, v, w->leaves[v], det,
	       w->off_progress[v] ? "NOT on the progress thread" : "on the progress thread",
	       w->on_main[v] ? "ON" : "not on", v, w->joins[v], other, w->joins[other]);
	for (uint32_t n = 0; n < SC_MAX_NODES; n++) {
		if (w->on_main[n])
			check_failed(
			    "round %d: %d callback(s) about node %u ran on the main thread", r,
			    w->on_main[n], n);
		if (w->off_progress[n] > w->on_main[n])
			check_failed(
			    "round %d: %d callback(s) about node %u ran off the progress thread", r,
			    w->off_progress[n], n);
	}
	if (w->leaves[v] != 1 || w->leaves[other] != 0 || w->joins[v] != 1 || w->joins[other] != 1)
		check_failed("round %d: peer_leave(%u) %d, peer_leave(%u) %d, peer_join(%u) %d, "
		             "peer_join(%u) %d time(s): expected 1, 0, 1, 1",
		             r, v, w->leaves[v], other, w->leaves[other], v, w->joins[v], other,
		             w->joins[other]);
	if (det > ft + SLACK_MS)
		check_failed(
		    "round %d: peer_leave(%u) %.1f ms after the kill, more than %u + %d ms", r, v,
		    det, ft, SLACK_MS);
	SC_ASSERT(!__atomic_load_n(&poller_moved, __ATOMIC_RELAXED));
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2};
	loco_manager_t *m;
	loco_poller_t *p;
	struct sc_sync sync;
	uint32_t me, other, ft, rounds;

	sc_init("callback-thread", argc, argv, 60);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	main_tid = pthread_self();
	m = sc_start();
	me = loco_manager_node_id(m);
	other = me == 1 ? 2 : 1;
	ft = sc_fail_timeout();
	SC_ASSERT_OK(loco_poller_add(m, poller, NULL, 100 * 1000000ll, &p));
	SC_WAIT_UNTIL(__atomic_load_n(&progress_known, __ATOMIC_ACQUIRE), SC_WAIT_MS,
	              "the poller's first call");
	if (pthread_equal(progress_tid, main_tid))
		SC_FAIL("the poller ran on the main thread");
	SC_WAIT_UNTIL(sc_members_are(m, base, 2), SC_WAIT_MS, "members {1, 2}");
	sc_sync_open(&sync, m, 2);

	rounds = sc_env_u32("LOCO_TEST_FULL", 0) == 1 ? ROUNDS : ROUNDS_CI;
	for (int r = 0; r < (int)rounds; r++) {
		struct round rd;
		uint32_t v = VICTIM0 + (uint32_t)r;
		uint32_t blocker_node = r % 2 == 0 ? 1 : 2;
		int64_t t_kill = 0;
		pid_t pid = 0;
		int report = -1;
		char what[64];

		round_open(&rd, m, v);
		if (me == 1)
			pid = spawn_victim(m, v, &report);
		SC_ASSERT_OK(loco_channel_join(rd.ch, 20 * SC_NS));
		if (me == 1)
			victim_ready(report, v);
		snprintf(what, sizeof(what), "node %u's region", v);
		SC_WAIT_UNTIL(loco_region_remote(rd.reg, v, &rd.rr) == 0, SC_WAIT_MS, what);
		sc_sync_wait(&sync, "round ready", SC_WAIT_MS);
		sc_log("round %d: victim node %u; node %u blocks in loco_ack_wait(), node %u loops "
		       "loco_ack_wait(key, 0)",
		       r, v, blocker_node, blocker_node == 1 ? 2 : 1);

		if (me == blocker_node)
			blocker(&rd, &sync, r, pid, &t_kill);
		else
			looper(&rd, &sync, r, pid, &t_kill);
		drain(&rd);
		if (me == 1)
			sc_sync_put(&sync, BOX_KILL + (unsigned)r, (uint64_t)t_kill);
		sc_sync_wait(&sync, "round done", SC_WAIT_MS);
		t_kill = (int64_t)sc_sync_get(&sync, BOX_KILL + (unsigned)r);
		SC_ASSERT(t_kill != 0);
		if (me == blocker_node) {
			double ms = (double)(rd.t_wait_ret - t_kill) / 1e6;

			sc_log(
			    "round %d: the blocked loco_ack_wait returned %.1f ms after the kill",
			    r, ms);
			if (ms > ft + SLACK_MS)
				check_failed(
				    "round %d: the blocked wait returned %.1f ms after the kill, "
				    "more than %u + %d ms",
				    r, ms, ft, SLACK_MS);
		}
		check_callbacks(&rd, r, other, t_kill, ft);
		sc_sync_wait(&sync, "round checked", SC_WAIT_MS);
		round_close(&rd);
	}

	SC_ASSERT_OK(loco_poller_remove(p));
	sc_sync_close(&sync);
	loco_fini(m);
	if (failures)
		SC_FAIL("%d check(s) failed (see CHECK FAILED above)", failures);
	sc_log("passed: every callback ran on the progress thread");
	return SC_EXIT_PASS;
}
