/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_call.c -- the rpc caller: framing, aggregation, flow control, reply
 * slots and waits (the design is in rpc_impl.h). Public API only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obj_util.h"
#include "rpc_impl.h"

/* loco_rpc_wait() checks the endpoint, the partition and its deadline once in so many turns */
#define WAIT_CHECK_EVERY 8u
#define WAIT_QUICK_TURNS 256u /* ... in so many first turns; then on every turn */

int rpc_ep_check(loco_rpc_ep_t *ep)
{
	int ret = loco_object_status(ep->obj);

	if (ret)
		return ret;
	if (loco_channel_partitioned(ep->ch))
		return -LOCO_EPARTITION;
	return 0;
}

/* out_make -- (wlock) @p's out side: the writer's end in "<name>.o<node>", the batch */
static int out_make(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	char on[LOCO_NAME_MAX + 16]; /* create checked the name: it fits LOCO_NAME_MAX */
	int ret;

	loco_object_t *o;

	snprintf(on, sizeof(on), "%s.o%u", ep->name, p->node);
	ret = loco_object_create(ep->ch, on, NULL, NULL, &o);
	if (ret)
		return ret;
	__atomic_store_n(&p->oobj, o, __ATOMIC_RELAXED); /* loco_rpc_stats() and the lane read it */
	ret = rpipe_open_unlisted(p->oobj, "p", ep->me, p->node, ep->cfg.ring_bytes, &p->out);
	if (ret == 0 && ep->cfg.agg != LOCO_RPC_AGG_NONE &&
	    (p->batch = malloc(ep->rec_max)) == NULL)
		ret = -ENOMEM;
	if (ret)
		rpc_out_free(p);
	return ret;
}

/* ask -- (wlock) send @p's callee the OPEN of session p->out_sess */
static int ask(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	struct rpc_open_msg o = {.kind = MSG_OPEN, .sess = p->out_sess};
	int ret;

	rpipe_refs(p->out, &o.ring, &o.ctl);
	ret = loco_object_send(ep->obj, p->node, &o, sizeof(o));
	p->asked_ns = obj_now_ns();
	/* not paired (yet), or its queue is full: asked again later */
	return ret == -ENOTCONN || ret == -ENOBUFS ? 0 : ret;
}

int rpc_out_fresh(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	uint32_t e = peer_epoch(p);
	int ret, granted;

	if (e & 1)
		return -ECONNRESET;
	if (p->out_state != OUT_NONE && p->out_epoch != e) {
		/* it came back: the pipe starts again, the old epoch's calls are dropped */
		rpipe_lose(p->out);
		(void)loco_rpipe_reset(p->out);
		__atomic_store_n(&p->blen, 0, __ATOMIC_RELAXED);
		p->out_state = OUT_NONE;
	}
	if (p->out_state == OUT_READY && is_lost(p->out)) {
		/*
		 * a WRITE into its ring failed while the callee stayed a member
		 * (its data link failed and is made again): a new session; what
		 * the old one held and the callee had not read is dropped
		 */
		uint64_t n = __atomic_add_fetch(&ep->st_reopened, 1, __ATOMIC_RELAXED);

		if (loco_log_due(n))
			loco_log(LOCO_LOG_INFO,
			         "rpc %s: the ring to node %u lost a WRITE while node %u stayed a "
			         "member: a new session (%llu so far)",
			         ep->name, p->node, p->node, (unsigned long long)n);
		(void)loco_rpipe_reset(p->out);
		__atomic_store_n(&p->blen, 0, __ATOMIC_RELAXED);
		p->out_state = OUT_NONE;
	}
	if (p->out_state == OUT_READY)
		return 0;
	if (p->out == NULL) {
		ret = out_make(ep, p);
		if (ret)
			return ret;
	}
	if (p->out_state == OUT_NONE) {
		uint64_t mix[3] = {(uint64_t)ep->me << 32 | p->node, (uint64_t)obj_now_ns(),
		                   __atomic_add_fetch(&ep->tagctr_sess, 1, __ATOMIC_RELAXED)};

		p->out_sess = XXH3_64bits(mix, sizeof(mix)) | 1; /* never 0 */
		p->out_epoch = e;
		p->out_state = OUT_ASKED;
		ret = ask(ep, p);
		if (ret)
			return ret;
		return -EAGAIN;
	}
	pthread_mutex_lock(&p->glock);
	granted = p->granted && p->g_sess == p->out_sess;
	if (granted) {
		p->granted = 0;
		ret = rpipe_attach(p->out, &p->g_ring, &p->g_ctl, p->out_sess);
	}
	pthread_mutex_unlock(&p->glock);
	if (granted) {
		if (ret)
			return ret;
		p->out_state = OUT_READY;
		return 0;
	}
	if (obj_now_ns() - p->asked_ns >= RPC_OPEN_RETRY_NS) {
		ret = ask(ep, p); /* it may not have made the endpoint yet */
		if (ret)
			return ret;
	}
	return -EAGAIN;
}

