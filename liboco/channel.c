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
 * regions are matched by full name "object/region". An announcement
 * longer than one CHAN goes as several in a row (pages, ctrl_wire.h); a
 * receiver keeps them aside and acts only on a whole one. Unlisted
 * regions are never announced.
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

/* lc_rref_resolve (chan.h), here beside the sorted entries it searches */

void lc_rref_resolve(struct lc_peer *p, const struct loco_region *r)
{
	const struct lc_region_info *e;

	if (r->idx == LC_IDX_NONE)
		return; /* unlisted: no reference */
	e = lc_peer_entry(p, r->full, 0);
	if (e != NULL)
		lc_peer_rref_set(p, r->idx, e->rkey, e->addr, e->len);
	else
		lc_peer_rref_set(p, r->idx, 0, 0, 0);
}

/* ------------------------------------------------------------------ */
/* announcing and pairing (m->lock held)                              */

/* lc_param_name -- "object/key" into @out (LC_NAME_MAX + 1 bytes: loco_object_agree() checked). */
void lc_param_name(const loco_object_t *o, const struct lc_param *pm, char *out)
{
	size_t a = strnlen(o->name, LC_NAME_MAX), b = strnlen(pm->key, LC_NAME_MAX);

	if (a + 1 + b > LC_NAME_MAX) { /* never: cut, not overflow */
		a = a < LC_NAME_MAX - 1 ? a : LC_NAME_MAX - 1;
		b = LC_NAME_MAX - a - 1;
	}
	memcpy(out, o->name, a);
	out[a] = '/';
	memcpy(out + a + 1, pm->key, b);
	out[a + 1 + b] = '\0';
}

unsigned lc_chan_entries(const loco_channel_t *ch)
{
	return ch->nentries; /* kept by region.c as regions and parameters come and go */
}

/*
 * chan_pages -- CHAN for @ch in pages of LC_MAX_REGIONS entries: its full
 * name, every listed region and parameter of its objects; @send(@m, @msg,
 * @ctx) is called with each page built in @msg, in order.
 */
static void chan_pages(loco_manager_t *m, loco_channel_t *ch, uint32_t flags, struct lc_msg *msg,
                       void (*send)(loco_manager_t *, struct lc_msg *, void *), void *ctx)
{
	uint32_t total = lc_chan_entries(ch), first = 0;

	msg->type = LC_MSG_CHAN;
	snprintf(msg->u.chan.name, sizeof(msg->u.chan.name), "%s", ch->name);
	msg->u.chan.flags = flags;
	msg->u.chan.nodes = ch->nodes;
	msg->u.chan.first = 0;
	msg->u.chan.total = total;
	msg->u.chan.n = 0;
	for (loco_object_t *o = ch->objects; o != NULL; o = o->next) {
		struct loco_region *r = o->regions;
		unsigned k = 0;

		while (r != NULL || k < o->nparams) {
			struct lc_region_info *ri = &msg->u.chan.r[msg->u.chan.n];

			if (msg->u.chan.n == LC_MAX_REGIONS)
				goto last; /* never: lc_chan_entries() counted these */
			memset(ri, 0, sizeof(*ri));
			if (r != NULL) {
				if (r->idx == LC_IDX_NONE) { /* unlisted */
					r = r->next;
					continue;
				}
				snprintf(ri->name, sizeof(ri->name), "%s", r->full);
				ri->addr = (uintptr_t)r->ptr;
				ri->len = r->len;
				ri->rkey = r->mr->rkey;
				ri->access = r->access;
				r = r->next;
			} else {
				lc_param_name(o, &o->params[k], ri->name);
				ri->addr = o->params[k].value;
				ri->access = LC_REGION_PARAM;
				k++;
			}
			if (++msg->u.chan.n == LC_MAX_REGIONS && first + LC_MAX_REGIONS < total) {
				send(m, msg, ctx); /* a full page, more to come */
				first += LC_MAX_REGIONS;
				msg->u.chan.first = first;
				msg->u.chan.n = 0;
			}
		}
	}
last:
	if (first + msg->u.chan.n != total) /* never: peers would wait for the rest for ever */
		lc_log_err("manager: channel %s: %u entries counted, %u announced", ch->name, total,
		           first + msg->u.chan.n);
	send(m, msg, ctx); /* the last page (or the only one, maybe empty) */
}

