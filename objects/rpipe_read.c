/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe_read.c -- the rpipe's reader: polling the ring for the next
 * record, checking it, returning space in batches (rpipe_impl.h). In pull
 * mode the ring is a copy that rpipe_pull.c READs into.
 */
#include <errno.h>
#include <string.h>

#include "obj_util.h"
#include "rpipe_impl.h"

/*
 * copy_words -- @n 8-byte words from ring memory that the fabric may be
 * writing, with one atomic load each (never torn; pairs with the
 * provider's word stores, as value.c reads a replica).
 */
static void copy_words(uint64_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = __atomic_load_n((const uint64_t *)(const void *)src + i, __ATOMIC_RELAXED);
}

/*
 * ring_sum -- the reader's sum of @len payload bytes at @src, in the
 * ring: read word by word (the payload is 8-byte aligned and padded to
 * 8, so the padding words are read too but not hashed), small payloads
 * in one go, larger ones in SUM_CHUNK pieces through the streaming state.
 */
#define SUM_CHUNK 256u
static uint64_t ring_sum(loco_rpipe_t *p, const uint8_t *src, size_t len, uint64_t seq)
{
	uint64_t tmp[SUM_CHUNK / 8], seed = seed_of(p->sess, len, seq, KIND_MSG);

	if (len <= SUM_CHUNK) {
		copy_words(tmp, src, r8(len) / 8);
		return obj_sum(tmp, len, seed);
	}
	XXH3_64bits_reset(p->xs); /* obj_sum() in pieces */
	for (size_t o = 0; o < len; o += SUM_CHUNK) {
		size_t n = len - o < SUM_CHUNK ? len - o : SUM_CHUNK;

		copy_words(tmp, src + o, r8(n) / 8);
		XXH3_64bits_update(p->xs, tmp, n);
	}
	return XXH3_64bits_digest(p->xs) ^ obj_key_mix(seed);
}

/*
 * publish -- return consumed space: write the head to the writer when a
 * batch (the watermark) was consumed since the last time, or the writer
 * waits for a head we reached (push), or we consumed all the writer is
 * known to have committed (pull: it then publishes at its next commit).
 */
static void publish(loco_rpipe_t *p)
{
	uint64_t want, unpub = p->head - p->published;
	int again = !p->pull && p->ctl_err; /* push: the last head may be lost with a link */

	if ((unpub == 0 && !again) || is_lost(p))
		return; /* lost: the head of a session that ended (or a stale one) helps nobody */
	if (p->pull) {
		if (unpub < p->batch && !(p->head == p->pulled && p->head >= rp_pull_known(p)))
			return;
	} else {
		/*
		 * a mending READ in flight may still land old bytes from rd_from
		 * on: space consumed meanwhile is not returned until it is done
		 */
		if (p->rd == RD_DATA)
			return;
		want = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE); /* the writer's ctl_put */
		if (!again && unpub < p->batch && !(want > p->published && p->head >= want))
			return;
	}
	if (!p->pull)
		p->ctl_err = 0; /* (rp_ctl_put() sets it again for an older WRITE that failed) */
	if (rp_ctl_put(p, p->head) != 0) {
		p->ctl_err |= again;
		return; /* not paired yet, or slots busy: the next call tries again */
	}
	p->published = p->head;
	p->st.returns++;
}

static uint32_t load32(const void *a)
{
	return __atomic_load_n((const uint32_t *)a, __ATOMIC_RELAXED);
}

static uint64_t load64(const void *a)
{
	return __atomic_load_n((const uint64_t *)a, __ATOMIC_RELAXED);
}

/*
 * pull_torn -- pull: a record of the copy failed its checks, which only a
 * fabric that broke a word could cause: count it, READ it again.
 */
static int pull_torn(loco_rpipe_t *p)
{
	if (p->pull) {
		p->st.torn++;
		p->pulled = p->head;
	}
	return 0;
}

/*
 * next -- whether the next message has fully landed: its payload offset
 * and length. Consumes PAD records and skips on the way. Pull: only
 * within the copy's [head, pulled), which whole READs made.
 */
