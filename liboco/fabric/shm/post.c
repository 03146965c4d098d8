/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * post.c -- the data path of the shm provider: requests execute in the
 * posting thread on the target's mapped memory after the key check
 * against the target's published table; SEND and WRITE_IMM go through the
 * ring in the target's link page when a RECV is posted there, else wait
 * (with every later request of the link) in the link's deferred queue,
 * which fab_poll() retries (shm_link_progress()); the receiver's
 * fab_poll() delivers records into its RECVs. A failure takes the link
 * down (shm_link_fail()): its waiting requests and RECVs complete with
 * errors. Completions and bells are cq.c's; an arena a key names and that
 * is not mapped yet is taken in from the socket by msg.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "shm.h"

#define DEFER 1 /* exec_one(): the request must wait for a RECV or ring room */

/*
 * key_entry -- the published entry of key @rkey, read whole: at its slot,
 * or up to SHM_PROBE - 1 after it (keys given: auto). The last one found
 * is kept (klast): while its seq is unchanged (every change of an entry
 * changes it, removal first), it holds the same key, and one load of the
 * seq stands for the whole read. Returns the copy in klast (valid until
 * the next call, post_lock held), or NULL when the key is not there.
 */
static const struct shm_kent *key_entry(struct shm_link *l, uint32_t rkey)
{
	const struct shm_kent *e = l->klast.e;
	struct shm_kent c;
	int ok = 0;

	if (e != NULL && l->klast.c.key == rkey &&
	    __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == l->klast.seq)
		return &l->klast.c;
	for (unsigned p = 0; p < SHM_PROBE; p++) {
		uint32_t seq = 0;

		e = &l->pfab->ent[(rkey + p) & (SHM_KEYS - 1)];
		for (int i = 0; i < 64 && !ok; i++) {
			seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
			if (!(seq & 1))
				break; /* free (or removed): the key may lie further on */
			c.key = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
			c.access = __atomic_load_n(&e->access, __ATOMIC_RELAXED);
			c.arena = __atomic_load_n(&e->arena, __ATOMIC_RELAXED);
			c.base = __atomic_load_n(&e->base, __ATOMIC_RELAXED);
			c.len = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
			c.off = __atomic_load_n(&e->off, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			ok = __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq;
		}
		if (ok && c.key == rkey) {
			l->klast.e = e;
			l->klast.seq = seq;
			l->klast.c = c;
			return &l->klast.c;
		}
		ok = 0; /* another key's entry, read whole, or none: look at the next slot */
	}
	return NULL;
}

/*
 * remote_ptr -- where [@addr, @addr + @len) of key @rkey with @access lies
 * in our mapping of the peer's memory, after the checks against its
 * published key table (key, rights, bounds) and our mapping's size.
 * 0 and *@out; -EACCES. Called between busy_enter() and busy_exit(), with
 * post_lock held.
 */
static int remote_ptr(struct shm_link *l, uint32_t rkey, uint64_t addr, uint64_t len,
                      unsigned access, uint8_t **out)
{
	const struct shm_kent *c = key_entry(l, rkey);
	uint8_t *base;
	uint64_t off;

	if (c == NULL || (c->access & access) != access || c->arena >= SHM_MAX_ARENAS)
		return -EACCES;
	if (addr < c->base || addr - c->base > c->len || len > c->len - (addr - c->base))
		return -EACCES;
	off = c->off + (addr - c->base);
	/* pairs with the release store in map_arena() */
	base = __atomic_load_n(&l->maps[c->arena].base, __ATOMIC_ACQUIRE);
	if (base == NULL) {
		/* the ARENA message precedes the key's publication (klast stays: post_lock) */
		shm_link_drain(l);
		base = __atomic_load_n(&l->maps[c->arena].base, __ATOMIC_ACQUIRE);
	}
	if (base == NULL || off < c->off || off > l->maps[c->arena].size ||
	    len > l->maps[c->arena].size - off)
		return -EACCES;
	*out = base + off;
	return 0;
}

/*
 * busy_enter / busy_exit -- bracket accesses to the peer's memory (its mr_dereg waits them out),
 * with post_lock held: one writer. The exit is a release store, not a locked add: the thread
 * does not wait there for the lines it just wrote into the peer's memory to come over.
 */
static void busy_enter(struct shm_link *l)
{
	__atomic_add_fetch(&l->mine->busy, 1, __ATOMIC_SEQ_CST);
}

static void busy_exit(struct shm_link *l)
{
	__atomic_store_n(&l->mine->busy, __atomic_load_n(&l->mine->busy, __ATOMIC_RELAXED) + 1,
	                 __ATOMIC_RELEASE);
}

static int local_ok(struct shm_link *l, const struct fab_wr *wr, unsigned access)
{
	void *p;

	if (wr->len == 0 || (wr->flags & FAB_WR_INLINE))
		return 0;
	return keytab_check_last(&l->fab->kt, &l->llast, wr->lkey, (uintptr_t)wr->local, wr->len,
	                         access, &p);
}

/*
 * land_write -- a WRITE's payload into the peer's memory (fab_land_write():
 * aligned words stored whole, ascending, in 16-byte blocks where both
 * ends line up; lines shuffled under the slow-write knob).
 */
static void land_write(struct shm_link *l, uint8_t *dst, const uint8_t *src, size_t len)
{
	fab_land_write(__atomic_load_n(&l->pfab->slow_ns, __ATOMIC_RELAXED), &l->rng, dst, src,
	               len);
}

/* ring_room -- whether a record of @span bytes fits the peer's ring (with its pad). */
static int ring_room(struct shm_link *l, uint32_t span, uint64_t *prod_out, uint32_t *pad)
{
	uint64_t prod = __atomic_load_n(&l->peer->ring_prod, __ATOMIC_RELAXED);
	uint64_t cons = __atomic_load_n(&l->peer->ring_cons, __ATOMIC_ACQUIRE);
	uint32_t pos = (uint32_t)(prod % SHM_RING);

	*pad = pos + span > SHM_RING ? SHM_RING - pos : 0;
	*prod_out = prod;
	return SHM_RING - (prod - cons) >= (uint64_t)*pad + span;
}

static uint32_t rec_span(const struct fab_wr *wr)
{
	uint32_t n = (uint32_t)sizeof(struct shm_rec) + (wr->opcode == FAB_OP_SEND ? wr->len : 0);

	return (n + SHM_REC_ALIGN - 1) & ~(SHM_REC_ALIGN - 1);
}

/* can_send -- whether a SEND or WRITE_IMM may go now (a RECV posted at the peer, ring room). */
static int can_send(struct shm_link *l, const struct fab_wr *wr)
{
	uint64_t prod;
	uint32_t pad;

	if (__atomic_load_n(&l->peer->rq_posted, __ATOMIC_ACQUIRE) <= l->credits_used)
		return 0;
	return ring_room(l, rec_span(wr), &prod, &pad);
}

/* put_rec -- append the record of @wr (payload from @src) to the peer's ring; room was checked. */
static void put_rec(struct shm_link *l, const struct fab_wr *wr, const uint8_t *src)
{
	uint32_t span = rec_span(wr), pad;
	uint64_t prod;
	struct shm_rec *r;

	ring_room(l, span, &prod, &pad);
	if (pad) {
		r = (struct shm_rec *)(l->peer->ring + prod % SHM_RING);
		*r = (struct shm_rec){.span = pad, .op = 0};
		prod += pad;
	}
	r = (struct shm_rec *)(l->peer->ring + prod % SHM_RING);
	*r = (struct shm_rec){.span = span, .len = wr->len, .imm = wr->imm, .op = wr->opcode};
	if (wr->opcode == FAB_OP_SEND && wr->len)
		fab_copy_out(r + 1, src, wr->len);
	l->credits_used++;
	/* pairs with the acquire load of ring_prod in deliver() */
	__atomic_store_n(&l->peer->ring_prod, prod + span, __ATOMIC_RELEASE);
}

/*
 * exec_one -- execute @wr now (payload at @src). Returns 0, DEFER, or the
 * negative status it completes with.
 */
static int exec_one(struct shm_link *l, const struct fab_wr *wr, const uint8_t *src)
{
	uint8_t *p = NULL;
	int ret = 0;

	switch (wr->opcode) {
	case FAB_OP_SEND:
	case FAB_OP_WRITE_IMM:
		if (!can_send(l, wr))
			return DEFER;
		if (local_ok(l, wr, 0))
			return -EFAULT;
		if (wr->opcode == FAB_OP_SEND &&
		    wr->len > l->peer->rq_lens[l->credits_used & (SHM_RQ_MAX - 1)])
			return -EMSGSIZE;
		if (wr->opcode == FAB_OP_WRITE_IMM) {
			busy_enter(l);
			ret = remote_ptr(l, wr->rkey, wr->remote_addr, wr->len,
			                 FAB_ACCESS_REMOTE_WRITE, &p);
			if (ret == 0)
				land_write(l, p, src, wr->len);
			busy_exit(l);
			if (ret)
				return ret;
		}
		put_rec(l, wr, src);
		shm_bell(l);
		return 0;
	case FAB_OP_WRITE:
		if (local_ok(l, wr, 0))
			return -EFAULT;
		busy_enter(l);
		ret =
		    remote_ptr(l, wr->rkey, wr->remote_addr, wr->len, FAB_ACCESS_REMOTE_WRITE, &p);
		if (ret == 0)
			land_write(l, p, src, wr->len);
		busy_exit(l);
		return ret;
	case FAB_OP_READ:
		if (local_ok(l, wr, FAB_ACCESS_LOCAL_WRITE))
			return -EFAULT;
		busy_enter(l);
		ret = remote_ptr(l, wr->rkey, wr->remote_addr, wr->len, FAB_ACCESS_REMOTE_READ, &p);
		if (ret == 0)
			fab_copy_out(wr->local, p, wr->len);
		busy_exit(l);
		return ret;
	case FAB_OP_CAS:
	case FAB_OP_FAA: {
		uint64_t old;

		if (local_ok(l, wr, FAB_ACCESS_LOCAL_WRITE))
			return -EFAULT;
		busy_enter(l);
		ret = remote_ptr(l, wr->rkey, wr->remote_addr, 8, FAB_ACCESS_REMOTE_ATOMIC, &p);
		if (ret == 0 && wr->opcode == FAB_OP_CAS) {
			old = wr->compare;
			__atomic_compare_exchange_n((uint64_t *)p, &old, wr->swap, false,
			                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		} else if (ret == 0) {
			old = __atomic_fetch_add((uint64_t *)p, wr->swap, __ATOMIC_SEQ_CST);
		}
		busy_exit(l);
		if (ret == 0)
			memcpy(wr->local, &old, 8);
		return ret;
	}
	}
	return -EINVAL;
}

/* walk_work_add -- @n RECVs posted or requests deferred (walk_work; post_lock held). */
static void walk_work_add(struct shm_fab *f, uint64_t n)
{
	__atomic_add_fetch(&f->walk_work, n, __ATOMIC_RELEASE);
}

/* walk_work_done -- @n RECVs filled or flushed, or deferred requests run or failed. */
static void walk_work_done(struct shm_fab *f, uint64_t n)
{
	__atomic_sub_fetch(&f->walk_work, n, __ATOMIC_RELAXED);
}

/* fail_locked -- with post_lock held: take @l down (shm_link_fail()). */
static void fail_locked(struct shm_link *l, int first_err, int err, const char *why)
{
	struct shm_fab *f = l->fab;
	int first = 1;

	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_DOWN)
		return;
	if (why != NULL)
		lc_log_warn("shm: link %u down: %s", l->base.id, why);
	__atomic_store_n(&l->cause, first_err, __ATOMIC_RELEASE);
	__atomic_store_n(&l->err, err, __ATOMIC_RELEASE);
	__atomic_store_n(&l->state, SHM_LINK_DOWN, __ATOMIC_RELEASE);
	for (; l->dq_head != l->dq_tail; first = 0) {
		shm_cq_push(f, l, l->dq[l->dq_head & l->dq_mask].wrid,
		            l->dq[l->dq_head & l->dq_mask].opcode, first ? first_err : err, 0, 0,
		            0);
		__atomic_store_n(&l->dq_head, l->dq_head + 1, __ATOMIC_RELAXED); /* peeked */
		walk_work_done(f, 1);
	}
	for (; l->rq_cons != l->rq_prod; l->rq_cons++) {
		shm_cq_push(f, l, l->rq[l->rq_cons & l->rq_mask].wrid, FAB_OP_RECV, -ECANCELED, 0,
		            0, 0);
		walk_work_done(f, 1);
	}
	if (l->fd >= 0)
		shutdown(l->fd, SHUT_RDWR); /* the peer sees the link die */
	shm_cq_wake(f);
}

/* exec_failed -- with post_lock held: a request failed with @ret as it executed: the link goes. */
static void exec_failed(struct shm_link *l, int ret)
{
	fail_locked(l, ret, -ECANCELED,
	            ret == -EFAULT ? "local buffer outside its region (lkey)" : NULL);
}

void shm_link_fail(struct shm_link *l, int first_err, int err, const char *why)
{
	pthread_spin_lock(&l->post_lock);
	fail_locked(l, first_err, err, why);
	pthread_spin_unlock(&l->post_lock);
}

/*
 * landed_bell -- after a WRITE or atomic: when the target's core wants to
 * know (LOCO_WAIT=block: fab_attr.landed), ring its thread, once until it
 * has told the core (the flag in its link page batches the rings).
 */
static void landed_bell(struct shm_link *l)
{
	uint64_t one = 1;

	if (!__atomic_load_n(&l->pfab->want_landed, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&l->peer->landed, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&l->peer->landed, 1, __ATOMIC_SEQ_CST))
		return;
	if (write(l->peer_rnr, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_debug("shm: link %u: cannot ring the peer: %s", l->base.id, strerror(errno));
}

/* landed -- @wr executed: tell the peer's drivers and, under block, its thread. */
static void landed(struct shm_link *l, const struct fab_wr *wr)
{
	if (wr->opcode != FAB_OP_READ) {
		shm_landed(l); /* a driver of the peer's (fab_progress()) */
		if (wr->opcode != FAB_OP_SEND)
			landed_bell(l);
	}
}

/* complete -- the completion of @wr that executed with @ret (0 or an error). */
static void complete(struct shm_link *l, const struct fab_wr *wr, int ret)
{
	if (ret == 0)
		landed(l, wr);
	if (ret == 0 && !(wr->flags & FAB_WR_SIGNALED))
		fab_swcq_give_credit(&l->fab->cq, 1);
	else
		shm_cq_push(l->fab, l, wr->wrid, wr->opcode, ret, ret == 0 ? wr->len : 0, 0, 0);
}

/*
 * defer_wait -- with post_lock held: requests wait for the peer's RECV or
 * ring room: ask the peer to ring our thread (its post_recv() or
 * delivery checks the flag after its store), then look again.
 */
static int run_deferred(struct shm_link *l);

static void defer_wait(struct shm_link *l)
{
	__atomic_store_n(&l->mine->rnr, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	run_deferred(l);
}

/* run_deferred -- with post_lock held: execute waiting requests until one must wait again. */
static int run_deferred(struct shm_link *l)
{
	int moved = 0;

	while (l->dq_head != l->dq_tail &&
	       __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_UP) {
		uint32_t i = l->dq_head & l->dq_mask;
		const struct fab_wr *wr = &l->dq[i];
		const uint8_t *src = (wr->flags & FAB_WR_INLINE)
		                         ? l->dq_inline + (size_t)i * l->fab->base.attr.max_inline
		                         : wr->local;
		int ret = exec_one(l, wr, src);

		if (ret == DEFER)
			break;
		__atomic_store_n(&l->dq_head, l->dq_head + 1, __ATOMIC_RELAXED); /* peeked */
		walk_work_done(l->fab, 1);
		moved = 1;
		complete(l, wr, ret);
		if (ret) {
			exec_failed(l, ret);
			break;
		}
	}
	return moved;
}

int shm_post(struct fab_link *link, const struct fab_wr *wr, int n)
{
	struct shm_link *l = to_shm_link(link);
	struct shm_fab *f = l->fab;
	uint32_t max_inline = f->base.attr.max_inline;
	int i;

	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		int ret = fab_wr_check(&wr[i], SHM_MAX_MSG, max_inline);

		if (ret)
			return ret;
		if (wr[i].opcode == FAB_OP_SEND && wr[i].len > SHM_MAX_SEND)
			return -EINVAL;
	}
	pthread_spin_lock(&l->post_lock);
	if (l->dq_tail - l->dq_head + (uint32_t)n > l->dq_mask + 1) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	if (!fab_swcq_take_credit(&f->cq, n)) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	for (i = 0; i < n; i++) {
		int ret;

		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_UP &&
		    shm_peer_gone(l->pfab))
			fail_locked(l, -ECONNRESET, -ECONNRESET, NULL);
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_DOWN) {
			shm_cq_push(f, l, wr[i].wrid, wr[i].opcode,
			            __atomic_load_n(&l->err, __ATOMIC_ACQUIRE), 0, 0, 0);
			continue;
		}
		if (l->dq_head != l->dq_tail ||
		    __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_UP)
			break; /* behind a waiting SEND, or held: run at admission */
		ret = exec_one(l, &wr[i], wr[i].local);
		if (ret == DEFER)
			break;
		complete(l, &wr[i], ret);
		if (ret)
			exec_failed(l, ret);
	}
	for (; i < n; i++) { /* wait behind a SEND with no RECV at the peer */
		uint32_t slot = l->dq_tail & l->dq_mask;

		l->dq[slot] = wr[i];
		if (wr[i].flags & FAB_WR_INLINE)
			fab_copy_out(l->dq_inline + (size_t)slot * max_inline, wr[i].local,
			             wr[i].len);
		__atomic_store_n(&l->dq_tail, l->dq_tail + 1, __ATOMIC_RELEASE);
		walk_work_add(f, 1);
	}
	if (l->dq_head != l->dq_tail && l->mine != NULL &&
	    __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_UP)
		defer_wait(l);
	pthread_spin_unlock(&l->post_lock);
	shm_cq_wake(f);
	return 0;
}

/*
 * shm_post_now -- fab_post_now(): WRITE, READ and the atomics execute here
 * when no request waits on the link (SEND and WRITE_IMM need a RECV at
 * the peer: they take the queue). No credit and no completion entry: the
 * caller learns the outcome from the return. An inline WRITE of any length
 * runs here: its payload lands before the call returns, with no copy to
 * keep; only a queued one is bounded by max_inline (shm_post()).
 */
int shm_post_now(struct fab_link *link, const struct fab_wr *wr, int *status)
{
	struct shm_link *l = to_shm_link(link);
	int ret;

	if (wr == NULL || status == NULL)
		return -EINVAL;
	ret = fab_wr_check(wr, SHM_MAX_MSG, SHM_MAX_MSG);
	if (ret)
		return ret;
	if (wr->opcode == FAB_OP_SEND || wr->opcode == FAB_OP_WRITE_IMM)
		return -EWOULDBLOCK;
	pthread_spin_lock(&l->post_lock);
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_UP && shm_peer_gone(l->pfab))
		fail_locked(l, -ECONNRESET, -ECONNRESET, NULL);
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_UP ||
	    l->dq_head != l->dq_tail) {
		/* down (fab_post() completes it with the link's error), held, or behind a SEND */
		pthread_spin_unlock(&l->post_lock);
		return -EWOULDBLOCK;
	}
	ret = exec_one(l, wr, wr->local);
	if (ret == 0)
		landed(l, wr);
	else
		exec_failed(l, ret);
	pthread_spin_unlock(&l->post_lock);
	*status = ret;
	return 0;
}

