/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * channel.c -- channels (the loco_channel_* API and the manager's table
 * of them, m->chans), pairing on membership's events, and the queue of
 * the objects' callbacks. What a CHAN carries, sending it and taking a
 * peer's in, is chan_announce.c's.
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
 * Object messages (OBJ, loco_object_send()) travel on the same control
 * connections and are queued with the callbacks below, behind the
 * sender's peer_join and ahead of its peer_leave.
 *
 * Membership reaches this file as events (lc_chan_subscribe()), on the
 * progress thread with m->lock held. Object callbacks are not called
 * there: they are queued, and lc_chan_dispatch() calls them on the
 * progress thread with no lock held, so that they may call anything of
 * loco/channel.h. An object destroyed meanwhile is skipped (its destroy
 * waits for a callback of it that runs), and an object created after an
 * event was queued does not get it (it saw the peers when it was made).
 * The callbacks stay here with the table: only channel.c reaches into
 * m->chans (tools/check-owners).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "handle.h"
#include "log.h"
#include "wait.h"

enum lc_cb_kind {
	LC_CB_JOIN = 1, /* peer_join */
	LC_CB_LEAVE,    /* peer_leave */
	LC_CB_MSG,      /* an object message, to object @obj only */
};

/* A callback to run: peer @node joined (or left) channel @chan, or sent a message. */
struct lc_cb_event {
	uint64_t chan;
	uint64_t seq;
	uint64_t view; /* the membership view that made the change */
	uint32_t node;
	int kind; /* enum lc_cb_kind */
	struct lc_cb_event *next;
	/* LC_CB_MSG: */
	char obj[LOCO_NAME_MAX + 1];
	uint32_t len;
	uint8_t data[]; /* len bytes */
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
	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next)
		if (strcmp(ch->name, full) == 0)
			return ch;
	return NULL;
}

static loco_channel_t *chan_by_id(loco_manager_t *m, uint64_t id)
{
	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next)
		if (ch->id == id)
			return ch;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* pairing (m->lock held)                                             */

/* cb_queue -- queue peer_join (@join) or peer_leave of @node for @ch's objects. */
static void cb_queue(loco_manager_t *m, loco_channel_t *ch, uint32_t node, int join)
{
	struct lc_cb_event *e = calloc(1, sizeof(*e));

	if (e == NULL) {
		lc_log_err("manager: out of memory: channel %s loses a callback for node %u",
		           ch->name, node);
		return;
	}
	*e = (struct lc_cb_event){.chan = ch->id,
	                          .seq = ++m->chans.seq,
	                          .view = lc_view_id(m),
	                          .node = node,
	                          .kind = join ? LC_CB_JOIN : LC_CB_LEAVE};
	ch->cb_pending++; /* loco_channel_join() returns once they ran */
	*m->chans.cb_tail = e;
	m->chans.cb_tail = &e->next;
}

static void peer_gone(loco_manager_t *m, loco_channel_t *ch, uint32_t node)
{
	struct lc_peer *p = lc_peer_get(ch, node);

	if (p == NULL)
		return;
	if (!__atomic_load_n(&p->present, __ATOMIC_RELAXED)) {
		lc_peer_retire(m, ch, p); /* had sent part of an announcement only */
		return;
	}
	lc_peer_fence_settle(ch, p); /* it owed a fence it will never take */
	__atomic_store_n(&p->present, 0, __ATOMIC_RELEASE);
	for (uint32_t pg = 0; pg < LC_RR_PAGES; pg++) /* a reader past the present check */
		if (p->rr[pg] != NULL)
			for (uint32_t i = 0; i < LC_RR_PAGE; i++)
				lc_rref_write(&p->rr[pg][i], 0, 0, 0);
	lc_log_debug("manager: channel %s: node %u left", ch->name, node);
	cb_queue(m, ch, node, 0);
	lc_peer_retire(m, ch, p); /* its position may serve another node from now on */
}

