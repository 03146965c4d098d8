/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member.c -- the control plane and live membership.
 *
 * Managers talk over TCP with the messages of ctrl_wire.h. A connection
 * is authenticated both ways before anything else crosses it:
 *
 *   connector                          acceptor
 *   HELLO(nonce_c, who I am)  ---->
 *                             <----    CHALLENGE(nonce_s, mac_s)
 *   check mac_s; AUTH(mac_c)  ---->
 *                             <----    check mac_c; WELCOME(members)
 *
 * mac_x = HMAC-SHA256(key, role_x | nonce_c | nonce_s | node_c | inc_c |
 * node_s | inc_s), key = BLAKE2b(secret): each side proves it knows the
 * secret without sending it, bound to both fresh nonces and both
 * identities. A wrong secret is refused, logged on both sides, and the
 * member table is not touched.
 *
 * Who connects: a joiner connects to its contact; the contact sends it the
 * member list and tells the others (MEMBER_JOIN). Between any other pair
 * the node with the lower id connects, so each pair has one connection.
 * The connector of the control connection also opens the data link
 * (fabric), carrying its node id and incarnation as private data.
 *
 * A member is up (visible to channels) once authenticated and linked. It
 * is dropped on a LEAVE (graceful), on a broken connection, when nothing
 * arrived from it for fail_timeout_ms (heartbeats go every quarter of
 * that), on a fabric error to it, or when another member reports it
 * failed. Node id + incarnation name a member: a restarted node is a new
 * member, and messages about an older incarnation are ignored.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "manager.h"
#include "sock.h"

#define LC_IO_TIMEOUT_MS 2000

struct link_priv {
	uint32_t node;
	uint64_t inc;
} __attribute__((packed));

/* ------------------------------------------------------------------ */
/* helpers                                                            */

static void mac_compute(const loco_manager_t *m, char role, const uint8_t *nonce_c,
                        const uint8_t *nonce_s, uint32_t node_c, uint64_t inc_c, uint32_t node_s,
                        uint64_t inc_s, uint8_t out[LC_MAC_LEN])
{
	uint8_t msg[1 + 2 * LC_NONCE_LEN + 2 * 12], *p = msg;

	*p++ = (uint8_t)role;
	memcpy(p, nonce_c, LC_NONCE_LEN);
	p += LC_NONCE_LEN;
	memcpy(p, nonce_s, LC_NONCE_LEN);
	p += LC_NONCE_LEN;
	memcpy(p, &node_c, 4);
	memcpy(p + 4, &inc_c, 8);
	memcpy(p + 12, &node_s, 4);
	memcpy(p + 16, &inc_s, 8);
	crypto_auth_hmacsha256(out, msg, sizeof(msg), m->key);
}

static void self_info(const loco_manager_t *m, struct lc_member_info *out)
{
	memset(out, 0, sizeof(*out));
	out->node = m->node_id;
	out->inc = m->inc;
	snprintf(out->ctrl_addr, sizeof(out->ctrl_addr), "%s", m->ctrl_addr);
	snprintf(out->fab_addr, sizeof(out->fab_addr), "%s", m->fab_addr);
}

static int parse_addr(const char *str, struct sockaddr_in *sin)
{
	struct fab_addr a;
	int ret = fab_addr_parse(str, 0, &a);

	if (ret == 0)
		memcpy(sin, &a.ss, sizeof(*sin));
	return ret;
}

int lc_ctrl_listen(loco_manager_t *m, const char *addr)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char ip[INET_ADDRSTRLEN];
	int one = 1, ret;

	ret = parse_addr(addr, &sin);
	if (ret) {
		lc_log_err("manager: bad control address %s (want ip[:port])", addr);
		return ret;
	}
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

static struct lc_conn *conn_new(int fd, int initiator)
{
	struct lc_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->rx = malloc(LC_CTRL_MAX_MSG);
	if (c->rx == NULL) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->initiator = initiator;
	c->last_rx_ns = lc_now_ns();
	pthread_mutex_init(&c->send_lock, NULL);
	randombytes_buf(c->nonce_mine, sizeof(c->nonce_mine));
	return c;
}

static void conn_free(struct lc_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->send_lock);
	free(c->rx);
	free(c);
}

/* conn_unlink -- take @c out of the manager's list and epoll, and free it. */
static void conn_drop(loco_manager_t *m, struct lc_conn *c)
{
	for (struct lc_conn **pp = &m->conns; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	if (c->fd >= 0)
		epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->member != NULL && c->member->conn == c)
		c->member->conn = NULL;
	conn_free(c);
}

static int conn_adopt(loco_manager_t *m, struct lc_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

	if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	c->next = m->conns;
	m->conns = c;
	return 0;
}

