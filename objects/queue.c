/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * queue.c -- the multi-producer, single-consumer queue (loco/queue.h),
 * built only on the public object-author API.
 *
 * Regions of object @name:
 *   "ctl"    every member, CTL_LEN bytes, listed: on the owner, the tail
 *            word (a hint: the ticket after the last claim producers
 *            reported) and the reference of its slots; unused elsewhere
 *            (a listed region of one length on every member, so the
 *            object pairs and loco_object_sync() sees it).
 *   "slots"  the owner only, unlisted (its reference is in "ctl"):
 *            capacity slots of SLOT_HDR + item_max rounded up to 64 bytes.
 *   "stage"  every member, unlisted: CAS results, READs, and the image of
 *            a slot that an enqueue writes from.
 *
 * Ticket t (64 bits) lives in slot t % capacity, in round t / capacity.
 * A slot's header line:
 *   [0]  claim  round << 32 | node: free for its round's ticket when node
 *               is 0 (zeroed memory is an empty queue: round 0 free)
 *   [8]  sum    obj_sum() of (ticket, len, item)
 *   [16] ready  round << 32 | len (len > 0): the item of that round landed
 *   [64] the item
 * An enqueue CASes claim from (round, 0) to (round, me), then WRITEs
 * [8, 64 + len) from its stage in one request. The WRITE's lines may land
 * in any order (DESIGN §3); sum and ready share a line and land in
 * ascending order, so a reader that sees ready also sees its sum, and the
 * checksum says whether the item's own lines landed. The owner takes
 * ticket head when ready and sum hold, copies the item out, clears ready,
 * then frees the slot for the next round (claim = (round + 1, 0)). Its
 * stores to claim race no fabric CAS: producers CAS only a free slot, and
 * a slot is freed only by the owner.
 *
 * A claim the CAS finds taken by another producer moves the guess on; one
 * that finds the previous round still there is a full queue; one that
 * finds another round means the guess is stale: it READs the tail word.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/queue.h>

#include "obj_hash.h"
#include "obj_util.h"

#define CTL_LEN       64u
#define CTL_TAIL      0u  /* u64: the tail hint */
#define CTL_REF       8u  /* loco_rref_t: the slots */
#define SLOT_HDR      64u /* claim, sum, ready, then the item at 64 */
#define SLOT_SUM      8u
#define SLOT_READY    16u
#define STG_CAS       0u  /* u64: the claim CAS's old value */
#define STG_TAILCAS   8u  /* u64: the tail CAS's old value (not read) */
#define STG_TAIL      16u /* u64: a READ of the tail word */
#define STG_REF       24u /* loco_rref_t: a READ of the owner's "ctl" reference */
#define STG_IMG       64u /* a slot image: the WRITE's source is [STG_IMG + 8, ...) */
#define SUM_SEED      0x6c6f636f71756575ull /* "locoqueu" */
#define CLAIM_TRIES   4u                    /* claims lost in a row before reading the tail */
#define STUCK_LOOK_NS 1000000ll             /* a stuck slot is looked at this often */

struct loco_queue {
	loco_object_t *obj;
	loco_channel_t *ch;
	loco_region_t *ctl, *slots, *stage;
	loco_ack_key_t *ack;
	loco_queue_cfg_t cfg;
	uint32_t me;
	uint32_t shift;       /* log2(capacity) */
	size_t slot_bytes;    /* SLOT_HDR + item_max rounded up to 64 */
	pthread_mutex_t lock; /* enqueues of this node, one at a time */
	pthread_mutex_t dq;   /* dequeues */
	/* producer (lock) */
	loco_rhandle_t ref; /* the owner's slots, bound; ref.rref.len 0: not read yet */
	uint64_t guess;     /* the next ticket to try */
	uint64_t tail;      /* the tail word as last seen: what a tail CAS expects */
	/* owner (dq) */
	uint64_t head;
	int64_t stuck_since_ns; /* when the slot at head was first seen claimed, not whole (0) */
	int64_t stuck_look_ns;  /* when it was last looked at */
	int given_up;           /* its claimer gave it up: a last look, then skip it */
	loco_queue_stats_t st;  /* counters: atomic adds, relaxed */
};