static loco_object_t *obj_find(loco_channel_t *ch, const char *name)
{
	for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

/*
 * obj_msg -- an object message from @from: queued behind the callbacks
 * already queued (the sender's peer_join among them), so that it comes
 * after them and before a peer_leave queued later. m->lock held.
 */
static void obj_msg(loco_manager_t *m, struct lc_member *from, const struct lc_msg *msg)
{
	loco_channel_t *ch = chan_find(m, msg->u.obj.chan);
	struct lc_peer *p = ch != NULL ? lc_peer_get(ch, from->info.node) : NULL;
	loco_object_t *o = ch != NULL ? obj_find(ch, msg->u.obj.obj) : NULL;
	struct lc_cb_event *e;
	const char *why = NULL;

	if (ch == NULL || !__atomic_load_n(&ch->joined, __ATOMIC_RELAXED))
		why = "no such joined channel";
	else if (p == NULL || !__atomic_load_n(&p->present, __ATOMIC_RELAXED))
		why = "the sender is not a peer of the channel";
	else if (o == NULL)
		why = "no such object";
	else if (o->msg_fn == NULL)
		why = "the object takes no messages";
	if (why != NULL) {
		lc_log_debug("manager: message of %u bytes from node %u to channel %s object %s "
		             "dropped: %s",
		             msg->u.obj.len, from->info.node, msg->u.obj.chan, msg->u.obj.obj, why);
		return;
	}
	e = malloc(sizeof(*e) + msg->u.obj.len);
	if (e == NULL) {
		lc_log_err("manager: out of memory: channel %s object %s loses a message from "
		           "node %u",
		           ch->name, o->name, from->info.node);
		return;
	}
	*e = (struct lc_cb_event){.chan = ch->id,
	                          .seq = ++m->chans.seq,
	                          .view = lc_view_id(m),
	                          .node = from->info.node,
	                          .kind = LC_CB_MSG,
	                          .len = msg->u.obj.len};
	snprintf(e->obj, sizeof(e->obj), "%s", o->name);
	memcpy(e->data, msg->u.obj.data, msg->u.obj.len);
	*m->chans.cb_tail = e;
	m->chans.cb_tail = &e->next;
}

static void on_msg(loco_manager_t *m, struct lc_member *from, const struct lc_msg *msg)
{
	loco_channel_t *ch;
	struct lc_peer *p;
	int is_new;

	if (msg->type == LC_MSG_OBJ) {
		obj_msg(m, from, msg);
		return;
	}
	if (msg->type == LC_MSG_CHAN_LEAVE) {
		ch = chan_find(m, msg->u.chan_leave.name);
		if (ch != NULL)
			peer_gone(m, ch, from->info.node);
		return;
	}
	if (msg->type != LC_MSG_CHAN)
		return;
	ch = chan_find(m, msg->u.chan.name);
	if (ch == NULL || !ch->joined)
		return; /* when we join, we ask everyone again */
	p = lc_peer_slot(m, ch, from->info.node);
	if (p == NULL)
		return;
	if (!lc_chan_peer_page(ch, p, msg))
		return; /* more pages to come: nothing is acted on before the last */
	lc_chan_peer_regions(ch, p);
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
	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next)
		if (ch->joined)
			lc_chan_announce(m, ch, mb, LC_CHAN_REPLY, 0);
}

static void on_gone(loco_manager_t *m, uint32_t node)
{
	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next)
		peer_gone(m, ch, node);
}

static void on_excluded(loco_manager_t *m);
static void on_rejoined(loco_manager_t *m);

