/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * value.h -- objects/-private: a single-writer value as owned_var and the
 * sst rows keep it. The encoding by size (DESIGN §5), the validated load
 * with bounded retries, and the owner's staging ring from which pushes
 * are written. Built on the public API only; not installed.
 *
 * Encodings (enc_len bytes, 8-byte aligned in registered memory):
 *   WORD  size <= 8:  one aligned 8-byte word, zero-padded.
 *   LINE  size <= 56: one 64-byte line [seq_before:4][data:size][pad][seq_after:4],
 *                     seq_after in the line's last 4 bytes.
 *   HASH  larger:     [seq:8][hash:8][data:size, zero-padded to 8], hash =
 *                     obj_sum(data, size, seq); seq 0 = never stored.
 * A line or value that is all zeros decodes as zeros: the value before the
 * first store.
 *
 * Thread safety: value_load() is MT-safe (a HASH value larger than
 * VALUE_STACK_MAX takes turns on one scratch buffer); value_encode() and
 * the value_stage_* calls are owner-only: one writer thread per value.
 */
#ifndef LOCO_OBJECTS_VALUE_H
#define LOCO_OBJECTS_VALUE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <loco.h>
#include <loco/owned_var.h>

#define VALUE_WORD_MAX    8u
#define VALUE_LINE_MAX    56u
#define VALUE_HASH_HDR    16u
#define VALUE_STACK_MAX   4096u      /* HASH values up to this size validate in a stack buffer */
#define VALUE_STAGE_SLOTS 8u         /* pushes of distinct versions in flight at once */
#define VALUE_MAX_PEERS   1024u      /* peers one broadcast reaches */
#define VALUE_TORN_NS     50000000ll /* a load gives up after 50 ms of unstable reads */

/* The public bounds, defined once in the public headers. */
#define VALUE_MAX_SIZE LOCO_OWNED_VAR_MAX_SIZE /* 1 GiB: an encoding fits one fabric operation */
#define VALUE_KEY_ROOM LOCO_ACK_KEY_SLOTS      /* operations one ack key holds (loco_ack(3)) */

enum value_kind {
	VALUE_WORD = 1,
	VALUE_LINE,
	VALUE_HASH,
};

struct value_codec {
	size_t size;    /* the user's bytes */
	size_t enc_len; /* encoded bytes */
	size_t stride;  /* slot size in a table or ring: 8 (WORD), else enc_len rounded up to 64 */
	int kind;       /* enum value_kind */
};

/* Counters of one object; every field is updated with relaxed atomics. */
struct value_counters {
	uint64_t loads;
	uint64_t retries;
	uint64_t torn;
	uint64_t pushes;
	uint64_t push_errors;
};

/* A scratch buffer for HASH values above VALUE_STACK_MAX: one loader at a time. */
struct value_scratch {
	void *buf;         /* enc_len bytes, or NULL when the stack is enough */
	int busy;          /* atomic */
	loco_manager_t *m; /* whose wait policy (LOCO_WAIT) loads back off by; NULL: sleep */
};

/*
 * The owner's staging ring. A push copies
 * the master encoding into a slot and writes from there, so the source of
 * a WRITE never changes while it is in flight (the tcp NIC thread and a
 * real NIC read it asynchronously). Each slot has an ack key of its own
 * that tracks its WRITEs; a slot is rewritten only when that key is idle.
 */
struct value_stage {
	const struct value_codec *c;
	loco_region_t *ring;
	loco_ack_key_t *keys[VALUE_STAGE_SLOTS];
	uint64_t ver[VALUE_STAGE_SLOTS]; /* version each slot holds; UINT64_MAX: none */
	unsigned cur;                    /* the slot holding the latest version */
};

/* value_codec_init -- the encoding of a @size-byte value. 0; -EINVAL (0, above VALUE_MAX_SIZE). */
int value_codec_init(struct value_codec *c, size_t size);

/* value_scratch_init / _fini -- the big scratch buffer when @c needs one. 0; -ENOMEM. */
int value_scratch_init(struct value_scratch *s, const struct value_codec *c);
void value_scratch_fini(struct value_scratch *s);

/*
 * value_encode -- store @val as version @seq (>= 1) into the master
 * encoding at @enc, so that local readers on other threads validate it as
 * remote ones do: a WORD with one release store; a LINE word by word in
 * ascending order with release stores; a HASH's data with one copy (the
 * hash validates any mix), then its hash, then its sequence (release).
 */