static uint64_t deadline_in(int timeout_ms)
{
	return lc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

int lc_conn_send(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	uint8_t *buf;
	long len;
	int ret;

	if (c == NULL || c->dead)
		return -ENOTCONN;
	msg->src_node = m->node_id;
	msg->src_inc = m->inc;
	buf = malloc(LC_CTRL_MAX_MSG);
	if (buf == NULL)
		return -ENOMEM;
	len = lc_ctrl_encode(msg, buf, LC_CTRL_MAX_MSG);
	if (len < 0) {
		lc_log_err("manager: cannot encode %s: %s", lc_msg_type_str(msg->type),
		           strerror((int)-len));
		free(buf);
		return (int)len;
	}
	pthread_mutex_lock(&c->send_lock);
	ret = lc_sock_io_full(c->fd, buf, (size_t)len, 1, deadline_in(LC_IO_TIMEOUT_MS));
	pthread_mutex_unlock(&c->send_lock);
	free(buf);
	if (ret) {
		lc_log_info("manager: send %s to node %u failed: %s", lc_msg_type_str(msg->type),
		            c->peer.node, strerror(-ret));
		c->dead = 1;
	}
	return ret;
}

/* recv_msg -- blocking receive of one message (handshakes of the connector). */
static int recv_msg(int fd, struct lc_msg *msg, int timeout_ms)
{
	uint8_t hdr[4], *buf;
	long len;
	int ret;

	ret = lc_sock_io_full(fd, hdr, 4, 0, deadline_in(timeout_ms));
	if (ret)
		return ret;
	len = lc_ctrl_peek(hdr, 4);
	if (len <= 0)
		return -EPROTO;
	buf = malloc((size_t)len);
	if (buf == NULL)
		return -ENOMEM;
	memcpy(buf, hdr, 4);
	ret = lc_sock_io_full(fd, buf + 4, (size_t)len - 4, 0, deadline_in(timeout_ms));
	if (ret == 0)
		ret = lc_ctrl_decode(buf, (size_t)len, msg);
	free(buf);
	return ret;
}

static void send_refuse(loco_manager_t *m, struct lc_conn *c, int err, const char *why)
{
	struct lc_msg *msg = calloc(1, sizeof(*msg));

	if (msg == NULL)
		return;
	msg->type = LC_MSG_REFUSE;
	msg->u.refuse.err = (uint32_t)err;
	snprintf(msg->u.refuse.reason, sizeof(msg->u.refuse.reason), "%s", why);
	lc_conn_send(m, c, msg);
	free(msg);
}

/* ------------------------------------------------------------------ */
/* members                                                            */

struct lc_member *lc_member_find(loco_manager_t *m, uint32_t node)
{
	for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next)
		if (mb->info.node == node)
			return mb;
	return NULL;
}

struct fab_link *lc_link_of(loco_manager_t *m, uint32_t node)
{
	for (unsigned i = 0; i < m->nlinks; i++)
		if (m->links[i].node == node)
			return m->links[i].link;
	return NULL;
}

static void links_set(loco_manager_t *m, uint32_t node, struct fab_link *link)
{
	pthread_rwlock_wrlock(&m->links_lock);
	for (unsigned i = 0; i < m->nlinks; i++) {
		if (m->links[i].node != node)
			continue;
		if (link != NULL)
			m->links[i].link = link;
		else
			m->links[i] = m->links[--m->nlinks];
		pthread_rwlock_unlock(&m->links_lock);
		return;
	}
	if (link != NULL && m->nlinks < LC_MAX_NODES)
		m->links[m->nlinks++] = (struct lc_link_ent){.node = node, .link = link};
	pthread_rwlock_unlock(&m->links_lock);
}

static void broadcast(loco_manager_t *m, struct lc_msg *msg, uint32_t except)
{
	for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next)
		if (mb->conn != NULL && mb->conn->state == LC_CONN_UP && mb->info.node != except)
			lc_conn_send(m, mb->conn, msg);
}

/* member_check_up -- a member authenticated and linked becomes visible. */
static void member_check_up(loco_manager_t *m, struct lc_member *mb)
{
	if (mb->up || mb->link == NULL || mb->conn == NULL || mb->conn->state != LC_CONN_UP)
		return;
	mb->up = 1;
	links_set(m, mb->info.node, mb->link);
	lc_log_info("manager: node %u joined (incarnation %llx, control %s)", mb->info.node,
	            (unsigned long long)mb->info.inc, mb->info.ctrl_addr);
	lc_chan_on_member_up(m, mb);
}

/* member_attach_link -- @link is @mb's data link now (first, or rebuilt). */
static void member_attach_link(loco_manager_t *m, struct lc_member *mb, struct fab_link *link)
{
	mb->link = link;
	if (mb->up) {
		links_set(m, mb->info.node, link);
		lc_log_info("manager: data link to node %u rebuilt", mb->info.node);
	} else {
		member_check_up(m, mb);
	}
}

/*
 * member_remove -- drop @mb: channels see it leave, its links close.
 * @failed: announce the failure to the others (when we detected it).
 */
