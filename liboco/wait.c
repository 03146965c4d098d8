/* SPDX-License-Identifier: BSD-2-Clause */
/* wait.c -- wait policies and the object-author waiter (wait.h, loco/channel.h). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "handle.h"
#include "log.h"
#include "manager.h"
#include "wait.h"

#define SPIN_PAUSES 2048u /* spin policy: pauses that only relax before yielding */
#define CLOCK_AFTER 16u   /* sleep and block: pauses before the first clock read */

int lc_wait_parse(const char *s, int *policy)
{
	if (strcmp(s, "adaptive") == 0)
		*policy = LOCO_WAIT_ADAPTIVE;
	else if (strcmp(s, "spin") == 0)
		*policy = LOCO_WAIT_SPIN;
	else if (strcmp(s, "sleep") == 0)
		*policy = LOCO_WAIT_SLEEP;
	else if (strcmp(s, "block") == 0)
		*policy = LOCO_WAIT_BLOCK;
	else
		return -EINVAL;
	return 0;
}

const char *lc_wait_name(int policy)
{
	switch (policy) {
	case LOCO_WAIT_SPIN:
		return "spin";
	case LOCO_WAIT_BLOCK:
		return "block";
	case LOCO_WAIT_SLEEP:
		return "sleep";
	default:
		return "adaptive";
	}
}

void lc_wait_init(struct lc_wait *w, int policy)
{
	memset(w, 0, sizeof(*w));
	w->policy =
	    policy == LOCO_WAIT_SPIN || policy == LOCO_WAIT_SLEEP || policy == LOCO_WAIT_BLOCK
	        ? policy
	        : LOCO_WAIT_ADAPTIVE;
	w->window_ns = LC_WAIT_WINDOW_MAX_NS; /* until waits were measured */
	w->load.fd = -1;                      /* never busy: only adaptive asks */
	w->home_cpu = -1;                     /* until lc_spread() places a thread */
	if (w->policy == LOCO_WAIT_ADAPTIVE)
		lc_hostload_init(&w->load);
}

void lc_wait_fix_window(struct lc_wait *w, int64_t ns)
{
	w->window_ns = w->window_fixed_ns = ns;
}

void lc_wait_set_drive(struct lc_wait *w, int (*drive)(void *arg, int64_t ns), void *arg)
{
	w->drive = drive;
	w->drive_arg = arg;
}

void lc_wait_fini(struct lc_wait *w)
{
	lc_hostload_fini(&w->load);
}

void lc_wait_look(struct lc_wait *w, uint64_t now)
{
	(void)lc_hostload_look(&w->load, now);
}

int64_t lc_wait_window(const uint32_t *hist)
{
	uint64_t total = 0, cum = 0, within = 0;

	for (int i = 0; i <= LC_WAIT_HIST; i++)
		total += hist[i];
	if (total == 0)
		return LC_WAIT_WINDOW_MAX_NS;
	for (int i = 0; i < LC_WAIT_HIST; i++) {
		int64_t bound = 1000ll << i; /* bucket i: shorter than this */

		cum += hist[i];
		if (bound <= LC_WAIT_WINDOW_MAX_NS)
			within = cum;
		if (cum * 10 >= total * 9) {
			if (bound > LC_WAIT_WINDOW_MAX_NS)
				break;
			return bound < LC_WAIT_WINDOW_MIN_NS ? LC_WAIT_WINDOW_MIN_NS : bound;
		}
	}
	/* most waits outlast the cap: spin it only if at least half of them end within it */
	return within * 2 >= total ? LC_WAIT_WINDOW_MAX_NS : LC_WAIT_WINDOW_MIN_NS;
}

void lc_wait_done(struct lc_wait *w, int64_t ns)
{
	int i = 0;
	uint32_t n;

	if (w == NULL)
		return;
	while (i < LC_WAIT_HIST && ns >= (1000ll << i))
		i++;
	__atomic_add_fetch(&w->hist[i], 1, __ATOMIC_RELAXED);
	n = __atomic_add_fetch(&w->samples, 1, __ATOMIC_RELAXED);
	if (n % 16 == 0 && w->window_fixed_ns == 0) {
		uint32_t h[LC_WAIT_HIST + 1], total = 0;

		for (i = 0; i <= LC_WAIT_HIST; i++)
			total += h[i] = __atomic_load_n(&w->hist[i], __ATOMIC_RELAXED);
		__atomic_store_n(&w->window_ns, lc_wait_window(h), __ATOMIC_RELAXED);
		if (total >
		    256) /* decay: the last few hundred waits count (a racing add may be lost) */
			for (i = 0; i <= LC_WAIT_HIST; i++)
				__atomic_store_n(&w->hist[i], h[i] / 2, __ATOMIC_RELAXED);
	}
}

