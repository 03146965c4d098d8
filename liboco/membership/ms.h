/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms.h -- membership as a state machine with no I/O and no clock
 * (docs/membership.md).
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
 * answers with its VIEW). Suspicion (silence past a member's detection
 * bound, a lost control connection, a failed data link) is reported to
 * the coordinator, which has up to 3 other members probe the suspect; it
 * is removed only when nobody heard it within the bound. A node that
 * hears less than a majority of its view within the bound is partitioned
 * and stops acting. A node that sees a newer view without itself was
 * excluded: it drops every member and rejoins as a new incarnation.
 *
 * The detection bound adapts (ms_detect.c): per member, from the gaps
 * between the messages it sends (an accrual detector), never below the
 * configured floor; and a node that sees its own inputs arrive late (its
 * thread was not scheduled, the process was stopped, the VM paused) does
 * not count the silence it slept through against others: it is "unsure"
 * (acts on nothing, blames nobody) until it heard a majority again.
 *
 * The machine reads no clock and does no I/O, not even its log lines:
 * every input carries the time (CLOCK_MONOTONIC of its driver, or the
 * simulator's), and every effect goes out through struct lc_ms_ops, called synchronously from
 * inside an input. Its driver is liboco/view.c on the progress thread in
 * production and tests/sim/ in the simulator. One thread at a time: the
 * driver serialises inputs (m->lock in production).
 */
#ifndef LOCO_LC_MS_H
#define LOCO_LC_MS_H

#include <stdint.h>

#include "../ctrl_wire.h"
#include "../log.h" /* enum lc_log_level only */

/*
 * A heartbeat's flag: LC_HB_ECHO_ASK (ballot = a nonce) asks every member
 * to answer at once with LC_HB_ECHO (the same nonce, its view id): a node
 * that was late counts only answers to a question it asked after it
 * resumed, not the old news waiting in its sockets.
 */
#define LC_HB_ECHO_ASK 1u
#define LC_HB_ECHO     2u

enum lc_vc_kind {
	LC_VC_HB = 1,    /* heartbeat: view = the sender's installed view id; flag: LC_HB_* */
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

/* what the machine says of acting (lc_ms_partitioned()) */
enum lc_ms_part {
	LC_MS_ACT = 0,    /* a majority of the view was heard within the bound */
	LC_MS_PART = 1,   /* it was not: stop acting */
	LC_MS_UNSURE = 2, /* our own inputs came late: do not act yet, blame nobody */
};

/* application events (loco_event_type_t values), raised through ops->event */
struct lc_ms;

struct lc_ms_cfg {
	int log_level;    /* lines above this level (enum lc_log_level) are not even formatted */
	uint64_t fail_ns; /* the failure bound's floor (LOCO_FAIL_TIMEOUT_MS) */
	uint64_t join_ns; /* how long a join may take (LOCO_JOIN_TIMEOUT_MS) */
	int rejoin;       /* excluded: rejoin as a new incarnation */
	uint64_t seed;    /* the machine's random numbers (ballot backoff): the simulator's seed */
};

/*
 * The driver's side. Effects: send, dial, drop, installed, excluded,
 * event, join_done, mark_joiner. Questions (no effect): connected, up,
 * dialing. @ctx is lc_ms_create()'s.
 */
struct lc_ms_ops {
	/* @msg (the machine's buffer: the driver may stamp it) to @node, if connected */
	void (*send)(void *ctx, uint32_t node, struct lc_msg *msg);
	/* connect to @mi (@join: as a joiner to a contact, node id unknown) */
	void (*dial)(void *ctx, const struct lc_member_info *mi, int join);
	/* a view without (@mi) was installed: close it (@left: it said LEAVE) */
	void (*drop)(void *ctx, const struct lc_member_info *mi, int left);
	/* view @id installed; @was: the state before (JOINING: our join is done) */
	void (*installed)(void *ctx, uint64_t id, uint32_t n, int was);
	/* view @id left us out: drop every member; @inc: our incarnation from now on */
	void (*excluded)(void *ctx, uint64_t id, uint64_t inc);
	/* an application event (loco_event_type_t) */
	void (*event)(void *ctx, int type, uint64_t view, uint32_t n);
	/* our join through the contact failed (@ret < 0) */
	void (*join_done)(void *ctx, int ret);
	/* the peer behind @node's connection asked us to take it in: a joiner */
	void (*mark_joiner)(void *ctx, uint32_t node);
	/* what lc_ms_partitioned() says changed to @part (enum lc_ms_part): publish it */
	void (*part)(void *ctx, int part);
	/* a line for the log (@level: enum lc_log_level): the machine writes nothing itself */
	void (*log)(void *ctx, int level, const char *line);
	/* whether an authenticated control connection to @node is up */
	int (*connected)(void *ctx, uint32_t node);
	/* whether @node is visible to channels (in the view, authenticated and linked) */
	int (*up)(void *ctx, uint32_t node);
	/* whether a dial to @node is under way (0: a join dial) */
	int (*dialing)(void *ctx, uint32_t node);
};

/* lc_ms_create -- a machine for @self (JOINING). NULL: out of memory. */
struct lc_ms *lc_ms_create(const struct lc_ms_cfg *cfg, const struct lc_member_info *self,
                           const struct lc_ms_ops *ops, void *ctx);
void lc_ms_destroy(struct lc_ms *ms);

/* lc_ms_set_self -- who we are: node, incarnation, addresses (before the first input) */
void lc_ms_set_self(struct lc_ms *ms, const struct lc_member_info *self);

/* ---- inputs: each carries the driver's time @now (ns, monotonic) ---- */

/* lc_ms_start_alone -- install view 1 = {self}. */
void lc_ms_start_alone(struct lc_ms *ms, uint64_t now);

/* lc_ms_tick -- timers: suspicion, probes, rounds, partition, rejoin. When to tick next. */
uint64_t lc_ms_tick(struct lc_ms *ms, uint64_t now);

/*
 * lc_ms_msg -- a VC message from @from (its authenticated identity) on a
 * control connection; @joiner: that peer asked us, its contact, to join.
 */
void lc_ms_msg(struct lc_ms *ms, uint64_t now, const struct lc_member_info *from, int joiner,
               const struct lc_msg *msg);

/* lc_ms_heard -- any message (data or control) arrived from (@node, @inc). */
void lc_ms_heard(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc);

/* lc_ms_suspect -- a fabric event: a lost control connection or failed link to @node. */
void lc_ms_suspect(struct lc_ms *ms, uint64_t now, uint32_t node);

/* lc_ms_leave_rx -- (@node, @inc) said LEAVE: remove it in the next view. */
void lc_ms_leave_rx(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc);

/* lc_ms_leave -- we leave (loco_fini()): suspect nobody, drop ourselves in the next view. */
void lc_ms_leave(struct lc_ms *ms, uint64_t now);

/*
 * lc_ms_admit_check -- an authenticated peer (@node, @inc) wants in. 0:
 * admit; -EEXIST: a live member has that id; -EAGAIN: its old incarnation
 * is not confirmed gone yet (suspected now); -ESTALE. *@why for the refusal.
 */
int lc_ms_admit_check(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc,
                      const char **why);

/* lc_ms_admitted -- (@node, @inc)'s connection is up: a stray peer gets our VIEW. */
void lc_ms_admitted(struct lc_ms *ms, uint64_t now, uint32_t node, uint64_t inc);

/* lc_ms_join_lost -- the connection to @node broke: if it was our join's contact, retry. */
void lc_ms_join_lost(struct lc_ms *ms, uint64_t now, uint32_t node);

/* lc_ms_joining -- our join's contact @node admitted us: ask it to take us in (JOIN). */
void lc_ms_joining(struct lc_ms *ms, uint64_t now, uint32_t node);

/* ---- questions (no effect) ---- */

int lc_ms_state(const struct lc_ms *ms);
uint64_t lc_ms_view(const struct lc_ms *ms);   /* the installed view's id (0: none) */
int lc_ms_partitioned(const struct lc_ms *ms); /* enum lc_ms_part */
int lc_ms_in(const struct lc_ms *ms, uint32_t node, uint64_t inc);
int lc_ms_said_leave(const struct lc_ms *ms, uint32_t node, uint64_t inc);
uint64_t lc_ms_inc(const struct lc_ms *ms, uint32_t node); /* in the view, or 0 */
uint32_t lc_ms_members(const struct lc_ms *ms, struct lc_member_info *out, uint32_t max);
/* lc_ms_bound -- @node's detection bound now (ns): the floor, or more on a jittery host */
uint64_t lc_ms_bound(const struct lc_ms *ms, uint32_t node);
/* lc_ms_late -- how late our own inputs came, at most, in the last while (ns; 0: never) */
uint64_t lc_ms_late(const struct lc_ms *ms);
/* lc_ms_hb -- the heartbeat to send now (our view id), in the machine's buffer */
struct lc_msg *lc_ms_hb(struct lc_ms *ms);
/*
 * lc_ms_left -- loco_fini() may go: a view without us is in (or nobody is
 * left), or, leaving, every other member of the view said LEAVE or has no
 * live control connection to us.
 */
int lc_ms_left(const struct lc_ms *ms);

#endif /* LOCO_LC_MS_H */
