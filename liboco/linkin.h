/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * linkin.h -- data links other nodes open to us: checked, then admitted.
 *
 * A link accepted from the fabric (fab_accept()) is held: it serves
 * nothing until its private data proves (auth.h) that its connector is
 * the member it claims, on the control session authenticated between us.
 * Then it is admitted (fab_link_admit()) and bound to its member; a link
 * that fails the check is refused (fab_link_close()) and logged with its
 * real address (fab_link_peer()), at most LC_LINKIN_LOG_MAX lines a
 * second. A link whose member has no authenticated session yet (it may
 * still be handshaking) waits, held, on a pending list: at most
 * LC_PENDING_MAX links in all and LC_PENDING_PER_NODE per claimed node
 * (more are refused), each at most the handshake bound (max(2 s, the
 * failure bound)); on tcp these are the only bounds on them (its caps
 * count only the links it has not handed over, fabric/tcp/link.c, so
 * that strangers' waiting links cannot keep a member's out); it is
 * checked when the session comes up
 * (lc_linkin_take()), and closed and freed when the bound passes, when
 * its member is removed (lc_linkin_forget()) and at fini.
 *
 * The links this node opens (dial.c, lc_self_link()) take their one-time
 * counters from lc_linkin_counter(): one counter per node, so each
 * session sees them grow.
 *
 * Thread safety: everything runs on the progress thread with m->lock
 * held, except lc_linkin_counter() (MT-safe) and lc_self_link() (init).
 */
#ifndef LOCO_LC_LINKIN_H
#define LOCO_LC_LINKIN_H

#include <stdint.h>

#include <loco.h>

#include "auth.h"
#include "fabric/fabric.h"
#include "links.h"

#define LC_PENDING_MAX      64 /* links waiting for their member's session, in all */
#define LC_PENDING_PER_NODE 4  /* ... claiming one node id */
#define LC_LINKIN_LOG_MAX   10 /* refusal warnings per second; the rest are counted */

/* A data link accepted before its member's session was authenticated (held). */
struct lc_pending_link {
	struct fab_link *link;
	struct lc_link_priv priv;
	uint64_t since_ns;
	struct lc_pending_link *next;
};

#define LC_READY_MAX 32 /* links admitted in one progress turn, for the member table to take */

/* An admitted link the member table takes (lc_linkin_ready()). */
struct lc_ready_link {
	uint32_t node;
	uint64_t inc;
	struct fab_link *link;
};

/* The manager's part (m->linkin). */
struct lc_linkin {
	struct lc_pending_link *pending;
	unsigned npending;
	struct lc_ready_link ready[LC_READY_MAX];
	unsigned nready;
	struct lc_ready_link newer[LC_READY_MAX]; /* members whose link a new one supersedes */
	unsigned nnewer;
	uint8_t self_key[LC_LINK_KEY_LEN]; /* the self link's key, drawn at start */
	int self_ready;     /* atomic: self_key drawn (before: self claims refused) */
	uint64_t self_seen; /* highest counter admitted on the self link */
	uint64_t counter;   /* atomic: the last counter a link we opened used */
	uint64_t refused;   /* links refused so far */
	uint64_t log_sec;   /* rate limit of the refusal warnings */
	unsigned log_n, log_quiet;
	struct fab_link *self_link;   /* to our own endpoint: operations on our own memory */
	struct fab_link *self_served; /* its accepted end */
};

/* lc_linkin_has_self -- whether the self link is open (our own memory is reachable). */
int lc_linkin_has_self(loco_manager_t *m);

/* lc_linkin_close_self -- close both ends of the self link (at the end). */
void lc_linkin_close_self(loco_manager_t *m);

/*
 * lc_linkin_accept -- progress thread: check, admit or hold new
 * links; expire held ones. Admitted links wait for the member table,
 * which takes them with lc_linkin_ready() (lc_member_handoffs(), called
 * next): this file looks entries up (members.h) but never calls member.c.
 */
void lc_linkin_accept(loco_manager_t *m);

/*
 * lc_linkin_ready -- m->lock held: an admitted link and whom it is from
 * (*@node, *@inc), or NULL when none waits. The caller binds or closes it.
 */
struct fab_link *lc_linkin_ready(loco_manager_t *m, uint32_t *node, uint64_t *inc);

/*
 * lc_linkin_newer -- m->lock held: a member (*@node, *@inc) that opened a
 * new data link, proven, while ours to it still looks up: it dials only
 * when its end of the old link went down, so ours is dead too (a close
 * this side missed). The member table drops the old link and takes the
 * new one (lc_linkin_take()). 0 when none waits, else 1.
 */
int lc_linkin_newer(loco_manager_t *m, uint32_t *node, uint64_t *inc);

/*
 * lc_linkin_take -- m->lock held: @node/@inc's session is authenticated
 * (its member's conn holds the key): check the links it left waiting;
 * return the first that proves itself, admitted (the caller binds it),
 * or NULL. The others are refused.
 */
struct fab_link *lc_linkin_take(loco_manager_t *m, uint32_t node, uint64_t inc);

/*
 * lc_linkin_forget -- m->lock held: incarnation @inc of @node is gone:
 * close the links of it (and of older ones) that wait; a newer
 * incarnation's links wait on.
 */
void lc_linkin_forget(loco_manager_t *m, uint32_t node, uint64_t inc);

/* lc_linkin_free -- after the threads stopped: close every waiting link. */
void lc_linkin_free(loco_manager_t *m);

/*
 * lc_linkin_proof -- m->lock held: the proof for a link from us to member
 * @node/@inc, from its authenticated session. 0, or -ENOTCONN (no such
 * member or no authenticated session).
 */
int lc_linkin_proof(loco_manager_t *m, uint32_t node, uint64_t inc, struct lc_link_proof *out);

/* lc_linkin_counter -- the next one-time counter for a link we open (MT-safe). */
uint64_t lc_linkin_counter(loco_manager_t *m);

/*
 * lc_self_link -- open the link from this node to its own endpoint (its
 * proof uses m->linkin.self_key). A failure is logged and leaves the
 * node without one.
 */
void lc_self_link(loco_manager_t *m);

#endif /* LOCO_LC_LINKIN_H */
