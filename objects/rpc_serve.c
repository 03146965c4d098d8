/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_serve.c -- the rpc callee: reading the rings, decoding, pulling
 * payloads, running handlers and writing replies back (the design is in
 * rpc_impl.h). Public API only.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "obj_util.h"
#include "rpc_impl.h"

/* how long a reply waits for the caller's reply slots to be known here */
#define REPLY_LOOKUP_NS (5 * 1000000000ll)
/* how long a payload's READ is tried again while its link fails and comes back */
#define PULL_AGAIN_NS (5 * 1000000000ll)

static const struct rpc_handler *lookup(loco_rpc_ep_t *ep, uint32_t id)
{
	unsigned n = __atomic_load_n(&ep->nh, __ATOMIC_ACQUIRE); /* pairs with register's store */

	for (unsigned i = 0; i < n; i++)
		if (ep->h[i].id == id)
			return &ep->h[i];
	return NULL;
}

/*
 * slot_put -- WRITE @n bytes, @a (@an bytes) then @b, at byte @at of the
 * caller's reply slot @slot, if it is still the caller of epoch @e: a
 * reply, or a pulled call's consumed mark. Never waits for handlers.
 * Returns 0, or -1 when it was dropped (the caller left, or its slots are
 * not known here in time).
 */
static int slot_put(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t e, uint32_t slot, size_t at,
                    const void *a, size_t an, const void *b, size_t bn)
{
	int64_t dl = obj_deadline_lazy(REPLY_LOOKUP_NS); /* no clock unless something fails */
	loco_waiter_t w;
	size_t off;
	uint8_t *src;
	int ret;

	pthread_mutex_lock(&p->rlock);
	loco_waiter_init(&w, ep->m);
	for (;;) {
		if (peer_epoch(p) != e)
			goto drop;
		if (!p->have_rrets) { /* its regions may reach us just after its first call */
			loco_rref_t rr;

			ret = loco_region_remote(ep->rets, p->node, &rr);
			if (ret == 0)
				ret = loco_rhandle_bind(ep->rets, &rr, &p->rrets);
			if (ret == 0)
				p->have_rrets = 1;
			else if (ret != -ENOENT || obj_past(&dl))
				goto drop;
			else {
				loco_waiter_pause(&w);
				continue;
			}
		}
		if (loco_ack_outstanding(p->rack) < RSRC_K) {
			(void)loco_ack_wait(p->rack,
			                    0); /* clear a failure: the view tells deaths */
			off = (size_t)(p->rn % RSRC_K) * ep->slot_bytes;
			src = (uint8_t *)loco_region_ptr(p->rsrc) + off;
			memcpy(src, a, an);
			if (bn)
				memcpy(src + an, b, bn);
			ret = loco_rop_post(
			    &p->rrets, &(loco_rop_t){.opcode = LOCO_ROP_WRITE,
			                             .local = p->rsrc,
			                             .loff = off,
			                             .roff = (uint64_t)slot * ep->slot_bytes + at,
			                             .len = an + bn,
			                             .acks = {p->rack}});
			if (ret == 0) {
				p->rn++;
				break;
			}
			/* a link that failed is made again while the caller lives (epoch) */
			if (ret != -EAGAIN && (ret != -ENOTCONN || obj_past(&dl)))
				goto drop;
		}
		loco_waiter_pause(&w);
	}
	pthread_mutex_unlock(&p->rlock);
	return 0;
drop:
	pthread_mutex_unlock(&p->rlock);
	return -1;
}

/* reply -- {tag, status, result} into the caller's slot (slot_put()) */
static void reply(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t e, uint32_t slot, uint64_t tag,
                  int32_t status, const void *data, uint32_t len)
{
	struct slot_hdr hd = {.tag = tag, .status = status, .len = len};

	hd.sum = rpc_reply_sum(data, len, tag, status);
	if (slot_put(ep, p, e, slot, 0, &hd, sizeof(hd), data, len) == 0)
		ST_ADD(ep, replies, 1);
	else
		ST_LOG(ep, dropped, LOCO_LOG_INFO,
		       "reply dropped: the caller left, or its return slots are gone");
}

/*
 * consumed -- a pulled payload is here (or a call_buffer_to one: the call
 * came after its WRITE): its tag into the caller's slot's
 * consumed word (loco_rpc_consumed()), ahead of the reply, which the link
 * lands after it and which overwrites it. A mark that is dropped only
 * makes the caller learn it from the reply.
 */
