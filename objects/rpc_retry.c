/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_retry.c -- loco_rpc_call_retry(): one-way calls the library queues
 * while the callee's ring is full, and posts as room comes (Seriema's
 * RetryAsync). Public API only.
 *
 * The queue: LOCO_RPC_RETRY_MAX entries of one endpoint (each a header
 * and inline_max bytes of arguments), made on the first call that is
 * queued; free entries on a list (qlock); taken ones on their callee's
 * FIFO (struct rpc_peer's rq_head/rq_tail, under its wlock, which every
 * post to that callee holds: so queued calls and the other call forms
 * keep one order, rpc_post() waiting while a queue is not empty).
 *
 * Who posts them: a poller on the manager's progress thread, added while
 * entries are taken (rq_on), at LOCO_POLLER_PERIOD_MIN_NS: ring room
 * comes back by remote WRITEs, which give no event. Each turn it tries
 * every callee with a queue (trylock: it never waits), posts from the
 * head while the ring takes them, and ends the calls whose callee left
 * (-ECONNRESET) or whose time ran out (-ETIMEDOUT); their callbacks run
 * after the callee's lock is let go, in queue order. Once no entry is
 * taken the poller finishes (LOCO_POLLER_DONE), so an idle endpoint
 * costs no wake-ups; the next queued call adds it again. loco_rpc_destroy()
 * ends what is left with -ECANCELED.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "obj_util.h"
#include "rpc_impl.h"

struct rpc_rq {
	struct rpc_rq *next;
	uint32_t node, id, len;
	uint32_t epoch;   /* the callee's when queued: a comeback ends the call */
	int64_t deadline; /* obj_now_ns() time; -1: none */
	loco_rpc_done_fn done;
	void *arg;
	int status; /* once ended */
	uint8_t data[];
};

static size_t rq_stride(const loco_rpc_ep_t *ep)
{
	return (sizeof(struct rpc_rq) + ep->cfg.inline_max + 7) & ~(size_t)7;
}

/* rq_get -- a free entry (the pool made on first use), counted taken: NULL when none */
static struct rpc_rq *rq_get(loco_rpc_ep_t *ep, int *err)
{
	struct rpc_rq *e = NULL;

	pthread_mutex_lock(&ep->qlock);
	if (ep->rq_mem == NULL) {
		size_t stride = rq_stride(ep);

		ep->rq_mem = calloc(LOCO_RPC_RETRY_MAX, stride);
		for (unsigned i = 0; ep->rq_mem != NULL && i < LOCO_RPC_RETRY_MAX; i++) {
			struct rpc_rq *f = (struct rpc_rq *)(void *)(ep->rq_mem + i * stride);

			f->next = ep->rq_free;
			ep->rq_free = f;
		}
	}
	*err = ep->rq_mem == NULL ? -ENOMEM : -ENOBUFS;
	if (ep->rq_free != NULL) {
		e = ep->rq_free;
		ep->rq_free = e->next;
		ep->rq_count++;
	}
	pthread_mutex_unlock(&ep->qlock);
	return e;
}

/* rq_put -- @e is free again */
static void rq_put(loco_rpc_ep_t *ep, struct rpc_rq *e)
{
	pthread_mutex_lock(&ep->qlock);
	e->next = ep->rq_free;
	ep->rq_free = e;
	ep->rq_count--;
	pthread_mutex_unlock(&ep->qlock);
}

/* rq_end -- tell the ended calls of @list (in order), then free their entries */
static void rq_end(loco_rpc_ep_t *ep, struct rpc_rq *list)
{
	while (list != NULL) {
		struct rpc_rq *e = list;

		list = e->next;
		e->done(e->arg, e->node, e->id, e->status);
		rq_put(ep, e);
	}
}

/*
 * rq_drain -- (wlock held) post @p's queued calls from the head while its
 * ring takes them; the ended ones (posted, or past help) are appended to
 * *@tail in order. Returns how many ended.
 */
static int rq_drain(loco_rpc_ep_t *ep, struct rpc_peer *p, struct rpc_rq ***tail)
{
	int64_t now = -1;
	struct rpc_rq *e;
	int n = 0;

	while ((e = p->rq_head) != NULL) {
		int ret;

		if (e->node != p->node || peer_epoch(p) != e->epoch) {
			ret = -ECONNRESET; /* it left (the record may serve another node now) */
		} else {
			if (e->deadline >= 0 && now < 0)
				now = obj_now_ns();
			ret = e->deadline >= 0 && now >= e->deadline
			          ? -ETIMEDOUT
			          : rpc_post_now(ep, p, e->id, e->data, e->len);
			/* no room, set-up under way, or cut off for now: the next turn tries again */
			if (ret == -EAGAIN || ret == -LOCO_EPARTITION || ret == -LOCO_ENOTJOINED)
				break;
		}
		p->rq_head = e->next;
		if (p->rq_head == NULL)
			p->rq_tail = NULL;
		__atomic_sub_fetch(&p->rq_n, 1, __ATOMIC_RELAXED);
		e->status = ret;
		e->next = NULL;
		**tail = e;
		*tail = &e->next;
		n++;
	}
	/* the head waits for room: the calls behind it whose time ran out end now */
	for (struct rpc_rq *prev = e, *x; prev != NULL && (x = prev->next) != NULL;) {
		if (x->deadline < 0 || (now >= 0 ? now : (now = obj_now_ns())) < x->deadline) {
			prev = x;
			continue;
		}
		prev->next = x->next;
		if (p->rq_tail == x)
			p->rq_tail = prev;
		__atomic_sub_fetch(&p->rq_n, 1, __ATOMIC_RELAXED);
		x->status = -ETIMEDOUT;
		x->next = NULL;
		**tail = x;
		*tail = &x->next;
		n++;
	}
	return n;
}

