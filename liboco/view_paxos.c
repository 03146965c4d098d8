/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view_paxos.c -- single-decree Paxos per view number (view.h): the
 * coordinator proposes the next view (the installed one minus removals,
 * plus joins), the members of the installed view accept it, a majority
 * commits it. Progress thread, m->lock held.
 */
#include <sodium.h>
#include <string.h>

#include "log.h"
#include "view_impl.h"

int lc_vw_rem_has(struct lc_view *vw, uint32_t node, uint64_t inc)
{
	for (uint32_t i = 0; i < vw->nr; i++)
		if (vw->rems[i].info.node == node && vw->rems[i].info.inc == inc)
			return 1;
	return 0;
}

/* proposal -- the next view we want: ours minus removals, plus joins. Its length. */
static uint32_t proposal(struct lc_view *vw, struct lc_member_info *out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < vw->n; i++)
		if (!lc_vw_rem_has(vw, vw->v[i].info.node, vw->v[i].info.inc))
			out[n++] = vw->v[i].info;
	for (uint32_t j = 0; j < vw->nj && n < LC_MAX_MEMBERS; j++) {
		int dup = 0;

		for (uint32_t i = 0; i < n; i++)
			if (out[i].node == vw->joins[j].info.node)
				dup = 1;
		if (!dup)
			out[n++] = vw->joins[j].info;
	}
	return n;
}

