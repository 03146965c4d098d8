/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/rpipe.h -- a one-way pipe between two nodes of a channel: the
 * writer places variable-size messages with one RDMA WRITE each into a
 * ring in the reader's registered memory, through its shadow of the
 * reader's ring; the reader finds them by a checksum written with them
 * (no SEND, no work by the reader's CPU on the writer's path) and hands
 * the consumed space back in batches (one WRITE of its position per
 * batch). Copying (write/read) and zero-copy (reserve/commit,
 * peek/release) interfaces. A pull pipe (LOCO_RPIPE_PULL) keeps the ring
 * in the writer's memory instead: the writer commits there, the reader
 * READs. See loco_rpipe(3).
 *
 * Both ends call loco_rpipe_create() with the same name, writer id,
 * reader id and ring size (and mode, loco_rpipe_create_cfg(): agreed when
 * the peers pair); another node of
 * the channel may not create it (-EINVAL).
 *
 * Thread safety: serialized per end (one thread at a time on the writer's
 * handle, one on the reader's: a writer thread and a reader thread, on
 * their two nodes, run at the same time). loco_rpipe_stats() is
 * serialized with the end's calls.
 */
#ifndef LOCO_RPIPE_H
#define LOCO_RPIPE_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_rpipe loco_rpipe_t;

#define LOCO_RPIPE_RING_MIN 1024u      /* bytes of the smallest ring */
#define LOCO_RPIPE_RING_MAX (1u << 30) /* bytes of the largest ring */
#define LOCO_RPIPE_OVERHEAD 24u /* ring bytes a message takes beyond its payload (+ pad to 8) */

#define LOCO_RPIPE_RETURN_DIV     4u /* default watermark: a quarter of the ring */
#define LOCO_RPIPE_RETURN_DIV_MAX 64u

/* Where a pipe's ring lives (loco_rpipe_cfg_t.mode). Appeared in loco 0.11. */
#define LOCO_RPIPE_PUSH 0u /* in the reader's memory: the writer WRITEs each message (default) */
#define LOCO_RPIPE_PULL 1u /* in the writer's memory: the reader READs what the writer committed */

/*
 * A pipe's configuration (loco_rpipe_create_cfg()). return_div is the
 * deferred synchronisation's watermark: the reader returns consumed space
 * to the writer (one WRITE of its position) once ring_bytes / return_div
 * bytes were consumed since the last return: 1 a full ring, 2 half, 4 a
 * quarter (the default), up to LOCO_RPIPE_RETURN_DIV_MAX. A writer short
 * of room asks for at least that much too. Fewer returns cost the reader
 * fewer WRITEs; more keep a writer that runs ahead less often blocked.
 * Each end uses its own value (give both the same). In a pull pipe it is
 * also how much the writer commits at most before it tells the reader its
 * position unasked.
 *
 * mode: LOCO_RPIPE_PUSH (0, so a zeroed configuration is a push pipe) or
 * LOCO_RPIPE_PULL: the writer builds messages in its own ring with no
 * remote operation per message, tells the reader its position when the
 * reader has run dry or a batch is ready (one 8-byte WRITE), and the
 * reader pulls whole ranges with READs into its copy. Both ends must
 * give the same mode (it is agreed with the ring size: -LOCO_EMISMATCH).
 */
typedef struct loco_rpipe_cfg {
	size_t ring_bytes;   /* a multiple of 64 in [LOCO_RPIPE_RING_MIN, LOCO_RPIPE_RING_MAX] */
	uint32_t return_div; /* 1 .. LOCO_RPIPE_RETURN_DIV_MAX (default 4) */
	uint32_t mode;       /* LOCO_RPIPE_PUSH (0, the default) or LOCO_RPIPE_PULL; since 0.11 */
} loco_rpipe_cfg_t;

/*
 * What one end did (loco_rpipe_stats()). In a pull pipe the writer's
 * returns count its WRITEs of its position to the reader, and asks those
 * it made while it waited for room.
 */
typedef struct loco_rpipe_stats {
	uint64_t msgs;    /* messages written (writer) or read (reader) */
	uint64_t bytes;   /* their payload bytes */
	uint64_t wraps;   /* times the position went back to the ring's start */
	uint64_t full;    /* writer: calls that found too little room and waited or gave up */
	uint64_t asks;    /* writer: WRITEs asking the reader to return space now */
	uint64_t returns; /* reader: WRITEs of its position to the writer (batches) */
	uint64_t empty;   /* reader: calls that found no message and waited or gave up */
	uint64_t torn;    /* reader: polls that met a message not fully landed (checksum) */
	uint64_t resets;  /* loco_rpipe_reset() calls that made the pipe usable again */
} loco_rpipe_stats_t;

/*
 * loco_rpipe_create -- pipe @name in @ch from node @writer to node @reader
 * with a ring of @ring_bytes (a multiple of 64 in [LOCO_RPIPE_RING_MIN,
 * LOCO_RPIPE_RING_MAX]), called on both ends. Returns 0 and sets *@out;
 * -EINVAL (bad argument; this node is neither end), -EEXIST, -ENOMEM,
 * -ENOSPC (a pipe takes 4 of the channel's announced entries, 16384 in
 * all), or the fabric's error.
 */
int loco_rpipe_create(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                      size_t ring_bytes, loco_rpipe_t **out);

