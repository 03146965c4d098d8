/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * reduce.c -- an allreduce over the present members of a channel, built
 * on two ssts, one per round parity, and a third for results (public API
 * only).
 *
 * Tables: round r is pushed in table r & 1 ("NAME" for even rounds,
 * "NAME.1" for odd ones). Row of node n in each (loco_sst rows, never read
 * torn; 56 bytes with an 8-byte value, so the sst keeps it in one
 * sequence-checked line, no hash):
 *   state       0: n has not pushed this table to us; else 1 | first << 1,
 *               first = the first round n takes part in (0: deciding)
 *   round       the latest round of the table's parity n entered (0: none),
 *               whose value the slot holds
 *   present[4]  bitmap of the rows present at n when it entered that round
 *               (bit id - 1)
 *   val         the value, value_size rounded up to 8
 * A round pushes one table: half the bytes of one row with a slot per
 * parity, which every push and every read would carry whole.
 *
 * loco_reduce_run() for round r (after this node's first round):
 *   1. store r and the value in table r & 1 and push that row to the
 *      round's root, or to every present row's node when there is none (the
 *      errors of earlier pushes that completed are returned first; a full
 *      staging ring waits for their acks);
 *   2. wait until every present row (looked at again on every poll: rows
 *      that appear or vanish meanwhile count as they are) is settled for r,
 *      in table r & 1:
 *        - gone (absent): skipped;
 *        - state 0 or first 0: pending (not heard in this table yet, or a
 *          node that has not decided yet);
 *        - first > r: not in round r: skipped;
 *        - round == r: a contributor, its value copied out;
 *        - otherwise: pending;
 *   3. fold the contributors' values in ascending id order.
 *
 * The root. With ROOT_MIN rows present or more, a round goes through a
 * root: the lowest present id that takes part in it (this node, or a row
 * decided with first <= r), as each node sees it on entering r; for rows
 * of one line with every link on shm, the first such from position
 * r mod n of the present ids on, around (turns(), pick_root()). The other
 * nodes push their row to the root only; the root settles every row as in
 * step 2, folds, and publishes the result in table RES ("NAME.2", a row
 * per node: round, contributors, the first RES_SKIPS ids it skipped, the
 * value: one line for an 8-byte value), pushed to every present row. A
 * node waiting under a root completes r with that result once it shows
 * r, counts this node in, and the root saw every row present here (a
 * contributor or a listed skip); else, and on every SPINS-th poll, it
 * tries step 2 itself, which completes once the rows came (a wait that
 * lasts pushes both tables to every row). When the root's row goes mid-round, each
 * node picks the root again and pushes its row there. So a round of n
 * nodes costs 2 (n - 1) pushes, not n (n - 1): on tcp that is what a
 * round costs (a send and a receive each); two hops instead of one.
 * Why taking the root's result keeps what follows true: the root saw every
 * row present here settled for r (a contributor showed r: its node entered
 * r), exactly what step 2 here would have waited for. The fold is the
 * root's, in the same order: the same bytes as step 2 would give.
 *
 * Why one table per parity is enough: a node completes round r only once
 * every present decided row with first <= r shows r (here, or at the
 * root). So no node enters r + 2 before every such node entered r + 1,
 * that is finished r: while any node still reads table r & 1 for round r,
 * that row's node is at most in r + 1, which writes the other table. A
 * push rewrites table r & 1 with the same bytes. A results row needs no
 * parity: its node publishes a later round r' > r only once every node it
 * saw in r' showed r', that is had taken r.
 *
 * Deciding (a node's first call, or the first after a partition): store
 * state 1 (first 0) with round 0 in both tables and push both; wait until
 * every present row has been heard in at least one table (every peer that
 * holds us as present pushed to us at least once: it does when it re-pushes
 * while it waits, which it must, for our decision, and on entering a round
 * without a root). Let M be the
 * largest round in those rows. first = M when every row showing M had us
 * present when it entered M (or M is 0: first = 1), else M + 1. The first
 * round after deciding pushes both tables: a peer still in round first - 1
 * reads the other one, and must see first there to skip us.
 * Why every node that pushed to us settles us the same way in every
 * round: a node P that had us present when it entered a round waits for
 * our decision before it completes that round, and counts us in iff
 * first <= that round. P's rows here show at most M, so P entered M + 1
 * and later rounds with us present; for M itself first = M only if P had
 * us present on entering M. A node that does not hold us present yet
 * does not wait for us and may leave us out of a round the others count
 * us in: the window is the pairing itself (see loco_reduce(3)). At a
 * start where every node pairs before its first call, all start at 1.
 *
 * Polling: a row is read again only when its tag moved (loco_sst_row_tag():
 * struct seen keeps what each row showed), so a poll that finds nothing
 * new costs a load per row, not a validated copy.
 *
 * Waiting: a wait that lasts re-pushes both rows, every 50 ms (a push
 * lost on a rebuilt link: a peer one round behind needs the other table),
 * every 1 ms while some row is undecided (a joiner needs our rows to
 * decide). The pause between polls is a step of the manager's wait policy
 * (loco_waiter_pause(), LOCO_WAIT: spin, sleep or block); deadlines and
 * re-pushes are checked every SPINS polls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/reduce.h>
#include <loco/sst.h>

#include "obj_util.h"

#define SPINS          16u        /* a wait looks at its deadline and re-pushes every SPINS polls */
#define ROOT_MIN       3          /* rows present from which a round goes through a root */
#define TURN_ROW_MAX   56         /* rows of one sst line: the root may turn (turns()) */
#define RES            2          /* the sst of the results */
#define REPUSH_NS      50000000ll /* a wait that lasts this long pushes the row again */
#define REPUSH_FAST_NS 1000000ll  /* ... this long while a present row is undecided */

struct row_hdr {
	uint64_t state; /* 0: not pushed; else 1 | first << 1 (first 0: deciding) */
	uint64_t round; /* the latest round of this table's parity entered */
	uint64_t present[LOCO_REDUCE_MAX_NODE / 64]; /* rows present when that round began */
};

/*
 * A result, as its root publishes it in table RES: 48 bytes, so that with
 * an 8-byte value the row is one sst line (one WRITE of one line per
 * peer, one line to read; a bitmap of the settled ids as well would take
 * two lines and a hash: 4.4 -> 4.1 us a round, 4 nodes on 2 cores). The
 * ids the root settled are the contributors and the skipped ones, which
 * are few (nodes deciding their first round): the first RES_SKIPS are
 * listed. A node takes the result only when every row present here is
 * among those, so a skip left off the list can only make a node that
 * holds that row settle the round itself.
 */
#define RES_SKIPS 4

struct res_hdr {
	uint64_t round;                              /* the round of the result (0: none) */
	uint64_t contrib[LOCO_REDUCE_MAX_NODE / 64]; /* who contributed */
	uint16_t skip[RES_SKIPS]; /* ids the root skipped, the first RES_SKIPS (0: none) */
};
_Static_assert(sizeof(struct res_hdr) + 8 <= 56, "an 8-byte result must fit an sst line");

/*
 * What a row of a table showed when it was read last, and its tag
 * (loco_sst_row_tag()) taken before that read: while the tag stays, the
 * header still holds, and a poll need not read the row again.
 */
struct seen {
	uint64_t tag;
	uint64_t state;
	uint64_t round; /* of a results row: its round */
	uint32_t node;  /* of a results row: whose */
	int valid;
};

struct loco_reduce {
	loco_channel_t *ch;
	loco_sst_t *sst[3]; /* the rows by round parity; RES: the results */
	loco_ack_key_t *ack;
	uint32_t me;
	int op;
	loco_reduce_fn *fn;
	void *arg;
	size_t size;       /* value bytes */
	size_t vstride;    /* value slot bytes: size rounded up to 8 */
	size_t row_size;   /* header + slot */
	size_t res_size;   /* result header + slot */
	uint8_t *row[2];   /* this node's rows, as stored last */
	uint8_t *res;      /* this node's result row, as stored last */
	uint8_t *tmp;      /* a peer's row or result row, read */
	uint8_t *vals;     /* [LOCO_REDUCE_MAX_NODE][vstride]: the round's values, by id */
	uint64_t first;    /* 0: decide on the next call */
	uint64_t round;    /* the round entered last */
	uint64_t done;     /* atomic: the round completed last */
	int in_round;      /* entered, not completed (a wait timed out) */
	int hello;         /* deciding: hello pushed */
	uint32_t root;     /* the root of the round entered (0: none, every node pushes to all) */
	int64_t pushed_ns; /* when the row was last pushed */
	struct seen res_seen; /* the root's results row (near root: a waiter's poll reads both) */
	uint64_t contrib[LOCO_REDUCE_MAX_NODE / 64];   /* ids settled as contributors, as bits */
	uint64_t skipped[LOCO_REDUCE_MAX_NODE / 64];   /* ids settled as skipped, as bits */
	struct seen seen[2][LOCO_REDUCE_MAX_NODE + 1]; /* by table and id */
	uint32_t turn_ids[LOCO_REDUCE_MAX_NODE];       /* the present rows turn was found for */
	int turn_n;                                    /* how many (-1: none yet) */
	int turn;                                      /* the root turns with the round */
};

/* acks -- wait for the ack key until @deadline: 0 (peers' deaths too), -ETIMEDOUT, or an error. */
static int acks(loco_reduce_t *r, int64_t deadline)
{
	int ret = loco_ack_wait(r->ack, obj_left_ns(deadline));

	if (ret == -ETIMEDOUT && loco_ack_outstanding(r->ack) != 0)
		return -ETIMEDOUT;
	if (ret == -ETIMEDOUT) /* the last completion came after the test: test again */
		ret = loco_ack_wait(r->ack, 0);
	return ret == 0 || obj_push_gone_err(ret) ? 0 : ret;
}

static struct row_hdr *hdr_of(uint8_t *row)
{
	return (struct row_hdr *)(void *)row;
}

static uint8_t *slot_of(uint8_t *row)
{
	return row + sizeof(struct row_hdr);
}

static struct res_hdr *hdr_res(uint8_t *row)
{
	return (struct res_hdr *)(void *)row;
}

static uint8_t *slot_res(uint8_t *row)
{
	return row + sizeof(struct res_hdr);
}

static uint8_t *val_of(const loco_reduce_t *r, uint32_t id)
{
	return r->vals + (size_t)(id - 1) * r->vstride;
}

/* first_of -- the first round of a row's state (0: deciding or not heard). */
static uint64_t first_of(uint64_t state)
{
	return state >> 1;
}

static int op_valid(int op, size_t size, loco_reduce_fn *fn)
{
	if (op == LOCO_REDUCE_USER)
		return fn != NULL;
	return op >= LOCO_REDUCE_SUM_U64 && op <= LOCO_REDUCE_MAX_DOUBLE && fn == NULL &&
	       size % 8 == 0;
}

int loco_reduce_create(loco_channel_t *ch, const char *name, size_t value_size, int op,
                       loco_reduce_fn *fn, void *arg, loco_reduce_t **out)
{
	char odd[LOCO_NAME_MAX], results[LOCO_NAME_MAX];
	loco_reduce_t *r;
	int ret;

	if (ch == NULL || name == NULL || out == NULL || value_size == 0 ||
	    value_size > LOCO_REDUCE_MAX_SIZE || !op_valid(op, value_size, fn) ||
	    snprintf(odd, sizeof(odd), "%s.1", name) >= (int)sizeof(odd) ||
	    snprintf(results, sizeof(results), "%s.2", name) >= (int)sizeof(results))
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*r), (void **)&r);
	if (ret)
		return ret;
	r->ch = ch;
	r->me = loco_manager_node_id(loco_channel_manager(ch));
	r->turn_n = -1;
	r->op = op;
	r->fn = fn;
	r->arg = arg;
	r->size = value_size;
	r->vstride = (value_size + 7) & ~(size_t)7;
	r->row_size = sizeof(struct row_hdr) + r->vstride;
	r->res_size = sizeof(struct res_hdr) + r->vstride;
	ret = -ERANGE;
	if (r->me == 0 || r->me > LOCO_REDUCE_MAX_NODE)
		goto err_free;
	ret = -ENOMEM;
	r->row[0] = calloc(1, r->row_size);
	r->row[1] = calloc(1, r->row_size);
	r->res = calloc(1, r->res_size);
	r->tmp = calloc(1, r->res_size > r->row_size ? r->res_size : r->row_size);
	r->vals = calloc(LOCO_REDUCE_MAX_NODE, r->vstride); /* pages touched only for present ids */
	if (r->row[0] == NULL || r->row[1] == NULL || r->res == NULL || r->tmp == NULL ||
	    r->vals == NULL)
		goto err_free;
	ret = loco_sst_create(ch, name, r->row_size, LOCO_REDUCE_MAX_NODE, &r->sst[0]);
	if (ret)
		goto err_free;
	ret = loco_sst_create(ch, odd, r->row_size, LOCO_REDUCE_MAX_NODE, &r->sst[1]);
	if (ret)
		goto err_destroy_even;
	ret = loco_sst_create(ch, results, r->res_size, LOCO_REDUCE_MAX_NODE, &r->sst[RES]);
	if (ret)
		goto err_destroy_odd;
	ret = loco_ack_key_create_cfg(loco_channel_manager(ch),
	                              &(loco_ack_key_cfg_t){.flags = LOCO_ACK_LAZY}, &r->ack);
	if (ret)
		goto err_destroy_res;
	*out = r;
	return 0;

err_destroy_res:
	loco_sst_destroy(r->sst[RES]);
err_destroy_odd:
	loco_sst_destroy(r->sst[1]);
err_destroy_even:
	loco_sst_destroy(r->sst[0]);
err_free:
	free(r->vals);
	free(r->tmp);
	free(r->res);
	free(r->row[1]);
	free(r->row[0]);
	loco_handle_free(r);
	return ret;
}

