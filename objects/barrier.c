/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * barrier.c -- LOCO's barrier: a counter per node in an sst (rows of one
 * 8-byte word, node ids 1 .. LOCO_BARRIER_MAX_NODE). Public API only.
 *
 * A node's row is the episode it entered last. loco_barrier_wait():
 *   1. enter episode e = count + 1: store e in the own row and push it
 *      to every present row's node, attached to the barrier's ack key;
 *      remember which rows were present (the episode's participants);
 *   2. wait until every participant whose row is still present shows
 *      e or more (a participant that left is ignored), and return.
 * The acks of step 1 are not waited for: the next episode's step 1 reaps
 * them. Nothing a caller relies on needs them (arrivals are the peers'
 * rows, and a push that failed is superseded by the next, larger one, or
 * by the re-push below), and waiting for them cost a round trip on top
 * of the arrival (tcp, 2 nodes: 18.5-26.6 us a round against Open MPI's
 * 8.4-9.4).
 * Safety: a row shows e only once its node entered e, and rows only grow
 * (a node's pushes land in order; a row that vanishes is zeroed, and its
 * node no longer counts). So no node passes e before every participant
 * still there entered it. Memory: whatever a node wrote before entering
 * e (to any object, on the same links) landed before its row showed e,
 * and the acquire read of the row makes it visible; unless its link
 * failed meanwhile: the write is lost (its ack key says so), and the
 * re-push below shows e over the rebuilt link.
 *
 * Joining: a node whose count is 0 first READs every peer's own row at
 * its source (loco_sst_fetch(): not our replica, which a peer fills only
 * when it next pushes) and enters the largest episode found, or 1: a
 * joiner takes part in the episode the others are in. For that first
 * episode, what it fetched counts as a floor under each peer's row. A
 * node that pairs while others are in episode e is not among their
 * participants of e, so it cannot hold them up before its first wait;
 * from e + 1 on it is.
 *
 * Pushes are copied inline when posted (loco_sst_set_direct()): no ring,
 * whose slots the pushes not waited for would fill. The copy is what the
 * memory rule above rests on: a WRITE that read the row only when the
 * fabric sent it (on tcp a queued request, on verbs a DMA) could carry
 * e + 1, stored after a later write of the node, and show e + 1 before
 * that write landed (barrier-stress saw a node leave e + 1 with a peer's
 * "entered" row still at e; sst-push-copy is the test). A wait that
 * lasts pushes the row again every 50 ms: a peer whose data link failed
 * and was rebuilt stays in the view (a failed link is only a suspicion),
 * and the push lost with the old link would otherwise hold it up for good.
 *
 * Partition: while the node cannot reach a majority of its view
 * (loco_channel_partitioned()) a wait returns -LOCO_EPARTITION and the
 * episode is abandoned; the next wait starts over as a joiner's first
 * one (it fetches the others' rows), never below the row it had.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/sst.h>

#include "obj_util.h"

#define SPINS      64u        /* polls before the clock is read (deadline, re-push) */
#define REPUSH_NS  50000000ll /* a wait that lasts this long pushes the row again */
#define PART_EVERY 8u         /* polls per look at the partition flag (a clock read) */

struct loco_barrier {
	loco_channel_t *ch;
	loco_sst_t *sst;
	loco_ack_key_t *ack;
	uint32_t me;
	uint64_t count;    /* the episode entered last; 0 after a partition: fetch again */
	uint64_t last;     /* the episode entered before a partition reset count */
	int64_t pushed_ns; /* when the row was last pushed */
	int in_episode;    /* entered, not passed yet (a wait timed out) */
	int have_floor;    /* floor[] holds the first episode's fetch */
	uint32_t nparts;   /* participants of the current episode */
	uint32_t part[LOCO_BARRIER_MAX_NODE];
	uint64_t floor[LOCO_BARRIER_MAX_NODE + 1]; /* by node id */
};

/*
 * acks -- wait for the ack key until @deadline. Returns 0 (the failures of
 * a peer that died or destroyed its barrier included: its row is gone or
 * going), -ETIMEDOUT while operations are outstanding, or another error.
 */
static int acks(loco_barrier_t *b, int64_t deadline)
{
	int ret = loco_ack_wait(b->ack, obj_left_ns(deadline));

	if (ret == -ETIMEDOUT && loco_ack_outstanding(b->ack) != 0)
		return -ETIMEDOUT;
	if (ret == -ETIMEDOUT) /* the last completion came after the test: test again */
		ret = loco_ack_wait(b->ack, 0);
	return ret == 0 || obj_push_gone_err(ret) ? 0 : ret;
}

/* loco_barrier_create -- an sst of 8-byte rows pushed straight from the row, an ack key. */
int loco_barrier_create(loco_channel_t *ch, const char *name, loco_barrier_t **out)
{
	loco_barrier_t *b;
	int ret;

	if (ch == NULL || name == NULL || out == NULL)
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*b), (void **)&b);
	if (ret)
		return ret;
	b->me = loco_manager_node_id(loco_channel_manager(ch));
	b->ch = ch;
	ret = loco_sst_create(ch, name, sizeof(uint64_t), LOCO_BARRIER_MAX_NODE, &b->sst);
	if (ret)
		goto err_free;
	ret = loco_sst_set_direct(b->sst);
	if (ret)
		goto err_destroy_sst;
	/* lazy: nobody waits for the pushes soon; on tcp their ACKs ride on the peers' pushes */
	ret = loco_ack_key_create_cfg(loco_channel_manager(ch),
	                              &(loco_ack_key_cfg_t){.flags = LOCO_ACK_LAZY}, &b->ack);
	if (ret)
		goto err_destroy_sst;
	*out = b;
	return 0;

err_destroy_sst:
	loco_sst_destroy(b->sst);
err_free:
	loco_handle_free(b);
	return ret;
}