/* loco_rpipe_cfg_default -- a 64 KiB ring, the default watermark, push. Appeared in loco 0.11. */
void loco_rpipe_cfg_default(loco_rpipe_cfg_t *cfg);

/*
 * loco_rpipe_create_cfg -- loco_rpipe_create() with @cfg (its ring,
 * watermark and mode). Returns as loco_rpipe_create(); -EINVAL also for a
 * return_div out of range or an unknown mode. Appeared in loco 0.11.
 */
int loco_rpipe_create_cfg(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                          const loco_rpipe_cfg_t *cfg, loco_rpipe_t **out);

/*
 * loco_rpipe_destroy -- free this end. The other end's waits then fail
 * once the channel drops this node, or when it dies. A pull writer first
 * waits, up to 5 s, until the reader took every message (they are in its
 * ring). NULL-safe.
 */
void loco_rpipe_destroy(loco_rpipe_t *p);

/*
 * loco_rpipe_sync -- wait until the other end made the pipe and paired
 * (the channel's other nodes do not matter). Not needed before the first
 * write: that waits for the reader too. Returns 0; -ETIMEDOUT,
 * -LOCO_ENOTJOINED, -LOCO_EMISMATCH, -LOCO_EPARTITION, -EINVAL.
 */
int loco_rpipe_sync(loco_rpipe_t *p, int64_t timeout_ns);

/* loco_rpipe_max_msg -- the largest payload one message may have (0 for NULL). */
size_t loco_rpipe_max_msg(const loco_rpipe_t *p);

/*
 * loco_rpipe_write -- writer: send @len bytes (0 < @len <= max_msg) of
 * @buf, waiting up to @timeout_ns for room (< 0: forever; 0: not at all).
 * Returns 0 once the message is posted (@buf may be reused); -EAGAIN
 * (timeout 0, no room), -ETIMEDOUT, -EMSGSIZE, -ECONNRESET (the reader
 * left or died, or a WRITE to it failed: for good), -EPERM (this node is
 * the reader), -EBUSY (a reservation is open), -LOCO_ENOTJOINED,
 * -LOCO_EMISMATCH, -LOCO_EPARTITION, -EINVAL.
 */
int loco_rpipe_write(loco_rpipe_t *p, const void *buf, size_t len, int64_t timeout_ns);

/*
 * loco_rpipe_reserve -- writer, zero-copy: room for a message of up to
 * @len bytes; *@ptr is where to build it (8-byte aligned registered
 * memory, the source of the WRITE that loco_rpipe_commit() posts).
 * Returns as loco_rpipe_write().
 */
int loco_rpipe_reserve(loco_rpipe_t *p, size_t len, void **ptr, int64_t timeout_ns);

/*
 * loco_rpipe_commit -- send the reserved message with its first @len
 * bytes (0 < @len <= the reserved length). Returns 0; -EINVAL (no
 * reservation, bad @len), -ECONNRESET (the reservation is dropped).
 */
int loco_rpipe_commit(loco_rpipe_t *p, size_t len);

/*
 * loco_rpipe_read -- reader: copy the next message into @buf (@cap bytes)
 * and consume it; its length into *@len. Waits as loco_rpipe_write().
 * Returns 0; -EAGAIN, -ETIMEDOUT, -EMSGSIZE (@cap is too small: the
 * message stays, loco_rpipe_peek() gives its length), -ECONNRESET (the
 * writer left or died and every message it sent was read; pull: every
 * one this end had copied), -EPERM (this node is the writer),
 * -LOCO_ENOTJOINED, -LOCO_EMISMATCH, -LOCO_EPARTITION, -EINVAL. Pull: a
 * call with @timeout_ns 0 may start the READ of a message the writer
 * committed and return -EAGAIN; a later call takes it.
 */
int loco_rpipe_read(loco_rpipe_t *p, void *buf, size_t cap, size_t *len, int64_t timeout_ns);

/*
 * loco_rpipe_peek -- reader, zero-copy: the next message in place in the
 * ring (*@ptr, 8-byte aligned, valid until loco_rpipe_release()), and its
 * length. Peeking again gives the same message. Returns as
 * loco_rpipe_read() (without -EMSGSIZE).
 */
int loco_rpipe_peek(loco_rpipe_t *p, const void **ptr, size_t *len, int64_t timeout_ns);

/*
 * loco_rpipe_release -- consume the message loco_rpipe_peek() gave.
 * Returns 0; -EINVAL (nothing peeked).
 */
int loco_rpipe_release(loco_rpipe_t *p);

/*
 * loco_rpipe_reset -- after -ECONNRESET: start the pipe again, empty,
 * with the other end's next incarnation (it was restarted with its id, or
 * excluded and taken back) or this node's (after this node's rejoin).
 * What this end had not sent or read is dropped; the next call waits for
 * the new pairing as the first one did (the old incarnation may still be
 * in the view: a WRITE to a dead reader fails before the view drops it),
 * and times out if neither end turns out to be new. Both ends reset.
 * Returns 0;
 * -EBUSY (the pipe is not lost), -EINVAL. Since loco 0.6.
 */
int loco_rpipe_reset(loco_rpipe_t *p);

/* loco_rpipe_stats -- this end's counters into *@st. */
void loco_rpipe_stats(const loco_rpipe_t *p, loco_rpipe_stats_t *st);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_RPIPE_H */
