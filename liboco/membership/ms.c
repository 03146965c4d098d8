/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms.c -- the view-change protocol (ms.h, docs/membership.md): views,
 * installing, exclusion and rejoining, the messages, the timers. No I/O,
 * no clock: ms->now is the time of the input being handled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <loco/manager.h>

#include "../log.h"
#include "ms_impl.h"

struct lc_ms *lc_ms_create(const struct lc_ms_cfg *cfg, const struct lc_member_info *self,
                           const struct lc_ms_ops *ops, void *ctx)
{
	struct lc_ms *ms = calloc(1, sizeof(*ms));

	if (ms == NULL)
		return NULL;
	ms->cfg = *cfg;
	ms->ops = ops;
	ms->ctx = ctx;
	ms->self = *self;
	ms->rng = cfg->seed | 1; /* xorshift: never 0 */
	ms->state = LC_VS_JOINING;
	ms->part = LC_MS_PART;
	ms->v = calloc(LC_MAX_MEMBERS, sizeof(*ms->v));
	ms->old = calloc(LC_MAX_MEMBERS, sizeof(*ms->old));
	ms->av = calloc(LC_MAX_MEMBERS, sizeof(*ms->av));
	ms->prop = calloc(LC_MAX_MEMBERS, sizeof(*ms->prop));
	ms->joins = calloc(LC_MAX_MEMBERS, sizeof(*ms->joins));
	ms->rems = calloc(LC_MAX_MEMBERS, sizeof(*ms->rems));
	ms->contacts = calloc(2 * LC_MAX_MEMBERS, sizeof(*ms->contacts));
	ms->scratch = calloc(LC_MAX_MEMBERS, sizeof(*ms->scratch));
	ms->tx = calloc(1, sizeof(*ms->tx));
	if (ms->v == NULL || ms->old == NULL || ms->av == NULL || ms->prop == NULL ||
	    ms->joins == NULL || ms->rems == NULL || ms->contacts == NULL || ms->scratch == NULL ||
	    ms->tx == NULL) {
		lc_ms_destroy(ms);
		return NULL;
	}
	return ms;
}

void lc_ms_destroy(struct lc_ms *ms)
{
	if (ms == NULL)
		return;
	free(ms->tx);
	free(ms->scratch);
	free(ms->contacts);
	free(ms->rems);
	free(ms->joins);
	free(ms->prop);
	free(ms->av);
	free(ms->old);
	free(ms->v);
	free(ms);
}

void lc_ms_set_self(struct lc_ms *ms, const struct lc_member_info *self)
{
	ms->self = *self;
}

void ms_set_part(struct lc_ms *ms, int part)
{
	if (part == ms->part)
		return;
	ms->part = part;
	ms->ops->part(ms->ctx, part);
}

/* ms_random -- uniform in [0, @below) (xorshift64*: the simulator replays it from its seed) */
uint64_t ms_random(struct lc_ms *ms, uint64_t below)
{
	uint64_t x = ms->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	ms->rng = x;
	return below == 0 ? 0 : (x * 0x2545f4914f6cdd1dull) % below;
}

void ms_event(struct lc_ms *ms, int type, uint64_t view, uint32_t n)
{
	ms->ops->event(ms->ctx, type, view, n);
}

/* ------------------------------------------------------------------ */
/* questions                                                          */

int lc_ms_state(const struct lc_ms *ms)
{
	return ms->state;
}

uint64_t lc_ms_view(const struct lc_ms *ms)
{
	return ms->state == LC_VS_NORMAL ? ms->id : 0;
}

int lc_ms_partitioned(const struct lc_ms *ms)
{
	return ms->part;
}

int lc_ms_in(const struct lc_ms *ms, uint32_t node, uint64_t inc)
{
	return ms_has(ms, node, inc);
}

int lc_ms_said_leave(const struct lc_ms *ms, uint32_t node, uint64_t inc)
{
	int i = ms_idx(ms, node);

	return i != NO_INDEX && ms->v[i].info.inc == inc && ms->v[i].left;
}

uint64_t lc_ms_inc(const struct lc_ms *ms, uint32_t node)
{
	int i = ms_idx(ms, node);

	return i == NO_INDEX ? 0 : ms->v[i].info.inc;
}

