/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view.h -- the driver of the membership state machine (membership/ms.h,
 * docs/membership.md) in a running manager.
 *
 * The machine decides; this carries it out. member.c feeds the machine
 * its inputs (messages, heartbeats, lost connections, ticks) directly
 * through m->ms; the machine's effects come here (struct lc_ms_ops):
 * sending on a member's control connection, dialling, dropping a member
 * that a view left out, publishing the partition flag and the view id,
 * the application's events, and telling the channels (through the
 * events they subscribed to: lc_members_excluded(), lc_members_rejoined())
 * that we were excluded or rejoined. So membership never calls into
 * channels, and member.c never calls this file.
 *
 * Effects run on the progress thread with m->lock held; the application's
 * event function runs from lc_view_dispatch() without it.
 */
#ifndef LOCO_LC_VIEW_H
#define LOCO_LC_VIEW_H

#include <stdint.h>

#include <loco.h>

#include "membership/ms.h"

struct lc_view;

/* The manager's part (m->view); only view.c touches its fields. */
struct lc_view_part {
	struct lc_view *vw; /* the application's events */
	uint64_t id;        /* m->lock: the installed membership view's number */
	int part;           /* atomic: enum lc_ms_part, as the machine last said */
};

/* lc_view_id -- the installed view's number (0: none). m->lock held. */
uint64_t lc_view_id(loco_manager_t *m);

/* lc_view_init -- m->view and m->ms (JOINING). 0, -ENOMEM. lc_view_fini() frees. */
int lc_view_init(loco_manager_t *m);
void lc_view_fini(loco_manager_t *m);

/* lc_view_self -- our addresses are known (endpoints open): tell the machine. */
void lc_view_self(loco_manager_t *m);

/* lc_view_start_alone -- install view 1 = {this node}. */
void lc_view_start_alone(loco_manager_t *m);

/*
 * lc_view_late_hint -- m->lock held: after a timeout or partition message
 * about @what, say so if this node's own thread was late lately (the
 * cause may be here, not in the network), naming the settings.
 */
void lc_view_late_hint(loco_manager_t *m, const char *what);

/* lc_view_dispatch -- progress thread, no lock: run the application's event function. */
void lc_view_dispatch(loco_manager_t *m);

#endif /* LOCO_LC_VIEW_H */