void loco_barrier_destroy(loco_barrier_t *b)
{
	OBJ_DESTROY_CHECK(b);
	loco_ack_key_destroy(b->ack); /* waits for the pushes in flight */
	loco_sst_destroy(b->sst);
	loco_handle_free(b);
}

/* participants -- the nodes whose rows are present now, this node excluded. */
static void participants(loco_barrier_t *b)
{
	uint32_t ids[LOCO_BARRIER_MAX_NODE];
	int n = loco_sst_rows(b->sst, ids, LOCO_BARRIER_MAX_NODE);

	b->nparts = 0;
	for (int i = 0; i < n && i < (int)LOCO_BARRIER_MAX_NODE; i++)
		if (ids[i] != b->me)
			b->part[b->nparts++] = ids[i];
}

/*
 * fetch -- READ every participant's own count; set the floors. Returns 0
 * and the largest count in *@max; -ETIMEDOUT, or a post error.
 */
static int fetch(loco_barrier_t *b, int64_t deadline, uint64_t *max)
{
	uint64_t m = 0;
	int ret;

	for (uint32_t i = 0; i < b->nparts; i++) {
		ret = loco_sst_fetch(b->sst, b->part[i], b->ack);
		if (ret && ret != -ENOENT && ret != -ENOTCONN)
			return ret; /* those posted complete on their own; the next call waits */
	}
	ret = acks(b, deadline);
	if (ret)
		return ret;
	memset(b->floor, 0, sizeof(b->floor));
	for (uint32_t i = 0; i < b->nparts; i++) {
		uint64_t c = 0; /* stays 0 when the fetch was not posted (-ENODATA) */

		loco_sst_fetch_result(b->sst, b->part[i], &c);
		b->floor[b->part[i]] = c;
		if (c > m)
			m = c;
	}
	b->have_floor = 1;
	*max = m;
	return 0;
}

