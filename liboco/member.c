/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member.c -- the member table, on the progress thread (the rules are in
 * member.h): the lower layer of membership. Members' lifecycle (admitted,
 * up, removed), the connection list (a connection dropped), their data
 * links (handed over, rebuilt), leaving, init and fini. What drives it
 * (control connections and their messages, the timers, data-link
 * failures) is in member_conn.c, which calls this file; this file never
 * calls member_conn.c.
 *
 * A member is up (visible to channels) once it is in the installed view
 * (view.h), authenticated and linked. It is dropped only when a view
 * without it is installed. A broken or silent connection, or a fabric
 * error to it, only makes us suspect it (the view protocol confirms or
 * clears the suspicion); the lower id redials a lost connection. Node id
 * + incarnation name a member: a restarted node is a new member, and
 * messages about an older incarnation are ignored. The connector of the
 * control connection also opens the data link, carrying its node id and
 * incarnation as private data.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dial.h"
#include "log.h"
#include "manager.h"
#include "member_impl.h"
#include "sock.h"
#include "view.h"

struct lc_member *lc_member_find(loco_manager_t *m, uint32_t node)
{
	return lc_members_find(m->members.head, node);
}

/*
 * set_link -- @node's entry in the data path's table. When it returns, no
 * poster uses the link it replaced: the caller that owns it may close it.
 */
static void set_link(loco_manager_t *m, uint32_t node, struct fab_link *link)
{
	lc_links_set(&m->links, node, link);
}

/* member_check_up -- a member authenticated and linked becomes visible. */
static void member_check_up(loco_manager_t *m, struct lc_member *mb)
{
	if (mb->up || mb->link == NULL || mb->conn == NULL || mb->conn->state != LC_CONN_UP ||
	    lc_ms_state(m->ms) != LC_VS_NORMAL || !lc_ms_in(m->ms, mb->info.node, mb->info.inc))
		return;
	mb->up = 1;
	set_link(m, mb->info.node, mb->link);
	lc_cdial_cancel(m, mb->info.node);
	lc_dial_cancel(m, mb->info.node);
	lc_log_info("manager: node %u joined (incarnation %llx, control %s, data link on %s)",
	            mb->info.node, (unsigned long long)mb->info.inc, mb->info.ctrl_addr,
	            mb->link->fab->ops->name);
	m->members.ev.up(m, mb);
}

/* lc_member_attach_link -- @link is @mb's data link now (first, or rebuilt). */
void lc_member_attach_link(loco_manager_t *m, struct lc_member *mb, struct fab_link *link)
{
	mb->link = link;
	if (mb->up) {
		set_link(m, mb->info.node, link);
		lc_log_info("manager: data link to node %u rebuilt (on %s)", mb->info.node,
		            link->fab->ops->name);
	} else {
		member_check_up(m, mb);
	}
}

void lc_member_check_up(loco_manager_t *m, struct lc_member *mb)
{
	member_check_up(m, mb);
}

/* lc_member_conn_drop -- take @c out of the list and epoll, and free it. */
void lc_member_conn_drop(loco_manager_t *m, struct lc_conn *c)
{
	for (struct lc_conn **pp = &m->members.conns; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	lc_conn_unwatch(c);
	if (c->member != NULL && c->member->conn == c)
		c->member->conn = NULL;
	if (c->dial != NULL)
		lc_cdial_failed(m, c->dial, c->dial_err ? c->dial_err : -ECONNREFUSED);
	lc_conn_free(c);
}

/* member_remove -- drop @mb: its links close, then channels hear it is gone. */
static void member_remove(loco_manager_t *m, struct lc_member *mb, int graceful, const char *why)
{
	uint32_t node = mb->info.node;

	for (struct lc_member **pp = &m->members.head; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == mb) {
			*pp = mb->next;
			break;
		}
	}
	if (m->members.leaving) {
		lc_log_debug("manager: dropping node %u as we leave", node);
	} else if (graceful) {
		lc_log_info("manager: node %u left", node);
	} else if (mb->up) {
		lc_log_warn("manager: node %u failed: %s", node, why);
	} else {
		lc_log_info("manager: dropping node %u: %s", node, why);
	}
	/*
	 * Close the data link before the objects hear of the leave: requests
	 * of the departed node still in flight to us are dropped, so none can
	 * land after a callback has cleaned up after it (e.g. a lock's holder).
	 */
	if (mb->up)
		set_link(m, node, NULL);
	if (mb->link != NULL)
		fab_link_close(mb->link);
	mb->link = NULL;
	lc_cdial_cancel(m, node);
	lc_dial_cancel(m, node);
	lc_linkin_forget(m, node, mb->info.inc);
	if (mb->up)
		m->members.ev.gone(m, node);
	if (mb->conn != NULL) {
		mb->conn->member = NULL;
		lc_member_conn_drop(m, mb->conn);
	}
	free(mb);
}