uint32_t lc_ms_members(const struct lc_ms *ms, struct lc_member_info *out, uint32_t max)
{
	uint32_t n = ms->n < max ? ms->n : max;

	for (uint32_t i = 0; i < n; i++)
		out[i] = ms->v[i].info;
	return n;
}

const struct lc_member_info *lc_ms_self(const struct lc_ms *ms)
{
	return &ms->self;
}

uint64_t lc_ms_bound(const struct lc_ms *ms, uint32_t node)
{
	int i = ms_idx(ms, node);

	return i == NO_INDEX ? ms->cfg.fail_ns : ms_detect_bound(ms, &ms->v[i]);
}

int lc_ms_left(const struct lc_ms *ms)
{
	if (ms->left || ms->state != LC_VS_NORMAL || ms->n <= 1)
		return 1;
	if (!ms->leaving)
		return 0;
	/*
	 * Leaving, and every other member of the view left too: it said LEAVE,
	 * or we dropped it as we leave. Nobody stays who needs our vote, and no
	 * view may reach us any more (several leaving at once: a coordinator
	 * that left may take its VIEW with it, and the next one's PREPARE may
	 * come before the view it follows). Without this such a leaver waited
	 * out the leave bound (2 s), and logged itself partitioned after the
	 * failure bound.
	 */
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->v[i].info.node != ms->self.node && !ms->v[i].left &&
		    ms->ops->connected(ms->ctx, ms->v[i].info.node))
			return 0;
	return 1;
}

/* ------------------------------------------------------------------ */
/* sending                                                            */

void ms_send_to(struct lc_ms *ms, uint32_t node, struct lc_msg *msg)
{
	ms->ops->send(ms->ctx, node, msg);
}

/* ms_broadcast -- @msg to every other member of the installed view. */
void ms_broadcast(struct lc_ms *ms, struct lc_msg *msg)
{
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->v[i].info.node != ms->self.node)
			ms_send_to(ms, ms->v[i].info.node, msg);
}

struct lc_msg *ms_msg(struct lc_ms *ms, uint32_t kind, uint64_t view)
{
	struct lc_msg *msg = ms->tx;

	memset(msg, 0, offsetof(struct lc_msg, u) + offsetof(__typeof__(msg->u.vc), m));
	msg->type = LC_MSG_VC;
	msg->u.vc.kind = kind;
	msg->u.vc.view = view;
	return msg;
}

struct lc_msg *lc_ms_hb(struct lc_ms *ms)
{
	return ms_msg(ms, LC_VC_HB, ms->state == LC_VS_NORMAL ? ms->id : 0);
}

/*
 * ms_tell_gone -- LEFT for each leaver our views dropped after view @since,
 * to @to (0: to every member of the view), before a VIEW that follows.
 * A member that skipped the view dropping a leaver (it got the next one
 * first, from another coordinator) may not have had the leaver's own
 * LEAVE yet, and would take the leaver for failed.
 */
void ms_tell_gone(struct lc_ms *ms, uint32_t to, uint64_t since)
{
	uint32_t first = ms->ngone > GONE ? ms->ngone - GONE : 0;

	for (uint32_t k = first; k < ms->ngone; k++) {
		const struct gone *g = &ms->gone[k % GONE];
		struct lc_msg *msg;

		if (g->view <= since)
			continue;
		msg = ms_msg(ms, LC_VC_LEFT, g->view);
		msg->u.vc.node = g->node;
		msg->u.vc.inc = g->inc;
		if (to != 0)
			ms_send_to(ms, to, msg);
		else
			ms_broadcast(ms, msg);
	}
}

/* send_view -- our installed view to @node, after the leavers it may not know of. */
static void send_view(struct lc_ms *ms, uint32_t node)
{
	struct lc_msg *msg;

	if (ms->state != LC_VS_NORMAL)
		return;
	ms_tell_gone(ms, node, 0);
	msg = ms_msg(ms, LC_VC_VIEW, ms->id);
	for (uint32_t i = 0; i < ms->n; i++)
		msg->u.vc.m[i] = ms->v[i].info;
	msg->u.vc.n = ms->n;
	ms_send_to(ms, node, msg);
}

/* coordinator -- the lowest-id member of the view that we do not suspect. */
static uint32_t coordinator(const struct lc_ms *ms)
{
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->v[i].info.node == ms->self.node || ms->v[i].susp_ns == 0)
			return ms->v[i].info.node;
	return ms->self.node;
}