static void consumed(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t e, uint32_t slot, uint64_t tag)
{
	(void)slot_put(ep, p, e, slot, offsetof(struct slot_hdr, consumed), &tag, sizeof(tag), NULL,
	               0);
}

/*
 * pull_once -- READ a call_buffer payload of the caller of epoch @e into
 * the lane's pull stack: 0, -ENOBUFS, -ECONNRESET (the caller left), or
 * the READ's own error
 */
static int pull_once(loco_rpc_ep_t *ep, struct rpc_lane *l, struct rpc_peer *p, uint32_t e,
                     const struct rf_pull *pl, const void **data)
{
	size_t len = (size_t)pl->len;
	loco_waiter_t w;
	int ret;

	if (l->pull_top + len > l->pull_base + ep->cfg.pull_bytes)
		return -ENOBUFS;
	if (!p->have_rsend) {
		loco_rref_t rr;

		if (loco_region_remote(ep->send, p->node, &rr) != 0 ||
		    loco_rhandle_bind(ep->send, &rr, &p->rsend) != 0)
			return -EINVAL;
		p->have_rsend = 1;
	}
	loco_waiter_init(&w, ep->m);
	for (int tries = 0;; tries++) {
		ret = loco_rop_post(&p->rsend, &(loco_rop_t){.opcode = LOCO_ROP_READ,
		                                             .local = ep->pull,
		                                             .loff = l->pull_top,
		                                             .roff = (uint64_t)pl->off,
		                                             .len = len,
		                                             .acks = {l->pack}});
		/* the send queue or the ack key full for a moment (a storm): not an error */
		if (ret != -EAGAIN || tries >= 100000 || peer_epoch(p) != e)
			break;
		loco_waiter_pause(&w);
	}
	if (ret)
		return peer_epoch(p) != e ? -ECONNRESET : ret;
	for (;;) {
		ret = loco_ack_wait(l->pack, 1000000);
		if (ret != -ETIMEDOUT)
			break;
		if (peer_epoch(p) != e) {
			(void)loco_ack_wait(l->pack, -1); /* completes within the failure bound */
			return -ECONNRESET;
		}
	}
	if (ret)
		return peer_epoch(p) != e ? -ECONNRESET : ret;
	ST_ADD(ep, pulls, 1);
	*data = (const uint8_t *)loco_region_ptr(ep->pull) + l->pull_top;
	l->pull_top += rf_r8(len);
	return 0;
}

/*
 * pullv_once -- lay an RF_VEC call's arguments out one after the other in
 * the lane's pull stack: the copied ones from the frame, the others READ
 * from the caller of epoch @e (all posted, then waited for together).
 * 0, -ENOBUFS, -ECONNRESET (the caller left), or a READ's own error.
 */
static int pullv_once(loco_rpc_ep_t *ep, struct rpc_lane *l, struct rpc_peer *p, uint32_t e,
                      const struct rf_frame *f, const void **data)
{
	const uint8_t *copy = f->vcopy;
	size_t at = l->pull_top;
	uint8_t *base = loco_region_ptr(ep->pull);
	int ret = 0, posted = 0;

	if (l->pull_top + f->vlen > l->pull_base + ep->cfg.pull_bytes)
		return -ENOBUFS;
	for (uint32_t i = 0; i < f->vn && ret == 0; i++) {
		struct rf_varg a;

		memcpy(&a, f->varg + (size_t)i * sizeof(a), sizeof(a));
		if (a.how == RF_VARG_COPY) {
			memcpy(base + at, copy, a.len);
			copy += a.len;
		} else {
			loco_rref_t rr = {
			    .node = p->node, .rkey = a.rkey, .addr = a.addr, .len = a.len};
			loco_waiter_t w;

			loco_waiter_init(&w, ep->m);
			for (int tries = 0;; tries++) {
				ret = loco_read(ep->pull, at, &rr, 0, a.len, l->pack);
				if (ret != -EAGAIN || tries >= 100000 || peer_epoch(p) != e)
					break;
				loco_waiter_pause(&w); /* the send queue full for a moment */
			}
			posted += ret == 0;
		}
		at += a.len;
	}
	if (posted) { /* (every one posted must be waited for, also after an error) */
		int w =
		    loco_ack_wait(l->pack, -1); /* completes or fails within the failure bound */

		ret = ret ? ret : w;
	}
	if (ret)
		return peer_epoch(p) != e ? -ECONNRESET : ret;
	ST_ADD(ep, pulls, 1);
	*data = base + l->pull_top;
	l->pull_top += rf_r8(f->vlen);
	return 0;
}

