/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member_conn.c -- what drives the member table, on the progress thread
 * (the rules are in member.h): the control connections (listening,
 * accepting within the caps on unauthenticated connections, dialing, the
 * handshake, the messages of authenticated members, reaping dead
 * connections), the timers (heartbeats, silent connections, strays, due
 * dials) and the handling of data-link failures. It calls the table
 * (member.c, through member_impl.h) and member.c never calls back here.
 *
 * Who connects: a joiner connects to its contact; the contact sends it the
 * member list and tells the others (MEMBER_JOIN). Between any other pair
 * the node with the lower id connects, so each pair has one connection.
 * The connector of the control connection also opens the data link,
 * carrying its node id and incarnation as private data.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "dial.h"
#include "log.h"
#include "manager.h"
#include "member_impl.h"
#include "view.h"
#include "wake.h"

static void conn_input(loco_manager_t *m, struct lc_conn *c);

/* conn_alive -- whether @c is still in the list (an earlier event may have dropped it). */
static int conn_alive(loco_manager_t *m, const struct lc_conn *c)
{
	for (struct lc_conn *x = m->members.conns; x != NULL; x = x->next)
		if (x == c)
			return 1;
	return 0;
}

/* conn_adopt -- watch @c on the progress thread's epoll and put it in the list. */
static int conn_adopt(loco_manager_t *m, struct lc_conn *c)
{
	int ret = lc_conn_adopt(c, m->epfd, m->evfd, &m->progress);

	if (ret == 0) {
		c->next = m->members.conns;
		m->members.conns = c;
	}
	return ret;
}

/* cdial_start -- connect for @d; the handshake goes on in the progress thread. */
static void cdial_start(loco_manager_t *m, struct lc_cdial *d)
{
	struct lc_conn *c;
	int ret = lc_auth_connect(m, d->info.ctrl_addr, &c, m->members.tx_msg);

	if (ret == 0) {
		c->peer.node = d->info.node;
		ret = conn_adopt(m, c);
		if (ret)
			lc_conn_free(c);
	}
	if (ret) {
		lc_log_debug("manager: connecting to %s: %s", d->info.ctrl_addr, strerror(-ret));
		lc_cdial_failed(m, d, ret);
		return;
	}
	c->dial = d;
	d->conn = c;
}

/* dials -- start the dials that are due; returns when one is due next. m->lock held. */
static uint64_t dials(loco_manager_t *m, uint64_t now, uint64_t wake)
{
	struct lc_cdial *d;

	/* each start either is under way or failed (due later, or freed): this ends */
	while ((d = lc_cdial_due(m, now, &wake)) != NULL)
		cdial_start(m, d);
	return wake;
}

/* ------------------------------------------------------------------ */
/* the acceptor's side                                                */

int lc_member_listen(loco_manager_t *m, const char *addr)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	struct fab_addr a;
	char ip[INET_ADDRSTRLEN];
	int one = 1, ret;

	ret = fab_addr_parse(addr, 0, &a);
	if (ret) {
		lc_log_err("manager: bad control address %s (want ip[:port])", addr);
		return ret;
	}
	memcpy(&sin, &a.ss, sizeof(sin));
	m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (m->lfd < 0)
		return -errno;
	setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(m->lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(m->lfd, 64) < 0 ||
	    getsockname(m->lfd, (struct sockaddr *)&sin, &len) < 0) {
		ret = -errno;
		lc_log_err("manager: cannot listen on %s: %s", addr, strerror(-ret));
		return ret;
	}
	inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
	snprintf(m->ctrl_addr, sizeof(m->ctrl_addr), "%s:%u", ip, ntohs(sin.sin_port));
	return 0;
}

