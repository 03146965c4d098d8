/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock.c -- a distributed lock: one word on a host node, taken with a
 * fabric CAS and bounded exponential back-off. Built only on the public
 * object-author API (loco/channel.h).
 *
 * The word: LK_FREE (0); LK_RECOVERED (1): free, and its last holder died
 * holding it; or a holder's tag, (node id << 32) | 32 bits of its
 * incarnation (>= 1 << 32, since ids are >= 1). Acquire CASes FREE -> tag;
 * a CAS that fails returns the word, which says whether to retry at once
 * (RECOVERED -> tag) or back off. Release CASes tag -> FREE, so that a node
 * the host has given up on cannot free the lock of the node that took it
 * over.
 *
 * A dead holder: the host's object hears peer_leave(X). If the word's
 * holder is X, it CASes the word from X's tag to LK_RECOVERED: on the
 * progress thread, without waiting (with no fabric path to itself, the
 * host runs it as a CPU atomic, which the tcp NIC thread serializes with
 * the fabric's). The next acquirer's CAS(FREE) then fails with RECOVERED,
 * and its CAS(RECOVERED -> tag) takes the lock: loco_lock_recovered() says
 * so. No CAS of X's still in flight can land after the check: the library
 * closes X's data link before it calls peer_leave (member_remove()).
 *
 * A dead host: the other nodes hear peer_leave(host) and mark the lock
 * lost: every later call returns -ECONNRESET, so that a host restarted
 * with a fresh, free word never hands out a second hold.
 *
 * Locally, one thread of the node at a time runs acquire/try/release (the
 * "claim" flag, taken by acquire and try, dropped by release or a failed
 * attempt): the lock is the node's, and the attempts share one ack key and
 * one result slot.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <loco.h>
#include <loco/lock.h>

#include "host_path.h"
#include "obj_util.h"

#define LK_FREE      0ull
#define LK_RECOVERED 1ull

#define WORD_LEN       64 /* one line for the word */
#define RES_OP         0  /* result slots: acquire/try/release */
#define RES_HOLDER     1  /* loco_lock_holder() */
#define RES_RECOVER    2  /* the host's recovery CAS, when it goes through the fabric */
#define RES_LEN        (3 * sizeof(uint64_t))
#define BACKOFF_MIN_NS 2000ll
#define BACKOFF_MAX_NS 1000000ll
/* an attempt in flight is waited for: the fabric fails it within its dead-peer bound */
#define OP_CAP_NS (60ll * 1000000000ll)

enum lk_op {
	LK_CAS,
	LK_READ
};

struct loco_lock {
	loco_object_t *obj;
	loco_region_t *word;
	loco_region_t *res;
	uint32_t host;
	uint32_t me;
	uint64_t tag;
	loco_ack_key_t *ack;  /* acquire/try/release: under the claim */
	loco_ack_key_t *qack; /* loco_lock_holder(): under query_lock */
	pthread_mutex_t query_lock;
	struct host_path hp; /* to the host's word; lost for good when the host left */
	int claimed;         /* a thread of this node is acquiring or holds */
	int held;            /* this node holds the lock (it has the claim too) */
	int recovered;       /* ... taken over from a dead holder */
	uint64_t rng;        /* back-off jitter (under the claim) */
};

static uint64_t *res_ptr(const loco_lock_t *lk, unsigned slot)
{
	return (uint64_t *)loco_region_ptr(lk->res) + slot;
}

/*
 * lk_peer_leave -- on the progress thread, under the manager's lock: free
 * a dead holder's lock, or lose the host. It must not take the host
 * path's lock (a thread holding that may wait for the manager's lock in
 * loco_region_remote()), so it looks the host's path up itself.
 */
static void lk_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_lock_t *lk = arg;
	loco_rref_t rr;
	uint64_t *w, v;

	(void)obj, (void)view;
	if (node == lk->host) {
		host_path_lose(&lk->hp);
		return;
	}
	if (lk->me != lk->host)
		return;
	/* the host's own copy: an aligned word, never torn */
	w = loco_region_ptr(lk->word);
	v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
	if (v >> 32 != node)
		return;
	if (loco_region_remote(lk->word, lk->me, &rr) == 0)
		loco_cas(lk->res, RES_RECOVER * sizeof(uint64_t), &rr, 0, v, LK_RECOVERED,
		         NULL); /* no waiting here; a failed CAS means the word moved on */
	else
		__atomic_compare_exchange_n(w, &v, LK_RECOVERED, false, __ATOMIC_SEQ_CST,
		                            __ATOMIC_SEQ_CST); /* serializes with the NIC's CAS */
}

static const struct loco_object_ops lk_ops = {
    .peer_leave = lk_peer_leave,
};