static void contacts_add(struct lc_ms *ms, const struct lc_member_info *mi)
{
	if (mi->node == ms->self.node || ms->ncontacts >= 2 * LC_MAX_MEMBERS)
		return;
	for (uint32_t i = 0; i < ms->ncontacts; i++)
		if (strcmp(ms->contacts[i].ctrl_addr, mi->ctrl_addr) == 0)
			return;
	ms->contacts[ms->ncontacts++] = *mi;
}

/* ------------------------------------------------------------------ */
/* views                                                              */

/* excluded -- a newer view @id left us out: drop everyone; rejoin unless told not to. */
static void excluded(struct lc_ms *ms, uint64_t id, const struct lc_member_info *list, uint32_t n)
{
	uint64_t inc = ms->self.inc + 1 + ms_random(ms, 0x1000);

	lc_log_warn("manager: excluded: view %llu (%u members) does not have node %u "
	            "(incarnation %llx)%s",
	            (unsigned long long)id, n, ms->self.node, (unsigned long long)ms->self.inc,
	            ms->cfg.rejoin ? "; rejoining as a new incarnation" : "");
	ms_event(ms, LOCO_EVENT_EXCLUDED, id, n);
	ms->ncontacts = 0;
	for (uint32_t i = 0; i < n; i++)
		contacts_add(ms, &list[i]);
	for (uint32_t i = 0; i < ms->n; i++)
		contacts_add(ms, &ms->v[i].info);
	ms->n = 0;
	ms->id = 0;
	ms->phase = 0;
	ms->nj = ms->nr = 0;
	memset(ms->probe, 0, sizeof(ms->probe));
	memset(ms->preq, 0, sizeof(ms->preq));
	ms_set_part(ms, LC_MS_PART); /* before the members go */
	ms->resumed = 0;
	if (!ms->cfg.rejoin)
		inc = ms->self.inc;
	ms->ops->excluded(ms->ctx, id, inc);
	if (!ms->cfg.rejoin) {
		ms->state = LC_VS_EXCLUDED;
		return;
	}
	ms->self.inc = inc;
	ms->state = LC_VS_REJOINING;
	ms->next_rejoin = 0;
}

/* pending_prune -- forget changes the installed view made (or made moot). */
static void pending_prune(struct lc_ms *ms)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < ms->nj; i++) {
		int x = ms_idx(ms, ms->joins[i].info.node);

		if ((x != NO_INDEX && ms->v[x].info.inc >= ms->joins[i].info.inc) ||
		    ms->now - ms->joins[i].since > ms->cfg.join_ns)
			continue;
		ms->joins[k++] = ms->joins[i];
	}
	ms->nj = k;
	k = 0;
	for (uint32_t i = 0; i < ms->nr; i++) {
		int x = ms_idx(ms, ms->rems[i].info.node);

		if (x == NO_INDEX || ms->v[x].info.inc != ms->rems[i].info.inc)
			continue;
		if (!ms->rems[i].left && ms->v[x].heard_ns > ms->rems[i].since)
			continue; /* heard since it was confirmed failed (a partition healed) */
		ms->rems[k++] = ms->rems[i];
	}
	ms->nr = k;
	for (unsigned i = 0; i < PROBES; i++) {
		if (ms->probe[i].node != 0 && !ms_has(ms, ms->probe[i].node, ms->probe[i].inc))
			ms->probe[i].node = 0;
		if (ms->preq[i].node != 0 && !ms_has(ms, ms->preq[i].node, ms->preq[i].inc))
			ms->preq[i].node = 0;
	}
}

static void partition_check(struct lc_ms *ms);