int shm_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n)
{
	struct shm_link *l = to_shm_link(link);
	struct shm_fab *f = l->fab;

	if (fab_recv_check(&f->kt, wr, n))
		return -EINVAL;
	pthread_spin_lock(&l->post_lock);
	if (l->rq_prod - l->rq_cons + (uint32_t)n > l->rq_mask + 1) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	if (!fab_swcq_take_credit(&f->cq, n)) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_DOWN) {
		for (int i = 0; i < n; i++)
			shm_cq_push(f, l, wr[i].wrid, FAB_OP_RECV, -ECANCELED, 0, 0, 0);
		pthread_spin_unlock(&l->post_lock);
		shm_cq_wake(f);
		return 0;
	}
	for (int i = 0; i < n; i++, l->rq_prod++) {
		l->rq[l->rq_prod & l->rq_mask] = wr[i];
		l->mine->rq_lens[l->rq_prod & (SHM_RQ_MAX - 1)] = wr[i].len;
	}
	walk_work_add(f, (uint64_t)n);
	/* pairs with the acquire load of rq_posted in can_send() */
	__atomic_store_n(&l->mine->rq_posted, l->rq_prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->post_lock);
	shm_bell(l);     /* a SEND may wait for it at the peer */
	shm_rnr_bell(l); /* its thread runs it if its poller does not */
	if (__atomic_load_n(&l->mine->ring_prod, __ATOMIC_ACQUIRE) !=
	    __atomic_load_n(&l->mine->ring_cons, __ATOMIC_RELAXED))
		shm_cq_wake(f); /* a record waits for it here */
	return 0;
}

