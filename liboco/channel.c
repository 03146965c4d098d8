/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * channel.c -- channels, pairing, and the objects' callbacks.
 *
 * Pairing: loco_channel_join() sends CHAN(name, regions, REPLY) to every
 * member; a member that joined a channel of the same full name records
 * the sender as a peer (its objects see peer_join) and answers with its
 * own CHAN. A member that comes up later gets CHAN(REPLY) for every
 * joined channel, so joins in any order pair. A region created after the
 * join is announced again to the channel's peers. A member that leaves or
 * fails, or a CHAN_LEAVE, makes the objects see peer_leave. Remote
 * regions are matched by full name "object/region".
 *
 * Membership reaches this file as events (lc_chan_subscribe()), on the
 * progress thread with m->lock held. Object callbacks are not called
 * there: they are queued, and lc_chan_dispatch() calls them on the
 * progress thread with no lock held, so that they may call anything of
 * loco/channel.h. An object destroyed meanwhile is skipped (its destroy
 * waits for a callback of it that runs), and an object created after an
 * event was queued does not get it (it saw the peers when it was made).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "log.h"

/* A callback to run: peer @node joined (or left) channel @chan. */
struct lc_cb_event {
	uint64_t chan;
	uint64_t seq;
	uint64_t view; /* the membership view that made the change */
	uint32_t node;
	int join;
	struct lc_cb_event *next;
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

static loco_channel_t *chan_by_id(loco_manager_t *m, uint64_t id)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		if (ch->id == id)
			return ch;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* peers: slots read lock-free by the data path                      */

static uint32_t peer_hash(uint32_t node)
{
	return (node * 2654435761u) % LC_CHAN_PEERS;
}

struct lc_peer *lc_peer_get(loco_channel_t *ch, uint32_t node)
{
	uint32_t h = peer_hash(node);

	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		/* pairs with the release store in peer_slot() */
		struct lc_peer *p =
		    __atomic_load_n(&ch->peer[(h + i) % LC_CHAN_PEERS], __ATOMIC_ACQUIRE);

		if (p == NULL)
			return NULL;
		if (p->node == node)
			return p;
	}
	return NULL;
}

/* peer_slot -- @node's slot, made when it is new. m->lock held. NULL: out of memory or room. */
static struct lc_peer *peer_slot(loco_channel_t *ch, uint32_t node)
{
	struct lc_peer *p = lc_peer_get(ch, node);
	uint32_t h = peer_hash(node);

	if (p != NULL)
		return p;
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		struct lc_peer **slot = &ch->peer[(h + i) % LC_CHAN_PEERS];

		if (*slot != NULL)
			continue;
		p = calloc(1, sizeof(*p));
		if (p == NULL)
			return NULL;
		p->node = node;
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
		return p;
	}
	lc_log_err("manager: channel %s: no room for node %u", ch->name, node);
	return NULL;
}

int lc_rref_read(const struct lc_rref *r, uint32_t node, loco_rref_t *out)
{
	for (;;) {
		/* pairs with the release stores in lc_rref_write() */
		uint64_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE), s2;
		uint64_t rkey = __atomic_load_n(&r->rkey, __ATOMIC_RELAXED);
		uint64_t addr = __atomic_load_n(&r->addr, __ATOMIC_RELAXED);
		uint64_t len = __atomic_load_n(&r->len, __ATOMIC_RELAXED);

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
		if ((s1 & 1) || s1 != s2) {
			lc_cpu_relax();
			continue;
		}
		if (len == 0)
			return -ENOENT;
		*out =
		    (loco_rref_t){.node = node, .rkey = (uint32_t)rkey, .addr = addr, .len = len};
		return 0;
	}
}

void lc_rref_write(struct lc_rref *r, uint32_t rkey, uint64_t addr, uint64_t len)
{
	uint64_t s = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&r->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE); /* odd before the fields change */
	__atomic_store_n(&r->rkey, rkey, __ATOMIC_RELAXED);
	__atomic_store_n(&r->addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&r->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&r->seq, s + 2, __ATOMIC_RELEASE);
}

void lc_rref_resolve(struct lc_peer *p, const struct loco_region *r)
{
	for (uint32_t i = 0; i < p->nregions; i++) {
		if (strcmp(p->regions[i].name, r->full) == 0) {
			lc_rref_write(&p->rr[r->idx], p->regions[i].rkey, p->regions[i].addr,
			              p->regions[i].len);
			return;
		}
	}
	lc_rref_write(&p->rr[r->idx], 0, 0, 0);
}

