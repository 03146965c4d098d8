/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/reduce.h -- an allreduce over the present members of a channel,
 * built on two shared state tables (loco/sst.h), one per round parity,
 * whose rows are tagged by round, and a third for results: one
 * loco_reduce_run() per round is enough.
 *
 * A round pushes this node's row of one table: its round number and
 * value. A node may run at most one round ahead of the slowest, so its
 * next round writes the other table and never overwrites a value a slow
 * node is still reading. With 3 or more members the rows go to a root
 * (the lowest id; for 8-byte values on shm, turning with the round),
 * which combines them and pushes the result to all; the
 * values of a round are combined in ascending node-id order, so all nodes
 * of a round with stable membership get bit-identical results and the
 * same contributor set. A member that
 * joins takes part from a later round (it learns the number from its
 * peers' rows); a member that leaves or dies is not waited for. See
 * loco_reduce(3).
 *
 * Thread safety: serialized (one thread at a time per reduce object);
 * loco_reduce_round() is MT-safe.
 */
#ifndef LOCO_REDUCE_H
#define LOCO_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_reduce loco_reduce_t;

#define LOCO_REDUCE_MAX_NODE 256u  /* node ids 1 .. this take part */
#define LOCO_REDUCE_MAX_SIZE 4096u /* bytes of the largest value */

/* The combining operation: element-wise over 8-byte elements, or a user function. */
enum loco_reduce_op {
	LOCO_REDUCE_SUM_U64 = 1,
	LOCO_REDUCE_SUM_I64, /* wraps around (two's complement) */
	LOCO_REDUCE_SUM_DOUBLE,
	LOCO_REDUCE_MIN_U64,
	LOCO_REDUCE_MIN_I64,
	LOCO_REDUCE_MIN_DOUBLE,
	LOCO_REDUCE_MAX_U64,
	LOCO_REDUCE_MAX_I64,
	LOCO_REDUCE_MAX_DOUBLE,
	LOCO_REDUCE_USER, /* the function given at create */
};

/*
 * loco_reduce_fn -- a user operation: fold the @size bytes at @in into
 * the @size bytes at @acc. Called in ascending node-id order of the
 * contributors, @acc starting as the lowest one's value; must not block.
 */
typedef void loco_reduce_fn(void *acc, const void *in, size_t size, void *arg);

/* What one round gave: its number and whose values it combined. */
struct loco_reduce_info {
	uint64_t round;                              /* the round's number (from 1) */
	uint32_t count;                              /* contributors, this node included */
	uint64_t members[LOCO_REDUCE_MAX_NODE / 64]; /* bit (id - 1): id contributed */
};

/* loco_reduce_contributed -- whether node @id contributed to the round @info describes. */
static inline int loco_reduce_contributed(const struct loco_reduce_info *info, uint32_t id)
{
	return id >= 1 && id <= LOCO_REDUCE_MAX_NODE &&
	       (info->members[(id - 1) / 64] >> ((id - 1) % 64) & 1u);
}

/*
 * loco_reduce_create -- reduce object @name in @ch over values of
 * @value_size bytes (1 .. LOCO_REDUCE_MAX_SIZE; a multiple of 8 for the
 * built-in ops, which work on arrays of 8-byte elements) combined with
 * @op (enum loco_reduce_op); @fn and @arg for LOCO_REDUCE_USER (@fn NULL
 * otherwise). Every node of the channel creates it with the same name,
 * size and op, before loco_channel_join(). Returns 0 and sets *@out;
 * -EINVAL, -ERANGE (this node's id is above LOCO_REDUCE_MAX_NODE),
 * -EEXIST, -ENOSPC, -ENOMEM.
 */
int loco_reduce_create(loco_channel_t *ch, const char *name, size_t value_size, int op,
                       loco_reduce_fn *fn, void *arg, loco_reduce_t **out);

/* loco_reduce_destroy -- wait for its pushes in flight, then free it. NULL-safe. */
void loco_reduce_destroy(loco_reduce_t *r);

/*
 * loco_reduce_run -- contribute the value at @in to the next round and
 * wait, up to @timeout_ns (< 0: no limit), until every present member
 * has contributed to it or is known not to take part in it; then write
 * the combination of the contributions into @out (may be @in) and, when
 * @info is not NULL, the round and its contributors. A node's first call
 * learns the round number from its peers' rows. Returns 0;
 * -ETIMEDOUT (the round stays entered with this @in: the next call goes
 * on waiting for it and ignores its own @in); -LOCO_EPARTITION (this
 * node cannot reach a majority of its view; the next call starts over as
 * a joiner); a push's error other than a peer's death (a round entered
 * stays entered, as after -ETIMEDOUT); -EINVAL.
 */
int loco_reduce_run(loco_reduce_t *r, const void *in, void *out, struct loco_reduce_info *info,
                    int64_t timeout_ns);

/* loco_reduce_round -- the round this node completed last (0: none yet). */
uint64_t loco_reduce_round(const loco_reduce_t *r);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_REDUCE_H */
