/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe_pull.c -- the rpipe's pull mode (LOCO_RPIPE_PULL): the ring lives
 * in the writer's memory and the reader READs from it. Records, positions,
 * the watermark and sessions are the push mode's (rpipe_impl.h); only who
 * moves the bytes differs.
 *
 * Writer: write/reserve/commit build and seal records in its own ring
 * exactly as the push writer does in its shadow, but post nothing: each
 * time its tail moves it stores it in its ctl word CTL_TAIL (remotely
 * readable). It WRITEs its tail into the reader's ctl word 0 (8 bytes, a
 * "publish") only when
 *   - the reader ran dry: the head it returned last (the writer's ctl word
 *     0) reached the tail published last, so it waits for a publish;
 *   - a batch (ring / return_div, the watermark) was committed since the
 *     last publish (a reader that lags then always has a READ to make);
 *   - it waits for room (push mode's "ask"), or its end is destroyed.
 * A reader that lags costs the writer one WRITE per batch; one that keeps
 * up, one per message it finds ready.
 *
 * Reader: its ring is a copy, at the same offsets. pulled is how far it
 * is copied. It READs [pulled, known) from the writer's ring (known: the
 * larger of the published tail and the tail it READ last), split at the
 * ring's end, one READ in flight, and parses the records of [head,
 * pulled) as the push reader does (tag, trailer and sum; one that fails
 * there is counted torn and READ again: it cannot happen unless a
 * fabric breaks its word). It returns its head (one WRITE into the
 * writer's ctl word 0) when a batch was consumed since the last return
 * (the watermark) and when it consumed all it knows of: that frees space
 * and tells the writer to publish at its next commit.
 *
 * The race: the writer may commit after it looked at the returned head
 * and before that head landed, and publish nothing. So a dry reader, once
 * the WRITE of its head completed, READs the writer's CTL_TAIL (once per
 * position). Writer: store tail, full fence, load head. Reader: the head
 * WRITE completed (landed), then the READ of the tail. Either the
 * writer's load sees the head (it publishes) or the READ sees the tail.
 * The reader waits for the completion rather than trusting the order of
 * the two requests on the link: a tcp target lands the WRITE and serves
 * the READ on one thread with no fence between a store and a later load
 * (it sends the ACK in between, through the kernel); on shm this thread
 * does both, with a full fence between them.
 *
 * Space: the writer reuses ring space only below the returned head, and
 * the reader returns only what it consumed, so a READ in flight (above
 * the head) never meets a record being rebuilt; the reader parses only
 * READs that completed, of ranges the writer sealed before it stored its
 * tail: nothing half-written is ever parsed.
 *
 * Failures: the writer's publishes are ctl WRITEs (rp_ctl_put(): an error
 * that is not a link's loses the pipe); peer_leave loses it. A publish
 * lost with a link (the ends stay members) is made again at the next
 * advance, whatever the batch; the reader, when its link to the writer
 * changed (rpipe_mend.c), arms again at growing gaps: it writes its head
 * and READs the writer's tail, so a writer that commits nothing more is
 * read to its end. A READ that fails is made again (the bytes stay in the
 * writer's ring until returned) until the pipe is lost; the reader then
 * takes what it copied, then -ECONNRESET. The writer's destroy waits (5 s at most) for
 * the reader to return every byte: its ring holds the messages.
 */
#include <errno.h>

#include "obj_util.h"
#include "rpipe_impl.h"

#define DESTROY_WAIT_NS (5 * 1000000000ll)

int rp_pull_advance(loco_rpipe_t *p, int force)
{
	loco_waiter_t w;
	uint64_t head;
	int hungry, ret;

	__atomic_store_n(&p->ctlw[CTL_TAIL], p->tail, __ATOMIC_RELEASE); /* the reader's READ */
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the tail's store before the head's load */
	if (p->ctl_err) {
		/* a publish was lost with a link: the next one goes whatever the batch */
		p->ctl_err = 0;
		force = 1;
		if (p->pub == p->tail)
			p->pub = 0;
	}
	if (p->pub == p->tail)
		return 0;
	head = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE); /* the reader's ctl_put */
	hungry = head >= p->pub;
	if (!hungry && !force && p->tail - p->pub < p->batch)
		return 0;
	for (unsigned n = 0;; n++) {
		ret = rp_ctl_put(p, p->tail);
		if (ret == 0) {
			p->pub = p->tail;
			p->st.returns++;
			return 0;
		}
		if (rp_link_err(p, ret)) {
			/* no link now: the reader READs the tail once it sees the new one */
			p->ctl_err = 1;
			return 0;
		}
		if (ret != -EAGAIN)
			return ret == -ECONNRESET ? ret : rp_lose(p);
		if (!hungry && !force)
			return 0; /* a batch: the next commit publishes, or the dry reader READs */
		/* the reader waits for this one: a ctl slot frees within a round trip */
		if (is_lost(p))
			return -ECONNRESET;
		if (n == 0)
			loco_waiter_init(&w, p->m);
		loco_waiter_pause(&w);
	}
}