/* ms_install -- view @id = @list (committed): take it, or learn that we were left out. */
void ms_install(struct lc_ms *ms, uint64_t id, const struct lc_member_info *list, uint32_t n)
{
	uint32_t old_n = ms->n, self = 0;
	int was = ms->state;

	if (id <= ms->id && was == LC_VS_NORMAL)
		return;
	if (n > LC_MAX_MEMBERS)
		n = LC_MAX_MEMBERS;
	for (uint32_t i = 0; i < n; i++)
		if (list[i].node == ms->self.node && list[i].inc == ms->self.inc)
			self = 1;
	if (!self) {
		if (was == LC_VS_NORMAL && ms->leaving) {
			ms->state = LC_VS_LEFT;
			ms->left = 1;
		} else if (was == LC_VS_NORMAL) {
			excluded(ms, id, list, n);
		} else if (was == LC_VS_JOINING || was == LC_VS_REJOINING) {
			for (uint32_t i = 0; i < n; i++)
				contacts_add(ms, &list[i]);
		}
		return;
	}
	if (was != LC_VS_NORMAL && was != LC_VS_JOINING && was != LC_VS_REJOINING)
		return;
	memcpy(ms->old, ms->v, old_n * sizeof(*ms->old));
	for (uint32_t i = 0; i < n; i++) {
		struct vmember nv = {.info = list[i], .heard_ns = ms->now, .rx_ns = ms->now};

		ms_detect_reset(ms, &nv);
		for (uint32_t j = 0; j < old_n; j++)
			if (ms->old[j].info.node == list[i].node &&
			    ms->old[j].info.inc == list[i].inc) {
				/*
				 * as it was, said LEAVE included: a member whose LEAVE came
				 * while another's removal was agreed stays leaving, and the
				 * view that drops it next says it left, not that it failed
				 */
				nv = ms->old[j];
				nv.info = list[i];
			}
		ms->v[i] = nv;
	}
	/* keep the list sorted by node id: the coordinator is the first unsuspected */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && ms->v[j - 1].info.node > ms->v[j].info.node; j--) {
			struct vmember t = ms->v[j];

			ms->v[j] = ms->v[j - 1];
			ms->v[j - 1] = t;
		}
	ms->n = n;
	ms->id = id;
	ms->pb = ms->ab = 0;
	ms->an = 0;
	ms->phase = 0;
	ms->state = LC_VS_NORMAL;
	pending_prune(ms);
	lc_log_info("manager: view %llu installed: %u member(s)", (unsigned long long)id, n);
	if (was == LC_VS_REJOINING) {
		ms->settle_start = ms->now;
		ms->settle_up = 0;
	}
	for (uint32_t j = 0; j < old_n; j++)
		if (ms->old[j].left && !ms_has(ms, ms->old[j].info.node, ms->old[j].info.inc))
			ms->gone[ms->ngone++ % GONE] = (struct gone){
			    .node = ms->old[j].info.node, .inc = ms->old[j].info.inc, .view = id};
	/* members of the old view that are not in the new one: gone (their links close first) */
	for (uint32_t j = 0; j < old_n; j++)
		if (!ms_has(ms, ms->old[j].info.node, ms->old[j].info.inc) &&
		    ms->old[j].info.node != ms->self.node)
			ms->ops->drop(ms->ctx, &ms->old[j].info, ms->old[j].left);
	/* a joiner hears of its view from its contact, and from everyone who had it before */
	for (uint32_t i = 0; i < ms->n; i++) {
		int is_new = 1;

		if (ms->v[i].info.node == ms->self.node)
			continue;
		for (uint32_t j = 0; j < old_n; j++)
			if (ms->old[j].info.node == ms->v[i].info.node &&
			    ms->old[j].info.inc == ms->v[i].info.inc)
				is_new = 0;
		if (is_new && was == LC_VS_NORMAL)
			send_view(ms, ms->v[i].info.node);
	}
	partition_check(ms);
	ms->ops->installed(ms->ctx, id, n, was);
	if (was == LC_VS_REJOINING) {
		lc_log_warn("manager: rejoined in view %llu as incarnation %llx",
		            (unsigned long long)id, (unsigned long long)ms->self.inc);
		ms_event(ms, LOCO_EVENT_REJOINED, id, n);
	}
	ms_event(ms, LOCO_EVENT_VIEW, id, n);
}

void lc_ms_start_alone(struct lc_ms *ms, uint64_t now)
{
	ms_detect_clock(ms, now);
	ms_install(ms, 1, &ms->self, 1);
}

