/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst.c -- a shared state table, built only on the public object-author
 * API (loco/channel.h) and the single-writer value of value.h.
 *
 * Every node makes an object @name with a region "rows": @max_rows slots
 * of one encoded row each (value.h; stride 8 for rows of up to 8 bytes,
 * else the encoding rounded up to 64 bytes). Node n's row is slot n - 1
 * on every node, so a late joiner's row needs no reallocation and no
 * agreement: its slot was there from the start. A node's own slot is the
 * master it stores into; the others are replicas its peers push into. A
 * push goes through the node's staging ring (region "stage"), as an
 * owned_var's does. Rows of up to 8 bytes also get a region "fetch", into
 * which loco_sst_fetch() READs a peer's own row, and may be pushed
 * inline from the table (loco_sst_set_direct()), as LINE rows are: the
 * WRITE copies the word when posted, so it carries the row as stored at
 * the push call; the ring serves a link that copies less inline. Larger
 * rows are tried inline each push, as an owned_var's larger values are
 * (shm runs such a WRITE at post), and go through the ring where a link
 * says -EMSGSIZE.
 *
 * Presence: a state byte per slot, set by the peer_join / peer_leave
 * callbacks on the progress thread. A row that leaves is zeroed, so a
 * node that comes back with the same id starts from zeros, not from its
 * former self's row. (A WRITE of the dead node still queued at this
 * node's NIC may land after that; the next push of the returning node
 * overwrites it.)
 *
 * Predicates: each is a poller of the manager (loco_poller_add()), so the
 * progress thread evaluates it on every turn and wakes for it at least
 * every LOCO_POLLER_PERIOD_NS; the poller's removal rules give the
 * predicate's. The table keeps a list of them only to remove those left
 * at loco_sst_destroy().
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <loco.h>
#include <loco/sst.h>

#include "obj_util.h"
#include "value.h"

enum row_state {
	ROW_UNSEEN = 0, /* no callback and no create-time scan said anything yet */
	ROW_PRESENT,
	ROW_LEFT,
};

struct loco_sst {
	loco_object_t *obj;
	loco_channel_t *ch;
	loco_region_t *rows;  /* atomic: published after creation (callbacks may run first) */
	loco_region_t *fetch; /* rows of up to 8 bytes: loco_sst_fetch() lands here */
	uint8_t *fetched; /* [max_rows] with fetch, atomic: the last fetch of node n was posted */
	uint32_t me;
	uint32_t max_rows;
	uint8_t *state;   /* [max_rows] enum row_state, atomic */
	uint32_t *gen;    /* [max_rows], atomic: how many times the row vanished */
	uint64_t *bits;   /* [max_rows / 64 rounded up], atomic: bit node - 1 is set while
	                   * state may be ROW_PRESENT (a set bit is checked against state) */
	uint64_t version; /* of this node's last store */
	int direct;       /* a word row pushed inline (loco_sst_set_direct) */
	int inl;          /* pushes try inline (a WORD or LINE row: until a link refuses) */
	struct value_codec codec;
	struct value_stage stage;
	int staged;
	struct value_scratch big;
	struct value_counters ctr;
	pthread_mutex_t pred_lock; /* guards preds; never held across a poller call or removal */
	struct loco_sst_predicate *preds; /* armed predicates, newest first */
};

struct loco_sst_predicate {
	loco_sst_t *sst;
	int (*test)(loco_sst_t *sst, void *arg);
	void (*trigger)(loco_sst_t *sst, void *arg);
	void *arg;
	unsigned mode;
	int last;              /* the previous result: progress thread only */
	int armed;             /* atomic: add has written *out; evaluate from now on */
	loco_poller_t *poller; /* set by loco_poller_add() before its first call */
	struct loco_sst_predicate *next;
};

static inline size_t row_off(const loco_sst_t *sst, uint32_t node)
{
	return (size_t)(node - 1) * sst->codec.stride;
}

static inline uint8_t *row_ptr(const loco_sst_t *sst, loco_region_t *rows, uint32_t node)
{
	return (uint8_t *)loco_region_ptr(rows) + row_off(sst, node);
}

static inline int row_state(const loco_sst_t *sst, uint32_t node)
{
	if (node == 0 || node > sst->max_rows)
		return ROW_UNSEEN;
	/* pairs with the release stores of the callbacks */
	return __atomic_load_n(&sst->state[node - 1], __ATOMIC_ACQUIRE);
}

