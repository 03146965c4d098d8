/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view.c -- the view-change protocol (view.h, docs/membership.md): Paxos
 * per view number led by a coordinator, suspicion confirmed by probes,
 * partition detection, exclusion and rejoining. Progress thread, m->lock
 * held, except where a function says otherwise.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "dial.h"
#include "log.h"
#include "manager.h"
#include "view_impl.h"

int lc_view_init(loco_manager_t *m)
{
	struct lc_view *vw = calloc(1, sizeof(*vw));

	if (vw == NULL)
		return -ENOMEM;
	vw->v = calloc(LC_MAX_MEMBERS, sizeof(*vw->v));
	vw->av = calloc(LC_MAX_MEMBERS, sizeof(*vw->av));
	vw->prop = calloc(LC_MAX_MEMBERS, sizeof(*vw->prop));
	vw->joins = calloc(LC_MAX_MEMBERS, sizeof(*vw->joins));
	vw->rems = calloc(LC_MAX_MEMBERS, sizeof(*vw->rems));
	vw->contacts = calloc(2 * LC_MAX_MEMBERS, sizeof(*vw->contacts));
	vw->scratch = calloc(LC_MAX_MEMBERS, sizeof(*vw->scratch));
	vw->state = LC_VS_JOINING;
	vw->partitioned = 1;
	m->vw = vw;
	if (vw->v == NULL || vw->av == NULL || vw->prop == NULL || vw->joins == NULL ||
	    vw->rems == NULL || vw->contacts == NULL || vw->scratch == NULL) {
		lc_view_fini(m);
		return -ENOMEM;
	}
	return 0;
}

void lc_view_fini(loco_manager_t *m)
{
	struct lc_view *vw = m->vw;

	if (vw == NULL)
		return;
	free(vw->v);
	free(vw->av);
	free(vw->prop);
	free(vw->joins);
	free(vw->rems);
	free(vw->contacts);
	free(vw->scratch);
	free(vw);
	m->vw = NULL;
}

static int partition_check(loco_manager_t *m, uint64_t now);

/* event -- queue an application event (dispatched without the lock). */
static void event(loco_manager_t *m, loco_event_type_t type, uint64_t view, uint32_t n)
{
	struct lc_view *vw = m->vw;

	if (vw->fn == NULL || vw->evt - vw->evh >= EVENTS)
		return;
	vw->evq[vw->evt++ % EVENTS] =
	    (loco_event_t){.type = type, .view = view, .nmembers = n, .incarnation = m->inc};
}

void lc_view_dispatch(loco_manager_t *m)
{
	struct lc_view *vw = m->vw;
	loco_event_t ev[EVENTS];
	loco_event_fn *fn;
	void *arg;
	unsigned n = 0;

	if (__atomic_load_n(&vw->evt, __ATOMIC_RELAXED) == vw->evh)
		return; /* only this thread queues, under m->lock */
	pthread_mutex_lock(&m->lock);
	while (vw->evh != vw->evt && n < EVENTS)
		ev[n++] = vw->evq[vw->evh++ % EVENTS];
	fn = vw->fn;
	arg = vw->fn_arg;
	pthread_mutex_unlock(&m->lock);
	for (unsigned i = 0; i < n && fn != NULL; i++)
		fn(m, &ev[i], arg);
}