/*
 * pull_again -- whether a pull that failed with @err is tried again: when
 * the READ's link failed (a reset, a flush, a peer that did not answer in
 * time) while its caller is still the member of epoch @e, the link is
 * made again and the bytes are still there (the caller waits for them),
 * so it pauses and says yes, for up to PULL_AGAIN_NS from @t0. Not when
 * the caller's memory refused it (-EACCES, -EFAULT, -EINVAL): that
 * stays so.
 */
static int pull_again(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t e, int err, int64_t t0,
                      loco_waiter_t *w, int *waited)
{
	if (err == 0 || err == -ENOBUFS || err == -EACCES || err == -EFAULT || err == -EINVAL ||
	    peer_epoch(p) != e || obj_now_ns() - t0 > PULL_AGAIN_NS)
		return 0;
	if (!(*waited)++) {
		uint64_t n = __atomic_add_fetch(&ep->st_pull_again, 1, __ATOMIC_RELAXED);

		loco_waiter_init(w, ep->m);
		if (loco_log_due(n))
			loco_log(LOCO_LOG_INFO,
			         "rpc %s: a payload's READ failed with its link (%d): reading it "
			         "again (%llu so far)",
			         ep->name, err, (unsigned long long)n);
	}
	loco_waiter_pause(w);
	return 1;
}

/* pull_end -- a pull's result to its call: 0, -ENOBUFS, -ECONNRESET, -EIO (as the docs say) */
static int pull_end(struct rpc_peer *p, uint32_t e, int err, loco_waiter_t *w, int waited)
{
	if (waited)
		loco_waiter_done(w);
	if (err == 0 || err == -ENOBUFS)
		return err;
	return peer_epoch(p) != e ? -ECONNRESET : -EIO;
}

/*
 * pull -- the payload of @f (RF_PULL: one READ; RF_VEC, RF_TREEV: its
 * arguments) into the lane's pull stack, again while its link fails:
 * 0, -ENOBUFS, -EIO, -ECONNRESET
 */
static int pull(loco_rpc_ep_t *ep, struct rpc_lane *l, struct rpc_peer *p, uint32_t e,
                const struct rf_frame *f, const void **data)
{
	int64_t t0 = obj_now_ns();
	loco_waiter_t w;
	int ret, waited = 0;

	do
		ret = f->h.kind == RF_PULL ? pull_once(ep, l, p, e, &f->pull, data)
		                           : pullv_once(ep, l, p, e, f, data);
	while (pull_again(ep, p, e, ret, t0, &w, &waited));
	return pull_end(p, e, ret, &w, waited);
}

/* dest_find -- the local place of a call_buffer_to payload, in a destination region: 0, -EFAULT */
static int dest_find(loco_rpc_ep_t *ep, const struct rf_dest *d, const void **data)
{
	unsigned n = __atomic_load_n(&ep->ndest, __ATOMIC_ACQUIRE); /* pairs with dest_add */

	for (unsigned i = 0; i < n; i++) {
		const loco_rref_t *s = &ep->dest[i].self;

		if (d->rkey != s->rkey || d->addr < s->addr || d->addr - s->addr > s->len ||
		    d->len > s->len - (d->addr - s->addr))
			continue;
		*data = (const uint8_t *)loco_region_ptr(ep->dest[i].r) + (d->addr - s->addr);
		return 0;
	}
	return -EFAULT;
}

/*
 * run_treev -- a buffer broadcast's RF_TREEV (loco_rpc_call_buffer_all()):
 * READ the bytes from the sender into the lane's pull stack, mark them
 * consumed there (the sender's wait ends: also after a failed READ, after
 * which no READ of them comes), pass them on to the subtree from here,
 * run the handler on them as a call of the origin, then wait until the
 * subtree's takers hold them too before the pull stack lets them go. No
 * reply: it is one-way.
 */