/* deliver -- with post_lock held: move the peer's records into posted RECVs. */
static int deliver(struct shm_link *l)
{
	struct shm_lpage *m = l->mine;
	uint64_t cons = m->ring_cons, prod = __atomic_load_n(&m->ring_prod, __ATOMIC_ACQUIRE);
	int moved = 0;

	while (cons != prod) {
		const struct shm_rec *r = (const struct shm_rec *)(m->ring + cons % SHM_RING);
		struct shm_rec rec = *r;

		if (shm_rec_check(&rec, cons, prod) != 0) {
			fail_locked(l, -EPROTO, -EPROTO, "bad record in the ring");
			return moved;
		}
		if (rec.op != 0) {
			const struct fab_recv_wr *rw;

			if (l->rq_cons == l->rq_prod)
				break; /* the peer counts RECVs: it did not send without one */
			rw = &l->rq[l->rq_cons & l->rq_mask];
			if (rec.op == FAB_OP_SEND) {
				if (rec.len > rw->len) {
					fail_locked(l, -EMSGSIZE, -ECANCELED,
					            "SEND larger than its RECV");
					return moved;
				}
				memcpy(rw->local, r + 1, rec.len);
				shm_cq_push(l->fab, l, rw->wrid, FAB_OP_RECV, 0, rec.len, rec.imm,
				            1);
			} else {
				shm_cq_push(l->fab, l, rw->wrid, FAB_OP_RECV_IMM, 0, rec.len,
				            rec.imm, 1);
			}
			l->rq_cons++;
			walk_work_done(l->fab, 1);
			moved = 1;
		}
		cons += rec.span;
	}
	if (cons != m->ring_cons) {
		/* pairs with the acquire load of ring_cons in ring_room() */
		__atomic_store_n(&m->ring_cons, cons, __ATOMIC_RELEASE);
		shm_bell(l); /* room for a SEND waiting there */
		shm_rnr_bell(l);
	}
	return moved;
}