void lc_chan_subscribe(loco_manager_t *m)
{
	static const struct lc_member_events ev = {.up = on_up,
	                                           .gone = on_gone,
	                                           .msg = on_msg,
	                                           .excluded = on_excluded,
	                                           .rejoined = on_rejoined};

	lc_members_subscribe(&m->members, &ev);
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

/* run_msg -- deliver message @e to its object, when it is still there. m->lock held, dropped inside. */
static void run_msg(loco_manager_t *m, const struct lc_cb_event *e)
{
	loco_channel_t *ch = chan_by_id(m, e->chan);
	loco_object_t *o = ch != NULL ? obj_find(ch, e->obj) : NULL;
	loco_object_msg_fn fn;
	void *arg;

	/* an object made after the message came is another one of that name */
	if (o == NULL || o->seq > e->seq || o->msg_fn == NULL) {
		lc_log_debug("manager: message of %u bytes from node %u to object %s dropped: "
		             "the object or its function is gone",
		             e->len, e->node, e->obj);
		return;
	}
	fn = o->msg_fn;
	arg = o->msg_arg;
	m->chans.cb_obj = o;
	pthread_mutex_unlock(&m->lock);
	fn(o, e->node, e->data, e->len, arg);
	pthread_mutex_lock(&m->lock);
	m->chans.cb_obj = NULL;
	pthread_cond_broadcast(&m->cond); /* a destroy may wait for this call */
}

/* run_event -- call @e's callback of every object that was there. m->lock held, dropped inside. */
static void run_event(loco_manager_t *m, const struct lc_cb_event *e)
{
	uint64_t after = 0;

	if (e->kind == LC_CB_MSG) {
		run_msg(m, e);
		return;
	}
	for (;;) {
		loco_channel_t *ch = chan_by_id(m, e->chan);
		loco_object_t *o = ch != NULL ? next_object(ch, e, after) : NULL;
		void (*fn)(loco_object_t *, uint32_t, uint64_t, void *);

		if (o == NULL)
			return;
		after = o->seq;
		fn = e->kind == LC_CB_JOIN ? o->ops.peer_join : o->ops.peer_leave;
		if (fn == NULL)
			continue;
		m->chans.cb_obj = o;
		pthread_mutex_unlock(&m->lock);
		fn(o, e->node, e->view, o->arg);
		pthread_mutex_lock(&m->lock);
		m->chans.cb_obj = NULL;
		pthread_cond_broadcast(&m->cond); /* a destroy may wait for this call */
	}
}

void lc_chan_dispatch(loco_manager_t *m)
{
	loco_channel_t *ch;

	if (__atomic_load_n(&m->chans.cb_head, __ATOMIC_RELAXED) == NULL)
		return; /* only this thread queues events, under m->lock */
	pthread_mutex_lock(&m->lock);
	while (m->chans.cb_head != NULL) {
		struct lc_cb_event *e = m->chans.cb_head;

		m->chans.cb_head = e->next;
		if (m->chans.cb_head == NULL)
			m->chans.cb_tail = &m->chans.cb_head;
		run_event(m, e);
		ch = chan_by_id(m, e->chan);
		if (ch != NULL && e->kind != LC_CB_MSG) /* messages do not hold up a join */
			ch->cb_pending--;
		free(e);
	}
	pthread_mutex_unlock(&m->lock);
}

void lc_chan_events_free(loco_manager_t *m)
{
	while (m->chans.cb_head != NULL) {
		struct lc_cb_event *e = m->chans.cb_head;

		m->chans.cb_head = e->next;
		free(e);
	}
	m->chans.cb_tail = &m->chans.cb_head;
}

void lc_chan_object_gone(loco_manager_t *m, loco_object_t *obj)
{
	if (lc_on_progress(m))
		return; /* from inside a callback: the dispatcher no longer touches it */
	while (m->chans.cb_obj == obj)
		pthread_cond_wait(&m->cond, &m->lock);
}

/* ------------------------------------------------------------------ */
/* channels                                                           */

int loco_channel_create(loco_manager_t *m, loco_channel_t *parent, const char *name, uint32_t nodes,
                        loco_channel_t **out)
{
	char full[LOCO_NAME_MAX + 2];
	loco_channel_t *ch;
	int n = lc_handle_ok(m);

	if (n)
		return n;
	if (parent != NULL && (n = lc_handle_ok(parent)) != 0)
		return n;
	if (out == NULL || nodes == 0 || !name_ok(name) || (parent != NULL && parent->m != m))
		return -EINVAL;
	n = snprintf(full, sizeof(full), "%s%s%s", parent ? parent->name : "", parent ? "/" : "",
	             name);
	if (n < 0 || n > LOCO_NAME_MAX)
		return -EINVAL;
	ch = lc_handle_alloc(m, sizeof(*ch));
	if (ch == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	if (chan_find(m, full) != NULL) {
		pthread_mutex_unlock(&m->lock);
		lc_handle_bury(ch);
		return -EEXIST;
	}
	ch->m = m;
	ch->parent = parent;
	ch->nodes = nodes;
	ch->id = ++m->chans.next_chan_id;
	memcpy(ch->name, full, (size_t)n + 1);
	if (parent != NULL)
		parent->nchildren++;
	ch->next = m->chans.channels;
	m->chans.channels = ch;
	pthread_mutex_unlock(&m->lock);
	*out = ch;
	return 0;
}

static uint32_t chan_npeers(loco_channel_t *ch)
{
	uint32_t n = 0;
	struct lc_peer *p;

	for (uint32_t i = 0; (p = lc_peer_next(ch, &i)) != NULL;) {
		if (__atomic_load_n(&p->present, __ATOMIC_ACQUIRE))
			n++;
	}
	return n;
}

/*
 * join_timeout_log -- how many of the expected peers paired, the members
 * of the view that did not, and how many expected nodes are not members
 * at all. m->lock held.
 */
static void join_timeout_log(loco_manager_t *m, loco_channel_t *ch)
{
	char missing[256];
	size_t off = 0;
	uint32_t paired = chan_npeers(ch), members = 0, unpaired = 0, expected = ch->nodes - 1;

	missing[0] = '\0';
	for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL; mb = mb->next) {
		struct lc_peer *p;

		if (mb->info.node == m->node_id)
			continue;
		members++;
		p = lc_peer_get(ch, mb->info.node);
		if (p != NULL && __atomic_load_n(&p->present, __ATOMIC_RELAXED))
			continue;
		unpaired++;
		if (off < sizeof(missing) - 16) {
			int w =
			    snprintf(missing + off, sizeof(missing) - off, " %u", mb->info.node);

			off += w > 0 ? (size_t)w : 0;
		} else if (off < sizeof(missing) - 5) {
			off += (size_t)snprintf(missing + off, sizeof(missing) - off, " ...");
		}
	}
	lc_log_warn("manager: channel %s: join timed out: %u of %u expected peer(s) paired; "
	            "members that did not pair: %u%s%s; expected nodes that are not members: %u",
	            ch->name, paired, expected, unpaired, unpaired ? " (nodes" : "",
	            unpaired ? missing : "", expected > members ? expected - members : 0);
	if (unpaired)
		lc_log_warn("manager: channel %s: (the nodes above are members of view %llu: did "
		            "they create and join channel %s?)",
		            ch->name, (unsigned long long)lc_view_id(m), ch->name);
	lc_view_late_hint(m, "join timed out");
}

int loco_channel_join(loco_channel_t *ch, int64_t timeout_ns)
{
	loco_manager_t *m;
	uint64_t start = lc_now_ns();
	unsigned delay_us = 50;
	int ret = lc_handle_ok(ch);

	if (ret)
		return ret;
	m = ch->m;
	pthread_mutex_lock(&m->lock);
	if (!ch->joined) {
		__atomic_store_n(&ch->joined, 1, __ATOMIC_RELEASE);
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
		if (n + 1 >= ch->nodes && pending == 0) {
			lc_spread(m); /* the spin policy's start: the thread spins from here */
			return 0;
		}
		if (loco_manager_partitioned(m)) {
			pthread_mutex_lock(&m->lock);
			lc_log_warn("manager: channel %s: join stopped: this node is partitioned",
			            ch->name);
			lc_view_late_hint(m, "partitioned");
			pthread_mutex_unlock(&m->lock);
			return -LOCO_EPARTITION;
		}
		if (timeout_ns >= 0 && lc_now_ns() - start >= (uint64_t)timeout_ns) {
			pthread_mutex_lock(&m->lock);
			join_timeout_log(m, ch);
			pthread_mutex_unlock(&m->lock);
			return -ETIMEDOUT;
		}
		usleep(delay_us);
		delay_us = delay_us < 2000 ? delay_us * 2 : 2000;
	}
}

/* chan_leave -- tell the channel's peers we leave it. m->lock held. */
static void chan_leave(loco_manager_t *m, loco_channel_t *ch)
{
	struct lc_msg *msg = lc_members_tx_msg(&m->members);

	msg->type = LC_MSG_CHAN_LEAVE;
	snprintf(msg->u.chan_leave.name, sizeof(msg->u.chan_leave.name), "%s", ch->name);
	for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL; mb = mb->next) {
		struct lc_peer *p = lc_peer_get(ch, mb->info.node);

		if (mb->up && mb->conn != NULL && p != NULL &&
		    __atomic_load_n(&p->present, __ATOMIC_RELAXED))
			lc_conn_send(mb->conn, msg);
	}
}

