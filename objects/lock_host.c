/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock_host.c -- the lock's host failover: the moves, peer_leave and the
 * syncs (lock.c has the API, the grants and the attempts; lock_impl.h
 * the state they share). Public API only.
 *
 * Host failover. Every node's object has the two words (and the meta word
 * M at offset 16: epoch << 32 | host, 0 meaning "epoch 0, the host given
 * at create"); only the current host's are used. When the host leaves
 * (peer_leave(host, view), on the progress thread), every member picks the
 * same new host: the lowest id among itself and the channel's present
 * peers that hold the lock's word, and the same epoch: max(view, epoch +
 * 1). A new host resets its own words to free (token 0). The fencing
 * token a node sees is epoch << 44 | the word's token, so every token of
 * the new host exceeds every token of the old one; the grant of word
 * token 1 under an epoch > 0 reports loco_lock_recovered(). Nobody posts
 * to the new host before one takeover time T after it learned of the
 * move (struct lk_host.not_before): the old host executed its last CAS
 * before it left, so a lease it granted (or renewed) ends within L of a
 * post made before the view change, and T >= L (1 + drift) + margin. A
 * hold on the old host ends with it (renew and release return
 * -ECONNRESET). A partitioned node never moves the lock: it marks it
 * "to sync" (so do a new object, an acquire or try that finds this node
 * partitioned, and a new incarnation of this node: a rejoin, whether or
 * not the exclusion's peer_leave calls came first), and its next acquire first reads
 * the M words of its paired peers and adopts the highest epoch (waiting T
 * too when that moves the host): a node excluded and rejoined, or
 * created after a move, learns where the lock went.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <loco.h>

#include "host_path.h"
#include "lock_impl.h"
#include "obj_util.h"

#define MAX_PEERS   256 /* peers read by a move or a sync */
#define SYNC_TMO_NS (1000ll * 1000000ll)

/*
 * lk_move -- under move_lock: make @node the host at @epoch, usable from
 * @not_before on; the old host's path is lost for good. A new host resets
 * its own words (nobody uses them before not_before). -ENOMEM: the lock
 * is lost (-ECONNRESET), as before failover existed.
 */
static int lk_move(loco_lock_t *lk, uint32_t node, uint32_t epoch, int64_t not_before)
{
	struct lk_host *cur = lk->hs, *n = calloc(1, sizeof(*n));
	uint64_t *w = loco_region_ptr(lk->word);

	host_path_lose(&cur->hp);
	if (n == NULL)
		return -ENOMEM;
	n->node = node;
	n->epoch = epoch;
	n->not_before = not_before;
	host_path_init(&n->hp);
	n->prev = cur;
	if (node == lk->me && (node != cur->node || epoch != cur->epoch)) {
		__atomic_store_n(&w[W_OFF / 8], 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&w[O_OFF / 8], 0, __ATOMIC_SEQ_CST);
	}
	__atomic_store_n(&w[M_OFF / 8], M_MAKE(epoch, node), __ATOMIC_SEQ_CST);
	__atomic_store_n(&lk->hs, n, __ATOMIC_RELEASE); /* pairs with lk_host_cur() */
	return 0;
}

/*
 * lk_peer_leave -- on the progress thread: when the host left, move the
 * lock to the lowest id among this node and the channel's present peers
 * that hold its word (every member computes the same from the same view).
 * A holder that leaves is recovered by its lease, not here: it may still
 * run (declared failed while only slow or cut off). A partitioned node
 * (excluded: it sees everyone leave) never moves the lock: it syncs from
 * its peers once it is back.
 */
static void lk_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_lock_t *lk = arg;
	loco_channel_t *ch = loco_object_channel(obj);
	uint32_t ids[MAX_PEERS], best = lk->me;
	struct lk_host *cur;
	uint64_t epoch;
	loco_rref_t rr;
	int n;

	pthread_mutex_lock(&lk->move_lock);
	cur = lk->hs;
	if (lk_partitioned(lk)) {
		__atomic_store_n(&lk->need_sync, 2, __ATOMIC_RELEASE);
		if (node == cur->node)
			host_path_lose(&cur->hp);
		goto out;
	}
	if (node != cur->node)
		goto out;
	n = loco_channel_peers(ch, ids, MAX_PEERS);
	for (int i = 0; i < n && i < MAX_PEERS; i++) {
		if (ids[i] == node || ids[i] >= best)
			continue;
		if (loco_region_remote(lk->word, ids[i], &rr) == 0) {
			best = ids[i];
			break; /* ascending */
		}
	}
	epoch = view > cur->epoch ? view : (uint64_t)cur->epoch + 1;
	if (epoch > EPOCH_MAX)
		host_path_lose(&cur->hp); /* 2^20 views: lost, as before failover */
	else
		lk_move(lk, best, (uint32_t)epoch, obj_now_ns() + lk->takeover_ns);
out:
	pthread_mutex_unlock(&lk->move_lock);
}

