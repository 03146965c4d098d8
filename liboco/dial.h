/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dial.h -- the dialer thread: it opens the data links this node
 * initiates (fab_connect() blocks, bounded by the failure bound; on
 * verbs it resolves addresses and routes through rdma_cm), retrying with
 * back-off until the join timeout. Control connections are not its work:
 * the progress thread makes them without blocking (member.c). It holds no
 * lock of the manager while it waits: a finished link goes on a queue
 * that the progress thread takes with lc_dial_take(), and the progress
 * thread alone attaches it to its member.
 *
 * Thread safety: MT-safe; the dialer's own lock is a leaf.
 */
#ifndef LOCO_LC_DIAL_H
#define LOCO_LC_DIAL_H

#include <loco.h>

#include "conn.h"
#include "ctrl_wire.h"
#include "fabric/fabric.h"

/* A finished data link, for the progress thread. */
struct lc_dial_done {
	struct fab_link *link;
	struct lc_member_info info;
	struct lc_dial_done *next;
};

struct lc_dials;
struct lc_cdial;

/* The manager's part (m->dial); only dial.c touches its fields. */
struct lc_dial_state {
	struct lc_dials *dials;  /* the dialer thread and its queues (data links) */
	struct lc_cdial *cdials; /* m->lock: control connections to make */
	int join_done, join_ret; /* m->lock: the joining thread's answer */
};

int lc_dials_start(loco_manager_t *m);
void lc_dials_stop(loco_manager_t *m); /* ends the thread, frees what is queued */

/*
 * lc_dial_link -- open a data link to member @info (first, or rebuilt),
 * proving who we are with the key of our authenticated session with it
 * (auth.h; m->lock held). Without such a session it logs and does nothing.
 */
void lc_dial_link(loco_manager_t *m, const struct lc_member_info *info);

/* lc_dial_cancel -- nothing more to do for @node (it connected to us, or left). */
void lc_dial_cancel(loco_manager_t *m, uint32_t node);

/* lc_dial_take -- progress thread: the finished dials, oldest first (caller frees). */
struct lc_dial_done *lc_dial_take(loco_manager_t *m);

/*
 * The control connections this node must make (members with higher ids, a
 * join's contact), on the progress thread's list m->dial.cdials (m->lock held
 * for every call below). member.c starts them (a non-blocking connect)
 * when lc_cdial_due() says so and reports each attempt's end; a failure
 * is retried with back-off until the join timeout, except a join's: its
 * one try answers the joining thread (lc_dial_join_answer()).
 */
struct lc_cdial {
	struct lc_member_info info; /* info.ctrl_addr; node 0: a contact not known yet */
	uint64_t next_ns, deadline;
	unsigned delay_ms;
	int join;
	struct lc_conn *conn; /* the attempt under way */
	struct lc_cdial *next;
};

/* lc_dial_ctrl -- connect to @info (its ctrl_addr); @join: the joining thread's contact. */
void lc_dial_ctrl(loco_manager_t *m, const struct lc_member_info *info, int join);

/* lc_cdial_due -- a dial to start now, or NULL (and *@wake lowered to the next one). */
struct lc_cdial *lc_cdial_due(loco_manager_t *m, uint64_t now, uint64_t *wake);

/* lc_cdial_failed -- @d's attempt ended with @err: retried later, or given up (freed). */
void lc_cdial_failed(loco_manager_t *m, struct lc_cdial *d, int err);

/* lc_cdial_cancel -- nothing to do for @node any more (up, or gone). */
void lc_cdial_cancel(loco_manager_t *m, uint32_t node);

/* lc_cdial_free -- forget @d (its connection, if any, goes on without it). */
void lc_cdial_free(loco_manager_t *m, struct lc_cdial *d);
void lc_cdials_free(loco_manager_t *m);
/* lc_cdial_pending -- whether a control connection to @node (0: a join's contact) is to be made. */
int lc_cdial_pending(loco_manager_t *m, uint32_t node);

/*
 * The joining thread's answer (m->lock held for each): lc_dial_join_begin()
 * clears it before a join's dial; lc_dial_join_answer() gives it (the
 * dial failed, the contact did not admit us); lc_dial_join_answer_first()
 * gives it unless it was given already (a view that has us); and
 * lc_dial_join_result() says whether it was given, and *@ret.
 */
void lc_dial_join_begin(loco_manager_t *m);
void lc_dial_join_answer(loco_manager_t *m, int ret);
void lc_dial_join_answer_first(loco_manager_t *m, int ret);
int lc_dial_join_result(loco_manager_t *m, int *ret);

#endif /* LOCO_LC_DIAL_H */