int shm_link_progress(struct shm_link *l)
{
	int moved = 0;

	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_UP || l->mine == NULL)
		return 0;
	/* a peek without the lock: a stale look only delays the work to the next poll */
	if (__atomic_load_n(&l->mine->ring_prod, __ATOMIC_ACQUIRE) ==
	        __atomic_load_n(&l->mine->ring_cons, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&l->dq_tail, __ATOMIC_ACQUIRE) ==
	        __atomic_load_n(&l->dq_head, __ATOMIC_RELAXED))
		return 0;
	pthread_spin_lock(&l->post_lock);
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_UP)
		moved = deliver(l) + run_deferred(l);
	pthread_spin_unlock(&l->post_lock);
	return moved;
}

int shm_link_ready(struct shm_link *l)
{
	int ready = 0;

	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_UP || l->mine == NULL)
		return 0;
	/*
	 * A peek without the lock first, as shm_link_progress(): the caller is a poller about to
	 * sleep (shm_ready()), and the lock is the posting threads'. Taken on every arm, it made
	 * an rpc caller's progress thread spin on it for a posting thread that lost its core (2
	 * cores, shm, rpc-bench 256 B one-way calls: 19 % of the samples in that spin). What the
	 * peek misses was stored after the fence of the arm's announce and rings the doorbell.
	 */
	if (__atomic_load_n(&l->mine->ring_prod, __ATOMIC_ACQUIRE) ==
	        __atomic_load_n(&l->mine->ring_cons, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&l->dq_tail, __ATOMIC_ACQUIRE) ==
	        __atomic_load_n(&l->dq_head, __ATOMIC_RELAXED))
		return 0;
	pthread_spin_lock(&l->post_lock);
	if (__atomic_load_n(&l->mine->ring_prod, __ATOMIC_ACQUIRE) != l->mine->ring_cons &&
	    l->rq_cons != l->rq_prod)
		ready = 1;
	if (l->dq_head != l->dq_tail && can_send(l, &l->dq[l->dq_head & l->dq_mask]))
		ready = 1;
	pthread_spin_unlock(&l->post_lock);
	return ready;
}
