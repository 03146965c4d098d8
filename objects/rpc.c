/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc.c -- the rpc endpoint's set-up, handler table, flush poller and
 * server threads (the design is in rpc_impl.h). Public API only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obj_hash.h"
#include "obj_util.h"
#include "rpc_impl.h"

#define DEF_RING   (64u * 1024)
#define DEF_INLINE 1024u
#define DEF_RET    256u
#define DEF_SLOTS  64u
#define DEF_PULL   (1u << 20)
#define DEF_AGG    4096u
#define DEF_AGG_NS 100000ll
#define DEF_DEPTH  4u

void loco_rpc_cfg_default(loco_rpc_cfg_t *cfg, const uint32_t *nodes, uint32_t n)
{
	if (cfg == NULL)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->nodes = nodes;
	cfg->nnodes = n;
	cfg->ring_bytes = DEF_RING;
	cfg->inline_max = DEF_INLINE;
	cfg->ret_max = DEF_RET;
	cfg->ret_slots = DEF_SLOTS;
	cfg->pull_bytes = DEF_PULL;
	cfg->agg = LOCO_RPC_AGG_NONE;
	cfg->agg_bytes = DEF_AGG;
	cfg->agg_ns = DEF_AGG_NS;
	cfg->max_depth = DEF_DEPTH;
}

uint32_t loco_rpc_id(const char *name)
{
	uint32_t id;

	if (name == NULL)
		return 0;
	id = (uint32_t)XXH3_64bits(name, strlen(name));
	return id ? id : 1;
}

static unsigned tab_hash(uint32_t node)
{
	return (unsigned)((node * 0x9E3779B1u) >> 20) % RPC_TAB;
}

struct rpc_peer *rpc_peer_of(loco_rpc_ep_t *ep, uint32_t node)
{
	for (unsigned i = tab_hash(node), k = 0; k < RPC_TAB; k++, i = (i + 1) % RPC_TAB) {
		/* pairs with tab_put()'s release: a record is whole before it is in the table */
		struct rpc_peer *p = __atomic_load_n(&ep->tab[i], __ATOMIC_ACQUIRE);

		if (p == NULL)
			return NULL;
		if (__atomic_load_n(&p->node, __ATOMIC_RELAXED) == node)
			return p;
	}
	return NULL;
}

struct rpc_peer *rpc_peer_find(loco_rpc_ep_t *ep, uint32_t node)
{
	struct rpc_peer *p = rpc_peer_of(ep, node);

	if (p == NULL) { /* a record moved while we looked: look again, as the writers see it */
		pthread_mutex_lock(&ep->tlock);
		p = rpc_peer_of(ep, node);
		pthread_mutex_unlock(&ep->tlock);
	}
	return p;
}

/* tab_put -- (tlock) @p into the table at its node's first free slot (one is free: <= 3/4 used) */
static void tab_put(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	unsigned i = tab_hash(p->node);

	while (ep->tab[i] != NULL)
		i = (i + 1) % RPC_TAB;
	__atomic_store_n(&ep->tab[i], p, __ATOMIC_RELEASE);
}

/*
 * tab_del -- (tlock) take @p out of the table, shifting the records
 * after it back so that no probe sequence breaks (a lock-free reader may
 * miss a record meanwhile: rpc_peer_find() looks again under tlock)
 */
static void tab_del(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	unsigned i = tab_hash(p->node), j;

	while (ep->tab[i] != p)
		i = (i + 1) % RPC_TAB;
	__atomic_store_n(&ep->tab[i], NULL, __ATOMIC_RELEASE);
	for (j = (i + 1) % RPC_TAB; ep->tab[j] != NULL; j = (j + 1) % RPC_TAB) {
		struct rpc_peer *q = ep->tab[j];
		unsigned h = tab_hash(q->node);
		/* q stays when its home h lies cyclically in (i, j] */
		int stays = i < j ? (h > i && h <= j) : (h > i || h <= j);

		if (stays)
			continue;
		__atomic_store_n(&ep->tab[i], q, __ATOMIC_RELEASE); /* found at i or j meanwhile */
		__atomic_store_n(&ep->tab[j], NULL, __ATOMIC_RELEASE);
		i = j;
	}
}

