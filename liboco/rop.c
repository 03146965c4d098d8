/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rop.c -- remote operations and fences: the data path. Posting takes no
 * lock, looks nothing up by name and updates no shared counter: the remote
 * reference carries the node, the node's link is one lock-free table probe
 * (links.h), or none for a bound handle (loco_rop_post(): the slot found
 * at bind, checked by its generation), and a fence is one atomic load
 * unless a fence is owed (then a CAS on the peer's fence generation,
 * chan.h).
 */
#include <errno.h>
#include <string.h>

#include "chan.h"
#include "handle.h"
#include "log.h"
#include "member.h"

static int range_ok(size_t off, size_t len, uint64_t total)
{
	return off <= total && len <= total - off;
}

/*
 * fence_take -- whether this operation to @node is the first since a
 * loco_channel_fence(): then it carries the fabric fence. The CAS on the
 * peer's generation makes exactly one poster (or the peer's leave) take it.
 */
static struct lc_peer *fence_take(loco_channel_t *ch, uint32_t node)
{
	struct lc_peer *p;
	uint32_t g, old;

	if (__atomic_load_n(&ch->fence_pending, __ATOMIC_ACQUIRE) == 0)
		return NULL;
	p = lc_peer_get(ch, node);
	if (p == NULL)
		return NULL;
	g = __atomic_load_n(&ch->fence_gen, __ATOMIC_ACQUIRE);
	old = __atomic_load_n(&p->fence_gen, __ATOMIC_ACQUIRE);
	if (old == g || !__atomic_compare_exchange_n(&p->fence_gen, &old, g, 0, __ATOMIC_ACQ_REL,
	                                             __ATOMIC_ACQUIRE))
		return NULL;
	__atomic_sub_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
	return p;
}

/* fence_untake -- the fenced operation was not posted: the next one must carry it. */
static void fence_untake(loco_channel_t *ch, struct lc_peer *p)
{
	uint32_t g = __atomic_load_n(&ch->fence_gen, __ATOMIC_ACQUIRE);

	if (__atomic_compare_exchange_n(&p->fence_gen, &g, g - 1, 0, __ATOMIC_ACQ_REL,
	                                __ATOMIC_RELAXED))
		__atomic_add_fetch(&ch->fence_pending, 1, __ATOMIC_RELEASE);
}

int loco_channel_fence(loco_channel_t *ch)
{
	uint32_t n = 0;
	int ret = lc_handle_ok(ch);

	if (ret)
		return ret;
	pthread_mutex_lock(&ch->m->lock);
	for (uint32_t i = 0; i < LC_CHAN_PEERS; i++) {
		struct lc_peer *p = lc_peer_at(ch, i);

		if (p != NULL && __atomic_load_n(&p->present, __ATOMIC_RELAXED))
			n++;
	}
	/* peers that had not taken the previous fence owe this one: count them all again */
	__atomic_store_n(&ch->fence_pending, n, __ATOMIC_RELEASE);
	__atomic_add_fetch(&ch->fence_gen, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&ch->m->lock);
	return 0;
}

/*
 * executed -- @wr to @node ran at post time (fab_post_now()) with @status:
 * nothing to attach; a failure reaches @acks and the link's owner as a
 * failed completion would.
 */
static void executed(loco_manager_t *m, uint32_t node, int status, loco_ack_key_t *const *acks,
                     unsigned nacks)
{
	unsigned keys = 0;

	if (status == 0)
		return;
	for (unsigned i = 0; i < nacks; i++) {
		if (acks[i] != NULL) {
			lc_ack_fail_now(acks[i], node, status);
			keys++;
		}
	}
	if (keys == 0)
		lc_log_warn("manager: unacknowledged operation to node %u failed: %s",
		            (unsigned)node, strerror(-status));
	lc_member_link_report(m, node, status);
}

/*
 * post -- post @wr (rkey and all) on the link to @node, found through
 * @cache (lc_links_hold_cached()) or, NULL, by a probe: executed at once
 * where the provider can (shm: no slot, no completion, no reap), else
 * attached to @acks and queued.
 */