void lc_member_remove(loco_manager_t *m, struct lc_member *mb, int graceful, const char *why)
{
	member_remove(m, mb, graceful, why);
}

/*
 * lc_member_admit -- @c authenticated a peer: make it a member. An older
 * incarnation of the same node is dropped first (it restarted). Returns
 * the member, or NULL when the connection must be dropped.
 */
struct lc_member *lc_member_admit(loco_manager_t *m, struct lc_conn *c)
{
	struct lc_member *mb = lc_member_find(m, c->peer.node);

	if (mb != NULL && mb->info.inc < c->peer.inc) {
		if (lc_ms_in(m->ms, mb->info.node, mb->info.inc))
			return NULL; /* lc_ms_admit_check() said no: never evict a member */
		member_remove(m, mb, 0, "restarted with a new incarnation");
		mb = NULL;
	}
	if (mb != NULL && mb->info.inc > c->peer.inc) {
		lc_log_info("manager: ignoring a stale incarnation of node %u", c->peer.node);
		return NULL;
	}
	if (mb != NULL && mb->conn != NULL) {
		/* both sides connected at once: keep the connection the lower id made */
		uint32_t keep_initiator = m->node_id < c->peer.node ? m->node_id : c->peer.node;
		int this_is_kept = (c->initiator ? m->node_id : c->peer.node) == keep_initiator;

		if (!this_is_kept)
			return NULL;
		lc_member_conn_drop(m, mb->conn);
	}
	if (mb == NULL) {
		mb = calloc(1, sizeof(*mb));
		if (mb == NULL)
			return NULL;
		mb->info = c->peer;
		mb->next = m->members.head;
		m->members.head = mb;
	}
	mb->conn = c;
	c->member = mb;
	if (mb->link == NULL)
		mb->link = lc_linkin_take(m, c->peer.node, c->peer.inc);
	return mb;
}

/* attach_dialed -- a data link the dialer opened (first, or rebuilt). m->lock held. */
static void attach_dialed(loco_manager_t *m, struct lc_dial_done *d)
{
	struct lc_member *mb = lc_member_find(m, d->info.node);

	if (mb != NULL && mb->info.inc == d->info.inc && mb->link == NULL)
		lc_member_attach_link(m, mb, d->link);
	else
		fab_link_close(d->link);
}

void lc_member_handoffs(loco_manager_t *m)
{
	struct lc_dial_done *d = lc_dial_take(m);
	struct fab_link *link;
	uint32_t node;
	uint64_t inc;

	pthread_mutex_lock(&m->lock);
	/* the links others opened to us, admitted by linkin.c this turn */
	while ((link = lc_linkin_ready(m, &node, &inc)) != NULL) {
		struct lc_member *mb = lc_member_find(m, node);

		if (mb != NULL && mb->info.inc == inc && mb->link == NULL)
			lc_member_attach_link(m, mb, link);
		else
			fab_link_close(link);
	}
	/* members that opened a new link while ours to them looks up: ours is dead */
	while (lc_linkin_newer(m, &node, &inc)) {
		struct lc_member *mb = lc_member_find(m, node);

		if (mb == NULL || mb->info.inc != inc || mb->link == NULL || mb->conn == NULL ||
		    mb->conn->initiator)
			continue;
		lc_log_info("manager: node %u opened a new data link: its end of the old one "
		            "is down, so ours is too",
		            node);
		lc_member_link_rebuild(m, mb, -ECONNRESET); /* takes the new one */
	}
	while (d != NULL) {
		struct lc_dial_done *next = d->next;

		attach_dialed(m, d);
		free(d);
		d = next;
	}
	pthread_mutex_unlock(&m->lock);
}

/*
 * lc_member_link_rebuild -- @mb's data link went down (a refused access
 * puts an RC link in the error state) while the member itself is alive:
 * drop the link; the side that opened the control connection opens a new
 * one, the other side takes it in lc_linkin_accept() (linkin.c). m->lock
 * held.
 */
