/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * conn.h -- control-plane connections: framing, and a bounded send queue
 * per connection that the progress thread drains.
 *
 * A send never blocks its caller: lc_conn_send() encodes the message
 * straight into the connection's queue (no allocation per message; the
 * queue grows in steps up to LC_CONN_TXQ_MAX) and leaves the writing to
 * the progress thread, which alone touches an adopted connection's
 * socket: it writes at once when it is the sender, else on EPOLLOUT. A peer that stops reading
 * fills the queue: a message that does not fit marks the connection
 * dead (its member then fails), and so does a queue that made no
 * progress for the failure bound (lc_conn_stalled()). Messages are never
 * dropped silently: a connection either delivers every message in
 * order or is dropped.
 *
 * Both sides' handshakes (HELLO .. WELCOME, auth.h) run on the progress
 * thread as messages arrive; a connector's connect is non-blocking and
 * its HELLO waits in the queue until the connection is made.
 *
 * Thread safety: lc_conn_send() is MT-safe (tx_lock, a leaf lock held
 * only around the queue); input and lc_conn_flush() run on the progress
 * thread only.
 */
#ifndef LOCO_LC_CONN_H
#define LOCO_LC_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "ctrl_wire.h"

#define LC_CONN_TXQ_MIN   (16u * 1024)             /* first size of a send queue */
#define LC_CONN_TXQ_MAX   (128u * LC_CTRL_MAX_MSG) /* 8 MiB: a peer this far behind is dropped */
#define LC_IO_TIMEOUT_MS  2000                     /* one step of a handshake */
#define LC_LINK_KEY_LEN   32                       /* a session's data-link key (auth.h) */
#define LC_CONN_LINGER_MS 250 /* at the manager's end: the peers' FINs (lc_sock_close_all()) */

struct lc_member;
struct lc_cdial;

enum lc_conn_state {
	LC_CONN_HELLO = 1, /* acceptor: waiting for HELLO */
	LC_CONN_AUTH,      /* acceptor: CHALLENGE sent, waiting for AUTH */
	LC_CONN_UP,        /* authenticated */
	LC_CONN_CHALLENGE, /* connector: HELLO queued, waiting for CHALLENGE */
	LC_CONN_WELCOME,   /* connector: AUTH sent, waiting for WELCOME */
};

/* A control-plane connection to another manager. */
struct lc_conn {
	int fd;
	int epfd;               /* the progress thread's epoll, once adopted; -1 before */
	int evfd;               /* its wake-up eventfd: a kill wakes it (-1 before adoption) */
	const pthread_t *owner; /* the progress thread: the only one that writes the socket */
	int state;
	int initiator; /* we connected */
	int dead;      /* atomic: to be dropped by the progress thread */
	const char *dead_why;
	uint8_t nonce_mine[LC_NONCE_LEN];
	uint8_t nonce_peer[LC_NONCE_LEN];
	uint8_t link_key[LC_LINK_KEY_LEN]; /* the session's data-link key, once authenticated */
	int link_key_set;
	uint64_t link_ctr_seen; /* highest counter of a data link admitted on this session */
	struct lc_member_info peer;
	struct lc_member *member;
	struct lc_cdial *dial; /* connector: the dial it serves (member.c) */
	int dial_err;          /* connector: why the handshake failed (0: connection lost) */
	uint64_t accepted_ns;  /* acceptor: when the connection came */
	uint32_t src_ip;       /* acceptor: the peer's IPv4 address (network order), for the caps */
	uint64_t last_rx_ns;
	uint8_t *rx;
	size_t rx_len, rx_off;

	pthread_mutex_t tx_lock; /* guards tx*; a leaf: nothing is taken under it */
	uint8_t *tx;
	size_t tx_cap, tx_off, tx_len; /* pending bytes: [tx_off, tx_off + tx_len) */
	int tx_want_out;               /* EPOLLOUT requested */
	uint64_t tx_stall_ns;          /* since when the queue waits without progress; 0: empty */
	uint32_t src_node;             /* stamped on every message sent */
	uint64_t src_inc;

	struct lc_conn *next;
};

/* lc_conn_new -- a connection on @fd speaking for @node/@inc. NULL when out of memory. */
struct lc_conn *lc_conn_new(int fd, int initiator, uint32_t node, uint64_t inc);

/* lc_conn_free -- close and free (not adopted, or already taken out of epoll). */
void lc_conn_free(struct lc_conn *c);

/*
 * lc_conn_adopt -- watch @c in @epfd (EPOLLIN; EPOLLOUT while its queue
 * waits); @evfd wakes the progress thread, @owner, when @c is killed.
 * From then on only @owner reads and writes the socket. 0 or -errno.
 */
int lc_conn_adopt(struct lc_conn *c, int epfd, int evfd, const pthread_t *owner);

/* lc_conn_unwatch -- take @c out of its epoll (before freeing it). */
void lc_conn_unwatch(struct lc_conn *c);

/* lc_conn_kill -- mark @c dead with @why (any thread); the progress thread, woken, drops it. */
void lc_conn_kill(struct lc_conn *c, const char *why);

/* lc_conn_dead_why -- the first reason given to lc_conn_kill(). */
const char *lc_conn_dead_why(const struct lc_conn *c);

static inline int lc_conn_is_dead(const struct lc_conn *c)
{
	return __atomic_load_n(&c->dead, __ATOMIC_ACQUIRE);
}

/*
 * lc_conn_send -- queue @msg (stamped with the connection's source) and
 * start sending it; never blocks. Returns 0; -ENOTCONN (dead), -ENOBUFS
 * (the queue is full: the connection is now dead), or the encoder's error.
 */
int lc_conn_send(struct lc_conn *c, struct lc_msg *msg);

/*
 * lc_conn_flush -- progress thread, on EPOLLOUT: send what the queue
 * holds. Returns 0, or -errno when the connection broke (marked dead).
 */
int lc_conn_flush(struct lc_conn *c);

/* lc_conn_stalled -- whether the queue has waited for the peer longer than @limit_ns. */
int lc_conn_stalled(struct lc_conn *c, uint64_t now, uint64_t limit_ns);

/* lc_conn_queued -- bytes waiting in the send queue (a snapshot). */
size_t lc_conn_queued(struct lc_conn *c);

/*
 * lc_conn_recv -- progress thread, on EPOLLIN: read what the socket holds.
 * Returns > 0 bytes read, 0 when nothing was there, -ECONNRESET on EOF,
 * another -errno on error.
 */
int lc_conn_recv(struct lc_conn *c);

/*
 * lc_conn_next -- decode the next whole message received into @msg.
 * Returns 1 (a message), 0 (none complete yet), -EPROTO etc. (bad input:
 * the connection must be dropped).
 */
int lc_conn_next(struct lc_conn *c, struct lc_msg *msg);

#endif /* LOCO_LC_CONN_H */
