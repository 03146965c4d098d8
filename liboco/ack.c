/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack.c -- WRIDs and ack keys: lock-free bitmap sets of outstanding operations.
 *
 * The contract is in ack.h. In short: a key is LC_ACK_SLOTS bits; attach
 * claims a zero bit with a CAS, the completion path clears it with an
 * atomic AND (release), and a waiter sees the key idle when every word
 * reads 0 (acquire). The first error is kept with a CAS from 0 and handed
 * to the next waiter that finds the key idle (exchange with 0).
 *
 * Memory ordering, in pairs:
 *  - lc_ack_complete() records its error, then clears its bit with a
 *    release AND; lc_ack_idle() loads each word with acquire. A waiter
 *    that sees the bit clear therefore also sees the error (and whatever
 *    the operation wrote before its completion was reaped).
 *  - lc_ack_key_new() fills the key, then publishes it with a release store
 *    into keys[idx]; lc_ack_complete() loads keys[idx] with acquire, so it
 *    sees key->gen and key->bits initialised.
 *
 * Lifetime race, and why it is safe: lc_ack_key_free() clears keys[idx]
 * with a release store before freeing the key, so a completion that loads
 * keys[idx] after that store finds NULL (or, after reuse, a key with
 * another generation) and returns -ENOENT. What remains is a completion
 * that loaded the key pointer just before the store and then reads
 * key->gen and key->bits (and writes them) after free(). Such a completion
 * carries a wrid naming this key, and the fabric produces one only for an
 * operation attached to the key -- while the manager frees a key only once
 * it is idle: loco_ack_key_destroy() waits for every attached operation
 * (each completes within the fabric's dead-peer bound) before it calls
 * lc_ack_key_free(). So no completion can name a key being freed; only a
 * duplicated or forged wrid could, and that is a fabric bug. Completions
 * of other keys never look at this one. The generation check guards
 * against wrids that outlived their key that way once the free is done;
 * it compares 16 bits, so a stale wrid would have to survive 65536 reuses
 * of the same index to be mistaken for a live one.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "ack.h"
#include "clock.h"
#include "handle.h"
#include "wait.h"

#define ACK_WORDS      (LC_ACK_SLOTS / 64)
#define ACK_IDX_SHIFT  40
#define ACK_GEN_SHIFT  24
#define ACK_GEN_MASK   0xffffu
#define ACK_SLOT_MASK  0xffffffu
#define ACK_TYPE_SHIFT 56
#define ACK_CAS_TRIES  256u /* failed CASes on one word before moving on */
#define ACK_SPIN_CLOCK 64u  /* pauses between two clock reads while spinning */

_Static_assert(LC_ACK_SLOTS % 64 == 0, "LC_ACK_SLOTS must be a multiple of 64");
_Static_assert(ACK_WORDS <= 32, "a key's used words must fit its 32-bit mask");
_Static_assert(LC_ACK_SLOTS <= ACK_SLOT_MASK + 1u, "slots must fit the WRID slot field");
_Static_assert(LC_ACK_MAX_KEYS <= 0x10000u, "key indexes must fit the WRID key field");

/* ack_wrid -- the WRID of @slot in @key (layout in ack.h). */
static inline uint64_t ack_wrid(const loco_ack_key_t *key, uint32_t slot)
{
	return ((uint64_t)LC_WRID_ACK << ACK_TYPE_SHIFT) | ((uint64_t)key->idx << ACK_IDX_SHIFT) |
	       ((uint64_t)(key->gen & ACK_GEN_MASK) << ACK_GEN_SHIFT) | slot;
}

/*
 * ack_decode -- split @wrid into key index and slot; whether its type,
 * index (< @max_keys) and slot (< LC_ACK_SLOTS) are in range. *@gen gets
 * the 16-bit generation.
 */
static inline int ack_decode(uint64_t wrid, uint32_t max_keys, uint32_t *idx, uint32_t *gen,
                             uint32_t *slot)
{
	uint32_t i = (uint32_t)(wrid >> ACK_IDX_SHIFT) & 0xffffu;
	uint32_t s = (uint32_t)wrid & ACK_SLOT_MASK;

	if (lc_wrid_type(wrid) != LC_WRID_ACK || i >= max_keys || s >= LC_ACK_SLOTS)
		return 0;
	*idx = i;
	*gen = (uint32_t)(wrid >> ACK_GEN_SHIFT) & ACK_GEN_MASK;
	*slot = s;
	return 1;
}

/* ack_owns -- whether @wrid names a slot of @key (type, index and generation). */
static inline int ack_owns(const loco_ack_key_t *key, uint64_t wrid, uint32_t *slot)
{
	uint32_t idx, gen;

	if (!ack_decode(wrid, LC_ACK_MAX_KEYS, &idx, &gen, slot))
		return 0;
	return idx == key->idx && gen == (key->gen & ACK_GEN_MASK);
}

/* lc_ack_table_init -- room for @max_keys keys (1..LC_ACK_MAX_KEYS). */
int lc_ack_table_init(struct lc_ack_table *t, uint32_t max_keys)
{
	loco_ack_key_t **keys;
	uint32_t *gens;
	int ret;

	if (t == NULL || max_keys == 0 || max_keys > LC_ACK_MAX_KEYS)
		return -EINVAL;

	keys = calloc(max_keys, sizeof(*keys));
	if (keys == NULL)
		return -ENOMEM;
	gens = calloc(max_keys, sizeof(*gens));
	if (gens == NULL) {
		ret = -ENOMEM;
		goto err_free_keys;
	}
	t->fan = calloc(1, sizeof(*t->fan));
	if (t->fan == NULL) {
		ret = -ENOMEM;
		goto err_free_gens;
	}
	ret = -pthread_mutex_init(&t->lock, NULL);
	if (ret)
		goto err_free_fan;

	t->keys = keys;
	t->gens = gens;
	t->max_keys = max_keys;
	t->nkeys = 0;
	return 0;

err_free_fan:
	free(t->fan);
	t->fan = NULL;
err_free_gens:
	free(gens);
err_free_keys:
	free(keys);
	return ret;
}

void lc_ack_table_hooks(struct lc_ack_table *t, void (*progress)(void *arg), void *arg,
                        int (*in_view)(void *arg, uint32_t node), struct lc_wait *wait)
{
	t->progress = progress;
	t->progress_arg = arg;
	t->in_view = in_view;
	t->wait = wait;
}

/* lc_ack_table_fini -- free the table and the keys still in it. */
void lc_ack_table_fini(struct lc_ack_table *t)
{
	uint32_t i;

	if (t == NULL || t->keys == NULL)
		return;
	for (i = 0; i < t->max_keys; i++)
		lc_handle_bury(t->keys[i]); /* no completion may run any more */
	free(t->keys);
	free(t->gens);
	free(t->fan);
	t->fan = NULL;
	pthread_mutex_destroy(&t->lock);
	t->keys = NULL;
	t->gens = NULL;
	t->max_keys = 0;
	t->nkeys = 0;
}

/* lc_ack_key_new -- the lowest free index of @t, with its generation bumped. */
int lc_ack_key_new(struct lc_ack_table *t, loco_manager_t *manager, loco_ack_key_t **out)
{
	loco_ack_key_t *key;
	uint32_t i;
	int ret;

	if (t == NULL || out == NULL)
		return -EINVAL;

	pthread_mutex_lock(&t->lock);
	if (t->nkeys >= t->max_keys) {
		ret = -ENOSPC;
		goto err_unlock;
	}
	/* setup path: allocating under the lock is fine; a handle (handle.h) for misuse checks */
	key = lc_handle_alloc(manager, sizeof(*key));
	if (key == NULL) {
		ret = -ENOMEM;
		goto err_unlock;
	}
	for (i = 0; i < t->max_keys; i++) {
		/* the table lock orders writers; relaxed is enough here */
		if (__atomic_load_n(&t->keys[i], __ATOMIC_RELAXED) == NULL)
			break;
	}
	/* nkeys < max_keys, so there is a free index */
	key->table = t;
	key->manager = manager;
	key->idx = i;
	key->gen = ++t->gens[i];
	/* pairs with the acquire load of keys[idx] in lc_ack_complete() */
	__atomic_store_n(&t->keys[i], key, __ATOMIC_RELEASE);
	t->nkeys++;
	pthread_mutex_unlock(&t->lock);

	*out = key;
	return 0;

err_unlock:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/*
 * lc_ack_key_free -- unpublish @key, then free it. The caller makes sure
 * no completion for it is still in flight (see the comment at the top).
 */
void lc_ack_key_free(loco_ack_key_t *key)
{
	struct lc_ack_table *t;

	if (key == NULL)
		return;
	t = key->table;
	pthread_mutex_lock(&t->lock);
	/* pairs with the acquire load in lc_ack_complete(): later loads see NULL */
	__atomic_store_n(&t->keys[key->idx], NULL, __ATOMIC_RELEASE);
	t->nkeys--;
	pthread_mutex_unlock(&t->lock);
	lc_handle_bury(key);
}

/*
 * bitmap_claim -- claim a zero bit of @bits (@words words), starting at
 * the hint word. Each failed CAS means another thread changed the word
 * (lock-free); a word is given up after ACK_CAS_TRIES failures, so a pass
 * is bounded. Returns 0 and the bit's index in *@slot; -EAGAIN when full.
 */
static int bitmap_claim(uint64_t *bits, uint32_t words, uint32_t *hint, uint32_t *used,
                        uint32_t *slot)
{
	uint32_t start, n, w, tries, bit;
	uint64_t old, new;

	start = __atomic_load_n(hint, __ATOMIC_RELAXED) % words;
	for (n = 0; n < words; n++) {
		w = (start + n) % words;
		old = __atomic_load_n(&bits[w], __ATOMIC_RELAXED);
		for (tries = 0; tries < ACK_CAS_TRIES && ~old != 0; tries++) {
			bit = (uint32_t)__builtin_ctzll(~old);
			new = old | (1ull << bit);
			/*
			 * Acquire on success: the slot's previous completion
			 * (release AND) happens before its reuse. A failure
			 * reloads @old.
			 */
			if (__atomic_compare_exchange_n(&bits[w], &old, new, 0, __ATOMIC_ACQUIRE,
			                                __ATOMIC_RELAXED)) {
				if (~new == 0) /* word now full: start at the next one */
					__atomic_store_n(hint, (w + 1) % words, __ATOMIC_RELAXED);
				else if (w != start)
					__atomic_store_n(hint, w, __ATOMIC_RELAXED);
				/* a word the idle test reads from now on (before the slot is used) */
				if (used != NULL &&
				    !(__atomic_load_n(used, __ATOMIC_RELAXED) & (1u << w)))
					__atomic_fetch_or(used, 1u << w, __ATOMIC_RELEASE);
				*slot = w * 64 + bit;
				return 0;
			}
		}
	}
	return -EAGAIN;
}

/* lc_ack_attach -- claim a zero bit of @key. */
int lc_ack_attach(loco_ack_key_t *key, uint64_t *wrid)
{
	uint32_t slot;

	if (key == NULL || wrid == NULL)
		return -EINVAL;
	if (bitmap_claim(key->bits, ACK_WORDS, &key->hint, &key->used, &slot) != 0)
		return -EAGAIN;
	*wrid = ack_wrid(key, slot);
	return 0;
}

/* fan_release -- give fan slot @f back. */
static void fan_release(struct lc_ack_fan *fan, uint32_t f)
{
	/* pairs with the acquire CAS in bitmap_claim() */
	__atomic_fetch_and(&fan->bits[f / 64], ~(1ull << (f % 64)), __ATOMIC_RELEASE);
}

int lc_ack_attach_n(struct lc_ack_table *t, loco_ack_key_t *const *keys, unsigned n, uint64_t *wrid)
{
	uint64_t w[LC_ACK_FAN_MAX] = {0};
	loco_ack_key_t *one = NULL;
	unsigned count = 0, i;
	uint32_t f;
	int ret;

	if (t == NULL || wrid == NULL || n > LC_ACK_FAN_MAX || (n > 0 && keys == NULL) ||
	    lc_ack_keys_check(t, keys, n) != 0)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (keys[i] == NULL)
			continue;
		one = keys[i];
		count++;
	}
	if (count == 1)
		return lc_ack_attach(one, wrid); /* no fan slot needed */
	if (count == 0)
		return -EINVAL;
	if (bitmap_claim(t->fan->bits, LC_ACK_FAN_SLOTS / 64, &t->fan->hint, NULL, &f) != 0)
		return -EAGAIN;
	for (i = 0; i < n; i++) {
		if (keys[i] == NULL)
			continue;
		ret = lc_ack_attach(keys[i], &w[i]);
		if (ret) {
			while (i-- > 0)
				if (keys[i] != NULL)
					lc_ack_detach(keys[i], w[i]);
			fan_release(t->fan, f);
			return ret;
		}
	}
	for (i = 0; i < LC_ACK_FAN_MAX; i++)
		/* read by lc_ack_complete() after the completion (acquire there) */
		__atomic_store_n(&t->fan->wrid[f][i], w[i], __ATOMIC_RELEASE);
	*wrid = ((uint64_t)LC_WRID_FAN << ACK_TYPE_SHIFT) | f;
	return 0;
}

void lc_ack_detach_n(struct lc_ack_table *t, loco_ack_key_t *const *keys, unsigned n, uint64_t wrid)
{
	uint32_t f;

	if (lc_wrid_type(wrid) != LC_WRID_FAN) {
		for (unsigned i = 0; i < n; i++)
			if (keys[i] != NULL)
				lc_ack_detach(keys[i], wrid); /* only its owner matches */
		return;
	}
	f = (uint32_t)wrid & ACK_SLOT_MASK;
	if (f >= LC_ACK_FAN_SLOTS)
		return;
	for (unsigned i = 0; i < n && i < LC_ACK_FAN_MAX; i++)
		if (keys[i] != NULL)
			lc_ack_detach(keys[i],
			              __atomic_load_n(&t->fan->wrid[f][i], __ATOMIC_RELAXED));
	fan_release(t->fan, f);
}

/* lc_ack_detach -- clear the slot of a never-posted @wrid; wrids of other keys are ignored. */
void lc_ack_detach(loco_ack_key_t *key, uint64_t wrid)
{
	uint32_t slot;

	if (key == NULL || !ack_owns(key, wrid, &slot))
		return;
	/* pairs with the acquire loads in lc_ack_idle() */
	__atomic_fetch_and(&key->bits[slot / 64], ~(1ull << (slot % 64)), __ATOMIC_RELEASE);
}

/*
 * lc_ack_complete -- decode @wrid, find its live key, record @status if it
 * is the first error, clear the slot. Any @wrid value is safe: each field
 * is range-checked before use, and a slot whose bit is clear is not touched.
 */
/* fan_complete -- complete each operation of fan slot @f, then free the slot. */
static int fan_complete(struct lc_ack_table *t, uint64_t wrid, int status, uint32_t node)
{
	uint32_t f = (uint32_t)wrid & ACK_SLOT_MASK;
	uint64_t mask = 1ull << (f % 64);
	int ret = -ENOENT;

	if ((wrid & ~(uint64_t)ACK_SLOT_MASK) != ((uint64_t)LC_WRID_FAN << ACK_TYPE_SHIFT) ||
	    f >= LC_ACK_FAN_SLOTS ||
	    (__atomic_load_n(&t->fan->bits[f / 64], __ATOMIC_ACQUIRE) & mask) == 0)
		return -ENOENT;
	for (unsigned i = 0; i < LC_ACK_FAN_MAX; i++) {
		uint64_t w = __atomic_exchange_n(&t->fan->wrid[f][i], 0, __ATOMIC_ACQ_REL);

		if (w != 0 && lc_ack_complete_node(t, w, status, node) == 0)
			ret = 0;
	}
	fan_release(t->fan, f);
	return ret;
}

/* fail_lock / fail_unlock -- the key's failure lists (error path only; held for a copy). */
static void fail_lock(loco_ack_key_t *key)
{
	while (__atomic_exchange_n(&key->fail_lock, 1, __ATOMIC_ACQUIRE))
		lc_cpu_relax();
}

static void fail_unlock(loco_ack_key_t *key)
{
	__atomic_store_n(&key->fail_lock, 0, __ATOMIC_RELEASE);
}

/*
 * ack_err -- an operation's error as a key keeps it. A peer that stopped
 * answering fails it with -ETIMEDOUT in the fabric; the key says
 * -EHOSTDOWN, so that loco_ack_wait()'s -ETIMEDOUT only ever means
 * "operations still outstanding at the deadline" (a test loop on it took
 * a failed operation for one not done yet, and the next test found the
 * key empty and said 0: rpc pulls and pipe READs read as done).
 */
static int ack_err(int status)
{
	return status == -ETIMEDOUT ? -EHOSTDOWN : status;
}

/* fail_record -- append {@node, @status} to @key's pending failures, or count it dropped. */
static void fail_record(loco_ack_key_t *key, uint32_t node, int status)
{
	fail_lock(key);
	if (key->npend < LOCO_ACK_FAILURES_MAX) {
		key->pend[key->npend] = (struct loco_ack_failure){.node = node, .error = status};
		/* atomic: the waiter's fast path reads it without the lock */
		__atomic_store_n(&key->npend, key->npend + 1, __ATOMIC_RELAXED);
	} else
		key->pend_dropped++;
	fail_unlock(key);
}

int lc_ack_complete(struct lc_ack_table *t, uint64_t wrid, int status)
{
	return lc_ack_complete_node(t, wrid, status, 0);
}

int lc_ack_complete_node(struct lc_ack_table *t, uint64_t wrid, int status, uint32_t node)
{
	loco_ack_key_t *key;
	uint32_t idx, gen, slot;
	uint64_t mask, old;
	int zero = 0;

	if (t != NULL && t->fan != NULL && lc_wrid_type(wrid) == LC_WRID_FAN)
		return fan_complete(t, wrid, status, node);
	if (t == NULL || t->keys == NULL || !ack_decode(wrid, t->max_keys, &idx, &gen, &slot))
		return -ENOENT;

	/* pairs with the release store in lc_ack_key_new() */
	key = __atomic_load_n(&t->keys[idx], __ATOMIC_ACQUIRE);
	if (key == NULL || (key->gen & ACK_GEN_MASK) != gen)
		return -ENOENT;

	mask = 1ull << (slot % 64);
	/* a never-attached (or already completed) slot: no error, no change */
	if ((__atomic_load_n(&key->bits[slot / 64], __ATOMIC_RELAXED) & mask) == 0)
		return -ENOENT;

	if (status != 0) {
		status = ack_err(status);
		/* first error wins; made visible by the release AND below */
		__atomic_compare_exchange_n(&key->first_err, &zero, status, 0, __ATOMIC_RELAXED,
		                            __ATOMIC_RELAXED);
		fail_record(key, node, status);
	}

	/* pairs with the acquire loads in lc_ack_idle() and the CAS in lc_ack_attach() */
	old = __atomic_fetch_and(&key->bits[slot / 64], ~mask, __ATOMIC_RELEASE);
	/* only a duplicate completion racing with this one can find the bit gone */
	return (old & mask) ? 0 : -ENOENT;
}

int lc_ack_keys_check(const struct lc_ack_table *t, loco_ack_key_t *const *keys, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int ret = keys[i] != NULL ? lc_handle_ok(keys[i]) : 0; /* destroyed: -EBADF */

		if (ret)
			return ret;
		if (keys[i] != NULL && keys[i]->table != t)
			return -EINVAL;
	}
	return 0;
}

