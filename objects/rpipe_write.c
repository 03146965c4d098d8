/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe_write.c -- the rpipe's writer: room from the reader's returned
 * position, records built in the shadow, one WRITE each (rpipe_impl.h).
 * In pull mode the shadow is the ring, and rpipe_pull.c tells the reader.
 */
#include <errno.h>
#include <string.h>

#include "obj_util.h"
#include "rpipe_impl.h"

/* room -- ring bytes free for the writer (may be < 0 right after a skip). */
static int64_t room(const loco_rpipe_t *p)
{
	uint64_t head = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE); /* the reader's ctl_put */

	return (int64_t)p->size - (int64_t)(p->tail - head);
}

/*
 * ask -- the writer is short of @need bytes: ask the reader for the space
 * (once per position wanted): what we need, or a batch past the head it
 * gave last if that is more (and written: the reader cannot return what it
 * has not read). Pull: make sure the reader knows all there is to READ,
 * and whether that failed. 0 or the error that loses the pipe.
 */
static int ask(loco_rpipe_t *p, uint64_t need)
{
	uint64_t want, head;
	int ret;

	if (p->pull) {
		if (p->pub == p->tail) {
			/*
			 * the last one failed? (a WRITE to a dead reader fails at once;
			 * one lost with a link: the reader READs the tail when it sees
			 * the new link, and the next advance publishes again)
			 */
			return rp_ctl_reap(p);
		}
		ret = rp_pull_advance(p, 1);
		if (ret == 0)
			p->st.asks++;
		return ret;
	}
	if (loco_ack_outstanding(p->cack) != 0) {
		/* a want lost with a link (every ctl WRITE is signaled): ask again */
		ret = rp_ctl_reap(p);
		if (ret)
			return ret;
	}
	if (p->ctl_err) {
		p->ctl_err = 0;
		p->asked = 0;
	}
	want = p->tail + need - p->size;
	head = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE);
	if (want < head + p->batch)
		want = head + p->batch < p->tail ? head + p->batch : p->tail;
	if (want > p->asked) {
		ret = rp_ctl_put(p, want);
		if (ret == 0) {
			p->asked = want;
			p->st.asks++;
		} else if (ret != -EAGAIN && !rp_link_err(p, ret)) {
			return ret == -ECONNRESET ? ret : rp_lose(p);
		} /* (no link now: asked again on a later turn) */
	}
	return 0;
}

