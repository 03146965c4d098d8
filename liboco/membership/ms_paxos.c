/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_paxos.c -- single-decree Paxos per view number (ms.h): the
 * coordinator proposes the next view (the installed one minus removals,
 * plus joins), the members of the installed view accept it, a majority
 * commits it.
 */
#include <string.h>

#include "ms_impl.h"

/* proposal -- the next view we want: ours minus removals, plus joins. Its length. */
static uint32_t proposal(struct lc_ms *ms, struct lc_member_info *out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < ms->n; i++)
		if (!ms_rem_has(ms, ms->v[i].info.node, ms->v[i].info.inc))
			out[n++] = ms->v[i].info;
	for (uint32_t j = 0; j < ms->nj && n < LC_MAX_MEMBERS; j++) {
		int dup = 0;

		for (uint32_t i = 0; i < n; i++)
			if (out[i].node == ms->joins[j].info.node)
				dup = 1;
		if (!dup)
			out[n++] = ms->joins[j].info;
	}
	return n;
}

static int same_members(struct lc_ms *ms, const struct lc_member_info *l, uint32_t n)
{
	if (n != ms->n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (!ms_has(ms, l[i].node, l[i].inc))
			return 0;
	return 1;
}

void ms_backoff(struct lc_ms *ms)
{
	uint64_t f = ms->cfg.fail_ns;

	ms->phase = 0;
	ms->backoff = ms->now + f / 8 + ms_random(ms, f / 4);
}

/* acc_prepare -- the acceptor's answer to PREPARE(@t, @b), in ms->tx; 0: no answer. */
int ms_acc_prepare(struct lc_ms *ms, uint64_t t, uint64_t b)
{
	struct lc_msg *msg;

	if (ms->state != LC_VS_NORMAL || t != ms->id + 1)
		return 0;
	if (b <= ms->pb) {
		msg = ms_msg(ms, LC_VC_NACK, t);
		msg->u.vc.ballot = ms->pb;
		return 1;
	}
	ms->pb = b;
	msg = ms_msg(ms, LC_VC_PROMISE, t);
	msg->u.vc.ballot = b;
	msg->u.vc.abal = ms->ab;
	if (ms->ab != 0) {
		memcpy(msg->u.vc.m, ms->av, ms->an * sizeof(ms->av[0]));
		msg->u.vc.n = ms->an;
	}
	return 1;
}

/* acc_accept -- the acceptor's answer to ACCEPT(@t, @b, @val), in ms->tx. */
int ms_acc_accept(struct lc_ms *ms, uint64_t t, uint64_t b, const struct lc_member_info *val,
                  uint32_t n)
{
	struct lc_msg *msg;

	if (ms->state != LC_VS_NORMAL || t != ms->id + 1)
		return 0;
	if (b < ms->pb) {
		msg = ms_msg(ms, LC_VC_NACK, t);
		msg->u.vc.ballot = ms->pb;
		return 1;
	}
	ms->pb = ms->ab = b;
	if (val != ms->av)
		memmove(ms->av, val, n * sizeof(*val));
	ms->an = n;
	msg = ms_msg(ms, LC_VC_ACCEPTED, t);
	msg->u.vc.ballot = b;
	return 1;
}

void ms_start_round(struct lc_ms *ms)
{
	struct lc_msg *msg;

	ms->pn = proposal(ms, ms->prop);
	if (same_members(ms, ms->prop, ms->pn))
		return;
	ms->round = (ms->round > ms->seen_round ? ms->round : ms->seen_round) + 1;
	ms->ballot = ms->round << 32 | ms->self.node;
	ms->target = ms->id + 1;
	ms->phase = 1;
	ms->ngot = 0;
	ms->best_ab = 0;
	memset(ms->got, 0, sizeof(ms->got));
	ms->deadline = ms->now + ms->cfg.fail_ns;
	ms_log(ms, LC_LOG_INFO, "manager: proposing view %llu (%u member(s), ballot %llx)",
	       (unsigned long long)ms->target, ms->pn, (unsigned long long)ms->ballot);
	msg = ms_msg(ms, LC_VC_PREPARE, ms->target);
	msg->u.vc.ballot = ms->ballot;
	ms_broadcast(ms, msg);
	if (ms_acc_prepare(ms, ms->target, ms->ballot) && ms->tx->u.vc.kind == LC_VC_PROMISE) {
		msg = ms->tx;
		ms_on_promise(ms, ms->self.node, msg->u.vc.view, msg->u.vc.ballot, msg->u.vc.abal,
		              msg->u.vc.m, msg->u.vc.n);
	}
}

static int count_vote(struct lc_ms *ms, uint32_t from)
{
	int i = ms_idx(ms, from);

	if (i == NO_INDEX || ms->got[i])
		return 0;
	ms->got[i] = 1;
	ms->ngot++;
	return 1;
}

void ms_on_promise(struct lc_ms *ms, uint32_t from, uint64_t t, uint64_t b, uint64_t abal,
                   const struct lc_member_info *val, uint32_t n)
{
	struct lc_msg *msg;

	if (ms->phase != 1 || t != ms->target || b != ms->ballot || !count_vote(ms, from))
		return;
	if (abal > ms->best_ab && n <= LC_MAX_MEMBERS) {
		/* a value may have been chosen at abal: it is the only one we may propose */
		ms->best_ab = abal;
		memmove(ms->prop, val, n * sizeof(*val));
		ms->pn = n;
	}
	if (ms->ngot < ms_majority(ms->n))
		return;
	ms->phase = 2;
	ms->ngot = 0;
	memset(ms->got, 0, sizeof(ms->got));
	msg = ms_msg(ms, LC_VC_ACCEPT, ms->target);
	msg->u.vc.ballot = ms->ballot;
	memcpy(msg->u.vc.m, ms->prop, ms->pn * sizeof(ms->prop[0]));
	msg->u.vc.n = ms->pn;
	ms_broadcast(ms, msg);
	if (ms_acc_accept(ms, ms->target, ms->ballot, ms->prop, ms->pn) &&
	    ms->tx->u.vc.kind == LC_VC_ACCEPTED)
		ms_on_accepted(ms, ms->self.node, ms->target, ms->ballot);
}

/*
 * tell_left -- before the VIEW: which members it drops said LEAVE here. A
 * member may get the VIEW before a leaver's own LEAVE (another connection),
 * and would take the leaver for failed; on ours this comes first. So do
 * the leavers of the last views: a member may skip to this one.
 */
static void tell_left(struct lc_ms *ms)
{
	ms_tell_gone(ms, 0, ms->target > GONE_VIEWS ? ms->target - GONE_VIEWS - 1 : 0);

	for (uint32_t i = 0; i < ms->n; i++) {
		const struct lc_member_info *x = &ms->v[i].info;
		struct lc_msg *msg;
		int kept = 0;

		for (uint32_t j = 0; j < ms->pn && !kept; j++)
			kept = ms->prop[j].node == x->node && ms->prop[j].inc == x->inc;
		if (kept || !ms->v[i].left || x->node == ms->self.node)
			continue;
		msg = ms_msg(ms, LC_VC_LEFT, ms->target);
		msg->u.vc.node = x->node;
		msg->u.vc.inc = x->inc;
		ms_broadcast(ms, msg);
	}
}

/* commit -- a majority accepted: send VIEW to the members of both views, install it. */
static void commit(struct lc_ms *ms)
{
	struct lc_msg *msg;
	uint32_t n = ms->pn;

	tell_left(ms);
	msg = ms_msg(ms, LC_VC_VIEW, ms->target); /* the same buffer as tell_left()'s */

	memcpy(msg->u.vc.m, ms->prop, n * sizeof(ms->prop[0]));
	msg->u.vc.n = n;
	memcpy(ms->scratch, ms->prop, n * sizeof(ms->prop[0]));
	ms_broadcast(ms, msg);
	for (uint32_t i = 0; i < n; i++)
		if (ms_idx(ms, ms->scratch[i].node) == NO_INDEX)
			ms_send_to(ms, ms->scratch[i].node, msg);
	ms->phase = 0;
	ms->backoff = 0;
	ms_install(ms, ms->target, ms->scratch, n);
}

void ms_on_accepted(struct lc_ms *ms, uint32_t from, uint64_t t, uint64_t b)
{
	if (ms->phase != 2 || t != ms->target || b != ms->ballot || !count_vote(ms, from))
		return;
	if (ms->ngot >= ms_majority(ms->n))
		commit(ms);
}