/* fence_settle -- @p owes no fence any more (it left, or paired just now). */
static void fence_settle(loco_channel_t *ch, struct lc_peer *p)
{
	uint32_t g = __atomic_load_n(&ch->fence_gen, __ATOMIC_ACQUIRE);
	uint32_t old = __atomic_load_n(&p->fence_gen, __ATOMIC_ACQUIRE);

	/* the same CAS as a poster taking the fence: exactly one of them settles it */
	while (old != g)
		if (__atomic_compare_exchange_n(&p->fence_gen, &old, g, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE)) {
			if (__atomic_load_n(&p->present, __ATOMIC_RELAXED))
				__atomic_sub_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
			break;
		}
}

/* ------------------------------------------------------------------ */
/* announcing and pairing (m->lock held)                              */

/* chan_msg -- CHAN for @ch: its full name and every region of its objects. */
static int chan_msg(loco_channel_t *ch, uint32_t flags, struct lc_msg *msg)
{
	msg->type = LC_MSG_CHAN;
	snprintf(msg->u.chan.name, sizeof(msg->u.chan.name), "%s", ch->name);
	msg->u.chan.flags = flags;
	msg->u.chan.nodes = ch->nodes;
	msg->u.chan.n = 0;
	for (loco_object_t *o = ch->objects; o != NULL; o = o->next) {
		for (struct loco_region *r = o->regions; r != NULL; r = r->next) {
			struct lc_region_info *ri;

			if (msg->u.chan.n == LC_MAX_REGIONS)
				return -ENOSPC;
			ri = &msg->u.chan.r[msg->u.chan.n++];
			memset(ri, 0, sizeof(*ri));
			snprintf(ri->name, sizeof(ri->name), "%s", r->full);
			ri->addr = (uintptr_t)r->ptr;
			ri->len = r->len;
			ri->rkey = r->mr->rkey;
			ri->access = r->access;
		}
	}
	return 0;
}

void lc_chan_announce(loco_manager_t *m, loco_channel_t *ch, struct lc_member *to, uint32_t flags,
                      int peers_only)
{
	struct lc_msg *msg = m->tx_msg; /* any thread: m->lock serializes its users */

	if (chan_msg(ch, flags, msg) != 0) {
		lc_log_err("manager: cannot announce channel %s", ch->name);
		return;
	}
	for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next) {
		struct lc_peer *p;

		if (!mb->up || (to != NULL && mb != to))
			continue;
		p = lc_peer_get(ch, mb->info.node);
		if (peers_only && (p == NULL || !__atomic_load_n(&p->present, __ATOMIC_RELAXED)))
			continue;
		if (mb->conn != NULL) /* NULL while it is redialled: it hears it on reconnection */
			lc_conn_send(mb->conn, msg);
	}
}

/* cb_queue -- queue peer_join (@join) or peer_leave of @node for @ch's objects. */
static void cb_queue(loco_manager_t *m, loco_channel_t *ch, uint32_t node, int join)
{
	struct lc_cb_event *e = calloc(1, sizeof(*e));

	if (e == NULL) {
		lc_log_err("manager: out of memory: channel %s loses a callback for node %u",
		           ch->name, node);
		return;
	}
	*e = (struct lc_cb_event){
	    .chan = ch->id, .seq = ++m->seq, .view = m->view_id, .node = node, .join = join};
	ch->cb_pending++; /* loco_channel_join() returns once they ran */
	*m->cb_tail = e;
	m->cb_tail = &e->next;
}

static void peer_gone(loco_manager_t *m, loco_channel_t *ch, uint32_t node)
{
	struct lc_peer *p = lc_peer_get(ch, node);

	if (p == NULL || !__atomic_load_n(&p->present, __ATOMIC_RELAXED))
		return;
	fence_settle(ch, p); /* it owed a fence it will never take */
	__atomic_store_n(&p->present, 0, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < LC_MAX_REGIONS; i++)
		if (ch->region_used & (1ull << i))
			lc_rref_write(&p->rr[i], 0, 0, 0);
	free(p->regions);
	p->regions = NULL;
	p->nregions = 0;
	lc_log_debug("manager: channel %s: node %u left", ch->name, node);
	cb_queue(m, ch, node, 0);
}

/* peer_regions -- what @from announced for @ch: keep it, resolve our regions against it. */
static void peer_regions(loco_channel_t *ch, struct lc_peer *p, const struct lc_msg *msg)
{
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
	for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
		for (struct loco_region *r = o->regions; r != NULL; r = r->next)
			lc_rref_resolve(p, r);
}

