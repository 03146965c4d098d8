/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe.c -- a one-way pipe between two nodes: a ring in the reader's
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
 * sum = XXH3-64 of the payload seeded with (seq, len, kind); seq counts
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
 * reader last wrote into its ctl. The reader writes its head when a
 * quarter of the ring was consumed since the last time, or when the
 * writer asked: a writer short of room writes the head it needs into the
 * reader's ctl (once per wait) and the reader returns space as soon as it
 * has consumed that far (on release, and while it waits for a message).
 * Space is never reused before the reader consumed it, which also proves
 * that the WRITE that used it (and its source) is done.
 *
 * Failure: peer_leave(other end) makes the pipe lost: the writer's calls
 * fail with -ECONNRESET; the reader reads what fully landed, then fails
 * with -ECONNRESET. One WRITE in flight at a time is signaled to an ack
 * key, whose errors make the writer's pipe lost too (a message may have
 * been dropped on a failed link: never go on silently).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include <loco.h>
#include <loco/rpipe.h>

#include "obj_util.h"

#define CTL_LEN   128u
#define CTL_SRC   8u /* first source slot word */
#define CTL_SLOTS 8u
#define HDR       16u
#define TRL       8u

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
	uint32_t writer, reader, me;
	int is_writer;
	int lost;          /* atomic: the other end left, or a WRITE failed: sticky */
	int have_peer;     /* the other end's regions were looked up */
	loco_rref_t rring; /* writer: the reader's ring */
	loco_rref_t rctl;  /* the other end's ctl */
	uint64_t seq;      /* records written / read */
	uint64_t ctl_n;    /* ctl WRITEs posted */
	/* writer */
	uint64_t tail;   /* bytes placed (positions grow for ever) */
	uint64_t asked;  /* the last want written */
	size_t resv_off; /* reservation: ring offset of its record */
	size_t resv_len; /* reserved payload bytes (0: none) */
	/* reader */
	uint64_t head;      /* bytes consumed */
	uint64_t published; /* the head written to the writer last */
	size_t peek_rec;    /* bytes of the peeked record (0: none) */
	loco_rpipe_stats_t st;
};

/* rp_peer_leave -- on the progress thread: the other end left for good. */
static void rp_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpipe_t *p = arg;

	(void)obj, (void)view;
	if (node == (p->is_writer ? p->reader : p->writer))
		__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE); /* pairs with is_lost() */
}

static const struct loco_object_ops rp_ops = {
    .peer_leave = rp_peer_leave,
};

static int is_lost(const loco_rpipe_t *p)
{
	return __atomic_load_n(&p->lost, __ATOMIC_ACQUIRE);
}

static uint64_t r8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static uint32_t tag_of(int kind, uint64_t seq)
{
	return (uint32_t)kind | (uint32_t)(seq << 8);
}

static uint64_t seed_of(size_t len, uint64_t seq, int kind)
{
	return seq * 0x9E3779B97F4A7C15ull ^ ((uint64_t)len << 8 | (uint64_t)kind);
}

/* sum_of -- the writer's sum of a record's payload (private memory: its shadow). */
static uint64_t sum_of(const void *data, size_t len, uint64_t seq, int kind)
{
	return XXH3_64bits_withSeed(data, len, seed_of(len, seq, kind));
}

/*
 * copy_words -- @n 8-byte words from ring memory that the fabric may be
 * writing, with one atomic load each (never torn; pairs with the
 * provider's word stores, as value.c reads a replica).
 */
static void copy_words(uint64_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = __atomic_load_n((const uint64_t *)(const void *)src + i, __ATOMIC_RELAXED);
}

/*
 * ring_sum -- the reader's sum of @len payload bytes at @src, in the
 * ring: read word by word (the payload is 8-byte aligned and padded to
 * 8, so the padding words are read too but not hashed), small payloads
 * in one go, larger ones in SUM_CHUNK pieces through the streaming state.
 */