int loco_lock_create(loco_channel_t *ch, const char *name, uint32_t host, loco_lock_t **out)
{
	loco_manager_t *m;
	loco_lock_t *lk;
	uint64_t inc;
	int ret;

	if (ch == NULL || name == NULL || host == 0 || out == NULL)
		return -EINVAL;
	lk = calloc(1, sizeof(*lk));
	if (lk == NULL)
		return -ENOMEM;
	m = loco_channel_manager(ch);
	inc = loco_incarnation(m);
	lk->host = host;
	lk->me = loco_node_id(m);
	lk->tag = (uint64_t)lk->me << 32 | (uint32_t)(inc ^ inc >> 32);
	lk->rng = inc | 1;
	pthread_mutex_init(&lk->query_lock, NULL);
	host_path_init(&lk->hp);
	ret = loco_ack_key_create(m, &lk->ack);
	if (ret)
		goto err_free;
	ret = loco_ack_key_create(m, &lk->qack);
	if (ret)
		goto err_destroy_ack;
	ret = loco_object_create(ch, name, &lk_ops, lk, &lk->obj);
	if (ret)
		goto err_destroy_qack;
	ret = loco_region_create(lk->obj, "word", WORD_LEN,
	                         host == lk->me ? LOCO_ACCESS_READ | LOCO_ACCESS_ATOMIC : 0,
	                         &lk->word);
	if (ret)
		goto err_destroy_obj;
	ret = loco_region_create(lk->obj, "res", RES_LEN, 0, &lk->res);
	if (ret)
		goto err_destroy_obj;
	*out = lk;
	return 0;

err_destroy_obj:
	loco_object_destroy(lk->obj); /* and the region made so far */
err_destroy_qack:
	loco_ack_key_destroy(lk->qack);
err_destroy_ack:
	loco_ack_key_destroy(lk->ack);
err_free:
	host_path_fini(&lk->hp);
	pthread_mutex_destroy(&lk->query_lock);
	free(lk);
	return ret;
}

/*
 * lk_op -- one CAS (@a -> @b) or READ of the host's word through result
 * slot @slot and @ack; the old value in *@old. A CAS is waited for until
 * it completes (the fabric completes or fails it within its dead-peer
 * bound), so that the caller always knows what it did; a READ is waited
 * for up to @timeout_ns.
 */
static int lk_op(loco_lock_t *lk, int op, uint64_t a, uint64_t b, unsigned slot,
                 loco_ack_key_t *ack, uint64_t *old, int64_t timeout_ns)
{
	size_t loff = slot * sizeof(uint64_t);
	int path = host_path_get(&lk->hp, lk->word, lk->host, lk->me), ret;

	if (path < 0)
		return path;
	if (path == HOST_PATH_LOCAL) {
		uint64_t *w = loco_region_ptr(lk->word);

		/* seq_cst, as the tcp NIC thread's atomics on the same word */
		if (op == LK_READ) {
			*old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		} else {
			*old = a;
			__atomic_compare_exchange_n(w, old, b, false, __ATOMIC_SEQ_CST,
			                            __ATOMIC_SEQ_CST);
		}
		return 0;
	}
	for (;;) {
		if (op == LK_READ)
			ret = loco_read(lk->res, loff, &lk->hp.rref, 0, sizeof(uint64_t), ack);
		else
			ret = loco_cas(lk->res, loff, &lk->hp.rref, 0, a, b, ack);
		if (ret != -EAGAIN)
			break;
		sched_yield();
	}
	if (ret)
		return ret;
	ret = loco_ack_wait(ack, op == LK_READ ? timeout_ns : OP_CAP_NS);
	if (op == LK_CAS && ret == -ETIMEDOUT && loco_ack_outstanding(ack) > 0) {
		/* the fabric broke its bound: we cannot tell what the word holds */
		host_path_lose(&lk->hp);
		return -ECONNRESET;
	}
	if (ret == 0)
		*old = __atomic_load_n(res_ptr(lk, slot), __ATOMIC_ACQUIRE);
	return ret;
}