/* forward_join -- a join for the coordinator: ours to propose, or sent on. */
static void forward_join(struct lc_ms *ms, const struct lc_member_info *mi)
{
	uint32_t coord = coordinator(ms);
	struct lc_msg *msg;
	uint32_t j;

	for (j = 0; j < ms->nj; j++)
		if (ms->joins[j].info.node == mi->node)
			break;
	if (j == ms->nj) {
		if (ms->nj >= LC_MAX_MEMBERS)
			return;
		ms->nj++;
		ms->joins[j].since = ms->now;
	}
	ms->joins[j].info = *mi;
	ms->joins[j].fwd = ms->now;
	if (coord == ms->self.node)
		return;
	msg = ms_msg(ms, LC_VC_JOIN, ms->id);
	msg->u.vc.m[0] = *mi;
	msg->u.vc.n = 1;
	ms_send_to(ms, coord, msg);
}

/* ------------------------------------------------------------------ */
/* inputs                                                             */

void lc_ms_heard(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc)
{
	int i = ms_idx(ms, node);
	struct vmember *x;

	ms_detect_clock(ms, now);
	if (i == NO_INDEX || ms->v[i].info.inc != inc)
		return;
	x = &ms->v[i];
	ms_detect_heard(ms, x);
	x->heard_ns = now;
	x->rx_ns = now;
	if (x->susp_ns != 0 && now > x->susp_ns) {
		lc_log_info("manager: node %u heard again: no longer suspected", node);
		x->susp_ns = 0;
	}
	if (ms->part == LC_MS_UNSURE)
		partition_check(ms); /* a majority heard since we resumed: act again */
}

void lc_ms_suspect(struct lc_ms *ms, uint64_t now, uint32_t node)
{
	int i = ms_idx(ms, node);

	ms_detect_clock(ms, now);
	if (i != NO_INDEX)
		ms_suspect_idx(ms, i);
}

void lc_ms_msg(struct lc_ms *ms, uint64_t now, const struct lc_member_info *peer, int joiner,
               const struct lc_msg *in)
{
	uint32_t from = peer->node;
	uint64_t t = in->u.vc.view;
	int member = ms_has(ms, from, peer->inc), i;

	ms_detect_clock(ms, now);
	if (in->u.vc.kind != LC_VC_HB)
		lc_log_debug("manager: VC %u from node %u: view %llu ballot %llx abal %llx node %u "
		             "n %u",
		             in->u.vc.kind, from, (unsigned long long)t,
		             (unsigned long long)in->u.vc.ballot, (unsigned long long)in->u.vc.abal,
		             in->u.vc.node, in->u.vc.n);
	switch (in->u.vc.kind) {
	case LC_VC_HB:
		/*
		 * A peer behind us (or left out of our view) learns our view; a
		 * joiner not in it yet waits for its own. One that joined through
		 * us and is a member now is no longer waiting: without "member"
		 * here, a member that missed a commit was never caught up by its
		 * contact (found by the simulator, seed 360).
		 */
		if (ms->state == LC_VS_NORMAL && t < ms->id && (!joiner || member))
			send_view(ms, from);
		break;
	case LC_VC_PREPARE:
		if (!member)
			break;
		if (ms->state == LC_VS_NORMAL && t <= ms->id)
			send_view(ms, from);
		else if (ms_acc_prepare(ms, t, in->u.vc.ballot))
			ms_send_to(ms, from, ms->tx);
		break;
	case LC_VC_ACCEPT:
		if (!member)
			break;
		if (ms->state == LC_VS_NORMAL && t <= ms->id)
			send_view(ms, from);
		else if (ms_acc_accept(ms, t, in->u.vc.ballot, in->u.vc.m, in->u.vc.n))
			ms_send_to(ms, from, ms->tx);
		break;
	case LC_VC_PROMISE:
		ms_on_promise(ms, from, t, in->u.vc.ballot, in->u.vc.abal, in->u.vc.m, in->u.vc.n);
		break;
	case LC_VC_ACCEPTED:
		ms_on_accepted(ms, from, t, in->u.vc.ballot);
		break;
	case LC_VC_NACK:
		if (ms->phase != 0 && t == ms->target && in->u.vc.ballot > ms->ballot) {
			if ((in->u.vc.ballot >> 32) > ms->seen_round)
				ms->seen_round = in->u.vc.ballot >> 32;
			ms_backoff(ms);
		}
		break;
	case LC_VC_VIEW:
		if ((t > ms->id || ms->state != LC_VS_NORMAL) && in->u.vc.n <= LC_MAX_MEMBERS) {
			memcpy(ms->scratch, in->u.vc.m, in->u.vc.n * sizeof(in->u.vc.m[0]));
			ms_install(ms, t, ms->scratch, in->u.vc.n);
		}
		break;
	case LC_VC_JOIN:
		if (in->u.vc.n != 1)
			break;
		if (!member) {
			/* the joiner itself, through us its contact: its authenticated identity */
			ms->ops->mark_joiner(ms->ctx, from);
			if (ms->state == LC_VS_NORMAL)
				forward_join(ms, peer);
		} else if (ms->state == LC_VS_NORMAL) {
			forward_join(ms, &in->u.vc.m[0]);
		}
		break;
	case LC_VC_SUSPECT:
		i = ms_idx(ms, in->u.vc.node);
		if (i == NO_INDEX || ms->v[i].info.inc != in->u.vc.inc ||
		    in->u.vc.node == ms->self.node || !member)
			break;
		if (coordinator(ms) == ms->self.node)
			ms_coord_suspect(ms, i);
		else if (coordinator(ms) != from) {
			struct lc_msg *msg = ms_msg(ms, LC_VC_SUSPECT, t);

			msg->u.vc.node = in->u.vc.node;
			msg->u.vc.inc = in->u.vc.inc;
			ms_send_to(ms, coordinator(ms), msg);
		}
		break;
	case LC_VC_PROBE_REQ:
		if (!member || !ms_has(ms, in->u.vc.node, in->u.vc.inc))
			break;
		for (unsigned k = 0; k < PROBES; k++) {
			if (ms->preq[k].node == 0) {
				ms->preq[k] = (struct preq){.node = in->u.vc.node,
				                            .coord = from,
				                            .inc = in->u.vc.inc,
				                            .start = now};
				break;
			}
		}
		break;
	case LC_VC_LEFT:
		/* the coordinator heard its LEAVE: the view that drops it next says it left */
		i = ms_idx(ms, in->u.vc.node);
		if (i != NO_INDEX && ms->v[i].info.inc == in->u.vc.inc &&
		    in->u.vc.node != ms->self.node && member)
			ms->v[i].left = 1;
		break;
	case LC_VC_PROBE_ACK:
		for (unsigned k = 0; k < PROBES; k++) {
			struct probe *p = &ms->probe[k];

			if (p->node == in->u.vc.node && p->inc == in->u.vc.inc) {
				p->answers++;
				p->alive |= in->u.vc.flag != 0;
			}
		}
		break;
	default:
		break; /* a newer kind: ignored */
	}
}

