/* SPDX-License-Identifier: BSD-2-Clause */
/* wait.c -- wait policies and the object-author waiter (wait.h, loco/channel.h). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "handle.h"
#include "manager.h"
#include "wait.h"

#define SPIN_PAUSES 2048u /* spin policy: pauses that only relax before yielding */
#define CLOCK_AFTER 16u   /* sleep and block: pauses before the first clock read */

int lc_wait_parse(const char *s, int *policy)
{
	if (strcmp(s, "spin") == 0)
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
	default:
		return "sleep";
	}
}

void lc_wait_init(struct lc_wait *w, int policy)
{
	w->policy =
	    policy == LOCO_WAIT_SPIN || policy == LOCO_WAIT_BLOCK ? policy : LOCO_WAIT_SLEEP;
	w->seq = 0;
	w->blocked = 0;
	w->drive = NULL;
	w->drive_arg = NULL;
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

void lc_waiter_init(loco_waiter_t *w, struct lc_wait *s)
{
	w->priv = s;
	w->policy = s != NULL ? s->policy : LOCO_WAIT_SLEEP;
	loco_waiter_reset(w);
}

void loco_waiter_init(loco_waiter_t *w, loco_manager_t *m)
{
	if (w == NULL)
		return;
	/* a finished manager's waiter sleeps, as for NULL: its wait state is gone */
	lc_waiter_init(w, lc_handle_ok(m) == 0 ? &m->wait : NULL);
}

void loco_waiter_reset(loco_waiter_t *w)
{
	struct lc_wait *s;

	if (w == NULL)
		return;
	s = w->priv;
	w->pauses = 0;
	w->t0_ns = 0;
	w->sleep_ns = LC_WAIT_SLEEP_MIN_NS;
	/* events after this count wake the waiter (pairs with lc_wait_signal()) */
	w->seq = s != NULL ? __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) : 0;
}

/* block -- sleep on @s's event count for at most @ns, unless it moved since @w last looked. */
static void block(struct lc_wait *s, loco_waiter_t *w, int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};

	__atomic_add_fetch(&s->blocked, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) == w->seq)
		/* returns at once if seq changed meanwhile (EAGAIN), on a wake, or at the timeout */
		syscall(SYS_futex, &s->seq, FUTEX_WAIT_PRIVATE, w->seq, &ts, NULL, 0);
	__atomic_sub_fetch(&s->blocked, 1, __ATOMIC_SEQ_CST);
	w->seq = __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST);
}

void loco_waiter_pause(loco_waiter_t *w)
{
	struct lc_wait *s;
	uint32_t n;
	uint64_t now;

	if (w == NULL)
		return;
	s = w->priv;
	n = w->pauses < UINT32_MAX ? w->pauses++ : w->pauses;
	if (w->policy == LOCO_WAIT_SPIN) {
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
	if (s != NULL && s->drive != NULL) {
		int r = s->drive(s->drive_arg, w->sleep_ns);

		if (r > 0)
			return; /* something arrived: look again, and sleep as long next time */
		if (r == 0)
			goto grow;
	}
	if (w->policy == LOCO_WAIT_BLOCK && s != NULL) {
		block(s, w, w->sleep_ns);
	} else {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = w->sleep_ns};

		nanosleep(&ts, NULL);
	}
grow:
	if (w->sleep_ns < LC_WAIT_SLEEP_MAX_NS)
		w->sleep_ns =
		    w->sleep_ns * 2 < LC_WAIT_SLEEP_MAX_NS ? w->sleep_ns * 2 : LC_WAIT_SLEEP_MAX_NS;
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