#define SUM_CHUNK 256u
static uint64_t ring_sum(loco_rpipe_t *p, const uint8_t *src, size_t len, uint64_t seq)
{
	uint64_t tmp[SUM_CHUNK / 8], seed = seed_of(len, seq, KIND_MSG);

	if (len <= SUM_CHUNK) {
		copy_words(tmp, src, r8(len) / 8);
		return XXH3_64bits_withSeed(tmp, len, seed);
	}
	XXH3_64bits_reset_withSeed(p->xs, seed);
	for (size_t o = 0; o < len; o += SUM_CHUNK) {
		size_t n = len - o < SUM_CHUNK ? len - o : SUM_CHUNK;

		copy_words(tmp, src + o, r8(n) / 8);
		XXH3_64bits_update(p->xs, tmp, n);
	}
	return XXH3_64bits_digest(p->xs);
}

int loco_rpipe_create(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                      size_t ring_bytes, loco_rpipe_t **out)
{
	loco_rpipe_t *p;
	uint32_t me;
	int ret;

	if (ch == NULL || name == NULL || out == NULL || writer == 0 || reader == 0 ||
	    writer == reader || ring_bytes < LOCO_RPIPE_RING_MIN ||
	    ring_bytes > LOCO_RPIPE_RING_MAX || ring_bytes % 64 != 0)
		return -EINVAL;
	me = loco_node_id(loco_channel_manager(ch));
	if (me != writer && me != reader)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->ch = ch;
	p->m = loco_channel_manager(ch);
	p->size = ring_bytes;
	p->writer = writer;
	p->reader = reader;
	p->me = me;
	p->is_writer = me == writer;
	ret = -ENOMEM;
	p->xs = XXH3_createState();
	if (p->xs == NULL)
		goto err_free;
	ret = loco_ack_key_create(p->m, &p->dack);
	if (ret)
		goto err_free;
	ret = loco_ack_key_create(p->m, &p->cack);
	if (ret)
		goto err_dack;
	ret = loco_object_create(ch, name, &rp_ops, p, &p->obj);
	if (ret)
		goto err_cack;
	/* both ends must name the same ends and ring: checked as they pair */
	ret = loco_object_agree(p->obj, "writer", writer);
	if (ret == 0)
		ret = loco_object_agree(p->obj, "reader", reader);
	if (ret == 0)
		ret = loco_object_agree(p->obj, "ring", ring_bytes);
	if (ret)
		goto err_obj;
	/* the ctl first: loco_object_sync() waits for the first region */
	ret = loco_region_create(p->obj, "ctl", CTL_LEN, LOCO_ACCESS_WRITE, &p->ctl);
	if (ret)
		goto err_obj;
	ret = loco_region_create(p->obj, "ring", ring_bytes, p->is_writer ? 0 : LOCO_ACCESS_WRITE,
	                         &p->ring);
	if (ret)
		goto err_obj;
	p->base = loco_region_ptr(p->ring);
	p->ctlw = loco_region_ptr(p->ctl);
	*out = p;
	return 0;

err_obj:
	loco_object_destroy(p->obj); /* and its regions */
err_cack:
	loco_ack_key_destroy(p->cack);
err_dack:
	loco_ack_key_destroy(p->dack);
err_free:
	XXH3_freeState(p->xs);
	free(p);
	return ret;
}

void loco_rpipe_destroy(loco_rpipe_t *p)
{
	if (p == NULL)
		return;
	loco_ack_key_destroy(p->dack); /* waits for the WRITEs in flight */
	loco_ack_key_destroy(p->cack);
	loco_object_destroy(p->obj);
	XXH3_freeState(p->xs);
	free(p);
}

size_t loco_rpipe_max_msg(const loco_rpipe_t *p)
{
	return p ? (size_t)p->size - LOCO_RPIPE_OVERHEAD : 0;
}