/* wait_room -- wait until @need bytes from tail on are free, or *@dl (obj_past()). */
static int wait_room(loco_rpipe_t *p, uint64_t need, int64_t *dl, int nonblock)
{
	loco_waiter_t w;
	int counted = 0;

	loco_waiter_init(&w, p->m);
	for (unsigned n = 0;; n++) {
		int ret;

		if (room(p) >= (int64_t)need)
			return 0;
		if (!counted) {
			p->st.full++;
			counted = 1;
		}
		ret = rp_check(p);
		if (ret == 0)
			ret = ask(p, need);
		if (ret)
			return ret;
		if (nonblock)
			return -EAGAIN;
		if (n >= 4 && obj_past(dl))
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/*
 * post -- WRITE the record of @len ring bytes at @off from the shadow.
 * One data WRITE in SIGNAL_EVERY is signaled, never two at once (to
 * learn of errors: a link that failed fails every later request too, so
 * the next signaled one tells); a full queue is retried until *@dl.
 * Signaling and checking each one cost more than the WRITE's own post
 * (bench/rpc-bench under callgrind: 113 + 134 instructions a message).
 */
static int post(loco_rpipe_t *p, size_t off, size_t len, int64_t *dl, int nonblock)
{
	loco_rop_t op = {
	    .opcode = LOCO_ROP_WRITE, .local = p->ring, .loff = off, .roff = off, .len = len};
	loco_waiter_t w;
	int ret;

	if (p->seq % SIGNAL_EVERY == 0 && !p->sig_pending)
		op.acks[0] =
		    p->dack; /* rp_check() took the last one's result: none is outstanding */
	for (unsigned n = 0;; n++) {
		ret = loco_rop_post(&p->rring, &op);
		if (ret != -EAGAIN)
			break;
		if (nonblock || obj_past(dl))
			return nonblock ? -EAGAIN : -ETIMEDOUT;
		if (is_lost(p))
			return -ECONNRESET;
		if (n == 0)
			loco_waiter_init(&w, p->m);
		loco_waiter_pause(&w);
	}
	if (ret == 0 && op.acks[0] != NULL)
		p->sig_pending = 1;
	if (rp_link_err(p, ret))
		return 0; /* no link now: the record stays in the shadow, the reader mends */
	if (ret == -ENOTCONN || obj_peer_gone_err(ret))
		return rp_lose(p);
	return ret;
}

/* stored -- the tail moved (a record or a pad is sealed): the reader that mends READs it */
static void stored(loco_rpipe_t *p)
{
	__atomic_store_n(&p->ctlw[CTL_TAIL], p->tail, __ATOMIC_RELEASE);
}

/*
 * place -- find ring room for a record of @rec bytes at the tail: skip or
 * pad to the ring's start when it does not fit before the end (the pad
 * is a record of its own), then wait for the room. Sets *@off.
 */
static int place(loco_rpipe_t *p, uint64_t rec, int64_t *dl, int nonblock, size_t *off)
{
	int ret = rp_check(p);

	if (ret)
		return ret;
	ret = rp_sess(p);
	if (ret == -ENOENT) {
		/* the reader has not paired yet: wait for it as for room */
		loco_waiter_t w;

		loco_waiter_init(&w, p->m);
		while ((ret = rp_sess(p)) == -ENOENT) {
			if (nonblock)
				return -EAGAIN;
			if (obj_past(dl))
				return -ETIMEDOUT;
			if (is_lost(p))
				return -ECONNRESET;
			loco_waiter_pause(&w);
		}
	}
	if (ret)
		return ret;
	for (;;) {
		size_t o = rp_off(p, p->tail);
		uint64_t left = p->size - o;
		struct rec_hdr *h;

		if (left < HDR) {
			p->tail += left; /* nothing written: the reader skips it too */
			p->st.wraps++;
			continue;
		}
		if (left >= rec) {
			ret = wait_room(p, rec, dl, nonblock);
			if (ret)
				return ret;
			*off = o;
			return 0;
		}
		ret = wait_room(p, left, dl, nonblock);
		if (ret)
			return ret;
		h = (struct rec_hdr *)(void *)(p->base + o);
		h->len = 0;
		h->tag = tag_of(KIND_PAD, p->seq);
		h->sum = sum_of(p, NULL, 0, p->seq, KIND_PAD);
		ret = p->pull ? 0 : post(p, o, HDR, dl, nonblock);
		if (ret)
			return ret;
		p->seq++;
		p->tail += left;
		p->st.wraps++;
		if (p->pull) {
			ret = rp_pull_advance(p, 0);
			if (ret)
				return ret;
		} else {
			stored(p);
		}
	}
}

/* seal -- the record at @off with @len payload bytes in place: header and trailer. */
static uint64_t seal(loco_rpipe_t *p, size_t off, size_t len)
{
	struct rec_hdr *h = (struct rec_hdr *)(void *)(p->base + off);
	uint64_t sum = sum_of(p, p->base + off + HDR, len, p->seq, KIND_MSG);
	uint64_t rec = HDR + r8(len) + TRL;

	h->len = (uint32_t)len;
	h->tag = tag_of(KIND_MSG, p->seq);
	h->sum = sum;
	memcpy(p->base + off + rec - TRL, &sum, sizeof(sum));
	return rec;
}

static int writer_args(loco_rpipe_t *p, size_t len)
{
	if (!p->is_writer)
		return -EPERM;
	if (p->resv_len != 0)
		return -EBUSY;
	if (len > p->size - LOCO_RPIPE_OVERHEAD)
		return -EMSGSIZE;
	return 0;
}

int loco_rpipe_write(loco_rpipe_t *p, const void *buf, size_t len, int64_t timeout_ns)
{
	int64_t dl = obj_deadline_lazy(timeout_ns); /* the clock is read only if it waits */
	uint64_t rec;
	size_t off;
	int ret;

	OBJ_CHECK(p);
	if (buf == NULL || len == 0)
		return -EINVAL;
	ret = writer_args(p, len);
	if (ret)
		return ret;
	rec = HDR + r8(len) + TRL;
	ret = place(p, rec, &dl, timeout_ns == 0, &off);
	if (ret)
		return ret;
	memcpy(p->base + off + HDR, buf, len);
	seal(p, off, len);
	ret = p->pull ? 0 : post(p, off, rec, &dl, timeout_ns == 0);
	if (ret)
		return ret; /* nothing placed: the tail stays */
	p->seq++;
	p->tail += rec;
	p->st.msgs++;
	p->st.bytes += len;
	if (p->pull)
		return rp_pull_advance(p, 0);
	stored(p);
	return 0;
}

int loco_rpipe_reserve(loco_rpipe_t *p, size_t len, void **ptr, int64_t timeout_ns)
{
	int64_t dl = obj_deadline_lazy(timeout_ns); /* the clock is read only if it waits */
	size_t off;
	int ret;

	OBJ_CHECK(p);
	if (ptr == NULL || len == 0)
		return -EINVAL;
	ret = writer_args(p, len);
	if (ret)
		return ret;
	ret = place(p, HDR + r8(len) + TRL, &dl, timeout_ns == 0, &off);
	if (ret)
		return ret;
	p->resv_off = off;
	p->resv_len = len;
	*ptr = p->base + off + HDR;
	return 0;
}

int loco_rpipe_commit(loco_rpipe_t *p, size_t len)
{
	int64_t never = -1;
	uint64_t rec;
	int ret;

	OBJ_CHECK(p);
	if (!p->is_writer || p->resv_len == 0 || len == 0 || len > p->resv_len)
		return -EINVAL;
	rec = seal(p, p->resv_off, len);
	ret = p->pull ? 0 : post(p, p->resv_off, rec, &never, 0); /* a full queue drains */
	if (ret) {
		p->resv_len = 0;
		return ret;
	}
	p->resv_len = 0;
	p->seq++;
	p->tail += rec;
	p->st.msgs++;
	p->st.bytes += len;
	if (p->pull)
		return rp_pull_advance(p, 0);
	stored(p);
	return 0;
}