static void member_remove(loco_manager_t *m, struct lc_member *mb, int graceful, int announce,
                          const char *why)
{
	uint32_t node = mb->info.node;
	uint64_t inc = mb->info.inc;

	for (struct lc_member **pp = &m->members; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == mb) {
			*pp = mb->next;
			break;
		}
	}
	if (m->leaving) {
		graceful = 1; /* we are leaving: nothing to detect or announce */
		lc_log_debug("manager: dropping node %u as we leave", node);
	} else if (graceful) {
		lc_log_info("manager: node %u left", node);
	} else {
		lc_log_warn("manager: node %u failed: %s", node, why);
	}
	links_set(m, node, NULL);
	/*
	 * Close the data link before the objects hear of the leave: requests
	 * of the departed node still in flight to us are dropped, so none can
	 * land after a callback has cleaned up after it (e.g. a lock's holder).
	 */
	if (mb->link != NULL)
		fab_link_close(mb->link);
	mb->link = NULL;
	if (mb->up)
		lc_chan_on_member_gone(m, node);
	if (mb->conn != NULL) {
		mb->conn->member = NULL;
		conn_drop(m, mb->conn);
	}
	free(mb);
	if (announce && !graceful) {
		struct lc_msg *msg = calloc(1, sizeof(*msg));

		if (msg != NULL) {
			msg->type = LC_MSG_MEMBER_LEAVE;
			msg->u.member_leave.node = node;
			msg->u.member_leave.inc = inc;
			msg->u.member_leave.reason = LC_LEAVE_FAILED;
			broadcast(m, msg, node);
			free(msg);
		}
	}
}

/* pending_take -- a data link that arrived before its member authenticated. */
static struct fab_link *pending_take(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	for (struct lc_pending_link **pp = &m->pending; *pp != NULL; pp = &(*pp)->next) {
		struct lc_pending_link *p = *pp;

		if (p->node == node && p->inc == inc) {
			struct fab_link *l = p->link;

			*pp = p->next;
			free(p);
			return l;
		}
	}
	return NULL;
}

/*
 * member_admit -- @c authenticated a peer: make it a member. An older
 * incarnation of the same node is dropped first (it restarted). Returns
 * the member, or NULL when the connection must be dropped.
 */
static struct lc_member *member_admit(loco_manager_t *m, struct lc_conn *c)
{
	struct lc_member *mb = lc_member_find(m, c->peer.node);

	if (mb != NULL && mb->info.inc < c->peer.inc) {
		member_remove(m, mb, 0, 0, "restarted with a new incarnation");
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
		conn_drop(m, mb->conn);
	}
	if (mb == NULL) {
		mb = calloc(1, sizeof(*mb));
		if (mb == NULL)
			return NULL;
		mb->info = c->peer;
		mb->next = m->members;
		m->members = mb;
	}
	mb->conn = c;
	c->member = mb;
	if (mb->link == NULL)
		mb->link = pending_take(m, c->peer.node, c->peer.inc);
	return mb;
}

/* link_to -- the connector of a control connection opens the data link. */
static int link_to(loco_manager_t *m, const struct lc_member_info *peer, struct fab_link **out)
{
	struct link_priv priv = {.node = m->node_id, .inc = m->inc};
	struct fab_addr fa;
	int ret;

	ret = fab_addr_parse(peer->fab_addr, 0, &fa);
	if (ret == 0)
		ret = fab_connect(m->fab, &fa, peer->node, &priv, sizeof(priv),
		                  (int)m->fail_timeout_ms, out);
	if (ret)
		lc_log_warn("manager: data link to node %u (%s) failed: %s", peer->node,
		            peer->fab_addr, strerror(-ret));
	return ret;
}

/*
 * handshake -- connect to the manager at @addr and authenticate. Returns
 * 0 with the connection in *@out (blocking I/O done, not yet adopted) and
 * the peer's WELCOME in *@welcome; -ECONNREFUSED, -ETIMEDOUT,
 * -LOCO_EAUTH, -EPROTO, or the refusal's error.
 */