static int post(loco_region_t *local, uint32_t node, uint64_t *cache, struct fab_wr *wr,
                loco_ack_key_t *const *acks, unsigned nacks)
{
	loco_channel_t *ch = local->obj->ch;
	loco_manager_t *m = ch->m;
	struct lc_peer *fenced = fence_take(ch, node);
	struct lc_link_hazard *hz;
	struct fab_link *link;
	int ret, status, ran = 0, attached = 0;

	if (fenced != NULL)
		wr->flags |= FAB_WR_FENCE;
	wr->lkey = local->mr->lkey;
	ret = lc_ack_keys_check(&m->acks, acks, nacks); /* as the attach below would */
	if (ret)
		goto err_untake;
	/* one lookup for both tries */
	ret = cache != NULL ? lc_links_hold_cached(&m->links, node, cache, &link, &hz)
	                    : lc_links_hold(&m->links, node, &link, &hz);
	if (ret)
		goto err_untake;
	ret = link != NULL ? fab_post_now(link, wr, &status) : -ENOTCONN;
	if (ret == 0) {
		ran = 1;
	} else if (ret == -EWOULDBLOCK) {
		ret = nacks > 0 ? lc_ack_attach_n(&m->acks, acks, nacks, &wr->wrid) : 0;
		if (ret == 0 && nacks > 0) {
			attached = 1;
			wr->flags |= FAB_WR_SIGNALED;
			if (lc_ack_keys_lazy(acks, nacks))
				wr->flags |= FAB_WR_LAZY;
		}
		if (ret == 0)
			ret = fab_post(link, wr, 1);
		if (ret != 0 && attached)
			lc_ack_detach_n(&m->acks, acks, nacks, wr->wrid);
	}
	lc_links_release(hz);
	if (ran)
		executed(m, node, status, acks, nacks); /* (not holding the link) */
	if (ret == 0)
		return 0;
err_untake:
	if (fenced != NULL)
		fence_untake(ch, fenced);
	return ret;
}

/*
 * wr_make -- @wr for @opcode (FAB_OP_*) between [@loff, @loff + @len) of
 * @local and @roff of @remote: every check the remote operations share
 * (bounds; for an atomic, 8 bytes, both ends 8-byte aligned). 0 or -EINVAL.
 */
static int wr_make(int opcode, unsigned flags, loco_region_t *local, uint64_t loff,
                   const loco_rref_t *remote, uint64_t roff, uint64_t len, uint64_t compare,
                   uint64_t swap, struct fab_wr *wr)
{
	int atomic = opcode == FAB_OP_CAS || opcode == FAB_OP_FAA;

	if (atomic)
		len = 8;
	if (local == NULL || remote == NULL || len > UINT32_MAX ||
	    !range_ok(loff, len, local->len) || !range_ok(roff, len, remote->len) ||
	    (atomic && ((loff & 7) || ((remote->addr + roff) & 7))))
		return -EINVAL;
	*wr = (struct fab_wr){.opcode = (uint8_t)opcode,
	                      .flags = (uint8_t)flags,
	                      .local = (uint8_t *)local->ptr + loff,
	                      .len = (uint32_t)len,
	                      .remote_addr = remote->addr + roff,
	                      .rkey = remote->rkey,
	                      .compare = compare,
	                      .swap = swap};
	return 0;
}

static int rw(int opcode, unsigned flags, loco_region_t *local, size_t loff,
              const loco_rref_t *remote, size_t roff, size_t len, loco_ack_key_t *const *acks,
              unsigned nacks)
{
	struct fab_wr wr;
	int ret = wr_make(opcode, flags, local, loff, remote, roff, len, 0, 0, &wr);

	return ret ? ret : post(local, remote->node, NULL, &wr, acks, nacks);
}

int loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
               size_t len, loco_ack_key_t *ack)
{
	return rw(FAB_OP_WRITE, 0, local, loff, remote, roff, len, &ack, ack != NULL);
}

int loco_write_inline(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                      size_t len, loco_ack_key_t *ack)
{
	return rw(FAB_OP_WRITE, FAB_WR_INLINE, local, loff, remote, roff, len, &ack, ack != NULL);
}

