/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_detect.c -- when silence means failure (ms.h, docs/membership.md).
 *
 * Two things make a fixed bound wrong on a shared host:
 *
 * - Others are late. A member whose messages usually come 300 ms apart
 *   and sometimes 900 ms apart is not dead at 1 s. Per member we keep an
 *   exponentially weighted mean of the gaps between its messages and of
 *   their deviation (Jacobson's estimator, as TCP's retransmission timer
 *   does; the phi accrual detector of Cassandra and Akka scores the same
 *   statistics) and the longest gap seen lately, halved every 16 floors.
 *   Its bound is the largest of: the floor (LOCO_FAIL_TIMEOUT_MS), mean +
 *   4 deviations, 3/2 of the longest recent gap; at most 8 floors, so that
 *   a dead member still goes. A member that just entered the view has no
 *   history yet: until 8 gaps were seen, its bound is the floor plus
 *   500 ms (at most half a floor) for its start-up (process start, first
 *   page faults and allocations: a fixed cost, not a multiple of the
 *   floor), which still drops a joiner killed at once within 2 s.
 *
 * - We are late. Our driver promised to call lc_ms_tick() by ms->wake; an
 *   input that comes a quarter floor or more after that means this
 *   node's own thread was not scheduled (a busy host, SIGSTOP, a paused
 *   VM). The silence we slept through is not the others': every member's
 *   last-heard time moves forward by our lateness, and we are "unsure"
 *   (LC_MS_UNSURE: act on nothing, suspect nobody, confirm no probe)
 *   until a majority of the view answered an echo request sent after we
 *   resumed (partitioned, not unsure, if no majority did within the
 *   echo window: ms_echo_window()). What
 *   waits in our sockets may be old news (heartbeats of members that
 *   excluded us while we slept, a VIEW since replaced): only answers to a
 *   question asked now prove that a majority still has us in its view.
 */
#include "ms_impl.h"

#define DET_K        4  /* deviations over the mean */
#define DET_CAP      8  /* floors, at most */
#define DET_MAX_HALF 16 /* floors: the longest gap seen halves every this many */
#define DET_GRACE_NS \
	500000000ull     /* a new member's start-up: this much more, half a floor at most */
#define DET_GRACE_SEEN 8 /* ... until this many gaps between its messages were seen */

static uint64_t u64max(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* max_gap -- the longest gap seen lately: halved for every DET_MAX_HALF floors since */
static uint64_t max_gap(const struct lc_ms *ms, const struct detect *d)
{
	uint64_t halves = (ms->now - d->max_at) / (DET_MAX_HALF * ms->cfg.fail_ns);

	return halves >= 64 ? 0 : d->max_gap >> halves;
}

void ms_detect_reset(struct lc_ms *ms, struct vmember *x)
{
	x->det = (struct detect){.since = ms->now, .max_at = ms->now};
}

void ms_detect_heard(struct lc_ms *ms, struct vmember *x)
{
	struct detect *d = &x->det;
	uint64_t gap, dev;

	if (ms->now <= x->heard_ns)
		return;
	gap = ms->now - x->heard_ns;
	if (d->samples == 0) {
		d->mean = gap;
		d->dev = gap / 2;
	} else {
		dev = gap > d->mean ? gap - d->mean : d->mean - gap;
		d->mean = d->mean - d->mean / 8 + gap / 8;
		d->dev = d->dev - d->dev / 4 + dev / 4;
	}
	d->samples++;
	if (gap >= max_gap(ms, d)) {
		d->max_gap = gap;
		d->max_at = ms->now;
	}
}

uint64_t ms_detect_bound(const struct lc_ms *ms, const struct vmember *x)
{
	const struct detect *d = &x->det;
	uint64_t f = ms->cfg.fail_ns, b = f;

	if (d->samples >= 2)
		b = u64max(b, d->mean + DET_K * d->dev);
	b = u64max(b, max_gap(ms, d) / 2 * 3);
	if (d->samples < DET_GRACE_SEEN)
		b = u64max(b, f + (f / 2 < DET_GRACE_NS ? f / 2 : DET_GRACE_NS));
	return b < DET_CAP * f ? b : DET_CAP * f;
}

/* ms_detect_max -- the largest bound of the view's members (for messages) */
uint64_t ms_detect_max(const struct lc_ms *ms)
{
	uint64_t b = ms->cfg.fail_ns;

	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->v[i].info.node != ms->self.node)
			b = u64max(b, ms_detect_bound(ms, &ms->v[i]));
	return b;
}

uint64_t lc_ms_bound(const struct lc_ms *ms, uint32_t node)
{
	int i = ms_idx(ms, node);

	return i == NO_INDEX ? ms->cfg.fail_ns : ms_detect_bound(ms, &ms->v[i]);
}