void loco_rpipe_stats(const loco_rpipe_t *p, loco_rpipe_stats_t *st)
{
	if (p != NULL && st != NULL)
		*st = p->st;
}

/* peer -- look the other end's regions up once: 0, -ENOENT (not paired yet), or an error. */
static int peer(loco_rpipe_t *p)
{
	uint32_t other = p->is_writer ? p->reader : p->writer;
	int ret;

	if (p->have_peer)
		return 0;
	ret = loco_region_remote(p->ctl, other, &p->rctl);
	if (ret == 0 && p->is_writer)
		ret = loco_region_remote(p->ring, other, &p->rring);
	if (ret == 0)
		p->have_peer = 1;
	return ret;
}

/*
 * loco_rpipe_sync -- wait until the other end's regions are known (it
 * made the pipe and paired): only the two ends matter, not the channel's
 * other nodes (so not loco_object_sync()).
 */
int loco_rpipe_sync(loco_rpipe_t *p, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	loco_waiter_t w;
	int ret;

	if (p == NULL)
		return -EINVAL;
	loco_waiter_init(&w, p->m);
	while ((ret = peer(p)) == -ENOENT) {
		if (loco_channel_partitioned(p->ch))
			return -LOCO_EPARTITION;
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	return ret;
}

/* lose -- the pipe is unusable from now on. */
static int lose(loco_rpipe_t *p)
{
	__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE);
	return -ECONNRESET;
}

/* check -- the state every call looks at first: 0 or the error to return. */
static int check(loco_rpipe_t *p)
{
	int ret = loco_object_status(p->obj);

	if (ret)
		return ret;
	if (p->is_writer) {
		ret = loco_ack_wait(p->dack, 0); /* errors of completed data WRITEs */
		if (ret != 0 && ret != -ETIMEDOUT)
			return lose(p);
		if (is_lost(p))
			return -ECONNRESET;
	}
	if (loco_channel_partitioned(p->ch))
		return -LOCO_EPARTITION;
	return 0;
}

/*
 * ctl_put -- write @v into the other end's ctl word 0 from a source slot.
 * Every ctl WRITE is signaled and WRITEs to one node complete in order:
 * with fewer than CTL_SLOTS outstanding, the slot used CTL_SLOTS WRITEs
 * ago is free. Returns 0 when posted, -EAGAIN (try later), or an error.
 */
static int ctl_put(loco_rpipe_t *p, uint64_t v)
{
	unsigned slot = (unsigned)(p->ctl_n % CTL_SLOTS);
	int ret;

	if (loco_ack_outstanding(p->cack) >= CTL_SLOTS)
		return -EAGAIN;
	ret = loco_ack_wait(p->cack, 0);
	if (ret != 0 && ret != -ETIMEDOUT && p->is_writer)
		return lose(p);
	__atomic_store_n(&p->ctlw[CTL_SRC + slot], v, __ATOMIC_RELEASE);
	ret = loco_write(p->ctl, (CTL_SRC + slot) * 8, &p->rctl, 0, 8, p->cack);
	if (ret == 0)
		p->ctl_n++;
	return ret;
}

/* ---- writer ------------------------------------------------------------ */

/* room -- ring bytes free for the writer (may be < 0 right after a skip). */
static int64_t room(const loco_rpipe_t *p)
{
	uint64_t head = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE); /* the reader's ctl_put */

	return (int64_t)p->size - (int64_t)(p->tail - head);
}

