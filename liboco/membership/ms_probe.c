/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_probe.c -- suspicion confirmed by probes (ms.h): the coordinator
 * asks up to PROBERS other members whether they heard a suspect within
 * its detection bound; it is removed only when none did.
 */
#include "ms_impl.h"

/* ms_suspect_idx -- we suspect member @i (silence, a lost connection, a failed link). */
void ms_suspect_idx(struct lc_ms *ms, int i)
{
	struct vmember *x = &ms->v[i];

	if (x->info.node == ms->self.node || x->susp_ns != 0 || ms->leaving)
		return;
	x->susp_ns = ms->now;
	ms_log(ms, LC_LOG_INFO, "manager: suspecting node %u", x->info.node);
}

/* coord_suspect -- as coordinator: have @i probed (or decided: it left). */
void ms_coord_suspect(struct lc_ms *ms, int i)
{
	struct vmember *x = &ms->v[i];
	struct probe *p = NULL;
	struct lc_msg *msg;
	int asked = 0;

	if (ms_rem_has(ms, x->info.node, x->info.inc))
		return;
	for (unsigned k = 0; k < PROBES; k++) {
		if (ms->probe[k].node == x->info.node)
			return; /* under way */
		if (ms->probe[k].node == 0 && p == NULL)
			p = &ms->probe[k];
	}
	if (p == NULL)
		return;
	msg = ms_msg(ms, LC_VC_PROBE_REQ, ms->id);
	msg->u.vc.node = x->info.node;
	msg->u.vc.inc = x->info.inc;
	for (uint32_t j = 0; j < ms->n && asked < PROBERS; j++) {
		if ((int)j == i || ms->v[j].info.node == ms->self.node || ms->v[j].susp_ns != 0 ||
		    !ms->ops->connected(ms->ctx, ms->v[j].info.node))
			continue;
		ms_send_to(ms, ms->v[j].info.node, msg);
		asked++;
	}
	*p = (struct probe){.node = x->info.node,
	                    .inc = x->info.inc,
	                    .start = ms->now,
	                    .deadline = ms->now + 3 * ms_detect_bound(ms, x) / 2,
	                    .asked = asked};
	ms_log(ms, LC_LOG_INFO, "manager: node %u suspected: %d member(s) asked to probe it",
	       x->info.node, asked);
}

/* probes_decide -- the coordinator's probes that are done: confirmed, or cleared. */
void ms_probes_decide(struct lc_ms *ms)
{
	if (ms_detect_unsure(ms))
		return; /* our own silence, not the suspects': decide nothing yet */
	for (unsigned k = 0; k < PROBES; k++) {
		struct probe *p = &ms->probe[k];
		int i = p->node ? ms_idx(ms, p->node) : NO_INDEX;

		if (p->node == 0)
			continue;
		if (i == NO_INDEX || ms->v[i].info.inc != p->inc) {
			p->node = 0;
			continue;
		}
		if (p->alive || ms->v[i].heard_ns > p->start) {
			ms_log(ms, LC_LOG_INFO, "manager: node %u answered a probe: kept", p->node);
			ms->v[i].susp_ns = 0;
			/* others hear it: no new probe for a while */
			ms->v[i].quiet_ns = ms->now + ms_detect_bound(ms, &ms->v[i]);
			p->node = 0;
			continue;
		}
		if (p->answers < p->asked && ms->now < p->deadline)
			continue;
		if (ms->now - ms->v[i].heard_ns < ms_detect_bound(ms, &ms->v[i]))
			continue; /* we heard it within its bound: not yet */
		if (p->answers == 0) {
			/*
			 * Nobody else answered (or nobody we do not suspect was
			 * there to ask: then we are cut off ourselves, and no
			 * majority would follow anyway): never on our word alone.
			 */
			p->node = 0;
			continue;
		}
		ms_log(ms, LC_LOG_WARN,
		       "manager: node %u confirmed failed: nothing heard from it for %llu "
		       "ms by us or %d prober(s) (its bound %llu ms; %u gaps seen, %llu ms on "
		       "average, the longest %llu ms)",
		       p->node, (unsigned long long)((ms->now - ms->v[i].heard_ns) / 1000000),
		       p->answers, (unsigned long long)(ms_detect_bound(ms, &ms->v[i]) / 1000000),
		       (unsigned)ms->v[i].det.samples,
		       (unsigned long long)(ms->v[i].det.mean / 1000000),
		       (unsigned long long)(ms->v[i].det.max_gap / 1000000));
		ms_rem_add(ms, &ms->v[i].info, 0);
		p->node = 0;
	}
}

/* probes_answer -- as prober: answer the probes whose outcome is known. */
void ms_probes_answer(struct lc_ms *ms)
{
	int unsure = ms_detect_unsure(ms);

	for (unsigned k = 0; k < PROBES; k++) {
		struct preq *q = &ms->preq[k];
		int i = q->node ? ms_idx(ms, q->node) : NO_INDEX;
		struct lc_msg *msg;
		int alive;

		if (q->node == 0)
			continue;
		if (i == NO_INDEX || ms->v[i].info.inc != q->inc) {
			q->node = 0;
			continue;
		}
		if (ms->v[i].heard_ns > q->start)
			alive = 1;
		else if (!unsure && ms->now - ms->v[i].heard_ns >= ms_detect_bound(ms, &ms->v[i]))
			alive = 0;
		else
			continue;
		msg = ms_msg(ms, LC_VC_PROBE_ACK, ms->id);
		msg->u.vc.node = q->node;
		msg->u.vc.inc = q->inc;
		msg->u.vc.flag = (uint32_t)alive;
		ms_send_to(ms, q->coord, msg);
		q->node = 0;
	}
}