int loco_manager_set_event_fn(loco_manager_t *m, loco_event_fn *fn, void *arg)
{
	if (m == NULL)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	m->vw->fn = fn;
	m->vw->fn_arg = arg;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int loco_manager_partitioned(loco_manager_t *m)
{
	uint64_t t, now;

	if (m == NULL)
		return 0;
	if (__atomic_load_n(&m->vw->partitioned, __ATOMIC_ACQUIRE))
		return 1;
	/*
	 * The view timers did not run for a failure bound (the process was
	 * stopped, say): nothing was heard meanwhile, and the flag is stale.
	 * Without this, a stopped node that resumes acts on its old view until
	 * its progress thread runs (a lock's old host granted itself its word).
	 */
	t = __atomic_load_n(&m->vw->timers_ns, __ATOMIC_ACQUIRE);
	now = lc_coarse_ns(); /* polled by every wait loop: a tick late at most, never early */
	return t != 0 && now > t && now - t > vw_fail_ns(m);
}

uint64_t loco_view(loco_manager_t *m)
{
	uint64_t id;

	if (m == NULL)
		return 0;
	pthread_mutex_lock(&m->lock);
	id = m->view_id;
	pthread_mutex_unlock(&m->lock);
	return id;
}

int lc_view_state(loco_manager_t *m)
{
	return m->vw->state;
}

int lc_view_in(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	int i = vw_idx(m->vw, node);

	return i != NO_INDEX && m->vw->v[i].info.inc == inc;
}

int lc_view_said_leave(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	int i = vw_idx(m->vw, node);

	return i != NO_INDEX && m->vw->v[i].info.inc == inc && m->vw->v[i].left;
}

uint64_t lc_view_inc(loco_manager_t *m, uint32_t node)
{
	int i = vw_idx(m->vw, node);

	return i == NO_INDEX ? 0 : m->vw->v[i].info.inc;
}

int lc_view_members(loco_manager_t *m, struct lc_member_info *out, uint32_t max)
{
	uint32_t n = m->vw->n < max ? m->vw->n : max;

	for (uint32_t i = 0; i < n; i++)
		out[i] = m->vw->v[i].info;
	return (int)n;
}

void lc_view_heard(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	struct lc_view *vw = m->vw;
	int i = vw_idx(vw, node);
	uint64_t now;

	if (i == NO_INDEX || vw->v[i].info.inc != inc)
		return;
	now = lc_now_ns();
	vw->v[i].heard_ns = now;
	if (vw->v[i].susp_ns != 0 && now > vw->v[i].susp_ns) {
		lc_log_info("manager: node %u heard again: no longer suspected", node);
		vw->v[i].susp_ns = 0;
	}
}

void lc_view_suspect(loco_manager_t *m, uint32_t node)
{
	struct lc_view *vw = m->vw;
	int i = vw_idx(vw, node);

	if (i == NO_INDEX || node == m->node_id || vw->v[i].susp_ns != 0 || m->leaving)
		return;
	vw->v[i].susp_ns = lc_now_ns();
	lc_log_info("manager: suspecting node %u", node);
}

/* send_to -- @msg to @node over its control connection, if it has one up. */
void lc_vw_send_to(loco_manager_t *m, uint32_t node, struct lc_msg *msg)
{
	struct lc_member *mb = lc_member_find(m, node);

	if (mb != NULL && mb->conn != NULL && mb->conn->state == LC_CONN_UP &&
	    !lc_conn_is_dead(mb->conn))
		lc_conn_send(mb->conn, msg);
}

/* broadcast -- @msg to every other member of the installed view. */
void lc_vw_broadcast(loco_manager_t *m, struct lc_msg *msg)
{
	for (uint32_t i = 0; i < m->vw->n; i++)
		if (m->vw->v[i].info.node != m->node_id)
			lc_vw_send_to(m, m->vw->v[i].info.node, msg);
}

struct lc_msg *lc_vw_msg(loco_manager_t *m, uint32_t kind, uint64_t view)
{
	struct lc_msg *msg = m->tx_msg;

	memset(msg, 0, offsetof(struct lc_msg, u) + offsetof(__typeof__(msg->u.vc), m));
	msg->type = LC_MSG_VC;
	msg->u.vc.kind = kind;
	msg->u.vc.view = view;
	return msg;
}

/*
 * tell_gone -- LEFT for each leaver our views dropped after view @since,
 * to @c (NULL: to every member of the view), before a VIEW that follows.
 * A member that skipped the view dropping a leaver (it got the next one
 * first, from another coordinator) may not have had the leaver's own
 * LEAVE yet, and would take the leaver for failed.
 */
void lc_vw_tell_gone(loco_manager_t *m, struct lc_conn *c, uint64_t since)
{
	struct lc_view *vw = m->vw;
	uint32_t first = vw->ngone > GONE ? vw->ngone - GONE : 0;

	for (uint32_t k = first; k < vw->ngone; k++) {
		const struct gone *g = &vw->gone[k % GONE];
		struct lc_msg *msg;

		if (g->view <= since)
			continue;
		msg = lc_vw_msg(m, LC_VC_LEFT, g->view);
		msg->u.vc.node = g->node;
		msg->u.vc.inc = g->inc;
		if (c != NULL)
			lc_conn_send(c, msg);
		else
			lc_vw_broadcast(m, msg);
	}
}

/* send_view -- our installed view to @c, after the leavers it may not know of. */
static void send_view(loco_manager_t *m, struct lc_conn *c)
{
	struct lc_view *vw = m->vw;
	struct lc_msg *msg;

	if (vw->state != LC_VS_NORMAL || c == NULL || c->state != LC_CONN_UP)
		return;
	lc_vw_tell_gone(m, c, 0);
	msg = lc_vw_msg(m, LC_VC_VIEW, vw->id);
	for (uint32_t i = 0; i < vw->n; i++)
		msg->u.vc.m[i] = vw->v[i].info;
	msg->u.vc.n = vw->n;
	lc_conn_send(c, msg);
}

void lc_view_send_hb(loco_manager_t *m, struct lc_conn *c)
{
	lc_conn_send(c, lc_vw_msg(m, LC_VC_HB, m->vw->state == LC_VS_NORMAL ? m->vw->id : 0));
}

/* coordinator -- the lowest-id member of the view that we do not suspect. */
static uint32_t coordinator(struct lc_view *vw, uint32_t me)
{
	for (uint32_t i = 0; i < vw->n; i++)
		if (vw->v[i].info.node == me || vw->v[i].susp_ns == 0)
			return vw->v[i].info.node;
	return me;
}

static void contacts_add(struct lc_view *vw, const struct lc_member_info *mi, uint32_t me)
{
	if (mi->node == me || vw->ncontacts >= 2 * LC_MAX_MEMBERS)
		return;
	for (uint32_t i = 0; i < vw->ncontacts; i++)
		if (strcmp(vw->contacts[i].ctrl_addr, mi->ctrl_addr) == 0)
			return;
	vw->contacts[vw->ncontacts++] = *mi;
}

/* excluded -- a newer view @id left us out: drop everyone; rejoin unless told not to. */
static void excluded(loco_manager_t *m, uint64_t id, const struct lc_member_info *list, uint32_t n)
{
	struct lc_view *vw = m->vw;
	struct timespec ts;
	uint64_t inc;

	lc_log_warn("manager: excluded: view %llu (%u members) does not have node %u "
	            "(incarnation %llx)%s",
	            (unsigned long long)id, n, m->node_id, (unsigned long long)m->inc,
	            m->cfg.rejoin ? "; rejoining as a new incarnation" : "");
	event(m, LOCO_EVENT_EXCLUDED, id, n);
	vw->ncontacts = 0;
	for (uint32_t i = 0; i < n; i++)
		contacts_add(vw, &list[i], m->node_id);
	for (uint32_t i = 0; i < vw->n; i++)
		contacts_add(vw, &vw->v[i].info, m->node_id);
	vw->n = 0;
	vw->id = 0;
	m->view_id = id; /* our objects' peer_leave callbacks carry the view that left us out */
	vw->phase = 0;
	vw->nj = vw->nr = 0;
	memset(vw->probe, 0, sizeof(vw->probe));
	memset(vw->preq, 0, sizeof(vw->preq));
	__atomic_store_n(&vw->partitioned, 1, __ATOMIC_SEQ_CST); /* before the members go */
	lc_chan_excluded(m); /* after a rejoin, channels wait for these peers again */
	while (m->members != NULL)
		lc_member_remove(m, m->members, 0, "we were excluded from the view");
	for (struct lc_conn *c = m->conns; c != NULL; c = c->next)
		lc_conn_kill(c, "excluded");
	m->view_id = 0;
	if (!m->cfg.rejoin) {
		vw->state = LC_VS_EXCLUDED;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	inc = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
	      (randombytes_random() & 0xfff);
	if (inc <= m->inc)
		inc = m->inc + 1 + (randombytes_random() & 0xfff);
	__atomic_store_n(&m->inc, inc, __ATOMIC_RELEASE);
	vw->state = LC_VS_REJOINING;
	vw->next_rejoin = 0;
}

/* pending_prune -- forget changes the installed view made (or made moot). */
static void pending_prune(struct lc_view *vw, uint64_t now, uint64_t join_limit)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < vw->nj; i++) {
		int x = vw_idx(vw, vw->joins[i].info.node);

		if ((x != NO_INDEX && vw->v[x].info.inc >= vw->joins[i].info.inc) ||
		    now - vw->joins[i].since > join_limit)
			continue;
		vw->joins[k++] = vw->joins[i];
	}
	vw->nj = k;
	k = 0;
	for (uint32_t i = 0; i < vw->nr; i++) {
		int x = vw_idx(vw, vw->rems[i].info.node);

		if (x == NO_INDEX || vw->v[x].info.inc != vw->rems[i].info.inc)
			continue;
		if (!vw->rems[i].left && vw->v[x].heard_ns > vw->rems[i].since)
			continue; /* heard since it was confirmed failed (a partition healed) */
		vw->rems[k++] = vw->rems[i];
	}
	vw->nr = k;
	for (unsigned i = 0; i < PROBES; i++) {
		if (vw->probe[i].node != 0 && !vw_in(vw, vw->probe[i].node, vw->probe[i].inc))
			vw->probe[i].node = 0;
		if (vw->preq[i].node != 0 && !vw_in(vw, vw->preq[i].node, vw->preq[i].inc))
			vw->preq[i].node = 0;
	}
}