/* row_mark -- @node's row may be present (before its state says so): set its bit. */
static inline void row_mark(loco_sst_t *sst, uint32_t node)
{
	__atomic_fetch_or(&sst->bits[(node - 1) / 64], 1ull << ((node - 1) % 64), __ATOMIC_RELAXED);
}

/*
 * A walk over the present rows: one load per bitmap word (a table of 256
 * rows with 4 present: 4 words and 4 state bytes, not 256 state bytes),
 * each row's state looked at once.
 */
struct rows_it {
	uint32_t w; /* the bitmap word */
	uint64_t b; /* its bits not yet looked at */
};

static struct rows_it rows_first(const loco_sst_t *sst)
{
	return (struct rows_it){.w = 0, .b = __atomic_load_n(&sst->bits[0], __ATOMIC_RELAXED)};
}

/* rows_next -- the next node of walk @it whose row is present, or 0 at the end. */
static inline uint32_t rows_next(const loco_sst_t *sst, struct rows_it *it)
{
	uint32_t words = (sst->max_rows + 63) / 64, node;

	for (;;) {
		while (it->b == 0) {
			if (++it->w >= words)
				return 0;
			it->b = __atomic_load_n(&sst->bits[it->w], __ATOMIC_RELAXED);
		}
		node = it->w * 64 + (uint32_t)__builtin_ctzll(it->b) + 1;
		it->b &= it->b - 1;
		if (row_state(sst, node) == ROW_PRESENT)
			return node;
	}
}

/* sst_peer_join -- on the progress thread: @node's row appears. */
static void sst_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_sst_t *sst = arg;

	(void)obj, (void)view;
	if (node == 0 || node > sst->max_rows || node == sst->me)
		return;
	row_mark(sst, node); /* the bit before the state: a reader that sees the state finds it */
	__atomic_store_n(&sst->state[node - 1], ROW_PRESENT, __ATOMIC_RELEASE);
}

/* sst_peer_leave -- on the progress thread: @node's row vanishes, and is zeroed. */
static void sst_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_sst_t *sst = arg;
	loco_region_t *rows;

	(void)obj, (void)view;
	if (node == 0 || node > sst->max_rows || node == sst->me)
		return;
	/* absent first: readers that look now skip it, and those reading it validate */
	__atomic_store_n(&sst->state[node - 1], ROW_LEFT, __ATOMIC_RELEASE);
	__atomic_add_fetch(&sst->gen[node - 1], 1, __ATOMIC_RELEASE); /* before the zeros */
	__atomic_fetch_and(&sst->bits[(node - 1) / 64], ~(1ull << ((node - 1) % 64)),
	                   __ATOMIC_RELAXED);
	rows = __atomic_load_n(&sst->rows, __ATOMIC_ACQUIRE); /* pairs with loco_sst_create */
	if (rows != NULL)
		value_clear(&sst->codec, row_ptr(sst, rows, node));
}

static const struct loco_object_ops sst_ops = {
    .peer_join = sst_peer_join,
    .peer_leave = sst_peer_leave,
};

/*
 * sst_scan_peers -- rows for the peers paired before the object existed
 * (created after the join). A callback that ran meanwhile wins: the CAS
 * only moves a slot from ROW_UNSEEN.
 */
