/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe_impl.h -- objects/-private: the parts of the rpipe (rpipe.c: set-up
 * and the state both ends share, rpipe_write.c: the writer, rpipe_read.c:
 * the reader). A one-way pipe between two nodes: a ring in the reader's
 * memory that the writer fills with one RDMA WRITE per message, through
 * its shadow of the reader's ring (RDMA Managed Buffers' rpipe). Public
 * API only.
 *
 * Regions (both ends make both; the lengths are checked at pairing):
 *   "ring"  ring_bytes. The reader's copy is the ring (remotely
 *           writable). The writer's copy is its shadow: a message bound
 *           for ring offset X is built at offset X of the shadow and
 *           written from there, so the zero-copy writer builds in place
 *           and the shadow keeps every unconsumed message.
 *   "ctl"   128 bytes. Word 0 is written by the other end: on the writer
 *           the reader's position (bytes consumed, for ever growing), on
 *           the reader the position the writer waits for ("want").
 *           Words 8..15 are this end's sources of those WRITEs.
 *
 * A record, 8-byte aligned, never across the ring's end:
 *   u32 len, u32 tag (kind | seq << 8), u64 sum, payload (padded to 8),
 *   u64 trailer (= sum).
 * sum = obj_sum() of the payload under (seq, len, kind); seq counts
 * records from 0. A PAD record (header only) says "go back to the start";
 * fewer than 16 bytes left before the end are skipped without a record.
 * The reader takes a record once tag, trailer and sum all match: a WRITE
 * may land its 64-byte lines in any order (DESIGN §3), so a flag alone
 * could be seen before the payload; the checksum covers every byte, and
 * the seq in the seed rejects a former lap's record at the same place.
 * The trailer is a cheap first test (no hashing while the tail of a
 * message is still in flight on a fabric that lands lines in order).
 *
 * Flow: the writer knows free = ring - (tail - head) from the head the
 * reader last wrote into its ctl. The reader writes its head when a batch
 * (the watermark: ring / return_div, a quarter by default) was consumed
 * since the last time, or when the writer asked: a writer short of room
 * writes the head it needs, rounded up to a batch past the last head it
 * got (never past what it wrote), into the reader's ctl (once per wait),
 * and the reader returns space as soon as it has consumed that far (on
 * release, and while it waits for a message).
 * Space is never reused before the reader consumed it, which also proves
 * that the WRITE that used it (and its source) is done.
 *
 * Failure: peer_leave(other end) makes the pipe lost: the writer's calls
 * fail with -ECONNRESET; the reader reads what fully landed, then fails
 * with -ECONNRESET. One WRITE in SIGNAL_EVERY, one in flight at a time, is
 * signaled to an ack key: an error that is not a link's (-EACCES: the
 * reader's ring is gone) makes the writer's pipe lost too.
 *
 * A failed link between two ends that stay members (rpipe_mend.c): the
 * manager makes a new link, and the WRITEs that were in flight on the old
 * one may be lost, most without an error (they are unsignaled). The pipe
 * goes on. Push mode: the writer takes a link's errors (a failed or
 * refused post, a signaled WRITE's error) as "posted": every record it
 * wrote stays in its shadow, at its ring offset, until the reader
 * returns the space, and it stores its tail in its ctl word CTL_TAIL after
 * each record, as the pull writer does. The reader, when the link to the
 * writer changed (loco_rhandle_link()), READs the writer's CTL_TAIL, then
 * [head, tail) from the shadow into its ring at the same offsets (both
 * regions are readable by the reader): what landed is overwritten with
 * the same bytes, what was lost arrives; the records are checked as
 * always. Because the writer may still post on its old link for a moment
 * after the reader saw the new one, it READs again MEND_ROUNDS times, at
 * growing gaps. Ctl WRITEs are all signaled: a want or a head lost with a
 * link is written again (ctl_err). A reader that cannot READ the shadow
 * (an rpc caller that sent no reference to it) cannot mend: its pipe is
 * lost on a link error as before. Pull mode (rpipe_pull.c): a publish of
 * the writer lost with a link is made again at its next advance, and the
 * reader arms again (head, then a READ of the tail) at the same gaps.
 *
 * Sessions: every sum is seeded with the session too, a hash of the two
 * ends' incarnations (loco_manager_member_incarnation()), which each end works
 * out once it paired; a push reader also keeps the one of the writer's
 * pairing (peer_join), for when the writer left before the reader's
 * first call: it then reads what landed, and the pipe is lost.
 * loco_rpipe_reset() makes a lost pipe start again
 * from position 0 with a new session once the other end paired again as
 * a new incarnation, or this node did (a rejoin): records of the old
 * session still in the ring never match, and a session with the same
 * incarnations as the lost one is not taken (the call waits as for a
 * pairing), so the two ends never restart apart; a peer_leave between
 * the reset and the new session is the lost incarnation's (a WRITE to a
 * dead reader fails before the view drops it), not news. The reader's
 * returned position is cleared by the writer's reset; a stale "want" left
 * in the reader's ctl is harmless (it only makes the reader return space
 * early).
 *
 * Pull mode (LOCO_RPIPE_PULL; rpipe_pull.c has its protocol): the same
 * records and positions, but the writer's copy is the ring (remotely
 * readable) and the reader's is a copy it READs whole ranges into; the
 * reader's ctl word 0 is the writer's published tail instead of "want",
 * and the writer's ctl word CTL_TAIL (remotely readable) its committed
 * tail. The mode is agreed with the ring size (a mismatch is
 * -LOCO_EMISMATCH). Unlisted ends (the rpc's) are push pipes.
 */
#ifndef LOCO_OBJECTS_RPIPE_IMPL_H
#define LOCO_OBJECTS_RPIPE_IMPL_H

#include <stdint.h>

#include <loco.h>
#include <loco/rpipe.h>

#include "obj_hash.h"

#define SIGNAL_EVERY 32u /* writer: data WRITEs per signaled one */
#define CTL_LEN      128u
#define CTL_SRC      8u /* first source slot word */
#define CTL_SLOTS    8u
#define HDR          16u
#define TRL          8u
#define CTL_TAIL     1u /* writer: its committed tail, which the reader READs */
#define CTL_TSEEN    2u /* reader: where that READ lands */

enum {
	RD_NONE = 0, /* pull, reader: no READ in flight */
	RD_DATA = 1, /* a READ of ring bytes up to rd_to */
	RD_TAIL = 2, /* a READ of the writer's CTL_TAIL */
};

enum {
	KIND_MSG = 1,
	KIND_PAD = 2,
};

struct rec_hdr {
	uint32_t len;
	uint32_t tag;
	uint64_t sum;
};

struct loco_rpipe {
	loco_object_t *obj;
	loco_channel_t *ch;
	loco_manager_t *m;
	loco_region_t *ring;
	loco_region_t *ctl;
	loco_ack_key_t *dack; /* data WRITEs: one signaled at a time (errors) */
	loco_ack_key_t *cack; /* ctl WRITEs: every one (source slot reuse) */
	uint8_t *base;        /* local ring (reader) or shadow (writer) */
	XXH3_state_t *xs;     /* reader: hashing a long payload in pieces */
	uint64_t *ctlw;       /* local ctl words */
	uint64_t size;
	uint64_t mask;  /* size - 1 when size is a power of two, else 0 (rp_off()) */
	uint64_t batch; /* bytes a return gives back at least (size / return_div) */
	uint32_t writer, reader, me;
	int is_writer;
	int unlisted; /* an end inside another object (rpipe_open_unlisted()): no object of its own */
	int pull;     /* LOCO_RPIPE_PULL: the ring is the writer's, the reader READs it */
	int sig_pending;    /* writer: a signaled data WRITE was posted, its result not taken yet */
	int lost;           /* atomic: the other end left, or a WRITE failed: sticky */
	int have_peer;      /* the other end's regions were looked up */
	int have_sess;      /* sess is known (both ends paired) */
	int renewing;       /* atomic: reset, no new session yet (peer_leave ignored) */
	uint64_t sess;      /* the session: a hash of both ends' incarnations */
	uint64_t old_sess;  /* the session that was lost (reset refuses it) */
	uint64_t join_sess; /* atomic: push reader: the session of the writer's pairing, or 0 */
	loco_rhandle_t rring; /* writer: the reader's ring, bound to its link */
	loco_rhandle_t rctl;  /* the other end's ctl, bound to its link */
	uint64_t seq;         /* records written / read */
	uint64_t ctl_n;       /* ctl WRITEs posted */
	uint64_t ctl_idle_n;  /* ctl_n when none of them was outstanding (rp_mend_step()) */
	/* writer */
	uint64_t tail;   /* bytes placed (positions grow for ever) */
	uint64_t asked;  /* the last want written */
	size_t resv_off; /* reservation: ring offset of its record */
	size_t resv_len; /* reserved payload bytes (0: none) */
	/* reader */
	uint64_t head;      /* bytes consumed */
	uint64_t published; /* the head written to the writer last */
	size_t peek_rec;    /* bytes of the peeked record (0: none) */
	/* pull, writer */
	uint64_t pub; /* the tail written to the reader last */
	/* pull, reader */
	uint64_t pulled;  /* bytes of the writer's stream copied into the local ring */
	uint64_t t_seen;  /* the writer's tail as the last READ of its CTL_TAIL gave it */
	uint64_t rd_from; /* RD_DATA: the position its READ starts at */
	uint64_t rd_to;   /* and ends at */
	uint64_t arm_pos; /* the position an arm's head WRITE was posted at */
	uint64_t armed;   /* the position a tail READ was made at, + 1 (0: none) */
	int rd;           /* the READ in flight (RD_NONE, RD_DATA, RD_TAIL) */
	int arming;       /* the arm's head WRITE is posted, not yet known complete */
	int ctl_err;      /* a ctl WRITE failed: write the head (the want) again */
	/* push, reader: mending after a link change (rpipe_mend.c; rd, rd_from, rd_to as pull's) */
	int can_mend;       /* reader: push, the writer's shadow is known (rring); pull: paired */
	unsigned mend_left; /* READs of the writer's tail still to make after a link change */
	unsigned mend_tick; /* polls since the link was looked at */
	int64_t mend_at;    /* the next of those READs, not before */
	uint64_t lnk;       /* the link to the writer when last looked at (0: none) */
	uint64_t mend_to;   /* RD_DATA: the writer's tail that READ goes to */
	uint64_t mended;    /* bytes READ again */
	uint64_t mends;     /* atomic: link changes that started mending (logged) */
	loco_rpipe_stats_t st;
};

static inline int is_lost(const loco_rpipe_t *p)
{
	return __atomic_load_n(&p->lost, __ATOMIC_ACQUIRE);
}

/* rp_off -- where ring position @pos is in the ring: a mask, not a division, when it can be */
static inline size_t rp_off(const loco_rpipe_t *p, uint64_t pos)
{
	return (size_t)(p->mask ? pos & p->mask : pos % p->size);
}

static inline uint64_t r8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static inline uint32_t tag_of(int kind, uint64_t seq)
{
	return (uint32_t)kind | (uint32_t)(seq << 8);
}

static inline uint64_t seed_of(uint64_t sess, size_t len, uint64_t seq, int kind)
{
	return seq * 0x9E3779B97F4A7C15ull ^ ((uint64_t)len << 8 | (uint64_t)kind) ^ sess;
}

/* sum_of -- the sum of a record's payload in private memory (the writer's shadow; a PAD's none). */
static inline uint64_t sum_of(const loco_rpipe_t *p, const void *data, size_t len, uint64_t seq,
                              int kind)
{
	return obj_sum(data, len, seed_of(p->sess, len, seq, kind));
}

/*
 * Unlisted ends (objects/-private, for the rpc): a pipe end whose regions
 * are unlisted regions of another object @obj (named "@prefix.ring" and
 * "@prefix.ctl"), which no peer looks up: the two ends exchange their
 * references and a session themselves (object messages) and attach.
 * Until attached, and after rpipe_lose(), calls behave as for a pipe
 * whose other end has not paired yet, or left. loco_rpipe_reset() then
 * rpipe_attach() start it again with a new session; loco_rpipe_destroy()
 * leaves @obj (and its regions) to the caller.
 */
int rpipe_open_unlisted(loco_object_t *obj, const char *prefix, uint32_t writer, uint32_t reader,
                        size_t ring_bytes, loco_rpipe_t **out);

/* rpipe_refs -- this end's references: its ring (the reader's is the one written) and its ctl. */
void rpipe_refs(const loco_rpipe_t *p, loco_rref_t *ring, loco_rref_t *ctl);

/*
 * rpipe_attach -- the other end's references (@rring: its ring; for a
 * reader the writer's shadow, which it READs to mend the stream after a
 * link change: NULL, no mending) and the session @sess (not 0) both ends
 * use: the pipe works from now on. Returns 0; -EBUSY (attached already:
 * reset first).
 */
int rpipe_attach(loco_rpipe_t *p, const loco_rref_t *rring, const loco_rref_t *rctl, uint64_t sess);

/* rpipe_lose -- the other end is gone (the owner saw it leave): as a peer_leave. */
void rpipe_lose(loco_rpipe_t *p);

/* rp_peer -- look the other end's regions up once: 0, -ENOENT (not paired yet), or an error. */
int rp_peer(loco_rpipe_t *p);

/*
 * rp_sess -- the other end's regions and the session, once: 0, -ENOENT
 * (not paired yet, or with the lost session's incarnations still).
 */
int rp_sess(loco_rpipe_t *p);

/*
 * rp_ctl_reap -- take the ctl WRITEs done: one lost with a link sets
 * ctl_err (what it carried is written again). Returns 0, or, on a writer,
 * rp_lose() for an error that is not a link's.
 */
int rp_ctl_reap(loco_rpipe_t *p);
/* rp_lose -- the pipe is unusable from now on: -ECONNRESET. */
int rp_lose(loco_rpipe_t *p);

/* rp_check -- what every call looks at first: 0 or the error to return. */
int rp_check(loco_rpipe_t *p);

/* rp_ctl_put -- write @v into the other end's ctl word 0: 0, -EAGAIN (try later), or an error. */
int rp_ctl_put(loco_rpipe_t *p, uint64_t v);

/*
 * rp_link_err -- push: whether a post's or a completion's error @err only
 * says that the link to the other end failed (mended: rpipe_mend.c).
 */
int rp_link_err(const loco_rpipe_t *p, int err);

/* rp_mend_mark -- push, reader: the link to the writer as it is now (at a session's start). */
void rp_mend_mark(loco_rpipe_t *p);

/*
 * rp_mend_step -- push, reader, nothing to read: take a finished mending
 * READ, start the next; look at the link to the writer (each call when
 * @hungry, else every MEND_LOOK_EVERY calls) and start mending when it
 * changed.
 */
void rp_mend_step(loco_rpipe_t *p, int hungry);

/* rp_mend_reset -- push, reader: this end's part of loco_rpipe_reset(). */
void rp_mend_reset(loco_rpipe_t *p);

/* rp_pull_known -- pull, reader: the furthest writer's tail it knows of. */
static inline uint64_t rp_pull_known(const loco_rpipe_t *p)
{
	uint64_t pub = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE); /* the writer's ctl_put */

	return pub > p->t_seen ? pub : p->t_seen;
}

/*
 * rp_pull_step -- pull, reader: take a finished READ, start the next one
 * (what the writer committed beyond the copy); when @hungry (the copy is
 * consumed), tell the writer and READ its tail once per position.
 */
void rp_pull_step(loco_rpipe_t *p, int hungry);

/*
 * rp_pull_advance -- pull, writer: the tail moved to p->tail (a record or
 * pad sealed in the ring): store it, then tell the reader when it ran dry,
 * a batch is ready, or @force. 0, or -ECONNRESET (the pipe is lost).
 */
int rp_pull_advance(loco_rpipe_t *p, int force);

/* rp_pull_destroy -- pull: before an end's regions go (the reader takes the rest, READs end). */
void rp_pull_destroy(loco_rpipe_t *p);

/* rp_pull_reset -- pull: this end's part of loco_rpipe_reset(). */
void rp_pull_reset(loco_rpipe_t *p);

#endif /* LOCO_OBJECTS_RPIPE_IMPL_H */