static int handshake(loco_manager_t *m, const char *addr, struct lc_conn **out, struct lc_msg *msg)
{
	struct sockaddr_in sin;
	struct lc_conn *c;
	uint8_t mac[LC_MAC_LEN];
	int fd, ret, one = 1;

	ret = parse_addr(addr, &sin);
	if (ret) {
		lc_log_err("manager: bad member address %s", addr);
		return ret;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	c = conn_new(fd, 1);
	if (c == NULL) {
		close(fd);
		return -ENOMEM;
	}
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_HELLO;
	memcpy(msg->u.hello.nonce, c->nonce_mine, LC_NONCE_LEN);
	snprintf(msg->u.hello.fabric, sizeof(msg->u.hello.fabric), "%s", m->fabric);
	self_info(m, &msg->u.hello.self);
	ret = lc_conn_send(m, c, msg);
	if (ret == 0)
		ret = recv_msg(fd, msg, LC_IO_TIMEOUT_MS);
	if (ret)
		goto err_free;
	if (msg->type == LC_MSG_REFUSE) {
		ret = -(int)msg->u.refuse.err;
		lc_log_err("manager: %s refused us: %s", addr, msg->u.refuse.reason);
		goto err_free;
	}
	if (msg->type != LC_MSG_CHALLENGE) {
		ret = -EPROTO;
		goto err_free;
	}
	c->peer.node = msg->src_node;
	c->peer.inc = msg->src_inc;
	memcpy(c->nonce_peer, msg->u.challenge.nonce, LC_NONCE_LEN);
	mac_compute(m, 'S', c->nonce_mine, c->nonce_peer, m->node_id, m->inc, c->peer.node,
	            c->peer.inc, mac);
	if (sodium_memcmp(mac, msg->u.challenge.mac, LC_MAC_LEN) != 0) {
		lc_log_err("manager: node %u at %s failed authentication: wrong cluster secret "
		           "(LOCO_SECRET)",
		           c->peer.node, addr);
		/* say why, so that the member logs the refusal too */
		send_refuse(m, c, LOCO_EAUTH, "authentication failed");
		ret = -LOCO_EAUTH;
		goto err_free;
	}
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_AUTH;
	mac_compute(m, 'C', c->nonce_mine, c->nonce_peer, m->node_id, m->inc, c->peer.node,
	            c->peer.inc, msg->u.auth.mac);
	ret = lc_conn_send(m, c, msg);
	if (ret == 0)
		ret = recv_msg(fd, msg, LC_IO_TIMEOUT_MS);
	if (ret)
		goto err_free;
	if (msg->type == LC_MSG_REFUSE) {
		ret = -(int)msg->u.refuse.err;
		lc_log_err("manager: node %u at %s refused us: %s", c->peer.node, addr,
		           msg->u.refuse.reason);
		goto err_free;
	}
	if (msg->type != LC_MSG_WELCOME) {
		ret = -EPROTO;
		goto err_free;
	}
	for (uint32_t i = 0; i < msg->u.welcome.n; i++)
		if (msg->u.welcome.m[i].node == c->peer.node)
			c->peer = msg->u.welcome.m[i];
	c->state = LC_CONN_UP;
	c->last_rx_ns = lc_now_ns();
	*out = c;
	return 0;

err_free:
	conn_free(c);
	return ret;
}

/*
 * initiate -- connect to @info (not yet a member), authenticate, link,
 * admit. Called WITHOUT m->lock: the blocking handshake and link setup
 * never hold up the progress thread; only the admission takes the lock.
 */
static int initiate(loco_manager_t *m, const struct lc_member_info *info, struct lc_msg *welcome)
{
	struct fab_link *link = NULL;
	struct lc_member *mb;
	struct lc_conn *c = NULL;
	int ret;

	ret = handshake(m, info->ctrl_addr, &c, welcome);
	if (ret)
		return ret;
	ret = link_to(m, &c->peer, &link);
	if (ret)
		goto err_conn;
	pthread_mutex_lock(&m->lock);
	mb = member_admit(m, c);
	if (mb == NULL) {
		pthread_mutex_unlock(&m->lock);
		ret = -EALREADY;
		goto err_link;
	}
	ret = conn_adopt(m, c);
	if (ret) {
		mb->conn = NULL;
		member_remove(m, mb, 0, 0, "could not watch its connection");
		pthread_mutex_unlock(&m->lock);
		goto err_link;
	}
	if (mb->link == NULL)
		mb->link = link;
	else
		fab_link_close(link); /* the peer linked to us first */
	member_check_up(m, mb);
	pthread_mutex_unlock(&m->lock);
	return 0;

err_link:
	fab_link_close(link);
err_conn:
	conn_free(c);
	return ret;
}

/* dial_permanent -- errors that retrying cannot fix. */
static int dial_permanent(int err)
{
	return err == -LOCO_EAUTH || err == -EEXIST || err == -EPROTO || err == -EALREADY ||
	       err == -ESTALE || err == -EPROTONOSUPPORT;
}

/*
 * lc_dial -- have the dialer thread connect to @info, retrying with
 * back-off until it is a member or join_timeout_ms passed. m->lock held.
 */
static void lc_dial(loco_manager_t *m, const struct lc_member_info *info, int link_only)
{
	struct lc_dial *d;

	for (d = m->dials; d != NULL; d = d->next)
		if (d->info.node == info->node)
			break;
	if (d == NULL) {
		d = calloc(1, sizeof(*d));
		if (d == NULL) {
			lc_log_err("manager: out of memory: cannot connect to node %u", info->node);
			return;
		}
		d->next = m->dials;
		m->dials = d;
	}
	d->info = *info;
	d->link_only = link_only;
	d->next_ns = 0;
	d->delay_ms = 10;
	d->deadline = lc_now_ns() + (uint64_t)m->join_timeout_ms * 1000000ull;
	pthread_cond_broadcast(&m->dial_cond);
}

static void dial_done(loco_manager_t *m, struct lc_dial *d)
{
	for (struct lc_dial **pp = &m->dials; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	free(d);
}

void *lc_dialer_main(void *arg)
{
	loco_manager_t *m = arg;
	struct lc_msg *msg = malloc(sizeof(*msg));

	pthread_mutex_lock(&m->lock);
	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		uint64_t now = lc_now_ns(), wake = now + 100000000ull;
		struct lc_dial *due = NULL;

		for (struct lc_dial *d = m->dials; d != NULL; d = d->next) {
			if (d->busy)
				continue;
			if (d->next_ns <= now) {
				due = d;
				break;
			}
			if (d->next_ns < wake)
				wake = d->next_ns;
		}
		if (due == NULL || msg == NULL) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)((wake - now) / 1000000000ull);
			ts.tv_nsec += (long)((wake - now) % 1000000000ull);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&m->dial_cond, &m->lock, &ts);
			continue;
		}
		struct lc_member *mb = lc_member_find(m, due->info.node);
		struct lc_member_info info = due->info;
		int ret;

		if (due->link_only ? mb == NULL || mb->info.inc != info.inc || mb->link != NULL
		                   : mb != NULL && mb->info.inc >= info.inc && mb->conn != NULL) {
			dial_done(m, due); /* nothing left to do: gone, or done meanwhile */
			continue;
		}
		due->busy = 1;
		pthread_mutex_unlock(&m->lock);
		if (due->link_only) {
			struct fab_link *link = NULL;

			ret = link_to(m, &info, &link);
			pthread_mutex_lock(&m->lock);
			mb = lc_member_find(m, info.node);
			if (ret == 0 && mb != NULL && mb->info.inc == info.inc && mb->link == NULL)
				member_attach_link(m, mb, link);
			else if (ret == 0)
				fab_link_close(link);
			pthread_mutex_unlock(&m->lock);
		} else {
			ret = initiate(m, &info, msg);
		}
		pthread_mutex_lock(&m->lock);
		due->busy = 0;
		now = lc_now_ns();
		if (ret == 0 || dial_permanent(ret) || now >= due->deadline) {
			if (ret != 0 && ret != -EALREADY)
				lc_log_warn("manager: could not connect to node %u at %s: %s",
				            info.node, info.ctrl_addr, strerror(-ret));
			dial_done(m, due);
			continue;
		}
		due->next_ns = now + (uint64_t)due->delay_ms * 1000000ull;
		due->delay_ms = due->delay_ms < 500 ? due->delay_ms * 2 : 500;
	}
	pthread_mutex_unlock(&m->lock);
	free(msg);
	return NULL;
}

