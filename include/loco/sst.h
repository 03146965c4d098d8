/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/sst.h -- a shared state table (Derecho's SST): one row per member
 * of a channel, each row a fixed-size value written only by its member.
 *
 * Every node holds a copy of the whole table. A node stores its own row
 * locally and pushes it into the same row of its peers' copies with
 * one-sided WRITEs; everyone reads every row locally. Each row is encoded
 * as an owned_var value (one word, a sequence-checked line, or a
 * checksummed block, by size), so a read is validated and never torn.
 * Rows are indexed by node id: node n has row n, for ids 1 .. max_rows.
 * A row appears when its node pairs in the channel and vanishes when it
 * leaves or fails. See loco_sst(3).
 *
 * Predicates (loco_sst_predicate_add()) are tests of the table that the
 * progress thread evaluates on every turn of its loop, with a trigger it
 * calls when a test turns true.
 *
 * Direct pushes and fetches (loco_sst_set_direct(), loco_sst_fetch())
 * are for objects built on a table of one-word rows, as the barrier is.
 *
 * Thread safety: owner-only for loco_sst_store_mine(), the push calls,
 * loco_sst_set_direct() and loco_sst_fetch() (this node's own row and
 * fetch slots: one thread at a time); MT-safe for reads, the presence
 * queries, the accessors, loco_sst_fetch_result() and the predicate calls.
 */
#ifndef LOCO_SST_H
#define LOCO_SST_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>
#include <loco/owned_var.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_sst loco_sst_t;

#define LOCO_SST_MAX_ROWS 4096u /* the largest max_rows */

/*
 * loco_sst_create -- table @name in @ch with rows of @row_size bytes (1 ..
 * LOCO_OWNED_VAR_MAX_SIZE) for nodes 1 .. @max_rows (<= LOCO_SST_MAX_ROWS;
 * every node passes the same). This node's id must be at most @max_rows;
 * peers with larger ids get no row. Rows start as zeros. Create it before
 * loco_channel_join(). Returns 0 and sets *@out; -EINVAL, -ERANGE (this
 * node's id is above @max_rows), -EEXIST, -ENOSPC, -ENOMEM.
 */
int loco_sst_create(loco_channel_t *ch, const char *name, size_t row_size, uint32_t max_rows,
                    loco_sst_t **out);

/* loco_sst_destroy -- wait for its pushes in flight, then free it. NULL-safe. */
void loco_sst_destroy(loco_sst_t *sst);

/*
 * loco_sst_sync -- loco_object_sync() of the table: wait until every peer
 * paired in the channel holds it (needed before the first push of a table
 * made after loco_channel_join()). Every node agrees on @row_size and
 * @max_rows: a node that differs makes every node's calls of the table
 * return -LOCO_EMISMATCH. Returns the number of peers; -ETIMEDOUT,
 * -LOCO_ENOTJOINED, -LOCO_EMISMATCH, -LOCO_EPARTITION, -EINVAL.
 * Appeared in loco 0.4.
 */
int loco_sst_sync(loco_sst_t *sst, int64_t timeout_ns);

/* loco_sst_store_mine -- set our row to the @row_size bytes at @row, locally. 0, -EINVAL. */
int loco_sst_store_mine(loco_sst_t *sst, const void *row);

/*
 * loco_sst_push_to -- write this node's row as last stored into @node's
 * copy; with @ack, attached to it. Returns 0; -EINVAL (@node is this
 * node), -ENOENT (@node has no copy of the table, yet), -ENOTCONN, -EAGAIN.
 * loco_sst_push_broadcast -- the same to every node with a present row.
 * A node whose push fails with -ENOENT or -ENOTCONN (no copy yet, its
 * data link down) is skipped, and nothing of it reaches @ack: compare
 * the count returned with the other rows present to know that every node
 * was reached. Returns how many it was posted to, or the first other
 * error (the pushes posted before it stay attached to @ack).
 */
int loco_sst_push_to(loco_sst_t *sst, uint32_t node, loco_ack_key_t *ack);
int loco_sst_push_broadcast(loco_sst_t *sst, loco_ack_key_t *ack);

/*
 * loco_sst_read -- copy @node's row (this node's included) into the
 * @row_size bytes at @row, validated. Returns 0; -ENOENT (no such row
 * present), -LOCO_ETORN (it stayed unstable past the retry bound), -EINVAL.
 */
int loco_sst_read(loco_sst_t *sst, uint32_t node, void *row);

/*
 * loco_sst_row_tag -- a tag of @node's row as it is now, in one load, not
 * validated: it changes whenever a new version of the row lands or the row
 * vanishes and comes back (a row of 8 bytes or less is its own tag). Taken
 * before a loco_sst_read() of the row, a later equal tag says that read is
 * still the row's content: a reader that polls a row can skip reading it
 * again (the tag of a row being written may be the old one; the read then
 * returns the new one or waits for it). Returns 0; -ENOENT (no such row
 * present), -LOCO_EMISMATCH, -EINVAL.
 */
int loco_sst_row_tag(const loco_sst_t *sst, uint32_t node, uint64_t *tag);

/* loco_sst_row_present -- 1 when @node has a row now (this node always does), else 0. */
int loco_sst_row_present(const loco_sst_t *sst, uint32_t node);

/*
 * loco_sst_rows -- the ids of the nodes with a present row, this node
 * included, ascending: up to @max written to @ids. Returns the count.
 */
int loco_sst_rows(const loco_sst_t *sst, uint32_t *ids, size_t max);

/* loco_sst_row_size / _max_rows -- as created (0 for NULL). */
size_t loco_sst_row_size(const loco_sst_t *sst);
uint32_t loco_sst_max_rows(const loco_sst_t *sst);

/* loco_sst_stats -- this node's counters of the table (reads are its loads) into *@st. */
void loco_sst_stats(const loco_sst_t *sst, loco_value_stats_t *st);

/*
 * For tables of rows of at most 8 bytes: such a row is one aligned word,
 * which the fabric reads and writes whole.
 *
 * loco_sst_set_direct -- push this node's row with WRITEs that copy it
 * inline when posted: one WRITE per node, attached to the push's @ack
 * itself, with no slot of the staging ring to wait for. A push carries
 * the row as stored at the push call, in order with this node's WRITEs
 * posted before and after it (a row that shows a value was pushed after
 * whatever the node wrote before that push). Over a link that copies
 * fewer than 8 bytes inline (LOCO_MAX_INLINE below 8, or a verbs device
 * without inline data) a push goes through the ring, as without this
 * call. Call it before or after pushes. Returns 0; -EINVAL (NULL, rows
 * above 8 bytes).
 */
int loco_sst_set_direct(loco_sst_t *sst);

/*
 * loco_sst_fetch -- READ @node's own row at its source (@node's copy of its
 * own row, as @node last stored it; not this node's replica, which holds
 * what @node last pushed here) into this node's fetch slot for @node,
 * attached to @ack. Returns 0 when posted; -EINVAL (NULL @sst or @ack,
 * @node is this node or above max_rows, rows above 8 bytes), -ENOENT
 * (@node has no copy of the table, yet), -ENOTCONN, -EAGAIN.
 * loco_sst_fetch_result -- the row the last loco_sst_fetch() of @node
 * READ, into the @row_size bytes at @row: valid once that fetch completed
 * (loco_ack_wait() on its @ack returned with nothing outstanding); zeros
 * if its READ failed. Returns 0; -EINVAL, -ENODATA (that fetch was not
 * posted, or there was none).
 */
int loco_sst_fetch(loco_sst_t *sst, uint32_t node, loco_ack_key_t *ack);
int loco_sst_fetch_result(loco_sst_t *sst, uint32_t node, void *row);

/*
 * Predicates, as in Derecho. The progress thread of the table's manager
 * calls @test(sst, arg) on every turn of its loop, and at least every
 * LOCO_POLLER_PERIOD_NS (1 ms) while the predicate is armed (pushes from
 * peers give no event). @test looks at the table through the read calls
 * only (loco_sst_read(), loco_sst_rows(), loco_sst_row_present(), the
 * accessors) and returns nonzero for true. When a result is true and the
 * previous one was false (a predicate starts false), the progress thread
 * calls @trigger(sst, arg) at once, in the same turn:
 *   LOCO_SST_ONE_SHOT   the first time only; then the predicate is never
 *                       evaluated again (it stays until removed).
 *   LOCO_SST_RECURRING  on every false -> true edge it observes. Changes
 *                       faster than a turn may be missed: a test that goes
 *                       false and true again between two evaluations gives
 *                       no edge.
 * Test and trigger run on the progress thread, one call at a time for the
 * whole manager, and must not block: no loco_ack_wait(), no
 * loco_ack_key_destroy(), no channel join or destroy, no
 * loco_sst_destroy(). A trigger may read, add and remove predicates (its
 * own included) and post operations; it may store and push this node's
 * row only if no other thread does so meanwhile (those calls are
 * owner-only). While they run, this node reaps no completions and serves
 * no control message. See loco_sst(3).
 */
typedef struct loco_sst_predicate loco_sst_predicate_t;

enum loco_sst_predicate_mode {
	LOCO_SST_ONE_SHOT = 0,  /* trigger once, on the first true */
	LOCO_SST_RECURRING = 1, /* trigger on every false -> true edge */
};

/*
 * loco_sst_predicate_add -- arm predicate @test with @trigger and their
 * @arg on @sst, in @mode (enum loco_sst_predicate_mode). The trigger may
 * run before this returns, never before *@out is written (so that it may
 * remove its predicate through it). Returns 0 and sets *@out; -EINVAL,
 * -ENOMEM.
 */
int loco_sst_predicate_add(loco_sst_t *sst, int (*test)(loco_sst_t *sst, void *arg),
                           void (*trigger)(loco_sst_t *sst, void *arg), void *arg, unsigned mode,
                           loco_sst_predicate_t **out);

/*
 * loco_sst_predicate_remove -- disarm and free @pred. Once it returns,
 * neither its test nor its trigger runs or will run, except when called
 * from that very trigger, which then finishes its call. A
 * predicate fired in one-shot mode still needs it. loco_sst_destroy()
 * removes the predicates left. Returns 0; -EINVAL (NULL).
 */
int loco_sst_predicate_remove(loco_sst_predicate_t *pred);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_SST_H */