static void sst_scan_peers(loco_sst_t *sst)
{
	uint32_t ids[VALUE_MAX_PEERS];
	int n = loco_channel_peers(sst->ch, ids, VALUE_MAX_PEERS);

	for (int i = 0; i < n && i < (int)VALUE_MAX_PEERS; i++) {
		uint8_t unseen = ROW_UNSEEN;

		if (ids[i] == 0 || ids[i] > sst->max_rows || ids[i] == sst->me)
			continue;
		/*
		 * A bit set for a row whose leave ran meanwhile only costs a
		 * state check: the walks look at the state of every set bit.
		 */
		row_mark(sst, ids[i]);
		__atomic_compare_exchange_n(&sst->state[ids[i] - 1], &unseen, ROW_PRESENT, 0,
		                            __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	}
}

/* loco_sst_create -- presence, object with callbacks, regions, staging ring, then the peers. */
int loco_sst_create(loco_channel_t *ch, const char *name, size_t row_size, uint32_t max_rows,
                    loco_sst_t **out)
{
	loco_region_t *rows;
	loco_sst_t *sst;
	uint32_t me;
	int ret;

	if (ch == NULL || name == NULL || out == NULL || row_size == 0 ||
	    row_size > LOCO_OWNED_VAR_MAX_SIZE || max_rows == 0 || max_rows > LOCO_SST_MAX_ROWS)
		return -EINVAL;
	me = loco_manager_node_id(loco_channel_manager(ch));
	if (me == 0 || me > max_rows)
		return -ERANGE;
	ret = loco_handle_alloc(ch, sizeof(*sst), (void **)&sst);
	if (ret)
		return ret;
	sst->ch = ch;
	sst->me = me;
	sst->max_rows = max_rows;
	ret = value_codec_init(&sst->codec, row_size);
	if (ret)
		goto err_free;
	if ((size_t)max_rows * sst->codec.stride > ((size_t)1 << 31)) {
		ret = -EINVAL; /* the table must fit the fabric's largest operation */
		goto err_free;
	}
	ret = -ENOMEM;
	sst->state = calloc(max_rows, 1);
	sst->bits = calloc((max_rows + 63) / 64, sizeof(uint64_t));
	sst->gen = calloc(max_rows, sizeof(uint32_t));
	if (sst->state == NULL || sst->bits == NULL || sst->gen == NULL)
		goto err_free_state;
	sst->state[me - 1] = ROW_PRESENT;
	row_mark(sst, me);
	ret = value_scratch_init(&sst->big, &sst->codec);
	if (ret)
		goto err_free_state;
	sst->big.m = loco_channel_manager(ch); /* loads back off by its wait policy */
	pthread_mutex_init(&sst->pred_lock, NULL);
	ret = loco_object_create(ch, name, &sst_ops, sst, &sst->obj);
	if (ret)
		goto err_scratch;
	/* every node's table must be the same shape: checked as peers pair */
	ret = loco_object_agree(sst->obj, "row_size", row_size);
	if (ret == 0)
		ret = loco_object_agree(sst->obj, "max_rows", max_rows);
	if (ret)
		goto err_destroy_obj;
	ret = loco_region_create(sst->obj, "rows", (size_t)max_rows * sst->codec.stride,
	                         LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &rows);
	if (ret)
		goto err_destroy_obj;
	/* pairs with the acquire load in sst_peer_leave() */
	__atomic_store_n(&sst->rows, rows, __ATOMIC_RELEASE);
	if (sst->codec.kind == VALUE_WORD) {
		ret = loco_region_create(sst->obj, "fetch", (size_t)max_rows * 8, 0, &sst->fetch);
		if (ret)
			goto err_destroy_obj;
		ret = -ENOMEM;
		sst->fetched = calloc(max_rows, 1);
		if (sst->fetched == NULL)
			goto err_destroy_obj;
	}
	ret = value_stage_init(&sst->stage, &sst->codec, sst->obj, loco_channel_manager(ch));
	if (ret)
		goto err_destroy_obj;
	sst->staged = 1;
	/* (the ring stays for a link that refuses) */
	sst->inl = 1;
	sst_scan_peers(sst);
	*out = sst;
	return 0;

err_destroy_obj:
	loco_object_destroy(sst->obj); /* no callback runs after it returns; regions go too */
	free(sst->fetched);
err_scratch:
	pthread_mutex_destroy(&sst->pred_lock);
	value_scratch_fini(&sst->big);
err_free_state:
	free(sst->gen);
	free(sst->bits);
	free(sst->state);
err_free:
	loco_handle_free(sst);
	return ret;
}

void loco_sst_destroy(loco_sst_t *sst)
{
	struct loco_sst_predicate *p, *next;

	OBJ_DESTROY_CHECK(sst);
	pthread_mutex_lock(&sst->pred_lock);
	p = sst->preds;
	sst->preds = NULL;
	pthread_mutex_unlock(&sst->pred_lock);
	for (; p != NULL; p = next) {
		next = p->next;
		loco_poller_remove(p->poller); /* waits for a call in progress */
		loco_handle_free(p);
	}
	if (sst->staged)
		value_stage_fini(&sst->stage); /* waits for the pushes in flight */
	loco_object_destroy(sst->obj);
	value_scratch_fini(&sst->big);
	pthread_mutex_destroy(&sst->pred_lock);
	free(sst->fetched);
	free(sst->gen);
	free(sst->bits);
	free(sst->state);
	loco_handle_free(sst);
}

int loco_sst_sync(loco_sst_t *sst, int64_t timeout_ns)
{
	OBJ_CHECK(sst);
	return loco_object_sync(sst->obj, timeout_ns);
}

int loco_sst_store_mine(loco_sst_t *sst, const void *row)
{
	int ret;

	OBJ_CHECK(sst);
	if (row == NULL)
		return -EINVAL;
	/*
	 * Refused before the join too: a row stored then is what a joiner's
	 * fetch finds (a barrier's episode), though it was never pushed.
	 */
	ret = loco_object_status(sst->obj);
	if (ret)
		return ret;
	value_encode(&sst->codec, row_ptr(sst, sst->rows, sst->me), row, ++sst->version);
	return 0;
}

/* others -- how many nodes but this one have a present row (at least 1). */
static unsigned others(const loco_sst_t *sst)
{
	struct rows_it it = rows_first(sst);
	unsigned n = 0;

	for (uint32_t node = rows_next(sst, &it); node != 0; node = rows_next(sst, &it))
		n += node != sst->me;
	return n > 0 ? n : 1; /* the one being pushed to, were its row gone meanwhile */
}

/* sst_slot -- where the current version of the own row is pushed from (@need WRITEs). */
static int sst_slot(loco_sst_t *sst, unsigned need, unsigned *slot)
{
	*slot = 0;
	return value_stage_prepare(&sst->stage, row_ptr(sst, sst->rows, sst->me), sst->version,
	                           need, &sst->ctr, slot);
}

/*
 * sst_push -- the own row into the same row of @rr: a LINE, or the word of
 * a direct table, inline from the table (copied when posted), else
 * through *@slot (-1: none taken for this version yet; taken here, for
 * @need WRITEs (0: one to every other present row), and kept for the
 * caller's next pushes). A link that refuses a row every tcp and shm
 * link copies (up to VALUE_INLINE_MAX encoded bytes) turns the ring on
 * for good; a direct table, and a larger row (inline only where it runs
 * at post: shm), try inline again on the next push (its links may
 * differ). Never straight
 * from the table: a WRITE that read the row when the fabric sent it
 * could carry a store made after the push call, and land before a WRITE
 * posted after it (sst-push-copy).
 */
static int sst_push(loco_sst_t *sst, int *slot, unsigned need, const loco_rref_t *rr,
                    loco_ack_key_t *ack)
{
	size_t off = row_off(sst, sst->me);
	unsigned s;
	int ret;

	if (sst->inl || sst->direct) {
		/* copied when posted: the push carries the row as stored now */
		ret = value_push_inline(&sst->codec, sst->rows, off, rr, off, ack, &sst->ctr);
		if (ret != -EMSGSIZE)
			return ret;
		if (value_inline_refused_for_good(&sst->codec))
			sst->inl = 0; /* else the ring this time only */
	}
	if (*slot < 0) {
		ret = sst_slot(sst, need != 0 ? need : others(sst), &s);
		if (ret)
			return ret;
		*slot = (int)s;
	}
	return value_push(&sst->stage, (unsigned)*slot, rr, off, ack, &sst->ctr);
}

int loco_sst_push_to(loco_sst_t *sst, uint32_t node, loco_ack_key_t *ack)
{
	loco_rref_t rr;
	int slot = -1, ret;

	OBJ_CHECK(sst);
	if (node == sst->me)
		return -EINVAL;
	ret = loco_region_remote(sst->rows, node, &rr);
	return ret ? ret : sst_push(sst, &slot, 1, &rr, ack);
}

/* loco_sst_push_broadcast -- the own row to every node with a present row (and a copy). */
int loco_sst_push_broadcast(loco_sst_t *sst, loco_ack_key_t *ack)
{
	struct rows_it it;
	loco_rref_t rr;
	int ret, posted = 0, slot = -1;

	OBJ_CHECK(sst);
	ret = loco_object_status(sst->obj); /* also with no peer to push to */
	if (ret)
		return ret;
	it = rows_first(sst);
	for (uint32_t n = rows_next(sst, &it); n != 0; n = rows_next(sst, &it)) {
		if (n == sst->me)
			continue;
		ret = loco_region_remote(sst->rows, n, &rr);
		if (ret == 0)
			ret = sst_push(sst, &slot, 0, &rr, ack);
		if (ret == 0)
			posted++;
		else if (!value_skip_peer(ret))
			return ret; /* the ones posted stay attached to @ack */
	}
	return posted;
}

int loco_sst_read(loco_sst_t *sst, uint32_t node, void *row)
{
	int ret;

	OBJ_CHECK(sst);
	if (row == NULL)
		return -EINVAL;
	ret = loco_object_status(sst->obj); /* local: allowed before the join, not on a mismatch */
	if (ret == -LOCO_EMISMATCH)
		return ret;
	if (row_state(sst, node) != ROW_PRESENT)
		return -ENOENT;
	return value_load(&sst->codec, row_ptr(sst, sst->rows, node), row, &sst->big, &sst->ctr);
}

int loco_sst_row_tag(const loco_sst_t *sst, uint32_t node, uint64_t *tag)
{
	uint64_t gen, t;
	int ret;

	OBJ_CHECK(sst);
	if (tag == NULL)
		return -EINVAL;
	ret = loco_object_status(sst->obj); /* as loco_sst_read() */
	if (ret == -LOCO_EMISMATCH)
		return ret;
	if (row_state(sst, node) != ROW_PRESENT)
		return -ENOENT;
	gen = __atomic_load_n(&sst->gen[node - 1], __ATOMIC_ACQUIRE);
	t = value_tag(&sst->codec, row_ptr(sst, sst->rows, node));
	/* a row that vanished and came back starts its versions again: its gen tells them apart */
	switch (sst->codec.kind) {
	case VALUE_WORD:
		*tag = t; /* the row itself */
		break;
	case VALUE_LINE:
		*tag = t | gen << 32;
		break;
	default:
		*tag = t | gen << 48;
		break;
	}
	return 0;
}

int loco_sst_row_present(const loco_sst_t *sst, uint32_t node)
{
	return loco_handle_check(sst) == 0 && row_state(sst, node) == ROW_PRESENT;
}

int loco_sst_rows(const loco_sst_t *sst, uint32_t *ids, size_t max)
{
	uint32_t words;
	int n = 0;

	OBJ_CHECK(sst);
	if (ids == NULL && max > 0)
		return -EINVAL;
	/* rows_next()'s walk, written out: every poll of a reduce or a barrier lists the rows */
	words = (sst->max_rows + 63) / 64;
	for (uint32_t w = 0; w < words; w++)
		for (uint64_t b = __atomic_load_n(&sst->bits[w], __ATOMIC_RELAXED); b != 0;
		     b &= b - 1) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(b);

			/* pairs with the release stores of the callbacks */
			if (__atomic_load_n(&sst->state[i], __ATOMIC_ACQUIRE) != ROW_PRESENT)
				continue;
			if ((size_t)n < max)
				ids[n] = i + 1;
			n++;
		}
	return n;
}