void loco_reduce_destroy(loco_reduce_t *r)
{
	OBJ_DESTROY_CHECK(r);
	loco_ack_key_destroy(r->ack); /* waits for the pushes in flight */
	loco_sst_destroy(r->sst[RES]);
	loco_sst_destroy(r->sst[1]);
	loco_sst_destroy(r->sst[0]);
	free(r->vals);
	free(r->tmp);
	free(r->res);
	free(r->row[1]);
	free(r->row[0]);
	loco_handle_free(r);
}

uint64_t loco_reduce_round(const loco_reduce_t *r)
{
	OBJ_CHECK_OR(r, 0);
	return __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
}

/* send -- push this node's row of sst @t to @node, or to every present row when @node is 0. */
static int send(loco_reduce_t *r, int t, uint32_t node)
{
	return node == 0 ? loco_sst_push_broadcast(r->sst[t], r->ack)
	                 : loco_sst_push_to(r->sst[t], node, r->ack);
}

/* push_one -- store this node's row of sst @t (a table, or RES) and push it (send()). */
static int push_one(loco_reduce_t *r, int t, uint32_t node, int64_t deadline)
{
	int ret = loco_sst_store_mine(r->sst[t], t == RES ? r->res : r->row[t]);

	if (ret == 0)
		ret = send(r, t, node);
	if (ret == -EAGAIN) {
		ret =
		    acks(r, deadline); /* a second copy of the row to some peers changes nothing */
		if (ret == 0)
			ret = send(r, t, node);
	}
	if (node != 0 && (ret == -ENOENT || obj_push_gone_err(ret)))
		ret = 0; /* the root went meanwhile: the wait finds another */
	return ret < 0 ? ret : 0;
}

