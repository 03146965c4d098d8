/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * swcq.h -- the completion queue of the software providers (tcp, shm),
 * as libfabric's prov/util keeps util_cq: a ring of struct fab_wc with
 * credits (every request and RECV takes one when posted, so a push never
 * finds the ring full), one poller, and a wait fd (an eventfd) with its
 * one-shot arm, as ibv_req_notify_cq(). Producers push and then wake;
 * the poller polls, arms, waits. The provider keeps only what differs:
 * how many producers (set at init), what else makes the poller ready
 * (shm: accepted links and links to walk, a ready() hook that arm and
 * wait consult; tcp: accepted links, which its own arm checks after
 * fab_swcq_arm() and undoes with fab_swcq_disarm()), and where the
 * wake-up counter and the armed flag live (shm: on pages its peers read
 * and ring too).
 *
 * The wake-up protocol. The poller announces (waiting = 1), a full fence,
 * then looks at the ring and the provider's ready(); a producer publishes
 * its entries, a full fence, then looks at waiting: one of the two sees
 * the other (no wake-up is lost). One producer per arm writes the eventfd
 * (the one that turns rang from 0 to 1; announce() lowers it): the rest
 * see it written, as a CQ event is given once. Whoever writes it bumps *rung
 * after the write; the poller, when not armed, reads the eventfd only
 * when *rung moved since it last did, so a wake-up whose completions a
 * poll took (or that came late, after a poll disarmed) does not leave the
 * fd readable for good: the core watches it level-triggered, and its
 * progress thread would spin in epoll_wait().
 *
 * Thread safety: push is MT-safe with FAB_SWCQ_MP, else one producer at a
 * time (tcp: the NIC role); wake, ring and the credits are MT-safe; poll
 * is serialized (one poller), and arm or wait may run in another thread
 * meanwhile (fabric.h).
 */
#ifndef LOCO_FABRIC_SWCQ_H
#define LOCO_FABRIC_SWCQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fabric.h"
#include "provider.h"

enum {
	FAB_SWCQ_MP = 1 << 0, /* many producers: push under a spinlock */
};

struct fab_swcq_attr {
	const char *name; /* for logs: "tcp", "shm" */
	uint32_t depth;   /* entries (rounded up to a power of two) */
	unsigned flags;   /* FAB_SWCQ_* */
	/* the wake-up counter, when others ring the fd too (shm: the bell page); NULL: its own */
	uint32_t *rung;
	/* a copy of the armed flag that others read (shm: the fab page's waiting); NULL: none */
	uint32_t *mirror;
	/* arm and wait, after announcing: whether the poller has more than the ring to take */
	int (*ready)(void *arg);
	void *arg;
};

struct fab_swcq {
	/* first: shm's spinning driver reads them beside its walk_work (shm.h) */
	uint64_t head; /* atomic: the poller's */
	uint64_t tail; /* atomic: the producers' */
	struct fab_wc *ring;
	uint32_t mask;
	unsigned flags;
	int64_t credits;    /* atomic: entries not yet promised to a request */
	int waiting;        /* atomic: armed (the poller sleeps or is about to) */
	int rang;           /* atomic: a producer wrote evfd since the poller last armed */
	uint32_t rung_seen; /* the poller's: *rung when it last cleared evfd */
	uint32_t *rung;     /* atomic: +1 after each write of evfd */
	uint32_t *mirror;
	pthread_spinlock_t lock; /* FAB_SWCQ_MP: the producers */
	int evfd;
	int (*ready)(void *arg);
	void *arg;
	const char *name;
	uint32_t own_rung;
};

/*
 * fab_swcq_init -- an empty queue of @attr->depth entries (as many
 * credits) and its eventfd. 0, -ENOMEM, -errno of eventfd(); on failure
 * nothing is held and fab_swcq_fini() is a no-op, as on a zeroed @cq.
 */
int fab_swcq_init(struct fab_swcq *cq, const struct fab_swcq_attr *attr);

/* fab_swcq_fini -- free the ring and close the fd (a zeroed or failed @cq: nothing). */
void fab_swcq_fini(struct fab_swcq *cq);

/* fab_swcq_take_credit -- reserve @n entries at post time; false (nothing taken) when full. */
static inline bool fab_swcq_take_credit(struct fab_swcq *cq, int64_t n)
{
	return fab_credits_take(&cq->credits, n);
}

/* fab_swcq_give_credit -- return @n reserved entries that will make no completion. */
static inline void fab_swcq_give_credit(struct fab_swcq *cq, int64_t n)
{
	fab_credits_give(&cq->credits, n);
}

/*
 * fab_swcq_push -- append a completion of @link's (its context and id);
 * the caller took a credit for it. Nobody is woken: call fab_swcq_wake()
 * after a batch.
 */
void fab_swcq_push(struct fab_swcq *cq, const struct fab_link *link, uint64_t wrid, int opcode,
                   int status, uint32_t len, uint32_t imm, int has_imm);

/*
 * fab_swcq_wake -- after pushes (or anything ready() reports): write the
 * fd if the poller is armed. Returns whether it did.
 */
bool fab_swcq_wake(struct fab_swcq *cq);

/* fab_swcq_ring -- write the fd and count it, armed or not (wake's second half). */
void fab_swcq_ring(struct fab_swcq *cq);

/*
 * fab_swcq_poll -- take up to @max completions into @wc, give their
 * credits back, disarm if any came (one-shot), and clear a stale wake-up.
 * Returns how many, or -EINVAL.
 */
int fab_swcq_poll(struct fab_swcq *cq, struct fab_wc *wc, int max);

/* fab_swcq_empty -- whether the ring holds no completion (the poller's view). */
static inline bool fab_swcq_empty(const struct fab_swcq *cq)
{
	return __atomic_load_n(&cq->head, __ATOMIC_RELAXED) ==
	       __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE);
}

/* fab_swcq_tail -- the producers' count, to tell whether a turn pushed anything. */
static inline uint64_t fab_swcq_tail(const struct fab_swcq *cq)
{
	return __atomic_load_n(&cq->tail, __ATOMIC_RELAXED);
}

/*
 * fab_swcq_arm -- fab_arm(): consume the fd's event and arm. 0 when armed;
 * -EAGAIN (not armed) when completions, or what ready() reports, are
 * already there; -errno of read().
 */
int fab_swcq_arm(struct fab_swcq *cq);

/*
 * fab_swcq_wait -- fab_wait(): arm, and block on the fd up to @timeout_ms
 * (-1: forever) unless something is ready; disarmed on return. 0,
 * -ETIMEDOUT, -errno.
 */
int fab_swcq_wait(struct fab_swcq *cq, int timeout_ms);

/*
 * fab_swcq_disarm -- lower the armed flag: the provider, after
 * fab_swcq_arm() returned 0, found work of its own (tcp: an accepted link,
 * which its fab_arm() reports and its fab_wait() does not).
 */
void fab_swcq_disarm(struct fab_swcq *cq);

/* fab_swcq_wait_fd -- fab_wait_fd(): the eventfd. */
static inline int fab_swcq_wait_fd(const struct fab_swcq *cq)
{
	return cq->evfd;
}

#endif