/* rq_poll -- the retry poller: drain every callee with a queue; done once none is queued */
static int rq_poll(void *arg)
{
	loco_rpc_ep_t *ep = arg;
	struct rpc_rq *ended = NULL, **tail = &ended;
	int n = 0;

	for (unsigned i = 0, np = rpc_npeers(ep); i < np; i++) {
		struct rpc_peer *p = rpc_peer_at(ep, i);

		if (__atomic_load_n(&p->rq_n, __ATOMIC_RELAXED) == 0 ||
		    pthread_mutex_trylock(&p->wlock) != 0)
			continue;
		n += rq_drain(ep, p, &tail);
		pthread_mutex_unlock(&p->wlock);
	}
	rq_end(ep, ended);
	pthread_mutex_lock(&ep->qlock);
	if (ep->rq_count == 0) {
		ep->rq_on = 0; /* the next queued call adds a poller again */
		pthread_mutex_unlock(&ep->qlock);
		return LOCO_POLLER_DONE;
	}
	pthread_mutex_unlock(&ep->qlock);
	return n > 0 ? LOCO_POLLER_BUSY : LOCO_POLLER_IDLE;
}

/* rq_arm -- the retry poller runs (added if it finished): 0, or -ENOMEM */
static int rq_arm(loco_rpc_ep_t *ep)
{
	loco_poller_t *old, *np = NULL;
	int ret;

	pthread_mutex_lock(&ep->qlock);
	if (ep->rq_on) {
		pthread_mutex_unlock(&ep->qlock);
		return 0;
	}
	ep->rq_on = 1;
	old = ep->rq_poller;
	ep->rq_poller = NULL;
	pthread_mutex_unlock(&ep->qlock);
	if (old != NULL)
		loco_poller_remove(old); /* it finished: this frees it */
	ret = loco_poller_add(ep->m, rq_poll, ep, LOCO_POLLER_PERIOD_MIN_NS, &np);
	pthread_mutex_lock(&ep->qlock);
	if (ret)
		ep->rq_on = 0;
	else
		ep->rq_poller = np;
	pthread_mutex_unlock(&ep->qlock);
	return ret;
}

int loco_rpc_call_retry(loco_rpc_ep_t *ep, uint32_t node, uint32_t id, const void *args, size_t len,
                        int64_t timeout_ns, loco_rpc_done_fn done, void *arg)
{
	struct rpc_peer *p;
	struct rpc_rq *e;
	uint32_t epoch;
	int ret;

	OBJ_CHECK(ep);
	if (done == NULL || (len && args == NULL) || !rpc_is_member(ep, node))
		return -EINVAL;
	if (len > ep->cfg.inline_max)
		return -EMSGSIZE;
	if (__atomic_load_n(&ep->stop, __ATOMIC_ACQUIRE))
		return -ECANCELED; /* (a callback of loco_rpc_destroy()'s) */
	/* nothing queued to it: straight to the ring when it has room */
	ret = loco_rpc_call(ep, node, id, args, len, 0);
	if (ret != -EAGAIN)
		return ret;
	p = rpc_peer_get(ep, node);
	if (p == NULL)
		return -EINVAL;
	epoch = peer_epoch(p);
	if (epoch & 1)
		return -ECONNRESET;
	e = rq_get(ep, &ret);
	if (e == NULL)
		return ret;
	*e = (struct rpc_rq){.node = node,
	                     .id = id,
	                     .len = (uint32_t)len,
	                     .epoch = epoch,
	                     .deadline = obj_deadline(timeout_ns),
	                     .done = done,
	                     .arg = arg};
	if (len)
		memcpy(e->data, args, len);
	ret = rq_arm(ep); /* before it is queued: then a failure leaves nothing queued */
	if (ret) {
		rq_put(ep, e);
		return ret;
	}
	pthread_mutex_lock(&p->wlock);
	if (p->rq_tail != NULL)
		p->rq_tail->next = e;
	else
		p->rq_head = e;
	p->rq_tail = e;
	__atomic_add_fetch(&p->rq_n, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->wlock);
	return -EINPROGRESS;
}

void rpc_retry_fini(loco_rpc_ep_t *ep)
{
	struct rpc_rq *ended = NULL, **tail = &ended;
	loco_poller_t *poller;

	pthread_mutex_lock(&ep->qlock);
	poller = ep->rq_poller;
	ep->rq_poller = NULL;
	pthread_mutex_unlock(&ep->qlock);
	if (poller != NULL)
		loco_poller_remove(poller); /* waits out a turn in progress */
	for (unsigned i = 0, np = rpc_npeers(ep); i < np; i++) {
		struct rpc_peer *p = rpc_peer_at(ep, i);
		struct rpc_rq *e;

		pthread_mutex_lock(&p->wlock);
		while ((e = p->rq_head) != NULL) {
			p->rq_head = e->next;
			e->status = -ECANCELED;
			e->next = NULL;
			*tail = e;
			tail = &e->next;
		}
		p->rq_tail = NULL;
		p->rq_n = 0;
		pthread_mutex_unlock(&p->wlock);
	}
	rq_end(ep, ended);
	free(ep->rq_mem);
	ep->rq_mem = NULL;
	ep->rq_free = NULL;
}