/*
 * push -- push table @t, or both when @t is -1. The pushes of earlier
 * rounds are not waited for first: only when the staging ring or the ack
 * key is full (-EAGAIN), until @deadline.
 */
static int push(loco_reduce_t *r, int t, int64_t deadline)
{
	int ret = push_one(r, t < 0 ? 0 : t, 0, deadline);

	if (ret == 0 && t < 0)
		ret = push_one(r, 1, 0, deadline);
	r->pushed_ns = 0; /* stamped by the next repush() look: no clock read per round */
	return ret;
}

/* push_errors -- the errors of completed pushes, without waiting: 0 or one not a peer's death. */
static int push_errors(loco_reduce_t *r)
{
	int ret = loco_ack_wait(r->ack, 0);

	return ret == -ETIMEDOUT || obj_push_gone_err(ret) ? 0 : ret;
}

/* repush -- push both rows again when a wait lasts (@fast: a present row is undecided). */
static void repush(loco_reduce_t *r, int fast)
{
	int64_t now = obj_now_ns();

	if (r->pushed_ns == 0) {
		r->pushed_ns = now; /* a push came since the last look: it counts from now */
		return;
	}
	if (now - r->pushed_ns > (fast ? REPUSH_FAST_NS : REPUSH_NS) &&
	    loco_ack_outstanding(r->ack) == 0) {
		/* a second copy changes nothing; nothing in flight: no wait */
		if (push(r, -1, -1) == 0 && hdr_res(r->res)->round != 0)
			push_one(r, RES, 0, -1);
	}
}

