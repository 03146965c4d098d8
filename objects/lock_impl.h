/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock_impl.h -- objects/-private: the lock's state, shared by lock.c (the
 * API, the grants and the attempts) and lock_host.c (host failover: the
 * moves, peer_leave and the syncs). The design is at the top of lock.c,
 * host failover at the top of lock_host.c. Not installed.
 *
 * Thread safety: as loco/lock.h; each field says what guards it.
 */
#ifndef LOCO_OBJECTS_LOCK_IMPL_H
#define LOCO_OBJECTS_LOCK_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <loco.h>
#include <loco/lock.h>

#include "host_path.h"

#define WORD_LEN     64 /* one line for W (offset 0), O (offset 8) and M (offset 16) */
#define W_OFF        0
#define O_OFF        8
#define M_OFF        16
#define M_MAKE(e, h) ((uint64_t)(e) << 32 | (uint32_t)(h))
#define EPOCH_BITS   20 /* a user token: epoch (20 bits) << 44 | the word's token */
#define EPOCH_MAX    ((1u << EPOCH_BITS) - 1)
#define RES_OP       0 /* result slots: acquire/try/renew/release */
#define RES_HOLDER   1 /* loco_lock_holder(): W and O, 2 slots */
#define RES_OWNER    3 /* the source of the owner WRITE (copied at post) */
#define RES_SYNC     4 /* a peer's M word */
#define RES_LEN      (5 * sizeof(uint64_t))

enum lk_op {
	LK_CAS,   /* W: a -> b */
	LK_READ2, /* W and O, into old[0], old[1] */
	LK_WRITEO /* O := a */
};

/*
 * What this node has seen of a held word: the value and since when,
 * unbroken (lock.c's header says why that makes a takeover safe). The
 * acquires' watch belongs to the handle (struct loco_lock.watch), not to
 * one call, so that waits split into short calls add up; a try's is its
 * own, thrown away with the call.
 */
struct lk_watch {
	uint64_t val;             /* 0: nothing watched (0 is FREE, never watched) */
	int64_t since;            /* completion time of the first operation that returned val */
	int64_t last;             /* ... of the latest one */
	const struct lk_host *hs; /* the host whose word is watched */
	bool takeover;            /* the acquires' watch: a takeover is allowed */
};

/*
 * One host the lock has had: made at create and at every move, never
 * freed before the lock (an application thread may still use an old one).
 */
struct lk_host {
	uint32_t node;       /* the host's id */
	uint32_t epoch;      /* 0 at create; the move's view (or the last epoch + 1) */
	int64_t not_before;  /* obj_now_ns(): no operation on this host before */
	struct host_path hp; /* lost for good once the host left */
	struct lk_host *prev;
};

struct loco_lock {
	loco_object_t *obj;
	loco_region_t *word;
	loco_region_t *res;
	struct lk_host *hs;      /* atomic: the current host; changed under move_lock */
	struct lk_host *hold_hs; /* the host of this node's hold (under the claim) */
	struct lk_host *seen_hs; /* the host of @seen (under the claim) */
	pthread_mutex_t move_lock;
	int need_sync; /* atomic: read the peers' M words first: 1 created, 2 excluded */
	uint64_t inc;  /* under the claim: this node's incarnation when the lock was last used */
	uint32_t me;
	int64_t lease_ns;
	int64_t takeover_ns;
	int64_t coarse_lag_ns; /* lk_post_time(): obj_coarse_lag_ns(), or 0 to read obj_now_ns() */
	loco_manager_t *m;     /* the channel's, looked up once at create */
	loco_ack_key_t *ack;   /* acquire/try/renew/release: under the claim (and hold_lock) */
	loco_ack_key_t *qack;  /* loco_lock_holder(): under query_lock */
	loco_ack_key_t *sack;  /* lk_sync()'s READs (under the claim), apart from ack: a
	                          stalled peer never holds up the acquire's CASes */
	/* lk_op() returned with an operation of ack (of qack) perhaps still in flight: the next
	   lk_op() on that key settles it first (under the key's lock, as the key) */
	int ack_unsettled;
	int qack_unsettled;
	pthread_mutex_t query_lock;
	pthread_mutex_t hold_lock; /* renew vs release */
	int claimed;               /* a thread of this node is acquiring or holds */
	int held;                  /* this node holds the lock (it has the claim too) */
	int recovered;             /* ... taken over from an expired lease */
	uint64_t cur;              /* the word as this node's grant or last renewal set it */
	uint64_t token;            /* atomic: epoch << 44 | cur's token, for loco_lock_token() */
	int64_t lease_end;         /* atomic: obj_now_ns() time the lease ends */
	int64_t renew_post;        /* post time of the last grant or renewal */
	uint64_t seen;             /* the last word seen: the next acquire's first guess */
	uint64_t passed;           /* the PASSED word this node's last release left (0: none) */
	int64_t passed_seen;       /* when an acquire here first met it (0: not yet) */
	struct lk_host *passed_hs; /* the host of @passed */
	uint64_t rng;              /* back-off jitter (under the claim) */
	struct lk_watch watch;     /* the acquires' watch of a held word (under the claim) */
	uintptr_t hold_thr;        /* atomic: lk_self() of the thread whose call took the hold */
};

static inline uint64_t *res_ptr(const loco_lock_t *lk, unsigned slot)
{
	return (uint64_t *)loco_region_ptr(lk->res) + slot;
}

/*
 * lk_partitioned -- 1 when this node cannot reach a majority of its view,
 * so that the lock's waits stop with -LOCO_EPARTITION.
 */
static inline int lk_partitioned(const loco_lock_t *lk)
{
	return loco_channel_partitioned(loco_object_channel(lk->obj));
}

/* lk_host_cur -- the current host (pairs with lk_move()'s release store). */
static inline struct lk_host *lk_host_cur(const loco_lock_t *lk)
{
	return __atomic_load_n(&lk->hs, __ATOMIC_ACQUIRE);
}

/* lk_ops -- the lock object's callbacks: peer_leave moves the host (lock_host.c). */
extern const struct loco_object_ops lk_ops;

/* lk_host_ready -- under the claim: the host to use now, or NULL: busy (lock_host.c). */
struct lk_host *lk_host_ready(loco_lock_t *lk);

#endif /* LOCO_OBJECTS_LOCK_IMPL_H */
