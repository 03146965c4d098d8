/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view.h -- membership views: the view-change protocol (docs/membership.md).
 *
 * Membership is a sequence of numbered views {id, members (node,
 * incarnation)}. A node that starts alone installs view 1 = {itself}. A
 * change (join, graceful leave, confirmed failure) installs view v + 1
 * only when a majority of view v accepted it: single-decree Paxos per view
 * number, proposed by a coordinator (the lowest-id member of v that the
 * proposer does not suspect), as in Derecho's view changes:
 *
 *   PREPARE(v+1, b) -> PROMISE(b, accepted ballot and value, if any)
 *   ACCEPT(v+1, b, members) -> ACCEPTED(b)      (majorities of v)
 *   VIEW(v+1, members) to the members of v and v+1 (the commit)
 *
 * A member that missed a commit catches up from any VIEW with a higher id
 * (heartbeats carry the sender's view id; a member that sees an older one
 * answers with its VIEW). Suspicion (nothing heard for the failure bound,
 * a lost control connection, a failed data link) is reported to the
 * coordinator, which has up to 3 other members probe the suspect; it is
 * removed only when nobody heard it within the probe bound. A node that
 * hears less than a majority of its view within the failure bound is
 * partitioned: loco_manager_partitioned() says 1 and waits fail with
 * -LOCO_EPARTITION. A node that sees a newer view without itself was
 * excluded: it drops every member and rejoins as a new incarnation.
 *
 * Everything here runs on the progress thread with m->lock held, except
 * lc_view_dispatch() (no lock) and the lock-free predicate.
 */
#ifndef LOCO_LC_VIEW_H
#define LOCO_LC_VIEW_H

#include <stdint.h>

#include <loco.h>

#include "ctrl_wire.h"

struct lc_conn;
struct lc_member;

enum lc_vc_kind {
	LC_VC_HB = 1,    /* heartbeat: view = the sender's installed view id */
	LC_VC_PREPARE,   /* view = target id, ballot */
	LC_VC_PROMISE,   /* view, ballot, abal + members (the value accepted at abal; 0: none) */
	LC_VC_ACCEPT,    /* view, ballot, members */
	LC_VC_ACCEPTED,  /* view, ballot */
	LC_VC_NACK,      /* view, ballot = the higher ballot promised */
	LC_VC_VIEW,      /* view, members: a committed view */
	LC_VC_JOIN,      /* members[0]: a node asks to join (joiner -> contact -> coordinator) */
	LC_VC_SUSPECT,   /* node, inc: the sender suspects it (-> coordinator) */
	LC_VC_PROBE_REQ, /* node, inc: coordinator -> prober */
	LC_VC_PROBE_ACK, /* node, inc, flag 1: heard within the probe bound */
	LC_VC_LEFT,      /* node, inc: it said LEAVE (coordinator -> members, before the VIEW) */
};

enum lc_view_state {
	LC_VS_JOINING = 1, /* no view yet: loco_init() joins */
	LC_VS_NORMAL,      /* in the installed view */
	LC_VS_EXCLUDED,    /* a newer view left us out; no rejoin (LOCO_REJOIN=0) */
	LC_VS_REJOINING,   /* excluded, joining again as a new incarnation */
	LC_VS_LEFT,        /* loco_fini(): a view without us was installed */
};

struct lc_view;

/* lc_view_init -- the view state of @m (JOINING). 0, -ENOMEM. lc_view_fini() frees. */
int lc_view_init(loco_manager_t *m);
void lc_view_fini(loco_manager_t *m);

/* lc_view_start_alone -- install view 1 = {this node}. */
void lc_view_start_alone(loco_manager_t *m);

/* lc_view_state -- enum lc_view_state. m->lock held. */
int lc_view_state(loco_manager_t *m);

/* lc_view_in -- whether (@node, @inc) is in the installed view. m->lock held. */
int lc_view_in(loco_manager_t *m, uint32_t node, uint64_t inc);

/* lc_view_said_leave -- whether (@node, @inc) is in the view and said LEAVE. m->lock held. */
int lc_view_said_leave(loco_manager_t *m, uint32_t node, uint64_t inc);

/* lc_view_inc -- @node's incarnation in the installed view, or 0. m->lock held. */
uint64_t lc_view_inc(loco_manager_t *m, uint32_t node);

/* lc_view_heard -- a message arrived from (@node, @inc). */
void lc_view_heard(loco_manager_t *m, uint32_t node, uint64_t inc);

/* lc_view_suspect -- this node suspects @node (lost connection, failed link). */
void lc_view_suspect(loco_manager_t *m, uint32_t node);

/* lc_view_msg -- a VC message from the member behind @c. */
void lc_view_msg(loco_manager_t *m, struct lc_conn *c, const struct lc_msg *msg);

/* lc_view_leave_rx -- (@node, @inc) said LEAVE: remove it in the next view. */
void lc_view_leave_rx(loco_manager_t *m, uint32_t node, uint64_t inc);

/*
 * lc_view_admit_check -- an authenticated peer (@node, @inc) wants in. 0:
 * admit; -EEXIST: a live member has that id; -EAGAIN: its old incarnation
 * is not confirmed gone yet (suspected now); -ESTALE. *@why for the refusal.
 */
int lc_view_admit_check(loco_manager_t *m, uint32_t node, uint64_t inc, const char **why);

/* lc_view_admitted -- @mb's connection is up: a stray peer gets our VIEW. */
void lc_view_admitted(loco_manager_t *m, struct lc_member *mb);

/* lc_view_join_lost -- the connection to @node broke: if it was our join's contact, retry. */
void lc_view_join_lost(loco_manager_t *m, uint32_t node);

/* lc_view_joining -- our join's contact admitted us on @c: ask it to take us in (JOIN). */
void lc_view_joining(loco_manager_t *m, struct lc_conn *c);

/* lc_view_members -- the installed view's members into @out (at most @max); the count. */
int lc_view_members(loco_manager_t *m, struct lc_member_info *out, uint32_t max);

/* lc_view_send_hb -- a heartbeat (our view id) on @c. */
void lc_view_send_hb(loco_manager_t *m, struct lc_conn *c);

/* lc_view_timers -- suspicion, probes, rounds, partition, rejoin; lowers *@wake. */
void lc_view_timers(loco_manager_t *m, uint64_t now, uint64_t *wake);

/*
 * lc_view_left -- loco_fini(): 1 once a view without us is in (or nobody is
 * left), or, leaving, once every other member of the view said LEAVE too
 * or has no live control connection to us. m->lock held.
 */
int lc_view_left(loco_manager_t *m);

/* lc_view_dispatch -- progress thread, no lock: run the application's event function. */
void lc_view_dispatch(loco_manager_t *m);

#endif /* LOCO_LC_VIEW_H */