/*
 * The caps on control connections not authenticated yet cannot tell a
 * member from a stranger: only the AUTH proves who connects. Refusing
 * newcomers once the caps are met let a stranger who keeps them full
 * (reopening what we close) refuse every joiner for as long as it
 * liked. So a newcomer always comes in, and room is made by closing the
 * unauthenticated connection that has least to show for itself: one
 * already dead, then one that has not sent its HELLO, then one that has
 * not answered our CHALLENGE; the oldest of those; from the newcomer's
 * address when that cap is the one met. A connector sends its HELLO at
 * once and answers the CHALLENGE within a round trip, and the HELLO is
 * read as the connection is accepted (lc_member_accept()): a joiner's
 * connection is closed only if the cap's worth of newer ones from its
 * address, all past their HELLO, came in within that round trip, however
 * long the flood lasts. The caps still bound what strangers hold (one
 * in, one out), and the cost is the scan the caps already made.
 */

/* ctrl_rank -- how readily an unauthenticated connection @c gives way: lower first. */
static int ctrl_rank(const struct lc_conn *c)
{
	return lc_conn_is_dead(c) ? 0 : c->state == LC_CONN_HELLO ? 1 : 2;
}

/* ctrl_before -- whether @c gives way before @v (NULL: nothing chosen yet). */
static int ctrl_before(const struct lc_conn *c, const struct lc_conn *v)
{
	return v == NULL || ctrl_rank(c) < ctrl_rank(v) ||
	       (ctrl_rank(c) == ctrl_rank(v) && c->accepted_ns < v->accepted_ns);
}

/*
 * ctrl_room -- make room for a new unauthenticated control connection
 * from @ip within the caps (in total and per address): a stranger cannot
 * take every fd of the node, nor keep a member out. Returns the
 * connection to close for it, or NULL when there is room. m->lock held.
 */
static struct lc_conn *ctrl_room(loco_manager_t *m, uint32_t ip)
{
	struct lc_conn *any = NULL, *same = NULL;
	unsigned total = 0, nsame = 0;

	for (struct lc_conn *c = m->members.conns; c != NULL; c = c->next) {
		if (c->initiator || c->state == LC_CONN_UP)
			continue;
		total++;
		if (ctrl_before(c, any))
			any = c;
		if (c->src_ip != ip)
			continue;
		nsame++;
		if (ctrl_before(c, same))
			same = c;
	}
	if (nsame >= LC_CTRL_UNAUTH_PER_SRC)
		return same; /* it counts in the total too */
	return total >= LC_CTRL_UNAUTH_MAX ? any : NULL;
}

/* ctrl_evicted -- log the connections closed for room, at most once a second. m->lock held. */
static void ctrl_evicted(loco_manager_t *m, const struct lc_conn *c)
{
	uint64_t now = lc_now_ns();
	char a[INET_ADDRSTRLEN];

	m->members.ctrl_refused++;
	if (now - m->members.ctrl_refused_log_ns < 1000000000ull)
		return;
	inet_ntop(AF_INET, &c->src_ip, a, sizeof(a));
	lc_log_warn("manager: control connection from %s closed to make room: too many not "
	            "authenticated (%u closed in the last second; caps %d, %d per address)",
	            a, m->members.ctrl_refused, LC_CTRL_UNAUTH_MAX, LC_CTRL_UNAUTH_PER_SRC);
	m->members.ctrl_refused_log_ns = now;
	m->members.ctrl_refused = 0;
}

void lc_member_accept(loco_manager_t *m)
{
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < 16; i++) {
		struct sockaddr_in sin = {0};
		socklen_t slen = sizeof(sin);
		int fd = accept4(m->lfd, (struct sockaddr *)&sin, &slen,
		                 SOCK_NONBLOCK | SOCK_CLOEXEC),
		    one = 1;
		struct lc_conn *c;

		if (fd < 0)
			break;
		/* one in, one out: the caps are met at most once per newcomer */
		if ((c = ctrl_room(m, sin.sin_addr.s_addr)) != NULL) {
			ctrl_evicted(m, c);
			lc_member_conn_drop(m, c);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = lc_conn_new(fd, 0, m->node_id, m->inc);
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->src_ip = sin.sin_addr.s_addr;
		c->state = LC_CONN_HELLO;
		if (conn_adopt(m, c) != 0) {
			lc_conn_free(c);
			continue;
		}
		/*
		 * A connector's HELLO is usually here already: read it now, so
		 * that its connection is past the first to go (ctrl_rank())
		 * before the next newcomer needs room.
		 */
		conn_input(m, c);
	}
	pthread_mutex_unlock(&m->lock);
}

