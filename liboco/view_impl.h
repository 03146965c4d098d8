/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view_impl.h -- the view state shared by view.c (views, installing,
 * exclusion and rejoin, messages, timers), view_paxos.c (the rounds that
 * agree on the next view) and view_probe.c (suspicion confirmed by
 * probes). Progress thread, m->lock held.
 */
#ifndef LOCO_LC_VIEW_IMPL_H
#define LOCO_LC_VIEW_IMPL_H

#include <stdint.h>

#include "manager.h"
#include "view.h"

#define PROBES     8  /* suspects probed at once (coordinator), probes answered at once */
#define PROBERS    3  /* members asked to probe one suspect */
#define EVENTS     16 /* application events queued */
#define GONE       32 /* leavers remembered for members that skip the view dropping them */
#define GONE_VIEWS 8  /* a commit retells the leavers of this many views before it */
#define NO_INDEX   (-1)

struct vmember {
	struct lc_member_info info;
	uint64_t heard_ns;  /* last message from it (install time at first) */
	uint64_t susp_ns;   /* since when we suspect it; 0: not */
	uint64_t report_ns; /* when we last told the coordinator */
	uint64_t redial_ns; /* when we may redial it next */
	uint64_t quiet_ns;  /* a probe found it alive: not suspected again before */
	int left;           /* it said LEAVE */
};

struct probe { /* coordinator: a suspect being probed */
	uint32_t node;
	uint64_t inc, start, deadline;
	int asked, answers, alive;
};

struct preq { /* prober: a probe to answer */
	uint32_t node, coord;
	uint64_t inc, start;
};

struct gone { /* a member that said LEAVE, and the view that dropped it */
	uint32_t node;
	uint64_t inc, view;
};

struct change { /* a pending removal (dead or left) or join */
	struct lc_member_info info;
	uint64_t since, fwd;
	int left;
};

struct lc_view {
	int state;
	uint64_t id;
	uint32_t n;
	struct vmember *v;  /* sorted by node id */
	int partitioned;    /* atomic */
	uint64_t timers_ns; /* atomic: the last run of lc_view_timers() (0: none yet) */
	int part_logged;    /* we said so in the log */
	int left;           /* atomic: loco_fini() may go */

	/* acceptor, for view id + 1 */
	uint64_t pb, ab;
	uint32_t an;
	struct lc_member_info *av;

	/* proposer */
	int phase; /* 0 idle, 1 PREPARE sent, 2 ACCEPT sent */
	uint64_t target, ballot, round, seen_round, deadline, backoff;
	uint8_t got[LC_MAX_MEMBERS];
	uint32_t ngot, pn;
	uint64_t best_ab;
	struct lc_member_info *prop;

	struct change *joins, *rems;
	uint32_t nj, nr;
	struct gone gone[GONE]; /* a ring: the last leavers our views dropped */
	uint32_t ngone;         /* entries ever written; the next goes at ngone % GONE */
	struct probe probe[PROBES];
	struct preq preq[PROBES];

	/* joining and rejoining */
	uint32_t join_node; /* the contact we sent JOIN to */
	struct lc_member_info *contacts;
	uint32_t ncontacts, next_contact;
	uint64_t next_rejoin;
	uint64_t settle_start, settle_up; /* rejoined: partitioned until every member is up */

	loco_event_fn *fn;
	void *fn_arg;
	loco_event_t evq[EVENTS];
	unsigned evh, evt;
	struct lc_member_info *scratch;
};

static inline uint64_t vw_fail_ns(loco_manager_t *m)
{
	return (uint64_t)m->cfg.fail_timeout_ms * 1000000ull;
}

static inline uint32_t vw_majority(uint32_t n)
{
	return n / 2 + 1;
}

static inline int vw_idx(struct lc_view *vw, uint32_t node)
{
	for (uint32_t i = 0; i < vw->n; i++)
		if (vw->v[i].info.node == node)
			return (int)i;
	return NO_INDEX;
}

static inline int vw_in(struct lc_view *vw, uint32_t node, uint64_t inc)
{
	int i = vw_idx(vw, node);

	return i != NO_INDEX && vw->v[i].info.inc == inc;
}

/* view.c */
void lc_vw_send_to(loco_manager_t *m, uint32_t node, struct lc_msg *msg);
void lc_vw_broadcast(loco_manager_t *m, struct lc_msg *msg);
struct lc_msg *lc_vw_msg(loco_manager_t *m, uint32_t kind, uint64_t view);
void lc_vw_install(loco_manager_t *m, uint64_t id, const struct lc_member_info *list, uint32_t n);
void lc_vw_tell_gone(loco_manager_t *m, struct lc_conn *c, uint64_t since);

/* view_paxos.c: the proposer (coordinator) and the acceptor */
int lc_vw_rem_has(struct lc_view *vw, uint32_t node, uint64_t inc);
void lc_vw_backoff(loco_manager_t *m, uint64_t now);
void lc_vw_start_round(loco_manager_t *m, uint64_t now);
int lc_vw_acc_prepare(loco_manager_t *m, uint64_t t, uint64_t b);
int lc_vw_acc_accept(loco_manager_t *m, uint64_t t, uint64_t b, const struct lc_member_info *val,
                     uint32_t n);
void lc_vw_on_promise(loco_manager_t *m, uint32_t from, uint64_t t, uint64_t b, uint64_t abal,
                      const struct lc_member_info *val, uint32_t n);
void lc_vw_on_accepted(loco_manager_t *m, uint32_t from, uint64_t t, uint64_t b);

/* view_probe.c: suspicion and probes */
void lc_vw_coord_suspect(loco_manager_t *m, int i, uint64_t now);
void lc_vw_rem_add(struct lc_view *vw, const struct lc_member_info *mi, int left);
void lc_vw_probes_decide(loco_manager_t *m, uint64_t now);
void lc_vw_probes_answer(loco_manager_t *m, uint64_t now);

#endif /* LOCO_LC_VIEW_IMPL_H */