/* read_peer -- @id's row of table @t into tmp: its header, or NULL when it is gone. */
static struct row_hdr *read_peer(loco_reduce_t *r, int t, uint32_t id)
{
	if (loco_sst_read(r->sst[t], id, r->tmp) != 0)
		return NULL; /* -ENOENT: gone; -LOCO_ETORN: its node died mid-push */
	return hdr_of(r->tmp);
}

/*
 * peer_seen -- @id's header in table @t: as read last while the row's tag
 * stays, else read again (*@fresh set: tmp holds the whole row). NULL when
 * the row is gone. A poll reads only the rows that changed.
 */
static const struct seen *peer_seen(loco_reduce_t *r, int t, uint32_t id, int *fresh)
{
	struct seen *s = &r->seen[t][id];
	struct row_hdr *h;
	uint64_t tag;

	*fresh = 0;
	if (loco_sst_row_tag(r->sst[t], id, &tag) != 0) {
		s->valid = 0;
		return NULL;
	}
	if (s->valid && s->tag == tag)
		return s;
	h = read_peer(r, t, id);
	if (h == NULL) {
		s->valid = 0;
		return NULL;
	}
	*s = (struct seen){.tag = tag, .state = h->state, .round = h->round, .valid = 1};
	*fresh = 1;
	return s;
}