/* wait_room -- wait until @need bytes from tail on are free, or @deadline. */
static int wait_room(loco_rpipe_t *p, uint64_t need, int64_t deadline, int nonblock)
{
	loco_waiter_t w;
	int counted = 0;

	loco_waiter_init(&w, p->m);
	for (unsigned n = 0;; n++) {
		uint64_t want;
		int ret;

		if (room(p) >= (int64_t)need)
			return 0;
		if (!counted) {
			p->st.full++;
			counted = 1;
		}
		ret = check(p);
		if (ret)
			return ret;
		/* ask the reader for the space (once per position wanted) */
		want = p->tail + need - p->size;
		if (want > p->asked) {
			ret = ctl_put(p, want);
			if (ret == 0) {
				p->asked = want;
				p->st.asks++;
			} else if (ret != -EAGAIN) {
				return ret == -ECONNRESET ? ret : lose(p);
			}
		}
		if (nonblock)
			return -EAGAIN;
		if (deadline >= 0 && n >= 4 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/*
 * post -- WRITE the record of @len ring bytes at @off from the shadow.
 * One data WRITE at a time is signaled (to learn of errors); a full
 * queue is retried until @deadline.
 */
static int post(loco_rpipe_t *p, size_t off, size_t len, int64_t deadline, int nonblock)
{
	loco_ack_key_t *ack = loco_ack_outstanding(p->dack) == 0 ? p->dack : NULL;
	loco_waiter_t w;
	int ret;

	loco_waiter_init(&w, p->m);
	for (unsigned n = 0;; n++) {
		ret = loco_write(p->ring, off, &p->rring, off, len, ack);
		if (ret != -EAGAIN)
			break;
		if (nonblock || (deadline >= 0 && obj_now_ns() >= deadline))
			return nonblock ? -EAGAIN : -ETIMEDOUT;
		if (is_lost(p))
			return -ECONNRESET;
		loco_waiter_pause(&w);
	}
	if (ret == -ENOTCONN || obj_peer_gone_err(ret))
		return lose(p);
	return ret;
}

/*
 * place -- find ring room for a record of @rec bytes at the tail: skip or
 * pad to the ring's start when it does not fit before the end (the pad
 * is a record of its own), then wait for the room. Sets *@off.
 */
static int place(loco_rpipe_t *p, uint64_t rec, int64_t deadline, int nonblock, size_t *off)
{
	int ret = check(p);

	if (ret)
		return ret;
	ret = peer(p);
	if (ret == -ENOENT) {
		/* the reader has not paired yet: wait for it as for room */
		loco_waiter_t w;

		loco_waiter_init(&w, p->m);
		while ((ret = peer(p)) == -ENOENT) {
			if (nonblock)
				return -EAGAIN;
			if (deadline >= 0 && obj_now_ns() >= deadline)
				return -ETIMEDOUT;
			if (is_lost(p))
				return -ECONNRESET;
			loco_waiter_pause(&w);
		}
	}
	if (ret)
		return ret;
	for (;;) {
		size_t o = (size_t)(p->tail % p->size);
		uint64_t left = p->size - o;
		struct rec_hdr *h;

		if (left < HDR) {
			p->tail += left; /* nothing written: the reader skips it too */
			p->st.wraps++;
			continue;
		}
		if (left >= rec) {
			ret = wait_room(p, rec, deadline, nonblock);
			if (ret)
				return ret;
			*off = o;
			return 0;
		}
		ret = wait_room(p, left, deadline, nonblock);
		if (ret)
			return ret;
		h = (struct rec_hdr *)(void *)(p->base + o);
		h->len = 0;
		h->tag = tag_of(KIND_PAD, p->seq);
		h->sum = sum_of(NULL, 0, p->seq, KIND_PAD);
		ret = post(p, o, HDR, deadline, nonblock);
		if (ret)
			return ret;
		p->seq++;
		p->tail += left;
		p->st.wraps++;
	}
}

/* seal -- the record at @off with @len payload bytes in place: header and trailer. */
static uint64_t seal(loco_rpipe_t *p, size_t off, size_t len)
{
	struct rec_hdr *h = (struct rec_hdr *)(void *)(p->base + off);
	uint64_t sum = sum_of(p->base + off + HDR, len, p->seq, KIND_MSG);
	uint64_t rec = HDR + r8(len) + TRL;

	h->len = (uint32_t)len;
	h->tag = tag_of(KIND_MSG, p->seq);
	h->sum = sum;
	memcpy(p->base + off + rec - TRL, &sum, sizeof(sum));
	return rec;
}

static int writer_args(loco_rpipe_t *p, size_t len)
{
	if (!p->is_writer)
		return -EPERM;
	if (p->resv_len != 0)
		return -EBUSY;
	if (len > p->size - LOCO_RPIPE_OVERHEAD)
		return -EMSGSIZE;
	return 0;
}

int loco_rpipe_write(loco_rpipe_t *p, const void *buf, size_t len, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	uint64_t rec;
	size_t off;
	int ret;

	if (p == NULL || buf == NULL || len == 0)
		return -EINVAL;
	ret = writer_args(p, len);
	if (ret)
		return ret;
	rec = HDR + r8(len) + TRL;
	ret = place(p, rec, deadline, timeout_ns == 0, &off);
	if (ret)
		return ret;
	memcpy(p->base + off + HDR, buf, len);
	seal(p, off, len);
	ret = post(p, off, rec, deadline, timeout_ns == 0);
	if (ret)
		return ret; /* nothing placed: the tail stays */
	p->seq++;
	p->tail += rec;
	p->st.msgs++;
	p->st.bytes += len;
	return 0;
}

int loco_rpipe_reserve(loco_rpipe_t *p, size_t len, void **ptr, int64_t timeout_ns)
{
	size_t off;
	int ret;

	if (p == NULL || ptr == NULL || len == 0)
		return -EINVAL;
	ret = writer_args(p, len);
	if (ret)
		return ret;
	ret = place(p, HDR + r8(len) + TRL, obj_deadline(timeout_ns), timeout_ns == 0, &off);
	if (ret)
		return ret;
	p->resv_off = off;
	p->resv_len = len;
	*ptr = p->base + off + HDR;
	return 0;
}

int loco_rpipe_commit(loco_rpipe_t *p, size_t len)
{
	uint64_t rec;
	int ret;

	if (p == NULL || !p->is_writer || p->resv_len == 0 || len == 0 || len > p->resv_len)
		return -EINVAL;
	rec = seal(p, p->resv_off, len);
	ret = post(p, p->resv_off, rec, -1, 0); /* a full queue drains: no deadline */
	if (ret) {
		p->resv_len = 0;
		return ret;
	}
	p->resv_len = 0;
	p->seq++;
	p->tail += rec;
	p->st.msgs++;
	p->st.bytes += len;
	return 0;
}

/* ---- reader ------------------------------------------------------------ */

/*
 * publish -- return consumed space: write the head to the writer when a
 * quarter of the ring was consumed since the last time, or the writer
 * waits for a head we reached.
 */
static void publish(loco_rpipe_t *p)
{
	uint64_t want, unpub = p->head - p->published;

	if (unpub == 0)
		return;
	want = __atomic_load_n(&p->ctlw[0], __ATOMIC_ACQUIRE); /* the writer's ctl_put */
	if (unpub < p->size / 4 && !(want > p->published && p->head >= want))
		return;
	if (peer(p) != 0 || ctl_put(p, p->head) != 0)
		return; /* not paired yet, or slots busy: the next call tries again */
	p->published = p->head;
	p->st.returns++;
}

static uint32_t load32(const void *a)
{
	return __atomic_load_n((const uint32_t *)a, __ATOMIC_RELAXED);
}

static uint64_t load64(const void *a)
{
	return __atomic_load_n((const uint64_t *)a, __ATOMIC_RELAXED);
}

/*
 * next -- whether the next message has fully landed: its payload offset
 * and length. Consumes PAD records and skips on the way.
 */
static int next(loco_rpipe_t *p, size_t *poff, size_t *plen)
{
	for (;;) {
		size_t o = (size_t)(p->head % p->size);
		uint64_t left = p->size - o, len, sum;
		const uint8_t *r = p->base + o;
		uint32_t tag;

		if (left < HDR) {
			p->head += left;
			p->st.wraps++;
			continue;
		}
		tag = load32(r + 4);
		if (tag == tag_of(KIND_PAD, p->seq)) {
			if (load32(r) != 0 || load64(r + 8) != sum_of(NULL, 0, p->seq, KIND_PAD))
				return 0;
			p->head += left;
			p->seq++;
			p->st.wraps++;
			continue;
		}
		if (tag != tag_of(KIND_MSG, p->seq))
			return 0;
		/* every field is untrusted until the sum matches */
		len = load32(r);
		if (len == 0 || HDR + r8(len) + TRL > left)
			return 0;
		sum = load64(r + 8);
		if (load64(r + HDR + r8(len)) != sum)
			return 0;
		__atomic_thread_fence(__ATOMIC_ACQUIRE); /* the payload after the words above */
		if (ring_sum(p, r + HDR, len, p->seq) != sum) {
			p->st.torn++;
			return 0;
		}
		*poff = o + HDR;
		*plen = len;
		return 1;
	}
}

/* wait_msg -- wait for the next message (see loco_rpipe_read()). */
static int wait_msg(loco_rpipe_t *p, int64_t timeout_ns, size_t *off, size_t *len)
{
	int64_t deadline;
	loco_waiter_t w;
	int ret, counted = 0;

	if (p == NULL || off == NULL || len == NULL)
		return -EINVAL;
	if (p->is_writer)
		return -EPERM;
	ret = loco_object_status(p->obj);
	if (ret)
		return ret;
	if (next(p, off, len))
		return 0;
	deadline = obj_deadline(timeout_ns);
	loco_waiter_init(&w, p->m);
	for (unsigned n = 0;; n++) {
		int lost = is_lost(p);

		if (next(p, off, len))
			return 0;
		if (!counted) {
			p->st.empty++;
			counted = 1;
		}
		publish(p); /* the writer may wait for space we consumed */
		if (lost)
			return -ECONNRESET; /* everything that landed before its death was read */
		if (loco_channel_partitioned(p->ch))
			return -LOCO_EPARTITION;
		if (timeout_ns == 0)
			return -EAGAIN;
		if (deadline >= 0 && n >= 4 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/* consume -- the message at payload offset @off of @len bytes is done. */
static void consume(loco_rpipe_t *p, size_t off, size_t len)
{
	p->head += HDR + r8(len) + TRL;
	p->seq++;
	p->st.msgs++;
	p->st.bytes += len;
	(void)off;
	publish(p);
}

int loco_rpipe_read(loco_rpipe_t *p, void *buf, size_t cap, size_t *len, int64_t timeout_ns)
{
	size_t off, n;
	int ret;

	if (p == NULL || buf == NULL || len == NULL)
		return -EINVAL;
	ret = wait_msg(p, timeout_ns, &off, &n);
	if (ret)
		return ret;
	if (n > cap)
		return -EMSGSIZE;
	memcpy(buf, p->base + off, n);
	p->peek_rec = 0;
	consume(p, off, n);
	*len = n;
	return 0;
}

int loco_rpipe_peek(loco_rpipe_t *p, const void **ptr, size_t *len, int64_t timeout_ns)
{
	size_t off, n;
	int ret;

	if (p == NULL || ptr == NULL || len == NULL)
		return -EINVAL;
	ret = wait_msg(p, timeout_ns, &off, &n);
	if (ret)
		return ret;
	p->peek_rec = n;
	*ptr = p->base + off;
	*len = n;
	return 0;
}

int loco_rpipe_release(loco_rpipe_t *p)
{
	size_t n;

	if (p == NULL || p->is_writer || p->peek_rec == 0)
		return -EINVAL;
	n = p->peek_rec;
	p->peek_rec = 0;
	consume(p, 0, n);
	return 0;
}