int rpc_flush_peer(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	int ret = rpc_out_fresh(ep, p);

	if (ret || p->blen == 0)
		return ret;
	ret = loco_rpipe_write(p->out, p->batch, p->blen, 0);
	if (ret == 0) {
		__atomic_store_n(&p->blen, 0, __ATOMIC_RELAXED);
		ST_ADD(ep, records, 1);
	}
	return ret;
}

/* put_frame -- frame @h + @pl at @dst (rf_r8(RF_HDR + pl->len) bytes, padding zeroed) */
static void put_frame(uint8_t *dst, const struct rf_hdr *h, const struct pl_iov *pl)
{
	size_t flen = rf_r8(RF_HDR + pl->len), at = RF_HDR;

	memcpy(dst, h, RF_HDR);
	for (unsigned i = 0; i < PL_MAX; i++) {
		if (pl->n[i])
			memcpy(dst + at, pl->p[i], pl->n[i]);
		at += pl->n[i];
	}
	memset(dst + at, 0, flen - at);
}

/* direct -- one frame as one ring message, without waiting: 0, -EAGAIN, or an error */
static int direct(loco_rpc_ep_t *ep, struct rpc_peer *p, const struct rf_hdr *h,
                  const struct pl_iov *pl)
{
	size_t flen = rf_r8(RF_HDR + pl->len);
	void *ptr;
	int ret = loco_rpipe_reserve(p->out, flen, &ptr, 0);

	if (ret)
		return ret;
	put_frame(ptr, h, pl);
	ret = loco_rpipe_commit(p->out, flen);
	if (ret == 0)
		ST_ADD(ep, records, 1);
	return ret;
}

/* append -- (wlock) add the frame to @p's batch; the first of a batch wakes the poller */
static void append(loco_rpc_ep_t *ep, struct rpc_peer *p, const struct rf_hdr *h,
                   const struct pl_iov *pl)
{
	size_t was = p->blen;

	if (was == 0)
		p->bt0 = obj_now_ns();
	put_frame(p->batch + was, h, pl);
	__atomic_store_n(&p->blen, was + rf_r8(RF_HDR + pl->len), __ATOMIC_RELAXED);
	if (was == 0)
		loco_poller_kick(ep->poller); /* after the store: it may have parked (rpc_poll()) */
}

/* try_post -- (wlock held) take the frame by the aggregation mode: 0, -EAGAIN, or an error */
static int try_post(loco_rpc_ep_t *ep, struct rpc_peer *p, const struct rf_hdr *h,
                    const struct pl_iov *pl, int urgent)
{
	size_t flen = rf_r8(RF_HDR + pl->len);
	int ret;

	switch (ep->cfg.agg) {
	case LOCO_RPC_AGG_TRAD:
		if (p->blen + flen > ep->rec_max) {
			ret = rpc_flush_peer(ep, p);
			if (ret)
				return ret;
		}
		append(ep, p, h, pl);
		if (p->blen >= ep->cfg.agg_bytes || urgent) {
			ret = rpc_flush_peer(ep, p);
			if (ret != 0 && ret != -EAGAIN)
				return ret; /* -EAGAIN: the poller or a wait posts it */
		}
		return 0;
	case LOCO_RPC_AGG_OVERFLOW:
		if (p->blen != 0) { /* order: the batch goes first */
			ret = rpc_flush_peer(ep, p);
			if (ret == -EAGAIN) {
				if (p->blen + flen > ep->rec_max)
					return -EAGAIN;
				append(ep, p, h, pl);
				return 0;
			}
			if (ret)
				return ret;
		}
		ret = direct(ep, p, h, pl);
		if (ret == -EAGAIN) {
			ST_ADD(ep, full, 1);
			append(ep, p, h, pl);
			return 0;
		}
		return ret;
	default:
		return direct(ep, p, h, pl);
	}
}