static void count(uint64_t *c)
{
	__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

void loco_queue_cfg_default(loco_queue_cfg_t *cfg, uint32_t owner)
{
	if (cfg == NULL)
		return;
	*cfg = (loco_queue_cfg_t){
	    .owner = owner, .capacity = 1024, .item_max = 256, .timeout_ns = 10000000000ll};
}

static uint32_t round_of(const loco_queue_t *q, uint64_t t)
{
	return (uint32_t)(t >> q->shift);
}

static size_t slot_off(const loco_queue_t *q, uint64_t t)
{
	return (size_t)(t & (q->cfg.capacity - 1)) * q->slot_bytes;
}

static uint64_t item_sum(uint64_t t, uint32_t len, const void *item)
{
	uint64_t seed = obj_sum(&t, sizeof(t), SUM_SEED ^ len);

	return obj_sum(item, len, seed);
}

int loco_queue_create(loco_channel_t *ch, const char *name, const loco_queue_cfg_t *cfg,
                      loco_queue_t **out)
{
	loco_queue_t *q;
	uint32_t shift = 0;
	int ret;

	if (ch == NULL || name == NULL || cfg == NULL || out == NULL || cfg->owner == 0 ||
	    cfg->capacity < 2 || cfg->capacity > LOCO_QUEUE_CAPACITY_MAX ||
	    (cfg->capacity & (cfg->capacity - 1)) != 0 || cfg->item_max == 0 ||
	    cfg->item_max > LOCO_QUEUE_ITEM_MAX || cfg->timeout_ns <= 0)
		return -EINVAL;
	while ((1u << shift) < cfg->capacity)
		shift++;
	ret = loco_handle_alloc(ch, sizeof(*q), (void **)&q);
	if (ret)
		return ret;
	q->ch = ch;
	q->cfg = *cfg;
	q->shift = shift;
	q->slot_bytes = SLOT_HDR + (((size_t)cfg->item_max + 63) & ~(size_t)63);
	q->me = loco_manager_node_id(loco_channel_manager(ch));
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->dq, NULL);
	ret = loco_ack_key_create(loco_channel_manager(ch), &q->ack);
	if (ret)
		goto err_free;
	ret = loco_object_create(ch, name, NULL, NULL, &q->obj);
	if (ret)
		goto err_ack;
	/* every member must agree on the layout: checked as peers pair */
	ret = loco_object_agree(q->obj, "owner", cfg->owner);
	if (ret == 0)
		ret = loco_object_agree(q->obj, "capacity", cfg->capacity);
	if (ret == 0)
		ret = loco_object_agree(q->obj, "item_max", cfg->item_max);
	if (ret == 0)
		ret = loco_region_create(q->obj, "ctl", CTL_LEN,
		                         LOCO_ACCESS_READ | LOCO_ACCESS_ATOMIC, &q->ctl);
	if (ret == 0)
		ret = loco_region_create(q->obj, "stage", STG_IMG + q->slot_bytes,
		                         LOCO_ACCESS_UNLISTED, &q->stage);
	if (ret == 0 && q->me == cfg->owner) {
		ret = loco_region_create(
		    q->obj, "slots", (size_t)cfg->capacity * q->slot_bytes,
		    LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC | LOCO_ACCESS_UNLISTED, &q->slots);
		/* the reference producers READ; zeroed slots are an empty queue */
		if (ret == 0)
			ret = loco_region_rref(q->slots, &q->ref.rref);
		if (ret == 0)
			memcpy((char *)loco_region_ptr(q->ctl) + CTL_REF, &q->ref.rref,
			       sizeof(q->ref.rref));
	}
	if (ret)
		goto err_obj;
	*out = q;
	return 0;

err_obj:
	loco_object_destroy(q->obj); /* and its regions */
err_ack:
	loco_ack_key_destroy(q->ack);
err_free:
	pthread_mutex_destroy(&q->dq);
	pthread_mutex_destroy(&q->lock);
	loco_handle_free(q);
	return ret;
}

void loco_queue_destroy(loco_queue_t *q)
{
	OBJ_DESTROY_CHECK(q);
	loco_ack_wait(q->ack, q->cfg.timeout_ns); /* the tail CAS may still be out */
	loco_object_destroy(q->obj);
	loco_ack_key_destroy(q->ack);
	pthread_mutex_destroy(&q->dq);
	pthread_mutex_destroy(&q->lock);
	loco_handle_free(q);
}

int loco_queue_sync(loco_queue_t *q, int64_t timeout_ns)
{
	OBJ_CHECK(q);
	return loco_object_sync(q->obj, timeout_ns);
}

