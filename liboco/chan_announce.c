/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * chan_announce.c -- a channel's announcements (chan.h): the CHAN that
 * lists its regions and its objects' parameters (lc_chan_announce()), and
 * the other side, a peer's announcement received and kept sorted by name,
 * checked against our objects (lc_chan_agree_check()) and resolved into
 * the peer's references to our regions. An announcement longer than one
 * CHAN goes as several in a row (pages, ctrl_wire.h); a receiver keeps
 * them aside and acts only on a whole one. Unlisted regions are never
 * announced. channel.c decides when to announce and pairs on what comes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "conn.h"
#include "log.h"

/* ------------------------------------------------------------------ */
/* announcing (m->lock held)                                          */

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

/* ------------------------------------------------------------------ */
/* a peer's entries, sorted by name (m->lock held)                    */

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

/* ------------------------------------------------------------------ */
/* a peer's announcement received (m->lock held)                      */

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
 * lc_chan_peer_page -- one page of @p's announcement (ctrl_wire.h): kept until
 * the last one came. Returns 1 when the announcement is whole (then in
 * p->pend, p->npend entries), 0 while it is not (or a page was out of
 * order: what came is dropped). Everything counted here came from the
 * wire: the decoder bounded first + n <= total <= LC_CHAN_ENTRIES_MAX,
 * and the buffer grows only with the entries that came.
 */
int lc_chan_peer_page(loco_channel_t *ch, struct lc_peer *p, const struct lc_msg *msg)
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
 * lc_chan_peer_regions -- the whole announcement of @p (in p->pend):
 * keep it, check the objects' parameters and region lengths against it,
 * resolve our regions.
 */
void lc_chan_peer_regions(loco_channel_t *ch, struct lc_peer *p)
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
