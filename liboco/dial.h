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

int lc_dials_start(loco_manager_t *m);
void lc_dials_stop(loco_manager_t *m); /* ends the thread, frees what is queued */

/* lc_dial_link -- open a data link to member @info (first, or rebuilt). */
void lc_dial_link(loco_manager_t *m, const struct lc_member_info *info);

/* lc_dial_cancel -- nothing more to do for @node (it connected to us, or left). */
void lc_dial_cancel(loco_manager_t *m, uint32_t node);

/* lc_dial_take -- progress thread: the finished dials, oldest first (caller frees). */
struct lc_dial_done *lc_dial_take(loco_manager_t *m);

#endif /* LOCO_LC_DIAL_H */