int loco_write_acks(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                    size_t len, loco_ack_key_t *const *acks, unsigned nacks)
{
	unsigned n = 0;

	if (nacks > LOCO_OP_ACKS_MAX || (nacks > 0 && acks == NULL))
		return -EINVAL;
	for (unsigned i = 0; i < nacks; i++)
		n += acks[i] != NULL;
	return rw(FAB_OP_WRITE, 0, local, loff, remote, roff, len, acks, n > 0 ? nacks : 0);
}

int loco_read(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff, size_t len,
              loco_ack_key_t *ack)
{
	return rw(FAB_OP_READ, 0, local, loff, remote, roff, len, &ack, ack != NULL);
}

static int atomic_op(int opcode, loco_region_t *local, size_t loff, const loco_rref_t *remote,
                     size_t roff, uint64_t a, uint64_t b, loco_ack_key_t *ack)
{
	struct fab_wr wr;
	int ret = wr_make(opcode, 0, local, loff, remote, roff, 8, a, b, &wr);

	return ret ? ret : post(local, remote->node, NULL, &wr, &ack, ack != NULL);
}

int loco_cas(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t compare, uint64_t swap, loco_ack_key_t *ack)
{
	return atomic_op(FAB_OP_CAS, local, loff, remote, roff, compare, swap, ack);
}

int loco_faa(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t add, loco_ack_key_t *ack)
{
	return atomic_op(FAB_OP_FAA, local, loff, remote, roff, 0, add, ack);
}

int loco_rhandle_bind(const loco_region_t *r, const loco_rref_t *remote, loco_rhandle_t *out)
{
	if (r == NULL || remote == NULL || out == NULL)
		return -EINVAL;
	*out = (loco_rhandle_t){.rref = *remote};
	out->private_[0] = lc_links_cache(&r->obj->ch->m->links, remote->node);
	out->private_[1] = (uint64_t)(uintptr_t)&r->obj->ch->m->links;
	return 0;
}

int loco_rhandle_link(const loco_rhandle_t *h, uint64_t *out)
{
	struct lc_links *t;
	uint64_t v;
	int ret;

	if (h == NULL || out == NULL || h->private_[1] == 0)
		return -EINVAL;
	t = (struct lc_links *)(uintptr_t)h->private_[1];
	ret = lc_links_serial(t, h->rref.node, &v);
	if (ret == 0)
		*out = v;
	return ret;
}

int loco_rop_post(loco_rhandle_t *h, const loco_rop_t *op)
{
	static const int fab_op[] = {[LOCO_ROP_WRITE] = FAB_OP_WRITE,
	                             [LOCO_ROP_READ] = FAB_OP_READ,
	                             [LOCO_ROP_CAS] = FAB_OP_CAS,
	                             [LOCO_ROP_FAA] = FAB_OP_FAA};
	struct fab_wr wr;
	unsigned nacks = 0;
	int ret;

	if (h == NULL || op == NULL || op->reserved != 0 || op->opcode < LOCO_ROP_WRITE ||
	    op->opcode > LOCO_ROP_FAA ||
	    (op->flags & ~(LOCO_ROP_INLINE | LOCO_ROP_MORE | LOCO_ROP_LAZY)) ||
	    ((op->flags & LOCO_ROP_INLINE) && op->opcode != LOCO_ROP_WRITE))
		return -EINVAL;
	ret =
	    wr_make(fab_op[op->opcode],
	            ((op->flags & LOCO_ROP_INLINE) ? FAB_WR_INLINE : 0) |
	                ((op->flags & LOCO_ROP_MORE) ? FAB_WR_MORE : 0) |
	                ((op->flags & LOCO_ROP_LAZY) ? FAB_WR_LAZY : 0),
	            op->local, op->loff, &h->rref, op->roff, op->len, op->compare, op->value, &wr);
	if (ret)
		return ret;
	for (unsigned i = 0; i < LOCO_OP_ACKS_MAX; i++)
		nacks = op->acks[i] != NULL ? i + 1 : nacks;
	return post(op->local, h->rref.node, &h->private_[0], &wr, op->acks, nacks);
}