/* pull_post -- one READ into this end's @local at @loff from @h at @roff. */
static int pull_post(loco_rpipe_t *p, loco_rhandle_t *h, loco_region_t *local, uint64_t loff,
                     uint64_t roff, uint64_t len)
{
	return loco_rop_post(h, &(loco_rop_t){.opcode = LOCO_ROP_READ,
	                                      .local = local,
	                                      .loff = loff,
	                                      .roff = roff,
	                                      .len = len,
	                                      .acks = {p->dack}});
}

/* pull_arm -- the reader is dry at p->pulled: return its head, then READ the writer's tail. */
static void pull_arm(loco_rpipe_t *p)
{
	int ret;

	if (p->armed == p->pulled + 1)
		return; /* done for this position: the writer publishes at its next commit */
	if (!p->arming) {
		if (p->published != p->head || p->ctl_err) {
			p->ctl_err = 0;
			if (rp_ctl_put(p, p->head) != 0)
				return; /* slots busy (or not paired): the next turn */
			p->published = p->head;
			p->st.returns++;
		}
		p->arming = 1;
		p->arm_pos = p->head;
	}
	ret = loco_ack_wait(p->cack, 0); /* every ctl WRITE, the head's among them, completed? */
	if (ret == -ETIMEDOUT)
		return;
	p->arming = 0;
	if (ret != 0) {
		p->ctl_err = 1; /* the head may not have landed: write it again */
		return;
	}
	if (p->arm_pos != p->pulled || p->head != p->pulled)
		return; /* moved on meanwhile */
	/*
	 * on shm this thread did the head's store itself (a WRITE completes as
	 * it is posted) and the READ's load comes next: keep them in order
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (pull_post(p, &p->rctl, p->ctl, CTL_TSEEN * 8, CTL_TAIL * 8, 8) == 0) {
		p->rd = RD_TAIL;
		p->armed = p->pulled + 1;
	}
}

void rp_pull_step(loco_rpipe_t *p, int hungry)
{
	uint64_t known, off, n;
	int ret;

	if (!p->have_sess && rp_sess(p) != 0)
		return; /* the writer has not paired yet */
	if (p->rd != RD_NONE) {
		/* with messages to parse, only look (a test reaps the completion queue) */
		if (!hungry && loco_ack_outstanding(p->dack) != 0)
			return;
		ret = loco_ack_wait(p->dack, 0);
		if (ret == -ETIMEDOUT)
			return;
		if (ret == 0 && p->rd == RD_DATA && p->rd_from == p->pulled) {
			p->pulled = p->rd_to; /* (not one made before next() chose to READ again) */
		} else if (ret == 0 && p->rd == RD_TAIL) {
			uint64_t t = __atomic_load_n(&p->ctlw[CTL_TSEEN], __ATOMIC_ACQUIRE);

			if (t > p->t_seen)
				p->t_seen = t;
		}
		/* a READ that failed is made again: its bytes stay until returned */
		p->rd = RD_NONE;
	}
	known = rp_pull_known(p);
	if (known > p->pulled) {
		off = p->pulled % p->size;
		n = known - p->pulled;
		if (n > p->size - off)
			n = p->size - off; /* records never straddle the end: READ to it, then on */
		if (pull_post(p, &p->rring, p->ring, off, off, n) == 0) {
			p->rd = RD_DATA;
			p->rd_from = p->pulled;
			p->rd_to = p->pulled + n;
		}
		return;
	}
	if (hungry && p->head == p->pulled)
		pull_arm(p);
}

void rp_pull_destroy(loco_rpipe_t *p)
{
	int64_t dl = obj_deadline(DESTROY_WAIT_NS);
	loco_waiter_t w;

	loco_waiter_init(&w, p->m);
	/* the writer's ring holds what the reader has not taken: wait until it returned all */
	while (p->is_writer && p->have_sess && !is_lost(p) && obj_now_ns() < dl &&
	       !loco_channel_partitioned(p->ch) &&
	       __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE) < p->tail) {
		if (p->pub != p->tail && rp_pull_advance(p, 1) != 0)
			break;
		loco_waiter_pause(&w);
	}
	/* READs land in the reader's regions, ctl WRITEs leave from slots: both about to go */
	(void)loco_ack_wait(p->dack, DESTROY_WAIT_NS);
	(void)loco_ack_wait(p->cack, DESTROY_WAIT_NS);
}

void rp_pull_reset(loco_rpipe_t *p)
{
	if (p->is_writer) {
		p->pub = 0;
		__atomic_store_n(&p->ctlw[CTL_TAIL], 0, __ATOMIC_RELEASE);
		return;
	}
	(void)loco_ack_wait(p->dack, 0); /* the lost session's READs, if done */
	(void)loco_ack_wait(p->cack, 0);
	p->pulled = 0;
	p->t_seen = 0;
	p->rd_from = 0;
	p->rd_to = 0;
	p->arm_pos = 0;
	p->armed = 0;
	p->rd = RD_NONE;
	p->arming = 0;
	p->ctl_err = 0;
	/* the lost writer's published tail, and the tail it READ, mean nothing to the next */
	__atomic_store_n(&p->ctlw[0], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&p->ctlw[CTL_TSEEN], 0, __ATOMIC_RELEASE);
}
