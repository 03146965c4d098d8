/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view_probe.c -- suspicion confirmed by probes (view.h): the coordinator
 * asks up to PROBERS other members whether they heard a suspect within
 * the probe bound; it is removed only when none did. Progress thread,
 * m->lock held.
 */
#include "log.h"
#include "view_impl.h"

/* coord_suspect -- as coordinator: have @i probed (or decided: it left). */
void lc_vw_coord_suspect(loco_manager_t *m, int i, uint64_t now)
{
	struct lc_view *vw = m->vw;
	struct vmember *x = &vw->v[i];
	struct probe *p = NULL;
	struct lc_msg *msg;
	int asked = 0;

	if (lc_vw_rem_has(vw, x->info.node, x->info.inc))
		return;
	for (unsigned k = 0; k < PROBES; k++) {
		if (vw->probe[k].node == x->info.node)
			return; /* under way */
		if (vw->probe[k].node == 0 && p == NULL)
			p = &vw->probe[k];
	}
	if (p == NULL)
		return;
	msg = lc_vw_msg(m, LC_VC_PROBE_REQ, vw->id);
	msg->u.vc.node = x->info.node;
	msg->u.vc.inc = x->info.inc;
	for (uint32_t j = 0; j < vw->n && asked < PROBERS; j++) {
		struct lc_member *mb;

		if ((int)j == i || vw->v[j].info.node == m->node_id || vw->v[j].susp_ns != 0)
			continue;
		mb = lc_member_find(m, vw->v[j].info.node);
		if (mb == NULL || mb->conn == NULL || mb->conn->state != LC_CONN_UP)
			continue;
		lc_conn_send(mb->conn, msg);
		asked++;
	}
	*p = (struct probe){.node = x->info.node,
	                    .inc = x->info.inc,
	                    .start = now,
	                    .deadline = now + vw_fail_ns(m) + vw_fail_ns(m) / 2,
	                    .asked = asked};
	lc_log_info("manager: node %u suspected: %d member(s) asked to probe it", x->info.node,
	            asked);
}

void lc_vw_rem_add(struct lc_view *vw, const struct lc_member_info *mi, int left)
{
	if (lc_vw_rem_has(vw, mi->node, mi->inc) || vw->nr >= LC_MAX_MEMBERS)
		return;
	vw->rems[vw->nr++] = (struct change){.info = *mi, .since = lc_now_ns(), .left = left};
}

/* probes_decide -- the coordinator's probes that are done: confirmed, or cleared. */
void lc_vw_probes_decide(loco_manager_t *m, uint64_t now)
{
	struct lc_view *vw = m->vw;
	uint64_t pbound = vw_fail_ns(m);

	for (unsigned k = 0; k < PROBES; k++) {
		struct probe *p = &vw->probe[k];
		int i = p->node ? vw_idx(vw, p->node) : NO_INDEX;

		if (p->node == 0)
			continue;
		if (i == NO_INDEX || vw->v[i].info.inc != p->inc) {
			p->node = 0;
			continue;
		}
		if (p->alive || vw->v[i].heard_ns > p->start) {
			lc_log_info("manager: node %u answered a probe: kept", p->node);
			vw->v[i].susp_ns = 0;
			vw->v[i].quiet_ns =
			    now + vw_fail_ns(m); /* others hear it: no new probe yet */
			p->node = 0;
			continue;
		}
		if (p->answers < p->asked && now < p->deadline)
			continue;
		if (now - vw->v[i].heard_ns < pbound)
			continue; /* we heard it within the probe bound: not yet */
		if (p->answers == 0) {
			/*
			 * Nobody else answered (or nobody we do not suspect was
			 * there to ask: then we are cut off ourselves, and no
			 * majority would follow anyway): never on our word alone.
			 */
			p->node = 0;
			continue;
		}
		lc_log_warn("manager: node %u confirmed failed: nothing heard from it for %llu "
		            "ms by us or %d prober(s)",
		            p->node, (unsigned long long)((now - vw->v[i].heard_ns) / 1000000),
		            p->answers);
		lc_vw_rem_add(vw, &vw->v[i].info, 0);
		p->node = 0;
	}
}

/* probes_answer -- as prober: answer the probes whose outcome is known. */
void lc_vw_probes_answer(loco_manager_t *m, uint64_t now)
{
	struct lc_view *vw = m->vw;
	uint64_t pbound = vw_fail_ns(m);

	for (unsigned k = 0; k < PROBES; k++) {
		struct preq *q = &vw->preq[k];
		int i = q->node ? vw_idx(vw, q->node) : NO_INDEX;
		struct lc_msg *msg;
		int alive;

		if (q->node == 0)
			continue;
		if (i == NO_INDEX || vw->v[i].info.inc != q->inc) {
			q->node = 0;
			continue;
		}
		if (vw->v[i].heard_ns > q->start)
			alive = 1;
		else if (now - vw->v[i].heard_ns >= pbound)
			alive = 0;
		else
			continue;
		msg = lc_vw_msg(m, LC_VC_PROBE_ACK, vw->id);
		msg->u.vc.node = q->node;
		msg->u.vc.inc = q->inc;
		msg->u.vc.flag = (uint32_t)alive;
		lc_vw_send_to(m, q->coord, msg);
		q->node = 0;
	}
}