/* a WRITE that goes before a call's record (call_buffer_to): posted once, ordered before it */
struct pre_write {
	size_t soff, doff, len; /* from the send region at soff to dst at doff */
	const loco_rref_t *dst;
	int done;
	uint32_t epoch; /* the callee's epoch it went to */
};

/* pre_post -- (wlock) @pre's WRITE, once per epoch of @p: 0, -ECONNRESET (it went to an old one) */
static int pre_post(loco_rpc_ep_t *ep, struct rpc_peer *p, struct pre_write *pre)
{
	int ret;

	if (pre->done)
		return pre->epoch == p->out_epoch ? 0 : -ECONNRESET;
	/* the link runs requests in posting order: the record that follows finds the bytes there */
	ret = loco_write(ep->send, pre->soff, pre->dst, pre->doff, pre->len, NULL);
	if (ret == 0) {
		pre->done = 1;
		pre->epoch = p->out_epoch;
	}
	return ret;
}

/*
 * rpc_post -- send one frame to @p, waiting (running calls meanwhile) until
 * *@deadline (obj_past()); *@epoch (may be NULL): the callee's
 * epoch it went to. With @pre, its WRITE goes first.
 */
int rpc_post(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t node, const struct rf_hdr *h,
             const struct pl_iov *pl, int urgent, int nowait, int64_t *deadline, uint32_t *epoch,
             struct pre_write *pre)
{
	loco_waiter_t w;
	int full = 0, setup, ret;

	for (int n = 0;; n++) {
		if (peer_dead(p))
			return -ECONNRESET;
		ret = rpc_ep_check(ep);
		if (ret)
			return ret;
		pthread_mutex_lock(&p->wlock);
		/* the record was another node's once @node left (reuse()): it is gone */
		ret = p->node == node ? rpc_out_fresh(ep, p) : -ECONNRESET;
		setup = ret == -EAGAIN;
		if (ret == 0 && p->rq_head != NULL)
			ret = -EAGAIN; /* behind the calls loco_rpc_call_retry() queued: in order */
		if (ret == 0 && pre != NULL)
			ret = pre_post(ep, p, pre);
		if (ret == 0)
			ret = try_post(ep, p, h, pl, urgent);
		if (ret == -ECONNRESET && p->node == node && p->out_epoch == peer_epoch(p) &&
		    p->out != NULL && is_lost(p->out)) {
			ret = -EAGAIN; /* the callee lives: a new session (rpc_out_fresh()) */
			setup = 1;
		}
		if (ret == 0 && epoch != NULL)
			*epoch = p->out_epoch;
		pthread_mutex_unlock(&p->wlock);
		if (ret == 0)
			ST_ADD(ep, calls, 1);
		if (ret != -EAGAIN)
			return ret;
		if (!setup && !full++)
			ST_ADD(ep, full, 1);
		if (nowait)
			return -EAGAIN;
		if (n == 0)
			loco_waiter_init(&w, ep->m);
		if (obj_past(deadline)) /* the clock is read only when a call waits */
			return -ETIMEDOUT;
		if (rpc_help(ep) == 0)
			loco_waiter_pause(&w);
	}
}

int rpc_post_now(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t id, const void *args, size_t len)
{
	struct rf_hdr h = {.kind = RF_CALL, .hid = id, .plen = (uint32_t)len};
	struct pl_iov pl = pl_one(args, len);
	int ret = rpc_ep_check(ep);

	if (ret == 0)
		ret = rpc_out_fresh(ep, p);
	if (ret == 0)
		ret = try_post(ep, p, &h, &pl, 0);
	if (ret == 0)
		ST_ADD(ep, calls, 1);
	return ret;
}

/* callee -- the record of member @node for a call to it (made on the first): NULL if none */
static struct rpc_peer *callee(loco_rpc_ep_t *ep, uint32_t node)
{
	return rpc_is_member(ep, node) ? rpc_peer_get(ep, node) : NULL;
}