void lc_wait_signal(struct lc_wait *w)
{
	if (w == NULL)
		return;
	/*
	 * seq_cst on both sides (here: add seq, load blocked; the sleeper: add
	 * blocked, load seq): at least one sees the other, so a sleeper either
	 * sees the new count and does not sleep, or is woken.
	 */
	__atomic_add_fetch(&w->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->blocked, __ATOMIC_SEQ_CST) > 0)
		syscall(SYS_futex, &w->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void lc_waiter_init(loco_waiter_t *pw, struct lc_wait *s)
{
	struct lc_waiter *w = lc_waiter(pw);

	w->priv = s;
	w->policy = s != NULL ? s->policy : LOCO_WAIT_SLEEP; /* no manager: nothing to learn from */
	loco_waiter_reset(pw);
}

void loco_waiter_init(loco_waiter_t *w, loco_manager_t *m)
{
	if (w == NULL)
		return;
	/* a finished manager's waiter sleeps, as for NULL: its wait state is gone */
	lc_waiter_init(w, lc_handle_ok(m) == 0 ? &m->wait : NULL);
}

void loco_waiter_reset(loco_waiter_t *pw)
{
	struct lc_waiter *w = lc_waiter(pw);
	struct lc_wait *s;

	if (w == NULL)
		return;
	s = w->priv;
	w->pauses = 0;
	w->spinning = 0;
	w->t0_ns = 0;
	w->sleep_ns = LC_WAIT_SLEEP_MIN_NS;
	/* events after this count wake the waiter (pairs with lc_wait_signal()) */
	w->seq = s != NULL ? __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) : 0;
}

/* block -- sleep on @s's event count for at most @ns, unless it moved since @w last looked. */
static void block(struct lc_wait *s, struct lc_waiter *w, int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};

	__atomic_add_fetch(&s->blocked, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) == w->seq)
		/* returns at once if seq changed meanwhile (EAGAIN), on a wake, or at the timeout */
		syscall(SYS_futex, &s->seq, FUTEX_WAIT_PRIVATE, w->seq, &ts, NULL, 0);
	__atomic_sub_fetch(&s->blocked, 1, __ATOMIC_SEQ_CST);
	w->seq = __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST);
}

void lc_wait_set_home(struct lc_wait *w, int cpu, int alone, int guests)
{
	w->home_thr = pthread_self();
	w->home_alone = alone;
	w->home_guests = guests;
	/* after home_thr, home_alone and home_guests */
	__atomic_store_n(&w->home_cpu, cpu, __ATOMIC_RELEASE);
}

int lc_wait_move(int cpu, const cpu_set_t *mask)
{
	cpu_set_t one;

	/* the kernel migrates the caller before sched_setaffinity() returns */
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return -errno;
	if (sched_setaffinity(0, sizeof(*mask), mask) != 0) {
		int err = errno;

		lc_log_err("wait: could not give the thread its CPU mask back: %s", strerror(err));
		return -err;
	}
	return 0;
}

/*
 * at_home -- 1 when the caller is the thread lc_spread() placed, alone on
 * its CPU (no more nodes on the host than CPUs), and runs there (where
 * go_home() keeps it), else 0: a thread compare and sched_getcpu().
 */
static int at_home(const struct lc_wait *s)
{
	int home = __atomic_load_n(&s->home_cpu, __ATOMIC_ACQUIRE);

	return home >= 0 && s->home_alone && pthread_equal(pthread_self(), s->home_thr) &&
	       sched_getcpu() == home;
}

/*
 * go_home -- a waiter of @s spins (adaptive or spin): if this is the
 * thread lc_spread() placed, or any thread of the node where each node
 * got a CPU and none is spare (home_guests), and the scheduler has moved it off that CPU,
 * move it back (lc_wait_move(), which gives it its CPU mask back at
 * once), at most every LC_WAIT_HOME_EVERY_NS. Cheap when there is nothing
 * to do: a thread compare and sched_getcpu(). Why: see spread.c.
 */