static void run_treev(loco_rpc_ep_t *ep, struct rpc_lane *l, struct rpc_peer *p, uint32_t e,
                      const struct rf_frame *f, const struct rpc_handler *h, uint8_t *retbuf)
{
	loco_rpc_msg_t msg = {.ep = ep, .caller = f->origin, .id = f->h.hid};
	struct rpc_treev tv;
	int ret, sent = 0;
	size_t rl = 0;

	ret = pull(ep, l, p, e, f, &msg.data);
	if (ret != -ECONNRESET)
		consumed(ep, p, e, f->h.slot, f->h.tag);
	if (ret) {
		ST_LOG(ep, dropped, LOCO_LOG_INFO,
		       "tree call dropped: its payload could not be read");
		return;
	}
	msg.len = (size_t)f->vlen;
	if (f->nsub != 0) {
		ret = rpc_treev_send(ep, f->origin, f->h.hid, f->sub, f->nsub, msg.data, msg.len,
		                     rpc_tree_wait_ns(f->h.ret_cap), &tv);
		sent = ret == 0;
		if (ret)
			ST_LOG(ep, dropped, LOCO_LOG_INFO,
			       "tree call not passed on to its subtree");
	}
	if (h == NULL) {
		ST_LOG(ep, unknown, LOCO_LOG_INFO, "call to an id with no handler here");
	} else {
		(void)h->fn(h->arg, &msg, retbuf, 0, &rl);
		ST_ADD(ep, handled, 1);
	}
	if (sent && rpc_treev_wait(ep, &tv) != 0)
		ST_LOG(ep, dropped, LOCO_LOG_INFO, "tree call not passed on to all of its subtree");
}

static void run_frame(loco_rpc_ep_t *ep, struct rpc_lane *l, struct rpc_peer *p, uint32_t e,
                      const struct rf_frame *f)
{
	const struct rpc_handler *h = lookup(ep, f->h.hid);
	uint8_t *retbuf = l->retbuf + (size_t)(l->depth - 1) * ep->cfg.ret_max;
	size_t top = l->pull_top, rl = 0;
	size_t cap = f->h.kind == RF_CALL || f->h.kind == RF_TREE ? 0 : f->h.ret_cap;
	loco_rpc_msg_t msg = {
	    .ep = ep, .caller = p->node, .id = f->h.hid, .data = f->args, .len = f->alen};
	int status;

	if (cap > ep->cfg.ret_max)
		cap = ep->cfg.ret_max;
	if (f->h.kind == RF_TREEV) {
		run_treev(ep, l, p, e, f, h, retbuf);
		l->pull_top = top;
		return;
	}
	if (f->h.kind == RF_TREE) {
		/*
		 * pass it on first (its subtree waits for us), then run it here;
		 * each child waits as long as the first caller's call would
		 * (a first call to a node waits for its ring to be made there)
		 */
		if (f->nsub != 0 && rpc_tree_send(ep, f->origin, f->h.hid, f->sub, f->nsub, f->args,
		                                  f->alen, rpc_tree_wait_ns(f->h.ret_cap)) != 0)
			ST_LOG(ep, dropped, LOCO_LOG_INFO,
			       "tree call not passed on to its subtree");
		msg.caller = f->origin;
	}
	if (h == NULL) {
		ST_LOG(ep, unknown, LOCO_LOG_INFO, "call to an id with no handler here");
		status = -ENOENT;
	} else if (f->h.kind == RF_DEST && (status = dest_find(ep, &f->dest, &msg.data)) != 0) {
		/* a place that is no destination region here: refused */
		ST_LOG(ep, bad, LOCO_LOG_WARN,
		       "call into a place that is no destination region here");
	} else if ((f->h.kind == RF_PULL || f->h.kind == RF_VEC) &&
	           (status = pull(ep, l, p, e, f, &msg.data)) != 0) {
		if (status == -ECONNRESET) {
			ST_LOG(ep, dropped, LOCO_LOG_INFO,
			       "call dropped: its payload could not be read");
			return;
		}
	} else {
		if (f->h.kind == RF_PULL || f->h.kind == RF_VEC) {
			msg.len = f->h.kind == RF_PULL ? (size_t)f->pull.len : (size_t)f->vlen;
			consumed(ep, p, e, f->h.slot, f->h.tag);
		}
		if (f->h.kind == RF_DEST) {
			msg.len = (size_t)f->dest.len;
			consumed(ep, p, e, f->h.slot, f->h.tag); /* (its WRITE came first) */
		}
		status = h->fn(h->arg, &msg, retbuf, cap, &rl);
		ST_ADD(ep, handled, 1);
		if (rl > cap)
			rl = cap;
	}
	l->pull_top = top;
	if (f->h.kind != RF_CALL && f->h.kind != RF_TREE)
		reply(ep, p, e, f->h.slot, f->h.tag, status, retbuf, (uint32_t)rl);
}