void lc_ms_leave_rx(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc)
{
	int i = ms_idx(ms, node);

	ms_detect_clock(ms, now);
	if (i == NO_INDEX || ms->v[i].info.inc != inc)
		return;
	ms->v[i].left = 1;
	ms_rem_add(ms, &ms->v[i].info, 1);
	ms->backoff = 0;
}

void lc_ms_leave(struct lc_ms *ms, uint64_t now)
{
	ms->leaving = 1;
	lc_ms_leave_rx(ms, now, ms->self.node, ms->self.inc); /* coordinating: we drop ourselves */
}

int lc_ms_admit_check(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc, const char **why)
{
	int i = ms_idx(ms, node);

	ms_detect_clock(ms, now);
	if (ms->state != LC_VS_NORMAL || i == NO_INDEX || ms->v[i].info.inc == inc)
		return 0;
	if (ms->v[i].info.inc > inc) {
		*why = "stale incarnation";
		return -ESTALE;
	}
	if (!ms_rem_has(ms, node, ms->v[i].info.inc) && ms->ops->connected(ms->ctx, node) &&
	    now - ms->v[i].heard_ns < ms_detect_bound(ms, &ms->v[i])) {
		lc_log_warn("manager: refused a second node with id %u (incarnation %llx): "
		            "node %u (incarnation %llx) is a live member",
		            node, (unsigned long long)inc, node,
		            (unsigned long long)ms->v[i].info.inc);
		*why = "node id in use by a live member";
		return -EEXIST;
	}
	lc_log_info("manager: node %u restarted? its old incarnation is not confirmed gone yet",
	            node);
	ms_suspect_idx(ms, i);
	*why = "the old incarnation of this node id is not confirmed gone yet";
	return -EAGAIN;
}

