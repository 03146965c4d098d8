/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * value.c -- the single-writer value shared by owned_var and sst: the
 * encoding by size, the validated load, and the owner's staging ring.
 * See value.h for the layouts. Public API only.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_hash.h"
#include "obj_util.h"
#include "value.h"

#define SPIN_TRIES 16u /* attempts that only spin before a load pauses by the wait policy */

static inline void count(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

/*
 * count_owner -- count(), for the counters only the owner's pushes move
 * (one thread at a time): a load and a store, not a locked add, which
 * took a tenth of an 8-byte push on shm. Readers still load it whole.
 */
static inline void count_owner(uint64_t *ctr, uint64_t n)
{
	__atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

int value_codec_init(struct value_codec *c, size_t size)
{
	if (size == 0 || size > VALUE_MAX_SIZE)
		return -EINVAL;
	c->size = size;
	if (size <= VALUE_WORD_MAX) {
		c->kind = VALUE_WORD;
		c->enc_len = 8;
		c->stride = 8;
	} else if (size <= VALUE_LINE_MAX) {
		c->kind = VALUE_LINE;
		c->enc_len = 64;
		c->stride = 64;
	} else {
		c->kind = VALUE_HASH;
		c->enc_len = VALUE_HASH_HDR + ((size + 7) & ~(size_t)7);
		c->stride = (c->enc_len + 63) & ~(size_t)63;
	}
	return 0;
}

int value_scratch_init(struct value_scratch *s, const struct value_codec *c)
{
	s->busy = 0;
	s->m = NULL; /* the owner sets it after init */
	s->buf = NULL;
	if (c->kind != VALUE_HASH || c->enc_len <= VALUE_HASH_HDR + VALUE_STACK_MAX)
		return 0;
	s->buf = aligned_alloc(64, (c->enc_len + 63) & ~(size_t)63);
	return s->buf != NULL ? 0 : -ENOMEM;
}

void value_scratch_fini(struct value_scratch *s)
{
	free(s->buf);
	s->buf = NULL;
}

/* ------------------------------------------------------------------ */
/* encoding (the owner)                                               */

/* value_encode -- version @seq of @val into the master at @enc (see value.h). */
void value_encode(const struct value_codec *c, void *enc, const void *val, uint64_t seq)
{
	uint64_t *dst = enc;

	switch (c->kind) {
	case VALUE_WORD: {
		uint64_t w = 0;

		memcpy(&w, val, c->size);
		/* pairs with the acquire load in word_try() of a local reader */
		__atomic_store_n(dst, w, __ATOMIC_RELEASE);
		return;
	}
	case VALUE_LINE: {
		uint64_t line[8] = {0};
		uint32_t s = (uint32_t)seq;

		memcpy(line, &s, 4);
		memcpy((uint8_t *)line + 4, val, c->size);
		memcpy((uint8_t *)line + 60, &s, 4);
		/*
		 * Ascending, each a release store: the order in which a WRITE
		 * lands within a line, so a local reader on another thread
		 * validates the master exactly as a remote one validates its
		 * replica (the argument is at line_try()).
		 */
		for (int i = 0; i < 8; i++)
			__atomic_store_n(&dst[i], line[i], __ATOMIC_RELEASE);
		return;
	}
	default: {
		size_t full = c->size & ~(size_t)7;
		uint64_t h = obj_sum(val, c->size, seq), w = 0;

		/*
		 * The data with one memcpy, not word by word: the hash validates
		 * any mix, whatever order and width the copy stores in, and a
		 * reader that sees this sequence sees the data before it (the
		 * release below). Word by word, a 4 KiB store took 0.51 us against
		 * 0.03 for the copy (a load, a spill and a store per word).
		 */
		memcpy(&dst[2], val, full);
		if (full < c->size) {
			memcpy(&w, (const uint8_t *)val + full, c->size - full);
			__atomic_store_n(&dst[2 + full / 8], w, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&dst[1], h, __ATOMIC_RELAXED);
		__atomic_store_n(&dst[0], seq, __ATOMIC_RELEASE);
		return;
	}
	}
}

void value_clear(const struct value_codec *c, void *enc)
{
	uint64_t *dst = enc;

	/* ascending word stores: a reader sees a write of version 0 landing */
	for (size_t i = 0; i < c->enc_len / 8; i++)
		__atomic_store_n(&dst[i], 0, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* decoding (any reader)                                              */

uint64_t value_tag(const struct value_codec *c, const void *enc)
{
	const uint64_t *w = enc;

	switch (c->kind) {
	case VALUE_WORD:
		return __atomic_load_n(w, __ATOMIC_ACQUIRE);
	case VALUE_LINE:
		return __atomic_load_n(&w[7], __ATOMIC_ACQUIRE) >> 32; /* seq_after */
	default:
		return __atomic_load_n(&w[0], __ATOMIC_ACQUIRE) & ((1ull << 48) - 1);
	}
}

static int word_try(const struct value_codec *c, const void *enc, void *val)
{
	/* one aligned word is never torn (DESIGN §3); pairs with value_encode() */
	uint64_t w = __atomic_load_n((const uint64_t *)enc, __ATOMIC_ACQUIRE);

	memcpy(val, &w, c->size);
	return 0;
}

/*
 * line_try -- one attempt at a LINE value: read word 7 (which holds
 * seq_after), then words 6 .. 1, then word 0 (seq_before), each load
 * acquire, so that each is performed before the next. Accept when
 * seq_before == seq_after.
 *
 * Why that is enough. A WRITE lands the words of a line in ascending
 * order, each word whole (DESIGN §3; value_encode() stores the master
 * the same way with release stores). Let W be the write whose word 7
 * this read saw, with sequence s. W's words 0..6 landed before its word
 * 7, and the acquire load of word 7 (pairs with the fabric's release
 * fence after landing, or with value_encode()'s release store of word 7)
 * makes them visible: every later load here returns W's word or that of
 * a later write. Suppose the load of word i (1 <= i <= 6) returned a
 * word of a later write W2. W2 landed its word 0 before its word i, and
 * the load of word 0 comes after the load of word i (acquire on word i),
 * so it returns W2's word 0 or a later one: seq_before is then not s
 * (successive writes have distinct sequences; they repeat only after
 * 2^32 writes). The same holds when word 0 itself is from a later write.
 * So seq_before == s means every word read is W's. Words 0 and 7 are
 * single atomic loads, so their data bytes come with their sequences.
 */
static int line_try(const struct value_codec *c, const void *enc, void *val)
{
	const uint64_t *src = enc;
	uint64_t w[8];
	uint32_t before, after;

	w[7] = __atomic_load_n(&src[7], __ATOMIC_ACQUIRE);
	for (int i = 6; i >= 1; i--)
		w[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
	w[0] = __atomic_load_n(&src[0], __ATOMIC_RELAXED); /* kept last by the acquire on w[1] */
	memcpy(&before, w, 4);
	memcpy(&after, (const uint8_t *)w + 60, 4);
	if (before != after)
		return -EAGAIN;
	memcpy(val, (const uint8_t *)w + 4, c->size);
	return 0;
}

/*
 * hash_try -- one attempt at a HASH value: copy it whole into @tmp (one
 * memcpy: the fabric lands lines in any order, and a copy torn by a
 * landing or by the owner's store, at any width, fails the check), then
 * check the hash over sequence and data. A torn copy fails the check (but
 * for a 2^-64 chance); sequence 0 is the value never stored. (Word by
 * word, with atomic loads, the copy of 4 KiB took most of a load's
 * 0.45 us against 0.07 for a memcpy.)
 */
static int hash_try(const struct value_codec *c, const void *enc, void *val, uint64_t *tmp)
{
	memcpy(tmp, enc, c->enc_len);
	__atomic_thread_fence(__ATOMIC_ACQUIRE); /* what the value announces is visible after it */
	if (tmp[0] == 0) {
		memset(val, 0, c->size);
		return 0;
	}
	if (obj_sum(tmp + 2, c->size, tmp[0]) != tmp[1])
		return -EAGAIN;
	memcpy(val, tmp + 2, c->size);
	return 0;
}

/*
 * backoff -- pause after failed attempt @attempt (0-based): a short
 * exponential spin, then the manager's wait policy through @w (set up at
 * attempt SPIN_TRIES). Sleeping lets the NIC thread landing the value run.
 */
static void backoff(unsigned attempt, loco_waiter_t *w)
{
	if (attempt < SPIN_TRIES) {
		for (unsigned i = 0; i < 1u << (attempt < 8 ? attempt : 8); i++)
			obj_cpu_relax();
	} else {
		loco_waiter_pause(w);
	}
}

static int try_once(const struct value_codec *c, const void *enc, void *val, uint64_t *tmp)
{
	switch (c->kind) {
	case VALUE_WORD:
		return word_try(c, enc, val);
	case VALUE_LINE:
		return line_try(c, enc, val);
	default:
		return hash_try(c, enc, val, tmp);
	}
}

/* load_retry -- the retry loop around try_once() with scratch @tmp. */
static int load_retry(const struct value_codec *c, const void *enc, void *val, uint64_t *tmp,
                      struct value_counters *ctr, loco_manager_t *m)
{
	loco_waiter_t w;
	int64_t t0 = 0;

	for (unsigned attempt = 0;; attempt++) {
		if (try_once(c, enc, val, tmp) == 0) {
			count(&ctr->loads, 1);
			if (attempt > 0)
				count(&ctr->retries, attempt);
			return 0;
		}
		if (attempt == SPIN_TRIES) {
			t0 = obj_now_ns();
			loco_waiter_init(&w, m);
		} else if (attempt > SPIN_TRIES && obj_now_ns() - t0 > VALUE_TORN_NS) {
			count(&ctr->retries, attempt + 1);
			count(&ctr->torn, 1);
			return -LOCO_ETORN;
		}
		backoff(attempt, &w);
	}
}

/* value_load -- a validated copy of the value at @enc, on a stack or the shared scratch. */
int value_load(const struct value_codec *c, const void *enc, void *val, struct value_scratch *big,
               struct value_counters *ctr)
{
	uint64_t stack[(VALUE_HASH_HDR + VALUE_STACK_MAX) / 8];
	loco_waiter_t w;
	int ret;

	if (c->kind != VALUE_HASH || big->buf == NULL)
		return load_retry(c, enc, val, stack, ctr, big->m);
	/* one loader at a time on the big buffer; the others wait their turn */
	loco_waiter_init(&w, big->m);
	while (__atomic_exchange_n(&big->busy, 1, __ATOMIC_ACQUIRE))
		loco_waiter_pause(&w);
	ret = load_retry(c, enc, val, big->buf, ctr, big->m);
	__atomic_store_n(&big->busy, 0, __ATOMIC_RELEASE); /* pairs with the exchange above */
	return ret;
}

void value_stats(const struct value_counters *ctr, loco_value_stats_t *out)
{
	out->loads = __atomic_load_n(&ctr->loads, __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&ctr->retries, __ATOMIC_RELAXED);
	out->torn = __atomic_load_n(&ctr->torn, __ATOMIC_RELAXED);
	out->pushes = __atomic_load_n(&ctr->pushes, __ATOMIC_RELAXED);
	out->push_errors = __atomic_load_n(&ctr->push_errors, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* the staging ring (the owner)                                       */

int value_stage_init(struct value_stage *s, const struct value_codec *c, loco_object_t *obj,
                     loco_manager_t *m)
{
	unsigned i;
	int ret;

	memset(s, 0, sizeof(*s));
	s->c = c;
	ret = loco_region_create(obj, "stage", VALUE_STAGE_SLOTS * c->stride, 0, &s->ring);
	if (ret)
		return ret; /* the region, if any, goes with the object */
	for (i = 0; i < VALUE_STAGE_SLOTS; i++) {
		ret = loco_ack_key_create(m, &s->keys[i]);
		if (ret)
			goto err_destroy_keys;
		s->ver[i] = UINT64_MAX;
	}
	s->cur = VALUE_STAGE_SLOTS - 1;
	return 0;

err_destroy_keys:
	while (i-- > 0)
		loco_ack_key_destroy(s->keys[i]);
	memset(s->keys, 0, sizeof(s->keys));
	return ret;
}

void value_stage_fini(struct value_stage *s)
{
	for (unsigned i = 0; i < VALUE_STAGE_SLOTS; i++) {
		loco_ack_key_destroy(s->keys[i]); /* waits for the slot's WRITEs */
		s->keys[i] = NULL;
	}
}

/* stage_take -- make idle slot @i hold version @ver of @master. */
static void stage_take(struct value_stage *s, unsigned i, const void *master, uint64_t ver,
                       struct value_counters *ctr)
{
	/* idle: hands over (and clears) the error of an earlier push from this slot */
	if (loco_ack_wait(s->keys[i], 0) != 0)
		count_owner(&ctr->push_errors, 1);
	/* only this thread writes the master, so it is stable while we copy it */
	memcpy((uint8_t *)loco_region_ptr(s->ring) + (size_t)i * s->c->stride, master,
	       s->c->enc_len);
	s->ver[i] = ver;
	s->cur = i;
}

/* value_stage_prepare -- the slot to push version @ver from: reuse, an idle one, or the oldest. */
int value_stage_prepare(struct value_stage *s, const void *master, uint64_t ver, unsigned need,
                        struct value_counters *ctr, unsigned *slot)
{
	unsigned i, oldest = (s->cur + 1) % VALUE_STAGE_SLOTS;
	int ret;

	if (need > VALUE_KEY_ROOM)
		need = VALUE_KEY_ROOM;
	if (s->ver[s->cur] == ver &&
	    loco_ack_outstanding(s->keys[s->cur]) + need <= VALUE_KEY_ROOM) {
		*slot = s->cur; /* unchanged content may feed any number of WRITEs */
		return 0;
	}
	for (unsigned k = 0; k < VALUE_STAGE_SLOTS; k++) {
		i = (oldest + k) % VALUE_STAGE_SLOTS;
		if (loco_ack_outstanding(s->keys[i]) == 0) {
			stage_take(s, i, master, ver, ctr);
			*slot = i;
			return 0;
		}
	}
	/* every slot in flight: the oldest completes first (bounded by the fabric) */
	ret = loco_ack_wait(s->keys[oldest], -1);
	if (ret != 0 && loco_ack_outstanding(s->keys[oldest]) != 0)
		return ret;
	if (ret != 0)
		count_owner(&ctr->push_errors, 1);
	stage_take(s, oldest, master, ver, ctr);
	*slot = oldest;
	return 0;
}

int value_stage_post(struct value_stage *s, unsigned slot, const loco_rref_t *rr, size_t roff,
                     loco_ack_key_t *ack)
{
	/* one WRITE: its completion frees the slot and reaches the caller's key */
	loco_ack_key_t *keys[2] = {s->keys[slot], ack};

	return loco_write_acks(s->ring, (size_t)slot * s->c->stride, rr, roff, s->c->enc_len, keys,
	                       ack != NULL ? 2 : 1);
}

int value_push_inline(const struct value_codec *c, loco_region_t *mreg, size_t moff,
                      const loco_rref_t *rr, size_t roff, loco_ack_key_t *ack,
                      struct value_counters *ctr)
{
	/* the owner's thread stores the master: it is whole while the post copies it */
	int ret = loco_write_inline(mreg, moff, rr, roff, c->enc_len, ack);

	if (ret == 0)
		count_owner(&ctr->pushes, 1);
	return ret;
}

int value_push(struct value_stage *s, unsigned slot, const loco_rref_t *rr, size_t roff,
               loco_ack_key_t *ack, struct value_counters *ctr)
{
	int ret = value_stage_post(s, slot, rr, roff, ack);

	if (ret == 0)
		count_owner(&ctr->pushes, 1);
	return ret;
}