static int next(loco_rpipe_t *p, size_t *poff, size_t *plen)
{
	if (!p->have_sess && rp_sess(p) != 0)
		return 0; /* the writer has not paired yet: nothing of it can be taken */
	for (;;) {
		size_t o = rp_off(p, p->head);
		uint64_t left = p->size - o, len, sum;
		const uint8_t *r = p->base + o;
		uint32_t tag;

		if (p->pull && p->head >= p->pulled)
			return 0;
		if (left < HDR) {
			p->head += left;
			p->st.wraps++;
			continue;
		}
		tag = load32(r + 4);
		if (tag == tag_of(KIND_PAD, p->seq)) {
			if (load32(r) != 0 || load64(r + 8) != sum_of(p, NULL, 0, p->seq, KIND_PAD))
				return pull_torn(p);
			p->head += left;
			p->seq++;
			p->st.wraps++;
			continue;
		}
		if (tag != tag_of(KIND_MSG, p->seq))
			return pull_torn(p);
		/* every field is untrusted until the sum matches */
		len = load32(r);
		if (len == 0 || HDR + r8(len) + TRL > left ||
		    (p->pull && HDR + r8(len) + TRL > p->pulled - p->head))
			return pull_torn(p);
		sum = load64(r + 8);
		if (load64(r + HDR + r8(len)) != sum)
			return pull_torn(p);
		__atomic_thread_fence(__ATOMIC_ACQUIRE); /* the payload after the words above */
		if (ring_sum(p, r + HDR, len, p->seq) != sum) {
			if (!p->pull)
				p->st.torn++;
			return pull_torn(p);
		}
		*poff = o + HDR;
		*plen = len;
		return 1;
	}
}

/* wait_msg -- wait for the next message (see loco_rpipe_read()). */
static int wait_msg(loco_rpipe_t *p, int64_t timeout_ns, size_t *off, size_t *len)
{
	int64_t deadline = -1;
	loco_waiter_t w;
	int ret, counted = 0;

	if (p == NULL || off == NULL || len == NULL)
		return -EINVAL;
	if (p->is_writer)
		return -EPERM;
	/* an unlisted end's owner checks its object and the partition (once per turn of its own) */
	ret = p->unlisted ? 0 : loco_object_status(p->obj);
	if (ret)
		return ret;
	if (p->pull)
		rp_pull_step(p, 0); /* a finished READ, the next one: no reaping */
	if (next(p, off, len))
		return 0;
	for (unsigned n = 0;; n++) {
		int lost = is_lost(p);

		if (p->pull)
			rp_pull_step(p, 1); /* dry: reap, READ, tell the writer */
		if ((n > 0 || p->pull) && next(p, off, len))
			return 0;
		if (!counted) {
			p->st.empty++;
			counted = 1;
		}
		publish(p); /* the writer may wait for space we consumed */
		if (p->can_mend)
			rp_mend_step(p,
			             timeout_ns != 0); /* a link changed: READ what may be lost */
		if (lost)
			return next(p, off, len) ? 0
			                         : -ECONNRESET; /* what landed before its death */
		if (!p->unlisted && loco_channel_partitioned(p->ch))
			return -LOCO_EPARTITION;
		if (timeout_ns == 0)
			return -EAGAIN; /* a poll: no clock read, no waiter */
		if (n == 0) {
			deadline = obj_deadline(timeout_ns);
			loco_waiter_init(&w, p->m);
		}
		if (deadline >= 0 && n >= 4 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/* consume -- the message at payload offset @off of @len bytes is done. */
static void consume(loco_rpipe_t *p, size_t off, size_t len)
{
	p->head += HDR + r8(len) + TRL;
	p->seq++;
	p->st.msgs++;
	p->st.bytes += len;
	(void)off;
	publish(p);
}

int loco_rpipe_read(loco_rpipe_t *p, void *buf, size_t cap, size_t *len, int64_t timeout_ns)
{
	size_t off, n;
	int ret;

	OBJ_CHECK(p);
	if (buf == NULL || len == NULL)
		return -EINVAL;
	ret = wait_msg(p, timeout_ns, &off, &n);
	if (ret)
		return ret;
	if (n > cap)
		return -EMSGSIZE;
	memcpy(buf, p->base + off, n);
	p->peek_rec = 0;
	consume(p, off, n);
	*len = n;
	return 0;
}

int loco_rpipe_peek(loco_rpipe_t *p, const void **ptr, size_t *len, int64_t timeout_ns)
{
	size_t off, n;
	int ret;

	OBJ_CHECK(p);
	if (ptr == NULL || len == NULL)
		return -EINVAL;
	ret = wait_msg(p, timeout_ns, &off, &n);
	if (ret)
		return ret;
	p->peek_rec = n;
	*ptr = p->base + off;
	*len = n;
	return 0;
}

int loco_rpipe_release(loco_rpipe_t *p)
{
	size_t n;

	OBJ_CHECK(p);
	if (p->is_writer || p->peek_rec == 0)
		return -EINVAL;
	n = p->peek_rec;
	p->peek_rec = 0;
	consume(p, 0, n);
	return 0;
}