static int has_bit(const uint64_t *bits, uint32_t id)
{
	return bits[(id - 1) / 64] >> ((id - 1) % 64) & 1u;
}

static void set_bit(uint64_t *bits, uint32_t id)
{
	bits[(id - 1) / 64] |= 1ull << ((id - 1) % 64);
}

/*
 * heard_all -- deciding: whether every present row was heard in a table;
 * then the first round this node may take part in into *@first.
 */
static int heard_all(loco_reduce_t *r, uint64_t *first)
{
	uint32_t ids[LOCO_REDUCE_MAX_NODE];
	int n = loco_sst_rows(r->sst[0], ids, LOCO_REDUCE_MAX_NODE), all_had_me = 1;
	uint64_t m = 0;

	for (int i = 0; i < n && i < (int)LOCO_REDUCE_MAX_NODE; i++) {
		int heard = 0, gone = 0;

		if (ids[i] == r->me)
			continue;
		for (int t = 0; t < 2; t++) {
			struct row_hdr *h = read_peer(r, t, ids[i]);

			if (h == NULL) {
				gone = 1;
				break;
			}
			if (h->state == 0)
				continue;
			heard = 1;
			if (h->round > m) {
				m = h->round;
				all_had_me = 1;
			}
			if (h->round == m && m != 0 && !has_bit(h->present, r->me))
				all_had_me = 0;
		}
		if (!gone && !heard)
			return 0;
	}
	*first = m == 0 ? 1 : all_had_me ? m : m + 1;
	return 1;
}

/* decide -- this node's first round (see the top of the file). */
static int decide(loco_reduce_t *r, int64_t deadline, uint64_t *first)
{
	uint64_t f = 1;
	loco_waiter_t w;
	int ret;

	if (!r->hello) {
		/* round 0 in both tables: no value of a former round can match a new one */
		for (int t = 0; t < 2; t++) {
			memset(r->row[t], 0, sizeof(struct row_hdr));
			hdr_of(r->row[t])->state = 1;
		}
		ret = push(r, -1, deadline);
		if (ret)
			return ret;
		r->hello = 1;
	}
	loco_waiter_init(&w, loco_channel_manager(r->ch));
	for (unsigned n = 0; !heard_all(r, &f); n++) {
		if (loco_channel_partitioned(r->ch))
			return -LOCO_EPARTITION;
		if (n % SPINS == SPINS - 1) {
			if (deadline >= 0 && obj_now_ns() >= deadline)
				return -ETIMEDOUT;
			repush(r, 1);
		}
		loco_waiter_pause(&w);
	}
	*first = f;
	if (*first <= r->done)
		*first = r->done + 1; /* this node's rounds never go back */
	return 0;
}

/*
 * turns -- whether the root turns with the round for the @n present @ids: when the rows are one
 * sst line and every present peer's link is shared memory (loco_manager_member_fabric()). There a
 * push executes in the pushing thread, so the root's fold and its publishing run on the root's
 * CPU; turning the root spreads them over the nodes' CPUs, whatever the placement (4 nodes on
 * 2 cores, bound: 8 B 3.54 -> 3.40 us). Elsewhere it costs (tcp 8 B 29 -> 35 us, 4 KiB 40 ->
 * 53 us; shm 4 KiB 7.3 -> 8.2 us), so the root stays the lowest id. Nodes on more than one
 * host all have a tcp link, so they agree; a link still being made says no for a round (a node
 * that picks another root than its peers settles the round itself, see the top of the file).
 * Looked up again only when the present rows change.
 */
static int turns(loco_reduce_t *r, const uint32_t *ids, int n)
{
	loco_manager_t *m = loco_channel_manager(r->ch);

	if (n > (int)LOCO_REDUCE_MAX_NODE)
		n = (int)LOCO_REDUCE_MAX_NODE;
	if (n == r->turn_n && memcmp(ids, r->turn_ids, (size_t)n * sizeof(*ids)) == 0)
		return r->turn;
	r->turn = r->row_size <= TURN_ROW_MAX;
	for (int i = 0; i < n && r->turn; i++) {
		const char *name;

		if (ids[i] != r->me &&
		    (loco_manager_member_fabric(m, ids[i], &name) != 0 || strcmp(name, "shm") != 0))
			r->turn = 0;
	}
	memcpy(r->turn_ids, ids, (size_t)n * sizeof(*ids));
	r->turn_n = n;
	return r->turn;
}