void value_encode(const struct value_codec *c, void *enc, const void *val, uint64_t seq);

/*
 * value_load -- decode the encoding at @enc (a replica the fabric writes,
 * or the master) into @val, retrying while it is unstable: spinning, then
 * pausing by @big->m's wait policy (loco_waiter_pause()), for at most
 * VALUE_TORN_NS.
 * Returns 0; -LOCO_ETORN (@val is then untouched).
 */
int value_load(const struct value_codec *c, const void *enc, void *val, struct value_scratch *big,
               struct value_counters *ctr);

/*
 * value_tag -- what stands for the version at @enc, without validating:
 * the sequence of a LINE (32 bits) or HASH (the low 48 bits) value, the
 * word itself for a WORD. Every write of a new version changes it; a
 * value_load() of the same bytes after it returns that version or a later
 * one (the sequence word a LINE lands last is read first; a HASH validates
 * its sequence with the data).
 */
uint64_t value_tag(const struct value_codec *c, const void *enc);

/* value_clear -- zero the encoding at @enc with atomic word stores (any thread). */
void value_clear(const struct value_codec *c, void *enc);

/* value_stats -- a snapshot of @ctr. */
void value_stats(const struct value_counters *ctr, loco_value_stats_t *out);

/*
 * value_stage_init -- the ring (region "stage" of @obj, local access only)
 * and its ack keys. Returns 0; the errors of loco_region_create() and
 * loco_ack_key_create(). value_stage_fini waits for the slots' operations
 * (the ack keys' destroy does) and frees the keys; the region goes with
 * the object.
 */
int value_stage_init(struct value_stage *s, const struct value_codec *c, loco_object_t *obj,
                     loco_manager_t *m);
void value_stage_fini(struct value_stage *s);

/*
 * value_stage_prepare -- a slot holding version @ver of the master
 * encoding @master, with room for @need more operations on its key:
 * the current slot when it holds @ver already, else an idle slot (waiting
 * for the oldest one when none is idle) that gets a fresh copy.
 * Returns 0 and sets *@slot; the error of waiting for a slot.
 */
int value_stage_prepare(struct value_stage *s, const void *master, uint64_t ver, unsigned need,
                        struct value_counters *ctr, unsigned *slot);

/*
 * value_stage_post -- write @slot to [@roff, @roff + enc_len) of @rr with
 * one WRITE whose completion reaches both the slot's key and @ack (when
 * not NULL; loco_write_acks()). Returns 0 when posted; the error of
 * loco_write_acks() (nothing was posted).
 */
int value_stage_post(struct value_stage *s, unsigned slot, const loco_rref_t *rr, size_t roff,
                     loco_ack_key_t *ack);

/*
 * value_push -- push the copy in @slot of @s (value_stage_prepare()) to
 * [@roff, @roff + enc_len) of @rr. Counts the push. Returns as
 * value_stage_post().
 */
int value_push(struct value_stage *s, unsigned slot, const loco_rref_t *rr, size_t roff,
               loco_ack_key_t *ack, struct value_counters *ctr);

/*
 * value_push_inline -- push the master encoding (at @moff of
 * @mreg) straight from the master, copied when the call returns
 * (loco_write_inline()): the owner may store again at once, no staging
 * slot is taken. Counts the push. Returns as loco_write_inline():
 * -EMSGSIZE when the link's fabric copies less (push through the ring).
 */
int value_push_inline(const struct value_codec *c, loco_region_t *mreg, size_t moff,
                      const loco_rref_t *rr, size_t roff, loco_ack_key_t *ack,
                      struct value_counters *ctr);

/* the largest encoding every tcp and shm link copies at post (loco_write_inline(3)) */
#define VALUE_INLINE_MAX 256u

/*
 * value_inline_refused_for_good -- after value_push_inline() said
 * -EMSGSIZE: whether to push @c through the staging ring from now on (an
 * encoding every tcp and shm link copies: this link copies less, as a
 * verbs device may), or only this time (a larger one, which shm takes
 * only when it runs at post, and tcp and verbs never).
 */
static inline int value_inline_refused_for_good(const struct value_codec *c)
{
	return c->enc_len <= VALUE_INLINE_MAX;
}

/* value_skip_peer -- whether a push error only means the peer is not (or no longer) there. */
static inline int value_skip_peer(int err)
{
	return err == -ENOENT || err == -ENOTCONN;
}

#endif /* LOCO_OBJECTS_VALUE_H */