int loco_rpc_call(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *args, size_t len,
                  int64_t timeout_ns)
{
	struct rf_hdr h = {.kind = RF_CALL, .hid = id, .plen = (uint32_t)len};
	struct pl_iov pl = pl_one(args, len);
	int64_t deadline = obj_deadline_lazy(timeout_ns);
	struct rpc_peer *p;

	OBJ_CHECK(ep);
	if ((p = callee(ep, node)) == NULL || (len && args == NULL))
		return -EINVAL;
	if (len > ep->cfg.inline_max)
		return -EMSGSIZE;
	return rpc_post(ep, p, node, &h, &pl, 0, timeout_ns == 0, &deadline, NULL, NULL);
}

/* landed -- whether the reply of @tag is whole in slot @s; its header into *@hd */
static int landed(loco_rpc_ep_t *ep, uint32_t s, uint64_t tag, struct slot_hdr *hd)
{
	const uint8_t *b = (const uint8_t *)loco_region_ptr(ep->rets) + (size_t)s * ep->slot_bytes;

	/*
	 * The tag first, then the rest: the WRITE has no release to pair
	 * with (its lines land in any order), so the sum over the whole
	 * reply, seeded with the tag, is what proves it landed whole.
	 */
	if (__atomic_load_n((const uint64_t *)(const void *)b, __ATOMIC_ACQUIRE) != tag)
		return 0;
	memcpy(hd, b, sizeof(*hd));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (hd->tag != tag || hd->len > ep->cfg.ret_max)
		return 0;
	return rpc_reply_sum(b + SLOT_HDR, hd->len, tag, hd->status) == hd->sum;
}

/* slot_get -- a free reply slot for a call to @node (@pulled: its payload is in our memory): 0, -EBUSY */
int rpc_slot_get(loco_rpc_ep_t *ep, uint32_t node, int pulled, uint32_t *slot, uint64_t *tag)
{
	int ret = 0;

	pthread_mutex_lock(&ep->slock);
	if (ep->nfree ==
	    0) { /* take back abandoned slots whose reply landed, or whose callee left */
		for (uint32_t s = 0; s < ep->cfg.ret_slots; s++) {
			struct rpc_slot *sl = &ep->slots[s];
			struct rpc_peer *p;
			struct slot_hdr hd;

			if (sl->state != SLOT_ABANDONED)
				continue;
			p = rpc_peer_find(ep, sl->node);
			/* (a one-way RF_TREEV gets no reply: its consumed mark is its last word) */
			if (landed(ep, s, sl->tag, &hd) ||
			    (sl->oneway && rpc_slot_consumed(ep, s, sl->tag)) || p == NULL ||
			    peer_epoch(p) != sl->epoch) {
				sl->state = SLOT_FREE;
				ep->freel[ep->nfree++] = s;
			}
		}
	}
	if (ep->nfree == 0) {
		ret = -EBUSY;
	} else {
		uint32_t s = ep->freel[--ep->nfree];

		if (ep->tagctr == 0)
			ep->tagctr = (uint64_t)obj_now_ns() << 8; /* differs from a former run's */
		ep->slots[s] = (struct rpc_slot){.tag = ++ep->tagctr,
		                                 .node = node,
		                                 .epoch = 1,
		                                 .state = SLOT_WAIT,
		                                 .pulled = pulled};
		*slot = s;
		*tag = ep->slots[s].tag;
	}
	pthread_mutex_unlock(&ep->slock);
	return ret;
}

void rpc_slot_end(loco_rpc_ep_t *ep, uint32_t s, int state)
{
	pthread_mutex_lock(&ep->slock);
	ep->slots[s].state = state;
	if (state == SLOT_FREE)
		ep->freel[ep->nfree++] = s;
	pthread_mutex_unlock(&ep->slock);
}

