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

#include <loco.h>

#include "ctrl_wire.h"

#define LC_LINK_ERR_SLOTS 64 /* link failures reported by other threads, queued */

struct lc_conn;
struct fab_link;
struct lc_member;

/* What membership raises, on the progress thread with m->lock held. */
struct lc_member_events {
	void (*up)(loco_manager_t *m, struct lc_member *mb);
	void (*gone)(loco_manager_t *m, uint32_t node);
	void (*msg)(loco_manager_t *m, struct lc_member *from, const struct lc_msg *msg);
	void (*excluded)(loco_manager_t *m); /* a view left us out: remember who was there */
	void (*rejoined)(loco_manager_t *m); /* back in a view: wait for them (join timeout) */
};

/*
 * The member table: the manager's part (m->members). Only member.c
 * writes its fields; others read through the inline functions below
 * (progress thread, or m->lock held, as each says).
 */
struct lc_member_table {
	struct lc_member *head; /* progress thread; m->lock for readers elsewhere */
	struct lc_conn *conns;
	struct lc_member_events ev; /* the channel layer's subscription (lc_members_subscribe()) */
	uint64_t ctrl_refused_log_ns; /* last warning about refused strangers */
	unsigned ctrl_refused;        /* refused since that warning */
	uint64_t next_hb_ns;
	uint64_t hb_seq;
	uint64_t tick_ns;      /* atomic: the membership machine's last tick (0: none yet) */
	int leaving;           /* loco_fini() said LEAVE: peers going away is expected */
	struct lc_msg *rx_msg; /* progress thread's scratch messages (tx: m->lock) */
	struct lc_msg *tx_msg;
	uint64_t link_err[LC_LINK_ERR_SLOTS]; /* atomic: node << 32 | -status, 0: free */
	int link_err_lost;                    /* atomic: a report found no free slot */
};

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

/* lc_members_first -- the first member of @t (then ->next). m->lock held (or the progress thread). */
static inline struct lc_member *lc_members_first(const struct lc_member_table *t)
{
	return t->head;
}

/* lc_members_tx_msg -- the scratch message to send from; m->lock serializes its users. */
static inline struct lc_msg *lc_members_tx_msg(const struct lc_member_table *t)
{
	return t->tx_msg;
}

/* lc_members_tick_ns -- when the membership machine last ticked (0: not yet). Any thread. */
static inline uint64_t lc_members_tick_ns(const struct lc_member_table *t)
{
	return __atomic_load_n(&t->tick_ns, __ATOMIC_ACQUIRE);
}

/* lc_members_subscribe -- the channel layer's events (once, before the progress thread). */
static inline void lc_members_subscribe(struct lc_member_table *t,
                                        const struct lc_member_events *ev)
{
	t->ev = *ev;
}

#endif /* LOCO_LC_MEMBERS_H */
