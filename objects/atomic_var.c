/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * atomic_var.c -- a 64-bit word on one node (the host) that every member
 * reads, writes, CASes and fetch-adds with one-sided fabric operations.
 * Built only on the public object-author API (loco/channel.h).
 *
 * Every node makes an object @name with two regions: "word" (one 64-byte
 * line; the host's first 8 bytes are the variable, the other nodes' copies
 * are unused) and "res" (this node's result slots: LOCO_ATOMIC_VAR_SLOTS
 * for the asynchronous calls, then one result and one write source for
 * the synchronous ones). The host's region reference is looked up once and
 * cached (host_path.h); peer_leave(host) makes the object lost for good
 * (-ECONNRESET), so that a host that restarts with a fresh word never
 * passes for the old one.
 *
 * The host itself: loco_region_remote() of this node gives its own copy,
 * reached through the manager's self link, so the host's operations are
 * fabric atomics like everybody's. Only without a self link (its set-up
 * failed) does the host run them
 * as seq_cst CPU atomics on its copy, which the tcp fabric's NIC thread
 * serializes with its own (it executes remote CAS/FAA as seq_cst CPU
 * atomics, and remote READ/WRITE word by word with atomic loads/stores).
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <loco.h>
#include <loco/atomic_var.h>

#include "host_path.h"
#include "obj_util.h"

#define WORD_LEN  64 /* one line: nothing else shares the host's word */
#define SYNC_RES  LOCO_ATOMIC_VAR_SLOTS
#define SYNC_SRC  (LOCO_ATOMIC_VAR_SLOTS + 1)
#define RES_SLOTS (LOCO_ATOMIC_VAR_SLOTS + 2)

enum av_op {
	AV_READ,
	AV_WRITE,
	AV_FAA,
	AV_CAS
};

/* the operation each posts to the host's word (av_post()) */
static const uint32_t rop_of[] = {LOCO_ROP_READ, LOCO_ROP_WRITE, LOCO_ROP_FAA, LOCO_ROP_CAS};

struct loco_atomic_var {
	loco_object_t *obj;
	loco_region_t *word;
	loco_region_t *res;
	uint32_t host;
	uint32_t me;
	loco_ack_key_t *ack; /* the synchronous calls' */
	int busy;            /* atomic: a thread is in a synchronous call (sync_lock()) */
	int unsettled;       /* under busy: the last synchronous wait ended in an error */
	struct host_path hp; /* to the host's word */
};

/* av_peer_leave -- on the progress thread: the host's word is gone. */
static void av_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_atomic_var_t *av = arg;

	(void)obj, (void)view;
	if (node == av->host)
		host_path_lose(&av->hp);
}

static const struct loco_object_ops av_ops = {
    .peer_leave = av_peer_leave,
};

int loco_atomic_var_create(loco_channel_t *ch, const char *name, uint32_t host,
                           loco_atomic_var_t **out)
{
	unsigned access = LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC;
	loco_atomic_var_t *av;
	int ret;

	if (ch == NULL || name == NULL || host == 0 || out == NULL)
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*av), (void **)&av);
	if (ret)
		return ret;
	av->host = host;
	av->me = loco_manager_node_id(loco_channel_manager(ch));
	host_path_init(&av->hp);
	ret = loco_ack_key_create(loco_channel_manager(ch), &av->ack);
	if (ret)
		goto err_free;
	ret = loco_object_create(ch, name, &av_ops, av, &av->obj);
	if (ret)
		goto err_destroy_ack;
	/* every node must name the same host: checked as peers pair */
	ret = loco_object_agree(av->obj, "host", host);
	if (ret)
		goto err_destroy_obj;
	/* only the host's word is used; the others' copies allow nothing */
	ret = loco_region_create(av->obj, "word", WORD_LEN, host == av->me ? access : 0, &av->word);
	if (ret)
		goto err_destroy_obj;
	ret = loco_region_create(av->obj, "res", RES_SLOTS * sizeof(uint64_t), 0, &av->res);
	if (ret)
		goto err_destroy_obj;
	*out = av;
	return 0;

err_destroy_obj:
	loco_object_destroy(av->obj); /* and the region made so far */
err_destroy_ack:
	loco_ack_key_destroy(av->ack);
err_free:
	host_path_fini(&av->hp);
	loco_handle_free(av);
	return ret;
}

void loco_atomic_var_destroy(loco_atomic_var_t *av)
{
	OBJ_DESTROY_CHECK(av);
	loco_ack_key_destroy(av->ack); /* waits for a timed-out operation */
	loco_object_destroy(av->obj);
	host_path_fini(&av->hp);
	loco_handle_free(av);
}