/*
 * ms_echo_window -- how long we stay unsure for want of echoes: the longest
 * bound we give a member's silence, plus twice our own lateness (the ask
 * waits for a member's thread, the answer for ours, on a host that just
 * showed it is busy), that term at most one floor (a 9 s SIGSTOP says
 * nothing of how long answers take now). One floor (before) ran out
 * while the answers were on their way, and a node whose five members were
 * all in reach stopped acting (barrier-stress under ASan: a join at
 * start-up failed; sim-membership --busy). Longer costs nothing in
 * safety: unsure acts on nothing and suspects nobody.
 */
uint64_t ms_echo_window(const struct lc_ms *ms)
{
	uint64_t late = 2 * lc_ms_late(ms);

	return ms_detect_max(ms) + (late < ms->cfg.fail_ns ? late : ms->cfg.fail_ns);
}

int ms_detect_unsure(struct lc_ms *ms)
{
	return ms->nonce != 0 && ms->now - ms->resumed <= ms_echo_window(ms);
}

/* ms_echo_ask -- ask every member of the view to answer our nonce now */
void ms_echo_ask(struct lc_ms *ms)
{
	struct lc_msg *msg = ms_msg(ms, LC_VC_HB, ms->id);

	msg->u.vc.flag = LC_HB_ECHO_ASK;
	msg->u.vc.ballot = ms->nonce;
	ms_broadcast(ms, msg);
	ms->echo_asked = ms->now;
}

uint64_t lc_ms_late(const struct lc_ms *ms)
{
	return ms->late_at != 0 && ms->now - ms->late_at < DET_MAX_HALF * ms->cfg.fail_ns
	           ? ms->late_max
	           : 0;
}

/* credit -- @late ns of our own sleep are nobody's silence: move their clocks on by it */
static void credit(struct lc_ms *ms, uint64_t late)
{
	for (uint32_t i = 0; i < ms->n; i++) {
		struct vmember *x = &ms->v[i];

		x->heard_ns = x->heard_ns + late < ms->now ? x->heard_ns + late : ms->now;
		if (x->susp_ns != 0)
			x->susp_ns = x->susp_ns + late < ms->now ? x->susp_ns + late : ms->now;
	}
	for (unsigned k = 0; k < PROBES; k++) {
		ms->probe[k].start += late;
		ms->probe[k].deadline += late;
		ms->preq[k].start += late;
	}
}

void ms_detect_clock(struct lc_ms *ms, uint64_t now)
{
	uint64_t late;

	if (now < ms->now)
		now = ms->now; /* a driver's clock never goes back; a simulator's jump may */
	ms->now = now;
	if (ms->wake == 0 || now <= ms->wake)
		return;
	late = now - ms->wake;
	ms->wake = now; /* counted once: the next tick sets it again */
	if (late < ms->cfg.fail_ns / 4)
		return;
	/*
	 * The longest lateness, kept while lateness recurs: a shorter one
	 * after it restarts the window with the longer figure, so a host that
	 * stays busy is remembered as busy as it was at worst (a newer, shorter
	 * sleep used to leave the older window to run out: a node excluded
	 * 2.5 s after a 1.6 s pause said nothing of it, its 3.7 s one having
	 * been 16.7 s before).
	 */
	if (late > lc_ms_late(ms))
		ms->late_max = late;
	ms->late_at = now;
	if (ms->state == LC_VS_JOINING || ms->state == LC_VS_REJOINING) {
		/*
		 * a VIEW waiting for us may be old news too: the first view needs
		 * echoes (asked, and the window restarted, when it is installed)
		 */
		ms->resumed = now;
		ms->nonce = ms_random(ms, UINT64_MAX) | 1;
		return;
	}
	if (ms->state != LC_VS_NORMAL)
		return;
	ms_log(ms, LC_LOG_INFO,
	       "manager: this node's progress thread ran %llu ms late (a busy host, or "
	       "the process was stopped): nobody is blamed for that silence",
	       (unsigned long long)(late / 1000000));
	credit(ms, late);
	ms->resumed = now;
	if (ms->n <= 1)
		return;
	/*
	 * What waits in our sockets was sent while we slept, and may be old
	 * news: heartbeats of members that excluded us since, a VIEW that a
	 * newer one replaced. Only answers to a question asked now count.
	 */
	ms->nonce = ms_random(ms, UINT64_MAX) | 1;
	ms_echo_ask(ms);
	if (ms->part == LC_MS_ACT)
		ms_set_part(ms, LC_MS_UNSURE); /* until a majority answered */
}