/* install -- view @id = @list (committed): take it, or learn that we were left out. */
void lc_vw_install(loco_manager_t *m, uint64_t id, const struct lc_member_info *list, uint32_t n)
{
	struct lc_view *vw = m->vw;
	struct vmember *old = NULL;
	uint32_t old_n = vw->n, self = 0;
	int was = vw->state;
	uint64_t now = lc_now_ns();

	if (id <= vw->id && was == LC_VS_NORMAL)
		return;
	for (uint32_t i = 0; i < n; i++)
		if (list[i].node == m->node_id && list[i].inc == m->inc)
			self = 1;
	if (!self) {
		if (was == LC_VS_NORMAL && m->leaving) {
			vw->state = LC_VS_LEFT;
			__atomic_store_n(&vw->left, 1, __ATOMIC_RELEASE);
		} else if (was == LC_VS_NORMAL) {
			excluded(m, id, list, n);
		} else if (was == LC_VS_JOINING || was == LC_VS_REJOINING) {
			for (uint32_t i = 0; i < n; i++)
				contacts_add(vw, &list[i], m->node_id);
		}
		return;
	}
	if (was != LC_VS_NORMAL && was != LC_VS_JOINING && was != LC_VS_REJOINING)
		return;
	old = malloc((old_n ? old_n : 1) * sizeof(*old));
	if (old == NULL) {
		lc_log_err("manager: out of memory installing view %llu", (unsigned long long)id);
		return;
	}
	memcpy(old, vw->v, old_n * sizeof(*old));
	for (uint32_t i = 0; i < n && i < LC_MAX_MEMBERS; i++) {
		struct vmember nv = {.info = list[i], .heard_ns = now};

		for (uint32_t j = 0; j < old_n; j++)
			if (old[j].info.node == list[i].node && old[j].info.inc == list[i].inc) {
				/*
				 * as it was, said LEAVE included: a member whose LEAVE came
				 * while another's removal was agreed stays leaving, and the
				 * view that drops it next says it left, not that it failed
				 */
				nv = old[j];
				nv.info = list[i];
			}
		vw->v[i] = nv;
	}
	/* keep the list sorted by node id: the coordinator is the first unsuspected */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && vw->v[j - 1].info.node > vw->v[j].info.node; j--) {
			struct vmember t = vw->v[j];

			vw->v[j] = vw->v[j - 1];
			vw->v[j - 1] = t;
		}
	vw->n = n;
	vw->id = id;
	m->view_id = id;
	vw->pb = vw->ab = 0;
	vw->an = 0;
	vw->phase = 0;
	vw->state = LC_VS_NORMAL;
	pending_prune(vw, now, (uint64_t)m->cfg.join_timeout_ms * 1000000ull);
	lc_log_info("manager: view %llu installed: %u member(s)", (unsigned long long)id, n);
	if (was == LC_VS_REJOINING) {
		vw->settle_start = now;
		vw->settle_up = 0;
		lc_chan_rejoined(m);
	}
	partition_check(m, now);
	for (uint32_t j = 0; j < old_n; j++)
		if (old[j].left && !lc_view_in(m, old[j].info.node, old[j].info.inc))
			vw->gone[vw->ngone++ % GONE] = (struct gone){
			    .node = old[j].info.node, .inc = old[j].info.inc, .view = id};

	/* members of the old view that are not in the new one: gone (their links close first) */
	for (struct lc_member *mb = m->members, *next; mb != NULL; mb = next) {
		next = mb->next;
		for (uint32_t j = 0; j < old_n; j++) {
			if (old[j].info.node != mb->info.node || old[j].info.inc != mb->info.inc ||
			    lc_view_in(m, mb->info.node, mb->info.inc))
				continue;
			lc_member_remove(m, mb, old[j].left, "removed from the view");
			next = m->members; /* the list changed */
			break;
		}
	}
	for (uint32_t i = 0; i < vw->n; i++) {
		struct lc_member *mb = lc_member_find(m, vw->v[i].info.node);
		int is_new = 1;

		if (vw->v[i].info.node == m->node_id)
			continue;
		for (uint32_t j = 0; j < old_n; j++)
			if (old[j].info.node == vw->v[i].info.node &&
			    old[j].info.inc == vw->v[i].info.inc)
				is_new = 0;
		if (mb != NULL && mb->info.inc == vw->v[i].info.inc) {
			if (is_new && mb->conn != NULL)
				send_view(m, mb->conn); /* a joiner hears of it from its contact */
			lc_member_check_up(m, mb);
		}
	}
	free(old);
	if (was == LC_VS_JOINING) {
		m->join_ret = 0;
		m->join_done = 1;
	} else if (was == LC_VS_REJOINING) {
		lc_log_warn("manager: rejoined in view %llu as incarnation %llx",
		            (unsigned long long)id, (unsigned long long)m->inc);

		event(m, LOCO_EVENT_REJOINED, id, n);
	}
	event(m, LOCO_EVENT_VIEW, id, n);
}