int lc_join(loco_manager_t *m, const char *contacts)
{
	uint64_t deadline = lc_now_ns() + (uint64_t)m->join_timeout_ms * 1000000ull;
	struct lc_msg *msg = calloc(1, sizeof(*msg));
	struct lc_member_info *list;
	uint32_t n = 0;
	int ret = -ETIMEDOUT, delay_ms = 10;

	list = calloc(LC_MAX_MEMBERS, sizeof(*list));
	if (msg == NULL || list == NULL) {
		free(msg);
		free(list);
		return -ENOMEM;
	}
	/* try each contact in turn until one admits us or the deadline passes */
	while (lc_now_ns() < deadline) {
		char one[LC_ADDR_MAX + 1];
		const char *p = contacts;

		while (*p != '\0') {
			size_t len = strcspn(p, ",");
			struct lc_member_info contact = {0};

			snprintf(one, sizeof(one), "%.*s",
			         (int)(len < LC_ADDR_MAX ? len : LC_ADDR_MAX), p);
			p += len + (p[len] == ',');
			snprintf(contact.ctrl_addr, sizeof(contact.ctrl_addr), "%s", one);
			ret = initiate(m, &contact, msg);
			if (ret == 0) {
				n = msg->u.welcome.n;
				memcpy(list, msg->u.welcome.m, n * sizeof(*list));
			}
			if (ret == 0 || ret == -LOCO_EAUTH || ret == -EEXIST || ret == -EPROTO)
				goto joined;
		}
		usleep((useconds_t)delay_ms * 1000);
		delay_ms = delay_ms < 200 ? delay_ms * 2 : 200;
	}
joined:
	if (ret) {
		if (ret == -ETIMEDOUT || ret == -ECONNREFUSED)
			lc_log_err("manager: no member answered at %s within %u ms", contacts,
			           m->join_timeout_ms);
		free(msg);
		free(list);
		return ret == -ECONNREFUSED ? -ETIMEDOUT : ret;
	}
	/* connect to the members with higher ids; lower ones connect to us */
	pthread_mutex_lock(&m->lock);
	for (uint32_t i = 0; i < n; i++)
		if (list[i].node > m->node_id && lc_member_find(m, list[i].node) == NULL)
			lc_dial(m, &list[i], 0);
	pthread_mutex_unlock(&m->lock);
	/* wait (bounded) until every member of the list is up */
	for (;;) {
		uint32_t missing = 0;

		pthread_mutex_lock(&m->lock);
		for (uint32_t i = 0; i < n; i++) {
			struct lc_member *mb = lc_member_find(m, list[i].node);

			if (list[i].node != m->node_id && (mb == NULL || !mb->up))
				missing++;
		}
		pthread_mutex_unlock(&m->lock);
		if (missing == 0)
			break;
		if (lc_now_ns() >= deadline) {
			lc_log_warn("manager: joined, but %u member(s) did not connect yet",
			            missing);
			break;
		}
		usleep(2000);
	}
	free(msg);
	free(list);
	return 0;
}