void lc_ms_admitted(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc)
{
	ms_detect_clock(ms, now);
	if (!ms_has(ms, node, inc))
		send_view(ms, node); /* an excluded node learns it; a joiner ignores it */
}

void lc_ms_join_lost(struct lc_ms *ms, uint64_t now, uint32_t node)
{
	ms_detect_clock(ms, now);
	if (node == 0 || node != ms->join_node)
		return;
	ms->join_node = 0;
	if (ms->state == LC_VS_JOINING)
		ms->ops->join_done(ms->ctx, -ECONNRESET);
	ms->next_rejoin = 0;
}

void lc_ms_joining(struct lc_ms *ms, uint64_t now, uint32_t node)
{
	struct lc_msg *msg = ms_msg(ms, LC_VC_JOIN, 0);

	ms_detect_clock(ms, now);
	ms->join_node = node;
	msg->u.vc.m[0] = ms->self;
	msg->u.vc.n = 1;
	ms_send_to(ms, node, msg);
}

/* ------------------------------------------------------------------ */
/* timers                                                             */

/* rejoin -- excluded: try the members of our last views, one at a time. */
static void rejoin(struct lc_ms *ms)
{
	struct lc_member_info contact;

	if (ms->ncontacts == 0 || ms->now < ms->next_rejoin || ms->ops->dialing(ms->ctx, 0) ||
	    ms->join_node != 0)
		return;
	contact = ms->contacts[ms->next_contact++ % ms->ncontacts];
	contact.node = 0;
	contact.inc = 0;
	lc_log_info("manager: rejoining through %s", contact.ctrl_addr);
	ms->ops->dial(ms->ctx, &contact, 1);
	ms->next_rejoin = ms->now + ms->cfg.fail_ns / 2;
}

/* partition_check -- whether a majority of the view was heard within its bound. */
static void partition_check(struct lc_ms *ms)
{
	uint32_t heard = 1, fresh = 1;
	int part, was = ms->part;

	for (uint32_t i = 0; i < ms->n; i++) {
		const struct vmember *x = &ms->v[i];

		if (x->info.node == ms->self.node)
			continue;
		/* as the messages came: our own lateness is no reason to act */
		if (ms->now - x->rx_ns <= ms_detect_bound(ms, x))
			heard++;
		if (ms->resumed != 0 && x->rx_ns >= ms->resumed)
			fresh++;
	}
	part = heard < ms_majority(ms->n) ? LC_MS_PART : LC_MS_ACT;
	if (ms->resumed != 0) {
		/*
		 * Our own inputs came late: what we heard before may be old news
		 * (a view without us may be waiting in the socket). Act again once
		 * a majority was heard since; blame nobody until then, or until
		 * one bound passed.
		 */
		if (fresh >= ms_majority(ms->n) || ms->now - ms->resumed > ms->cfg.fail_ns)
			ms->resumed = 0;
		else
			part = LC_MS_UNSURE;
	}
	if (ms->settle_start != 0) {
		/*
		 * Rejoined: we stop acting until every member of the view is up
		 * again and a quarter of the failure bound passed (the channels
		 * re-pair meanwhile), so that no object of ours acts alone.
		 */
		int all_up = 1;

		for (uint32_t i = 0; i < ms->n; i++)
			if (ms->v[i].info.node != ms->self.node &&
			    !ms->ops->up(ms->ctx, ms->v[i].info.node))
				all_up = 0;
		if (!all_up)
			ms->settle_up = 0;
		else if (ms->settle_up == 0)
			ms->settle_up = ms->now;
		if ((ms->settle_up != 0 && ms->now - ms->settle_up >= ms->cfg.fail_ns / 4) ||
		    ms->now - ms->settle_start > ms->cfg.join_ns)
			ms->settle_start = 0;
		else if (part == LC_MS_ACT)
			part = LC_MS_PART;
	}
	ms_set_part(ms, part);
	if (part == LC_MS_PART && was != LC_MS_PART) {
		uint64_t late = lc_ms_late(ms);

		if (late >= ms->cfg.fail_ns / 4)
			lc_log_warn(
			    "manager: partitioned: %u of %u member(s) of view %llu heard "
			    "within %llu ms; stopped acting. This node's own progress thread "
			    "ran up to %llu ms late: the host is busy or the process was "
			    "paused; a longer bound (LOCO_FAIL_TIMEOUT_MS, %llu ms now) "
			    "rides it out",
			    heard, ms->n, (unsigned long long)ms->id,
			    (unsigned long long)(ms_detect_max(ms) / 1000000),
			    (unsigned long long)(late / 1000000),
			    (unsigned long long)(ms->cfg.fail_ns / 1000000));
		else
			lc_log_warn("manager: partitioned: %u of %u member(s) of view %llu heard "
			            "within %llu ms; stopped acting",
			            heard, ms->n, (unsigned long long)ms->id,
			            (unsigned long long)(ms_detect_max(ms) / 1000000));
		ms_event(ms, LOCO_EVENT_PARTITIONED, ms->id, ms->n);
		ms->part_logged = 1;
	} else if (part == LC_MS_ACT && was != LC_MS_ACT && ms->part_logged) {
		ms->part_logged = 0;
		lc_log_warn("manager: a majority of view %llu is in reach again",
		            (unsigned long long)ms->id);
	}
}