static void on_msg(loco_manager_t *m, struct lc_member *from, const struct lc_msg *msg)
{
	loco_channel_t *ch;
	struct lc_peer *p;
	int is_new;

	if (msg->type == LC_MSG_CHAN_LEAVE) {
		ch = chan_find(m, msg->u.chan_leave.name);
		if (ch != NULL)
			peer_gone(m, ch, from->info.node);
		return;
	}
	ch = chan_find(m, msg->u.chan.name);
	if (ch == NULL || !ch->joined)
		return; /* when we join, we ask everyone again */
	p = peer_slot(ch, from->info.node);
	if (p == NULL)
		return;
	peer_regions(ch, p, msg);
	is_new = !__atomic_load_n(&p->present, __ATOMIC_RELAXED);
	if (is_new) {
		/* nothing earlier to order after */
		__atomic_store_n(&p->fence_gen, __atomic_load_n(&ch->fence_gen, __ATOMIC_RELAXED),
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&p->present, 1, __ATOMIC_RELEASE);
	}
	if (msg->u.chan.flags & LC_CHAN_REPLY)
		lc_chan_announce(m, ch, from, 0, 0);
	if (is_new) {
		lc_log_debug("manager: channel %s: paired with node %u", ch->name, p->node);
		cb_queue(m, ch, p->node, 1);
	}
}

static void on_up(loco_manager_t *m, struct lc_member *mb)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		if (ch->joined)
			lc_chan_announce(m, ch, mb, LC_CHAN_REPLY, 0);
}

static void on_gone(loco_manager_t *m, uint32_t node)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		peer_gone(m, ch, node);
}

void lc_chan_subscribe(loco_manager_t *m)
{
	m->ev = (struct lc_member_events){.up = on_up, .gone = on_gone, .msg = on_msg};
}

/* ------------------------------------------------------------------ */
/* object callbacks, on the progress thread without m->lock           */

/* next_object -- the oldest object of @ch made before @e and after @after. m->lock held. */
static loco_object_t *next_object(loco_channel_t *ch, const struct lc_cb_event *e, uint64_t after)
{
	loco_object_t *best = NULL;

	for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
		if (o->seq > after && o->seq < e->seq && (best == NULL || o->seq < best->seq))
			best = o;
	return best;
}

/* run_event -- call @e's callback of every object that was there. m->lock held, dropped inside. */
static void run_event(loco_manager_t *m, const struct lc_cb_event *e)
{
	uint64_t after = 0;

	for (;;) {
		loco_channel_t *ch = chan_by_id(m, e->chan);
		loco_object_t *o = ch != NULL ? next_object(ch, e, after) : NULL;
		void (*fn)(loco_object_t *, uint32_t, uint64_t, void *);

		if (o == NULL)
			return;
		after = o->seq;
		fn = e->join ? o->ops.peer_join : o->ops.peer_leave;
		if (fn == NULL)
			continue;
		m->cb_obj = o;
		pthread_mutex_unlock(&m->lock);
		fn(o, e->node, e->view, o->arg);
		pthread_mutex_lock(&m->lock);
		m->cb_obj = NULL;
		pthread_cond_broadcast(&m->cond); /* a destroy may wait for this call */
	}
}

void lc_chan_dispatch(loco_manager_t *m)
{
	loco_channel_t *ch;

	if (__atomic_load_n(&m->cb_head, __ATOMIC_RELAXED) == NULL)
		return; /* only this thread queues events, under m->lock */
	pthread_mutex_lock(&m->lock);
	while (m->cb_head != NULL) {
		struct lc_cb_event *e = m->cb_head;

		m->cb_head = e->next;
		if (m->cb_head == NULL)
			m->cb_tail = &m->cb_head;
		run_event(m, e);
		ch = chan_by_id(m, e->chan);
		if (ch != NULL)
			ch->cb_pending--;
		free(e);
	}
	pthread_mutex_unlock(&m->lock);
}

void lc_chan_object_gone(loco_manager_t *m, loco_object_t *obj)
{
	if (lc_on_progress(m))
		return; /* from inside a callback: the dispatcher no longer touches it */
	while (m->cb_obj == obj)
		pthread_cond_wait(&m->cond, &m->lock);
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
	ch->id = ++m->next_chan_id;
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

	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++)
		if (ch->peer[i] != NULL && __atomic_load_n(&ch->peer[i]->present, __ATOMIC_ACQUIRE))
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
		lc_chan_announce(m, ch, NULL, LC_CHAN_REPLY, 0);
	}
	pthread_mutex_unlock(&m->lock);
	for (;;) {
		uint32_t n, pending;

		pthread_mutex_lock(&m->lock);
		n = chan_npeers(ch);
		pending = ch->cb_pending;
		pthread_mutex_unlock(&m->lock);
		/* paired, and the objects heard of it: their peer_join callbacks ran */
		if (n + 1 >= ch->nodes && pending == 0)
			return 0;
		if (loco_manager_partitioned(m))
			return -LOCO_EPARTITION;
		if (timeout_ns >= 0 && lc_now_ns() - start >= (uint64_t)timeout_ns) {
			lc_log_info("manager: channel %s: %u of %u node(s) after the timeout",
			            ch->name, n + 1, ch->nodes);
			return -ETIMEDOUT;
		}
		usleep(delay_us);
		delay_us = delay_us < 2000 ? delay_us * 2 : 2000;
	}
}

