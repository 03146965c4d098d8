/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * manager.h -- the manager's insides, shared by manager.c (lifecycle and
 * the progress thread), member.c (control plane and membership),
 * channel.c (channels, objects, regions, remote operations) and mem.c
 * (registered-memory arenas).
 *
 * Locking: m->lock (recursive) guards members, connections, channels and
 * their objects and regions; the progress thread holds it while it
 * processes a message, and object callbacks run under it. m->links_lock
 * (rwlock) guards the node -> fabric link table that the data path reads.
 */
#ifndef LOCO_LC_MANAGER_H
#define LOCO_LC_MANAGER_H

#include <pthread.h>
#include <stdint.h>

#include <loco.h>

#include "ack.h"
#include "ctrl_wire.h"
#include "fabric/fabric.h"
#include "sock.h"

#define LC_MAX_NODES 256

struct lc_member;

enum lc_conn_state {
	LC_CONN_HELLO = 1, /* acceptor: waiting for HELLO */
	LC_CONN_AUTH,      /* acceptor: CHALLENGE sent, waiting for AUTH */
	LC_CONN_UP,        /* authenticated */
};

/* A control-plane connection to another manager. */
struct lc_conn {
	int fd;
	int state;
	int initiator; /* we connected */
	int dead;
	uint8_t nonce_mine[LC_NONCE_LEN];
	uint8_t nonce_peer[LC_NONCE_LEN];
	struct lc_member_info peer;
	struct lc_member *member;
	uint8_t *rx;
	size_t rx_len;
	uint64_t last_rx_ns;
	pthread_mutex_t send_lock;
	struct lc_conn *next;
};

/* A member of the cluster as this node sees it. */
struct lc_member {
	struct lc_member_info info;
	struct lc_conn *conn;
	struct fab_link *link;
	int up; /* authenticated and linked: visible to channels */
	struct lc_member *next;
};

/* A data link accepted before its member finished authenticating. */
struct lc_pending_link {
	struct fab_link *link;
	uint32_t node;
	uint64_t inc;
	struct lc_pending_link *next;
};

/* A member the dialer thread must connect to (lower id connects). */
struct lc_dial {
	struct lc_member_info info;
	uint64_t next_ns;  /* next attempt */
	uint64_t deadline; /* give up after */
	unsigned delay_ms; /* back-off */
	int busy;          /* being dialled now */
	int link_only;     /* a member whose data link must be rebuilt */
	struct lc_dial *next;
};

struct lc_link_ent {
	uint32_t node;
	struct fab_link *link;
};

struct lc_arena;
struct lc_pollers;

struct loco_manager {
	pthread_mutex_t lock; /* recursive */
	uint32_t node_id;
	uint64_t inc;
	char fabric[LC_FABRIC_MAX + 1];
	char ctrl_addr[LC_ADDR_MAX + 1];
	char fab_addr[LC_ADDR_MAX + 1];
	uint8_t key[32]; /* derived from the cluster secret; the secret is not kept */
	uint32_t fail_timeout_ms;
	uint32_t join_timeout_ms;

	struct fab *fab;
	int lfd, epfd, evfd;
	pthread_t progress;
	int stop;    /* atomic */
	int ready;   /* the progress thread serves the fabric */
	int leaving; /* loco_fini() said LEAVE: peers going away is expected */

	struct lc_member *members;
	struct lc_conn *conns;
	struct lc_pending_link *pending;
	struct fab_link *self_link;   /* to our own endpoint: operations on our own memory */
	struct fab_link *self_served; /* its accepted end */
	struct lc_dial *dials;
	pthread_cond_t dial_cond; /* with m->lock; CLOCK_MONOTONIC */
	pthread_t dialer;
	int dialer_started;
	uint64_t next_hb_ns;
	uint64_t hb_seq;

	pthread_mutex_t poll_lock; /* fab_poll() is serialized: who holds it reaps */
	int waiters;               /* atomic: threads in loco_ack_wait(), reaping themselves */
	uint64_t last_wait_ns;     /* atomic: when the last of them left */
	int no_pwait2;             /* progress thread: the kernel has no epoll_pwait2() */
	pthread_rwlock_t links_lock;
	struct lc_link_ent links[LC_MAX_NODES];
	unsigned nlinks;

	struct lc_ack_table acks;
	struct loco_channel *channels;
	struct lc_arena *arenas; /* one per NUMA node, allocated on first use */
	int narenas;
	pthread_mutex_t mem_lock;
	struct lc_pollers *pollers; /* poller.c: loco_poller_add() and the progress thread */
};

/* manager.c */
void lc_wake(loco_manager_t *m);

/* poller.c -- the progress thread's pollers (loco_poller_add()) */
int lc_pollers_init(loco_manager_t *m);
void lc_pollers_fini(loco_manager_t *m);                   /* after the progress thread stopped */
int lc_pollers_run(loco_manager_t *m, int64_t *period_ns); /* progress thread: busy? */

/* member.c -- control plane and membership */
int lc_ctrl_listen(loco_manager_t *m, const char *addr);
int lc_join(loco_manager_t *m, const char *contacts);
void lc_ctrl_accept(loco_manager_t *m);
void lc_conn_input(loco_manager_t *m, struct lc_conn *c);
void lc_link_accept(loco_manager_t *m);
uint64_t lc_member_timers(loco_manager_t *m, uint64_t now); /* returns when to call again */
void lc_member_link_error(loco_manager_t *m, uint32_t node, int status);
void lc_member_link_check(loco_manager_t *m, uint32_t node);
void lc_members_leave(loco_manager_t *m);
void lc_members_free(loco_manager_t *m);
void *lc_dialer_main(void *arg);
void lc_self_link(loco_manager_t *m);
int lc_conn_send(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg);
struct lc_member *lc_member_find(loco_manager_t *m, uint32_t node);
struct fab_link *lc_link_of(loco_manager_t *m, uint32_t node); /* links_lock held (read) */

/* channel.c -- called with m->lock held */
void lc_chan_on_msg(loco_manager_t *m, struct lc_member *from, const struct lc_msg *msg);
void lc_chan_on_member_up(loco_manager_t *m, struct lc_member *mb);
void lc_chan_on_member_gone(loco_manager_t *m, uint32_t node);

/* mem.c */
int lc_mem_alloc(loco_manager_t *m, size_t len, void **out);
void lc_mem_free(loco_manager_t *m, void *p, size_t len);
void lc_mem_fini(loco_manager_t *m);
int lc_memlock_check(const char *fabric);

#endif /* LOCO_LC_MANAGER_H */