int loco_channel_destroy(loco_channel_t *ch)
{
	loco_manager_t *m;
	int ret;

	if (ch == NULL)
		return 0;
	ret = lc_handle_ok(ch);
	if (ret)
		return ret;
	m = ch->m;
	pthread_mutex_lock(&m->lock);
	if (ch->objects != NULL || ch->nchildren > 0) {
		pthread_mutex_unlock(&m->lock);
		return -EBUSY;
	}
	if (ch->joined)
		chan_leave(m, ch);
	for (loco_channel_t **pp = &m->chans.channels; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
	if (ch->parent != NULL)
		ch->parent->nchildren--;
	pthread_mutex_unlock(&m->lock);
	/* no object is left, so no one posts through these slots any more */
	struct lc_peer *p;

	for (uint32_t i = 0; (p = lc_peer_next(ch, &i)) != NULL;)
		lc_peer_free(p);
	lc_peer_reap(m, ch, 1);
	lc_handle_bury(ch);
	return 0;
}

/* on_excluded -- m->lock: remember each channel's peers */
static void on_excluded(loco_manager_t *m)
{
	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next) {
		uint32_t n = 0;
		struct lc_peer *p;

		for (uint32_t i = 0; n < LC_CHAN_REGAIN && (p = lc_peer_next(ch, &i)) != NULL;) {
			if (__atomic_load_n(&p->present, __ATOMIC_RELAXED))
				__atomic_store_n(&ch->regain[n++], p->node, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&ch->regain_ns, 0, __ATOMIC_RELEASE);
	}
}

/* on_rejoined -- m->lock: wait for them again (join timeout) */
static void on_rejoined(loco_manager_t *m)
{
	uint64_t until = lc_now_ns() + (uint64_t)m->cfg.join_timeout_ms * 1000000ull;

	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next)
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

	if (lc_handle_ok(ch))
		return 0; /* NULL or gone: no partition to report (an int, not an error code) */
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
	return lc_handle_ok(ch) == 0 ? ch->name : NULL;
}

