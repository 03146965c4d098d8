/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member_impl.h -- what member.c (the member table: members, the
 * connection list, data links) gives member_conn.c (control connections,
 * timers, data-link failures), which drives it; the calls go that way
 * only. No other file includes it. Everything here runs on the progress
 * thread with m->lock held.
 */
#ifndef LOCO_LC_MEMBER_IMPL_H
#define LOCO_LC_MEMBER_IMPL_H

#include <loco.h>

#include "conn.h"
#include "member.h"

/* lc_member_admit -- member.c: make the peer @c authenticated a member; NULL: drop @c. */
struct lc_member *lc_member_admit(loco_manager_t *m, struct lc_conn *c);

/* lc_member_conn_drop -- member.c: take @c out of the list and epoll, and free it. */
void lc_member_conn_drop(loco_manager_t *m, struct lc_conn *c);

/* lc_member_link_rebuild -- member.c: drop @mb's downed data link and have it rebuilt. */
void lc_member_link_rebuild(loco_manager_t *m, struct lc_member *mb, int cause);

#endif /* LOCO_LC_MEMBER_IMPL_H */
