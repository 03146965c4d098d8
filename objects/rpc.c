/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc.c -- the rpc endpoint's set-up, handler table, flush poller and
 * server threads (the design is in rpc_impl.h). Public API only.
 */
#include <errno.h>
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

struct rpc_peer *rpc_peer_of(loco_rpc_ep_t *ep, uint32_t node)
{
	for (unsigned i = 0; i < ep->npeers; i++)
		if (ep->peers[i].node == node)
			return &ep->peers[i];
	return NULL;
}

uint64_t rpc_reply_sum(const void *data, uint32_t len, uint64_t tag, int32_t status)
{
	uint64_t seed = tag * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(uint32_t)status << 32 | len);

	return XXH3_64bits_withSeed(data, len, seed);
}

/* on the progress thread: a member left or died -- its calls are dropped, calls to it fail */
static void rpc_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpc_ep_t *ep = arg;
	struct rpc_peer *p = rpc_peer_of(ep, node);

	(void)obj, (void)view;
	if (p != NULL && !(p->epoch & 1)) /* only callbacks write it: one thread */
		__atomic_store_n(&p->epoch, p->epoch + 1, __ATOMIC_RELEASE);
}

/* on the progress thread: a member paired -- if it had left, this is its new incarnation */
static void rpc_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpc_ep_t *ep = arg;
	struct rpc_peer *p = rpc_peer_of(ep, node);

	(void)obj, (void)view;
	if (p != NULL && (p->epoch & 1))
		__atomic_store_n(&p->epoch, p->epoch + 1, __ATOMIC_RELEASE);
}

static const struct loco_object_ops rpc_ops = {
    .peer_join = rpc_peer_join,
    .peer_leave = rpc_peer_leave,
};

/*
 * the poller: post batches that are due -- trad ones older than agg_ns,
 * overflow ones as soon as there is room. Never waits (trylock, timeout 0).
 */
