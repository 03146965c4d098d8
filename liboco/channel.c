/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * channel.c -- channels, their child objects and registered regions, and
 * the remote operations objects are built from.
 *
 * Pairing: loco_channel_join() sends CHAN(name, regions, REPLY) to every
 * member; a member that joined a channel of the same full name records
 * the sender as a peer (its objects see peer_join) and answers with its
 * own CHAN. A member that comes up later gets CHAN(REPLY) for every
 * joined channel, so joins in any order pair. A region created after the
 * join is announced again to the channel's peers. A member that leaves or
 * fails, or a CHAN_LEAVE, makes the objects see peer_leave.
 *
 * Remote regions are matched by full name "object/region".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "manager.h"

struct lc_peer {
	uint32_t node;
	uint32_t fence_gen; /* the channel's fence this peer's operations honour */
	uint32_t nregions;
	struct lc_region_info *regions;
	struct lc_peer *next;
};

struct loco_channel {
	loco_manager_t *m;
	loco_channel_t *parent;
	char name[LOCO_NAME_MAX + 1]; /* full name */
	uint32_t nodes;
	int joined;
	int nchildren;
	uint32_t fence_gen;     /* bumped by loco_channel_fence() */
	uint32_t fence_pending; /* atomic: peers whose next operation must carry the fence */
	struct loco_object *objects;
	struct lc_peer *peers;
	loco_channel_t *next;
};

struct loco_object {
	loco_channel_t *ch;
	char name[LOCO_NAME_MAX + 1];
	struct loco_object_ops ops;
	void *arg;
	struct loco_region *regions;
	struct loco_object *next;
};

struct loco_region {
	loco_object_t *obj;
	char full[LOCO_NAME_MAX + 1]; /* "object/region" */
	void *ptr;
	size_t len;
	unsigned access;
	struct fab_mr *mr;
	struct loco_region *next;
};

static int name_ok(const char *name)
{
	size_t n;

	if (name == NULL)
		return 0;
	n = strlen(name);
	return n > 0 && n <= LOCO_NAME_MAX && strchr(name, '/') == NULL;
}

static loco_channel_t *chan_find(loco_manager_t *m, const char *full)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		if (strcmp(ch->name, full) == 0)
			return ch;
	return NULL;
}

static struct lc_peer *peer_find(loco_channel_t *ch, uint32_t node)
{
	for (struct lc_peer *p = ch->peers; p != NULL; p = p->next)
		if (p->node == node)
			return p;
	return NULL;
}

/* chan_msg -- CHAN for @ch: its full name and every region of its objects. */
static int chan_msg(loco_channel_t *ch, uint32_t flags, struct lc_msg *msg)
{
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_CHAN;
	snprintf(msg->u.chan.name, sizeof(msg->u.chan.name), "%s", ch->name);
	msg->u.chan.flags = flags;
	msg->u.chan.nodes = ch->nodes;
	for (loco_object_t *o = ch->objects; o != NULL; o = o->next) {
		for (struct loco_region *r = o->regions; r != NULL; r = r->next) {
			struct lc_region_info *ri;

			if (msg->u.chan.n == LC_MAX_REGIONS)
				return -ENOSPC;
			ri = &msg->u.chan.r[msg->u.chan.n++];
			snprintf(ri->name, sizeof(ri->name), "%s", r->full);
			ri->addr = (uintptr_t)r->ptr;
			ri->len = r->len;
			ri->rkey = r->mr->rkey;
			ri->access = r->access;
		}
	}
	return 0;
}

/* chan_announce -- send CHAN to @to, or to every up member when @to is NULL. */
static void chan_announce(loco_manager_t *m, loco_channel_t *ch, struct lc_member *to,
                          uint32_t flags, int peers_only)
{
	struct lc_msg *msg = malloc(sizeof(*msg));

	if (msg == NULL || chan_msg(ch, flags, msg) != 0) {
		lc_log_err("manager: cannot announce channel %s", ch->name);
		free(msg);
		return;
	}
	for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next) {
		if (!mb->up || (to != NULL && mb != to))
			continue;
		if (peers_only && peer_find(ch, mb->info.node) == NULL)
			continue;
		lc_conn_send(m, mb->conn, msg);
	}
	free(msg);
}

static void peer_gone(loco_channel_t *ch, uint32_t node)
{
	for (struct lc_peer **pp = &ch->peers; *pp != NULL; pp = &(*pp)->next) {
		struct lc_peer *p = *pp;

		if (p->node != node)
			continue;
		*pp = p->next;
		if (p->fence_gen != ch->fence_gen) /* it owed a fence it will never take */
			__atomic_sub_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
		free(p->regions);
		free(p);
		lc_log_debug("manager: channel %s: node %u left", ch->name, node);
		for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
			if (o->ops.peer_leave != NULL)
				o->ops.peer_leave(o, node, o->arg);
		return;
	}
}