/* chan_leave -- tell the channel's peers we leave it. m->lock held. */
static void chan_leave(loco_manager_t *m, loco_channel_t *ch)
{
	struct lc_msg *msg = m->tx_msg;

	msg->type = LC_MSG_CHAN_LEAVE;
	snprintf(msg->u.chan_leave.name, sizeof(msg->u.chan_leave.name), "%s", ch->name);
	for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next) {
		struct lc_peer *p = lc_peer_get(ch, mb->info.node);

		if (mb->up && mb->conn != NULL && p != NULL &&
		    __atomic_load_n(&p->present, __ATOMIC_RELAXED))
			lc_conn_send(mb->conn, msg);
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
	if (ch->joined)
		chan_leave(m, ch);
	for (loco_channel_t **pp = &m->channels; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
	if (ch->parent != NULL)
		ch->parent->nchildren--;
	pthread_mutex_unlock(&m->lock);
	/* no object is left, so no one posts through these slots any more */
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		if (ch->peer[i] != NULL) {
			free(ch->peer[i]->regions);
			free(ch->peer[i]);
		}
	}
	free(ch);
	return 0;
}

void lc_chan_excluded(loco_manager_t *m)
{
	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < LC_CHAN_PEERS && n < LC_CHAN_REGAIN; i++) {
			struct lc_peer *p = ch->peer[i];

			if (p != NULL && __atomic_load_n(&p->present, __ATOMIC_RELAXED))
				__atomic_store_n(&ch->regain[n++], p->node, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&ch->regain_ns, 0, __ATOMIC_RELEASE);
	}
}

void lc_chan_rejoined(loco_manager_t *m)
{
	uint64_t until = lc_now_ns() + (uint64_t)m->cfg.join_timeout_ms * 1000000ull;

	for (loco_channel_t *ch = m->channels; ch != NULL; ch = ch->next)
		__atomic_store_n(&ch->regain_ns, until, __ATOMIC_RELEASE);
}

/*
 * loco_channel_partitioned -- the manager's flag; and, after a rejoin,
 * until every peer the channel had before the exclusion paired again (or
 * the join timeout passed): a barrier must not pass alone meanwhile.
 */
int loco_channel_partitioned(loco_channel_t *ch)
{
	uint64_t until;
	int waiting = 0;

	if (ch == NULL)
		return 0;
	if (loco_manager_partitioned(ch->m))
		return 1;
	until = __atomic_load_n(&ch->regain_ns, __ATOMIC_ACQUIRE);
	if (until == 0)
		return 0;
	for (uint32_t i = 0; i < LC_CHAN_REGAIN; i++) {
		uint32_t node = __atomic_load_n(&ch->regain[i], __ATOMIC_RELAXED);
		struct lc_peer *p;

		if (node == 0)
			continue;
		p = lc_peer_get(ch, node);
		if (p != NULL && __atomic_load_n(&p->present, __ATOMIC_ACQUIRE))
			__atomic_store_n(&ch->regain[i], 0, __ATOMIC_RELAXED); /* paired again */
		else
			waiting = 1;
	}
	if (waiting && lc_now_ns() < until)
		return 1;
	__atomic_store_n(&ch->regain_ns, 0, __ATOMIC_RELAXED);
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

int loco_channel_peers(loco_channel_t *ch, uint32_t *ids, size_t max)
{
	uint32_t all[LC_CHAN_PEERS];
	size_t n = 0;

	if (ch == NULL || (ids == NULL && max > 0))
		return -EINVAL;
	/* lock-free: slots only appear, and presence is one atomic flag */
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		struct lc_peer *p = __atomic_load_n(&ch->peer[i], __ATOMIC_ACQUIRE);

		if (p != NULL && __atomic_load_n(&p->present, __ATOMIC_ACQUIRE))
			all[n++] = p->node;
	}
	lc_sort_u32(all, n);
	if (n > 0 && max > 0) /* ids may be NULL with max 0: counting only */
		memcpy(ids, all, (n < max ? n : max) * sizeof(ids[0]));
	return (int)n;
}
