/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock.c -- a distributed lock with leases and fencing tokens: two words
 * on a host node, taken with a fabric CAS and bounded exponential
 * back-off, one-sided (the host's CPU takes no part). Built only on the
 * public object-author API (loco/channel.h).
 *
 * The lock word W: token (44 bits) | renewal counter (16 bits) | state (4
 * bits: FREE, HELD, WAITED or PASSED). Every grant CASes the word to
 * {token + 1, 0, HELD}, so tokens grow strictly with every grant and never
 * repeat; a release CASes this node's exact word to {token, 0, FREE}; a
 * renewal CASes it to {token, renew + 1, its state}.
 *
 * Passing on. A CAS lock is unfair: a node that releases and acquires
 * again at once wins against a waiter a round trip away, for ever (seen:
 * nodes on shm beside the host took the lock 1111 times while a node over
 * tcp got 33, and one got none in 10 s). So a waiter that has waited
 * WAIT_MARK_NS marks the HELD word WAITED (same token and renewal
 * counter: one CAS per hold at most), the holder's release of a WAITED
 * word leaves it PASSED instead of FREE, and the node that released a
 * PASSED word does not take it back for PASS_GRACE_NS (from when it first
 * sees it in an acquire), while every other node takes PASSED as FREE.
 * Holds never overlap either way: only grants (CAS to token + 1) hold,
 * and WAITED is held like HELD (a takeover waits for the same value for
 * T; the mark is one change of value per hold, and renewals keep it, so
 * the renewal counter's no-ABA argument below stands).
 *
 * The owner word O: (token's low 32 bits) << 32 | the holder's node id,
 * written by the holder right after its grant, only for
 * loco_lock_holder() (node ids take 32 bits: no room in W).
 *
 * Leases. The holder's lease runs for L (lease_ns) from the moment it
 * POSTED the CAS that granted or renewed it (its CLOCK_MONOTONIC, before
 * the CAS executed at the host). A waiter may take over a HELD word only
 * after it has seen the SAME value continuously for T (takeover_ns) on its
 * own clock, counted from the completion of the first operation that
 * returned it (after the holder's CAS executed, so after its post); its
 * CAS expects that exact value, so a renewal or a release in between
 * defeats it, and it writes token + 1. With T >= L * (1 + LK_DRIFT) +
 * LK_MARGIN_NS, checked at create, the holder's lease has ended on its own
 * clock before the waiter's takeover CAS is even posted: leases never
 * overlap, and a holder that checks loco_lock_held() before it acts learns
 * that its lease expired before anyone else can be granted the lock. A
 * waiter restarts its count when it has not seen the word for lk_gap():
 * T/4, and never more than LK_GAP_LEASES * L. With at most LK_RENEW_MAX
 * renewals per L (on the holder's clock), fewer than a quarter of the
 * 16-bit renewal counter's values go by between two looks, so it cannot
 * wrap around unseen (no ABA): a word seen the same at both ends of a gap
 * was that value all along (tokens only grow, and a mark never goes
 * back). T/4 alone bounded that only while T <= 1024 L, which create does
 * not check, and a watch that spans calls can meet gaps that long.
 *
 * The watch (the value, and the completion times of the first and the
 * latest operation that returned it) is the handle's, not one acquire's
 * (struct loco_lock.watch, under the claim): the looks of successive
 * acquires, by any thread of this node, add up. A waiter that waits in
 * calls shorter than T (a loop of acquire(500 ms) with T = 3 s) used to
 * start afresh in each call and never took a dead holder's lock over;
 * now it does, about T after its first look, as one long call would. The
 * argument above needs the looks to be continuous, not to be one call's:
 * a gap of more than lk_gap() between two looks, whether within a call
 * or between two, restarts the watch, and a takeover CAS is posted only
 * when the watch's latest look is at most lk_gap() old (ripe()), so
 * the word cannot have wrapped back to the watched value unseen before
 * the CAS compares it. Every look is timed by CLOCK_MONOTONIC, one clock
 * for every thread of the node. A try_acquire's looks are its own (it
 * never takes over) and do not feed the handle's watch; this node's own
 * grant, a move of the host and a partition clear it.
 *
 * A dead or stopped holder is recovered by the lease alone: no peer_leave
 * needed, and no lock is freed under a holder that was declared failed
 * while it still ran. The takeover is what loco_lock_recovered() reports.
 *
 * Host failover (the lock moves when its host leaves): see lock_host.c.
 *
 * Locally, one thread of the node at a time runs acquire/try/release (the
 * "claim" flag, taken by acquire and try, dropped by release or a failed
 * attempt): the lock is the node's, and the attempts share one ack key and
 * one result slot. Renewal and release, which any thread of the holder may
 * call, are serialized by hold_lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <loco.h>
#include <loco/lock.h>

#include "host_path.h"
#include "lock_impl.h"
#include "obj_util.h"

#define ST_FREE   0ull
#define ST_HELD   1ull
#define ST_WAITED 2ull /* held, and a node has waited WAIT_MARK_NS for it */
#define ST_PASSED 3ull /* free; its last holder lets the others take it first */
#define W_FREE(w) (W_STATE(w) == ST_FREE || W_STATE(w) == ST_PASSED)

#define W_TOKEN(w)      ((w) >> 20)
#define W_RENEW(w)      ((w) >> 4 & 0xffffull)
#define W_STATE(w)      ((w)&0xfull)
#define W_MAKE(t, r, s) ((uint64_t)(t) << 20 | ((uint64_t)(r)&0xffffull) << 4 | (uint64_t)(s))
#define TOKEN_MAX       ((1ull << 44) - 1)
/* in a result slot before its CAS or READ: state 0xf is no word's, so a slot left as it was says so */
#define W_POISON     UINT64_MAX
#define O_MAKE(t, n) ((uint64_t)(t) << 32 | (uint32_t)(n))

#define BACKOFF_MIN_NS 2000ll
#define BACKOFF_MAX_NS 1000000ll
#define WAIT_MARK_NS   1000000ll /* an acquire this long in marks the held word WAITED */
#define PASS_GRACE_NS  5000000ll /* a PASSED word is left to the others this long */
/* an attempt in flight is waited for: the fabric fails it within its dead-peer bound */
#define OP_CAP_NS (60ll * 1000000000ll)

#define SEC_NS             1000000000ll
#define LK_DEFAULT_LEASE   (2 * SEC_NS)
#define LK_DEFAULT_TAKEOVR (3 * SEC_NS)
#define LK_LEASE_MAX       (3600 * SEC_NS)
/* the clock-rate bound: each clock runs within 1e-3 of real time, so T > L (1 + 2e-3) */
#define LK_DRIFT_DIV  500
#define LK_MARGIN_NS  (10ll * 1000000ll)
#define LK_RENEW_MAX  64  /* renewals per lease at most: closer ones are no-ops */
#define LK_GAP_LEASES 256 /* x 64 renewals per L: about 16.4k, a quarter of 2^16 */
/* the coarse clock times a grant when its lag is at most L / this (2 s: 31 ms) */
#define LK_COARSE_LEASES 64

/*
 * lk_waiter -- a waiter for @lk's manager: every polling wait of the lock
 * (settling operations, the claim, a full queue, the holder query) pauses
 * by the manager's wait policy (LOCO_WAIT); only the randomized back-off
 * between CAS attempts is a plain sleep.
 */
static void lk_waiter(const loco_lock_t *lk, loco_waiter_t *w)
{
	loco_waiter_init(w, lk->m);
}

/*
 * lk_settle -- wait until every operation on @ack completed, by
 * @deadline (< 0: no bound), polling: unlike loco_ack_wait(), never
 * returns -LOCO_EPARTITION with operations still in flight, which would
 * let a later operation's result slot be overwritten by this one's (a
 * stale CAS result reads as a grant that never happened). Returns 0, the
 * operations' first error, or -ETIMEDOUT (still outstanding).
 */
static int lk_settle(const loco_lock_t *lk, loco_ack_key_t *ack, int64_t deadline)
{
	loco_waiter_t w;
	int ret;

	lk_waiter(lk, &w);
	for (;;) {
		/*
		 * Idle is looked at BEFORE the test (as ralloc's ra_settle): the
		 * progress thread may reap the last completion between a test
		 * that said busy and a count after it, which would read 0 and
		 * take the busy -ETIMEDOUT for the operations' result.
		 */
		int idle = loco_ack_outstanding(ack) == 0;

		ret = loco_ack_wait(ack, 0); /* only reaps and tests: no partition check */
		if (ret != -ETIMEDOUT || idle)
			return ret;
		if (deadline >= 0 && obj_now_ns() >= deadline && loco_ack_outstanding(ack) != 0)
			return -ETIMEDOUT; /* (settled since the test: the next test says how) */
		loco_waiter_pause(&w);
	}
}

void loco_lock_cfg_default(loco_lock_cfg_t *cfg)
{
	if (cfg != NULL)
		*cfg = (loco_lock_cfg_t){.lease_ns = LK_DEFAULT_LEASE,
		                         .takeover_ns = LK_DEFAULT_TAKEOVR};
}

int loco_lock_create_cfg(loco_channel_t *ch, const char *name, uint32_t host,
                         const loco_lock_cfg_t *cfg, loco_lock_t **out)
{
	int64_t lease = LK_DEFAULT_LEASE, takeover = LK_DEFAULT_TAKEOVR;
	loco_manager_t *m;
	loco_lock_t *lk;
	uint64_t inc;
	int ret;

	if (ch == NULL || name == NULL || host == 0 || out == NULL)
		return -EINVAL;
	if (cfg != NULL && (cfg->lease_ns != 0 || cfg->takeover_ns != 0)) {
		lease = cfg->lease_ns;
		takeover = cfg->takeover_ns;
		if (lease <= 0 || lease > LK_LEASE_MAX || takeover <= 0 ||
		    takeover < lease + lease / LK_DRIFT_DIV + LK_MARGIN_NS)
			return -EINVAL;
	}
	ret = loco_handle_alloc(ch, sizeof(*lk), (void **)&lk);
	if (ret)
		return ret;
	lk->hs = calloc(1, sizeof(*lk->hs));
	if (lk->hs == NULL) {
		loco_handle_free(lk);
		return -ENOMEM;
	}
	m = loco_channel_manager(ch);
	inc = loco_manager_incarnation(m);
	lk->hs->node = host;
	lk->need_sync = 1; /* created after a move? the first acquire asks the peers */
	lk->inc = inc;
	lk->me = loco_manager_node_id(m);
	lk->lease_ns = lease;
	lk->takeover_ns = takeover;
	/* the coarse clock's lag must be small against the lease it shortens */
	lk->coarse_lag_ns = obj_coarse_lag_ns();
	if (lk->coarse_lag_ns > lease / LK_COARSE_LEASES)
		lk->coarse_lag_ns = 0;
	lk->rng = inc | 1;
	lk->watch.takeover = true; /* the acquires' watch; a try has its own */
	pthread_mutex_init(&lk->query_lock, NULL);
	pthread_mutex_init(&lk->hold_lock, NULL);
	pthread_mutex_init(&lk->move_lock, NULL);
	host_path_init(&lk->hs->hp);
	lk->m = m;
	ret = loco_ack_key_create(m, &lk->ack);
	if (ret)
		goto err_free;
	ret = loco_ack_key_create(m, &lk->qack);
	if (ret)
		goto err_destroy_ack;
	ret = loco_ack_key_create(m, &lk->sack);
	if (ret)
		goto err_destroy_qack;
	ret = loco_object_create(ch, name, &lk_ops, lk, &lk->obj);
	if (ret)
		goto err_destroy_sack;
	/* the host given here is where the lock starts: every node names the same */
	ret = loco_object_agree(lk->obj, "host", host); /* checked as peers pair */
	if (ret)
		goto err_destroy_obj;
	/* every node's: any may become the host, and its M word is read by syncs */
	ret = loco_region_create(lk->obj, "word", WORD_LEN,
	                         LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC,
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
err_destroy_sack:
	loco_ack_key_destroy(lk->sack);
err_destroy_qack:
	loco_ack_key_destroy(lk->qack);
err_destroy_ack:
	loco_ack_key_destroy(lk->ack);
err_free:
	host_path_fini(&lk->hs->hp);
	pthread_mutex_destroy(&lk->move_lock);
	pthread_mutex_destroy(&lk->hold_lock);
	pthread_mutex_destroy(&lk->query_lock);
	free(lk->hs);
	loco_handle_free(lk);
	return ret;
}

int loco_lock_create(loco_channel_t *ch, const char *name, uint32_t host, loco_lock_t **out)
{
	return loco_lock_create_cfg(ch, name, host, NULL, out);
}

/* the name before loco 0.11: programs built against loco 0.3-0.10 call it */
int loco_lock_create_config(loco_channel_t *ch, const char *name, uint32_t host,
                            const loco_lock_config_t *cfg, loco_lock_t **out)
{
	return loco_lock_create_cfg(ch, name, host, cfg, out);
}

/*
 * lk_op -- one CAS of W (@a -> @b; the old value in *@old), READ of W and
 * O (into old[0], old[1]) or WRITE of O (:= @a), through result slot @slot
 * and @ack. A CAS is waited for until it completes (the fabric completes
 * or fails it within its dead-peer bound), so that the caller always knows
 * what it did; a READ is waited for up to @timeout_ns. A WRITE is posted
 * and not waited for: the owner word is only loco_lock_holder()'s, which
 * waits (up to T) for the word of the grant it sees, and a grant then
 * costs one round trip, not two. Requests to one host execute in order,
 * so the WRITE has landed when the holder's next CAS (its release) has.
 * It is posted inline and without a key (@ack NULL): its source is copied
 * at post and nothing is settled later (with a key and its settling, a
 * grant took 70-100 ns more on shm, against 60 for a CAS and its ack); a
 * failure is logged, and loco_lock_holder() then waits T, as for a holder
 * that died before its WRITE. And lazy (LOCO_ROP_LAZY): nobody waits for
 * it, so on tcp its ACK rides with the answer to the release's CAS
 * instead of costing the holder a frame of its own to read.
 */
static int lk_op(loco_lock_t *lk, struct lk_host *hs, int op, uint64_t a, uint64_t b, unsigned slot,
                 loco_ack_key_t *ack, uint64_t *old, int64_t timeout_ns)
{
	size_t loff = slot * sizeof(uint64_t);
	int path = host_path_get(&hs->hp, lk->word, hs->node, lk->me), ret;
	int *unsettled = ack == lk->qack ? &lk->qack_unsettled : &lk->ack_unsettled;
	bool waiting = false;
	loco_waiter_t w;
	loco_rop_t rop;

	if (path < 0)
		return path;
	/*
	 * An earlier operation that timed out may still land in the slots:
	 * settle it first. Only after an lk_op() that returned an error: one
	 * that returned 0 left its key idle, and the count (a scan of the
	 * key) cost an eighth of a CAS and its ack on shm.
	 */
	if (ack != NULL && *unsettled) {
		if (loco_ack_outstanding(ack) > 0 &&
		    lk_settle(lk, ack, obj_deadline(op == LK_READ2 ? timeout_ns : OP_CAP_NS)) ==
		        -ETIMEDOUT)
			return -ETIMEDOUT;
		*unsettled = 0;
	}
	if (path == HOST_PATH_LOCAL) {
		uint64_t *w = loco_region_ptr(lk->word);

		/* seq_cst, as the tcp NIC thread's atomics on the same word */
		if (op == LK_READ2) {
			old[0] = __atomic_load_n(&w[W_OFF / 8], __ATOMIC_SEQ_CST);
			old[1] = __atomic_load_n(&w[O_OFF / 8], __ATOMIC_SEQ_CST);
		} else if (op == LK_WRITEO) {
			__atomic_store_n(&w[O_OFF / 8], a, __ATOMIC_SEQ_CST);
		} else {
			*old = a;
			__atomic_compare_exchange_n(&w[W_OFF / 8], old, b, false, __ATOMIC_SEQ_CST,
			                            __ATOMIC_SEQ_CST);
		}
		return 0;
	}
	/*
	 * A CAS or READ writes the word into the slot as it completes. Poisoned
	 * first, a slot the operation did not write cannot pass for its result
	 * (an error read as success once made a stale result a grant: ack
	 * keys took an operation's -ETIMEDOUT for the wait's).
	 */
	__atomic_store_n(res_ptr(lk, slot), op == LK_WRITEO ? a : W_POISON, __ATOMIC_RELEASE);
	rop = (loco_rop_t){.opcode = op == LK_READ2    ? LOCO_ROP_READ
	                             : op == LK_WRITEO ? LOCO_ROP_WRITE
	                                               : LOCO_ROP_CAS,
	                   .local = lk->res,
	                   .loff = loff,
	                   .roff = op == LK_WRITEO ? O_OFF : W_OFF,
	                   .len = (op == LK_READ2 ? 2 : 1) * sizeof(uint64_t),
	                   .flags = op == LK_WRITEO ? LOCO_ROP_INLINE | LOCO_ROP_LAZY : 0,
	                   .compare = a,
	                   .value = b,
	                   .acks = {ack}};
	for (;;) {
		ret = loco_rop_post(&hs->hp.h, &rop);
		if (ret != -EAGAIN)
			break;
		if (!waiting) /* made when needed: most posts go through at once */
			lk_waiter(lk, &w);
		waiting = true;
		loco_waiter_pause(&w); /* queue or ack key full: the progress thread drains it */
	}
	if (ret || op == LK_WRITEO)
		return ret;
	ret = loco_ack_wait(ack, op == LK_READ2 ? timeout_ns : OP_CAP_NS);
	*unsettled = ret != 0;
	if (ret == -LOCO_EPARTITION) /* the op's outcome still counts: wait for it anyway */
		ret = lk_settle(lk, ack, obj_deadline(op == LK_READ2 ? timeout_ns : OP_CAP_NS));
	if (op != LK_READ2 && ret == -ETIMEDOUT && loco_ack_outstanding(ack) > 0) {
		/* the fabric broke its bound: we cannot tell what the words hold */
		host_path_lose(&hs->hp);
		return -ECONNRESET;
	}
	if (ret == 0 && __atomic_load_n(res_ptr(lk, slot), __ATOMIC_ACQUIRE) == W_POISON) {
		/* completed, but the result never landed: what the word holds is unknown */
		host_path_lose(&hs->hp);
		/* the next acquire syncs with the peers, which gives the host a fresh path */
		__atomic_store_n(&lk->need_sync, 1, __ATOMIC_RELEASE);
		return -EIO;
	}
	if (ret == 0 && op == LK_CAS)
		*old = __atomic_load_n(res_ptr(lk, slot), __ATOMIC_ACQUIRE);
	if (ret == 0 && op == LK_READ2) {
		old[0] = __atomic_load_n(res_ptr(lk, slot), __ATOMIC_ACQUIRE);
		old[1] = __atomic_load_n(res_ptr(lk, slot + 1), __ATOMIC_ACQUIRE);
	}
	return ret;
}

/* claim -- take this node's claim by @deadline (< 0: forever; 0: one try). */
static int claim(loco_lock_t *lk, int64_t deadline)
{
	bool waiting = false;
	loco_waiter_t w;

	for (;;) {
		int zero = 0;

		if (__atomic_compare_exchange_n(&lk->claimed, &zero, 1, false, __ATOMIC_ACQUIRE,
		                                __ATOMIC_RELAXED))
			return 0;
		if (deadline == 0)
			return -EBUSY;
		if (deadline > 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (!waiting) /* made when the claim is busy: most calls take it at once */
			lk_waiter(lk, &w);
		waiting = true;
		loco_waiter_pause(&w);
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

	lk->rng ^= lk->rng << 13; /* xorshift64 */
	lk->rng ^= lk->rng >> 7;
	lk->rng ^= lk->rng << 17;
	d = *delay / 2 + (int64_t)(lk->rng % (uint64_t)(*delay / 2 + 1));
	if (deadline >= 0) {
		t = deadline - obj_now_ns();
		if (d > t)
			d = t > 0 ? t : 0;
	}
	if (d > 0)
		nanosleep(
		    &(struct timespec){.tv_sec = d / 1000000000ll, .tv_nsec = d % 1000000000ll},
		    NULL);
	*delay = *delay * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : *delay * 2;
}

/*
 * lk_self -- this thread's tag: the address of a thread-local byte, unique
 * among the threads alive, so that hold_thr tells the holding thread's own
 * acquire (-EDEADLK) from another thread's (which waits its turn). No
 * pthread_t: it is not an integer everywhere, and hold_thr is atomic. A
 * thread that ends while it holds leaves its tag to a later thread, whose
 * acquire then says -EDEADLK until some thread releases: no worse than
 * waiting for that release.
 */
static uintptr_t lk_self(void)
{
	static _Thread_local char tag;

	return (uintptr_t)&tag;
}

/* lk_gap -- the longest gap between two looks of one watch (the header says why). */
static int64_t lk_gap(const loco_lock_t *lk)
{
	int64_t g = lk->takeover_ns / 4, cap = LK_GAP_LEASES * lk->lease_ns; /* <= 2^50 */

	return g < cap ? g : cap;
}

/* watch -- note that the word was @v when an operation that returned it completed (@now). */
static void watch(const loco_lock_t *lk, struct lk_watch *w, uint64_t v, int64_t now)
{
	if (v != w->val || now - w->last > lk_gap(lk)) {
		w->val = v;
		w->since = now;
	}
	w->last = now;
}

/*
 * ripe -- 1 when @w may take @v over at @now: seen unchanged for T, and
 * last seen at most lk_gap() ago (the watch may span calls: an old look
 * says nothing of the word now).
 */
static int ripe(const loco_lock_t *lk, const struct lk_watch *w, uint64_t v, int64_t now)
{
	return w->takeover && v == w->val && w->last - w->since >= lk->takeover_ns &&
	       now - w->last <= lk_gap(lk);
}

/* waited -- @w (HELD) as a waiter marks it: the same token and renewal counter */
static uint64_t waited(uint64_t w)
{
	return W_MAKE(W_TOKEN(w), W_RENEW(w), ST_WAITED);
}

/* lk_user_token -- the token the user sees: epoch << 44 | the word's. */
static uint64_t lk_user_token(const struct lk_host *hs, uint64_t word)
{
	return (uint64_t)hs->epoch << 44 | W_TOKEN(word);
}

/*
 * lk_post_time -- the time a grant's lease counts from, read before its
 * CAS is posted: the coarse clock where its lag is small against the lease
 * (create decides), else obj_now_ns(). The coarse clock is never ahead, so
 * a lease it starts ends early, never late. A fine read costs half of a
 * CAS and its ack on shm; acquire + release took four of them.
 */
static int64_t lk_post_time(const loco_lock_t *lk)
{
	return lk->coarse_lag_ns > 0 ? obj_coarse_ns() : obj_now_ns();
}

/*
 * lk_before -- whether it is still before @end (an obj_now_ns() time): the
 * coarse clock answers while @end is more than its lag away, the fine one
 * near it. (A coarse clock held back longer than its lag, by a stalled
 * tick, can let a grant that came a moment too late stand: its lease has
 * then ended, loco_lock_held() says so, as it does for a holder that was
 * descheduled just after acquire returned; and a release then misses the
 * -ETIMEDOUT it reports for a hold that outlived its lease.)
 */
static bool lk_before(const loco_lock_t *lk, int64_t end)
{
	if (lk->coarse_lag_ns > 0 && obj_coarse_ns() < end - lk->coarse_lag_ns)
		return true;
	return obj_now_ns() < end;
}

/*
 * grant -- our CAS to @word on @hs, posted at @t_post, succeeded: take the
 * hold, publish the owner word. 1 when held; 0 when the CAS completed too
 * late (the lease had already run out: given back, try again); or an
 * error, the lock given back as far as possible.
 */
static int grant(loco_lock_t *lk, struct lk_host *hs, uint64_t word, int64_t t_post, bool stolen)
{
	uint64_t old = 0;
	int ret;

	lk->seen = word;
	lk->watch.val = 0; /* ours now: a watch of the word before says nothing after */
	ret = lk_op(lk, hs, LK_WRITEO, O_MAKE(W_TOKEN(word), lk->me), 0, RES_OWNER, NULL, NULL, -1);
	if (ret == 0 && lk_before(lk, t_post + lk->lease_ns)) {
		/* the first grant of a host the lock moved to: what it guarded may be half-done */
		bool moved = hs->epoch > 0 && W_TOKEN(word) == 1;

		lk->cur = word;
		lk->hold_hs = hs;
		lk->renew_post = t_post;
		__atomic_store_n(&lk->token, lk_user_token(hs, word), __ATOMIC_RELAXED);
		__atomic_store_n(&lk->lease_end, t_post + lk->lease_ns, __ATOMIC_RELAXED);
		__atomic_store_n(&lk->recovered, stolen || moved, __ATOMIC_RELAXED);
		__atomic_store_n(&lk->hold_thr, lk_self(), __ATOMIC_RELAXED);
		__atomic_store_n(&lk->held, 1, __ATOMIC_RELEASE); /* after hold_thr: see acquire */
		return 1;
	}
	/* give it back: exactly our word (or it marked WAITED), never someone else's grant */
	if (lk_op(lk, hs, LK_CAS, word, W_MAKE(W_TOKEN(word), 0, ST_FREE), RES_OP, lk->ack, &old,
	          -1) == 0 &&
	    old == word)
		lk->seen = W_MAKE(W_TOKEN(word), 0, ST_FREE);
	else if (old == waited(word) &&
	         lk_op(lk, hs, LK_CAS, old, W_MAKE(W_TOKEN(word), 0, ST_PASSED), RES_OP, lk->ack,
	               &old, -1) == 0 &&
	         old == waited(word))
		lk->seen = W_MAKE(W_TOKEN(word), 0, ST_PASSED);
	return ret;
}

/*
 * attempt -- one CAS toward a grant on @hs: of *@expect when it is FREE,
 * or, when it has been HELD unchanged for T (@w), a takeover. *@t0: when
 * the acquire's first CAS came back busy (0 until then: this one sets it),
 * which a wait of WAIT_MARK_NS counts from; NULL for a try, which never
 * marks the word. 1 when taken,
 * 0 when not (*@expect updated to what the word holds), or an error.
 */
static int attempt(loco_lock_t *lk, struct lk_host *hs, uint64_t *expect, struct lk_watch *w,
                   int64_t *t0)
{
	for (int i = 0; i < 2; i++) {
		uint64_t old = 0, guess = *expect, want;
		bool steal = false;
		int64_t t_post, now;
		int ret;

		if (!W_FREE(guess)) {
			steal = ripe(lk, w, guess, obj_now_ns());
			if (!steal) /* poll: the free word the holder's release leaves */
				guess = W_MAKE(W_TOKEN(guess), 0, ST_FREE);
		} else if (guess == lk->passed && lk->passed_hs == hs) {
			/* we passed it on: the others first, for a while */
			int64_t t = obj_now_ns();

			if (lk->passed_seen == 0)
				lk->passed_seen = t;
			if (t - lk->passed_seen < PASS_GRACE_NS)
				return 0;
		}
		if (W_TOKEN(guess) >= TOKEN_MAX)
			return -EOVERFLOW; /* 2^44 grants: not in this universe's lifetime */
		want = W_MAKE(W_TOKEN(guess) + 1, 0, ST_HELD);
		t_post = lk_post_time(lk);
		ret = lk_op(lk, hs, LK_CAS, guess, want, RES_OP, lk->ack, &old, -1);
		if (ret)
			return ret;
		if (old == guess && lk_partitioned(lk)) {
			/*
			 * Partitioned by the time the CAS took the word: this node
			 * was stopped (or cut off) between the loop's partition check
			 * and its CAS, and the lock may have moved meanwhile (seen: a
			 * stopped host, resumed, took its own old word). Not ours to
			 * hold: give it back, sync before the next use.
			 */
			uint64_t o2 = 0;

			(void)lk_op(lk, hs, LK_CAS, want, W_MAKE(W_TOKEN(want), 0, ST_FREE), RES_OP,
			            lk->ack, &o2, -1);
			__atomic_store_n(&lk->need_sync, 2, __ATOMIC_RELEASE);
			return -LOCO_EPARTITION;
		}
		if (old == guess) {
			ret = grant(lk, hs, want, t_post, steal);
			if (ret != 0)
				return ret;
			old = lk->seen; /* too late: given back */
		}
		/* not granted: the watch and the mark need the fine clock (a grant reads none) */
		now = obj_now_ns();
		if (t0 != NULL && *t0 == 0)
			*t0 = now; /* the acquire's first CAS came back busy: it waits from here */
		*expect = old;
		lk->seen = old;
		if (!W_FREE(old)) {
			watch(lk, w, old, now);
			if (ripe(lk, w, old, now))
				continue; /* unchanged for T: take it over now */
			if (W_STATE(old) == ST_HELD && t0 != NULL && now - *t0 >= WAIT_MARK_NS) {
				uint64_t held = old;

				if (lk_op(lk, hs, LK_CAS, held, waited(held), RES_OP, lk->ack, &old,
				          -1) == 0 &&
				    old == held) {
					old = waited(held); /* its release passes it on */
					watch(lk, w, old, obj_now_ns());
				}
				*expect = lk->seen = old;
			}
			return 0; /* held by another node */
		}
	}
	return 0; /* it changed under us twice: count it as busy */
}

/*
 * try_host -- under the claim: one attempt on the current host (@w, @t0:
 * attempt()'s). 1 held, 0 busy (or the host may not be used yet), or an
 * error. -ECONNRESET from a host the lock has moved away from meanwhile
 * counts as busy.
 */
static int try_host(loco_lock_t *lk, struct lk_watch *w, int64_t *t0)
{
	struct lk_host *hs = lk_host_ready(lk);
	uint64_t expect;
	int ret;

	if (hs == NULL)
		return 0;
	if (w->hs != hs) { /* a watch is of one host's word */
		w->hs = hs;
		w->val = 0;
	}
	expect = lk->seen;
	ret = attempt(lk, hs, &expect, w, t0);
	if (ret == -ECONNRESET && lk_host_cur(lk) != hs)
		return 0;
	return ret;
}

int loco_lock_acquire(loco_lock_t *lk, int64_t timeout_ns)
{
	int64_t deadline = 0, delay = BACKOFF_MIN_NS, t0 = 0; /* deadline 0: not read yet */
	int64_t tmo = timeout_ns == 0 ? 1 : timeout_ns;       /* 0 would mean one try */
	int ret;

	OBJ_CHECK(lk);
	/*
	 * This thread's call took the hold: claim() would wait for a release
	 * that only this thread was going to make (until the timeout, or for
	 * ever). Another thread of the node still waits its turn. hold_thr is
	 * read after held (acquire): it is the tag of the hold held says.
	 */
	if (__atomic_load_n(&lk->held, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&lk->hold_thr, __ATOMIC_RELAXED) == lk_self())
		return -EDEADLK;
	/*
	 * The clock is read when the lock makes us wait (the claim, or a busy
	 * first attempt), not for one that is free: a read costs half of a CAS
	 * and its ack on shm. obj_deadline() never gives 0, one try's deadline.
	 */
	if (claim(lk, 0) != 0) {
		deadline = obj_deadline(tmo);
		ret = claim(lk, deadline);
		if (ret)
			return ret;
	}
	for (;;) {
		if (lk_partitioned(lk)) {
			/* it may be excluded: after the partition, ask the peers first */
			__atomic_store_n(&lk->need_sync, 2, __ATOMIC_RELEASE);
			lk->watch.val = 0; /* and watch afresh */
			ret = -LOCO_EPARTITION;
			break;
		}
		ret = try_host(lk, &lk->watch, &t0);
		if (ret == 1)
			return 0; /* the claim stays with the hold */
		if (ret < 0)
			break;
		if (deadline == 0)
			deadline = obj_deadline(tmo);
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
	struct lk_watch w = {.takeover = false}; /* a try's own: never the handle's */
	int ret;

	OBJ_CHECK(lk);
	ret = claim(lk, 0);
	if (ret)
		return ret;
	if (lk_partitioned(lk)) {
		__atomic_store_n(&lk->need_sync, 2, __ATOMIC_RELEASE); /* as in acquire */
		ret = -LOCO_EPARTITION;
	} else {
		ret = try_host(lk, &w, NULL);
	}
	if (ret == 1)
		return 0;
	unclaim(lk);
	return ret < 0 ? ret : -EBUSY;
}

/*
 * hold_unreached -- what renew and release return when their CAS on the
 * hold's host failed (@ret): -ECONNRESET, as for a lock that moved away,
 * whatever the fabric said (reset, not connected, host down, a timeout,
 * verbs' remote access error for a host that came back with new keys):
 * the host could not be reached, and the hold ends with its lease. Only a
 * partition and a finished manager keep their own codes.
 */
static int hold_unreached(int ret)
{
	return ret == -LOCO_EPARTITION || ret == -EBADF ? ret : -ECONNRESET;
}

int loco_lock_renew(loco_lock_t *lk)
{
	uint64_t old = 0, want;
	int64_t t_post;
	int ret;

	OBJ_CHECK(lk);
	pthread_mutex_lock(&lk->hold_lock);
	if (!__atomic_load_n(&lk->held, __ATOMIC_ACQUIRE)) {
		ret = -EPERM;
		goto out;
	}
	t_post = obj_now_ns();
	if (t_post >= __atomic_load_n(&lk->lease_end, __ATOMIC_RELAXED)) {
		ret = -ETIMEDOUT; /* expired: others may take it over; release it */
		goto out;
	}
	if (lk_partitioned(lk)) {
		ret = -LOCO_EPARTITION;
		goto out;
	}
	if (lk_host_cur(lk) != lk->hold_hs) {
		ret = -ECONNRESET; /* the lock moved: this hold ends with its lease */
		goto out;
	}
	if (t_post - lk->renew_post < lk->lease_ns / LK_RENEW_MAX) {
		ret = 0; /* renewed a moment ago: the counter must not wrap unseen */
		goto out;
	}
	want = W_MAKE(W_TOKEN(lk->cur), W_RENEW(lk->cur) + 1, W_STATE(lk->cur));
	ret = lk_op(lk, lk->hold_hs, LK_CAS, lk->cur, want, RES_OP, lk->ack, &old, -1);
	if (ret == 0 && old != lk->cur && old == waited(lk->cur)) {
		lk->cur = old; /* a waiter marked it meanwhile: renew the marked word */
		want = W_MAKE(W_TOKEN(old), W_RENEW(old) + 1, ST_WAITED);
		ret = lk_op(lk, lk->hold_hs, LK_CAS, lk->cur, want, RES_OP, lk->ack, &old, -1);
	}
	if (ret) {
		ret = hold_unreached(ret);
		goto out;
	}
	if (old != lk->cur) {
		/* taken over: only a clock that broke the drift bound gets here */
		__atomic_store_n(&lk->lease_end, 0, __ATOMIC_RELAXED);
		lk->seen = old;
		ret = -ESTALE;
		goto out;
	}
	lk->cur = want;
	lk->renew_post = t_post;
	__atomic_store_n(&lk->lease_end, t_post + lk->lease_ns, __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&lk->hold_lock);
	return ret;
}

int loco_lock_release(loco_lock_t *lk)
{
	uint64_t old = 0, freed;
	bool expired;
	int ret;

	OBJ_CHECK(lk);
	pthread_mutex_lock(&lk->hold_lock);
	/* the claim is ours while held: another thread of the node waits in claim() */
	if (!__atomic_exchange_n(&lk->held, 0, __ATOMIC_ACQ_REL)) {
		pthread_mutex_unlock(&lk->hold_lock);
		return -EPERM; /* one release per hold, whichever thread makes it */
	}
	expired = !lk_before(lk, __atomic_load_n(&lk->lease_end, __ATOMIC_RELAXED));
	freed = W_MAKE(W_TOKEN(lk->cur), 0, ST_FREE);
	if (lk_host_cur(lk) != lk->hold_hs) {
		ret = -ECONNRESET; /* the lock moved away from the host of this hold */
	} else {
		/* exactly our word: a release never frees the grant of a node that took over */
		if (W_STATE(lk->cur) == ST_WAITED)
			freed = W_MAKE(W_TOKEN(lk->cur), 0, ST_PASSED);
		ret = lk_op(lk, lk->hold_hs, LK_CAS, lk->cur, freed, RES_OP, lk->ack, &old, -1);
		if (ret == 0 && old != lk->cur && old == waited(lk->cur)) {
			/* a waiter marked it: pass it on */
			lk->cur = old;
			freed = W_MAKE(W_TOKEN(old), 0, ST_PASSED);
			ret = lk_op(lk, lk->hold_hs, LK_CAS, lk->cur, freed, RES_OP, lk->ack, &old,
			            -1);
		}
		if (ret == 0 && old == lk->cur && W_STATE(freed) == ST_PASSED) {
			lk->passed = freed;
			lk->passed_hs = lk->hold_hs;
			lk->passed_seen = 0;
		}
		if (ret == 0) {
			lk->seen = old == lk->cur ? freed : old;
			if (old != lk->cur)
				ret = -ESTALE; /* our lease expired and another node took it over */
			else if (expired)
				ret = -ETIMEDOUT; /* freed, but the hold had outlived its lease */
		} else {
			ret = hold_unreached(ret);
		}
	}
	__atomic_store_n(&lk->lease_end, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&lk->recovered, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&lk->hold_thr, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lk->hold_lock);
	unclaim(lk);
	return ret;
}

int loco_lock_held(const loco_lock_t *lk)
{
	return loco_handle_check(lk) == 0 && __atomic_load_n(&lk->held, __ATOMIC_ACQUIRE) &&
	       obj_now_ns() < __atomic_load_n(&lk->lease_end, __ATOMIC_RELAXED);
}

int64_t loco_lock_lease_left(const loco_lock_t *lk)
{
	int64_t left;

	if (loco_handle_check(lk) || !__atomic_load_n(&lk->held, __ATOMIC_ACQUIRE))
		return 0;
	left = __atomic_load_n(&lk->lease_end, __ATOMIC_RELAXED) - obj_now_ns();
	return left > 0 ? left : 0;
}

int loco_lock_token(const loco_lock_t *lk, uint64_t *token)
{
	OBJ_CHECK(lk);
	if (token == NULL)
		return -EINVAL;
	if (!__atomic_load_n(&lk->held, __ATOMIC_ACQUIRE))
		return -EPERM;
	*token = __atomic_load_n(&lk->token, __ATOMIC_RELAXED);
	return 0;
}

int loco_lock_recovered(const loco_lock_t *lk)
{
	return loco_handle_check(lk) == 0 && __atomic_load_n(&lk->held, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&lk->recovered, __ATOMIC_RELAXED);
}

int loco_lock_holder(loco_lock_t *lk, uint32_t *node, int64_t timeout_ns)
{
	/* an owner word that never comes (its holder died first) waits for no more than T */
	int64_t deadline = obj_deadline(timeout_ns),
	        owner_by = obj_deadline(lk != NULL ? lk->takeover_ns : 0);
	uint64_t v[2] = {0, 0};
	int ret;

	OBJ_CHECK(lk);
	if (node == NULL)
		return -EINVAL;
	pthread_mutex_lock(&lk->query_lock);
	for (;;) {
		struct lk_host *hs = lk_host_cur(lk);

		/* a READ that timed out earlier may still land in the slots: settle it first */
		if (lk_settle(lk, lk->qack, deadline) == -ETIMEDOUT) {
			ret = -ETIMEDOUT;
			break;
		}
		if (hs->not_before != 0 && obj_now_ns() < hs->not_before) {
			v[0] =
			    0; /* moved: free (nobody is granted it) until the new host is used */
			ret = 0;
			break;
		}
		ret = lk_op(lk, hs, LK_READ2, 0, 0, RES_HOLDER, lk->qack, v, obj_left_ns(deadline));
		if (ret)
			break;
		/* HELD, and the owner word is that grant's: or its holder has yet to write it */
		if (W_FREE(v[0]) || v[1] >> 32 == (uint32_t)W_TOKEN(v[0]))
			break;
		if ((deadline >= 0 && obj_now_ns() >= deadline) || obj_now_ns() >= owner_by) {
			ret = -EAGAIN;
			break;
		}
		/* the holder's owner word is a remote READ away: poll it every 100 us */
		nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
	}
	pthread_mutex_unlock(&lk->query_lock);
	if (ret == 0)
		*node = W_FREE(v[0]) ? 0 : (uint32_t)v[1];
	return ret;
}

void loco_lock_destroy(loco_lock_t *lk)
{
	OBJ_DESTROY_CHECK(lk);
	if (__atomic_load_n(&lk->held, __ATOMIC_ACQUIRE))
		loco_lock_release(lk); /* best effort: -ECONNRESET when the host is gone */
	loco_ack_key_destroy(lk->sack);
	loco_ack_key_destroy(lk->qack);
	loco_ack_key_destroy(lk->ack);
	loco_object_destroy(lk->obj); /* no callback runs after this */
	for (struct lk_host *h = lk->hs, *prev; h != NULL; h = prev) {
		prev = h->prev;
		host_path_fini(&h->hp);
		free(h);
	}
	pthread_mutex_destroy(&lk->move_lock);
	pthread_mutex_destroy(&lk->hold_lock);
	pthread_mutex_destroy(&lk->query_lock);
	loco_handle_free(lk);
}