/* stage_u64 -- the word at @off of this node's stage. */
static uint64_t stage_u64(const loco_queue_t *q, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)loco_region_ptr(q->stage) + off, sizeof(v));
	return v;
}

/* owner_ctl -- the reference of the owner's "ctl" (its own, on the owner). */
static int owner_ctl(const loco_queue_t *q, loco_rref_t *ctl)
{
	return q->me == q->cfg.owner ? loco_region_rref(q->ctl, ctl)
	                             : loco_region_remote(q->ctl, q->cfg.owner, ctl);
}

/* read_ctl -- READ @len bytes at @off of the owner's "ctl" into the stage at @to. */
static int read_ctl(loco_queue_t *q, size_t off, size_t len, size_t to)
{
	loco_rref_t ctl;
	int ret = owner_ctl(q, &ctl);

	if (ret == 0)
		ret = loco_read(q->stage, to, &ctl, off, len, q->ack);
	if (ret == 0)
		ret = loco_ack_wait(q->ack, q->cfg.timeout_ns);
	return ret;
}

/* learn_ref -- the owner's slots reference, checked (a peer's bytes). */
static int learn_ref(loco_queue_t *q)
{
	size_t want = (size_t)q->cfg.capacity * q->slot_bytes;
	loco_rref_t r;
	int ret;

	if (q->ref.rref.len != 0)
		return 0;
	ret = read_ctl(q, CTL_REF, sizeof(r), STG_REF);
	if (ret)
		return ret;
	memcpy(&r, (const char *)loco_region_ptr(q->stage) + STG_REF, sizeof(r));
	if (r.len == 0)
		return -EAGAIN; /* the owner has not set it up yet */
	if (r.node != q->cfg.owner || r.len != want)
		return -EPROTO;
	return loco_rhandle_bind(q->stage, &r, &q->ref);
}

/* link_lost -- an operation's error that a rebuilt link may cure. */
static int link_lost(int ret)
{
	return ret == -ENOTCONN || ret == -ECONNRESET || ret == -ECANCELED;
}

/* owner_present -- whether the owner is a peer of this node now. */
static int owner_present(const loco_queue_t *q)
{
	loco_rref_t ctl;

	return owner_ctl(q, &ctl) == 0;
}

/* read_tail -- the owner's tail hint into q->guess. */
static int read_tail(loco_queue_t *q)
{
	int ret = read_ctl(q, CTL_TAIL, 8, STG_TAIL);

	if (ret == 0) {
		q->tail = stage_u64(q, STG_TAIL);
		if (q->tail > q->guess) /* (the hint may lag behind what we saw taken) */
			q->guess = q->tail;
	}
	return ret;
}

/*
 * claim -- a ticket whose slot now names this node, in *@t. -EAGAIN when
 * the queue is full.
 *
 * Every ticket below a claimed one, below the tail word and below any
 * producer's guess was claimed (the guess moves only past claimed
 * tickets), so a claim never leaves a hole that no one would fill. A
 * failed CAS says what the slot holds: the same round claimed (taken: the
 * next ticket), the previous round (full), or a later round, claimed
 * (that ticket is taken: past it) or free (its previous round's ticket was
 * taken: just past that one). A producer that slept while the others went
 * round the ring catches up in one step.
 */
static int claim(loco_queue_t *q, uint64_t *t)
{
	int64_t deadline = obj_now_ns() + q->cfg.timeout_ns;
	uint64_t cap = q->cfg.capacity;
	unsigned lost = 0;
	int ret;

	for (unsigned tries = 0; tries < 4 * q->cfg.capacity + 8; tries++) {
		uint64_t g = q->guess, want = (uint64_t)round_of(q, g) << 32, old;
		uint32_t ahead;

		ret = loco_rop_post(&q->ref, &(loco_rop_t){.opcode = LOCO_ROP_CAS,
		                                           .local = q->stage,
		                                           .loff = STG_CAS,
		                                           .roff = slot_off(q, g),
		                                           .compare = want,
		                                           .value = want | q->me,
		                                           .acks = {q->ack}});
		if (ret == 0)
			ret = loco_ack_wait(q->ack, q->cfg.timeout_ns);
		if (link_lost(ret) && obj_now_ns() < deadline && owner_present(q)) {
			/*
			 * The link to the owner failed and is being rebuilt (a failed
			 * link is a suspicion, not a death): try again. If the CAS ran,
			 * the slot names us and our next claim is a later one, so the
			 * owner skips it; no item is in it.
			 */
			struct timespec ms = {0, 1000000};

			nanosleep(&ms, NULL);
			tries--;
			continue;
		}
		if (ret)
			return ret;
		old = stage_u64(q, STG_CAS);
		if (old == want) {
			*t = g;
			return 0;
		}
		ahead = (uint32_t)(old >> 32) - round_of(q, g);
		if (ahead == UINT32_MAX && (uint32_t)old != 0)
			return -EAGAIN; /* the previous round's item is still there */
		if (ahead == 0 || ahead >= 1u << 31) {
			/* taken in this round (or a state no claim leaves: start over from the tail) */
			count(&q->st.retries);
			q->guess = g + 1;
			if ((ahead != 0 || ++lost % CLAIM_TRIES == 0) && (ret = read_tail(q)) != 0)
				return ret;
			continue;
		}
		/* a later round: claimed there, or free after its previous round's claim */
		q->guess = (uint32_t)old != 0 ? g + ahead * cap + 1 : g + (ahead - 1) * cap + 1;
	}
	return -EAGAIN;
}