size_t loco_sst_row_size(const loco_sst_t *sst)
{
	OBJ_CHECK_OR(sst, 0);
	return sst->codec.size;
}

uint32_t loco_sst_max_rows(const loco_sst_t *sst)
{
	OBJ_CHECK_OR(sst, 0);
	return sst->max_rows;
}

void loco_sst_stats(const loco_sst_t *sst, loco_value_stats_t *st)
{
	if (loco_handle_check(sst) == 0 && st != NULL)
		value_stats(&sst->ctr, st);
}

/* ------------------------------------------------------------------ */
/* predicates                                                         */

/*
 * pred_poll -- on the progress thread: evaluate the predicate, and call
 * its trigger on a false -> true edge. The trigger may remove the
 * predicate (free @arg), so nothing of it is touched afterwards.
 */
static int pred_poll(void *arg)
{
	struct loco_sst_predicate *p = arg;
	void (*trigger)(loco_sst_t *, void *) = p->trigger;
	loco_sst_t *sst = p->sst;
	void *targ = p->arg;
	int was = p->last, ret;

	if (!__atomic_load_n(&p->armed, __ATOMIC_ACQUIRE)) /* pairs with the add's release */
		return LOCO_POLLER_IDLE;

	p->last = p->test(sst, targ) != 0;
	if (!p->last || was)
		return LOCO_POLLER_IDLE;
	/* one-shot: never again; recurring: the trigger may have pushed, look again at once */
	ret = p->mode == LOCO_SST_ONE_SHOT ? LOCO_POLLER_DONE : LOCO_POLLER_BUSY;
	trigger(sst, targ);
	return ret;
}

