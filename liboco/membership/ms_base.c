/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_base.c -- what every part of the machine uses (ms_impl.h): making
 * and freeing it, its random numbers, its messages and how they are sent,
 * the questions its driver asks, the pending removals. It calls no other
 * file of the machine.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void ms_log(struct lc_ms *ms, int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (level > ms->cfg.log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	ms->ops->log(ms->ctx, level, line);
}

void ms_event(struct lc_ms *ms, int type, uint64_t view, uint32_t n)
{
	ms->ops->event(ms->ctx, type, view, n);
}

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

/* ms_send_view -- our installed view to @node, after the leavers it may not know of. */
void ms_send_view(struct lc_ms *ms, uint32_t node)
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

/* ms_coordinator -- the lowest-id member of the view that we do not suspect. */
uint32_t ms_coordinator(const struct lc_ms *ms)
{
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->v[i].info.node == ms->self.node || ms->v[i].susp_ns == 0)
			return ms->v[i].info.node;
	return ms->self.node;
}

/* ms_rem_has -- whether (@node, @inc) is to be removed in the next view */
int ms_rem_has(const struct lc_ms *ms, uint32_t node, uint64_t inc)
{
	for (uint32_t i = 0; i < ms->nr; i++)
		if (ms->rems[i].info.node == node && ms->rems[i].info.inc == inc)
			return 1;
	return 0;
}

void ms_rem_add(struct lc_ms *ms, const struct lc_member_info *mi, int left)
{
	if (ms_rem_has(ms, mi->node, mi->inc) || ms->nr >= LC_MAX_MEMBERS)
		return;
	ms->rems[ms->nr++] = (struct change){.info = *mi, .since = ms->now, .left = left};
}
