/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * owned_var.c -- a single-writer variable replicated to readers, built
 * only on the public object-author API (loco/channel.h).
 *
 * Every node makes an object @name with a region "val" (the encoded value,
 * value.h; remotely writable). On the owner it is the master, which
 * loco_owned_var_store() encodes into; on a reader it is the replica the
 * owner's pushes land in. The owner also has a region "stage", its staging
 * ring: a push copies the master into a slot and writes from the slot, so
 * that the source of a WRITE never changes in flight, and a slot is reused
 * only once its WRITEs completed: a push sends the value as stored at
 * the call, whatever is stored while it is in flight. An encoding of up
 * to VALUE_INLINE_MAX bytes skips the ring: its WRITEs copy it from the
 * master when posted (inline), until a link refuses that size
 * (-EMSGSIZE: a verbs device that copies less), and the ring serves from
 * then on (on shm a push of 8 B took 1.6x the WRITEs it is made of
 * through the ring, 1.4x inline). A larger one is tried inline too, each
 * push: shm takes an inline WRITE of any length that runs at post (it has
 * landed when the call returns), and a link that says -EMSGSIZE ("not
 * now", or tcp and verbs: never) gets it through the ring that time. On
 * shm that spared a push of 4 KiB to 2 peers the copy into a slot and the
 * 8 slots' 34 KiB going through the cache: 1.96x -> 1.6x its WRITEs.
 *
 * The owner keeps the channel's peers in a list of its own for
 * push_broadcast(), fetched again (loco_channel_peers()) only after a
 * peer_join or peer_leave callback: the fetch, a walk, a sort and a
 * dedupe, was 40 ns of a 250 ns push of 8 B to 2 peers on shm. The
 * callbacks run after the channel marked the peer present or gone, so a
 * fetch after a callback finds it; a peer gone since the fetch is skipped
 * as before (its remote region is gone); and loco_channel_join() returns
 * after the callbacks of the peers it paired with.
 */
#include <errno.h>
#include <stdlib.h>

#include <loco.h>
#include <loco/owned_var.h>

#include "obj_util.h"
#include "value.h"

struct loco_owned_var {
	loco_object_t *obj;
	loco_channel_t *ch;
	loco_region_t *val;
	uint32_t owner;
	uint32_t me;
	uint64_t version; /* owner: of the last store (0: none) */
	struct value_codec codec;
	struct value_stage stage; /* owner */
	int staged;               /* the stage was set up */
	int inl;                  /* owner: pushes try inline from the master (see the top) */
	struct value_scratch big;
	struct value_counters ctr;
	uint64_t peers_gen;  /* atomic: moved by the peer callbacks */
	uint64_t peers_seen; /* owner: peers_gen when peer_ids was fetched */
	uint32_t *peer_ids;  /* owner: the channel's peers (VALUE_MAX_PEERS) */
	int npeers;          /* owner: how many of peer_ids */
};

/* ov_peers_moved -- on the progress thread: a peer paired or left; the owner fetches again. */
static void ov_peers_moved(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_owned_var_t *ov = arg;

	(void)obj, (void)node, (void)view;
	__atomic_add_fetch(&ov->peers_gen, 1, __ATOMIC_RELEASE);
}

static const struct loco_object_ops ov_ops = {
    .peer_join = ov_peers_moved,
    .peer_leave = ov_peers_moved,
};

/* loco_owned_var_create -- object, region "val", and on the owner the staging ring. */
int loco_owned_var_create(loco_channel_t *ch, const char *name, uint32_t owner, size_t size,
                          loco_owned_var_t **out)
{
	loco_owned_var_t *ov;
	int ret;

	if (ch == NULL || name == NULL || out == NULL || owner == 0 || size == 0 ||
	    size > LOCO_OWNED_VAR_MAX_SIZE)
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*ov), (void **)&ov);
	if (ret)
		return ret;
	ov->ch = ch;
	ov->owner = owner;
	ov->me = loco_manager_node_id(loco_channel_manager(ch));
	ret = value_codec_init(&ov->codec, size);
	if (ret)
		goto err_free;
	ret = value_scratch_init(&ov->big, &ov->codec);
	if (ret)
		goto err_free;
	ov->big.m = loco_channel_manager(ch); /* loads back off by its wait policy */
	if (ov->me == owner) {
		ov->peer_ids = malloc(VALUE_MAX_PEERS * sizeof(ov->peer_ids[0]));
		if (ov->peer_ids == NULL) {
			ret = -ENOMEM;
			goto err_scratch;
		}
		ov->peers_gen = 1; /* fetched at the first broadcast (peers_seen 0) */
	}
	ret = loco_object_create(ch, name, &ov_ops, ov, &ov->obj);
	if (ret)
		goto err_scratch;
	/* every node must agree on the value's size and its owner: checked as peers pair */
	ret = loco_object_agree(ov->obj, "size", size);
	if (ret == 0)
		ret = loco_object_agree(ov->obj, "owner", owner);
	if (ret)
		goto err_destroy_obj;
	/* the owner's copy is its master: no one writes it remotely */
	ret = loco_region_create(ov->obj, "val", ov->codec.enc_len,
	                         ov->me == owner ? 0 : LOCO_ACCESS_WRITE, &ov->val);
	if (ret)
		goto err_destroy_obj;
	if (ov->me == owner) {
		ret = value_stage_init(&ov->stage, &ov->codec, ov->obj, loco_channel_manager(ch));
		if (ret)
			goto err_destroy_obj;
		ov->staged = 1;
		ov->inl = 1;
	}
	*out = ov;
	return 0;