void lc_member_link_rebuild(loco_manager_t *m, struct lc_member *mb, int cause)
{
	struct fab_link *link;
	int leaving = lc_ms_said_leave(m->ms, mb->info.node, mb->info.inc);

	lc_log_info("manager: data link to node %u down (%s): %s", mb->info.node, strerror(-cause),
	            leaving ? "it leaves" : "rebuilding it");
	if (mb->up)
		set_link(m, mb->info.node, NULL);
	fab_link_close(mb->link);
	mb->link = NULL;
	if (leaving)
		return; /* the next view drops it */
	if (mb->conn->initiator) {
		lc_dial_link(m, &mb->info);
		return;
	}
	link = lc_linkin_take(m, mb->info.node, mb->info.inc);
	if (link != NULL)
		lc_member_attach_link(m, mb, link);
}

void lc_members_leave(loco_manager_t *m)
{
	struct lc_msg msg = {.type = LC_MSG_LEAVE};

	pthread_mutex_lock(&m->lock);
	m->members.leaving = 1;
	for (struct lc_conn *c = m->members.conns; c != NULL; c = c->next)
		if (c->state == LC_CONN_UP && !lc_conn_is_dead(c))
			lc_conn_send(c, &msg);
	lc_ms_leave(m->ms, lc_now_ns()); /* when we coordinate, we drop ourselves */
	pthread_mutex_unlock(&m->lock);
}

int lc_members_sent(loco_manager_t *m)
{
	int all = 1;

	pthread_mutex_lock(&m->lock);
	for (struct lc_conn *c = m->members.conns; c != NULL && all; c = c->next)
		if (!lc_conn_is_dead(c) && lc_conn_queued(c) > 0)
			all = 0;
	pthread_mutex_unlock(&m->lock);
	return all;
}

/*
 * close_conns -- free every control connection at the manager's end. Their
 * sockets close together, each after its peer's FIN (LC_CONN_LINGER_MS at
 * most in all), so that no peer sees a reset, which could cost it the
 * LEAVE or the VIEW we sent last.
 */
static void close_conns(loco_manager_t *m)
{
	unsigned n = 0, i = 0;
	int *fd;

	for (struct lc_conn *c = m->members.conns; c != NULL; c = c->next)
		n++;
	fd = n > 0 ? malloc(n * sizeof(*fd)) : NULL;
	for (struct lc_conn *c = m->members.conns; fd != NULL && c != NULL; c = c->next) {
		fd[i++] = c->fd;
		c->fd = -1; /* closed below, not by lc_conn_free() */
	}
	if (fd != NULL)
		lc_sock_close_all(fd, n, LC_CONN_LINGER_MS);
	free(fd);
	while (m->members.conns != NULL) {
		struct lc_conn *c = m->members.conns;

		m->members.conns = c->next;
		lc_conn_free(c);
	}
}

void lc_members_free(loco_manager_t *m)
{
	lc_cdials_free(m);
	lc_links_set(&m->links, m->node_id, NULL);
	lc_linkin_close_self(m);
	while (m->members.head != NULL) {
		struct lc_member *mb = m->members.head;

		m->members.head = mb->next;
		lc_links_set(&m->links, mb->info.node, NULL);
		if (mb->link != NULL)
			fab_link_close(mb->link);
		free(mb);
	}
	close_conns(m);
	lc_linkin_free(m);
}

int lc_members_init(loco_manager_t *m)
{
	m->members.rx_msg = malloc(sizeof(*m->members.rx_msg));
	m->members.tx_msg = calloc(1, sizeof(*m->members.tx_msg));
	if (m->members.rx_msg == NULL || m->members.tx_msg == NULL) {
		lc_members_fini(m);
		return -ENOMEM;
	}
	return 0;
}

void lc_members_fini(loco_manager_t *m)
{
	free(m->members.rx_msg);
	free(m->members.tx_msg);
	m->members.rx_msg = m->members.tx_msg = NULL;
}

void lc_members_excluded(loco_manager_t *m)
{
	m->members.ev.excluded(m);
}

void lc_members_rejoined(loco_manager_t *m)
{
	m->members.ev.rejoined(m);
}

void lc_members_kill_conns(loco_manager_t *m, const char *why)
{
	for (struct lc_conn *c = m->members.conns; c != NULL; c = c->next)
		lc_conn_kill(c, why);
}
