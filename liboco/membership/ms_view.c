/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_view.c -- views (ms.h): installing a committed one, learning that we
 * were left out, and whether a majority of the installed one is heard
 * (the partition check).
 */
#include <stdio.h>
#include <string.h>

#include <loco/manager.h>

#include "ms_impl.h"

static void contacts_add(struct lc_ms *ms, const struct lc_member_info *mi)
{
	if (mi->node == ms->self.node || ms->ncontacts >= 2 * LC_MAX_MEMBERS)
		return;
	for (uint32_t i = 0; i < ms->ncontacts; i++)
		if (strcmp(ms->contacts[i].ctrl_addr, mi->ctrl_addr) == 0)
			return;
	ms->contacts[ms->ncontacts++] = *mi;
}

/* excluded -- a newer view @id left us out: drop everyone; rejoin unless told not to. */
static void excluded(struct lc_ms *ms, uint64_t id, const struct lc_member_info *list, uint32_t n)
{
	uint64_t inc = ms->self.inc + 1 + ms_random(ms, 0x1000), late = lc_ms_late(ms);
	char why[160] = "";

	/* our own thread's sleep is the likeliest cause: say so, with its length */
	if (late >= ms->cfg.fail_ns / 4)
		snprintf(why, sizeof(why),
		         " (this node's progress thread ran up to %llu ms late lately: a busy "
		         "host or a paused process looks like a failure to the others)",
		         (unsigned long long)(late / 1000000));
	ms_log(ms, LC_LOG_WARN,
	       "manager: excluded: view %llu (%u members) does not have node %u "
	       "(incarnation %llx)%s%s",
	       (unsigned long long)id, n, ms->self.node, (unsigned long long)ms->self.inc, why,
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
	ms->nonce = 0;
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

/* ms_pending_prune -- forget changes the installed view made (or made moot). */
void ms_pending_prune(struct lc_ms *ms)
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
	ms_pending_prune(ms);
	ms_log(ms, LC_LOG_INFO, "manager: view %llu installed: %u member(s)",
	       (unsigned long long)id, n);
	if (was == LC_VS_REJOINING) {
		ms->settle_start = ms->now;
		ms->settle_up = 0;
	}
	if (ms->nonce != 0) {
		/*
		 * Unsure still: echoes count only in the view they were asked in
		 * (a member answers an ask of its own view), so ask again in this
		 * one, and give its members their window from now. (A joiner late
		 * before its first view, as five ASan nodes starting on two cores
		 * are, used the window up before it had a view to ask in.)
		 */
		ms->resumed = ms->now;
		ms_echo_ask(ms);
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
			ms_send_view(ms, ms->v[i].info.node);
	}
	ms_partition_check(ms);
	ms->ops->installed(ms->ctx, id, n, was);
	if (was == LC_VS_REJOINING) {
		ms_log(ms, LC_LOG_WARN, "manager: rejoined in view %llu as incarnation %llx",
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

/* ms_partition_check -- whether a majority of the view was heard within its bound. */
void ms_partition_check(struct lc_ms *ms)
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
		if (ms->nonce != 0 && x->echo == ms->nonce)
			fresh++;
	}
	part = heard < ms_majority(ms->n) ? LC_MS_PART : LC_MS_ACT;
	if (ms->nonce != 0) {
		/*
		 * Our own inputs came late: what we heard since may be old news
		 * (ms_detect.c). Act again once a majority answered our echo
		 * request; until then we are unsure (blame nobody) for one floor,
		 * then partitioned.
		 */
		if (fresh >= ms_majority(ms->n)) {
			ms->nonce = 0;
			ms->resumed = 0;
		} else {
			part = ms_detect_unsure(ms) ? LC_MS_UNSURE : LC_MS_PART;
		}
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
			ms_log(ms, LC_LOG_WARN,
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
			ms_log(ms, LC_LOG_WARN,
			       "manager: partitioned: %u of %u member(s) of view %llu heard "
			       "within %llu ms; stopped acting",
			       heard, ms->n, (unsigned long long)ms->id,
			       (unsigned long long)(ms_detect_max(ms) / 1000000));
		ms_event(ms, LOCO_EVENT_PARTITIONED, ms->id, ms->n);
		ms->part_logged = 1;
	} else if (part == LC_MS_ACT && was != LC_MS_ACT && ms->part_logged) {
		ms->part_logged = 0;
		ms_log(ms, LC_LOG_WARN, "manager: a majority of view %llu is in reach again",
		       (unsigned long long)ms->id);
	}
}