/* call_slot_iov -- post frame @h + @iov (a reply wanted) with a reply slot: fills @t */
static int call_slot_iov(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t node, struct rf_hdr *h,
                         struct pre_write *pre, const struct pl_iov *iov, void *ret, size_t ret_cap,
                         loco_rpc_ticket_t *t, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline_lazy(timeout_ns); /* read no clock unless it waits */
	loco_rpc_ticket_t local;
	loco_waiter_t w;
	int st = 0, rc;

	if (ret_cap && ret == NULL)
		return -EINVAL;
	loco_waiter_init(&w, ep->m);
	while ((rc = rpc_slot_get(ep, node,
	                          h->kind == RF_PULL || h->kind == RF_DEST || h->kind == RF_VEC,
	                          &h->slot, &h->tag)) == -EBUSY) {
		if (timeout_ns == 0 || obj_past(&deadline))
			return -EBUSY;
		if (rpc_help(ep) == 0)
			loco_waiter_pause(&w);
	}
	h->ret_cap = (uint32_t)(ret_cap < ep->cfg.ret_max ? ret_cap : ep->cfg.ret_max);
	rc = rpc_post(ep, p, node, h, iov, 1, timeout_ns == 0, &deadline, &ep->slots[h->slot].epoch,
	              pre);
	if (rc) {
		rpc_slot_end(ep, h->slot, SLOT_FREE); /* never posted: no reply can come */
		return rc;
	}
	if (t == NULL)
		t = &local;
	*t = (loco_rpc_ticket_t){
	    .tag = h->tag, .slot = h->slot, .node = node, .ret = ret, .ret_cap = ret_cap};
	if (t != &local)
		return 0;
	rc = loco_rpc_wait(ep, t, &st, NULL, timeout_ns == 0 ? 0 : obj_left_ns(deadline));
	if (rc == -EAGAIN) /* timeout 0: nobody holds the ticket; its late reply frees the slot */
		rpc_slot_end(ep, t->slot, SLOT_ABANDONED);
	return rc ? rc : (st < 0 ? st : 0);
}

/* call_slot -- call_slot_iov() of one piece */
static int call_slot(loco_rpc_ep_t *ep, struct rpc_peer *p, uint32_t node, struct rf_hdr *h,
                     struct pre_write *pre, const void *pl, size_t plen, void *ret, size_t ret_cap,
                     loco_rpc_ticket_t *t, int64_t timeout_ns)
{
	struct pl_iov iov = pl_one(pl, plen);

	return call_slot_iov(ep, p, node, h, pre, &iov, ret, ret_cap, t, timeout_ns);
}

int rpc_slot_busy(loco_rpc_ep_t *ep, uint32_t slot, uint64_t tag)
{
	int busy;

	pthread_mutex_lock(&ep->slock);
	busy = ep->slots[slot].tag == tag && ep->slots[slot].state != SLOT_FREE;
	pthread_mutex_unlock(&ep->slock);
	return busy;
}

int loco_rpc_callv(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const loco_rpc_arg_t *args,
                   unsigned nargs, void *ret, size_t ret_cap, loco_rpc_ticket_t *t,
                   int64_t timeout_ns)
{
	struct rf_hdr h = {.kind = RF_VEC, .hid = id};
	struct {
		struct rf_vec v;
		struct rf_varg a[RF_VEC_MAX];
	} tab = {.v = {.n = nargs}};
	struct pl_iov iov = {.len = 0};
	int pinned[RF_VEC_MAX], npin = 0, rc, st = 0;
	int64_t deadline = obj_deadline(timeout_ns);
	size_t total = 0;
	loco_rpc_ticket_t lt;
	struct rpc_peer *p;

	OBJ_CHECK(ep);
	if (args == NULL || nargs == 0 || (ret_cap && ret == NULL) ||
	    (p = callee(ep, node)) == NULL)
		return -EINVAL;
	if (nargs > LOCO_RPC_ARGS_MAX)
		return -E2BIG;
	if (ret_cap > ep->cfg.ret_max)
		return -EMSGSIZE;
	for (unsigned i = 0; i < nargs; i++) {
		if (args[i].ptr == NULL || args[i].len == 0)
			return -EINVAL;
		total += args[i].len;
		if (args[i].len > ep->cfg.pull_bytes || total > ep->cfg.pull_bytes)
			return -EMSGSIZE; /* more than the callee lays out at once */
	}
	iov.p[0] = &tab;
	iov.n[0] = sizeof(tab.v) + nargs * sizeof(tab.a[0]);
	iov.len = iov.n[0];
	/* small ones travel in the frame while it has room; the rest is READ from where it lies */
	for (unsigned i = 0; i < nargs; i++) {
		tab.a[i].len = args[i].len;
		if (args[i].len <= LOCO_RPC_COPY_MAX &&
		    iov.len + args[i].len <= ep->cfg.inline_max) {
			tab.a[i].how = RF_VARG_COPY;
			iov.p[1 + i] = args[i].ptr;
			iov.n[1 + i] = args[i].len;
			iov.len += args[i].len;
			continue;
		}
		rc = rpc_mem_get(ep, args[i].ptr, args[i].len, &tab.a[i].rkey, &pinned[npin]);
		if (rc)
			goto out;
		npin++;
		tab.a[i].how = RF_VARG_READ;
		tab.a[i].addr = (uint64_t)(uintptr_t)args[i].ptr;
	}
	if (iov.len > ep->cfg.inline_max) { /* (the table alone: inline_max below 200 bytes) */
		rc = -EMSGSIZE;
		goto out;
	}
	h.plen = (uint32_t)iov.len;
	rc = call_slot_iov(ep, p, node, &h, NULL, &iov, ret, ret_cap, &lt, timeout_ns);
	for (int i = 0; i < npin; i++) /* in use by this call until its slot is free */
		rpc_mem_done(ep, pinned[i], rc == 0, lt.slot, lt.tag);
	npin = 0;
	if (rc)
		return rc;
	if (t != NULL) {
		*t = lt;
		return 0;
	}
	rc = loco_rpc_wait(ep, &lt, &st, NULL, timeout_ns == 0 ? 0 : obj_left_ns(deadline));
	if (rc == -EAGAIN) /* timeout 0: nobody holds the ticket; its late reply frees the slot */
		rpc_slot_end(ep, lt.slot, SLOT_ABANDONED);
	return rc ? rc : (st < 0 ? st : 0);
out:
	for (int i = 0; i < npin; i++)
		rpc_mem_done(ep, pinned[i], 0, 0, 0);
	return rc;
}