int lc_ack_keys_lazy(loco_ack_key_t *const *keys, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (keys[i] != NULL && (keys[i]->flags & LOCO_ACK_LAZY))
			return 1;
	return 0;
}

void lc_ack_fail_now(loco_ack_key_t *key, uint32_t node, int status)
{
	int zero = 0;

	if (key == NULL || status == 0)
		return;
	status = ack_err(status);
	fail_record(key, node, status);
	/* release, after the list: a waiter on another thread that takes the error sees it */
	__atomic_compare_exchange_n(&key->first_err, &zero, status, 0, __ATOMIC_RELEASE,
	                            __ATOMIC_RELAXED);
}

/*
 * lc_ack_idle -- every word 0, each loaded with acquire: the words a slot
 * was ever taken in (used), the others are 0. A slot the caller attached
 * (or saw attached) set its word's bit before it was used.
 */
int lc_ack_idle(const loco_ack_key_t *key)
{
	uint32_t used = __atomic_load_n(&key->used, __ATOMIC_ACQUIRE);

	for (; used != 0; used &= used - 1) {
		/* pairs with the release AND in lc_ack_complete() / lc_ack_detach() */
		if (__atomic_load_n(&key->bits[__builtin_ctz(used)], __ATOMIC_ACQUIRE) != 0)
			return 0;
	}
	return 1;
}