int loco_queue_enqueue(loco_queue_t *q, const void *item, size_t len)
{
	char *img;
	uint64_t t = 0, w; /* (t: set by claim() when it returns 0) */
	loco_rref_t ctl;
	int tail_cas, ret;

	OBJ_CHECK(q);
	if (item == NULL || len == 0)
		return -EINVAL;
	if (len > q->cfg.item_max)
		return -EMSGSIZE;
	ret = loco_object_status(q->obj);
	if (ret)
		return ret;
	pthread_mutex_lock(&q->lock);
	ret = learn_ref(q);
	if (ret == 0)
		ret = claim(q, &t);
	if (ret == -EAGAIN)
		count(&q->st.full);
	if (ret)
		goto out;
	q->guess = t + 1;
	/* the slot image: sum, ready, the item; written from byte 8 on */
	img = (char *)loco_region_ptr(q->stage) + STG_IMG;
	w = item_sum(t, (uint32_t)len, item);
	memcpy(img + SLOT_SUM, &w, 8);
	w = (uint64_t)round_of(q, t) << 32 | (uint32_t)len;
	memcpy(img + SLOT_READY, &w, 8);
	memcpy(img + SLOT_HDR, item, len);
	/*
	 * The tail hint jumps past us from where we last saw it, unless
	 * another producer moved it meanwhile (then it is theirs to move: we
	 * learn where it is from the CAS's old value). Its CAS goes to the
	 * owner right after the WRITE: both in one send (LOCO_ROP_MORE).
	 */
	tail_cas = t + 1 > q->tail && owner_ctl(q, &ctl) == 0;
	ret = loco_rop_post(&q->ref, &(loco_rop_t){.opcode = LOCO_ROP_WRITE,
	                                           .flags = tail_cas ? LOCO_ROP_MORE : 0,
	                                           .local = q->stage,
	                                           .loff = STG_IMG + SLOT_SUM,
	                                           .roff = slot_off(q, t) + SLOT_SUM,
	                                           .len = SLOT_HDR - SLOT_SUM + len,
	                                           .acks = {q->ack}});
	if (ret == 0) {
		tail_cas = tail_cas && loco_cas(q->stage, STG_TAILCAS, &ctl, CTL_TAIL, q->tail,
		                                t + 1, q->ack) == 0;
		ret = loco_ack_wait(q->ack, q->cfg.timeout_ns);
		if (ret == 0 && tail_cas) {
			uint64_t old = stage_u64(q, STG_TAILCAS);

			q->tail = old == q->tail ? t + 1 : old;
		}
	}
	if (ret == 0)
		count(&q->st.enqueued);
out:
	pthread_mutex_unlock(&q->lock);
	return ret;
}

/* claimer_gone -- whether @node, which claims the slot at head, gave it up (q->dq). */
static int claimer_gone(loco_queue_t *q, uint32_t node, const char *slots)
{
	loco_rref_t rr;

	if (node == q->me)
		return 0; /* our own enqueue holds it: it is running */
	/*
	 * Left (it has no "ctl" here any more): a node claims only while it is
	 * a peer; and its enqueue gave up after its own bound (so its WRITE is
	 * not still coming over a link that pairing has not shown us yet).
	 */
	if (loco_region_remote(q->ctl, node, &rr) == -ENOENT &&
	    obj_now_ns() - q->stuck_since_ns >= q->cfg.timeout_ns)
		return 1;
	/* a later claim of the same node: it enqueues one item at a time */
	for (uint64_t k = q->head + 1; k < q->head + q->cfg.capacity; k++) {
		uint64_t c = __atomic_load_n(
		    (const uint64_t *)(const void *)(slots + slot_off(q, k)), __ATOMIC_ACQUIRE);
		if ((uint32_t)(c >> 32) != round_of(q, k) || (uint32_t)c == 0)
			break; /* past the claimed run */
		if ((uint32_t)c == node)
			return 1;
	}
	return 0;
}

