/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_input.c -- the machine's inputs (ms.h, docs/membership.md): messages,
 * heartbeats heard, suspicions, leaves, admission, joining, and the tick
 * (suspicion by silence, probes, rounds, rejoining). No I/O, no clock:
 * ms->now is the time of the input being handled.
 */
#include <errno.h>
#include <string.h>

#include "ms_impl.h"

/* forward_join -- a join for the coordinator: ours to propose, or sent on. */
static void forward_join(struct lc_ms *ms, const struct lc_member_info *mi)
{
	uint32_t coord = ms_coordinator(ms);
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
		ms_log(ms, LC_LOG_INFO, "manager: node %u heard again: no longer suspected", node);
		x->susp_ns = 0;
	}
	if (ms->part == LC_MS_UNSURE)
		ms_partition_check(ms); /* one floor passed: partitioned */
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
		ms_log(ms, LC_LOG_DEBUG,
		       "manager: VC %u from node %u: view %llu ballot %llx abal %llx node %u "
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
			ms_send_view(ms, from);
		if (in->u.vc.flag == LC_HB_ECHO_ASK && member && ms->state == LC_VS_NORMAL &&
		    t == ms->id) {
			struct lc_msg *msg = ms_msg(ms, LC_VC_HB, ms->id);

			msg->u.vc.flag = LC_HB_ECHO;
			msg->u.vc.ballot = in->u.vc.ballot;
			ms_send_to(ms, from, msg);
		} else if (in->u.vc.flag == LC_HB_ECHO && member && ms->nonce != 0 &&
		           in->u.vc.ballot == ms->nonce && t == ms->id) {
			ms->v[ms_idx(ms, from)].echo = ms->nonce;
			ms_partition_check(ms); /* a majority answered: act again */
		}
		break;
	case LC_VC_PREPARE:
		if (!member)
			break;
		if (ms->state == LC_VS_NORMAL && t <= ms->id)
			ms_send_view(ms, from);
		else if (ms_acc_prepare(ms, t, in->u.vc.ballot))
			ms_send_to(ms, from, ms->tx);
		break;
	case LC_VC_ACCEPT:
		if (!member)
			break;
		if (ms->state == LC_VS_NORMAL && t <= ms->id)
			ms_send_view(ms, from);
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
		if (ms_coordinator(ms) == ms->self.node)
			ms_coord_suspect(ms, i);
		else if (ms_coordinator(ms) != from) {
			struct lc_msg *msg = ms_msg(ms, LC_VC_SUSPECT, t);

			msg->u.vc.node = in->u.vc.node;
			msg->u.vc.inc = in->u.vc.inc;
			ms_send_to(ms, ms_coordinator(ms), msg);
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
		ms_log(ms, LC_LOG_WARN,
		       "manager: refused a second node with id %u (incarnation %llx): "
		       "node %u (incarnation %llx) is a live member",
		       node, (unsigned long long)inc, node, (unsigned long long)ms->v[i].info.inc);
		*why = "node id in use by a live member";
		return -EEXIST;
	}
	ms_log(ms, LC_LOG_INFO,
	       "manager: node %u restarted? its old incarnation is not confirmed gone yet", node);
	ms_suspect_idx(ms, i);
	*why = "the old incarnation of this node id is not confirmed gone yet";
	return -EAGAIN;
}

void lc_ms_admitted(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc)
{
	ms_detect_clock(ms, now);
	if (!ms_has(ms, node, inc))
		ms_send_view(ms, node); /* an excluded node learns it; a joiner ignores it */
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
	ms_log(ms, LC_LOG_INFO, "manager: rejoining through %s", contact.ctrl_addr);
	ms->ops->dial(ms->ctx, &contact, 1);
	ms->next_rejoin = ms->now + ms->cfg.fail_ns / 2;
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
	if (ms->nonce != 0 && now - ms->echo_asked >= f / 4)
		ms_echo_ask(ms); /* not answered yet (lost, or the view moved on): ask again */
	if (!ms_detect_unsure(ms))
		for (uint32_t i = 0; i < ms->n; i++) {
			struct vmember *x = &ms->v[i];

			if (x->info.node != ms->self.node && x->susp_ns == 0 &&
			    now - x->heard_ns > ms_detect_bound(ms, x) && now >= x->quiet_ns &&
			    !ms->leaving)
				ms_suspect_idx(ms, (int)i);
		}
	ms_partition_check(ms);
	coord = ms_coordinator(ms);
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
			ms_log(ms, LC_LOG_DEBUG, "manager: redialling node %u", x->info.node);
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
	ms_pending_prune(ms);
	if (coord != ms->self.node) {
		ms->phase = 0;
		return ms->wake;
	}
	ms_probes_decide(ms);
	if (ms->phase != 0 && now > ms->deadline) {
		ms_log(ms, LC_LOG_INFO,
		       "manager: view %llu: no majority answered ballot %llx in time",
		       (unsigned long long)ms->target, (unsigned long long)ms->ballot);
		ms_backoff(ms);
	}
	if (ms->phase == 0 && now >= ms->backoff && (ms->nj > 0 || ms->nr > 0) &&
	    ms->part == LC_MS_ACT)
		ms_start_round(ms);
	return ms->wake;
}