void lc_chan_on_msg(loco_manager_t *m, struct lc_member *from, const struct lc_msg *msg)
{
	loco_channel_t *ch;
	struct lc_peer *p;
	int is_new = 0;

	if (msg->type == LC_MSG_CHAN_LEAVE) {
		ch = chan_find(m, msg->u.chan_leave.name);
		if (ch != NULL)
			peer_gone(ch, from->info.node);
		return;
	}
	ch = chan_find(m, msg->u.chan.name);
	if (ch == NULL || !ch->joined)
		return; /* when we join, we ask everyone again */
	p = peer_find(ch, from->info.node);
	if (p == NULL) {
		p = calloc(1, sizeof(*p));
		if (p == NULL)
			return;
		p->node = from->info.node;
		p->fence_gen = ch->fence_gen; /* nothing earlier to order after */
		p->next = ch->peers;
		ch->peers = p;
		is_new = 1;
	}
	free(p->regions);
	p->regions = NULL;
	p->nregions = 0;
	if (msg->u.chan.n > 0) {
		p->regions = malloc(msg->u.chan.n * sizeof(*p->regions));
		if (p->regions != NULL) {
			memcpy(p->regions, msg->u.chan.r, msg->u.chan.n * sizeof(*p->regions));
			p->nregions = msg->u.chan.n;
		}
	}
	if (msg->u.chan.flags & LC_CHAN_REPLY)
		chan_announce(m, ch, from, 0, 0);
	if (is_new) {
		lc_log_debug("manager: channel %s: paired with node %u", ch->name, p->node);
		for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
			if (o->ops.peer_join != NULL)
				o->ops.peer_join(o, p->node, o->arg);
	}
}

void lc_chan_on_member_up(loco_manager_t *m, struct lc_member *mb)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		if (ch->joined)
			chan_announce(m, ch, mb, LC_CHAN_REPLY, 0);
}

void lc_chan_on_member_gone(loco_manager_t *m, uint32_t node)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		peer_gone(ch, node);
}

/* ------------------------------------------------------------------ */
/* channels                                                           */