/* enter -- enter the next episode (step 1). */
static int enter(loco_barrier_t *b, int64_t deadline)
{
	uint64_t next = b->count + 1;
	int ret;

	participants(b);
	if (b->count == 0) {
		uint64_t max;

		ret = fetch(b, deadline, &max);
		if (ret)
			return ret;
		if (max > next)
			next = max;
		if (b->last > next)
			next = b->last; /* our row never goes back */
	}
	/*
	 * The pushes of the episodes before: reaped, not waited for (see the
	 * head comment), unless so many are outstanding that the key could
	 * fill (a peer that stopped answering, not yet out of the view).
	 */
	if (loco_ack_outstanding(b->ack) > LOCO_ACK_KEY_SLOTS / 2) {
		ret = acks(b, deadline);
		if (ret)
			return ret;
	}
	(void)loco_ack_wait(b->ack, 0); /* their failures: superseded by this push */
	ret = loco_sst_store_mine(b->sst, &next);
	if (ret)
		return ret;
	ret = loco_sst_push_broadcast(b->sst, b->ack);
	if (ret < 0) {
		/* pushes already posted land and complete on their own */
		if (acks(b, deadline) == -ETIMEDOUT)
			return -ETIMEDOUT;
		return ret;
	}
	b->count = next;
	b->in_episode = 1;
	b->pushed_ns = obj_now_ns();
	return 0;
}

/* arrived -- whether every participant still present has entered the episode (step 2). */
static int arrived(loco_barrier_t *b)
{
	for (uint32_t i = 0; i < b->nparts; i++) {
		uint32_t node = b->part[i];
		uint64_t c;

		if (loco_sst_read(b->sst, node, &c) != 0)
			continue; /* gone: -ENOENT (an 8-byte row is never torn) */
		if (b->have_floor && b->floor[node] > c)
			c = b->floor[node];
		if (c < b->count)
			return 0;
	}
	return 1;
}

/*
 * partitioned -- the node cannot reach a majority of its view: the wait
 * fails, and the next one starts over as a joiner would (it fetches the
 * others' episodes), since the peers may have changed meanwhile.
 */
static int partitioned(loco_barrier_t *b)
{
	if (b->count > b->last)
		b->last = b->count;
	b->count = 0;
	b->in_episode = 0;
	b->have_floor = 0;
	return -LOCO_EPARTITION;
}

/* wait_once -- enter (unless a timed-out call did), wait for arrivals. */
static int wait_once(loco_barrier_t *b, int64_t timeout_ns)
{
	loco_waiter_t w;
	int64_t deadline;
	int ret;

	if (loco_channel_partitioned(b->ch))
		return -LOCO_EPARTITION;
	deadline = obj_deadline(timeout_ns);
	if (!b->in_episode) {
		ret = enter(b, deadline);
		if (ret)
			return ret;
	}
	/* the manager's wait policy (LOCO_WAIT): spin, sleep or block between polls */
	loco_waiter_init(&w, loco_channel_manager(b->ch));
	for (unsigned spin = 0; !arrived(b); spin++) {
		int64_t now;

		/* never pass as a smaller cluster of our own (after the loop too); a coarse
		 * clock read: once in PART_EVERY looks */
		if (spin % PART_EVERY == 0 && loco_channel_partitioned(b->ch))
			return -LOCO_EPARTITION;
		if (spin < SPINS) {
			loco_waiter_pause(&w);
			continue;
		}
		now = obj_now_ns();
		if (deadline >= 0 && now >= deadline)
			return -ETIMEDOUT;
		if (now - b->pushed_ns > REPUSH_NS && loco_ack_outstanding(b->ack) == 0) {
			/*
			 * A data link that failed and was rebuilt while its peer
			 * stayed in the view lost our push: push the row again
			 * (it only grows, so a second copy changes nothing).
			 */
			loco_sst_push_broadcast(b->sst, b->ack);
			b->pushed_ns = now;
		}
		loco_waiter_pause(&w);
	}
	loco_waiter_done(&w);
	/*
	 * Rows that vanished because this node was just excluded (it drops
	 * every member) look like participants that left: the partition flag,
	 * set before the members are dropped, says which it was.
	 */
	if (loco_channel_partitioned(b->ch))
		return -LOCO_EPARTITION;
	b->in_episode = 0;
	b->have_floor = 0;
	return 0;
}

int loco_barrier_wait(loco_barrier_t *b, int64_t timeout_ns)
{
	int ret;

	OBJ_CHECK(b);
	ret = wait_once(b, timeout_ns);
	return ret == -LOCO_EPARTITION ? partitioned(b) : ret;
}

uint64_t loco_barrier_episode(const loco_barrier_t *b)
{
	OBJ_CHECK_OR(b, 0);
	return b->count;
}