static void go_home(struct lc_wait *s)
{
	int home = __atomic_load_n(&s->home_cpu, __ATOMIC_ACQUIRE), cpu;
	cpu_set_t cur;
	uint64_t now;

	if (home < 0 || (!s->home_guests && !pthread_equal(pthread_self(), s->home_thr)))
		return;
	cpu = sched_getcpu();
	if (cpu < 0 || cpu == home)
		return;
	now = lc_now_ns();
	if (now < __atomic_load_n(&s->home_next_ns, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&s->home_next_ns, now + LC_WAIT_HOME_EVERY_NS, __ATOMIC_RELAXED);
	/* the mask as it is now: the user may have changed it since the join */
	if (sched_getaffinity(0, sizeof(cur), &cur) != 0 || !CPU_ISSET(home, &cur) ||
	    CPU_COUNT(&cur) < 2 || lc_wait_move(home, &cur) != 0)
		return;
	if (__atomic_add_fetch(&s->homes, 1, __ATOMIC_RELAXED) == 1)
		lc_log_info("wait: the scheduler moved the node's thread to CPU %d: back to CPU %d "
		            "(every %lld ms at most)",
		            cpu, home, LC_WAIT_HOME_EVERY_NS / 1000000);
}

/*
 * spin_step -- adaptive, inside the window (@n: the wait's pauses so
 * far): as spin does, drive the fabric and yield when nothing came (two
 * nodes' threads on one CPU while the other is idle are not
 * "oversubscribed" by count, yet a spinner that keeps the CPU keeps its
 * peer off it: shm, 2 nodes, barrier 23.9 us a round with a pause, see
 * wait.h), unless this is the placed thread on a CPU no other node of
 * the host was given (at_home()): then it pauses, and yields
 * once in LC_WAIT_HOME_YIELD, for a thread that is not placed (a yield
 * is a system call: shm rpc call_return 2.2 -> 1.2 us, a raw WRITE round
 * trip 1.7 -> 0.7).
 * With nothing to drive, pause, or yield while the host is oversubscribed.
 */
static int spin_step(struct lc_wait *s, uint32_t n)
{
	if (s == NULL) {
		lc_cpu_relax();
		return 0;
	}
	if (s->drive != NULL) {
		if (s->drive(s->drive_arg, 0) == 0) {
			if (n % LC_WAIT_HOME_YIELD != LC_WAIT_HOME_YIELD - 1 && at_home(s)) {
				lc_cpu_relax(); /* alone on its own CPU: a yield is a system call */
				return 0;
			}
			sched_yield();
			return 1;
		}
		return 0;
	}
	if (lc_hostload_busy(&s->load)) {
		sched_yield();
		return 1;
	}
	lc_cpu_relax();
	return 0;
}

/* sleep_grow -- @w's next sleep: twice this one, at most @cap */
static void sleep_grow(struct lc_waiter *w, int64_t cap)
{
	if (w->sleep_ns < cap)
		w->sleep_ns = w->sleep_ns * 2 < cap ? w->sleep_ns * 2 : cap;
}

/*
 * nap -- adaptive, past its window while another waiter of the node spins
 * (drives the fabric): sleep, at most LC_WAIT_NAP_MAX_NS, without driving
 * and without a burst. What the fabric brings such a waiter is the
 * spinner's: the waiter's own would have ended its wait (a server thread
 * resets its waiter per call). A drive that may sleep returns at once on
 * a busy node, and each return began a burst: an idle map or rpc server
 * thread beside the node's busy thread spun on (shm, 3 nodes, map PUT
 * 11-12 us: the idle server made 131,072 pauses in one wait). And a
 * driver that does sleep holds the fab's driver lock meanwhile, which
 * kept the busy thread from its links (3 ms a PUT when tried). Where
 * nobody spins, the waiter drives as before: on tcp it is the node's NIC
 * (a GET whose target's server thread napped took 1.1 ms, against 55 us).
 */
static void nap(struct lc_waiter *w)
{
	struct timespec ts = {.tv_sec = 0};

	if (w->sleep_ns <= 0 || w->sleep_ns > LC_WAIT_NAP_MAX_NS)
		w->sleep_ns = w->sleep_ns <= 0 ? LC_WAIT_SLEEP_MIN_NS : LC_WAIT_NAP_MAX_NS;
	ts.tv_nsec = (long)w->sleep_ns;
	nanosleep(&ts, NULL);
	sleep_grow(w, LC_WAIT_NAP_MAX_NS);
}

/*
 * burst_end -- when a burst that starts at @now ends (as a negative
 * sleep_ns): LC_WAIT_BURST_NS after it, or, while the host is
 * oversubscribed, as long as a wait's window there (each step of it
 * yields). A server's next request then finds it awake: on a busy host
 * requests come further apart than 50 us, and each found the server
 * asleep and paid a wake-up (tcp KV store, 4 servers and a client of 2
 * threads on 2 CPUs, YCSB-C: 27-33k GETs/s with the burst at 50 us,
 * 34-58k at 200 us to 1 ms, 19-27k at 0; see wait.h).
 */
static int64_t burst_end(const struct lc_wait *s, uint64_t now)
{
	int64_t len =
	    s != NULL && lc_hostload_busy(&s->load) ? LC_WAIT_WINDOW_OVERSUB_NS : LC_WAIT_BURST_NS;

	return -(int64_t)(now + (uint64_t)len);
}

void loco_waiter_pause(loco_waiter_t *pw)
{
	struct lc_waiter *w = lc_waiter(pw);
	struct lc_wait *s;
	uint32_t n;
	uint64_t now;

	if (w == NULL)
		return;
	s = w->priv;
	n = w->pauses < UINT32_MAX ? w->pauses++ : w->pauses;
	if (w->policy == LOCO_WAIT_ADAPTIVE) {
		int64_t win;

		/* inside the window, and the last step did not yield: no clock this time */
		if (w->spinning && n % LC_WAIT_CLOCK_EVERY != 0) {
			w->spinning = !spin_step(s, n);
			return;
		}

		/* the clock from the first pause: loco_waiter_done() measures the wait */
		now = lc_now_ns();
		if (w->t0_ns == 0)
			w->t0_ns = now;
		if (s != NULL && n % LC_WAIT_HOME_PAUSES == 0)
			go_home(s); /* a spin may start here: on the CPU the node was given */
		win = s != NULL ? __atomic_load_n(&s->window_ns, __ATOMIC_RELAXED)
		                : LC_WAIT_WINDOW_MIN_NS;
		/*
		 * One wait in 64 explores: spins the cap. And while the host is
		 * oversubscribed each spin step yields, handing the CPU to a thread
		 * that can run (maybe the one waited for): such a spin costs others
		 * little and sleeping would add a wake-up to every round (shm, 4
		 * nodes on 2 cores, barrier: 118 us a round sleeping after 20 us,
		 * against 4.5 us spinning with yields).
		 */
		if (((w->t0_ns >> 10) & 63) == 0 && (s == NULL || s->window_fixed_ns == 0))
			win = LC_WAIT_WINDOW_MAX_NS;
		if (s != NULL && lc_hostload_busy(&s->load))
			win = LC_WAIT_WINDOW_OVERSUB_NS;
		if ((int64_t)(now - w->t0_ns) < win) {
			if (s != NULL && now - __atomic_load_n(&s->spun_ns, __ATOMIC_RELAXED) >
			                     (uint64_t)LC_WAIT_SPUN_NS) {
				__atomic_store_n(&s->spun_thr, pthread_self(), __ATOMIC_RELAXED);
				__atomic_store_n(&s->spun_ns, now, __ATOMIC_RELAXED);
			}
			w->spinning = !spin_step(s, n);
			return;
		}
		w->spinning = 0;
		if (s != NULL && s->drive != NULL &&
		    now - __atomic_load_n(&s->spun_ns, __ATOMIC_RELAXED) <
		        (uint64_t)LC_WAIT_NAP_MAX_NS &&
		    !pthread_equal(__atomic_load_n(&s->spun_thr, __ATOMIC_RELAXED),
		                   pthread_self())) {
			nap(w);
			return;
		}
		if (w->sleep_ns < 0) {
			/* a burst: something arrived while we slept (below) */
			if ((int64_t)now < -w->sleep_ns) {
				if (s != NULL && s->drive != NULL && s->drive(s->drive_arg, 0) > 0)
					w->sleep_ns = burst_end(s, now);
				else
					sched_yield();
				return;
			}
			w->sleep_ns = LC_WAIT_SLEEP_MIN_NS;
		}
		goto rest; /* then as sleep, or block where no fabric can be driven */
	}
	if (w->policy == LOCO_WAIT_SPIN) {
		if (s != NULL && n % LC_WAIT_HOME_PAUSES == 0)
			go_home(s);
		/*
		 * A software fabric: poll its sockets from here, as MPI's
		 * progress does, yielding the CPU whenever nothing came. With
		 * more spinners than cores (4 nodes on 2 cores) a spinner that
		 * keeps the CPU keeps the node it waits for off it (reduce 8 B:
		 * 8 -> 5.5 us, 4 KiB 60 -> 26 us with a yield after 2 empty
		 * drives, not 16; with the reduce's root, a yield after none
		 * against 2: tcp 8 B 25-31 against 30-37 us, shm 4 KiB 9.4-14
		 * against 10.5-14.5). Alone on a core, a yield is one quick
		 * system call (the 2-node figures did not move).
		 */
		if (s != NULL && s->drive != NULL) {
			int r = s->drive(s->drive_arg, 0);

			if (r == 0)
				sched_yield();
			if (r >= 0)
				return;
		}
		if (n < SPIN_PAUSES)
			lc_cpu_relax();
		else
			sched_yield();
		return;
	}
	if (n < CLOCK_AFTER) {
		lc_cpu_relax();
		return;
	}
	now = lc_now_ns();
	if (w->t0_ns == 0)
		w->t0_ns = now;
	if ((int64_t)(now - w->t0_ns) < LC_WAIT_SPIN_NS) {
		lc_cpu_relax();
		return;
	}
rest:
	if (s != NULL && s->drive != NULL) {
		int r = s->drive(s->drive_arg, w->sleep_ns);

		if (r > 0 && w->policy == LOCO_WAIT_ADAPTIVE) {
			/*
			 * Work came while we slept (we served a peer's request,
			 * or took its WRITE): more may follow, and each would
			 * cost a wake-up. Spin for a burst first, as the tcp NIC
			 * thread does after work (map-lat GET on tcp while the
			 * target waits in a barrier: 114 us with a sleep between
			 * requests; spin: 12).
			 */
			w->sleep_ns = burst_end(s, lc_now_ns());
			return;
		}
		if (r > 0)
			return; /* something arrived: look again, and sleep as long next time */
		if (r == 0)
			goto grow;
	}
	if ((w->policy == LOCO_WAIT_BLOCK || w->policy == LOCO_WAIT_ADAPTIVE) && s != NULL) {
		block(s, w, w->sleep_ns);
	} else {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = w->sleep_ns};

		nanosleep(&ts, NULL);
	}
grow:
	sleep_grow(w, (int64_t)(now - w->t0_ns) >= LC_WAIT_LONG_NS ? LC_WAIT_SLEEP_LONG_NS
	                                                           : LC_WAIT_SLEEP_MAX_NS);
}

