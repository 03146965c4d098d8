/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cq.c -- the bottom layer of the shm provider: the bells. Posting
 * threads, the poller and the provider thread push completions into the
 * fab's CQ (../swcq.c, many producers; every request and RECV took a
 * credit for its entry, so it never overflows) and wake this fab's poller
 * (the CQ's wait fd, an eventfd that peers ring too: the doorbell) and
 * drivers (the bell page's futex). A poster rings a peer's bells: its
 * doorbell when its poller sleeps, its bell page when a driver of its
 * waits for landings, its progress bell when it has requests waiting for
 * our RECVs or ring room. The consumer side (fab_poll(), arm, wait,
 * fab_progress()) is poll.c's. Calls no other file of the provider.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../log.h"
#include "shm.h"

/* bell_wake -- wake the drivers sleeping on @b's seq (FUTEX_WAKE on the shared page). */
static void bell_wake(struct shm_bpage *b)
{
	syscall(SYS_futex, &b->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shm_cq_wake(struct shm_fab *f)
{
	fab_swcq_wake(&f->cq); /* the poller, if armed: it bumps bpage->rings after the write */
	/*
	 * A driver of this fab sleeps (fab_progress()) while another thread
	 * made completions: wake it. Without a fence: a driver that missed
	 * this sees them at its timeout.
	 */
	if (__atomic_load_n(&f->fpage->sleepers, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&f->bpage->seq, 1, __ATOMIC_SEQ_CST);
		bell_wake(f->bpage);
	}
}

/*
 * shm_landed -- after a WRITE, atomic or SEND of ours landed in @l's peer:
 * while the peer has a driver (armed), bump its bell page and wake it if
 * it sleeps. The add is a full barrier: the data is visible before the
 * count moves, and the count before we read its sleepers flag (a driver
 * sets it, then reads the count: one of us sees the other).
 */
void shm_landed(struct shm_link *l)
{
	if (!__atomic_load_n(&l->pfab->armed, __ATOMIC_RELAXED))
		return;
	__atomic_add_fetch(&l->pbell->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&l->pfab->sleepers, __ATOMIC_SEQ_CST))
		bell_wake(l->pbell);
}

/* shm_bell -- ring the peer's doorbell if its poller sleeps (after a store it must see). */
void shm_bell(struct shm_link *l)
{
	uint64_t one = 1;

	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* our store, then its flag: pairs with arm */
	if (l->pfab == NULL || !__atomic_load_n(&l->pfab->waiting, __ATOMIC_RELAXED))
		return;
	if (write(l->peer_bell, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_debug("shm: link %u: cannot ring the peer: %s", l->base.id, strerror(errno));
	__atomic_add_fetch(&l->pbell->rings, 1,
	                   __ATOMIC_RELEASE); /* after the write: clear_wake() in ../swcq.c */
}

/* shm_rnr_bell -- wake the peer's thread if it has requests waiting for our RECVs or ring room. */
void shm_rnr_bell(struct shm_link *l)
{
	uint64_t one = 1;

	/* our store, then its flag: pairs with defer_wait() */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (l->peer != NULL && __atomic_load_n(&l->peer->rnr, __ATOMIC_RELAXED) &&
	    write(l->peer_rnr, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_debug("shm: link %u: cannot ring the peer: %s", l->base.id, strerror(errno));
}