static int same_members(struct lc_view *vw, const struct lc_member_info *l, uint32_t n)
{
	if (n != vw->n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (!vw_in(vw, l[i].node, l[i].inc))
			return 0;
	return 1;
}

void lc_vw_backoff(loco_manager_t *m, uint64_t now)
{
	uint64_t f = vw_fail_ns(m);

	m->vw->phase = 0;
	m->vw->backoff = now + f / 8 + randombytes_uniform((uint32_t)(f / 4 / 1000)) * 1000ull;
}

/* acc_prepare -- the acceptor's answer to PREPARE(@t, @b), in m->tx_msg; 0: no answer. */
int lc_vw_acc_prepare(loco_manager_t *m, uint64_t t, uint64_t b)
{
	struct lc_view *vw = m->vw;
	struct lc_msg *msg;

	if (vw->state != LC_VS_NORMAL || t != vw->id + 1)
		return 0;
	if (b <= vw->pb) {
		msg = lc_vw_msg(m, LC_VC_NACK, t);
		msg->u.vc.ballot = vw->pb;
		return 1;
	}
	vw->pb = b;
	msg = lc_vw_msg(m, LC_VC_PROMISE, t);
	msg->u.vc.ballot = b;
	msg->u.vc.abal = vw->ab;
	if (vw->ab != 0) {
		memcpy(msg->u.vc.m, vw->av, vw->an * sizeof(vw->av[0]));
		msg->u.vc.n = vw->an;
	}
	return 1;
}

/* acc_accept -- the acceptor's answer to ACCEPT(@t, @b, @val), in m->tx_msg. */
int lc_vw_acc_accept(loco_manager_t *m, uint64_t t, uint64_t b, const struct lc_member_info *val,
                     uint32_t n)
{
	struct lc_view *vw = m->vw;
	struct lc_msg *msg;

	if (vw->state != LC_VS_NORMAL || t != vw->id + 1)
		return 0;
	if (b < vw->pb) {
		msg = lc_vw_msg(m, LC_VC_NACK, t);
		msg->u.vc.ballot = vw->pb;
		return 1;
	}
	vw->pb = vw->ab = b;
	if (val != vw->av)
		memmove(vw->av, val, n * sizeof(*val));
	vw->an = n;
	msg = lc_vw_msg(m, LC_VC_ACCEPTED, t);
	msg->u.vc.ballot = b;
	return 1;
}

void lc_vw_start_round(loco_manager_t *m, uint64_t now)
{
	struct lc_view *vw = m->vw;
	struct lc_msg *msg;

	vw->pn = proposal(vw, vw->prop);
	if (same_members(vw, vw->prop, vw->pn))
		return;
	vw->round = (vw->round > vw->seen_round ? vw->round : vw->seen_round) + 1;
	vw->ballot = vw->round << 32 | m->node_id;
	vw->target = vw->id + 1;
	vw->phase = 1;
	vw->ngot = 0;
	vw->best_ab = 0;
	memset(vw->got, 0, sizeof(vw->got));
	vw->deadline = now + vw_fail_ns(m);
	lc_log_info("manager: proposing view %llu (%u member(s), ballot %llx)",
	            (unsigned long long)vw->target, vw->pn, (unsigned long long)vw->ballot);
	msg = lc_vw_msg(m, LC_VC_PREPARE, vw->target);
	msg->u.vc.ballot = vw->ballot;
	lc_vw_broadcast(m, msg);
	if (lc_vw_acc_prepare(m, vw->target, vw->ballot) && m->tx_msg->u.vc.kind == LC_VC_PROMISE) {
		msg = m->tx_msg;
		lc_vw_on_promise(m, m->node_id, msg->u.vc.view, msg->u.vc.ballot, msg->u.vc.abal,
		                 msg->u.vc.m, msg->u.vc.n);
	}
}

static int count_vote(struct lc_view *vw, uint32_t from)
{
	int i = vw_idx(vw, from);

	if (i == NO_INDEX || vw->got[i])
		return 0;
	vw->got[i] = 1;
	vw->ngot++;
	return 1;
}

void lc_vw_on_promise(loco_manager_t *m, uint32_t from, uint64_t t, uint64_t b, uint64_t abal,
                      const struct lc_member_info *val, uint32_t n)
{
	struct lc_view *vw = m->vw;
	struct lc_msg *msg;

	if (vw->phase != 1 || t != vw->target || b != vw->ballot || !count_vote(vw, from))
		return;
	if (abal > vw->best_ab && n <= LC_MAX_MEMBERS) {
		/* a value may have been chosen at abal: it is the only one we may propose */
		vw->best_ab = abal;
		memmove(vw->prop, val, n * sizeof(*val));
		vw->pn = n;
	}
	if (vw->ngot < vw_majority(vw->n))
		return;
	vw->phase = 2;
	vw->ngot = 0;
	memset(vw->got, 0, sizeof(vw->got));
	msg = lc_vw_msg(m, LC_VC_ACCEPT, vw->target);
	msg->u.vc.ballot = vw->ballot;
	memcpy(msg->u.vc.m, vw->prop, vw->pn * sizeof(vw->prop[0]));
	msg->u.vc.n = vw->pn;
	lc_vw_broadcast(m, msg);
	if (lc_vw_acc_accept(m, vw->target, vw->ballot, vw->prop, vw->pn) &&
	    m->tx_msg->u.vc.kind == LC_VC_ACCEPTED)
		lc_vw_on_accepted(m, m->node_id, vw->target, vw->ballot);
}

/*
 * tell_left -- before the VIEW: which members it drops said LEAVE here. A
 * member may get the VIEW before a leaver's own LEAVE (another connection),
 * and would take the leaver for failed; on ours this comes first. So do
 * the leavers of the last views: a member may skip to this one.
 */
static void tell_left(loco_manager_t *m)
{
	struct lc_view *vw = m->vw;

	lc_vw_tell_gone(m, NULL, vw->target > GONE_VIEWS ? vw->target - GONE_VIEWS - 1 : 0);

	for (uint32_t i = 0; i < vw->n; i++) {
		const struct lc_member_info *x = &vw->v[i].info;
		struct lc_msg *msg;
		int kept = 0;

		for (uint32_t j = 0; j < vw->pn && !kept; j++)
			kept = vw->prop[j].node == x->node && vw->prop[j].inc == x->inc;
		if (kept || !vw->v[i].left || x->node == m->node_id)
			continue;
		msg = lc_vw_msg(m, LC_VC_LEFT, vw->target);
		msg->u.vc.node = x->node;
		msg->u.vc.inc = x->inc;
		lc_vw_broadcast(m, msg);
	}
}

/* commit -- a majority accepted: send VIEW to the members of both views, install it. */
static void commit(loco_manager_t *m)
{
	struct lc_view *vw = m->vw;
	struct lc_msg *msg;
	uint32_t n = vw->pn;

	tell_left(m);
	msg = lc_vw_msg(m, LC_VC_VIEW, vw->target); /* the same buffer as tell_left()'s */

	memcpy(msg->u.vc.m, vw->prop, n * sizeof(vw->prop[0]));
	msg->u.vc.n = n;
	memcpy(vw->scratch, vw->prop, n * sizeof(vw->prop[0]));
	lc_vw_broadcast(m, msg);
	for (uint32_t i = 0; i < n; i++)
		if (vw_idx(vw, vw->scratch[i].node) == NO_INDEX)
			lc_vw_send_to(m, vw->scratch[i].node, msg);
	vw->phase = 0;
	vw->backoff = 0;
	lc_vw_install(m, vw->target, vw->scratch, n);
}

void lc_vw_on_accepted(loco_manager_t *m, uint32_t from, uint64_t t, uint64_t b)
{
	struct lc_view *vw = m->vw;

	if (vw->phase != 2 || t != vw->target || b != vw->ballot || !count_vote(vw, from))
		return;
	if (vw->ngot >= vw_majority(vw->n))
		commit(m);
}