static void on_hello(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	struct lc_member *old = lc_member_find(m, msg->u.hello.self.node);
	const char *why = NULL;
	int ret = lc_auth_hello(m, c, msg, old != NULL ? old->info.inc : 0, &why);

	if (ret) {
		lc_auth_refuse(c, -ret, why);
		lc_conn_kill(c, why);
		return;
	}
	lc_conn_send(c, msg); /* the CHALLENGE */
}

/* welcome -- the member list, ourselves included, into @msg. */
static void welcome(loco_manager_t *m, struct lc_msg *msg)
{
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_WELCOME;
	lc_self_info(m, &msg->u.welcome.m[msg->u.welcome.n++]);
	for (struct lc_member *x = m->members.head; x != NULL && msg->u.welcome.n < LC_MAX_MEMBERS;
	     x = x->next)
		/*
		 * Every authenticated member, linked or not: one admitted before
		 * us but not linked yet must still reach us (here, or through
		 * MEMBER_JOIN, which goes to authenticated members only).
		 */
		if (x->up || (x->conn != NULL && x->conn->state == LC_CONN_UP))
			msg->u.welcome.m[msg->u.welcome.n++] = x->info;
}

static void on_auth(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	struct lc_member *mb;
	const char *why = NULL;
	int ret;

	if (lc_auth_check(m, c, msg) != 0) {
		lc_auth_refuse(c, LOCO_EAUTH, "authentication failed");
		lc_conn_kill(c, "authentication failed");
		return;
	}
	/* a second process with a live member's id is refused; it never evicts anyone */
	ret = lc_ms_admit_check(m->ms, lc_now_ns(), c->peer.node, c->peer.inc, &why);
	if (ret) {
		lc_log_warn("manager: refused node %u (incarnation %llx) at %s: %s", c->peer.node,
		            (unsigned long long)c->peer.inc, c->peer.ctrl_addr, why);
		lc_auth_refuse(c, -ret, why);
		lc_conn_kill(c, why);
		return;
	}
	mb = lc_member_admit(m, c);
	if (mb == NULL) {
		lc_conn_kill(c, "not admitted");
		return;
	}
	welcome(m, msg);
	lc_conn_send(c, msg);
	if (mb->up)
		m->members.ev.up(m, mb); /* reconnected: announce our channels again (idempotent) */
	mb->since_ns = lc_now_ns();
	lc_ms_admitted(m->ms, mb->since_ns, mb->info.node, mb->info.inc);
	lc_member_check_up(m, mb);
}