err_destroy_obj:
	loco_object_destroy(ov->obj); /* and its regions */
err_scratch:
	free(ov->peer_ids);
	value_scratch_fini(&ov->big);
err_free:
	loco_handle_free(ov);
	return ret;
}

void loco_owned_var_destroy(loco_owned_var_t *ov)
{
	OBJ_DESTROY_CHECK(ov);
	if (ov->staged)
		value_stage_fini(&ov->stage); /* waits for the pushes in flight */
	loco_object_destroy(ov->obj);         /* no callback runs after it returns */
	free(ov->peer_ids);
	value_scratch_fini(&ov->big);
	loco_handle_free(ov);
}

int loco_owned_var_sync(loco_owned_var_t *ov, int64_t timeout_ns)
{
	OBJ_CHECK(ov);
	return loco_object_sync(ov->obj, timeout_ns);
}

int loco_owned_var_store(loco_owned_var_t *ov, const void *val)
{
	int ret;

	OBJ_CHECK(ov);
	if (val == NULL)
		return -EINVAL;
	if (ov->me != ov->owner)
		return -EPERM;
	ret = loco_object_status(ov->obj); /* as a push: the value is for the others */
	if (ret)
		return ret;
	value_encode(&ov->codec, loco_region_ptr(ov->val), val, ++ov->version);
	return 0;
}

/* ov_slot -- the staging slot of the current version, room for @need WRITEs. */
static int ov_slot(loco_owned_var_t *ov, unsigned need, unsigned *slot)
{
	return value_stage_prepare(&ov->stage, loco_region_ptr(ov->val), ov->version, need,
	                           &ov->ctr, slot);
}

/*
 * ov_push -- push the current version to a replica at @rr: inline from the
 * master (copied when posted, or landed when it runs at post: the owner's
 * one thread stores it, so it is whole), else through *@slot (-1: none
 * taken for this version yet; taken here for @need WRITEs and kept for
 * the caller's next pushes).
 */
