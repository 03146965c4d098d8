/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wait.h -- the manager's wait policy (LOCO_WAIT) and the wake-ups that
 * the block policy sleeps on. The object-author side is loco_waiter_t in
 * loco/waiter.h, whose private layout is struct lc_waiter below; its
 * functions are in wait.c.
 *
 * Policies (enum loco_wait_policy):
 *   adaptive (the default) spin for a window, then wait as sleep does
 *          (on the fabric when a software fabric can be driven, else on
 *          the event count as block does). The window follows how long
 *          this manager's recent waits took (lc_wait_done(): a decaying
 *          histogram of durations, log2 buckets from 1 us): the bucket
 *          bound that 90 % of them ended within, between
 *          LC_WAIT_WINDOW_MIN_NS and LC_WAIT_WINDOW_MAX_NS; when most
 *          waits outlast the cap, spinning does not pay and the window is
 *          the minimum (LC_WAIT_WINDOW_OVERSUB_NS while oversubscribed,
 *          below). No fab_attr.landed wake-ups: a landing that must wake
 *          someone costs its writer a system call, and these waiters
 *          sleep in the fabric where they can. One wait in 64 spins the
 *          cap whatever the window,
 *          so durations stay measured where a short window would hide
 *          them behind a sleep. While more threads are runnable than the
 *          process may use CPUs (the progress thread looks every
 *          LC_WAIT_LOOK_NS at /proc/loadavg), each spin step yields
 *          instead of pausing: the thread waited for may need this CPU.
 *   spin   spin, then sched_yield() on every pause: never sleeps.
 *   sleep  spin LC_WAIT_SPIN_NS, then nanosleep() with a
 *          growing interval, LC_WAIT_SLEEP_MIN_NS doubling up to
 *          LC_WAIT_SLEEP_MAX_NS. 50 us is about the kernel's default
 *          timer slack (a shorter sleep costs the same); a 1 ms cap keeps
 *          the latency a wait adds under ~1 ms while an idle waiter
 *          wakes at most ~1000 times a second; after LC_WAIT_LONG_NS
 *          the sleeps grow on to LC_WAIT_SLEEP_LONG_NS (below).
 *   block  spin as sleep does, then sleep on a futex (the event count
 *          below) with the same growing timeout. Completions reaped by any
 *          thread, progress-thread turns that did work, pollers that call
 *          loco_waiter_wake(), and the tcp NIC thread after it executed a
 *          remote WRITE or atomic (fab_attr.landed) bump it and wake the
 *          sleepers at once. On verbs a remote one-sided WRITE wakes
 *          nobody (the NIC writes memory behind the CPU's back), so the
 *          timeout (1 ms at most, the progress thread's poller period)
 *          bounds how late such a change is seen. On tcp alone
 *          (fab_block_drives()) block's sleeps are spent in the fabric,
 *          as sleep's: a completion there reached a futex sleeper only
 *          through the NIC thread and the progress thread.
 *
 * Thread safety: MT-safe. lc_wait_signal() is lock-free and cheap when no
 * one is blocked (one atomic add, one load).
 */
#ifndef LOCO_LC_WAIT_H
#define LOCO_LC_WAIT_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include <loco/waiter.h>

#include "hostload.h"

#define LC_WAIT_SPIN_NS      5000ll    /* spin this long before the first sleep */
#define LC_WAIT_SLEEP_MIN_NS 50000ll   /* the first sleep */
#define LC_WAIT_SLEEP_MAX_NS 1000000ll /* the longest sleep (the poller period) */
/*
 * A wait that lasted LC_WAIT_LONG_NS lets its sleeps grow on to
 * LC_WAIT_SLEEP_LONG_NS: an idle waiter then wakes 250 times a second,
 * not 1000, and a wake-up is not free (a 1 ms nanosleep() loop takes
 * 4.4 % of a virtual CPU here: the Step 7 bound of 5 % for an idle
 * waiter went in wake-ups alone). What it adds, at most 4 ms, comes after
 * 20 ms of waiting already.
 */
/*
 * adaptive: after a sleep that work ended (the fabric's drive did some:
 * a peer's request served, its WRITE taken) the waiter spins, driving and
 * yielding, for LC_WAIT_BURST_NS before it sleeps again: the next request
 * of a burst needs no wake-up (sleep_ns < 0 holds the burst's end).
 * While the host is oversubscribed the burst lasts LC_WAIT_WINDOW_OVERSUB_NS
 * (burst_end() in wait.c): there requests come further apart than 50 us,
 * each step of the spin yields, and a wake-up costs more than the spin.
 */
#define LC_WAIT_BURST_NS 50000ll
/*
 * A wait that slept and ended within its window, its first sleep
 * (LC_WAIT_SLEEP_MIN_NS) and this much more ended in that first sleep: the
 * wake-up of an idle CPU (40-100 us on a 2-vCPU VM). loco_waiter_done()
 * counts it just past the window.
 */
#define LC_WAIT_WAKE_NS 100000ll
/* LOCO_WAIT_WINDOW_US: a fixed window instead of the learnt one, 1 us to 1 ms */
#define LC_WAIT_WINDOW_FIXED_MIN_US 1
#define LC_WAIT_WINDOW_FIXED_MAX_US 1000
#define LC_WAIT_LONG_NS             20000000ll
#define LC_WAIT_SLEEP_LONG_NS       4000000ll
/*
 * Adaptive, past its window while another waiter of the node spun within
 * LC_WAIT_NAP_MAX_NS (that one drives the fabric): a waiter naps, at
 * most this long, instead of driving (nap() in wait.c). Spinners note
 * when they spun at most every LC_WAIT_SPUN_NS.
 */
#define LC_WAIT_NAP_MAX_NS 1000000ll
#define LC_WAIT_SPUN_NS    100000ll
/*
 * adaptive's spin window: at least 20 us (a tcp round trip, 10-12 us
 * here, with its system calls), at most 100 us: past that a timed sleep (50 us
 * timer slack) or a futex wake costs less than the CPU a spin burns, and
 * an idle waiter spends at most 100 us of CPU per wait before it sleeps.
 */
#define LC_WAIT_WINDOW_MIN_NS 20000ll
#define LC_WAIT_WINDOW_MAX_NS 100000ll
/* adaptive, while the host is oversubscribed: a spin that yields at every step, up to 1 ms */
#define LC_WAIT_WINDOW_OVERSUB_NS 1000000ll
#define LC_WAIT_HIST              12                  /* buckets: < 1 us << i; one more: longer */
#define LC_WAIT_LOOK_NS           LC_HOSTLOAD_LOOK_NS /* how often the progress thread looks */
/* go_home() (wait.c): a thread is moved back to its home CPU at most this often */
#define LC_WAIT_HOME_EVERY_NS 10000000ll
/* go_home(): a spin looks where it runs at its first pause and every this many after */
#define LC_WAIT_HOME_PAUSES 1024u
/*
 * adaptive: inside its window a spinning waiter reads the clock once in
 * LC_WAIT_CLOCK_EVERY pauses (and after any that yielded): a read cost
 * 50-100 ns here, 26 % of an rpc caller's samples while it spun for a
 * reply, and the window is 20 us or more
 */
#define LC_WAIT_CLOCK_EVERY 4u
_Static_assert(LC_WAIT_HOME_PAUSES % LC_WAIT_CLOCK_EVERY == 0, "go_home() runs on a clock pause");
/* adaptive: a spin at home (at_home(), wait.c) yields once in this many empty drives */
#define LC_WAIT_HOME_YIELD 64u

struct lc_wait {
	int policy;   /* enum loco_wait_policy, never LOCO_WAIT_DEFAULT */
	uint32_t seq; /* atomic: event count; the futex word of block */
	int blocked;  /* atomic: waiters sleeping on seq */
	/*
	 * drive(drive_arg, ns): instead of sleeping up to ns, do the fabric's
	 * work and wait for it (fab_progress()): 1 something happened, 0
	 * nothing did, < 0 not now (sleep as the policy says). NULL: none.
	 */
	int (*drive)(void *arg, int64_t ns);
	void *drive_arg;
	/* adaptive */
	int64_t window_ns;       /* atomic: the spin window */
	int64_t window_fixed_ns; /* LOCO_WAIT_WINDOW_US: window_ns, not learnt (0: learnt) */
	uint32_t hist[LC_WAIT_HIST + 1]; /* atomic: recent wait durations, decaying */
	uint32_t samples;                /* atomic: lc_wait_done() calls */
	struct lc_hostload load;         /* progress thread: is the host oversubscribed */
	/* the thread lc_spread() placed, and the CPU its spins return it to (lc_wait_set_home()) */
	int home_cpu;          /* atomic: -1 none; set after the three below (release) */
	int home_alone;        /* no other node of the host was given home_cpu */
	int home_guests;       /* the node's other spinning threads go home too (a CPU per node) */
	pthread_t home_thr;    /* the joining thread that was placed */
	uint64_t home_next_ns; /* atomic: lc_wait_home() moves nothing before this */
	uint64_t homes;        /* atomic: moves back home so far */
	uint64_t spun_ns;   /* atomic: a waiter last spun in its window (every LC_WAIT_SPUN_NS) */
	pthread_t spun_thr; /* atomic: ... which one (nap(): another than the napper) */
};

/* lc_wait_parse -- "adaptive", "spin", "sleep" or "block" into *@policy. 0, -EINVAL. */
int lc_wait_parse(const char *s, int *policy);

/* lc_wait_name -- the name of @policy. */
const char *lc_wait_name(int policy);

/* lc_wait_init -- @policy (LOCO_WAIT_DEFAULT: adaptive). */
void lc_wait_init(struct lc_wait *w, int policy);

/* lc_wait_policy -- @w's policy (enum loco_wait_policy, never LOCO_WAIT_DEFAULT). */
static inline int lc_wait_policy(const struct lc_wait *w)
{
	return w->policy;
}

/* lc_wait_fix_window -- LOCO_WAIT_WINDOW_US: adaptive spins @ns, never learnt. At set-up. */
void lc_wait_fix_window(struct lc_wait *w, int64_t ns);

/* lc_wait_set_drive -- waiters do the fabric's work through @drive (see struct lc_wait). */
void lc_wait_set_drive(struct lc_wait *w, int (*drive)(void *arg, int64_t ns), void *arg);

/* lc_wait_fini -- close what lc_wait_init() opened. */
void lc_wait_fini(struct lc_wait *w);

/*
 * lc_wait_look -- (progress thread) every LC_WAIT_LOOK_NS, whether more
 * threads are runnable on the host than this process may use CPUs.
 */
void lc_wait_look(struct lc_wait *w, uint64_t now);

/* lc_wait_done -- a wait of @ns ended: adaptive's histogram and window. */
void lc_wait_done(struct lc_wait *w, int64_t ns);

/* lc_wait_window -- adaptive's window for the histogram @hist (pure: unit-tested). */
int64_t lc_wait_window(const uint32_t *hist);

/* lc_wait_signal -- something happened: bump the event count, wake blocked waiters. NULL-safe. */
void lc_wait_signal(struct lc_wait *w);

/*
 * The private layout of loco_waiter_t (loco/waiter.h), which callers hold
 * on their stacks: it must fit the public struct (its size is ABI since
 * loco 0.4), and the fields the public struct shows (policy, pauses) stay
 * where it shows them. may_alias: liboco reads a loco_waiter_t through it.
 */
struct __attribute__((may_alias)) lc_waiter {
	struct lc_wait *priv; /* the manager's wait state (NULL: none) */
	int policy;           /* enum loco_wait_policy (never 0) */
	uint32_t seq;         /* the event count seen */
	uint32_t pauses;      /* pauses since init or reset */
	uint32_t spinning;    /* adaptive: the last pause was a spin step that did not yield */
	uint64_t t0_ns;       /* when spinning started */
	int64_t sleep_ns;     /* the next sleep (< 0: adaptive's burst end, negated) */
};

_Static_assert(sizeof(loco_waiter_t) == LOCO_WAITER_SIZE, "loco_waiter_t's size is ABI");
_Static_assert(sizeof(struct lc_waiter) <= sizeof(loco_waiter_t), "the private waiter must fit");
_Static_assert(_Alignof(struct lc_waiter) <= _Alignof(loco_waiter_t), "and be no more aligned");
_Static_assert(offsetof(struct lc_waiter, policy) == offsetof(loco_waiter_t, policy) &&
                   offsetof(struct lc_waiter, pauses) == offsetof(loco_waiter_t, pauses),
               "the public fields stay where loco/waiter.h shows them");

/* lc_waiter -- the private view of @w. */
static inline struct lc_waiter *lc_waiter(loco_waiter_t *w)
{
	return (struct lc_waiter *)(void *)w;
}

/* lc_waiter_init -- loco_waiter_init() on wait state @s (NULL: the default policy, no wakes). */
void lc_waiter_init(loco_waiter_t *w, struct lc_wait *s);

/*
 * lc_spread -- spin policy, LOCO_SPREAD=1 (the default): the first time a
 * channel of @m is joined, move the calling thread to the CPU its place
 * among this host's nodes picks (lc_spread_cpu(): the nodes whose control
 * address has our IP, by id; round robin over the CPUs the thread may
 * use), then give it back its CPU mask: it starts there and the scheduler
 * may move it; its spins move it back (lc_wait_set_home()). Nothing for other
 * policies, a node alone on its host, or a thread that may use one CPU
 * (loco-run --bind). Logged at info. spread.c.
 */
void lc_spread(loco_manager_t *m);

/*
 * lc_wait_set_home -- (lc_spread()) the calling thread was placed on
 * @cpu; @alone: no other node of the host was given it. Its spins bring
 * it back there when the scheduler moves it, and, alone there, pause
 * rather than yield (wait.c, go_home() and spin_step()). @guests: each
 * node got a CPU and none is spare, so the node's other threads that spin
 * (an rpc or map server thread, a second application thread) go there
 * too, rather than onto another node's CPU.
 */
void lc_wait_set_home(struct lc_wait *w, int cpu, int alone, int guests);

/*
 * lc_wait_move -- move the calling thread to @cpu, then give it @mask:
 * it runs there until the scheduler moves it. 0, or -errno (logged when
 * the mask could not be given back). lc_spread() places a node's thread
 * with it; its spins bring it back with it (go_home()).
 */
int lc_wait_move(int cpu, const cpu_set_t *mask);

/* lc_spread_cpu -- the @index-th CPU of @allowed, round robin; -1 if @allowed is empty. */
int lc_spread_cpu(const cpu_set_t *allowed, uint32_t index);

#endif /* LOCO_LC_WAIT_H */