int loco_channel_create(loco_manager_t *m, loco_channel_t *parent, const char *name, uint32_t nodes,
                        loco_channel_t **out)
{
	char full[LOCO_NAME_MAX + 2];
	loco_channel_t *ch;
	int n;

	if (m == NULL || out == NULL || nodes == 0 || !name_ok(name) ||
	    (parent != NULL && parent->m != m))
		return -EINVAL;
	n = snprintf(full, sizeof(full), "%s%s%s", parent ? parent->name : "", parent ? "/" : "",
	             name);
	if (n < 0 || n > LOCO_NAME_MAX)
		return -EINVAL;
	ch = calloc(1, sizeof(*ch));
	if (ch == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	if (chan_find(m, full) != NULL) {
		pthread_mutex_unlock(&m->lock);
		free(ch);
		return -EEXIST;
	}
	ch->m = m;
	ch->parent = parent;
	ch->nodes = nodes;
	memcpy(ch->name, full, (size_t)n + 1);
	if (parent != NULL)
		parent->nchildren++;
	ch->next = m->channels;
	m->channels = ch;
	pthread_mutex_unlock(&m->lock);
	*out = ch;
	return 0;
}

static uint32_t chan_npeers(loco_channel_t *ch)
{
	uint32_t n = 0;

	for (struct lc_peer *p = ch->peers; p != NULL; p = p->next)
		n++;
	return n;
}

int loco_channel_join(loco_channel_t *ch, int64_t timeout_ns)
{
	loco_manager_t *m;
	uint64_t start = lc_now_ns();
	unsigned delay_us = 50;

	if (ch == NULL)
		return -EINVAL;
	m = ch->m;
	pthread_mutex_lock(&m->lock);
	if (!ch->joined) {
		ch->joined = 1;
		chan_announce(m, ch, NULL, LC_CHAN_REPLY, 0);
	}
	pthread_mutex_unlock(&m->lock);
	for (;;) {
		uint32_t n;

		pthread_mutex_lock(&m->lock);
		n = chan_npeers(ch);
		pthread_mutex_unlock(&m->lock);
		if (n + 1 >= ch->nodes)
			return 0;
		if (timeout_ns >= 0 && lc_now_ns() - start >= (uint64_t)timeout_ns) {
			lc_log_info("manager: channel %s: %u of %u node(s) after the timeout",
			            ch->name, n + 1, ch->nodes);
			return -ETIMEDOUT;
		}
		usleep(delay_us);
		delay_us = delay_us < 2000 ? delay_us * 2 : 2000;
	}
}

int loco_channel_destroy(loco_channel_t *ch)
{
	loco_manager_t *m;

	if (ch == NULL)
		return 0;
	m = ch->m;
	pthread_mutex_lock(&m->lock);
	if (ch->objects != NULL || ch->nchildren > 0) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	if (ch->joined) {
		struct lc_msg *msg = calloc(1, sizeof(*msg));

		if (msg != NULL) {
			msg->type = LC_MSG_CHAN_LEAVE;
			snprintf(msg->u.chan_leave.name, sizeof(msg->u.chan_leave.name), "%s",
			         ch->name);
			for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next)
				if (mb->up && peer_find(ch, mb->info.node) != NULL)
					lc_conn_send(m, mb->conn, msg);
			free(msg);
		}
	}
	while (ch->peers != NULL) {
		struct lc_peer *p = ch->peers;

		ch->peers = p->next;
		free(p->regions);
		free(p);
	}
	for (loco_channel_t **pp = &m->channels; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
	if (ch->parent != NULL)
		ch->parent->nchildren--;
	pthread_mutex_unlock(&m->lock);
	free(ch);
	return 0;
}

const char *loco_channel_name(const loco_channel_t *ch)
{
	return ch ? ch->name : NULL;
}

loco_manager_t *loco_channel_manager(const loco_channel_t *ch)
{
	return ch ? ch->m : NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int loco_channel_peers(loco_channel_t *ch, uint32_t *ids, size_t max)
{
	uint32_t all[LC_MAX_NODES];
	size_t n = 0;

	if (ch == NULL || (ids == NULL && max > 0))
		return -EINVAL;
	pthread_mutex_lock(&ch->m->lock);
	for (struct lc_peer *p = ch->peers; p != NULL && n < LC_MAX_NODES; p = p->next)
		all[n++] = p->node;
	pthread_mutex_unlock(&ch->m->lock);
	qsort(all, n, sizeof(all[0]), cmp_u32);
	if (n > 0 && max > 0) /* ids may be NULL with max 0: counting only */
		memcpy(ids, all, (n < max ? n : max) * sizeof(ids[0]));
	return (int)n;
}

/* ------------------------------------------------------------------ */
/* objects and regions                                                */

int loco_object_create(loco_channel_t *ch, const char *name, const struct loco_object_ops *ops,
                       void *arg, loco_object_t **out)
{
	loco_object_t *o;

	if (ch == NULL || out == NULL || !name_ok(name))
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (o == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&ch->m->lock);
	for (loco_object_t *x = ch->objects; x != NULL; x = x->next) {
		if (strcmp(x->name, name) == 0) {
			pthread_mutex_unlock(&ch->m->lock);
			free(o);
			return -EEXIST;
		}
	}
	o->ch = ch;
	snprintf(o->name, sizeof(o->name), "%s", name);
	if (ops != NULL)
		o->ops = *ops;
	o->arg = arg;
	o->next = ch->objects;
	ch->objects = o;
	pthread_mutex_unlock(&ch->m->lock);
	*out = o;
	return 0;
}

static void region_free(loco_manager_t *m, struct loco_region *r)
{
	int ret = fab_mr_dereg(r->mr);

	if (ret)
		lc_log_warn("manager: deregistering region %s: %s", r->full, strerror(-ret));
	lc_mem_free(m, r->ptr, r->len);
	free(r);
}

void loco_object_destroy(loco_object_t *obj)
{
	loco_channel_t *ch;

	if (obj == NULL)
		return;
	ch = obj->ch;
	pthread_mutex_lock(&ch->m->lock);
	for (loco_object_t **pp = &ch->objects; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == obj) {
			*pp = obj->next;
			break;
		}
	}
	/* peers forget its regions before they are deregistered */
	if (ch->joined && obj->regions != NULL)
		chan_announce(ch->m, ch, NULL, 0, 1);
	pthread_mutex_unlock(&ch->m->lock);
	while (obj->regions != NULL) {
		struct loco_region *r = obj->regions;

		obj->regions = r->next;
		region_free(ch->m, r);
	}
	free(obj);
}

loco_channel_t *loco_object_channel(const loco_object_t *obj)
{
	return obj ? obj->ch : NULL;
}

/* region_room -- -EEXIST for a taken name, -ENOSPC when the channel is full. m->lock held. */
static int region_room(const loco_object_t *obj, const char *full)
{
	unsigned n = 0;

	for (const loco_object_t *o = obj->ch->objects; o != NULL; o = o->next) {
		for (const struct loco_region *x = o->regions; x != NULL; x = x->next) {
			if (strcmp(x->full, full) == 0)
				return -EEXIST;
			n++;
		}
	}
	return n < LC_MAX_REGIONS ? 0 : -ENOSPC; /* all fit in one CHAN message */
}

int loco_region_create(loco_object_t *obj, const char *name, size_t len, unsigned access,
                       loco_region_t **out)
{
	unsigned fa = FAB_ACCESS_LOCAL_WRITE;
	loco_manager_t *m;
	struct loco_region *r;
	int ret, n;

	if (obj == NULL || out == NULL || !name_ok(name) || len == 0 ||
	    (access & ~(unsigned)(LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC)))
		return -EINVAL;
	m = obj->ch->m;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	n = snprintf(r->full, sizeof(r->full), "%s/%s", obj->name, name);
	if (n < 0 || n > LOCO_NAME_MAX) {
		free(r);
		return -EINVAL;
	}
	if (access & LOCO_ACCESS_READ)
		fa |= FAB_ACCESS_REMOTE_READ;
	if (access & LOCO_ACCESS_WRITE)
		fa |= FAB_ACCESS_REMOTE_WRITE;
	if (access & LOCO_ACCESS_ATOMIC)
		fa |= FAB_ACCESS_REMOTE_ATOMIC;
	/* check the name and the channel's room before allocating anything */
	pthread_mutex_lock(&m->lock);
	ret = region_room(obj, r->full);
	pthread_mutex_unlock(&m->lock);
	if (ret)
		goto err_free;
	ret = lc_mem_alloc(m, len, &r->ptr);
	if (ret)
		goto err_free;
	memset(r->ptr, 0, len);
	ret = fab_mr_reg(m->fab, r->ptr, len, fa, &r->mr);
	if (ret) {
		lc_log_err("manager: cannot register %zu bytes for %s: %s", len, r->full,
		           strerror(-ret));
		goto err_mem;
	}
	r->obj = obj;
	r->len = len;
	r->access = access;

	pthread_mutex_lock(&m->lock);
	ret = region_room(obj, r->full); /* again: another thread may have raced us */
	if (ret) {
		pthread_mutex_unlock(&m->lock);
		goto err_dereg;
	}
	r->next = obj->regions;
	obj->regions = r;
	if (obj->ch->joined) /* late region: tell the peers */
		chan_announce(m, obj->ch, NULL, 0, 1);
	pthread_mutex_unlock(&m->lock);
	*out = r;
	return 0;

err_dereg:
	fab_mr_dereg(r->mr);
err_mem:
	lc_mem_free(m, r->ptr, len);
err_free:
	free(r);
	return ret;
}

void *loco_region_ptr(const loco_region_t *r)
{
	return r ? r->ptr : NULL;
}

size_t loco_region_len(const loco_region_t *r)
{
	return r ? r->len : 0;
}

int loco_region_remote(const loco_region_t *r, uint32_t node, loco_rref_t *out)
{
	loco_manager_t *m;
	struct lc_peer *p;
	int ret = -ENOENT;

	if (r == NULL || out == NULL)
		return -EINVAL;
	m = r->obj->ch->m;
	if (node == m->node_id) {
		if (m->self_link == NULL)
			return -ENOENT;
		/* our own copy, reached through our own NIC */
		*out = (loco_rref_t){
		    .node = node, .rkey = r->mr->rkey, .addr = (uintptr_t)r->ptr, .len = r->len};
		return 0;
	}
	pthread_mutex_lock(&m->lock);
	p = peer_find(r->obj->ch, node);
	for (uint32_t i = 0; p != NULL && i < p->nregions; i++) {
		if (strcmp(p->regions[i].name, r->full) == 0) {
			*out = (loco_rref_t){.node = node,
			                     .rkey = p->regions[i].rkey,
			                     .addr = p->regions[i].addr,
			                     .len = p->regions[i].len};
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* remote operations                                                  */

static int range_ok(size_t off, size_t len, uint64_t total)
{
	return off <= total && len <= total - off;
}

/* post -- attach to @ack, find the link to the node, post @wr. */
/*
 * fence_take -- whether this operation to @node is the first since a
 * loco_channel_fence(): then it carries the fabric fence. Only right after
 * a fence does this take the lock; otherwise it is one atomic load.
 */
static int fence_take(loco_channel_t *ch, uint32_t node, struct lc_peer **peer)
{
	struct lc_peer *p;
	int take = 0;

	*peer = NULL;
	if (__atomic_load_n(&ch->fence_pending, __ATOMIC_ACQUIRE) == 0)
		return 0;
	pthread_mutex_lock(&ch->m->lock);
	p = peer_find(ch, node);
	if (p != NULL && p->fence_gen != ch->fence_gen) {
		p->fence_gen = ch->fence_gen;
		__atomic_sub_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
		*peer = p;
		take = 1;
	}
	pthread_mutex_unlock(&ch->m->lock);
	return take;
}

/* fence_untake -- the fenced operation was not posted: the next one must carry it. */
static void fence_untake(loco_channel_t *ch, struct lc_peer *p)
{
	pthread_mutex_lock(&ch->m->lock);
	if (p == peer_find(ch, p->node) && p->fence_gen == ch->fence_gen) {
		p->fence_gen--;
		__atomic_add_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ch->m->lock);
}

int loco_channel_fence(loco_channel_t *ch)
{
	uint32_t n = 0;

	if (ch == NULL)
		return -EINVAL;
	pthread_mutex_lock(&ch->m->lock);
	ch->fence_gen++;
	for (struct lc_peer *p = ch->peers; p != NULL; p = p->next)
		n++;
	__atomic_store_n(&ch->fence_pending, n, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ch->m->lock);
	return 0;
}

static int post(loco_region_t *local, const loco_rref_t *remote, struct fab_wr *wr,
                loco_ack_key_t *ack)
{
	loco_channel_t *ch = local->obj->ch;
	loco_manager_t *m = ch->m;
	struct lc_peer *fenced = NULL;
	struct fab_link *link;
	int ret;

	if (fence_take(ch, remote->node, &fenced))
		wr->flags |= FAB_WR_FENCE;

	wr->lkey = local->mr->lkey;
	wr->rkey = remote->rkey;
	if (ack != NULL) {
		ret = lc_ack_attach(ack, &wr->wrid);
		if (ret) {
			if (fenced != NULL)
				fence_untake(ch, fenced);
			return ret;
		}
		wr->flags |= FAB_WR_SIGNALED;
	}
	pthread_rwlock_rdlock(&m->links_lock);
	link = lc_link_of(m, remote->node);
	ret = link != NULL ? fab_post(link, wr, 1) : -ENOTCONN;
	pthread_rwlock_unlock(&m->links_lock);
	if (ret && ack != NULL)
		lc_ack_detach(ack, wr->wrid);
	if (ret && fenced != NULL)
		fence_untake(ch, fenced);
	return ret;
}

static int rw(int opcode, loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
              size_t len, loco_ack_key_t *ack)
{
	struct fab_wr wr = {.opcode = (uint8_t)opcode};

	if (local == NULL || remote == NULL || len > UINT32_MAX ||
	    !range_ok(loff, len, local->len) || !range_ok(roff, len, remote->len))
		return -EINVAL;
	wr.local = (uint8_t *)local->ptr + loff;
	wr.len = (uint32_t)len;
	wr.remote_addr = remote->addr + roff;
	return post(local, remote, &wr, ack);
}

int loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
               size_t len, loco_ack_key_t *ack)
{
	return rw(FAB_OP_WRITE, local, loff, remote, roff, len, ack);
}

int loco_read(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff, size_t len,
              loco_ack_key_t *ack)
{
	return rw(FAB_OP_READ, local, loff, remote, roff, len, ack);
}

static int atomic_op(int opcode, loco_region_t *local, size_t loff, const loco_rref_t *remote,
                     size_t roff, uint64_t a, uint64_t b, loco_ack_key_t *ack)
{
	struct fab_wr wr = {.opcode = (uint8_t)opcode, .len = 8};

	if (local == NULL || remote == NULL || !range_ok(loff, 8, local->len) ||
	    !range_ok(roff, 8, remote->len) || (loff & 7) || ((remote->addr + roff) & 7))
		return -EINVAL;
	wr.local = (uint8_t *)local->ptr + loff;
	wr.remote_addr = remote->addr + roff;
	wr.compare = a;
	wr.swap = b;
	return post(local, remote, &wr, ack);
}

int loco_cas(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t compare, uint64_t swap, loco_ack_key_t *ack)
{
	return atomic_op(FAB_OP_CAS, local, loff, remote, roff, compare, swap, ack);
}

int loco_faa(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t add, loco_ack_key_t *ack)
{
	return atomic_op(FAB_OP_FAA, local, loff, remote, roff, 0, add, ack);
}