static int rpc_poll(void *arg)
{
	loco_rpc_ep_t *ep = arg;
	int64_t now = obj_now_ns();
	int busy = 0;

	for (unsigned i = 0; i < ep->npeers; i++) {
		struct rpc_peer *p = &ep->peers[i];

		/* a hint only (relaxed): the batch itself is read under wlock */
		if (__atomic_load_n(&p->blen, __ATOMIC_RELAXED) == 0 || peer_dead(p))
			continue;
		if (pthread_mutex_trylock(&p->wlock) != 0)
			continue;
		if (p->blen != 0 &&
		    (ep->cfg.agg == LOCO_RPC_AGG_OVERFLOW || now - p->bt0 >= ep->cfg.agg_ns) &&
		    rpc_flush_peer(ep, p) == 0)
			busy = 1;
		pthread_mutex_unlock(&p->wlock);
	}
	return busy ? LOCO_POLLER_BUSY : LOCO_POLLER_IDLE;
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
	pthread_mutex_lock(&l->mu);
	l->self = pthread_self();
	__atomic_store_n(&l->running, 1,
	                 __ATOMIC_RELEASE); /* publishes self: pairs with rpc_help() */
	loco_waiter_init(&w, ep->m);
	while (!__atomic_load_n(&ep->stop, __ATOMIC_ACQUIRE)) { /* pairs with destroy's store */
		if (rpc_lane_progress(ep, l, 64) > 0)
			loco_waiter_reset(&w);
		else
			loco_waiter_pause(&w);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static int check_cfg(const loco_rpc_cfg_t *c, uint32_t me)
{
	int mine = 0;

	if (c->nodes == NULL || c->nnodes < 2 || c->nnodes > LOCO_RPC_NODES_MAX)
		return -EINVAL;
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

static int make_pipes(loco_rpc_ep_t *ep, const char *name)
{
	char pn[LOCO_NAME_MAX];
	int ret;

	for (unsigned i = 0; i < ep->npeers; i++) {
		struct rpc_peer *p = &ep->peers[i];

		if (snprintf(pn, sizeof(pn), "%s.%u-%u", name, ep->me, p->node) >= (int)sizeof(pn))
			return -EINVAL;
		ret = loco_rpipe_create(ep->ch, pn, ep->me, p->node, ep->cfg.ring_bytes, &p->out);
		if (ret)
			return ret;
		snprintf(pn, sizeof(pn), "%s.%u-%u", name, p->node, ep->me);
		ret = loco_rpipe_create(ep->ch, pn, p->node, ep->me, ep->cfg.ring_bytes, &p->in);
		if (ret)
			return ret;
	}
	return 0;
}

int loco_rpc_create(loco_channel_t *ch, const char *name, const loco_rpc_cfg_t *cfg,
                    loco_rpc_ep_t **out)
{
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t c, d;
	uint64_t shape[8];
	int ret;

	if (ch == NULL || name == NULL || cfg == NULL || out == NULL)
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
	ret = check_cfg(&c, loco_node_id(loco_channel_manager(ch)));
	if (ret)
		return ret;
	if (c.ret_max > (1u << 20) || c.inline_max > (1u << 20) || c.ret_slots > 65536 ||
	    c.agg_bytes > (1u << 20) || c.pull_bytes > (1u << 30))
		return -EINVAL;
	ep = calloc(1, sizeof(*ep));
	if (ep == NULL)
		return -ENOMEM;
	ep->ch = ch;
	ep->m = loco_channel_manager(ch);
	ep->me = loco_node_id(ep->m);
	memcpy(ep->nodes, c.nodes, c.nnodes * sizeof(uint32_t));
	c.nodes = ep->nodes;
	ep->cfg = c;
	ep->rec_max = rf_r8(RF_HDR + c.inline_max);
	if (c.agg_bytes > ep->rec_max)
		ep->rec_max = rf_r8(c.agg_bytes);
	ep->slot_bytes = (SLOT_HDR + c.ret_max + 63) & ~(size_t)63;
	ep->lim.slots = c.ret_slots;
	ep->lim.pull_max = c.pull_bytes;
	ep->lim.send_len = c.pull_bytes;
	pthread_mutex_init(&ep->slock, NULL);
	pthread_mutex_init(&ep->hlock, NULL);
	ep->nlanes = c.threads ? c.threads : 1;
	for (unsigned i = 0; i < ep->nlanes; i++) {
		pthread_mutexattr_t a;

		pthread_mutexattr_init(&a);
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&ep->lanes[i].mu, &a);
		pthread_mutexattr_destroy(&a);
	}
	for (unsigned i = 0; i < c.nnodes; i++) {
		struct rpc_peer *p;

		if (c.nodes[i] == ep->me)
			continue;
		p = &ep->peers[ep->npeers];
		p->node = c.nodes[i];
		p->idx = ep->npeers++;
		pthread_mutex_init(&p->wlock, NULL);
		pthread_mutex_init(&p->rlock, NULL);
	}
	ret = -ENOMEM;
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
	for (unsigned i = 0; i < ep->npeers; i++) {
		struct rpc_peer *p = &ep->peers[i];

		p->batch = malloc(ep->rec_max);
		if (p->batch == NULL)
			goto err;
		ret = loco_ack_key_create_flags(ep->m, LOCO_ACK_IGNORE_LEFT, &p->rack);
		if (ret)
			goto err;
		ret = -ENOMEM;
	}
	for (unsigned i = 0; i < ep->nlanes; i++) {
		struct rpc_lane *l = &ep->lanes[i];

		l->scratch = malloc(c.max_depth * ep->rec_max);
		l->retbuf = malloc(c.max_depth * c.ret_max);
		l->pull_base = l->pull_top = i * c.pull_bytes;
		if (l->scratch == NULL || l->retbuf == NULL)
			goto err;
		ret = loco_ack_key_create_flags(ep->m, LOCO_ACK_IGNORE_LEFT, &l->pack);
		if (ret)
			goto err;
		ret = -ENOMEM;
	}
	ret = loco_object_create(ch, name, &rpc_ops, ep, &ep->obj);
	if (ret)
		goto err;
	/* the members and the sizes every member must share, in two parameters */
	shape[0] = c.ring_bytes;
	shape[1] = c.inline_max;
	shape[2] = c.ret_max;
	shape[3] = c.ret_slots;
	shape[4] = c.pull_bytes;
	shape[5] = ep->rec_max;
	shape[6] = 1; /* the format's version */
	shape[7] = 0;
	{
		uint32_t sorted[LOCO_RPC_NODES_MAX];

		memcpy(sorted, c.nodes, c.nnodes * sizeof(uint32_t));
		for (unsigned i = 1; i < c.nnodes; i++)
			for (unsigned j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
				uint32_t t = sorted[j];

				sorted[j] = sorted[j - 1];
				sorted[j - 1] = t;
			}
		ret = loco_object_agree(ep->obj, "members",
		                        XXH3_64bits(sorted, c.nnodes * sizeof(uint32_t)) >> 1);
	}
	if (ret == 0)
		ret = loco_object_agree(ep->obj, "shape", XXH3_64bits(shape, sizeof(shape)) >> 1);
	if (ret)
		goto err;
	ret = loco_region_create(ep->obj, "rets", (size_t)c.ret_slots * ep->slot_bytes,
	                         LOCO_ACCESS_WRITE, &ep->rets);
	if (ret == 0)
		ret = loco_region_create(
		    ep->obj, "rsrc", (size_t)(c.nnodes * RSRC_K) * ep->slot_bytes, 0, &ep->rsrc);
	if (ret == 0)
		ret =
		    loco_region_create(ep->obj, "send", c.pull_bytes, LOCO_ACCESS_READ, &ep->send);
	if (ret == 0)
		ret = loco_region_create(ep->obj, "pull", c.pull_bytes * ep->nlanes, 0, &ep->pull);
	if (ret)
		goto err;
	ret = make_pipes(ep, name);
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

void loco_rpc_destroy(loco_rpc_ep_t *ep)
{
	if (ep == NULL)
		return;
	__atomic_store_n(&ep->stop, 1, __ATOMIC_RELEASE); /* pairs with rpc_server_start() */
	for (unsigned i = 0; i < ep->nlanes; i++)
		if (ep->lanes[i].started)
			pthread_join(ep->lanes[i].th, NULL);
	if (ep->poller)
		loco_poller_remove(ep->poller);
	for (unsigned i = 0; i < ep->nlanes; i++) {
		struct rpc_lane *l = &ep->lanes[i];

		loco_ack_key_destroy(l->pack);
		free(l->scratch);
		free(l->retbuf);
		pthread_mutex_destroy(&l->mu);
	}
	for (unsigned i = 0; i < ep->npeers; i++) {
		struct rpc_peer *p = &ep->peers[i];

		loco_ack_key_destroy(p->rack);
		loco_rpipe_destroy(p->out);
		loco_rpipe_destroy(p->in);
		free(p->batch);
		pthread_mutex_destroy(&p->wlock);
		pthread_mutex_destroy(&p->rlock);
	}
	loco_object_destroy(ep->obj);
	free(ep->slots);
	free(ep->freel);
	pthread_mutex_destroy(&ep->slock);
	pthread_mutex_destroy(&ep->hlock);
	free(ep);
}

int loco_rpc_sync(loco_rpc_ep_t *ep, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	loco_waiter_t w;
	int ret;

	if (ep == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < ep->npeers; i++) {
		struct rpc_peer *p = &ep->peers[i];

		if (peer_dead(p))
			return -ECONNRESET;
		ret = loco_rpipe_sync(p->out, obj_left_ns(deadline));
		if (ret == 0)
			ret = loco_rpipe_sync(p->in, obj_left_ns(deadline));
		if (ret)
			return ret;
		/* and the endpoint's own regions there: its reply slots, its send region */
		loco_waiter_init(&w, ep->m);
		for (;;) {
			loco_rref_t r;

			ret = loco_region_remote(ep->rets, p->node, &r);
			if (ret == 0)
				ret = loco_region_remote(ep->send, p->node, &r);
			if (ret != -ENOENT)
				break;
			if (peer_dead(p))
				return -ECONNRESET;
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

	if (ep == NULL || name == NULL || fn == NULL || name[0] == '\0')
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
	return ep ? ep->send : NULL;
}

void loco_rpc_stats(const loco_rpc_ep_t *ep, loco_rpc_stats_t *st)
{
	const uint64_t *s;
	uint64_t *d;

	if (ep == NULL || st == NULL)
		return;
	s = (const uint64_t *)&ep->st;
	d = (uint64_t *)st;
	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}