const struct loco_object_ops lk_ops = {
    .peer_leave = lk_peer_leave,
};

/*
 * lk_sync -- under the claim: read the M word of every paired peer and
 * adopt the highest epoch's host, usable one takeover time from now when
 * that moves it (its old holders' leases end first). A lost path to the
 * same host (this node was cut off, not the host) is looked up afresh.
 * Done once a peer answered. Returns 1 when the lock must not be used yet
 * (peers, but none answered), else 0 (with no peer, the host at hand is
 * used and the sync stays due: the channel may not be joined yet).
 */
static int lk_sync(loco_lock_t *lk)
{
	uint32_t ids[MAX_PEERS], bnode, bepoch;
	int n = loco_channel_peers(loco_object_channel(lk->obj), ids, MAX_PEERS), answered = 0;
	struct lk_host *cur = lk_host_cur(lk);
	loco_rref_t rr;

	bnode = cur->node;
	bepoch = cur->epoch;
	if (n == 0) /* after an exclusion (2), the host at hand may be this stale node */
		return __atomic_load_n(&lk->need_sync, __ATOMIC_ACQUIRE) == 2;
	if (loco_ack_wait(lk->sack, 0) == -ETIMEDOUT && loco_ack_outstanding(lk->sack) > 0)
		return 1; /* an earlier READ may still land in the slot: later */
	for (int i = 0; i < n && i < MAX_PEERS; i++) {
		uint64_t mw;

		if (loco_region_remote(lk->word, ids[i], &rr) != 0)
			continue;
		if (loco_read(lk->res, RES_SYNC * sizeof(uint64_t), &rr, M_OFF, sizeof(uint64_t),
		              lk->sack) != 0)
			continue;
		if (loco_ack_wait(lk->sack, SYNC_TMO_NS) != 0) {
			if (loco_ack_outstanding(lk->sack) > 0)
				break; /* a READ may still land in the slot: try again later */
			continue;
		}
		answered++;
		mw = __atomic_load_n(res_ptr(lk, RES_SYNC), __ATOMIC_ACQUIRE);
		if (mw != 0 && mw >> 32 > bepoch) {
			bepoch = (uint32_t)(mw >> 32);
			bnode = (uint32_t)mw;
		}
	}
	if (answered == 0)
		return 1;
	pthread_mutex_lock(&lk->move_lock);
	cur = lk->hs;
	if (bepoch > cur->epoch)
		lk_move(lk, bnode, bepoch, obj_now_ns() + lk->takeover_ns);
	else if (__atomic_load_n(&cur->hp.lost, __ATOMIC_ACQUIRE))
		lk_move(lk, cur->node, cur->epoch, 0);
	__atomic_store_n(&lk->need_sync, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lk->move_lock);
	return 0;
}

/*
 * lk_host_ready -- under the claim: the host to use now, after a sync if
 * one is due; NULL when it may not be used yet (the move's wait, or no
 * peer answered the sync): busy, try later.
 */
struct lk_host *lk_host_ready(loco_lock_t *lk)
{
	uint64_t inc = loco_manager_incarnation(lk->m);
	struct lk_host *hs;

	/*
	 * Rejoined as a new incarnation: this node was excluded, and the lock
	 * may have moved meanwhile, whether or not the exclusion's peer_leave
	 * calls came before this acquire (seen on verbs: a stopped host woke
	 * up, rejoined, and took over its old word's stale hold).
	 */
	if (inc != lk->inc) {
		lk->inc = inc;
		__atomic_store_n(&lk->need_sync, 2, __ATOMIC_RELEASE);
	}
	if (__atomic_load_n(&lk->need_sync, __ATOMIC_ACQUIRE) && lk_sync(lk))
		return NULL;
	hs = lk_host_cur(lk);
	if (hs->not_before != 0 && obj_now_ns() < hs->not_before)
		return NULL;
	if (hs != lk->seen_hs) {
		lk->seen_hs = hs; /* a new host's word starts free at token 0 */
		lk->seen = 0;
	}
	return hs;
}