/* conn_msg_up -- a message on an authenticated connection. */
static void conn_msg_up(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	struct lc_member *mb;

	lc_ms_heard(m->ms, lc_now_ns(), c->peer.node, c->peer.inc);
	switch (msg->type) {
	case LC_MSG_HEARTBEAT:
		break;
	case LC_MSG_MEMBER_JOIN:
	case LC_MSG_MEMBER_LEAVE:
		/* an older protocol's: membership changes only through views now */
		lc_log_debug("manager: ignoring %s from node %u", lc_msg_type_str(msg->type),
		             c->peer.node);
		break;
	case LC_MSG_VC:
		if (c->member != NULL)
			lc_ms_msg(m->ms, lc_now_ns(), &c->member->info, c->member->joiner, msg);
		break;
	case LC_MSG_LEAVE:
		mb = c->member;
		if (mb != NULL && lc_ms_in(m->ms, mb->info.node, mb->info.inc))
			lc_ms_leave_rx(m->ms, lc_now_ns(), mb->info.node,
			               mb->info.inc); /* the next view drops it */
		else if (mb != NULL)
			lc_member_remove(m, mb, 1, NULL);
		else
			lc_conn_kill(c, "left");
		break;
	case LC_MSG_CHAN:
	case LC_MSG_CHAN_LEAVE:
	case LC_MSG_OBJ:
		/*
		 * Only from a member that is up here (in our view, linked): one
		 * that installed a view with us before we did announces itself
		 * again when we bring it up (on_up asks it to).
		 */
		if (c->member != NULL && c->member->up)
			m->members.ev.msg(m, c->member, msg);
		break;
	case LC_MSG_REFUSE:
		lc_log_warn("manager: node %u refused us: %s", c->peer.node, msg->u.refuse.reason);
		lc_conn_kill(c, "refused");
		break;
	default:
		lc_log_warn("manager: unexpected %s from node %u", lc_msg_type_str(msg->type),
		            c->peer.node);
		lc_conn_kill(c, "protocol error");
	}
}

/* dial_refused -- the acceptor refused our handshake: its reason, and the dial's error. */
static void dial_refused(struct lc_conn *c, const struct lc_msg *msg)
{
	lc_log_err("manager: %s refused us: %s", c->peer.ctrl_addr, msg->u.refuse.reason);
	c->dial_err = -(int)msg->u.refuse.err;
	lc_conn_kill(c, "refused");
}

/* on_welcome -- our handshake is done: admit the member, open the data link. */
static void on_welcome(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	struct lc_cdial *d = c->dial;
	int join = d != NULL && d->join;
	struct lc_member *mb;

	for (uint32_t i = 0; i < msg->u.welcome.n; i++)
		if (msg->u.welcome.m[i].node == c->peer.node)
			c->peer = msg->u.welcome.m[i];
	c->state = LC_CONN_UP;
	if (d != NULL)
		lc_cdial_free(m, d); /* done: the connection carries on */
	mb = lc_member_admit(m, c);
	if (mb == NULL) {
		if (join)
			lc_dial_join_answer(m, -EAGAIN);
		lc_conn_kill(c, "not admitted");
		return;
	}
	mb->since_ns = lc_now_ns();
	if (mb->up)
		m->members.ev.up(m, mb); /* reconnected: announce our channels again (idempotent) */
	if (join)
		lc_ms_joining(m->ms, lc_now_ns(), c->peer.node); /* a member once a view has us */
	if (mb->link == NULL)
		lc_dial_link(m, &mb->info); /* the connector opens the data link */
	lc_member_check_up(m, mb);
}

/* conn_msg_connector -- a message on a connection we opened, before it is up. */
static void conn_msg_connector(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	if (msg->type == LC_MSG_REFUSE) {
		dial_refused(c, msg);
	} else if (c->state == LC_CONN_CHALLENGE && msg->type == LC_MSG_CHALLENGE) {
		if (lc_auth_challenge(m, c, msg) != 0) {
			/* say why, so that the member logs the refusal too */
			lc_auth_refuse(c, LOCO_EAUTH, "authentication failed");
			c->dial_err = -LOCO_EAUTH;
			lc_conn_kill(c, "authentication failed");
			return;
		}
		lc_conn_send(c, msg); /* the AUTH */
	} else if (c->state == LC_CONN_WELCOME && msg->type == LC_MSG_WELCOME) {
		on_welcome(m, c, msg);
	} else {
		c->dial_err = -EPROTO;
		lc_conn_kill(c, "protocol error");
	}
}

