/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack.h -- the WRID space and ack-key sets inside liboco.
 *
 * A WRID names who waits for an operation:
 *
 *   bits 63..56  type   LC_WRID_ACK for ack-key operations; other values
 *                       are for liboco's own traffic (see lc_wrid_type())
 *   bits 55..40  key    index of the ack key in its table
 *   bits 39..24  gen    generation of that index (low 16 bits)
 *   bits 23..0   slot   position in the key's set
 *
 * An ack key is a fixed-capacity bitmap: attaching an operation claims a
 * free bit with a CAS (lock-free insert), its completion clears it with an
 * atomic AND (lock-free remove); the key is idle when every word is 0. The
 * first error is kept with a CAS from 0. A completion whose key index was
 * freed or reused (generation mismatch) is ignored.
 *
 * Failures: a failed completion also appends {node, error} to the key's
 * pending list (a fixed array; a tiny spin lock taken only on that error
 * path, never held across a call). The wait that finds the key idle moves
 * the pending list to the reported one (owned by the waiting thread, read
 * by loco_ack_failures()) and marks each entry whose node the table's
 * in_view() says is gone; with LOCO_ACK_IGNORE_LEFT only the others count.
 *
 * Thread safety: lc_ack_table_* setup calls take the table mutex;
 * lc_ack_attach() / lc_ack_complete() / waits are lock-free (but for the
 * failure path above) and MT-safe.
 */
#ifndef LOCO_LC_ACK_H
#define LOCO_LC_ACK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <loco/ack.h>

#define LC_WRID_ACK      1u
#define LC_WRID_FAN      2u                 /* an operation completing into several keys */
#define LC_ACK_FAN_MAX   2u                 /* keys one operation completes into */
#define LC_ACK_FAN_SLOTS 16384u             /* such operations outstanding in a table */
#define LC_ACK_SLOTS     LOCO_ACK_KEY_SLOTS /* operations one key can have outstanding */
#define LC_ACK_MAX_KEYS  65536u
/*
 * lc_ack_wait()'s "operations still outstanding at the deadline": no
 * errno, so that no operation's error can look like it. loco_ack_wait()
 * waits in slices and tells the two apart by it (once both were
 * -ETIMEDOUT, and a failed operation read as done).
 */
#define LC_ACK_BUSY 1

struct lc_ack_table;
struct lc_wait;

struct loco_ack_key {
	struct lc_ack_table *table;
	loco_manager_t *manager; /* may be NULL in unit tests */
	uint32_t idx;
	uint32_t gen;
	int first_err;                    /* atomic: 0 or the first error since the last wait */
	uint32_t hint;                    /* atomic: word to try first when attaching */
	uint64_t bits[LC_ACK_SLOTS / 64]; /* atomic: outstanding slots */
	/*
	 * atomic: bit w set once a slot of bits[w] was ever taken (never
	 * cleared): the words an idle test reads. A key rarely has more
	 * than 64 operations out, so that is one word, not all of them.
	 */
	uint32_t used;
	unsigned flags; /* LOCO_ACK_*, set at creation */
	/* failures since the last idle wait: fail_lock (atomic flag) guards them */
	int fail_lock;
	uint32_t npend; /* atomic reads allowed: entries in pend[] */
	size_t pend_dropped;
	struct loco_ack_failure pend[LOCO_ACK_FAILURES_MAX];
	/* the last idle wait's failures: the waiting thread's own */
	uint32_t nlast;
	size_t last_dropped;
	struct loco_ack_failure last[LOCO_ACK_FAILURES_MAX];
};

/*
 * Fan-out: an operation attached to several keys gets one WRID naming a
 * fan slot, which holds the WRID of the operation in each key. The slot
 * is claimed like a key's bit (lock-free) and released by the completion.
 */
struct lc_ack_fan {
	uint64_t bits[LC_ACK_FAN_SLOTS / 64];            /* atomic: slots in use */
	uint32_t hint;                                   /* atomic */
	uint64_t wrid[LC_ACK_FAN_SLOTS][LC_ACK_FAN_MAX]; /* atomic; 0: none */
};

struct lc_ack_table {
	pthread_mutex_t lock;
	struct lc_ack_fan *fan;
	loco_ack_key_t **keys; /* [max_keys]; read lock-free by lc_ack_complete() */
	uint32_t *gens;        /* [max_keys]: generation of each index */
	uint32_t max_keys;
	uint32_t nkeys;
	/*
	 * Optional: called by waiters between checks, to reap completions
	 * themselves instead of waiting for another thread to (the manager
	 * sets it; it must not block). Set before any key is created.
	 */
	void (*progress)(void *arg);
	void *progress_arg;
	/*
	 * Optional: whether @node is in the installed membership view (for
	 * LOCO_ACK_IGNORE_LEFT; may take the manager's lock: called only by a
	 * waiter, never on the completion path). NULL: every node is.
	 */
	int (*in_view)(void *arg, uint32_t node);
	/* Optional: the manager's wait policy and wake-ups (wait.h); NULL: defaults. */
	struct lc_wait *wait;
};

