/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * members.h -- an entry of the member table (member.h owns the table).
 * Other parts that only look an entry up (the data links coming in,
 * linkin.c) read it through this header, without calling member.c.
 * m->lock held (or the progress thread).
 */
#ifndef LOCO_LC_MEMBERS_H
#define LOCO_LC_MEMBERS_H

#include <stdint.h>

#include "ctrl_wire.h"

struct lc_conn;
struct fab_link;

/* A member of the cluster as this node sees it. */
struct lc_member {
	struct lc_member_info info;
	struct lc_conn *conn;
	struct fab_link *link;
	int up;     /* in the installed view, authenticated and linked: visible to channels */
	int joiner; /* it asked us, its contact, to join (view.c) */
	uint64_t since_ns; /* when its connection was admitted */
	struct lc_member *next;
};

/* lc_members_find -- the entry for @node in the list @head, or NULL. */
static inline struct lc_member *lc_members_find(struct lc_member *head, uint32_t node)
{
	for (struct lc_member *mb = head; mb != NULL; mb = mb->next)
		if (mb->info.node == node)
			return mb;
	return NULL;
}

#endif /* LOCO_LC_MEMBERS_H */