/*
 * pick_root -- the root of round @rd, when ROOT_MIN rows or more are present (else 0): of the
 * @n present @ids (loco_sst_rows(), ascending), the first that takes part in the round (this
 * node, or a row decided with a first round <= @rd), from the lowest id on, or from position
 * @rd mod @n on (around) when the root turns (turns()). A row read decided last time is taken
 * as it was, without a look: its node decides again only after a partition, and a root that
 * does not take part costs one round the nodes settle themselves (which then forgets what the
 * rows showed, run_once()), never a wrong result.
 */
static uint32_t pick_root(loco_reduce_t *r, uint64_t rd, const uint32_t *ids, int n)
{
	if (n < ROOT_MIN)
		return 0;
	if (n > (int)LOCO_REDUCE_MAX_NODE)
		n = (int)LOCO_REDUCE_MAX_NODE;
	for (int k = 0, i = turns(r, ids, n) ? (int)(rd % (uint64_t)n) : 0; k < n;
	     k++, i = (i + 1) % n) {
		const struct seen *h;
		int fresh;

		if (ids[i] == r->me)
			return r->me;
		h = &r->seen[rd & 1][ids[i]];
		if (h->valid && first_of(h->state) != 0 && first_of(h->state) <= rd)
			return ids[i]; /* decided, as read last: no look (see below) */
		h = peer_seen(r, (int)(rd & 1), ids[i], &fresh);
		if (h != NULL && first_of(h->state) != 0 && first_of(h->state) <= rd)
			return ids[i];
	}
	return 0;
}

/* push_round -- push the row of the round entered: to the root, to nobody (we are the root),
 * or to every present row (no root; or @both: both tables, the first round after deciding). */
static int push_round(loco_reduce_t *r, int both, int64_t deadline)
{
	int t = (int)(r->round & 1), ret = 0;

	if (both || r->root == 0)
		return push(r, both ? -1 : t, deadline);
	if (r->root != r->me)
		ret = push_one(r, t, r->root, deadline);
	r->pushed_ns = 0;
	return ret;
}

/* enter -- enter the next round with the value at @in (step 1). */
static int enter(loco_reduce_t *r, const void *in, int64_t deadline)
{
	uint32_t ids[LOCO_REDUCE_MAX_NODE];
	struct row_hdr *h;
	uint64_t next;
	int n, ret, t;

	ret = push_errors(r);
	if (ret)
		return ret;
	if (r->first == 0) {
		ret = decide(r, deadline, &next);
		if (ret)
			return ret;
		r->first = next; /* final: peers may count on it once pushed */
		r->hello = 0;
	}
	next = r->done + 1 > r->first ? r->done + 1 : r->first;
	t = (int)(next & 1);
	h = hdr_of(r->row[t]);
	h->state = 1 | r->first << 1;
	hdr_of(r->row[!t])->state = h->state;
	memset(h->present, 0, sizeof(h->present));
	n = loco_sst_rows(r->sst[0], ids, LOCO_REDUCE_MAX_NODE);
	for (int i = 0; i < n && i < (int)LOCO_REDUCE_MAX_NODE; i++)
		set_bit(h->present, ids[i]);
	h->round = next;
	memcpy(slot_of(r->row[t]), in, r->size);
	memcpy(val_of(r, r->me), in, r->size);
	r->round = next;
	r->in_round = 1; /* even if the push fails: peers may have this value; waits re-push it */
	memset(r->contrib, 0, sizeof(r->contrib));
	memset(r->skipped, 0, sizeof(r->skipped));
	r->root = pick_root(r, next, ids, n); /* the rows present, as the bitmap above has them */
	/* the first round after deciding (decide() put it above done): a peer a round behind
	 * reads the other table; a failed push is re-pushed to both by the wait */
	return push_round(r, next == r->first, deadline);
}

/*
 * settle_all -- look at every present row (step 2): 1 when none is
 * pending. *@undecided: a pending row has not decided its first round.
 */
static int settle_all(loco_reduce_t *r, int *undecided)
{
	uint32_t ids[LOCO_REDUCE_MAX_NODE];
	int n = loco_sst_rows(r->sst[0], ids, LOCO_REDUCE_MAX_NODE), all = 1;
	uint64_t rd = r->round;
	int t = (int)(rd & 1);

	*undecided = 0;
	for (int i = 0; i < n && i < (int)LOCO_REDUCE_MAX_NODE; i++) {
		uint32_t id = ids[i];
		const struct seen *h;
		int fresh;

		if (id == r->me || has_bit(r->contrib, id) || has_bit(r->skipped, id) ||
		    (h = peer_seen(r, t, id, &fresh)) == NULL)
			continue;
		if (h->round == rd && !fresh) {
			r->seen[t][id].valid = 0; /* the value is needed: read it */
			if ((h = peer_seen(r, t, id, &fresh)) == NULL)
				continue;
		}
		if (first_of(h->state) == 0) {
			*undecided = 1; /* deciding, or not heard in this table yet */
			all = 0;
		} else if (first_of(h->state) > rd) {
			set_bit(r->skipped, id);
		} else if (h->round == rd) {
			memcpy(val_of(r, id), slot_of(r->tmp), r->size);
			set_bit(r->contrib, id);
		} else if (h->round > rd + 1) {
			set_bit(r->skipped, id); /* cannot happen to a node that counts us in */
		} else {
			all = 0;
		}
	}
	return all;
}