void lc_view_start_alone(loco_manager_t *m)
{
	struct lc_member_info self;

	lc_self_info(m, &self);
	lc_vw_install(m, 1, &self, 1);
}

/* forward_join -- a join for the coordinator: ours to propose, or sent on. */
static void forward_join(loco_manager_t *m, const struct lc_member_info *mi)
{
	struct lc_view *vw = m->vw;
	uint32_t coord = coordinator(vw, m->node_id);
	struct lc_msg *msg;
	uint32_t j;

	for (j = 0; j < vw->nj; j++)
		if (vw->joins[j].info.node == mi->node)
			break;
	if (j == vw->nj) {
		if (vw->nj >= LC_MAX_MEMBERS)
			return;
		vw->nj++;
		vw->joins[j].since = lc_now_ns();
	}
	vw->joins[j].info = *mi;
	vw->joins[j].fwd = lc_now_ns();
	if (coord == m->node_id)
		return;
	msg = lc_vw_msg(m, LC_VC_JOIN, vw->id);
	msg->u.vc.m[0] = *mi;
	msg->u.vc.n = 1;
	lc_vw_send_to(m, coord, msg);
}

/* ------------------------------------------------------------------ */
/* messages                                                           */

void lc_view_msg(loco_manager_t *m, struct lc_conn *c, const struct lc_msg *in)
{
	struct lc_view *vw = m->vw;
	struct lc_member *mb = c->member;
	uint32_t from = c->peer.node;
	uint64_t t = in->u.vc.view;
	int i;

	if (mb == NULL)
		return;
	if (in->u.vc.kind != LC_VC_HB)
		lc_log_debug("manager: VC %u from node %u: view %llu ballot %llx abal %llx node %u "
		             "n %u",
		             in->u.vc.kind, from, (unsigned long long)t,
		             (unsigned long long)in->u.vc.ballot, (unsigned long long)in->u.vc.abal,
		             in->u.vc.node, in->u.vc.n);
	switch (in->u.vc.kind) {
	case LC_VC_HB:
		/* a peer behind us (or left out of our view) learns our view; a joiner waits */
		if (vw->state == LC_VS_NORMAL && t < vw->id && !mb->joiner)
			send_view(m, c);
		break;
	case LC_VC_PREPARE:
		if (!lc_view_in(m, from, c->peer.inc))
			break;
		if (vw->state == LC_VS_NORMAL && t <= vw->id)
			send_view(m, c);
		else if (lc_vw_acc_prepare(m, t, in->u.vc.ballot))
			lc_conn_send(c, m->tx_msg);
		break;
	case LC_VC_ACCEPT:
		if (!lc_view_in(m, from, c->peer.inc))
			break;
		if (vw->state == LC_VS_NORMAL && t <= vw->id)
			send_view(m, c);
		else if (lc_vw_acc_accept(m, t, in->u.vc.ballot, in->u.vc.m, in->u.vc.n))
			lc_conn_send(c, m->tx_msg);
		break;
	case LC_VC_PROMISE:
		lc_vw_on_promise(m, from, t, in->u.vc.ballot, in->u.vc.abal, in->u.vc.m,
		                 in->u.vc.n);
		break;
	case LC_VC_ACCEPTED:
		lc_vw_on_accepted(m, from, t, in->u.vc.ballot);
		break;
	case LC_VC_NACK:
		if (vw->phase != 0 && t == vw->target && in->u.vc.ballot > vw->ballot) {
			if ((in->u.vc.ballot >> 32) > vw->seen_round)
				vw->seen_round = in->u.vc.ballot >> 32;
			lc_vw_backoff(m, lc_now_ns());
		}
		break;
	case LC_VC_VIEW:
		if (t > vw->id || vw->state != LC_VS_NORMAL) {
			memcpy(vw->scratch, in->u.vc.m, in->u.vc.n * sizeof(in->u.vc.m[0]));
			lc_vw_install(m, t, vw->scratch, in->u.vc.n);
		}
		break;
	case LC_VC_JOIN:
		if (in->u.vc.n != 1)
			break;
		if (!lc_view_in(m, from, c->peer.inc)) {
			/* the joiner itself, through us its contact: its authenticated identity */
			mb->joiner = 1;
			mb->since_ns = lc_now_ns();
			if (vw->state == LC_VS_NORMAL)
				forward_join(m, &mb->info);
		} else if (vw->state == LC_VS_NORMAL) {
			forward_join(m, &in->u.vc.m[0]);
		}
		break;
	case LC_VC_SUSPECT:
		i = vw_idx(vw, in->u.vc.node);
		if (i == NO_INDEX || vw->v[i].info.inc != in->u.vc.inc ||
		    in->u.vc.node == m->node_id || !lc_view_in(m, from, c->peer.inc))
			break;
		if (coordinator(vw, m->node_id) == m->node_id)
			lc_vw_coord_suspect(m, i, lc_now_ns());
		else if (coordinator(vw, m->node_id) != from)
			lc_vw_send_to(m, coordinator(vw, m->node_id), (struct lc_msg *)in);
		break;
	case LC_VC_PROBE_REQ:
		if (!lc_view_in(m, from, c->peer.inc) ||
		    !lc_view_in(m, in->u.vc.node, in->u.vc.inc))
			break;
		for (unsigned k = 0; k < PROBES; k++) {
			if (vw->preq[k].node == 0) {
				vw->preq[k] = (struct preq){.node = in->u.vc.node,
				                            .coord = from,
				                            .inc = in->u.vc.inc,
				                            .start = lc_now_ns()};
				break;
			}
		}
		break;
	case LC_VC_LEFT:
		/* the coordinator heard its LEAVE: the view that drops it next says it left */
		i = vw_idx(vw, in->u.vc.node);
		if (i != NO_INDEX && vw->v[i].info.inc == in->u.vc.inc &&
		    in->u.vc.node != m->node_id && lc_view_in(m, from, c->peer.inc))
			vw->v[i].left = 1;
		break;
	case LC_VC_PROBE_ACK:
		for (unsigned k = 0; k < PROBES; k++) {
			struct probe *p = &vw->probe[k];

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

void lc_view_leave_rx(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	struct lc_view *vw = m->vw;
	int i = vw_idx(vw, node);

	if (i == NO_INDEX || vw->v[i].info.inc != inc)
		return;
	vw->v[i].left = 1;
	lc_vw_rem_add(vw, &vw->v[i].info, 1);
	vw->backoff = 0;
}

int lc_view_left(loco_manager_t *m)
{
	struct lc_view *vw = m->vw;

	if (__atomic_load_n(&vw->left, __ATOMIC_ACQUIRE) || vw->state != LC_VS_NORMAL || vw->n <= 1)
		return 1;
	if (!m->leaving)
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
	for (uint32_t i = 0; i < vw->n; i++) {
		struct lc_member *mb = lc_member_find(m, vw->v[i].info.node);

		if (vw->v[i].info.node != m->node_id && !vw->v[i].left && mb != NULL &&
		    mb->conn != NULL && !lc_conn_is_dead(mb->conn))
			return 0;
	}
	return 1;
}

int lc_view_admit_check(loco_manager_t *m, uint32_t node, uint64_t inc, const char **why)
{
	struct lc_view *vw = m->vw;
	int i = vw_idx(vw, node);
	struct lc_member *mb;

	if (vw->state != LC_VS_NORMAL || i == NO_INDEX || vw->v[i].info.inc == inc)
		return 0;
	if (vw->v[i].info.inc > inc) {
		*why = "stale incarnation";
		return -ESTALE;
	}
	mb = lc_member_find(m, node);
	if (!lc_vw_rem_has(vw, node, vw->v[i].info.inc) && mb != NULL && mb->conn != NULL &&
	    lc_now_ns() - vw->v[i].heard_ns < vw_fail_ns(m)) {
		lc_log_warn("manager: refused a second node with id %u (incarnation %llx): "
		            "node %u (incarnation %llx) is a live member",
		            node, (unsigned long long)inc, node,
		            (unsigned long long)vw->v[i].info.inc);
		*why = "node id in use by a live member";
		return -EEXIST;
	}
	lc_log_info("manager: node %u restarted? its old incarnation is not confirmed gone yet",
	            node);
	lc_view_suspect(m, node);
	*why = "the old incarnation of this node id is not confirmed gone yet";
	return -EAGAIN;
}

void lc_view_admitted(loco_manager_t *m, struct lc_member *mb)
{
	mb->since_ns = lc_now_ns();
	if (!lc_view_in(m, mb->info.node, mb->info.inc))
		send_view(m, mb->conn); /* an excluded node learns it; a joiner ignores it */
}

void lc_view_join_lost(loco_manager_t *m, uint32_t node)
{
	struct lc_view *vw = m->vw;

	if (node == 0 || node != vw->join_node)
		return;
	vw->join_node = 0;
	if (vw->state == LC_VS_JOINING && !m->join_done) {
		m->join_ret = -ECONNRESET;
		m->join_done = 1;
	}
	vw->next_rejoin = 0;
}

void lc_view_joining(loco_manager_t *m, struct lc_conn *c)
{
	struct lc_msg *msg = lc_vw_msg(m, LC_VC_JOIN, 0);

	m->vw->join_node = c->peer.node;
	lc_self_info(m, &msg->u.vc.m[0]);
	msg->u.vc.n = 1;
	lc_conn_send(c, msg);
}

/* ------------------------------------------------------------------ */
/* timers                                                             */

static int cdial_for(loco_manager_t *m, uint32_t node)
{
	for (struct lc_cdial *d = m->cdials; d != NULL; d = d->next)
		if (d->info.node == node || (node == 0 && d->join))
			return 1;
	return 0;
}

/* rejoin -- excluded: try the members of our last views, one at a time. */
static void rejoin(loco_manager_t *m, uint64_t now)
{
	struct lc_view *vw = m->vw;
	struct lc_member_info contact = {0};

	if (vw->ncontacts == 0 || now < vw->next_rejoin || cdial_for(m, 0) || vw->join_node != 0)
		return;
	contact = vw->contacts[vw->next_contact++ % vw->ncontacts];
	contact.node = 0;
	contact.inc = 0;
	lc_log_info("manager: rejoining through %s", contact.ctrl_addr);
	lc_dial_ctrl(m, &contact, 1);
	vw->next_rejoin = now + vw_fail_ns(m) / 2;
}

/* partition_check -- whether a majority of the view was heard within the failure bound. */
static int partition_check(loco_manager_t *m, uint64_t now)
{
	struct lc_view *vw = m->vw;
	uint64_t f = vw_fail_ns(m);
	uint32_t heard = 1;
	int part, was;

	for (uint32_t i = 0; i < vw->n; i++)
		if (vw->v[i].info.node != m->node_id && now - vw->v[i].heard_ns <= f)
			heard++;
	part = heard < vw_majority(vw->n);
	if (vw->settle_start != 0) {
		/*
		 * Rejoined: we stop acting until every member of the view is up
		 * again and a quarter of the failure bound passed (the channels
		 * re-pair meanwhile), so that no object of ours acts alone.
		 */
		int all_up = 1;

		for (uint32_t i = 0; i < vw->n; i++) {
			struct lc_member *mb = lc_member_find(m, vw->v[i].info.node);

			if (vw->v[i].info.node != m->node_id && (mb == NULL || !mb->up))
				all_up = 0;
		}
		if (!all_up)
			vw->settle_up = 0;
		else if (vw->settle_up == 0)
			vw->settle_up = now;
		if ((vw->settle_up != 0 && now - vw->settle_up >= f / 4) ||
		    now - vw->settle_start > (uint64_t)m->cfg.join_timeout_ms * 1000000ull)
			vw->settle_start = 0;
		else
			part = 1;
	}
	was = __atomic_exchange_n(&vw->partitioned, part, __ATOMIC_ACQ_REL);
	if (part && !was) {
		lc_log_warn("manager: partitioned: %u of %u member(s) of view %llu heard within "
		            "%u ms; stopped acting",
		            heard, vw->n, (unsigned long long)vw->id, m->cfg.fail_timeout_ms);
		event(m, LOCO_EVENT_PARTITIONED, vw->id, vw->n);
		vw->part_logged = 1;
	} else if (!part && was && vw->part_logged) {
		vw->part_logged = 0;
		lc_log_warn("manager: a majority of view %llu is in reach again",
		            (unsigned long long)vw->id);
	}
	return part;
}

void lc_view_timers(loco_manager_t *m, uint64_t now, uint64_t *wake)
{
	struct lc_view *vw = m->vw;
	uint64_t f = vw_fail_ns(m);
	uint32_t coord;
	int part;

	__atomic_store_n(&vw->timers_ns, now, __ATOMIC_RELEASE); /* loco_manager_partitioned() */
	if (now + f / 10 < *wake)
		*wake = now + f / 10;
	if (vw->state == LC_VS_REJOINING) {
		if (vw->join_node != 0 && lc_member_find(m, vw->join_node) == NULL)
			vw->join_node = 0;
		if (vw->join_node != 0 && now > vw->next_rejoin + 2 * f)
			vw->join_node = 0; /* no view took us through it: try another */
		rejoin(m, now);
		return;
	}
	if (vw->state != LC_VS_NORMAL)
		return;
	for (uint32_t i = 0; i < vw->n; i++) {
		struct vmember *x = &vw->v[i];

		if (x->info.node != m->node_id && now - x->heard_ns > f && x->susp_ns == 0 &&
		    now >= x->quiet_ns && !m->leaving)
			lc_view_suspect(m, x->info.node);
	}
	part = partition_check(m, now);
	coord = coordinator(vw, m->node_id);
	for (uint32_t i = 0; i < vw->n; i++) {
		struct vmember *x = &vw->v[i];
		struct lc_member *mb;

		if (x->info.node == m->node_id)
			continue;
		if (x->susp_ns != 0 && coord == m->node_id) {
			lc_vw_coord_suspect(m, (int)i, now);
		} else if (x->susp_ns != 0 && now - x->report_ns >= f / 2) {
			struct lc_msg *msg = lc_vw_msg(m, LC_VC_SUSPECT, vw->id);

			msg->u.vc.node = x->info.node;
			msg->u.vc.inc = x->info.inc;
			lc_vw_send_to(m, coord, msg);
			x->report_ns = now;
		}
		/* a member without a control connection: the lower id redials (both, when cut off) */
		mb = lc_member_find(m, x->info.node);
		if ((mb == NULL || mb->conn == NULL) && (m->node_id < x->info.node || part) &&
		    !m->leaving && now >= x->redial_ns && !cdial_for(m, x->info.node)) {
			lc_log_debug("manager: redialling node %u", x->info.node);
			lc_dial_ctrl(m, &x->info, 0);
			x->redial_ns = now + f / 4;
		}
	}
	lc_vw_probes_answer(m, now);
	/* a contact re-forwards the joins it took while they wait */
	if (coord != m->node_id)
		for (uint32_t j = 0; j < vw->nj; j++)
			if (now - vw->joins[j].fwd > f / 2)
				forward_join(m, &vw->joins[j].info);
	pending_prune(vw, now, (uint64_t)m->cfg.join_timeout_ms * 1000000ull);
	if (coord != m->node_id) {
		vw->phase = 0;
		return;
	}
	lc_vw_probes_decide(m, now);
	if (vw->phase != 0 && now > vw->deadline) {
		lc_log_info("manager: view %llu: no majority answered ballot %llx in time",
		            (unsigned long long)vw->target, (unsigned long long)vw->ballot);
		lc_vw_backoff(m, now);
	}
	if (vw->phase == 0 && now >= vw->backoff && (vw->nj > 0 || vw->nr > 0) && !part)
		lc_vw_start_round(m, now);
}