/* ------------------------------------------------------------------ */
/* the acceptor's side, driven by the progress thread (m->lock held)  */

void lc_ctrl_accept(loco_manager_t *m)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
		struct lc_conn *c;

		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = conn_new(fd, 0);
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->state = LC_CONN_HELLO;
		if (conn_adopt(m, c) != 0)
			conn_free(c);
	}
}

static void on_hello(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	const struct lc_member_info *who = &msg->u.hello.self;
	struct lc_member *old = lc_member_find(m, who->node);

	if (strcmp(msg->u.hello.fabric, m->fabric) != 0) {
		lc_log_err("manager: node %u uses fabric %s, we use %s: refused", who->node,
		           msg->u.hello.fabric, m->fabric);
		send_refuse(m, c, EPROTO, "fabric mismatch");
		c->dead = 1;
		return;
	}
	if (who->node == m->node_id || who->node == 0 || who->node != msg->src_node ||
	    who->inc != msg->src_inc) {
		lc_log_err("manager: refused a node claiming id %u (ours is %u)", who->node,
		           m->node_id);
		send_refuse(m, c, EEXIST, "node id in use");
		c->dead = 1;
		return;
	}
	if (old != NULL && old->info.inc > who->inc) {
		send_refuse(m, c, ESTALE, "stale incarnation");
		c->dead = 1;
		return;
	}
	c->peer = *who;
	memcpy(c->nonce_peer, msg->u.hello.nonce, LC_NONCE_LEN);
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_CHALLENGE;
	memcpy(msg->u.challenge.nonce, c->nonce_mine, LC_NONCE_LEN);
	mac_compute(m, 'S', c->nonce_peer, c->nonce_mine, c->peer.node, c->peer.inc, m->node_id,
	            m->inc, msg->u.challenge.mac);
	c->state = LC_CONN_AUTH;
	lc_conn_send(m, c, msg);
}

static void on_auth(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	uint8_t mac[LC_MAC_LEN];
	struct lc_member *mb;
	int is_new;

	mac_compute(m, 'C', c->nonce_peer, c->nonce_mine, c->peer.node, c->peer.inc, m->node_id,
	            m->inc, mac);
	if (sodium_memcmp(mac, msg->u.auth.mac, LC_MAC_LEN) != 0) {
		lc_log_err("manager: node %u (%s) failed authentication: wrong cluster secret "
		           "(LOCO_SECRET); refused",
		           c->peer.node, c->peer.ctrl_addr);
		send_refuse(m, c, LOCO_EAUTH, "authentication failed");
		c->dead = 1;
		return;
	}
	c->state = LC_CONN_UP;
	is_new = lc_member_find(m, c->peer.node) == NULL;
	mb = member_admit(m, c);
	if (mb == NULL) {
		c->dead = 1;
		return;
	}
	/* the member list, ourselves included */
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_WELCOME;
	self_info(m, &msg->u.welcome.m[msg->u.welcome.n++]);
	for (struct lc_member *x = m->members; x != NULL && msg->u.welcome.n < LC_MAX_MEMBERS;
	     x = x->next)
		/*
		 * Every authenticated member, linked or not: one admitted before
		 * us but not linked yet must still reach us (here, or through
		 * MEMBER_JOIN, which goes to authenticated members only).
		 */
		if (x->up || (x->conn != NULL && x->conn->state == LC_CONN_UP))
			msg->u.welcome.m[msg->u.welcome.n++] = x->info;
	lc_conn_send(m, c, msg);
	if (is_new) {
		memset(msg, 0, sizeof(*msg));
		msg->type = LC_MSG_MEMBER_JOIN;
		msg->u.member_join = mb->info;
		broadcast(m, msg, mb->info.node);
	}
	member_check_up(m, mb);
}

static void on_member_join(loco_manager_t *m, struct lc_msg *msg)
{
	struct lc_member_info info = msg->u.member_join;
	struct lc_member *mb = lc_member_find(m, info.node);

	if (info.node == m->node_id || (mb != NULL && mb->info.inc >= info.inc))
		return;
	if (info.node < m->node_id)
		return; /* the lower id connects: it will come to us */
	if (mb != NULL)
		member_remove(m, mb, 0, 0, "restarted with a new incarnation");
	lc_dial(m, &info, 0);
}