/* run_msg -- run the frames of one ring message (lane scratch) of epoch @e: the number run */
static int run_msg(loco_rpc_ep_t *ep, struct rpc_lane *l, struct rpc_peer *p, uint32_t e,
                   const void *msg, size_t len)
{
	struct rf_frame f;
	size_t pos = 0;
	int n = 0, r;

	while ((r = rf_next(msg, len, &pos, &ep->lim, &f)) == 1) {
		if (peer_epoch(p) != e) {
			ST_LOG(ep, dropped, LOCO_LOG_INFO, "call dropped: its caller left");
			continue;
		}
		run_frame(ep, l, p, e, &f);
		n++;
	}
	if (r < 0)
		ST_LOG(ep, bad, LOCO_LOG_WARN, "ring message refused by the frame decoder");
	return n;
}

int rpc_lane_progress(loco_rpc_ep_t *ep, struct rpc_lane *l, int max)
{
	unsigned li = (unsigned)(l - ep->lanes);
	const void *msg;
	uint8_t *scr;
	int n = 0, round, checked = 0;

	if (l->depth >= ep->cfg.max_depth)
		return 0;
	scr = l->scratch + (size_t)l->depth * ep->rec_max;
	do {
		unsigned np = rpc_npeers(ep);

		round = 0;
		unsigned at = l->next < np ? l->next : 0; /* (no division a poll: np may change) */

		for (unsigned k = 0; k < np && n < max; k++, at = at + 1 < np ? at + 1 : 0) {
			struct rpc_peer *p = rpc_peer_at(ep, at);
			uint32_t e;
			size_t len = 0;
			int ret;

			if (p->lane != li)
				continue; /* another lane's */
			if ((peer_epoch(p) & 1) &&
			    __atomic_load_n(&p->oobj, __ATOMIC_RELAXED) != NULL &&
			    pthread_mutex_trylock(&p->wlock) == 0) {
				if (peer_epoch(p) & 1) /* it left: free our pipe to it */
					rpc_out_free(p);
				pthread_mutex_unlock(&p->wlock);
			}
			if (rpc_in_serve(ep, p) != 0)
				continue; /* no in pipe (a dead caller's is freed) */
			e = peer_epoch(p);
			if (e & 1)
				continue; /* a dead caller's calls are dropped */
			ret = loco_rpipe_peek(p->in, &msg, &len, 0);
			if (ret)
				continue;
			/*
			 * The pipes are the endpoint's: it checks for all of them once a
			 * turn, when the first message is there (an idle poll reads no
			 * clock for it). A node cut off runs no call, and leaves it in
			 * the ring (its callers see it gone).
			 */
			if (!checked) {
				checked = 1;
				if (loco_object_status(ep->obj) != 0 ||
				    loco_channel_partitioned(ep->ch))
					return n;
			}
			if (len > ep->rec_max) { /* longer than any the caller may send: drop it */
				loco_rpipe_release(p->in);
				ST_LOG(ep, bad, LOCO_LOG_WARN,
				       "ring message longer than any caller may send");
				continue;
			}
			memcpy(scr, msg, len); /* a nested turn may read the ring on */
			loco_rpipe_release(p->in);
			round = 1;
			l->depth++;
			n += run_msg(ep, l, p, e, scr, len);
			l->depth--;
		}
		l->next = l->next + 1 < np ? l->next + 1 : 0;
	} while (round && n < max);
	return n;
}

int rpc_help(loco_rpc_ep_t *ep)
{
	int n = 0;

	for (unsigned i = 0; i < ep->nlanes; i++) {
		struct rpc_lane *l = &ep->lanes[i];

		if (ep->cfg.threads && !(__atomic_load_n(&l->running, __ATOMIC_ACQUIRE) &&
		                         pthread_equal(l->self, pthread_self())))
			continue;
		if (!lane_try(l))
			continue;
		n += rpc_lane_progress(ep, l, 16);
		lane_drop(l);
	}
	return n;
}

int loco_rpc_progress(loco_rpc_ep_t *ep, int max)
{
	struct rpc_lane *l;
	int n;

	OBJ_CHECK(ep);
	if (max <= 0)
		return -EINVAL;
	if (ep->cfg.threads)
		return -EPERM;
	l = &ep->lanes[0];
	if (!lane_try(l))
		return 0;
	n = rpc_lane_progress(ep, l, max);
	lane_drop(l);
	return n;
}