/* lc_ack_outstanding -- how many slots of @key are taken (a snapshot). */
size_t lc_ack_outstanding(const loco_ack_key_t *key)
{
	size_t n = 0;

	if (key == NULL)
		return 0;
	for (uint32_t used = __atomic_load_n(&key->used, __ATOMIC_ACQUIRE); used != 0;
	     used &= used - 1) {
		uint64_t b = __atomic_load_n(&key->bits[__builtin_ctz(used)], __ATOMIC_ACQUIRE);

		if (b != 0) /* most words are: a key rarely has more than a few slots taken */
			n += (size_t)__builtin_popcountll(b);
	}
	return n;
}

/*
 * ack_idle_result -- the key is idle: hand over and clear the first error,
 * move the pending failures to the reported list and mark those whose
 * peer is gone. With LOCO_ACK_IGNORE_LEFT the result is the first failure
 * to a peer still in the view (0 when there is none), unless failures were
 * dropped: those cannot be checked, so the first error stands.
 */
static int ack_idle_result(loco_ack_key_t *key)
{
	/*
	 * The error was written before the release AND that lc_ack_idle()
	 * observed. Taken with an exchange only when there is one: a locked
	 * instruction on every wait cost more than the test.
	 */
	int err = __atomic_load_n(&key->first_err, __ATOMIC_ACQUIRE);
	struct lc_ack_table *t = key->table;

	if (err != 0)
		err = __atomic_exchange_n(&key->first_err, 0, __ATOMIC_ACQ_REL);
	if (err == 0 && key->nlast == 0 && key->last_dropped == 0 &&
	    __atomic_load_n(&key->npend, __ATOMIC_RELAXED) == 0)
		return 0; /* the common case: nothing failed, nothing to forget */
	fail_lock(key);
	key->nlast = key->npend;
	key->last_dropped = key->pend_dropped;
	for (uint32_t i = 0; i < key->nlast; i++)
		key->last[i] = key->pend[i];
	__atomic_store_n(&key->npend, 0, __ATOMIC_RELAXED);
	key->pend_dropped = 0;
	fail_unlock(key);
	/* outside the spin lock: in_view() may take the manager's lock */
	for (uint32_t i = 0; i < key->nlast; i++)
		key->last[i].left = key->last[i].node != 0 && t->in_view != NULL &&
		                    !t->in_view(t->progress_arg, key->last[i].node);
	if (err == 0 || !(key->flags & LOCO_ACK_IGNORE_LEFT) || key->last_dropped > 0)
		return err;
	for (uint32_t i = 0; i < key->nlast; i++)
		if (!key->last[i].left)
			return key->last[i].error;
	return 0;
}