/* conn_msg -- one message from @c. */
static void conn_msg(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	struct lc_member *mb;

	c->last_rx_ns = lc_now_ns();
	if (c->state == LC_CONN_HELLO) {
		if (msg->type != LC_MSG_HELLO)
			c->dead = 1;
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
			c->dead = 1;
		else
			on_auth(m, c, msg);
		return;
	}
	if (msg->src_node != c->peer.node || msg->src_inc != c->peer.inc) {
		c->dead = 1; /* a connection speaks for one incarnation only */
		return;
	}
	switch (msg->type) {
	case LC_MSG_HEARTBEAT:
		break;
	case LC_MSG_MEMBER_JOIN:
		on_member_join(m, msg);
		break;
	case LC_MSG_MEMBER_LEAVE:
		mb = lc_member_find(m, msg->u.member_leave.node);
		if (mb != NULL && mb->info.inc == msg->u.member_leave.inc &&
		    mb->info.node != m->node_id)
			member_remove(m, mb, 0, 0, "reported failed by another member");
		break;
	case LC_MSG_LEAVE:
		if (c->member != NULL)
			member_remove(m, c->member, 1, 0, NULL);
		else
			c->dead = 1;
		break;
	case LC_MSG_CHAN:
	case LC_MSG_CHAN_LEAVE:
		if (c->member != NULL)
			lc_chan_on_msg(m, c->member, msg);
		break;
	case LC_MSG_REFUSE:
		lc_log_warn("manager: node %u refused us: %s", c->peer.node, msg->u.refuse.reason);
		c->dead = 1;
		break;
	default:
		lc_log_warn("manager: unexpected %s from node %u", lc_msg_type_str(msg->type),
		            c->peer.node);
		c->dead = 1;
	}
}

/* conn_reap -- drop a dead connection; its member (if any) failed. */
static void conn_reap(loco_manager_t *m, struct lc_conn *c, const char *why)
{
	if (c->member != NULL)
		member_remove(m, c->member, 0, 1, why);
	else
		conn_drop(m, c);
}

void lc_conn_input(loco_manager_t *m, struct lc_conn *c)
{
	struct lc_msg *msg = NULL;
	const char *why = "connection lost";
	size_t off = 0;
	ssize_t n;

	/* @c may have been freed by an earlier event of the same batch */
	for (struct lc_conn *x = m->conns;; x = x->next) {
		if (x == NULL)
			return;
		if (x == c)
			break;
	}
	n = recv(c->fd, c->rx + c->rx_len, LC_CTRL_MAX_MSG - c->rx_len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_reap(m, c, n == 0 ? "connection closed" : strerror(errno));
		return;
	}
	if (n < 0)
		return;
	c->rx_len += (size_t)n;
	while (!c->dead) {
		long len = lc_ctrl_peek(c->rx + off, c->rx_len - off);
		int ret;

		if (len == 0 || (len > 0 && (size_t)len > c->rx_len - off))
			break;
		if (msg == NULL)
			msg = calloc(1, sizeof(*msg));
		ret = len < 0 ? (int)len
		      : msg   ? lc_ctrl_decode(c->rx + off, (size_t)len, msg)
		              : -ENOMEM;
		if (ret) {
			lc_log_warn("manager: bad message from %s: %s", c->peer.ctrl_addr,
			            strerror(-ret));
			why = "protocol error";
			c->dead = 1;
			break;
		}
		off += (size_t)len;
		conn_msg(m, c, msg);
		/* the message may have removed this connection's member and the connection */
		for (struct lc_conn *x = m->conns;; x = x->next) {
			if (x == NULL) {
				free(msg);
				return;
			}
			if (x == c)
				break;
		}
	}
	free(msg);
	if (c->dead) {
		conn_reap(m, c, why);
		return;
	}
	memmove(c->rx, c->rx + off, c->rx_len - off);
	c->rx_len -= off;
}

void lc_link_accept(loco_manager_t *m)
{
	struct link_priv priv;
	struct fab_link *link;
	size_t plen;

	while (fab_accept(m->fab, 0, 0, &link, &priv, &plen) == 0) {
		struct lc_member *mb;

		if (plen != sizeof(priv)) {
			lc_log_warn("manager: data link without a node id: closed");
			fab_link_close(link);
			continue;
		}
		link->ctx = priv.node; /* completions name the node */
		if (priv.node == m->node_id && priv.inc == m->inc && m->self_served == NULL) {
			m->self_served = link; /* the far end of our self link */
			continue;
		}
		mb = lc_member_find(m, priv.node);
		if (mb != NULL && mb->info.inc == priv.inc && mb->link == NULL) {
			member_attach_link(m, mb, link);
			continue;
		}
		struct lc_pending_link *p = calloc(1, sizeof(*p));

		if (p == NULL) {
			fab_link_close(link);
			continue;
		}
		*p = (struct lc_pending_link){
		    .link = link, .node = priv.node, .inc = priv.inc, .next = m->pending};
		m->pending = p;
	}
}