/*
 * A peer's announced entries are kept sorted by name, a region before a
 * parameter of the same name (entry_cmp), so that every lookup is a binary
 * search: resolving and checking n regions against a peer's n entries
 * costs n log n, not n * n, however many a peer announces.
 */
static int entry_order(const char *name, uint32_t access, const char *key, int param)
{
	int c = strcmp(name, key);

	if (c != 0)
		return c;
	return (int)!!(access & LC_REGION_PARAM) - (int)!!param;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct lc_region_info *x = a, *y = b;

	return entry_order(x->name, x->access, y->name, !!(y->access & LC_REGION_PARAM));
}

/* lc_peer_entry_lower -- the first of @p's entries not before (@key, @param). m->lock. */
uint32_t lc_peer_entry_lower(const struct lc_peer *p, const char *key, int param)
{
	uint32_t lo = 0, hi = p->nregions;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (entry_order(p->regions[mid].name, p->regions[mid].access, key, param) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* peer_entry -- @p's announced region (or parameter: @param) named @key, or NULL. m->lock. */
const struct lc_region_info *lc_peer_entry(const struct lc_peer *p, const char *key, int param)
{
	uint32_t i = lc_peer_entry_lower(p, key, param);

	if (i < p->nregions &&
	    entry_order(p->regions[i].name, p->regions[i].access, key, param) == 0)
		return &p->regions[i];
	return NULL;
}

/* mismatch -- @o disagrees with peer @node: logged, and the object fails for good. */
static void mismatch(loco_channel_t *ch, loco_object_t *o, uint32_t node, const char *what,
                     const char *key, uint64_t mine, uint64_t theirs)
{
	uint64_t h = 1469598103934665603ull ^ node; /* FNV-1a of the peer, entry and values */
	unsigned i;

	for (const char *c = key; *c != '\0'; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	h = ((h ^ mine) * 1099511628211ull ^ theirs) * 1099511628211ull;
	h |= 1; /* 0 marks a free slot */
	for (i = 0; i < 16 && o->logged[i] != 0; i++)
		if (o->logged[i] == h) { /* said already: every announcement would repeat it */
			__atomic_store_n(&o->bad, LOCO_EMISMATCH, __ATOMIC_RELEASE);
			return;
		}
	if (i < 16)
		o->logged[i] = h;
	lc_log_err("manager: channel %s object %s: %s %s is %llu here but %llu on node %u: "
	           "pairing of the object refused (-LOCO_EMISMATCH)",
	           ch->name, o->name, what, key, (unsigned long long)mine,
	           (unsigned long long)theirs, node);
	__atomic_store_n(&o->bad, LOCO_EMISMATCH, __ATOMIC_RELEASE);
}

void lc_chan_agree_check(loco_channel_t *ch, struct lc_peer *p, loco_object_t *only)
{
	char full[LOCO_NAME_MAX + 2];

	for (loco_object_t *o = ch->objects; o != NULL; o = o->next) {
		size_t n = strlen(o->name);

		if (only != NULL && o != only)
			continue;
		for (unsigned k = 0; k < o->nparams; k++) {
			const struct lc_region_info *e;

			lc_param_name(o, &o->params[k], full);
			e = lc_peer_entry(p, full, 1);
			if (e != NULL && e->addr != o->params[k].value)
				mismatch(ch, o, p->node, "parameter", o->params[k].key,
				         o->params[k].value, e->addr);
		}
		for (struct loco_region *r = o->regions; r != NULL; r = r->next) {
			const struct lc_region_info *e;

			if (r->idx == LC_IDX_NONE)
				continue; /* unlisted: the peer's namesake, if any, is its own */
			e = lc_peer_entry(p, r->full, 0);
			if (e != NULL && e->len != r->len)
				mismatch(ch, o, p->node, "length of region", r->full + n + 1,
				         r->len, e->len);
		}
	}
}

struct announce_ctx {
	loco_channel_t *ch;
	struct lc_member *to;
	int peers_only;
};

/* announce_page -- one page of a CHAN to the members @ctx names. m->lock held. */
static void announce_page(loco_manager_t *m, struct lc_msg *msg, void *ctx)
{
	const struct announce_ctx *a = ctx;

	for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL; mb = mb->next) {
		struct lc_peer *p;

		if (!mb->up || (a->to != NULL && mb != a->to))
			continue;
		p = lc_peer_get(a->ch, mb->info.node);
		if (a->peers_only && (p == NULL || !__atomic_load_n(&p->present, __ATOMIC_RELAXED)))
			continue;
		if (mb->conn != NULL) /* NULL while it is redialled: it hears it on reconnection */
			lc_conn_send(mb->conn, msg);
	}
}

void lc_chan_announce(loco_manager_t *m, loco_channel_t *ch, struct lc_member *to, uint32_t flags,
                      int peers_only)
{
	/* any thread: m->lock serializes tx_msg's users, and keeps an announcement's pages together */
	struct announce_ctx a = {.ch = ch, .to = to, .peers_only = peers_only};

	chan_pages(m, ch, flags, lc_members_tx_msg(&m->members), announce_page, &a);
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

/* entry_ok -- a parameter entry carries nothing but its name and value. */
static int entry_ok(const struct lc_region_info *e)
{
	return !(e->access & LC_REGION_PARAM) ||
	       (e->access == LC_REGION_PARAM && e->len == 0 && e->rkey == 0);
}

/* pend_reset -- forget a partial announcement of @p. */
static void pend_reset(struct lc_peer *p)
{
	free(p->pend);
	p->pend = NULL;
	p->npend = p->pend_cap = p->pend_total = 0;
}

/*
 * peer_page -- one page of @p's announcement (ctrl_wire.h): kept until
 * the last one came. Returns 1 when the announcement is whole (then in
 * p->pend, p->npend entries), 0 while it is not (or a page was out of
 * order: what came is dropped). Everything counted here came from the
 * wire: the decoder bounded first + n <= total <= LC_CHAN_ENTRIES_MAX,
 * and the buffer grows only with the entries that came.
 */
static int peer_page(loco_channel_t *ch, struct lc_peer *p, const struct lc_msg *msg)
{
	uint32_t first = msg->u.chan.first, n = msg->u.chan.n, total = msg->u.chan.total;

	if (first == 0) {
		p->npend = 0; /* a new announcement: one in progress was superseded */
		p->pend_total = total;
	} else if (first != p->npend || total != p->pend_total || p->pend_total == 0) {
		lc_log_debug("manager: channel %s: node %u: announcement page at %u of %u out of "
		             "order (had %u of %u): dropped",
		             ch->name, p->node, first, total, p->npend, p->pend_total);
		pend_reset(p);
		return 0;
	}
	if (n > total - first || total > LC_CHAN_ENTRIES_MAX) { /* the decoder refused these */
		pend_reset(p);
		return 0;
	}
	if (p->npend + n > p->pend_cap) {
		uint32_t cap = p->pend_cap ? p->pend_cap : LC_MAX_REGIONS;
		struct lc_region_info *np;

		while (cap < p->npend + n)
			cap *= 2;
		if (cap > total)
			cap = total;
		np = realloc(p->pend, (size_t)cap * sizeof(*np));
		if (np == NULL) {
			lc_log_err("manager: out of memory: channel %s: announcement of node %u "
			           "dropped",
			           ch->name, p->node);
			pend_reset(p);
			return 0;
		}
		p->pend = np;
		p->pend_cap = cap;
	}
	if (n > 0)
		memcpy(p->pend + p->npend, msg->u.chan.r, (size_t)n * sizeof(*p->pend));
	p->npend += n;
	return p->npend == total;
}

/*
 * peer_regions -- the whole announcement of @p (in p->pend): keep it,
 * check the objects' parameters and region lengths against it, resolve
 * our regions.
 */
static void peer_regions(loco_channel_t *ch, struct lc_peer *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->npend; i++) {
		if (entry_ok(&p->pend[i]))
			p->pend[n++] = p->pend[i];
		else
			lc_log_warn("manager: channel %s: node %u announced a malformed parameter "
			            "%s: ignored",
			            ch->name, p->node, p->pend[i].name);
	}
	if (n > 1)
		qsort(p->pend, n, sizeof(*p->pend), entry_cmp); /* for lc_peer_entry() */
	free(p->regions);
	p->regions = p->pend;
	p->nregions = n;
	p->pend = NULL;
	p->npend = p->pend_cap = p->pend_total = 0;
	lc_chan_agree_check(ch, p, NULL);
	for (loco_object_t *o = ch->objects; o != NULL; o = o->next)
		for (struct loco_region *r = o->regions; r != NULL; r = r->next)
			lc_rref_resolve(p, r);
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
	if (!peer_page(ch, p, msg))
		return; /* more pages to come: nothing is acted on before the last */
	peer_regions(ch, p);
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