/* pred_unlist -- take @p off @sst's list of armed predicates (if it is on it). */
static void pred_unlist(loco_sst_t *sst, struct loco_sst_predicate *p)
{
	struct loco_sst_predicate **pp;

	pthread_mutex_lock(&sst->pred_lock);
	for (pp = &sst->preds; *pp != NULL && *pp != p; pp = &(*pp)->next)
		;
	if (*pp != NULL)
		*pp = p->next;
	pthread_mutex_unlock(&sst->pred_lock);
}

int loco_sst_predicate_add(loco_sst_t *sst, int (*test)(loco_sst_t *sst, void *arg),
                           void (*trigger)(loco_sst_t *sst, void *arg), void *arg, unsigned mode,
                           loco_sst_predicate_t **out)
{
	struct loco_sst_predicate *p;
	int ret;

	if (sst == NULL || test == NULL || trigger == NULL || out == NULL ||
	    (mode != LOCO_SST_ONE_SHOT && mode != LOCO_SST_RECURRING))
		return -EINVAL;
	ret = loco_handle_alloc(sst->ch, sizeof(*p), (void **)&p);
	if (ret)
		return ret;
	p->sst = sst;
	p->test = test;
	p->trigger = trigger;
	p->arg = arg;
	p->mode = mode;
	/*
	 * Evaluated only once armed, after *@out is written: a trigger that
	 * fires at once can read the handle there and remove the predicate
	 * (and free @p), so nothing of @p is touched after arming.
	 */
	pthread_mutex_lock(&sst->pred_lock);
	p->next = sst->preds;
	sst->preds = p;
	pthread_mutex_unlock(&sst->pred_lock);
	ret = loco_poller_add(loco_channel_manager(sst->ch), pred_poll, p, 0, &p->poller);
	if (ret) {
		pred_unlist(sst, p);
		loco_handle_free(p);
		return ret;
	}
	*out = p;
	__atomic_store_n(&p->armed, 1, __ATOMIC_RELEASE);
	return 0;
}