uint64_t lc_member_timers(loco_manager_t *m, uint64_t now)
{
	uint64_t limit = (uint64_t)m->fail_timeout_ms * 1000000ull, wake;
	struct lc_conn *c, *next;

	if (now >= m->next_hb_ns) {
		struct lc_msg msg = {.type = LC_MSG_HEARTBEAT};

		msg.u.heartbeat.seq = ++m->hb_seq;
		for (c = m->conns; c != NULL; c = c->next)
			if (c->state == LC_CONN_UP && !c->dead)
				lc_conn_send(m, c, &msg);
		m->next_hb_ns = now + limit / 4;
	}
	for (struct lc_member *mb = m->members; mb != NULL; mb = mb->next) {
		if (mb->link != NULL && fab_link_state(mb->link) != 0) {
			lc_member_link_check(m, mb->info.node);
			break; /* at most one per tick: the list may have changed */
		}
	}
	for (c = m->conns; c != NULL; c = next) {
		next = c->next;
		if (c->dead) {
			conn_reap(m, c, "connection lost");
			next = m->conns; /* the list may have changed */
			continue;
		}
		if (now > c->last_rx_ns && now - c->last_rx_ns > limit) {
			char why[64];

			snprintf(why, sizeof(why), "nothing heard for %u ms", m->fail_timeout_ms);
			conn_reap(m, c, why);
			next = m->conns;
		}
	}
	/* wake for the next heartbeat, or the moment a silent peer passes the bound */
	wake = m->next_hb_ns;
	for (c = m->conns; c != NULL; c = c->next)
		if (c->last_rx_ns + limit + 1 < wake)
			wake = c->last_rx_ns + limit + 1;
	return wake;
}

void lc_member_link_error(loco_manager_t *m, uint32_t node, int status)
{
	struct lc_member *mb;

	pthread_mutex_lock(&m->lock);
	mb = lc_member_find(m, node);
	if (mb != NULL && mb->up)
		member_remove(m, mb, 0, 1,
		              status == -ETIMEDOUT ? "data link timed out" : "data link broken");
	pthread_mutex_unlock(&m->lock);
}

/*
 * lc_member_link_check -- a member's data link went down (a refused
 * access puts an RC link in the error state) while the member itself is
 * alive: drop the link; the side that opened the control connection opens
 * a new one, the other side takes it in lc_link_accept().
 */
void lc_member_link_check(loco_manager_t *m, uint32_t node)
{
	struct lc_member *mb;
	int cause;

	pthread_mutex_lock(&m->lock);
	mb = lc_member_find(m, node);
	if (mb == NULL || mb->link == NULL || mb->conn == NULL || m->leaving ||
	    (cause = fab_link_state(mb->link)) == 0) {
		pthread_mutex_unlock(&m->lock);
		return;
	}
	lc_log_info("manager: data link to node %u down (%s): rebuilding it", node,
	            strerror(-cause));
	links_set(m, node, NULL);
	fab_link_close(mb->link);
	mb->link = NULL;
	if (mb->conn->initiator) {
		lc_dial(m, &mb->info, 1);
	} else {
		struct fab_link *link = pending_take(m, node, mb->info.inc);

		if (link != NULL)
			member_attach_link(m, mb, link);
	}
	pthread_mutex_unlock(&m->lock);
}

void lc_members_leave(loco_manager_t *m)
{
	struct lc_msg msg = {.type = LC_MSG_LEAVE};

	for (struct lc_conn *c = m->conns; c != NULL; c = c->next)
		if (c->state == LC_CONN_UP && !c->dead)
			lc_conn_send(m, c, &msg);
}

/*
 * lc_self_link -- a data link from this node to its own endpoint, so that
 * operations on its own memory go through its NIC like everyone else's
 * (fabric atomics are atomic only with respect to fabric atomics). A
 * failure is logged and leaves the node without one (loco_region_remote()
 * of itself then fails).
 */
void lc_self_link(loco_manager_t *m)
{
	struct lc_member_info self;
	struct fab_link *link;

	self_info(m, &self);
	if (link_to(m, &self, &link) != 0)
		return;
	pthread_mutex_lock(&m->lock);
	m->self_link = link;
	links_set(m, m->node_id, link);
	pthread_mutex_unlock(&m->lock);
}

void lc_members_free(loco_manager_t *m)
{
	links_set(m, m->node_id, NULL);
	if (m->self_link != NULL)
		fab_link_close(m->self_link);
	if (m->self_served != NULL)
		fab_link_close(m->self_served);
	m->self_link = m->self_served = NULL;
	while (m->members != NULL) {
		struct lc_member *mb = m->members;

		m->members = mb->next;
		links_set(m, mb->info.node, NULL);
		if (mb->link != NULL)
			fab_link_close(mb->link);
		free(mb);
	}
	while (m->conns != NULL) {
		struct lc_conn *c = m->conns;

		m->conns = c->next;
		conn_free(c);
	}
	while (m->dials != NULL) {
		struct lc_dial *d = m->dials;

		m->dials = d->next;
		free(d);
	}
	while (m->pending != NULL) {
		struct lc_pending_link *p = m->pending;

		m->pending = p->next;
		fab_link_close(p->link);
		free(p);
	}
}