int loco_rpc_call_return(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *args,
                         size_t len, void *ret, size_t ret_cap, loco_rpc_ticket_t *t,
                         int64_t timeout_ns)
{
	struct rf_hdr h = {.kind = RF_RET, .hid = id, .plen = (uint32_t)len};
	struct rpc_peer *p;

	OBJ_CHECK(ep);
	if ((p = callee(ep, node)) == NULL || (len && args == NULL))
		return -EINVAL;
	if (len > ep->cfg.inline_max || ret_cap > ep->cfg.ret_max)
		return -EMSGSIZE;
	return call_slot(ep, p, node, &h, NULL, args, len, ret, ret_cap, t, timeout_ns);
}

int loco_rpc_call_buffer(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *buf, size_t len,
                         void *ret, size_t ret_cap, loco_rpc_ticket_t *t, int64_t timeout_ns)
{
	struct rf_hdr h = {.kind = RF_RET, .hid = id, .plen = (uint32_t)len};
	const uint8_t *base;
	struct rf_pull pl;
	struct rpc_peer *p;

	OBJ_CHECK(ep);
	if ((p = callee(ep, node)) == NULL || (len && buf == NULL))
		return -EINVAL;
	if (ret_cap > ep->cfg.ret_max || len > ep->cfg.pull_bytes)
		return -EMSGSIZE;
	if (len <= ep->cfg.inline_max)
		return call_slot(ep, p, node, &h, NULL, buf, len, ret, ret_cap, t, timeout_ns);
	base = loco_region_ptr(ep->send);
	if ((const uint8_t *)buf < base || (const uint8_t *)buf + len > base + ep->cfg.pull_bytes)
		return -EINVAL;
	pl = (struct rf_pull){.off = (uint64_t)((const uint8_t *)buf - base), .len = len};
	h.kind = RF_PULL;
	h.plen = sizeof(pl);
	return call_slot(ep, p, node, &h, NULL, &pl, sizeof(pl), ret, ret_cap, t, timeout_ns);
}

int loco_rpc_call_buffer_to(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *buf,
                            size_t len, const loco_rref_t *dst, size_t doff, void *ret,
                            size_t ret_cap, loco_rpc_ticket_t *t, int64_t timeout_ns)
{
	struct rf_hdr h = {.kind = RF_DEST, .hid = id, .plen = sizeof(struct rf_dest)};
	const uint8_t *base;
	struct pre_write pre;
	struct rf_dest d;
	struct rpc_peer *p;

	OBJ_CHECK(ep);
	if (dst == NULL || len == 0 || buf == NULL || dst->node != node ||
	    (p = callee(ep, node)) == NULL)
		return -EINVAL;
	if (ret_cap > ep->cfg.ret_max)
		return -EMSGSIZE;
	base = loco_region_ptr(ep->send);
	if ((const uint8_t *)buf < base || len > ep->cfg.pull_bytes ||
	    (const uint8_t *)buf - base > (ptrdiff_t)(ep->cfg.pull_bytes - len) ||
	    doff > dst->len || len > dst->len - doff)
		return -EINVAL;
	pre = (struct pre_write){
	    .soff = (size_t)((const uint8_t *)buf - base), .doff = doff, .len = len, .dst = dst};
	d = (struct rf_dest){.addr = dst->addr + doff, .len = len, .rkey = dst->rkey};
	return call_slot(ep, p, node, &h, &pre, &d, sizeof(d), ret, ret_cap, t, timeout_ns);
}