/* claim -- take this node's claim by @deadline (< 0: forever; 0: one try). */
static int claim(loco_lock_t *lk, int64_t deadline)
{
	for (unsigned spins = 0;; spins++) {
		int zero = 0;

		if (__atomic_compare_exchange_n(&lk->claimed, &zero, 1, false, __ATOMIC_ACQUIRE,
		                                __ATOMIC_RELAXED))
			return 0;
		if (deadline == 0)
			return -EBUSY;
		if (deadline > 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (spins < 64) {
			sched_yield();
		} else {
			struct timespec ts = {.tv_nsec = 50000};

			nanosleep(&ts, NULL);
		}
	}
}

static void unclaim(loco_lock_t *lk)
{
	__atomic_store_n(&lk->claimed, 0, __ATOMIC_RELEASE); /* pairs with claim's acquire */
}

/* backoff -- sleep about *@delay (jittered, not past @deadline), then double it. */
static void backoff(loco_lock_t *lk, int64_t *delay, int64_t deadline)
{
	int64_t d, t;
	struct timespec ts;

	lk->rng ^= lk->rng << 13; /* xorshift64 */
	lk->rng ^= lk->rng >> 7;
	lk->rng ^= lk->rng << 17;
	d = *delay / 2 + (int64_t)(lk->rng % (uint64_t)(*delay / 2 + 1));
	if (deadline >= 0) {
		t = deadline - obj_now_ns();
		if (d > t)
			d = t > 0 ? t : 0;
	}
	ts.tv_sec = d / 1000000000ll;
	ts.tv_nsec = d % 1000000000ll;
	if (d > 0)
		nanosleep(&ts, NULL);
	*delay = *delay * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : *delay * 2;
}

/*
 * attempt -- CAS the word from a free state to our tag: 1 when taken, 0
 * when another node holds it, or an error. @expect is the free state to
 * try first; it is updated to what the word turned out to hold.
 */
static int attempt(loco_lock_t *lk, uint64_t *expect)
{
	for (int i = 0; i < 2; i++) {
		uint64_t old = 0;
		int ret = lk_op(lk, LK_CAS, *expect, lk->tag, RES_OP, lk->ack, &old, -1);

		if (ret)
			return ret;
		if (old == *expect || old == lk->tag) {
			__atomic_store_n(&lk->recovered, *expect == LK_RECOVERED, __ATOMIC_RELAXED);
			__atomic_store_n(&lk->held, 1, __ATOMIC_RELEASE);
			return 1;
		}
		*expect = old;
		if (old != LK_FREE && old != LK_RECOVERED)
			return 0; /* held by another node */
	}
	return 0; /* it went FREE <-> RECOVERED under us: count it as busy */
}

int loco_lock_acquire(loco_lock_t *lk, int64_t timeout_ns)
{
	int64_t deadline, delay = BACKOFF_MIN_NS;
	uint64_t expect = LK_FREE;
	int ret;

	if (lk == NULL)
		return -EINVAL;
	deadline = obj_deadline(timeout_ns == 0 ? 1 : timeout_ns); /* 0 would mean one try */
	ret = claim(lk, deadline);
	if (ret)
		return ret;
	for (;;) {
		ret = attempt(lk, &expect);
		if (ret == 1)
			return 0; /* the claim stays with the hold */
		if (ret < 0)
			break;
		if (expect != LK_FREE && expect != LK_RECOVERED)
			expect = LK_FREE; /* the holder will free it */
		if (deadline >= 0 && obj_now_ns() >= deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		backoff(lk, &delay, deadline);
	}
	unclaim(lk);
	return ret;
}

int loco_lock_try_acquire(loco_lock_t *lk)
{
	uint64_t expect = LK_FREE;
	int ret;

	if (lk == NULL)
		return -EINVAL;
	ret = claim(lk, 0);
	if (ret)
		return ret;
	ret = attempt(lk, &expect);
	if (ret == 1)
		return 0;
	unclaim(lk);
	return ret < 0 ? ret : -EBUSY;
}

int loco_lock_release(loco_lock_t *lk)
{
	uint64_t old = 0;
	int ret;

	if (lk == NULL)
		return -EINVAL;
	/* the claim is ours while held: another thread of the node waits in claim() */
	if (!__atomic_exchange_n(&lk->held, 0, __ATOMIC_ACQ_REL))
		return -EPERM; /* one release per hold, whichever thread makes it */
	ret = lk_op(lk, LK_CAS, lk->tag, LK_FREE, RES_OP, lk->ack, &old, -1);
	if (ret == 0 && old != lk->tag)
		ret = -ENOLCK; /* the host freed it for a failed node: us */
	__atomic_store_n(&lk->recovered, 0, __ATOMIC_RELAXED);
	unclaim(lk);
	return ret;
}

int loco_lock_recovered(const loco_lock_t *lk)
{
	return lk != NULL && __atomic_load_n(&lk->held, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&lk->recovered, __ATOMIC_RELAXED);
}

int loco_lock_holder(loco_lock_t *lk, uint32_t *node, int64_t timeout_ns)
{
	uint64_t v = 0;
	int ret;

	if (lk == NULL || node == NULL)
		return -EINVAL;
	pthread_mutex_lock(&lk->query_lock);
	/* a READ that timed out earlier may still land in the slot: settle it first */
	if (loco_ack_wait(lk->qack, timeout_ns) == -ETIMEDOUT && loco_ack_outstanding(lk->qack) > 0)
		ret = -ETIMEDOUT;
	else
		ret = lk_op(lk, LK_READ, 0, 0, RES_HOLDER, lk->qack, &v, timeout_ns);
	pthread_mutex_unlock(&lk->query_lock);
	if (ret == 0)
		*node = (uint32_t)(v >> 32);
	return ret;
}

void loco_lock_destroy(loco_lock_t *lk)
{
	if (lk == NULL)
		return;
	if (__atomic_load_n(&lk->held, __ATOMIC_ACQUIRE))
		loco_lock_release(lk); /* best effort: -ECONNRESET when the host is gone */
	loco_ack_key_destroy(lk->qack);
	loco_ack_key_destroy(lk->ack);
	loco_object_destroy(lk->obj);
	host_path_fini(&lk->hp);
	pthread_mutex_destroy(&lk->query_lock);
	free(lk);
}