static int ov_push(loco_owned_var_t *ov, int *slot, unsigned need, const loco_rref_t *rr,
                   loco_ack_key_t *ack)
{
	unsigned s;
	int ret;

	if (ov->inl) {
		ret = value_push_inline(&ov->codec, ov->val, 0, rr, 0, ack, &ov->ctr);
		if (ret != -EMSGSIZE)
			return ret;
		if (value_inline_refused_for_good(&ov->codec))
			ov->inl = 0; /* else the ring this time only */
	}
	if (*slot < 0) {
		ret = ov_slot(ov, need, &s);
		if (ret)
			return ret;
		*slot = (int)s;
	}
	return value_push(&ov->stage, (unsigned)*slot, rr, 0, ack, &ov->ctr);
}

int loco_owned_var_push_to(loco_owned_var_t *ov, uint32_t node, loco_ack_key_t *ack)
{
	loco_rref_t rr;
	int slot = -1, ret;

	OBJ_CHECK(ov);
	if (ov->me != ov->owner)
		return -EPERM;
	if (node == ov->me)
		return -EINVAL;
	ret = loco_region_remote(ov->val, node, &rr);
	return ret ? ret : ov_push(ov, &slot, 1, &rr, ack);
}

/* ov_peers -- (owner) the channel's peers as of the last callback: n >= 0, or an error */
static int ov_peers(loco_owned_var_t *ov)
{
	/* pairs with the callbacks' release: a fetch after it finds what they told */
	uint64_t gen = __atomic_load_n(&ov->peers_gen, __ATOMIC_ACQUIRE);
	int n;

	if (gen == ov->peers_seen)
		return ov->npeers;
	n = loco_channel_peers(ov->ch, ov->peer_ids, VALUE_MAX_PEERS);
	if (n < 0)
		return n;
	ov->npeers = n < (int)VALUE_MAX_PEERS ? n : (int)VALUE_MAX_PEERS;
	ov->peers_seen = gen; /* a callback since the load above makes the next call fetch */
	return ov->npeers;
}

/* loco_owned_var_push_broadcast -- one WRITE per peer holding it, inline or from one staged copy. */
int loco_owned_var_push_broadcast(loco_owned_var_t *ov, loco_ack_key_t *ack)
{
	const uint32_t *ids;
	loco_rref_t rr;
	int n, ret, posted = 0, slot = -1;

	OBJ_CHECK(ov);
	if (ov->me != ov->owner)
		return -EPERM;
	ret = loco_object_status(ov->obj); /* also with no peer to push to */
	if (ret)
		return ret;
	n = ov_peers(ov);
	if (n <= 0)
		return n;
	ids = ov->peer_ids;
	for (int i = 0; i < n; i++) {
		ret = loco_region_remote(ov->val, ids[i], &rr);
		if (ret == 0)
			ret = ov_push(ov, &slot, (unsigned)(n - i), &rr, ack);
		if (ret == 0)
			posted++;
		else if (!value_skip_peer(ret))
			return ret; /* the ones posted stay attached to @ack */
	}
	return posted;
}

int loco_owned_var_load(loco_owned_var_t *ov, void *val)
{
	int ret;

	OBJ_CHECK(ov);
	if (val == NULL)
		return -EINVAL;
	ret = loco_object_status(ov->obj); /* local: allowed before the join, not on a mismatch */
	if (ret == -LOCO_EMISMATCH)
		return ret;
	return value_load(&ov->codec, loco_region_ptr(ov->val), val, &ov->big, &ov->ctr);
}

size_t loco_owned_var_size(const loco_owned_var_t *ov)
{
	OBJ_CHECK_OR(ov, 0);
	return ov->codec.size;
}

uint32_t loco_owned_var_owner(const loco_owned_var_t *ov)
{
	OBJ_CHECK_OR(ov, 0);
	return ov->owner;
}

void loco_owned_var_stats(const loco_owned_var_t *ov, loco_value_stats_t *st)
{
	if (loco_handle_check(ov) == 0 && st != NULL)
		value_stats(&ov->ctr, st);
}