/*
 * reuse -- (tlock) a record of a node that left, holding nothing, for
 * @node: its epoch moves on (so whatever still names the old node and
 * epoch -- a slot, a wait, a post that looked it up -- sees it gone)
 */
static struct rpc_peer *reuse(loco_rpc_ep_t *ep, uint32_t node)
{
	for (unsigned i = 0; i < ep->np; i++) {
		struct rpc_peer *p = ep->plist[i];
		int ok;

		if (!(peer_epoch(p) & 1) || pthread_mutex_trylock(&p->wlock) != 0)
			continue;
		if (pthread_mutex_trylock(&p->glock) != 0) {
			pthread_mutex_unlock(&p->wlock);
			continue;
		}
		ok = (peer_epoch(p) & 1) && p->oobj == NULL &&
		     __atomic_load_n(&p->in, __ATOMIC_ACQUIRE) == NULL && !p->reopen;
		if (ok) {
			tab_del(ep, p);
			__atomic_store_n(&p->node, node, __ATOMIC_RELAXED);
			__atomic_store_n(&p->epoch, p->epoch + 1,
			                 __ATOMIC_RELEASE); /* even: a member */
			p->out_state = OUT_NONE;
			p->granted = 0;
			pthread_mutex_lock(&p->rlock);
			p->have_rrets = p->have_rsend = 0;
			(void)loco_ack_wait(p->rack, 0);
			pthread_mutex_unlock(&p->rlock);
			tab_put(ep, p);
			__atomic_add_fetch(&ep->st_reused, 1, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&p->glock);
		pthread_mutex_unlock(&p->wlock);
		if (ok)
			return p;
	}
	return NULL;
}

int rpc_is_member(const loco_rpc_ep_t *ep, uint32_t node)
{
	uint32_t lo = 0, hi = ep->cfg.nnodes;

	if (node == 0 || node == ep->me)
		return 0;
	if (ep->nodes == NULL)
		return 1;
	while (lo < hi) { /* ep->nodes is sorted */
		uint32_t mid = lo + (hi - lo) / 2;

		if (ep->nodes[mid] == node)
			return 1;
		if (ep->nodes[mid] < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

struct rpc_peer *rpc_peer_get(loco_rpc_ep_t *ep, uint32_t node)
{
	struct rpc_peer *p = rpc_peer_of(ep, node);

	if (p != NULL)
		return p;
	pthread_mutex_lock(&ep->tlock);
	p = rpc_peer_of(ep, node); /* made meanwhile? */
	if (p != NULL)
		goto out;
	if (ep->np >= RPC_REUSE_AT) {
		p = reuse(ep, node); /* NULL: every record is of a live node, or busy */
		if (p != NULL || ep->np >= RPC_TAB * 3 / 4)
			goto out;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		goto out;
	if (loco_ack_key_create_cfg(ep->m, &(loco_ack_key_cfg_t){.flags = LOCO_ACK_IGNORE_LEFT},
	                            &p->rack) != 0) {
		free(p);
		p = NULL;
		goto out;
	}
	p->node = node;
	p->lane = ep->np % ep->nlanes;
	pthread_mutex_init(&p->wlock, NULL);
	pthread_mutex_init(&p->glock, NULL);
	pthread_mutex_init(&p->rlock, NULL);
	tab_put(ep, p);
	__atomic_store_n(&ep->plist[ep->np], p, __ATOMIC_RELEASE);
	__atomic_store_n(&ep->np, ep->np + 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&ep->tlock);
	return p;
}

uint64_t rpc_reply_sum(const void *data, uint32_t len, uint64_t tag, int32_t status)
{
	uint64_t seed = tag * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(uint32_t)status << 32 | len);

	return obj_sum(data, len, seed);
}

/* on the progress thread: a member left or died -- its calls are dropped, calls to it fail */
static void rpc_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpc_ep_t *ep = arg;
	struct rpc_peer *p;

	(void)obj, (void)view;
	pthread_mutex_lock(&ep->tlock); /* epochs change under it (callbacks, reuse()) */
	p = rpc_peer_of(ep, node);
	if (p != NULL && !(p->epoch & 1))
		__atomic_store_n(&p->epoch, p->epoch + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ep->tlock);
}

/* on the progress thread: a member paired -- if it had left, this is its new incarnation */
static void rpc_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpc_ep_t *ep = arg;
	struct rpc_peer *p;

	(void)obj, (void)view;
	pthread_mutex_lock(&ep->tlock);
	p = rpc_peer_of(ep, node);
	if (p != NULL && (p->epoch & 1))
		__atomic_store_n(&p->epoch, p->epoch + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ep->tlock);
}

static const struct loco_object_ops rpc_ops = {
    .peer_join = rpc_peer_join,
    .peer_leave = rpc_peer_leave,
};

/*
 * the poller: post batches that are due -- trad ones older than agg_ns,
 * overflow ones as soon as there is room. Never waits (trylock, timeout 0).
 * With no batch waiting anywhere it parks: the first frame of a batch
 * kicks it (append() in rpc_call.c), so an endpoint that is not batching
 * does not wake the progress thread every agg_ns (2 cores, shm,
 * rpc-bench: call_return p99 42.6 us with the trad and overflow
 * endpoints' pollers waking both nodes every 100 us, 1.6 us without).
 */
static int rpc_poll(void *arg)
{
	loco_rpc_ep_t *ep = arg;
	int64_t now = obj_now_ns();
	int busy = 0, waiting = 0;

	for (unsigned i = 0, n = rpc_npeers(ep); i < n; i++) {
		struct rpc_peer *p = rpc_peer_at(ep, i);

		/* a hint only (relaxed): the batch itself is read under wlock */
		if (__atomic_load_n(&p->blen, __ATOMIC_RELAXED) == 0 || peer_dead(p))
			continue;
		waiting = 1;
		if (pthread_mutex_trylock(&p->wlock) != 0)
			continue;
		if (p->blen != 0 &&
		    (ep->cfg.agg == LOCO_RPC_AGG_OVERFLOW || now - p->bt0 >= ep->cfg.agg_ns) &&
		    rpc_flush_peer(ep, p) == 0)
			busy = 1;
		pthread_mutex_unlock(&p->wlock);
	}
	if (busy)
		return LOCO_POLLER_BUSY;
	return waiting ? LOCO_POLLER_IDLE : LOCO_POLLER_PARK;
}

struct start_arg {
	loco_rpc_ep_t *ep;
	struct rpc_lane *l;
};

/* a server thread: holds its lane for good and runs its callers' calls */
static void *rpc_server_start(void *arg)
{
	struct start_arg sa = *(struct start_arg *)arg;
	struct rpc_lane *l = sa.l;
	loco_rpc_ep_t *ep = sa.ep;
	loco_waiter_t w;

	free(arg);
	loco_waiter_init(&w, ep->m);
	while (!lane_try(l)) /* (only a helper's turn holds it meanwhile) */
		loco_waiter_pause(&w);
	l->self = pthread_self();
	__atomic_store_n(&l->running, 1,
	                 __ATOMIC_RELEASE); /* publishes self: pairs with rpc_help() */
	loco_waiter_reset(&w);
	while (!__atomic_load_n(&ep->stop, __ATOMIC_ACQUIRE)) { /* pairs with destroy's store */
		if (rpc_lane_progress(ep, l, 64) > 0)
			loco_waiter_reset(&w);
		else
			loco_waiter_pause(&w);
	}
	lane_drop(l);
	return NULL;
}

static int check_cfg(const loco_rpc_cfg_t *c, uint32_t me)
{
	int mine = 0;

	if ((c->nodes == NULL) != (c->nnodes == 0) || c->nnodes == 1 || c->nnodes > RPC_TAB / 2)
		return -EINVAL;
	if (c->nodes == NULL)
		mine = 1; /* every peer that holds the endpoint */
	for (uint32_t i = 0; i < c->nnodes; i++) {
		if (c->nodes[i] == 0)
			return -EINVAL;
		for (uint32_t j = 0; j < i; j++)
			if (c->nodes[j] == c->nodes[i])
				return -EINVAL;
		mine |= c->nodes[i] == me;
	}
	if (!mine || c->agg < LOCO_RPC_AGG_NONE || c->agg > LOCO_RPC_AGG_OVERFLOW ||
	    c->threads > LOCO_RPC_THREADS_MAX || c->max_depth > LOCO_RPC_DEPTH_MAX || c->agg_ns < 0)
		return -EINVAL;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int loco_rpc_create(loco_channel_t *ch, const char *name, const loco_rpc_cfg_t *cfg,
                    loco_rpc_ep_t **out)
{
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t c, d;
	uint64_t shape[8];
	int ret;

	if (ch == NULL || name == NULL || cfg == NULL || out == NULL ||
	    strlen(name) > LOCO_NAME_MAX - 12) /* room for ".o<node>.ring" */
		return -EINVAL;
	c = *cfg;
	loco_rpc_cfg_default(&d, c.nodes, c.nnodes);
	c.ring_bytes = c.ring_bytes ? c.ring_bytes : d.ring_bytes;
	c.inline_max = c.inline_max ? c.inline_max : d.inline_max;
	c.ret_max = c.ret_max ? c.ret_max : d.ret_max;
	c.ret_slots = c.ret_slots ? c.ret_slots : d.ret_slots;
	c.pull_bytes = c.pull_bytes ? c.pull_bytes : d.pull_bytes;
	c.agg_bytes = c.agg_bytes ? c.agg_bytes : d.agg_bytes;
	c.agg_ns = c.agg_ns ? c.agg_ns : d.agg_ns;
	c.max_depth = c.max_depth ? c.max_depth : d.max_depth;
	ret = check_cfg(&c, loco_manager_node_id(loco_channel_manager(ch)));
	if (ret)
		return ret;
	if (c.ret_max > (1u << 20) || c.inline_max > (1u << 20) || c.ret_slots > 65536 ||
	    c.agg_bytes > (1u << 20) || c.pull_bytes > (1u << 30))
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*ep), (void **)&ep);
	if (ret)
		return ret;
	ep->ch = ch;
	ep->m = loco_channel_manager(ch);
	ep->me = loco_manager_node_id(ep->m);
	snprintf(ep->name, sizeof(ep->name), "%s", name);
	pthread_mutex_init(&ep->slock, NULL);
	pthread_mutex_init(&ep->qlock, NULL);
	pthread_mutex_init(&ep->mlock, NULL);
	pthread_mutex_init(&ep->hlock, NULL);
	pthread_mutex_init(&ep->tlock, NULL);
	ep->nlanes = c.threads ? c.threads : 1;
	ret = -ENOMEM;
	if (c.nnodes) {
		ep->nodes = malloc(c.nnodes * sizeof(uint32_t));
		if (ep->nodes == NULL)
			goto err;
		memcpy(ep->nodes, c.nodes, c.nnodes * sizeof(uint32_t));
		qsort(ep->nodes, c.nnodes, sizeof(uint32_t), cmp_u32);
		c.nodes = ep->nodes;
	}
	ep->cfg = c;
	ep->rec_max = rf_r8(RF_HDR + c.inline_max);
	if (c.agg_bytes > ep->rec_max)
		ep->rec_max = rf_r8(c.agg_bytes);
	ep->slot_bytes = (SLOT_HDR + c.ret_max + 63) & ~(size_t)63;
	ep->lim.slots = c.ret_slots;
	ep->lim.pull_max = c.pull_bytes;
	ep->lim.send_len = c.pull_bytes;
	if (ep->rec_max + LOCO_RPIPE_OVERHEAD > c.ring_bytes) {
		ret = -EINVAL; /* a message must fit the ring */
		goto err;
	}
	ep->slots = calloc(c.ret_slots, sizeof(*ep->slots));
	ep->freel = calloc(c.ret_slots, sizeof(*ep->freel));
	if (ep->slots == NULL || ep->freel == NULL)
		goto err;
	for (uint32_t i = 0; i < c.ret_slots; i++)
		ep->freel[i] = c.ret_slots - 1 - i;
	ep->nfree = c.ret_slots;
	for (unsigned i = 0; i < ep->nlanes; i++) {
		struct rpc_lane *l = &ep->lanes[i];

		l->scratch = malloc(c.max_depth * ep->rec_max);
		l->retbuf = malloc(c.max_depth * c.ret_max);
		l->pull_base = l->pull_top = i * c.pull_bytes;
		if (l->scratch == NULL || l->retbuf == NULL)
			goto err;
		ret = loco_ack_key_create_cfg(
		    ep->m, &(loco_ack_key_cfg_t){.flags = LOCO_ACK_IGNORE_LEFT}, &l->pack);
		if (ret)
			goto err;
		ret = -ENOMEM;
	}
	ret = loco_object_create(ch, name, &rpc_ops, ep, &ep->obj);
	if (ret)
		goto err;
	ret = loco_object_on_msg(ep->obj, rpc_on_msg, ep);
	if (ret)
		goto err;
	/* the members and the sizes every member must share, in two parameters */
	shape[0] = c.ring_bytes;
	shape[1] = c.inline_max;
	shape[2] = c.ret_max;
	shape[3] = c.ret_slots;
	shape[4] = c.pull_bytes;
	shape[5] = ep->rec_max;
	shape[6] = 2; /* the format's version: pipes made on first use */
	shape[7] = 0;
	ret = loco_object_agree(ep->obj, "members",
	                        c.nnodes ? XXH3_64bits(ep->nodes, c.nnodes * sizeof(uint32_t)) >> 1
	                                 : 0);
	if (ret == 0)
		ret = loco_object_agree(ep->obj, "shape", XXH3_64bits(shape, sizeof(shape)) >> 1);
	if (ret)
		goto err;
	ret = loco_region_create(ep->obj, "rets", (size_t)c.ret_slots * ep->slot_bytes,
	                         LOCO_ACCESS_WRITE, &ep->rets);
	if (ret == 0)
		ret =
		    loco_region_create(ep->obj, "send", c.pull_bytes, LOCO_ACCESS_READ, &ep->send);
	if (ret == 0)
		ret = loco_region_create(ep->obj, "pull", c.pull_bytes * ep->nlanes, 0, &ep->pull);
	if (ret)
		goto err;
	if (c.agg != LOCO_RPC_AGG_NONE) {
		ret = loco_poller_add(ep->m, rpc_poll, ep, c.agg_ns, &ep->poller);
		if (ret)
			goto err;
	}
	for (unsigned i = 0; i < c.threads; i++) {
		struct start_arg *sa = malloc(sizeof(*sa));

		ret = -ENOMEM;
		if (sa == NULL)
			goto err;
		sa->ep = ep;
		sa->l = &ep->lanes[i];
		ret = -pthread_create(&ep->lanes[i].th, NULL, rpc_server_start, sa);
		if (ret) {
			free(sa);
			goto err;
		}
		ep->lanes[i].started = 1;
	}
	*out = ep;
	return 0;
err:
	loco_rpc_destroy(ep);
	return ret;
}

/* in_free -- @p's in side (its lane's, or nobody's): the pipe, then its object */
static void in_free(struct rpc_peer *p)
{
	loco_rpipe_destroy(p->in);
	loco_object_destroy(p->iobj);
	p->in = NULL;
	p->iobj = NULL;
	p->rsrc = NULL;
}

void rpc_out_free(struct rpc_peer *p)
{
	loco_rpipe_destroy(p->out);
	loco_object_destroy(p->oobj);
	free(p->batch);
	p->out = NULL;
	__atomic_store_n(&p->oobj, NULL, __ATOMIC_RELAXED);
	p->batch = NULL;
	p->blen = 0;
	p->out_state = OUT_NONE;
}

void loco_rpc_destroy(loco_rpc_ep_t *ep)
{
	OBJ_DESTROY_CHECK(ep);
	__atomic_store_n(&ep->stop, 1, __ATOMIC_RELEASE); /* pairs with rpc_server_start() */
	for (unsigned i = 0; i < ep->nlanes; i++)
		if (ep->lanes[i].started)
			pthread_join(ep->lanes[i].th, NULL);
	if (ep->poller)
		loco_poller_remove(ep->poller);
	rpc_retry_fini(ep); /* (its callbacks may still call: the object lives) */
	rpc_mem_fini(ep);
	/* no message reaches it after this: the callbacks of a destroyed object are waited out */
	loco_object_destroy(ep->obj);
	for (unsigned i = 0; i < ep->nlanes; i++) {
		struct rpc_lane *l = &ep->lanes[i];

		loco_ack_key_destroy(l->pack);
		free(l->scratch);
		free(l->retbuf);
	}
	for (unsigned i = 0; i < ep->np; i++) {
		struct rpc_peer *p = ep->plist[i];

		loco_ack_key_destroy(p->rack); /* before the sources in p->rsrc go */
		rpc_out_free(p);
		in_free(p);
		pthread_mutex_destroy(&p->wlock);
		pthread_mutex_destroy(&p->glock);
		pthread_mutex_destroy(&p->rlock);
		free(p);
	}
	free(ep->nodes);
	free(ep->slots);
	free(ep->freel);
	pthread_mutex_destroy(&ep->slock);
	pthread_mutex_destroy(&ep->qlock);
	pthread_mutex_destroy(&ep->mlock);
	pthread_mutex_destroy(&ep->hlock);
	pthread_mutex_destroy(&ep->tlock);
	loco_handle_free(ep);
}

/* ---- set-up on first use: OPEN and GRANT -------------------------------------------- */

/* send_grant -- tell @p's caller where its ring is (in pipe made, session @sess) */
static void send_grant(loco_rpc_ep_t *ep, struct rpc_peer *p, uint64_t sess)
{
	struct rpc_grant_msg g = {.kind = MSG_GRANT, .sess = sess};

	rpipe_refs(p->in, &g.ring, &g.ctl);
	(void)loco_object_send(ep->obj, p->node, &g, sizeof(g)); /* lost with its node only */
}

/*
 * in_make -- (glock) @p's in side for its first OPEN: an object of its
 * own ("<name>.i<node>") with the reader's end and the reply sources,
 * published whole (p->in last, with release) for the lane that reads it
 */
static int in_make(loco_rpc_ep_t *ep, struct rpc_peer *p, const struct rpc_open_msg *o)
{
	struct rpc_peer n = {0};
	char on[LOCO_NAME_MAX + 16]; /* create checked the name: it fits LOCO_NAME_MAX */
	int ret;

	snprintf(on, sizeof(on), "%s.i%u", ep->name, p->node);
	ret = loco_object_create(ep->ch, on, NULL, NULL, &n.iobj);
	if (ret)
		return ret;
	ret = rpipe_open_unlisted(n.iobj, "p", p->node, ep->me, ep->cfg.ring_bytes, &n.in);
	if (ret == 0)
		ret = loco_region_create(n.iobj, "rsrc", (size_t)RSRC_K * ep->slot_bytes,
		                         LOCO_ACCESS_UNLISTED, &n.rsrc);
	if (ret == 0)
		ret = rpipe_attach(n.in, o->ring.len != 0 ? &o->ring : NULL, &o->ctl, o->sess);
	if (ret) {
		in_free(&n);
		return ret;
	}
	p->iobj = n.iobj;
	p->rsrc = n.rsrc;
	p->in_sess = o->sess;
	p->in_epoch = peer_epoch(p);
	p->rn = 0;
	p->have_rrets = p->have_rsend = 0;
	__atomic_store_n(&p->in, n.in, __ATOMIC_RELEASE); /* pairs with rpc_in_serve() */
	return 0;
}

/* rref_ok -- a reference from @node's message: its own, of @len bytes */
static int rref_ok(const loco_rref_t *r, uint32_t node, uint64_t len)
{
	return r->node == node && r->len == len;
}

void rpc_on_msg(loco_object_t *obj, uint32_t node, const void *msg, size_t len, void *arg)
{
	loco_rpc_ep_t *ep = arg;
	struct rpc_peer *p;
	uint32_t kind;

	(void)obj;
	if (len < sizeof(kind) || !rpc_is_member(ep, node)) {
		ST_LOG(ep, bad, LOCO_LOG_WARN,
		       "object message refused: too short, or not from a member");
		return;
	}
	memcpy(&kind, msg, sizeof(kind));
	if (kind == MSG_OPEN && (len == sizeof(struct rpc_open_msg) || len == RPC_OPEN_OLD_LEN)) {
		struct rpc_open_msg o = {0};

		memcpy(&o, msg, len); /* an older caller's has no ring: its pipe is not mended */
		if (o.sess == 0 || !rref_ok(&o.ctl, node, CTL_LEN) ||
		    (len == sizeof(o) && !rref_ok(&o.ring, node, ep->cfg.ring_bytes)) ||
		    (p = rpc_peer_get(ep, node)) == NULL) {
			ST_LOG(ep, bad, LOCO_LOG_WARN,
			       "open message refused: bad session or reference");
			return;
		}
		pthread_mutex_lock(&p->glock);
		if (p->in == NULL) {
			/* nobody reads it yet: made here, published whole */
			if (in_make(ep, p, &o) == 0)
				send_grant(ep, p, o.sess);
		} else if (o.sess == p->in_sess && !p->reopen) {
			send_grant(ep, p, o.sess); /* an OPEN sent again: the GRANT crossed it */
		} else {
			p->o_sess = o.sess; /* the lane that reads it starts it again */
			p->o_ctl = o.ctl;
			p->o_ring = o.ring;
			__atomic_store_n(&p->reopen, 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&p->glock);
		return;
	}
	if (kind == MSG_GRANT && len == sizeof(struct rpc_grant_msg)) {
		struct rpc_grant_msg g;

		memcpy(&g, msg, sizeof(g));
		p = rpc_peer_find(ep, node);
		if (p == NULL || g.sess == 0 || !rref_ok(&g.ring, node, ep->cfg.ring_bytes) ||
		    !rref_ok(&g.ctl, node, CTL_LEN)) {
			ST_LOG(ep, bad, LOCO_LOG_WARN,
			       "grant message refused: bad session or reference");
			return;
		}
		pthread_mutex_lock(&p->glock);
		p->granted = 1;
		p->g_sess = g.sess;
		p->g_ring = g.ring;
		p->g_ctl = g.ctl;
		pthread_mutex_unlock(&p->glock);
		loco_waiter_wake(ep->m);
		return;
	}
	ST_LOG(ep, bad, LOCO_LOG_WARN, "object message of unknown kind or length refused");
}

int rpc_in_serve(loco_rpc_ep_t *ep, struct rpc_peer *p)
{
	uint32_t e = peer_epoch(p);
	int reopen;

	/* pairs with in_make()'s release: the in side is whole */
	if (__atomic_load_n(&p->in, __ATOMIC_ACQUIRE) == NULL)
		return -ENOENT;
	if (p->in_epoch == e && !__atomic_load_n(&p->reopen, __ATOMIC_ACQUIRE))
		return 0; /* nothing changed: the hot path takes no lock */
	pthread_mutex_lock(&p->glock);
	reopen = p->reopen;
	if ((e & 1) && !reopen) {
		/* it left: free what it had here (a new incarnation makes them again) */
		struct rpc_peer old = {.in = p->in, .iobj = p->iobj};

		pthread_mutex_lock(&p->rlock);
		(void)loco_ack_wait(p->rack, 0);
		pthread_mutex_unlock(&p->rlock);
		__atomic_store_n(&p->in, NULL, __ATOMIC_RELEASE);
		p->iobj = NULL;
		p->rsrc = NULL;
		pthread_mutex_unlock(&p->glock);
		in_free(&old);
		return -ENOENT;
	}
	/* a caller that came back, or asked again: its pipe and its regions start again */
	rpipe_lose(p->in);
	(void)loco_rpipe_reset(p->in);
	pthread_mutex_lock(&p->rlock);
	p->have_rrets = 0;
	p->have_rsend = 0;
	(void)loco_ack_wait(p->rack, 0); /* the old one's failures */
	pthread_mutex_unlock(&p->rlock);
	p->in_epoch = e;
	if (reopen) {
		__atomic_store_n(&p->reopen, 0, __ATOMIC_RELAXED);
		if (rpipe_attach(p->in, p->o_ring.len != 0 ? &p->o_ring : NULL, &p->o_ctl,
		                 p->o_sess) == 0) {
			p->in_sess = p->o_sess;
			send_grant(ep, p, p->o_sess);
		}
	}
	pthread_mutex_unlock(&p->glock);
	return 0;
}

int loco_rpc_sync(loco_rpc_ep_t *ep, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	loco_waiter_t w;
	int ret;

	OBJ_CHECK(ep);
	if (ep->nodes == NULL) {
		ret = loco_object_sync(ep->obj, timeout_ns);
		return ret < 0 ? ret : 0;
	}
	for (unsigned i = 0; i < ep->cfg.nnodes; i++) {
		uint32_t node = ep->nodes[i];

		if (node == ep->me)
			continue;
		/* the endpoint's regions there: it made the endpoint and paired */
		loco_waiter_init(&w, ep->m);
		for (;;) {
			struct rpc_peer *p = rpc_peer_find(ep, node);
			loco_rref_t r;

			ret = loco_region_remote(ep->rets, node, &r);
			if (ret == 0)
				ret = loco_region_remote(ep->send, node, &r);
			if (ret != -ENOENT)
				break;
			if (p != NULL && peer_dead(p))
				return -ECONNRESET;
			if (loco_channel_partitioned(ep->ch))
				return -LOCO_EPARTITION;
			if (deadline >= 0 && obj_now_ns() >= deadline)
				return -ETIMEDOUT;
			loco_waiter_pause(&w);
		}
		if (ret)
			return ret;
	}
	return 0;
}

int loco_rpc_register(loco_rpc_ep_t *ep, const char *name, loco_rpc_fn fn, void *arg, uint32_t *id)
{
	uint32_t hid = loco_rpc_id(name);
	int ret = 0;

	OBJ_CHECK(ep);
	if (name == NULL || fn == NULL || name[0] == '\0')
		return -EINVAL;
	pthread_mutex_lock(&ep->hlock);
	for (unsigned i = 0; i < ep->nh; i++)
		if (ep->h[i].id == hid)
			ret = -EEXIST;
	if (ret == 0 && ep->nh == LOCO_RPC_HANDLERS_MAX)
		ret = -ENOSPC;
	if (ret == 0) {
		ep->h[ep->nh] = (struct rpc_handler){.id = hid, .fn = fn, .arg = arg};
		/* publishes the entry: pairs with the acquire load in lookup() */
		__atomic_store_n(&ep->nh, ep->nh + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ep->hlock);
	if (ret == 0 && id != NULL)
		*id = hid;
	return ret;
}

loco_region_t *loco_rpc_send_region(loco_rpc_ep_t *ep)
{
	OBJ_CHECK_OR(ep, NULL);
	return ep->send;
}

void loco_rpc_stats(const loco_rpc_ep_t *ep, loco_rpc_stats_t *st)
{
	loco_rpc_ep_t *e = (loco_rpc_ep_t *)ep; /* the record list is read lock-free */
	size_t ring, out_b, in_b;
	const uint64_t *s;
	uint64_t *d;
	unsigned n;

	if (loco_handle_check(ep) || st == NULL)
		return;
	s = (const uint64_t *)&ep->st;
	d = (uint64_t *)st;
	for (size_t i = 0; i < offsetof(loco_rpc_stats_t, pipes_out) / sizeof(uint64_t); i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
	/* what is held now: the fixed part, then each record and its pipes */
	ring = ep->cfg.ring_bytes + CTL_LEN;
	out_b = ring + (ep->cfg.agg != LOCO_RPC_AGG_NONE ? ep->rec_max : 0);
	in_b = ring + (size_t)RSRC_K * ep->slot_bytes;
	n = rpc_npeers(e);
	st->pipes_out = st->pipes_in = 0;
	st->peers = n;
	st->reused = __atomic_load_n(&ep->st_reused, __ATOMIC_RELAXED);
	st->mem_bytes = sizeof(*ep) + (size_t)ep->cfg.ret_slots * (ep->slot_bytes + 16) +
	                ep->cfg.pull_bytes * (1 + ep->nlanes) +
	                ep->nlanes * ep->cfg.max_depth * (ep->rec_max + ep->cfg.ret_max) +
	                (size_t)n * sizeof(struct rpc_peer);
	for (unsigned i = 0; i < n; i++) {
		struct rpc_peer *p = rpc_peer_at(e, i);

		if (__atomic_load_n(&p->oobj, __ATOMIC_RELAXED) != NULL) {
			st->pipes_out++;
			st->mem_bytes += out_b;
		}
		if (__atomic_load_n(&p->in, __ATOMIC_ACQUIRE) != NULL) {
			st->pipes_in++;
			st->mem_bytes += in_b;
		}
	}
}
