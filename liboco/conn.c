/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * conn.c -- control-plane connections: framing and the bounded send
 * queue drained by the progress thread (the rules are in conn.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "conn.h"
#include "log.h"
#include "sock.h"

struct lc_conn *lc_conn_new(int fd, int initiator, uint32_t node, uint64_t inc)
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
	c->epfd = -1;
	c->evfd = -1;
	c->initiator = initiator;
	c->src_node = node;
	c->src_inc = inc;
	c->accepted_ns = c->last_rx_ns = lc_now_ns();
	pthread_mutex_init(&c->tx_lock, NULL);
	randombytes_buf(c->nonce_mine, sizeof(c->nonce_mine));
	return c;
}

void lc_conn_free(struct lc_conn *c)
{
	lc_sock_close(c->fd); /* a FIN, not a RST: the peer reads what we sent last */
	pthread_mutex_destroy(&c->tx_lock);
	free(c->tx);
	free(c->rx);
	sodium_memzero(c->link_key, sizeof(c->link_key)); /* the session's key dies with it */
	free(c);
}

/* watch -- the epoll events @c wants now. tx_lock held, or not yet shared. */
static int watch(struct lc_conn *c, int op)
{
	struct epoll_event ev = {.events = EPOLLIN | (c->tx_want_out ? EPOLLOUT : 0),
	                         .data.ptr = c};

	return epoll_ctl(c->epfd, op, c->fd, &ev) < 0 ? -errno : 0;
}

int lc_conn_adopt(struct lc_conn *c, int epfd, int evfd, const pthread_t *owner)
{
	int ret;

	pthread_mutex_lock(&c->tx_lock);
	c->owner = owner;
	c->epfd = epfd;
	__atomic_store_n(&c->evfd, evfd, __ATOMIC_RELEASE);
	c->tx_want_out = c->tx_len > 0;
	ret = watch(c, EPOLL_CTL_ADD);
	if (ret)
		c->epfd = -1;
	pthread_mutex_unlock(&c->tx_lock);
	return ret;
}

void lc_conn_unwatch(struct lc_conn *c)
{
	pthread_mutex_lock(&c->tx_lock);
	if (c->epfd >= 0 && c->fd >= 0)
		epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	c->epfd = -1;
	pthread_mutex_unlock(&c->tx_lock);
}