#define FOLD(T, EXPR)                                         \
	do {                                                  \
		T *a_ = acc;                                  \
		const T *b_ = in;                             \
		for (size_t i_ = 0; i_ < r->size / 8; i_++) { \
			T x = a_[i_], y = b_[i_];             \
			a_[i_] = (EXPR);                      \
		}                                             \
	} while (0)

/* fold -- @acc op= @in. */
static void fold(loco_reduce_t *r, void *acc, const void *in)
{
	switch (r->op) {
	case LOCO_REDUCE_SUM_U64:
		FOLD(uint64_t, x + y);
		break;
	case LOCO_REDUCE_SUM_I64:
		FOLD(uint64_t, x + y);
		break; /* two's complement */
	case LOCO_REDUCE_SUM_DOUBLE:
		FOLD(double, x + y);
		break;
	case LOCO_REDUCE_MIN_U64:
		FOLD(uint64_t, y < x ? y : x);
		break;
	case LOCO_REDUCE_MIN_I64:
		FOLD(int64_t, y < x ? y : x);
		break;
	case LOCO_REDUCE_MIN_DOUBLE:
		FOLD(double, y < x ? y : x);
		break;
	case LOCO_REDUCE_MAX_U64:
		FOLD(uint64_t, y > x ? y : x);
		break;
	case LOCO_REDUCE_MAX_I64:
		FOLD(int64_t, y > x ? y : x);
		break;
	case LOCO_REDUCE_MAX_DOUBLE:
		FOLD(double, y > x ? y : x);
		break;
	default:
		r->fn(acc, in, r->size, r->arg);
		break;
	}
}

/* combine -- the contributors' values in ascending id order into @out (step 3). */
static void combine(loco_reduce_t *r, void *out, struct loco_reduce_info *info)
{
	struct loco_reduce_info inf = {.round = r->round};
	uint8_t *acc = NULL;

	set_bit(r->contrib, r->me);
	for (uint32_t w = 0; w < LOCO_REDUCE_MAX_NODE / 64; w++) {
		inf.members[w] = r->contrib[w];
		for (uint64_t b = r->contrib[w]; b != 0; b &= b - 1) {
			uint32_t id = w * 64 + (uint32_t)__builtin_ctzll(b) + 1;

			inf.count++;
			if (acc == NULL)
				acc =
				    val_of(r, id); /* the lowest id's value, folded into in place */
			else
				fold(r, acc, val_of(r, id));
		}
	}
	memcpy(out, acc, r->size);
	if (info != NULL)
		*info = inf;
}

/* res_saw -- whether the root of result @h settled @id (a contributor or a listed skip). */
static int res_saw(const struct res_hdr *h, uint32_t id)
{
	if (has_bit(h->contrib, id))
		return 1;
	for (int k = 0; k < RES_SKIPS && h->skip[k] != 0; k++)
		if (h->skip[k] == id)
			return 1;
	return 0;
}

/*
 * take_result -- the root's result of the round, when it published it and it may be taken: it
 * counts this node in, and the root settled every row present here (so no row this node waits
 * for is left out). 1: taken into @out and @info; 0: not yet.
 */
static int take_result(loco_reduce_t *r, void *out, struct loco_reduce_info *info)
{
	uint32_t ids[LOCO_REDUCE_MAX_NODE];
	struct loco_reduce_info inf = {.round = r->round};
	struct seen *s = &r->res_seen;
	struct res_hdr *h;
	uint64_t tag;
	int n;

	if (loco_sst_row_tag(r->sst[RES], r->root, &tag) != 0)
		return 0;
	if (s->valid && s->node == r->root && s->tag == tag && s->round != r->round)
		return 0; /* the row read last, not this round's */
	if (loco_sst_read(r->sst[RES], r->root, r->tmp) != 0)
		return 0;
	h = hdr_res(r->tmp);
	*s = (struct seen){.tag = tag, .round = h->round, .node = r->root, .valid = 1};
	if (h->round != r->round || !has_bit(h->contrib, r->me))
		return 0;
	n = loco_sst_rows(r->sst[0], ids, LOCO_REDUCE_MAX_NODE);
	for (int i = 0; i < n && i < (int)LOCO_REDUCE_MAX_NODE; i++)
		if (!res_saw(h, ids[i]))
			return 0;
	for (uint32_t w = 0; w < LOCO_REDUCE_MAX_NODE / 64; w++) {
		inf.members[w] = h->contrib[w];
		inf.count += h->contrib[w] != 0 ? (uint32_t)__builtin_popcountll(h->contrib[w]) : 0;
	}
	memcpy(out, slot_res(r->tmp), r->size);
	if (info != NULL)
		*info = inf;
	return 1;
}