/* conn_msg -- one message from @c. */
static void conn_msg(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	if (c->state == LC_CONN_CHALLENGE || c->state == LC_CONN_WELCOME) {
		conn_msg_connector(m, c, msg);
		return;
	}
	if (c->state == LC_CONN_HELLO) {
		if (msg->type != LC_MSG_HELLO)
			lc_conn_kill(c, "protocol error");
		else
			on_hello(m, c, msg);
		return;
	}
	if (c->state == LC_CONN_AUTH) {
		if (msg->type == LC_MSG_REFUSE && msg->u.refuse.err == LOCO_EAUTH)
			lc_log_err("manager: node %u (%s) failed authentication: wrong cluster "
			           "secret (LOCO_SECRET); refused",
			           c->peer.node, c->peer.ctrl_addr);
		if (msg->type != LC_MSG_AUTH || msg->src_node != c->peer.node)
			lc_conn_kill(c, "protocol error");
		else
			on_auth(m, c, msg);
		return;
	}
	if (msg->src_node != c->peer.node || msg->src_inc != c->peer.inc) {
		lc_conn_kill(c,
		             "protocol error"); /* a connection speaks for one incarnation only */
		return;
	}
	conn_msg_up(m, c, msg);
}

/*
 * conn_reap -- drop a dead connection. A member of the view
 * only becomes a suspect (the lower id redials); any other peer is
 * dropped.
 */
static void conn_reap(loco_manager_t *m, struct lc_conn *c, const char *why)
{
	struct lc_member *mb = c->member;

	if (mb != NULL)
		lc_ms_join_lost(m->ms, lc_now_ns(), mb->info.node);
	if (mb != NULL && mb->conn == c && lc_ms_in(m->ms, mb->info.node, mb->info.inc) &&
	    lc_ms_state(m->ms) == LC_VS_NORMAL && !m->members.leaving) {
		lc_log_info("manager: control connection to node %u lost (%s)", mb->info.node, why);
		lc_member_conn_drop(m, c);
		lc_ms_suspect(m->ms, lc_now_ns(), mb->info.node);
	} else if (mb != NULL && mb->conn == c) {
		lc_member_remove(m, mb, 0, why);
	} else {
		lc_member_conn_drop(m, c);
	}
}

/* conn_input -- read and handle what @c has. m->lock held. */
static void conn_input(loco_manager_t *m, struct lc_conn *c)
{
	int ret = lc_conn_recv(c);

	if (ret < 0) {
		conn_reap(m, c, ret == -ECONNRESET ? "connection closed" : strerror(-ret));
		return;
	}
	while (!lc_conn_is_dead(c)) {
		ret = lc_conn_next(c, m->members.rx_msg);
		if (ret == 0)
			return;
		if (ret < 0) {
			lc_log_warn("manager: bad message from %s: %s", c->peer.ctrl_addr,
			            strerror(-ret));
			lc_conn_kill(c, "protocol error");
			break;
		}
		conn_msg(m, c, m->members.rx_msg);
		if (!conn_alive(m, c))
			return; /* the message removed its member and the connection */
	}
	conn_reap(m, c, lc_conn_dead_why(c));
}