uint32_t loco_atomic_var_host(const loco_atomic_var_t *av)
{
	OBJ_CHECK_OR(av, 0);
	return av->host;
}

static uint64_t *slot_ptr(const loco_atomic_var_t *av, unsigned slot)
{
	return (uint64_t *)loco_region_ptr(av->res) + slot;
}

/* av_local -- the host without a fabric path to itself: the operation, done now. */
static void av_local(loco_atomic_var_t *av, int op, uint64_t a, uint64_t b, unsigned slot)
{
	uint64_t *w = loco_region_ptr(av->word);
	uint64_t *res = slot_ptr(av, slot), old = a;

	/* seq_cst, as the tcp NIC thread's atomics on the same word */
	switch (op) {
	case AV_READ:
		old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		break;
	case AV_WRITE:
		__atomic_store_n(w, *res, __ATOMIC_SEQ_CST);
		return;
	case AV_FAA:
		old = __atomic_fetch_add(w, a, __ATOMIC_SEQ_CST);
		break;
	case AV_CAS:
		__atomic_compare_exchange_n(w, &old, b, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		break;
	}
	__atomic_store_n(res, old, __ATOMIC_RELEASE);
}

/* av_post -- post @op on the host's word, its result (or source) in @slot. */
static int av_post(loco_atomic_var_t *av, int op, uint64_t a, uint64_t b, unsigned slot,
                   loco_ack_key_t *ack)
{
	size_t loff = (size_t)slot * sizeof(uint64_t);
	int path = loco_object_status(av->obj); /* not joined, or the hosts differ */

	if (path < 0)
		return path;
	path = host_path_get(&av->hp, av->word, av->host, av->me);
	if (path < 0)
		return path;
	if (path == HOST_PATH_LOCAL) {
		av_local(av, op, a, b, slot);
		return 0;
	}
	return loco_rop_post(&av->hp.h, &(loco_rop_t){.opcode = rop_of[op],
	                                              .local = av->res,
	                                              .loff = loff,
	                                              .len = sizeof(uint64_t),
	                                              .compare = a,
	                                              .value = op == AV_CAS ? b : a,
	                                              .acks = {ack}});
}

/* av_async -- the asynchronous calls: check @slot, post. */
static int av_async(loco_atomic_var_t *av, int op, uint64_t a, uint64_t b, unsigned slot,
                    loco_ack_key_t *ack)
{
	OBJ_CHECK(av);
	if (slot >= LOCO_ATOMIC_VAR_SLOTS)
		return -EINVAL;
	if (op == AV_WRITE)
		*slot_ptr(av, slot) = a;
	return av_post(av, op, a, b, slot, ack);
}

int loco_atomic_var_read_async(loco_atomic_var_t *av, unsigned slot, loco_ack_key_t *ack)
{
	return av_async(av, AV_READ, 0, 0, slot, ack);
}

int loco_atomic_var_write_async(loco_atomic_var_t *av, uint64_t value, unsigned slot,
                                loco_ack_key_t *ack)
{
	return av_async(av, AV_WRITE, value, 0, slot, ack);
}

int loco_atomic_var_faa_async(loco_atomic_var_t *av, uint64_t add, unsigned slot,
                              loco_ack_key_t *ack)
{
	return av_async(av, AV_FAA, add, 0, slot, ack);
}

int loco_atomic_var_cas_async(loco_atomic_var_t *av, uint64_t expected, uint64_t desired,
                              unsigned slot, loco_ack_key_t *ack)
{
	return av_async(av, AV_CAS, expected, desired, slot, ack);
}

uint64_t loco_atomic_var_slot(const loco_atomic_var_t *av, unsigned slot)
{
	OBJ_CHECK_OR(av, 0);
	if (slot >= LOCO_ATOMIC_VAR_SLOTS)
		return 0;
	return __atomic_load_n(slot_ptr(av, slot), __ATOMIC_ACQUIRE);
}

/* av_manager -- the manager of @av's channel. */
static loco_manager_t *av_manager(const loco_atomic_var_t *av)
{
	return loco_channel_manager(loco_object_channel(av->obj));
}

/* sync_try -- take av->busy if it is free: 1 when taken. */
static int sync_try(loco_atomic_var_t *av)
{
	int zero = 0;

	return __atomic_compare_exchange_n(&av->busy, &zero, 1, false, __ATOMIC_ACQUIRE,
	                                   __ATOMIC_RELAXED);
}

/*
 * sync_lock -- take av->busy by @deadline (< 0: forever), pausing by the
 * manager's wait policy (LOCO_WAIT) between tries. A flag, not a mutex:
 * it is held for one operation at a time, and a free one costs a CAS to
 * take and a store to give back (a mutex's trylock and unlock took 8 % of
 * a synchronous FAA on shm).
 */
static int sync_lock(loco_atomic_var_t *av, int64_t deadline)
{
	loco_waiter_t w;

	loco_waiter_init(&w, av_manager(av));
	while (!sync_try(av)) {
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	return 0;
}

static void sync_unlock(loco_atomic_var_t *av)
{
	__atomic_store_n(&av->busy, 0, __ATOMIC_RELEASE); /* pairs with sync_try()'s acquire */
}

/*
 * av_sync -- the synchronous calls: post @op on the internal ack key and
 * wait for it by @timeout_ns; the result in *@out when not NULL. The
 * clock starts at the first step that may wait (a contended lock, an
 * operation to settle, a full queue), else the ack wait starts it: an
 * uncontended call reads it once or not at all (a clock read costs 25 ns,
 * an operation on shm 170).
 */
static int av_sync(loco_atomic_var_t *av, int op, uint64_t a, uint64_t b, uint64_t *out,
                   int64_t timeout_ns)
{
	int64_t deadline = 0; /* 0: not started yet (obj_deadline() is -1 or > 0) */
	unsigned slot = op == AV_WRITE ? SYNC_SRC : SYNC_RES;
	loco_waiter_t w;
	int ret, paused = 0;

	OBJ_CHECK(av);
	if (!sync_try(av)) {
		deadline = obj_deadline(timeout_ns);
		ret = sync_lock(av, deadline);
		if (ret)
			return ret;
	}
	/*
	 * After a wait that ended in an error, an operation that timed out may
	 * still be outstanding, and the key keeps its error until the next
	 * wait: settle it first. Its own outcome was the earlier caller's
	 * business, but while it is in flight (the wait timed out, or ended
	 * with -LOCO_EPARTITION) its result could still land in the slot a new
	 * operation reads. A wait that succeeded left the key clean: nothing
	 * to look at (two calls into the key, 10 % of an FAA on shm).
	 */
	if (av->unsettled && loco_ack_outstanding(av->ack) > 0) {
		if (deadline == 0)
			deadline = obj_deadline(timeout_ns);
		ret = loco_ack_wait(av->ack, obj_left_ns(deadline));
		if (ret != 0 && loco_ack_outstanding(av->ack) > 0)
			goto out_unlock;
	} else if (av->unsettled) {
		(void)loco_ack_wait(av->ack, 0); /* an old error: the earlier caller's */
	}
	av->unsettled = 0;
	if (op == AV_WRITE)
		*slot_ptr(av, slot) = a;
	while ((ret = av_post(av, op, a, b, slot, av->ack)) == -EAGAIN) {
		if (!paused) {
			if (deadline == 0)
				deadline = obj_deadline(timeout_ns);
			loco_waiter_init(&w, av_manager(av));
			paused = 1;
		}
		if (deadline >= 0 && obj_now_ns() >= deadline) {
			ret = -ETIMEDOUT;
			goto out_unlock;
		}
		loco_waiter_pause(&w); /* the queue drains as completions arrive */
	}
	if (ret)
		goto out_unlock;
	ret = loco_ack_wait(av->ack, deadline == 0 ? timeout_ns : obj_left_ns(deadline));
	if (ret == 0 && out != NULL)
		*out = __atomic_load_n(slot_ptr(av, slot), __ATOMIC_ACQUIRE);

out_unlock:
	if (ret != 0)
		av->unsettled = 1; /* the next call looks at the key first */
	sync_unlock(av);
	return ret;
}

int loco_atomic_var_read(loco_atomic_var_t *av, uint64_t *value, int64_t timeout_ns)
{
	if (value == NULL)
		return -EINVAL;
	return av_sync(av, AV_READ, 0, 0, value, timeout_ns);
}

int loco_atomic_var_write(loco_atomic_var_t *av, uint64_t value, int64_t timeout_ns)
{
	return av_sync(av, AV_WRITE, value, 0, NULL, timeout_ns);
}

int loco_atomic_var_faa(loco_atomic_var_t *av, uint64_t add, uint64_t *old, int64_t timeout_ns)
{
	return av_sync(av, AV_FAA, add, 0, old, timeout_ns);
}

int loco_atomic_var_cas(loco_atomic_var_t *av, uint64_t expected, uint64_t desired, uint64_t *old,
                        int64_t timeout_ns)
{
	return av_sync(av, AV_CAS, expected, desired, old, timeout_ns);
}