int loco_rpc_dest_add(loco_rpc_ep_t *ep, loco_region_t *r)
{
	int ret = 0;

	loco_rref_t self;

	OBJ_CHECK(ep);
	if (r == NULL || loco_region_rref(r, &self) != 0 || self.node != ep->me)
		return -EINVAL; /* NULL, or a region of another manager */
	pthread_mutex_lock(&ep->hlock);
	for (unsigned i = 0; i < ep->ndest; i++)
		if (ep->dest[i].r == r)
			ret = -EEXIST;
	if (ret == 0 && ep->ndest == LOCO_RPC_DESTS_MAX)
		ret = -ENOSPC;
	if (ret == 0) {
		ep->dest[ep->ndest].r = r;
		ep->dest[ep->ndest].self = self;
		/* publishes the entry: pairs with rpc_dest_find() */
		__atomic_store_n(&ep->ndest, ep->ndest + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ep->hlock);
	return ret;
}

/* ticket_ok -- whether @t is a ticket of a call of @ep not waited for yet */
static int ticket_ok(const loco_rpc_ep_t *ep, const loco_rpc_ticket_t *t)
{
	return t != NULL && t->tag != 0 && t->slot < ep->cfg.ret_slots &&
	       ep->slots[t->slot].tag == t->tag && ep->slots[t->slot].node == t->node;
}

int loco_rpc_wait(loco_rpc_ep_t *ep, loco_rpc_ticket_t *t, int *status, size_t *ret_len,
                  int64_t timeout_ns)
{
	int64_t deadline = obj_deadline_lazy(timeout_ns); /* worked out at its first check */
	struct rpc_peer *p;
	struct slot_hdr hd;
	loco_waiter_t w;
	int ret, check;

	OBJ_CHECK(ep);
	if (!ticket_ok(ep, t))
		return -EINVAL;
	p = rpc_peer_find(ep, t->node);
	if (p == NULL) { /* its record went to another node: it left long ago */
		rpc_slot_end(ep, t->slot, SLOT_FREE);
		t->tag = 0;
		return -ECONNRESET;
	}
	loco_waiter_init(&w, ep->m);
	for (unsigned it = 0;; it++) {
		if (landed(ep, t->slot, t->tag, &hd)) {
			size_t n = hd.len < t->ret_cap ? hd.len : t->ret_cap;

			loco_waiter_done(&w);
			const uint8_t *b = (const uint8_t *)loco_region_ptr(ep->rets) +
			                   (size_t)t->slot * ep->slot_bytes + SLOT_HDR;

			if (n)
				memcpy(t->ret, b, n);
			rpc_slot_end(ep, t->slot, SLOT_FREE);
			t->tag = 0;
			if (status)
				*status = hd.status;
			if (ret_len)
				*ret_len = hd.len;
			return hd.len > t->ret_cap ? -EMSGSIZE : 0;
		}
		if (peer_epoch(p) != ep->slots[t->slot].epoch) {
			/* it left (and maybe came back): no WRITE for this call can come anymore */
			rpc_slot_end(ep, t->slot, SLOT_FREE);
			t->tag = 0;
			return -ECONNRESET;
		}
		/*
		 * The endpoint, the partition (a coarse clock) and the deadline (a clock): in the
		 * first WAIT_QUICK_TURNS turns (where a quick reply lands) on every
		 * WAIT_CHECK_EVERY-th only, not on every look at the slot (three clock reads a turn
		 * were a quarter of a spinning caller's samples on shm); after them, where a turn
		 * may be a sleep or a yield, on every turn, so a deadline is not overslept. The
		 * deadline is worked out at its first check (turn WAIT_CHECK_EVERY): a reply that
		 * lands before reads no clock for it
		 */
		check = it >= WAIT_QUICK_TURNS || it % WAIT_CHECK_EVERY == 0;
		ret = check ? rpc_ep_check(ep) : 0;
		if (ret == 0 && timeout_ns == 0)
			return -EAGAIN; /* the ticket stays valid */
		if (ret == 0 && check && it > 0 && obj_past(&deadline)) {
			ST_ADD(ep, timeouts, 1);
			ret = -ETIMEDOUT;
		}
		if (ret) {
			rpc_slot_end(ep, t->slot, SLOT_ABANDONED);
			t->tag = 0;
			return ret;
		}
		if (__atomic_load_n(&p->blen, __ATOMIC_RELAXED) !=
		    0) { /* our call may be batched */
			pthread_mutex_lock(&p->wlock);
			ret = rpc_flush_peer(ep, p);
			pthread_mutex_unlock(&p->wlock);
			(void)ret; /* errors reach the wait as the peer's death */
		}
		if (rpc_help(ep) == 0)
			loco_waiter_pause(&w);
	}
}

/* slot_consumed -- whether slot @s holds @tag's consumed mark (or its reply's tag: it landed) */
int rpc_slot_consumed(loco_rpc_ep_t *ep, uint32_t s, uint64_t tag)
{
	const uint64_t *w = (const uint64_t *)((const uint8_t *)loco_region_ptr(ep->rets) +
	                                       (size_t)s * ep->slot_bytes);

	/* each an aligned word: a WRITE never tears it */
	return __atomic_load_n(&w[offsetof(struct slot_hdr, consumed) / 8], __ATOMIC_ACQUIRE) ==
	           tag ||
	       __atomic_load_n(&w[offsetof(struct slot_hdr, tag) / 8], __ATOMIC_ACQUIRE) == tag;
}

int loco_rpc_consumed(loco_rpc_ep_t *ep, const loco_rpc_ticket_t *t, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	struct rpc_peer *p;
	loco_waiter_t w;
	int ret;

	OBJ_CHECK(ep);
	if (!ticket_ok(ep, t))
		return -EINVAL;
	if (!ep->slots[t->slot].pulled)
		return 0; /* the payload went in the ring: free once the call returned */
	/* pulled, or WRITTEN ahead of the call (call_buffer_to): the callee tells */
	p = rpc_peer_find(ep, t->node);
	if (p == NULL)
		return -ECONNRESET;
	loco_waiter_init(&w, ep->m);
	for (;;) {
		if (rpc_slot_consumed(ep, t->slot, t->tag)) {
			loco_waiter_done(&w);
			return 0;
		}
		if (peer_epoch(p) != ep->slots[t->slot].epoch)
			return -ECONNRESET; /* no READ of it can come any more */
		ret = rpc_ep_check(ep);
		if (ret)
			return ret;
		if (timeout_ns == 0)
			return -EAGAIN;
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (__atomic_load_n(&p->blen, __ATOMIC_RELAXED) != 0) { /* it may be batched */
			pthread_mutex_lock(&p->wlock);
			(void)rpc_flush_peer(ep, p);
			pthread_mutex_unlock(&p->wlock);
		}
		if (rpc_help(ep) == 0)
			loco_waiter_pause(&w);
	}
}

int loco_rpc_flush(loco_rpc_ep_t *ep, uint32_t node, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	loco_waiter_t w;

	OBJ_CHECK(ep);
	if (node != 0 && !rpc_is_member(ep, node))
		return -EINVAL;
	loco_waiter_init(&w, ep->m);
	for (unsigned i = 0, n = rpc_npeers(ep); i < n; i++) {
		struct rpc_peer *p = rpc_peer_at(ep, i);
		int ret;

		if ((node != 0 && p->node != node) ||
		    __atomic_load_n(&p->blen, __ATOMIC_RELAXED) == 0)
			continue;
		for (;;) {
			if (peer_dead(p))
				return -ECONNRESET;
			pthread_mutex_lock(&p->wlock);
			ret = rpc_flush_peer(ep, p);
			pthread_mutex_unlock(&p->wlock);
			if (ret != -EAGAIN)
				break;
			if (timeout_ns == 0)
				return -EAGAIN;
			if (deadline >= 0 && obj_now_ns() >= deadline)
				return -ETIMEDOUT;
			if (rpc_help(ep) == 0)
				loco_waiter_pause(&w);
		}
		if (ret)
			return ret;
	}
	return 0;
}
