/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dial.h -- outgoing connections: the dialer thread and joining.
 *
 * The dialer makes the handshakes this node initiates (to members with
 * higher ids, and data links to rebuild), with blocking but bounded I/O,
 * retrying with back-off until the join timeout. It holds no lock of the
 * manager while it waits: a finished connection (authenticated control
 * connection + data link) goes on a queue that the progress thread takes
 * with lc_dial_take(), and the progress thread alone admits it.
 *
 * Thread safety: MT-safe; the dialer's own lock is a leaf.
 */
#ifndef LOCO_LC_DIAL_H
#define LOCO_LC_DIAL_H

#include <loco.h>

#include "conn.h"
#include "ctrl_wire.h"
#include "fabric/fabric.h"

/* A finished dial, for the progress thread. */
struct lc_dial_done {
	struct lc_conn *conn; /* authenticated, not adopted; NULL: a data link only */
	struct fab_link *link;
	struct lc_member_info info;
	struct lc_dial_done *next;
};

int lc_dials_start(loco_manager_t *m);
void lc_dials_stop(loco_manager_t *m); /* ends the thread, frees what is queued */

/* lc_dial_request -- connect to @info (or, @link_only, open a new data link to it). */
void lc_dial_request(loco_manager_t *m, const struct lc_member_info *info, int link_only);

/* lc_dial_cancel -- nothing more to do for @node (it connected to us, or left). */
void lc_dial_cancel(loco_manager_t *m, uint32_t node);

/* lc_dial_take -- progress thread: the finished dials, oldest first (caller frees). */
struct lc_dial_done *lc_dial_take(loco_manager_t *m);

/*
 * lc_dial_join -- the joining thread: authenticate with the first of
 * @contacts that admits us and open a data link to it (queued as a
 * finished dial), retrying until the join timeout. Returns 0 and the
 * contact's member list in @list (LC_MAX_MEMBERS entries) and *@n;
 * -ETIMEDOUT, -LOCO_EAUTH, -EEXIST, -EPROTO, -ENOMEM.
 */
int lc_dial_join(loco_manager_t *m, const char *contacts, struct lc_member_info *list, uint32_t *n);

#endif /* LOCO_LC_DIAL_H */
