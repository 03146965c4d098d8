/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/barrier.h -- a barrier among the nodes of a channel, as in LOCO: a
 * counter per node in a shared state table (loco/sst.h).
 *
 * To wait, a node increments its counter (the episode it enters), pushes
 * it to every peer, waits until every row that was present when it
 * entered shows that episode or a later one (rows that vanish meanwhile
 * are ignored), then waits for its own pushes' acks. A member that leaves
 * or fails never blocks the others; a member that joins takes part from
 * the episode the others are in. See loco_barrier(3).
 *
 * Thread safety: serialized (one thread at a time per barrier).
 */
#ifndef LOCO_BARRIER_H
#define LOCO_BARRIER_H

#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_barrier loco_barrier_t;

#define LOCO_BARRIER_MAX_NODE 256u /* node ids 1 .. this take part */

/*
 * loco_barrier_create -- barrier @name in @ch. Every node of the channel
 * creates it, before loco_channel_join(). Returns 0 and sets *@out;
 * -EINVAL, -ERANGE (this node's id is above LOCO_BARRIER_MAX_NODE),
 * -EEXIST, -ENOSPC, -ENOMEM.
 */
int loco_barrier_create(loco_channel_t *ch, const char *name, loco_barrier_t **out);

/* loco_barrier_destroy -- wait for its pushes in flight, then free it. NULL-safe. */
void loco_barrier_destroy(loco_barrier_t *b);

/*
 * loco_barrier_wait -- enter the next episode and wait until every node
 * present at entry has entered it too, up to @timeout_ns (< 0: no limit).
 * Returns 0; -ETIMEDOUT (the episode stays entered: the next call goes on
 * waiting for it); a push's error other than a peer's death; -EINVAL.
 */
int loco_barrier_wait(loco_barrier_t *b, int64_t timeout_ns);

/* loco_barrier_episode -- the episode this node entered last (0: none yet). */
uint64_t loco_barrier_episode(const loco_barrier_t *b);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_BARRIER_H */