uint64_t lc_ms_tick(struct lc_ms *ms, uint64_t now)
{
	uint64_t f = ms->cfg.fail_ns;
	uint32_t coord;

	ms_detect_clock(ms, now);
	ms->wake = now + f / 10;
	if (ms->state == LC_VS_REJOINING) {
		if (ms->join_node != 0 && !ms->ops->connected(ms->ctx, ms->join_node) &&
		    !ms->ops->dialing(ms->ctx, ms->join_node))
			ms->join_node = 0;
		if (ms->join_node != 0 && now > ms->next_rejoin + 2 * f)
			ms->join_node = 0; /* no view took us through it: try another */
		rejoin(ms);
		return ms->wake;
	}
	if (ms->state != LC_VS_NORMAL)
		return ms->wake;
	if (!ms_detect_unsure(ms))
		for (uint32_t i = 0; i < ms->n; i++) {
			struct vmember *x = &ms->v[i];

			if (x->info.node != ms->self.node && x->susp_ns == 0 &&
			    now - x->heard_ns > ms_detect_bound(ms, x) && now >= x->quiet_ns &&
			    !ms->leaving)
				ms_suspect_idx(ms, (int)i);
		}
	partition_check(ms);
	coord = coordinator(ms);
	for (uint32_t i = 0; i < ms->n; i++) {
		struct vmember *x = &ms->v[i];

		if (x->info.node == ms->self.node)
			continue;
		if (x->susp_ns != 0 && coord == ms->self.node) {
			ms_coord_suspect(ms, (int)i);
		} else if (x->susp_ns != 0 && now - x->report_ns >= f / 2) {
			struct lc_msg *msg = ms_msg(ms, LC_VC_SUSPECT, ms->id);

			msg->u.vc.node = x->info.node;
			msg->u.vc.inc = x->info.inc;
			ms_send_to(ms, coord, msg);
			x->report_ns = now;
		}
		/* a member without a control connection: the lower id redials (both, when cut off) */
		if (!ms->ops->connected(ms->ctx, x->info.node) &&
		    (ms->self.node < x->info.node || ms->part != LC_MS_ACT) && !ms->leaving &&
		    now >= x->redial_ns && !ms->ops->dialing(ms->ctx, x->info.node)) {
			lc_log_debug("manager: redialling node %u", x->info.node);
			ms->ops->dial(ms->ctx, &x->info, 0);
			x->redial_ns = now + f / 4;
		}
	}
	ms_probes_answer(ms);
	/* a contact re-forwards the joins it took while they wait */
	if (coord != ms->self.node)
		for (uint32_t j = 0; j < ms->nj; j++)
			if (now - ms->joins[j].fwd > f / 2)
				forward_join(ms, &ms->joins[j].info);
	pending_prune(ms);
	if (coord != ms->self.node) {
		ms->phase = 0;
		return ms->wake;
	}
	ms_probes_decide(ms);
	if (ms->phase != 0 && now > ms->deadline) {
		lc_log_info("manager: view %llu: no majority answered ballot %llx in time",
		            (unsigned long long)ms->target, (unsigned long long)ms->ballot);
		ms_backoff(ms);
	}
	if (ms->phase == 0 && now >= ms->backoff && (ms->nj > 0 || ms->nr > 0) &&
	    ms->part == LC_MS_ACT)
		ms_start_round(ms);
	return ms->wake;
}