int lc_ack_failures(const loco_ack_key_t *key, struct loco_ack_failure *out, size_t max,
                    size_t *dropped)
{
	for (uint32_t i = 0; i < key->nlast && i < max; i++)
		out[i] = key->last[i];
	if (dropped != NULL)
		*dropped = key->last_dropped;
	return (int)key->nlast;
}

/*
 * lc_ack_wait -- reap and test, pausing by the wait policy between tests
 * (wait.h), until @key is idle or @timeout_ns passed (< 0: forever, 0:
 * test once).
 */
int lc_ack_wait(loco_ack_key_t *key, int64_t timeout_ns)
{
	int64_t deadline = 0;
	loco_waiter_t w;
	uint32_t i;

	if (key == NULL)
		return -EINVAL;
	if (lc_ack_idle(key))
		return ack_idle_result(key);
	if (timeout_ns == 0)
		return LC_ACK_BUSY;
	lc_waiter_init(&w, key->table->wait);
	/*
	 * Bounded by the deadline; with timeout_ns < 0 by the completions
	 * themselves (each attached operation completes within the fabric's
	 * dead-peer bound), as loco_ack_wait() documents.
	 */
	for (i = 1;; i++) {
		if (key->table->progress != NULL)
			key->table->progress(key->table->progress_arg);
		if (lc_ack_idle(key)) {
			loco_waiter_done(&w);
			return ack_idle_result(key);
		}
		if (timeout_ns > 0 && deadline == 0) {
			/* from the first test that found work in flight: no clock for a quick one */
			deadline = (int64_t)lc_now_ns();
			deadline =
			    timeout_ns > INT64_MAX - deadline ? INT64_MAX : deadline + timeout_ns;
		}
		if (timeout_ns > 0 &&
		    (i % ACK_SPIN_CLOCK == 0 || lc_waiter(&w)->sleep_ns > LC_WAIT_SLEEP_MIN_NS) &&
		    (int64_t)lc_now_ns() >= deadline)
			return LC_ACK_BUSY;
		loco_waiter_pause(&w);
	}
}