void lc_member_input(loco_manager_t *m, struct lc_conn *c, unsigned events)
{
	pthread_mutex_lock(&m->lock);
	if (conn_alive(m, c)) {
		if (events & LC_EV_OUT)
			lc_conn_flush(c);
		if (events & LC_EV_IN)
			conn_input(m, c);
		else if (lc_conn_is_dead(c))
			conn_reap(m, c, lc_conn_dead_why(c));
	}
	pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------------ */
/* data-link failures                                                 */

void lc_member_link_report(loco_manager_t *m, uint32_t node, int status)
{
	uint64_t v = (uint64_t)node << 32 | (uint32_t)-status, zero;

	for (unsigned i = 0; i < LC_LINK_ERR_SLOTS; i++) {
		zero = 0;
		if (__atomic_load_n(&m->members.link_err[i], __ATOMIC_RELAXED) == v)
			goto wake; /* reported already */
		if (__atomic_compare_exchange_n(&m->members.link_err[i], &zero, v, 0,
		                                __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			goto wake;
	}
	/* no room: the progress thread's scan of every link state finds it */
	__atomic_store_n(&m->members.link_err_lost, 1, __ATOMIC_RELEASE);
wake:
	lc_wake(m);
}

void lc_member_link_errors(loco_manager_t *m)
{
	for (unsigned i = 0; i < LC_LINK_ERR_SLOTS; i++) {
		uint64_t v;

		/* a plain load first: an exchange of an empty slot would dirty its line each turn */
		if (__atomic_load_n(&m->members.link_err[i], __ATOMIC_RELAXED) == 0)
			continue;
		v = __atomic_exchange_n(&m->members.link_err[i], 0, __ATOMIC_ACQUIRE);
		if (v != 0)
			lc_member_link_failed(m, (uint32_t)(v >> 32), -(int)(uint32_t)v);
	}
	/* the lost ones: lc_member_timers() checks every link's state each turn */
	__atomic_store_n(&m->members.link_err_lost, 0, __ATOMIC_RELAXED);
}

/*
 * link_down -- @mb's data link failed (@status, 0: unknown) or is down
 * (@cause, 0: not known to be). A member that leaves closes its links
 * after it sent LEAVE, which may wait unread on its control connection:
 * that is read first. A member that said LEAVE is neither suspected nor
 * relinked (the next view drops it); any other is suspected on a reset or
 * timeout (a failed data link is a suspicion, never a removal by itself)
 * and its link is rebuilt. m->lock held; @mb may be gone after it.
 */
static void link_down(loco_manager_t *m, struct lc_member *mb, int cause, int status)
{
	uint32_t node = mb->info.node;
	uint64_t inc = mb->info.inc;

	if (mb->conn != NULL && mb->conn->state == LC_CONN_UP) {
		conn_input(m, mb->conn);
		mb = lc_member_find(m, node);
		if (mb == NULL || mb->info.inc != inc)
			return;
	}
	if ((status == -ECONNRESET || status == -ETIMEDOUT) && mb->up &&
	    !lc_ms_said_leave(m->ms, node, inc))
		lc_ms_suspect(m->ms, lc_now_ns(), node);
	if (cause == 0 && mb->link != NULL)
		cause = fab_link_state(mb->link);
	if (cause != 0 && mb->link != NULL && mb->conn != NULL)
		lc_member_link_rebuild(m, mb, cause);
}

void lc_member_link_failed(loco_manager_t *m, uint32_t node, int status)
{
	struct lc_member *mb;

	pthread_mutex_lock(&m->lock);
	mb = lc_member_find(m, node);
	if (mb != NULL && !m->members.leaving)
		link_down(m, mb, 0, status);
	pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------------ */
/* timers                                                             */

/* heartbeat -- to every authenticated connection, from the preallocated message. */
static void heartbeat(loco_manager_t *m)
{
	++m->members.hb_seq;
	for (struct lc_conn *c = m->members.conns; c != NULL; c = c->next)
		if (c->state == LC_CONN_UP && !lc_conn_is_dead(c))
			lc_conn_send(c,
			             lc_ms_hb(m->ms)); /* our view id: a peer behind catches up */
}

/*
 * check_conns -- drop dead, silent and stalled connections; returns when
 * to look again. Silence is measured against the peer's detection bound
 * (the membership machine's, adaptive), less this node's own recent
 * lateness: a peer is not blamed for the time our thread slept.
 */
static uint64_t check_conns(loco_manager_t *m, uint64_t now, uint64_t limit, uint64_t wake)
{
	/* a handshake is a few messages: the failure bound, at least LC_IO_TIMEOUT_MS */
	uint64_t hs_limit =
	    limit > LC_IO_TIMEOUT_MS * 1000000ull ? limit : LC_IO_TIMEOUT_MS * 1000000ull;
	uint64_t late = lc_ms_late(m->ms);
	int unsure = lc_ms_partitioned(m->ms) == LC_MS_UNSURE;
	struct lc_conn *c, *next;

	for (c = m->members.conns; c != NULL; c = next) {
		uint64_t bound = c->state == LC_CONN_UP ? lc_ms_bound(m->ms, c->peer.node) : limit;
		char why[80];

		if (bound < limit)
			bound = limit;
		bound += late;
		next = c->next;
		if (lc_conn_is_dead(c)) {
			snprintf(why, sizeof(why), "%s", lc_conn_dead_why(c));
		} else if (c->state != LC_CONN_UP && now - c->accepted_ns > hs_limit + late) {
			snprintf(why, sizeof(why), "no handshake within %llu ms",
			         (unsigned long long)(hs_limit / 1000000));
			c->dial_err = -ETIMEDOUT;
		} else if (!unsure && now > c->last_rx_ns && now - c->last_rx_ns > 2 * bound) {
			snprintf(why, sizeof(why), "nothing heard for %llu ms",
			         (unsigned long long)(2 * bound / 1000000));
		} else if (!unsure && lc_conn_stalled(c, now, bound)) {
			snprintf(why, sizeof(why),
			         "its control connection took nothing for %llu ms",
			         (unsigned long long)(bound / 1000000));
		} else {
			if (c->last_rx_ns + 2 * bound + 1 < wake)
				wake = c->last_rx_ns + 2 * bound + 1;
			continue;
		}
		conn_reap(m, c, why);
		next = m->members.conns; /* the list may have changed */
	}
	return wake;
}

/*
 * strays -- peers connected to us that are not in the view: a joiner
 * waits for its view up to the join timeout, an excluded node (told so
 * by our VIEW) for twice the failure bound.
 */
static void strays(loco_manager_t *m, uint64_t now, uint64_t limit)
{
	uint64_t join_limit = (uint64_t)m->cfg.join_timeout_ms * 1000000ull;

	if (lc_ms_state(m->ms) != LC_VS_NORMAL)
		return;
	for (struct lc_member *mb = m->members.head; mb != NULL; mb = mb->next) {
		if (lc_ms_in(m->ms, mb->info.node, mb->info.inc) ||
		    now - mb->since_ns < (mb->joiner ? join_limit : 2 * limit))
			continue;
		lc_member_remove(m, mb, 0,
		                 mb->joiner ? "not in a view within the join timeout"
		                            : "not in the view");
		return; /* at most one per tick: the list changed */
	}
}

uint64_t lc_member_timers(loco_manager_t *m, uint64_t now)
{
	uint64_t limit = (uint64_t)m->cfg.fail_timeout_ms * 1000000ull, wake, t;

	pthread_mutex_lock(&m->lock);
	if (now >= m->members.next_hb_ns) {
		heartbeat(m);
		m->members.next_hb_ns = now + limit / 4;
	}
	for (struct lc_member *mb = m->members.head; mb != NULL; mb = mb->next) {
		int cause = mb->link != NULL && mb->conn != NULL && !m->members.leaving
		                ? fab_link_state(mb->link)
		                : 0;

		/*
		 * A link that went down while its member still talks to us
		 * (e.g. after a refused access): rebuild it. Whether the member
		 * itself failed is for its control connection to say.
		 */
		if (cause != 0) {
			link_down(m, mb, cause, 0);
			break; /* at most one per tick: the list may have changed */
		}
	}
	/* first: the machine sees how late this tick is, before any silence is judged */
	t = lc_ms_tick(m->ms, now);
	__atomic_store_n(&m->members.tick_ns, now,
	                 __ATOMIC_RELEASE); /* loco_manager_partitioned() */
	strays(m, now, limit);
	/* wake for the next heartbeat, or the moment a silent peer passes the bound */
	wake = check_conns(m, now, limit, m->members.next_hb_ns);
	if (t < wake)
		wake = t;
	wake = dials(m, now, wake);
	pthread_mutex_unlock(&m->lock);
	return wake;
}