static inline unsigned lc_wrid_type(uint64_t wrid)
{
	return (unsigned)(wrid >> 56);
}

/* lc_ack_table_init -- room for @max_keys keys (1..LC_ACK_MAX_KEYS). 0, -EINVAL, -ENOMEM. */
int lc_ack_table_init(struct lc_ack_table *t, uint32_t max_keys);

/*
 * lc_ack_table_hooks -- the manager's optional hooks (see struct
 * lc_ack_table: progress, in_view, wait). Before any key is created.
 */
void lc_ack_table_hooks(struct lc_ack_table *t, void (*progress)(void *arg), void *arg,
                        int (*in_view)(void *arg, uint32_t node), struct lc_wait *wait);

/* lc_ack_table_fini -- free the table; keys still alive are freed too. */
void lc_ack_table_fini(struct lc_ack_table *t);

/* lc_ack_key_new -- a key in @t (manager may be NULL). 0 and *@out; -ENOMEM, -ENOSPC. */
int lc_ack_key_new(struct lc_ack_table *t, loco_manager_t *manager, loco_ack_key_t **out);

/* lc_ack_key_free -- remove @key from its table and free it (no wait). NULL-safe. */
void lc_ack_key_free(loco_ack_key_t *key);

/*
 * lc_ack_attach -- claim a slot in @key for one operation about to be
 * posted. Returns 0 and sets *@wrid; -EAGAIN when LC_ACK_SLOTS are taken.
 */
int lc_ack_attach(loco_ack_key_t *key, uint64_t *wrid);

/*
 * lc_ack_detach -- give back a slot whose operation was never posted
 * (the post failed): no error is recorded.
 */
void lc_ack_detach(loco_ack_key_t *key, uint64_t wrid);

/*
 * lc_ack_complete -- the completion path: operation @wrid finished with
 * @status (0 or -errno). Finds the key, records the first error, clears
 * the slot. Returns 0, or -ENOENT when the WRID names no live key/slot.
 */
int lc_ack_complete(struct lc_ack_table *t, uint64_t wrid, int status);

/* lc_ack_keys_check -- 0 when every non-NULL key of @keys[0 .. @n) is of @t; -EINVAL; -EBADF (destroyed). */
int lc_ack_keys_check(const struct lc_ack_table *t, loco_ack_key_t *const *keys, unsigned n);

/* lc_ack_keys_lazy -- whether one of @keys[0 .. @n) is LOCO_ACK_LAZY. */
int lc_ack_keys_lazy(loco_ack_key_t *const *keys, unsigned n);

/*
 * lc_ack_fail_now -- an operation to @node that was never attached to
 * @key (it executed at post time) failed with @status: recorded as a
 * failed completion would be (first error, failure list).
 */
void lc_ack_fail_now(loco_ack_key_t *key, uint32_t node, int status);

/* lc_ack_complete_node -- lc_ack_complete() of an operation to peer @node (0: unknown). */
int lc_ack_complete_node(struct lc_ack_table *t, uint64_t wrid, int status, uint32_t node);

/* lc_ack_failures -- loco_ack_failures() (@key not NULL). */
int lc_ack_failures(const loco_ack_key_t *key, struct loco_ack_failure *out, size_t max,
                    size_t *dropped);

/*
 * lc_ack_attach_n -- attach one operation to each of @keys[0 .. @n) (n <=
 * LC_ACK_FAN_MAX; NULL entries skipped); its completion completes it in
 * every one. Returns 0 and *@wrid; -EAGAIN (a key or the fan table
 * full; nothing attached), -EINVAL (keys of another table, n too large).
 */
int lc_ack_attach_n(struct lc_ack_table *t, loco_ack_key_t *const *keys, unsigned n,
                    uint64_t *wrid);

/* lc_ack_detach_n -- undo lc_ack_attach_n() for an operation never posted. */
void lc_ack_detach_n(struct lc_ack_table *t, loco_ack_key_t *const *keys, unsigned n,
                     uint64_t wrid);

/* lc_ack_idle -- whether @key has no outstanding operation. */
int lc_ack_idle(const loco_ack_key_t *key);

/* lc_ack_outstanding -- how many operations attached to @key have not completed (a snapshot). */
size_t lc_ack_outstanding(const loco_ack_key_t *key);

/*
 * lc_ack_wait -- the body of loco_ack_wait(): pause by the wait policy
 * (wait.h) until idle or @timeout_ns (< 0: forever). Returns as
 * loco_ack_wait(), except LC_ACK_BUSY where that returns -ETIMEDOUT.
 */
int lc_ack_wait(loco_ack_key_t *key, int64_t timeout_ns);

#endif /* LOCO_LC_ACK_H */