void lc_conn_kill(struct lc_conn *c, const char *why)
{
	const char *none = NULL;

	/* the first reason wins; stored before dead, which publishes it */
	__atomic_compare_exchange_n(&c->dead_why, &none, why, 0, __ATOMIC_RELAXED,
	                            __ATOMIC_RELAXED);
	if (!__atomic_exchange_n(&c->dead, 1, __ATOMIC_ACQ_REL)) {
		uint64_t one = 1;
		int evfd = __atomic_load_n(&c->evfd, __ATOMIC_ACQUIRE);

		/* the progress thread drops it now, not at its next timer */
		if (evfd >= 0 && write(evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			lc_log_warn("manager: cannot wake the progress thread: %s",
			            strerror(errno));
	}
}

const char *lc_conn_dead_why(const struct lc_conn *c)
{
	const char *why = __atomic_load_n(&c->dead_why, __ATOMIC_RELAXED);

	return why != NULL ? why : "connection lost";
}

/* want_out -- (un)request EPOLLOUT. tx_lock held. */
static void want_out(struct lc_conn *c, int want)
{
	if (c->tx_want_out == want)
		return;
	c->tx_want_out = want;
	if (c->epfd >= 0 && watch(c, EPOLL_CTL_MOD) != 0)
		lc_conn_kill(c, "cannot watch the connection");
}

/* tx_push -- send from the queue without blocking. tx_lock held. 0 or -errno (dead). */
static int tx_push(struct lc_conn *c)
{
	while (c->tx_len > 0) {
		ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* read without tx_lock by lc_conn_stalled() */
			if (__atomic_load_n(&c->tx_stall_ns, __ATOMIC_RELAXED) == 0)
				__atomic_store_n(&c->tx_stall_ns, lc_now_ns(), __ATOMIC_RELAXED);
			want_out(c, 1);
			return 0;
		}
		if (n <= 0) {
			int err = n < 0 ? -errno : -ECONNRESET;

			lc_conn_kill(c, "connection lost");
			return err;
		}
		c->tx_off += (size_t)n;
		c->tx_len -= (size_t)n;
		/* progress restarts the clock */
		__atomic_store_n(&c->tx_stall_ns, c->tx_len > 0 ? lc_now_ns() : 0,
		                 __ATOMIC_RELAXED);
	}
	c->tx_off = 0;
	want_out(c, 0);
	return 0;
}

/* tx_room -- make @need contiguous free bytes at the queue's end. tx_lock held. */
static int tx_room(struct lc_conn *c, size_t need)
{
	size_t cap;
	uint8_t *p;

	if (c->tx_off + c->tx_len + need <= c->tx_cap)
		return 0;
	if (c->tx_off > 0) { /* compact first */
		memmove(c->tx, c->tx + c->tx_off, c->tx_len);
		c->tx_off = 0;
		if (c->tx_len + need <= c->tx_cap)
			return 0;
	}
	if (c->tx_len + need > LC_CONN_TXQ_MAX)
		return -ENOBUFS;
	cap = c->tx_cap ? c->tx_cap : LC_CONN_TXQ_MIN;
	while (cap < c->tx_len + need)
		cap *= 2;
	if (cap > LC_CONN_TXQ_MAX)
		cap = LC_CONN_TXQ_MAX;
	p = realloc(c->tx, cap); /* grows in steps, not per message */
	if (p == NULL)
		return -ENOMEM;
	c->tx = p;
	c->tx_cap = cap;
	return 0;
}

int lc_conn_send(struct lc_conn *c, struct lc_msg *msg)
{
	size_t need = LC_CTRL_HDR_LEN;
	long len;
	int ret;

	if (c == NULL || lc_conn_is_dead(c))
		return -ENOTCONN;
	msg->src_node = c->src_node;
	msg->src_inc = c->src_inc;
	pthread_mutex_lock(&c->tx_lock);
	for (;;) {
		ret = tx_room(c, need);
		if (ret)
			break;
		len = lc_ctrl_encode(msg, c->tx + c->tx_off + c->tx_len,
		                     c->tx_cap - c->tx_off - c->tx_len);
		if (len == -ENOSPC && need < LC_CTRL_MAX_MSG) {
			need = LC_CTRL_MAX_MSG; /* a large message: make room for any */
			continue;
		}
		ret = len < 0 ? (int)len : 0;
		break;
	}
	if (ret == 0) {
		int was_empty = c->tx_len == 0;

		c->tx_len += (size_t)len;
		/*
		 * The socket is the progress thread's: it writes at once; any
		 * other thread only asks it to (EPOLLOUT fires at once on a
		 * socket with room). Unadopted connections are the handshake's.
		 */
		if (was_empty && (c->epfd < 0 || pthread_equal(pthread_self(), *c->owner)))
			ret = tx_push(c);
		else if (was_empty)
			want_out(c, 1);
	}
	pthread_mutex_unlock(&c->tx_lock);
	if (ret == -ENOBUFS || ret == -ENOMEM) {
		lc_log_warn("manager: node %u does not read its control connection (%zu bytes "
		            "queued): dropping it",
		            c->peer.node, lc_conn_queued(c));
		lc_conn_kill(c, "control connection not read");
	} else if (ret && ret != -ECONNRESET && ret != -EPIPE && ret != -ECONNREFUSED) {
		lc_log_err("manager: cannot send %s: %s", lc_msg_type_str(msg->type),
		           strerror(-ret));
	}
	return ret;
}

int lc_conn_flush(struct lc_conn *c)
{
	int ret;

	pthread_mutex_lock(&c->tx_lock);
	ret = tx_push(c);
	pthread_mutex_unlock(&c->tx_lock);
	return ret;
}

int lc_conn_stalled(struct lc_conn *c, uint64_t now, uint64_t limit_ns)
{
	uint64_t since = __atomic_load_n(&c->tx_stall_ns, __ATOMIC_RELAXED);

	return since != 0 && now > since && now - since > limit_ns;
}

size_t lc_conn_queued(struct lc_conn *c)
{
	size_t n;

	pthread_mutex_lock(&c->tx_lock);
	n = c->tx_len;
	pthread_mutex_unlock(&c->tx_lock);
	return n;
}

int lc_conn_recv(struct lc_conn *c)
{
	ssize_t n;

	if (c->rx_off > 0) { /* keep the partial message at the front */
		memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
		c->rx_len -= c->rx_off;
		c->rx_off = 0;
	}
	n = recv(c->fd, c->rx + c->rx_len, LC_CTRL_MAX_MSG - c->rx_len, MSG_DONTWAIT);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	c->rx_len += (size_t)n;
	c->last_rx_ns = lc_now_ns();
	return (int)n;
}

int lc_conn_next(struct lc_conn *c, struct lc_msg *msg)
{
	long len = lc_ctrl_peek(c->rx + c->rx_off, c->rx_len - c->rx_off);
	int ret;

	if (len < 0)
		return (int)len;
	if (len == 0 || (size_t)len > c->rx_len - c->rx_off)
		return 0;
	ret = lc_ctrl_decode(c->rx + c->rx_off, (size_t)len, msg);
	if (ret)
		return ret;
	c->rx_off += (size_t)len;
	return 1;
}
