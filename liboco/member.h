/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member.h -- the member table (member.c, member_conn.c), owned by the progress thread.
 *
 * Everything that changes membership runs on the progress thread (which
 * members there are is decided by the view-change protocol, view.h):
 * connecting to members (non-blocking connect, then the handshake as
 * messages arrive, lc_member_dial()), admitting authenticated
 * connections, attaching data links (the dialer opens them,
 * lc_member_handoffs()), removing a
 * member (LEAVE, a broken or silent connection, a fabric error reported
 * by any thread through lc_member_link_report()), heartbeats. Changes are
 * raised as events (struct lc_member_events: up, gone, message, excluded,
 * rejoined) that the
 * channel layer subscribes to; membership never calls into channels.
 *
 * Locking: m->lock guards the table for readers on other threads
 * (loco_members(), the dialer, lc_join()); the progress thread takes it
 * around each change. Event handlers run with m->lock held and must not
 * block; object callbacks are not called from them (the channel layer
 * queues them and runs them after the lock is released).
 */
#ifndef LOCO_LC_MEMBER_H
#define LOCO_LC_MEMBER_H

#include <stdint.h>

#include <loco.h>

#include "conn.h"
#include "ctrl_wire.h"
#include "fabric/fabric.h"
#include "members.h"

#define LC_MAX_NODES 256 /* members one node holds */
/* unauthenticated control connections, at most (beyond: the least advanced goes, member_conn.c) */
#define LC_CTRL_UNAUTH_MAX     128
#define LC_CTRL_UNAUTH_PER_SRC 16 /* from one IPv4 address */

/* lc_member_find -- the member @node, or NULL. m->lock held (or the progress thread). */
struct lc_member *lc_member_find(loco_manager_t *m, uint32_t node);

/*
 * lc_member_remove -- drop @mb (a view without it was installed, or we
 * were excluded): its link closes, channels hear it is gone, its
 * connection is dropped. @graceful: it left. m->lock held.
 */
void lc_member_remove(loco_manager_t *m, struct lc_member *mb, int graceful, const char *why);

/* lc_member_check_up -- @mb becomes visible once in the view, authenticated and linked. */
void lc_member_check_up(loco_manager_t *m, struct lc_member *mb);

#define LC_EV_IN  1u /* lc_member_input(): readable */
#define LC_EV_OUT 2u /* writable (its send queue waits) */

/* lc_member_listen -- the control-plane listener on @addr (m->lfd, m->ctrl_addr). */
int lc_member_listen(loco_manager_t *m, const char *addr);

/* lc_member_input -- progress thread: @c is readable and/or writable (LC_EV_*). */
void lc_member_input(loco_manager_t *m, struct lc_conn *c, unsigned events);

/* lc_member_accept -- progress thread: take new control connections (data links: linkin.h). */
void lc_member_accept(loco_manager_t *m);

/* lc_member_attach_link -- m->lock held: @link (checked, admitted) is @mb's data link now. */
void lc_member_attach_link(loco_manager_t *m, struct lc_member *mb, struct fab_link *link);

/* lc_member_timers -- progress thread: heartbeats, failure bounds; returns when to call again. */
uint64_t lc_member_timers(loco_manager_t *m, uint64_t now);

/*
 * lc_member_link_report -- any thread: an operation to @node failed with
 * @status. Recorded (lock-free) for the progress thread, which is woken;
 * nothing is acted on in place.
 */
void lc_member_link_report(loco_manager_t *m, uint32_t node, int status);

/* lc_member_link_errors -- progress thread: act on the reported link failures. */
void lc_member_link_errors(loco_manager_t *m);

/* lc_member_link_failed -- progress thread: act on one failure of a link to @node. */
void lc_member_link_failed(loco_manager_t *m, uint32_t node, int status);

/* lc_member_handoffs -- progress thread: attach the data links the dialer opened (dial.h). */
void lc_member_handoffs(loco_manager_t *m);

/*
 * lc_members_leave -- we leave: queue LEAVE to every member (graceful);
 * lc_members_sent() says when every queue went out.
 */
void lc_members_leave(loco_manager_t *m);
int lc_members_sent(loco_manager_t *m);

/* lc_members_free -- after the threads stopped: close every link and connection. */
void lc_members_free(loco_manager_t *m);

/* lc_members_init -- the scratch messages. 0, -ENOMEM. lc_members_fini() frees them. */
int lc_members_init(loco_manager_t *m);
void lc_members_fini(loco_manager_t *m);

/* lc_members_excluded, _rejoined -- view.c: raise the channel layer's event. m->lock held. */
void lc_members_excluded(loco_manager_t *m);
void lc_members_rejoined(loco_manager_t *m);

/* lc_members_kill_conns -- view.c: a view left us out: end every control connection. */
void lc_members_kill_conns(loco_manager_t *m, const char *why);

#endif /* LOCO_LC_MEMBER_H */