int loco_sst_predicate_remove(loco_sst_predicate_t *pred)
{
	OBJ_CHECK(pred);
	pred_unlist(pred->sst, pred);
	/* not under pred_lock: this waits for a trigger, which may add or remove predicates */
	loco_poller_remove(pred->poller);
	loco_handle_free(pred);
	return 0;
}

/* ------------------------------------------------------------------ */
/* one-word rows: direct pushes, fetches                              */

/* loco_sst_set_direct -- push the word inline from now on (the ring stays for a link that refuses). */
int loco_sst_set_direct(loco_sst_t *sst)
{
	OBJ_CHECK(sst);
	if (sst->codec.kind != VALUE_WORD)
		return -EINVAL;
	sst->direct = 1;
	return 0;
}

static uint64_t *fetch_slot(const loco_sst_t *sst, uint32_t node)
{
	return (uint64_t *)loco_region_ptr(sst->fetch) + (node - 1);
}

/* loco_sst_fetch -- READ @node's master row into its fetch slot, zeroed first. */
int loco_sst_fetch(loco_sst_t *sst, uint32_t node, loco_ack_key_t *ack)
{
	loco_rref_t rr;
	int ret;

	OBJ_CHECK(sst);
	if (ack == NULL || sst->fetch == NULL || node == 0 || node > sst->max_rows ||
	    node == sst->me)
		return -EINVAL;
	__atomic_store_n(&sst->fetched[node - 1], 0, __ATOMIC_RELAXED);
	ret = loco_region_remote(sst->rows, node, &rr);
	if (ret)
		return ret;
	__atomic_store_n(fetch_slot(sst, node), 0, __ATOMIC_RELAXED);
	ret = loco_read(sst->fetch, (size_t)(node - 1) * 8, &rr, row_off(sst, node), 8, ack);
	if (ret == 0)
		/* pairs with the acquire load in loco_sst_fetch_result() */
		__atomic_store_n(&sst->fetched[node - 1], 1, __ATOMIC_RELEASE);
	return ret;
}

/* loco_sst_fetch_result -- decode @node's fetch slot (one word: never torn). */
int loco_sst_fetch_result(loco_sst_t *sst, uint32_t node, void *row)
{
	struct value_counters uncounted = {0}; /* a fetch result is not a read of the table */

	OBJ_CHECK(sst);
	if (row == NULL || sst->fetch == NULL || node == 0 || node > sst->max_rows)
		return -EINVAL;
	if (!__atomic_load_n(&sst->fetched[node - 1], __ATOMIC_ACQUIRE))
		return -ENODATA;
	/* what the READ placed: loco_ack_wait() made it visible to the waiter */
	return value_load(&sst->codec, fetch_slot(sst, node), row, &sst->big, &uncounted);
}
