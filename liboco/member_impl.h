/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member_impl.h -- what member.c (members, their data links, timers) and
 * member_conn.c (control connections and their messages) share; no other
 * file includes it. Everything here runs on the progress thread with
 * m->lock held.
 */
#ifndef LOCO_LC_MEMBER_IMPL_H
#define LOCO_LC_MEMBER_IMPL_H

#include <stdint.h>

#include <loco.h>

#include "conn.h"
#include "member.h"

/* lc_member_admit -- member.c: make the peer @c authenticated a member; NULL: drop @c. */
struct lc_member *lc_member_admit(loco_manager_t *m, struct lc_conn *c);

/* lc_member_conn_drop -- member_conn.c: take @c out of the list and epoll, and free it. */
void lc_member_conn_drop(loco_manager_t *m, struct lc_conn *c);

/* lc_member_conn_reap -- member_conn.c: drop dead @c; a member of the view is only suspected. */
void lc_member_conn_reap(loco_manager_t *m, struct lc_conn *c, const char *why);

/* lc_member_conn_input -- member_conn.c: read and handle what @c has. */
void lc_member_conn_input(loco_manager_t *m, struct lc_conn *c);

/* lc_member_dials -- member_conn.c: start the dials due at @now; returns when one is due next. */
uint64_t lc_member_dials(loco_manager_t *m, uint64_t now, uint64_t wake);

#endif /* LOCO_LC_MEMBER_IMPL_H */