/* release -- the slot of ticket head is taken or given up: free it for the next round. */
static void release(loco_queue_t *q, char *slot)
{
	__atomic_store_n((uint64_t *)(void *)(slot + SLOT_READY), 0, __ATOMIC_RELAXED);
	__atomic_store_n((uint64_t *)(void *)(slot + SLOT_SUM), 0, __ATOMIC_RELAXED);
	__atomic_store_n((uint64_t *)(void *)slot, (uint64_t)(round_of(q, q->head) + 1u) << 32,
	                 __ATOMIC_RELEASE);
	q->head++;
	q->stuck_since_ns = q->stuck_look_ns = 0;
	q->given_up = 0;
}

int loco_queue_dequeue(loco_queue_t *q, void *buf, size_t cap, size_t *len)
{
	char *slots, *slot;
	uint64_t claim_w, ready, sum;
	int64_t now;
	uint32_t n;
	int ret = -EAGAIN;

	OBJ_CHECK(q);
	if ((buf == NULL && cap > 0) || len == NULL)
		return -EINVAL;
	if (q->me != q->cfg.owner)
		return -EPERM;
	pthread_mutex_lock(&q->dq);
	slots = loco_region_ptr(q->slots);
	for (;;) {
		slot = slots + slot_off(q, q->head);
		claim_w = __atomic_load_n((uint64_t *)(void *)slot, __ATOMIC_ACQUIRE);
		if ((uint32_t)claim_w == 0 || (uint32_t)(claim_w >> 32) != round_of(q, q->head))
			break; /* not claimed yet: empty */
		ready = __atomic_load_n((uint64_t *)(void *)(slot + SLOT_READY), __ATOMIC_ACQUIRE);
		n = (uint32_t)ready;
		if ((uint32_t)(ready >> 32) == round_of(q, q->head) && n > 0 &&
		    n <= q->cfg.item_max) {
			sum = __atomic_load_n((uint64_t *)(void *)(slot + SLOT_SUM),
			                      __ATOMIC_ACQUIRE);
			if (sum == item_sum(q->head, n, slot + SLOT_HDR)) {
				*len = n;
				if (n > cap) {
					ret = -EMSGSIZE;
					break;
				}
				memcpy(buf, slot + SLOT_HDR, n);
				release(q, slot);
				count(&q->st.dequeued);
				ret = 0;
				break;
			}
			/* still landing: a line of the item is not there yet */
		}
		/*
		 * Claimed, not (yet) whole: give it up only if its claimer did. A
		 * later claim of the claimer came after its WRITE here, if it made
		 * one: look at the slot once more before giving it up.
		 */
		if (q->given_up) {
			release(q, slot);
			count(&q->st.skipped);
			continue;
		}
		now = obj_now_ns();
		if (q->stuck_since_ns == 0)
			q->stuck_since_ns = now;
		if (now - q->stuck_look_ns < STUCK_LOOK_NS)
			break;
		q->stuck_look_ns = now;
		if (!claimer_gone(q, (uint32_t)claim_w, slots))
			break;
		q->given_up = 1;
	}
	pthread_mutex_unlock(&q->dq);
	return ret;
}

void loco_queue_stats(const loco_queue_t *q, loco_queue_stats_t *st)
{
	if (st == NULL || loco_handle_check(q) != 0)
		return;
	st->enqueued = __atomic_load_n(&q->st.enqueued, __ATOMIC_RELAXED);
	st->dequeued = __atomic_load_n(&q->st.dequeued, __ATOMIC_RELAXED);
	st->full = __atomic_load_n(&q->st.full, __ATOMIC_RELAXED);
	st->retries = __atomic_load_n(&q->st.retries, __ATOMIC_RELAXED);
	st->skipped = __atomic_load_n(&q->st.skipped, __ATOMIC_RELAXED);
}