/*
 * publish -- the root: the round's result (@out) to every present row. A push that fails is
 * not the round's failure: the peers' waits re-push, and ours push the result again.
 */
static void publish(loco_reduce_t *r, const void *out, int64_t deadline)
{
	struct res_hdr *h = hdr_res(r->res);
	int k = 0;

	h->round = r->round;
	memset(h->skip, 0, sizeof(h->skip));
	for (uint32_t w = 0; w < LOCO_REDUCE_MAX_NODE / 64; w++) {
		h->contrib[w] = r->contrib[w];
		for (uint64_t b = r->skipped[w]; b != 0 && k < RES_SKIPS; b &= b - 1)
			h->skip[k++] = (uint16_t)(w * 64 + (uint32_t)__builtin_ctzll(b) + 1);
	}
	memcpy(slot_res(r->res), out, r->size);
	push_one(r, RES, 0, deadline);
}

/*
 * check_root -- in a lasting wait: when the root's row went, the round's new root (or none), and
 * this node's row pushed there (to every row when there is none).
 */
static void check_root(loco_reduce_t *r)
{
	uint32_t ids[LOCO_REDUCE_MAX_NODE];

	if (r->root == 0 || loco_sst_row_present(r->sst[0], r->root))
		return;
	r->root = pick_root(r, r->round, ids, loco_sst_rows(r->sst[0], ids, LOCO_REDUCE_MAX_NODE));
	push_round(r, 0, -1);
}

/* reset -- partitioned: the next call decides again, as a joiner (peers drop our row). */
static int reset(loco_reduce_t *r)
{
	memset(r->seen, 0, sizeof(r->seen)); /* rows come back as new ones */
	memset(&r->res_seen, 0, sizeof(r->res_seen));
	r->first = 0;
	r->hello = 0;
	r->in_round = 0;
	return -LOCO_EPARTITION;
}

static int run_once(loco_reduce_t *r, const void *in, void *out, struct loco_reduce_info *info,
                    int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	int undecided = 0, taken = 0, ret;
	loco_waiter_t w;

	if (loco_channel_partitioned(r->ch))
		return -LOCO_EPARTITION;
	if (!r->in_round) {
		ret = enter(r, in, deadline);
		if (ret)
			return ret;
	}
	loco_waiter_init(&w, loco_channel_manager(r->ch));
	for (unsigned n = 0;; n++) {
		int look = n % SPINS == SPINS - 1, rooted = r->root != 0 && r->root != r->me;

		if (rooted && take_result(r, out, info)) {
			taken = 1;
			break;
		}
		/* under a root, the rows seldom all come here: looked at on every SPINS-th poll */
		if ((!rooted || look) && settle_all(r, &undecided))
			break;
		if (look) {
			/* (the look after the loop keeps a partitioned node from completing) */
			if (loco_channel_partitioned(r->ch))
				return -LOCO_EPARTITION;
			if (deadline >= 0 && obj_now_ns() >= deadline)
				return -ETIMEDOUT;
			repush(r, undecided);
			check_root(r);
		}
		loco_waiter_pause(&w);
	}
	loco_waiter_done(&w);
	/* rows that vanished because this node was excluded look like members that left: never
	 * complete as a smaller cluster of our own */
	if (loco_channel_partitioned(r->ch))
		return -LOCO_EPARTITION;
	if (!taken) {
		/* the root did not serve (pick_root() took a stale row?): look again */
		if (r->root != 0 && r->root != r->me)
			memset(r->seen, 0, sizeof(r->seen));
		combine(r, out, info);
		if (r->root == r->me)
			publish(r, out, deadline);
	}
	r->in_round = 0;
	__atomic_store_n(&r->done, r->round, __ATOMIC_RELEASE);
	return 0;
}

int loco_reduce_run(loco_reduce_t *r, const void *in, void *out, struct loco_reduce_info *info,
                    int64_t timeout_ns)
{
	int ret;

	OBJ_CHECK(r);
	if (in == NULL || out == NULL)
		return -EINVAL;
	ret = run_once(r, in, out, info, timeout_ns);
	return ret == -LOCO_EPARTITION ? reset(r) : ret;
}