loco_manager_t *loco_channel_manager(const loco_channel_t *ch)
{
	return lc_handle_ok(ch) == 0 ? ch->m : NULL;
}

int loco_channel_peers(loco_channel_t *ch, uint32_t *ids, size_t max)
{
	uint32_t all[LC_CHAN_PEERS];
	size_t n = 0;
	int ret = lc_handle_ok(ch);

	if (ret)
		return ret;
	if (ids == NULL && max > 0)
		return -EINVAL;
	/* lock-free: a retired slot stays readable for its grace, and presence is one atomic flag */
	struct lc_peer *p;

	for (uint32_t i = 0; (p = lc_peer_next(ch, &i)) != NULL;) {
		if (__atomic_load_n(&p->present, __ATOMIC_ACQUIRE))
			all[n++] = p->node;
	}
	lc_sort_u32(all, n);
	/* a node that left and came back during the scan may be in two positions: once */
	if (n > 1) {
		size_t k = 1;

		for (size_t i = 1; i < n; i++)
			if (all[i] != all[k - 1])
				all[k++] = all[i];
		n = k;
	}
	if (n > 0 && max > 0) /* ids may be NULL with max 0: counting only */
		memcpy(ids, all, (n < max ? n : max) * sizeof(ids[0]));
	return (int)n;
}

void lc_chans_init(loco_manager_t *m)
{
	m->chans.cb_tail = &m->chans.cb_head;
}

uint64_t lc_chan_seq_next(loco_manager_t *m)
{
	return ++m->chans.seq;
}

int lc_chan_any(loco_manager_t *m)
{
	return m->chans.channels != NULL;
}

unsigned lc_chan_open_objects(loco_manager_t *m, const char **obj, const char **chan)
{
	unsigned n = 0;

	for (loco_channel_t *ch = m->chans.channels; ch != NULL; ch = ch->next)
		for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
			if (n++ == 0) {
				*obj = o->name;
				*chan = ch->name;
			}
	return n;
}
