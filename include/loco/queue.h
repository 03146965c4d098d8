/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/queue.h -- a multi-producer, single-consumer queue (loco_queue(3)).
 *
 * One node of the channel, the owner, holds a ring of slots; every member
 * (the owner too) enqueues into it with remote atomics and one WRITE, and
 * only the owner dequeues, from its own memory. Items are byte strings of
 * up to cfg.item_max bytes, taken out whole, in the order their slots were
 * claimed. Every member creates the queue with the same name and
 * configuration (checked as peers pair: -LOCO_EMISMATCH otherwise).
 *
 * Per operation:
 *   loco_queue_enqueue  READ of the owner's tail word (only when the last
 *                       guess was taken), CAS of the slot's claim word,
 *                       one WRITE of the item (with its checksum and ready
 *                       word), and a CAS that moves the tail word on;
 *                       returns once the WRITE completed: the item is in
 *                       the owner's memory and a dequeue will find it.
 *   loco_queue_dequeue  owner only, no fabric operation: the next slot, if
 *                       its item landed whole (checksum), copied out.
 *
 * A half-written item is never returned: the consumer takes a slot only
 * when its ready word names the slot's ticket and its checksum holds. A
 * producer that dies between its claim and its WRITE leaves a claimed,
 * empty slot; the consumer skips it (counted in stats.skipped) once its
 * claimer is no peer of the channel any more, or once the same claimer has
 * claimed a later slot (a node enqueues one item at a time, so its later
 * claim means it gave the earlier one up).
 *
 * Thread safety: every call is MT-safe; a node's enqueues run one at a
 * time, and so do its dequeues.
 */
#ifndef LOCO_QUEUE_H
#define LOCO_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_queue loco_queue_t;

#define LOCO_QUEUE_CAPACITY_MAX (1u << 20) /* slots */
#define LOCO_QUEUE_ITEM_MAX     (1u << 20) /* bytes of one item */

typedef struct loco_queue_cfg {
	uint32_t owner;     /* the node that holds the slots and dequeues */
	uint32_t capacity;  /* slots, a power of two (default 1024) */
	uint32_t item_max;  /* bytes of the largest item (default 256) */
	int64_t timeout_ns; /* an enqueue's bound for its fabric operations (default 10 s) */
} loco_queue_cfg_t;

typedef struct loco_queue_stats {
	uint64_t enqueued; /* by this node */
	uint64_t dequeued; /* owner: items taken out */
	uint64_t full;     /* enqueues refused with -EAGAIN (queue full) */
	uint64_t retries;  /* claims lost to another producer */
	uint64_t skipped;  /* owner: slots given up by a dead or later-claiming producer */
} loco_queue_stats_t;

/* loco_queue_cfg_default -- the defaults, owned by @owner. */
void loco_queue_cfg_default(loco_queue_cfg_t *cfg, uint32_t owner);

/*
 * loco_queue_create -- queue @name in @ch as @cfg says. Call it before
 * loco_channel_join(), or call loco_queue_sync() after it before the first
 * enqueue. Returns 0 and *@out; -EINVAL (NULL, owner 0, capacity not a
 * power of two in 2..LOCO_QUEUE_CAPACITY_MAX, item_max 0 or above
 * LOCO_QUEUE_ITEM_MAX), -EEXIST, -ENOMEM, -ENOSPC.
 */
int loco_queue_create(loco_channel_t *ch, const char *name, const loco_queue_cfg_t *cfg,
                      loco_queue_t **out);

/* loco_queue_destroy -- NULL-safe. No call may run on @q meanwhile. */
void loco_queue_destroy(loco_queue_t *q);

/* loco_queue_sync -- loco_object_sync() of the queue's object. */
int loco_queue_sync(loco_queue_t *q, int64_t timeout_ns);

/*
 * loco_queue_enqueue -- append @len bytes of @item (0 < @len <= item_max).
 * Returns 0 once the item is in the owner's memory; -EAGAIN (full: every
 * slot holds an item the owner has not taken), -EMSGSIZE (@len too
 * large), -EINVAL, -ENOENT (the owner is not a peer now), -ETIMEDOUT,
 * -LOCO_ENOTJOINED, -LOCO_EMISMATCH, or a failed operation's error (the
 * claimed slot is then skipped by the owner, as a dead producer's is).
 */
int loco_queue_enqueue(loco_queue_t *q, const void *item, size_t len);

/*
 * loco_queue_dequeue -- owner: take the next item into @buf (@cap bytes)
 * and its length into *@len. Returns 0; -EAGAIN (empty, or the next slot's
 * item is still landing), -EMSGSIZE (@cap too small: *@len says how much
 * is needed, the item stays), -EPERM (not the owner), -EINVAL.
 */
int loco_queue_dequeue(loco_queue_t *q, void *buf, size_t cap, size_t *len);

/* loco_queue_stats -- this node's counters (a snapshot). */
void loco_queue_stats(const loco_queue_t *q, loco_queue_stats_t *st);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_QUEUE_H */