void loco_waiter_done(loco_waiter_t *pw)
{
	struct lc_waiter *w = lc_waiter(pw);

	if (w == NULL || w->policy != LOCO_WAIT_ADAPTIVE)
		return;
	/*
	 * A wait that outlasted its window and slept ended when the sleeper
	 * woke, not when the completion came: its length is the wake-up's, and
	 * counting it as it is would keep the window short (a short window
	 * sleeps, a sleep makes waits long: map-lat GET on tcp stayed at
	 * 80-110 us where spinning gives 12). One that ended in its first
	 * sleep says "a little longer than the window": count it in the bucket
	 * above the window. Left out, as they all were, such waits kept the
	 * window where it was: with half the waits inside it, the 90 % bound
	 * of those counted was the window itself (map-lat, tcp, 3 nodes: the
	 * raw READ took 56-109 us, against 28 us spinning). A longer one says
	 * only "long": leave it out, and learn past the window from the waits
	 * that explore the cap (one in 64), which count as they are.
	 */
	if (w->sleep_ns != LC_WAIT_SLEEP_MIN_NS && ((w->t0_ns >> 10) & 63) != 0) {
		struct lc_wait *s = w->priv;
		int64_t win, len;

		if (s == NULL || w->t0_ns == 0)
			return;
		win = __atomic_load_n(&s->window_ns, __ATOMIC_RELAXED);
		len = (int64_t)(lc_now_ns() - w->t0_ns);
		if (len <= win + LC_WAIT_SLEEP_MIN_NS + LC_WAIT_WAKE_NS)
			lc_wait_done(s, win); /* the bucket above the window's bound */
		return;
	}
	lc_wait_done(w->priv, w->t0_ns != 0 ? (int64_t)(lc_now_ns() - w->t0_ns) : 0);
}

int loco_waiter_policy(const loco_waiter_t *w)
{
	return w != NULL ? w->policy : -EINVAL;
}

void loco_waiter_wake(loco_manager_t *m)
{
	if (lc_handle_ok(m) == 0)
		lc_wait_signal(&m->wait);
}
