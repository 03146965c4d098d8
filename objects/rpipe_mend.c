/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe_mend.c -- a push pipe over a data link that failed while both
 * ends stayed members (rpipe_impl.h, "A failed link"): the reader READs
 * what it may have missed from the writer's shadow. Public API only.
 *
 * Why the reader and not the writer: the writer may post nothing after the
 * lost WRITEs (an rpc caller waiting for its reply, a last message), so
 * it would never learn that they were lost; the reader is the one that
 * waits. Why READs and not a request to send again: the shadow already
 * holds every record the reader has not returned, at its ring offset, and
 * a READ needs nothing of the writer's threads.
 *
 * Order: the writer seals a record, then stores its tail (release); the
 * reader READs the tail, and only once that READ completed READs the
 * records below it. Space below the reader's head is the only space the
 * writer reuses, and the reader READs from its head on: a READ never
 * meets a record being rebuilt. WRITEs of the writer that land the same
 * range meanwhile land the same bytes.
 */
#include <errno.h>

#include "obj_util.h"
#include "rpipe_impl.h"

#define MEND_ROUNDS     4u  /* tail READs after a link change */
#define MEND_LOOK_EVERY 16u /* polls (timeout 0) per look at the link */

/* the gap before each tail READ after the first: the writer's old link may outlive the reader's */
static const int64_t mend_gap_ns[MEND_ROUNDS] = {0, 20000000ll, 200000000ll, 2000000000ll};

int rp_link_err(const loco_rpipe_t *p, int err)
{
	return !is_lost(p) && obj_peer_gone_err(err);
}

void rp_mend_mark(loco_rpipe_t *p)
{
	uint64_t s;

	p->lnk = loco_rhandle_link(&p->rctl, &s) == 0 ? s : 0;
	p->mend_left = 0;
	p->mend_tick = 0;
}

/* mend_read -- READ [@from, p->mend_to) of the shadow, up to the ring's end: 0 or an error. */
static int mend_read(loco_rpipe_t *p, uint64_t from)
{
	uint64_t off = from % p->size, n = p->mend_to - from;
	int ret;

	if (n > p->size - off)
		n = p->size - off; /* records never straddle the end: to it, then on */
	ret = loco_rop_post(&p->rring, &(loco_rop_t){.opcode = LOCO_ROP_READ,
	                                             .local = p->ring,
	                                             .loff = off,
	                                             .roff = off,
	                                             .len = n,
	                                             .acks = {p->dack}});
	if (ret == 0) {
		p->rd = RD_DATA;
		p->rd_from = from;
		p->rd_to = from + n;
	}
	return ret;
}

/* mend_again -- a mending READ failed or could not be posted: the tail READ again, soon */
static void mend_again(loco_rpipe_t *p)
{
	p->rd = RD_NONE;
	if (p->mend_left == 0)
		p->mend_left = 1;
	p->mend_at = obj_now_ns() + mend_gap_ns[1];
}

/* mend_reap -- the READ in flight finished? Then the next one. */
static void mend_reap(loco_rpipe_t *p)
{
	int ret = loco_ack_wait(p->dack, 0);
	uint64_t t;

	if (ret == -ETIMEDOUT)
		return;
	if (ret != 0) {
		mend_again(p); /* on the link that failed too, or before the new one was made */
		return;
	}
	if (p->rd == RD_TAIL) {
		p->rd = RD_NONE;
		t = __atomic_load_n(&p->ctlw[CTL_TSEEN], __ATOMIC_ACQUIRE);
		if (t <= p->head || t - p->head > p->size)
			return; /* nothing we have not taken (or a word of no use: the next round) */
		p->mend_to = t;
		if (mend_read(p, p->head) != 0)
			mend_again(p);
		return;
	}
	/* RD_DATA landed */
	p->rd = RD_NONE;
	p->mended += p->rd_to - p->rd_from;
	if (p->rd_to < p->mend_to && mend_read(p, p->rd_to) != 0)
		mend_again(p);
}

void rp_mend_step(loco_rpipe_t *p, int hungry)
{
	uint64_t s;
	int64_t now;
	int ret;

	if (!p->can_mend || !p->have_sess || is_lost(p))
		return;
	if (!p->pull && p->rd != RD_NONE) {
		mend_reap(p);
		return;
	}
	/*
	 * a head WRITE that failed: write it again (publish(); pull: its arm reaps them). Not
	 * one look at the key's 1024 slots per poll: only while a WRITE posted since the last
	 * look that found none may still be out (7 % of an idle rpc server's samples on shm)
	 */
	if (!p->pull && p->ctl_n != p->ctl_idle_n) {
		if (loco_ack_outstanding(p->cack) != 0)
			rp_ctl_reap(p); /* a reader's: never loses the pipe */
		else
			p->ctl_idle_n = p->ctl_n;
	}
	if (p->mend_left == 0 && !hungry && ++p->mend_tick < MEND_LOOK_EVERY)
		return;
	p->mend_tick = 0;
	if (loco_rhandle_link(&p->rctl, &s) == 0 && s != p->lnk) {
		/* (from no link at the session's start: mended all the same, quietly) */
		uint64_t n = p->lnk == 0 ? 0 : __atomic_add_fetch(&p->mends, 1, __ATOMIC_RELAXED);

		if (n != 0 && loco_log_due(n))
			loco_log(
			    LOCO_LOG_INFO,
			    "rpipe: the link to writer node %u was made again: reading what may "
			    "have been lost on the old one (%llu so far)",
			    p->writer, (unsigned long long)n);
		p->lnk = s;
		p->mend_left = MEND_ROUNDS;
		p->mend_at = 0;
		p->ctl_err = 1; /* the last head returned may be lost too */
	}
	if (p->mend_left == 0)
		return;
	now = obj_now_ns();
	if (now < p->mend_at)
		return;
	if (p->pull) {
		/* pull: arm again (the head, then a READ of the tail), as a dry reader does */
		p->armed = 0;
		p->mend_left--;
		if (p->mend_left > 0)
			p->mend_at = now + mend_gap_ns[MEND_ROUNDS - p->mend_left];
		return;
	}
	ret = loco_rop_post(&p->rctl, &(loco_rop_t){.opcode = LOCO_ROP_READ,
	                                            .local = p->ctl,
	                                            .loff = CTL_TSEEN * 8,
	                                            .roff = CTL_TAIL * 8,
	                                            .len = 8,
	                                            .acks = {p->dack}});
	if (ret != 0) {
		p->mend_at = now + mend_gap_ns[1]; /* no link yet: soon */
		return;
	}
	p->rd = RD_TAIL;
	p->mend_left--;
	if (p->mend_left > 0)
		p->mend_at = now + mend_gap_ns[MEND_ROUNDS - p->mend_left];
}

void rp_mend_reset(loco_rpipe_t *p)
{
	p->mend_left = 0;
	p->mend_tick = 0;
	p->lnk = 0;
	if (p->pull)
		return; /* rp_pull_reset() has the READs */
	/* a mending READ of the lost session must not land in the next one's records */
	if (p->rd != RD_NONE)
		(void)loco_ack_wait(p->dack, 2 * 1000000000ll);
	(void)loco_ack_wait(p->dack, 0);
	p->rd = RD_NONE;
	__atomic_store_n(&p->ctlw[CTL_TSEEN], 0, __ATOMIC_RELEASE);
}
