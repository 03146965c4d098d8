/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * provider.h -- what the providers share and only they use (libfabric's
 * prov/util): the -EOPNOTSUPP stubs (common.c), the accept queue
 * (acceptq.c), the argument checks every provider makes (check.c), and
 * small inline helpers. The region key table is keytab.h.
 */
#ifndef LOCO_FABRIC_PROVIDER_H
#define LOCO_FABRIC_PROVIDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../clock.h"
#include "fabric.h"

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

struct keytab;

/* fab_ops_fill -- copy @src into @dst, replacing NULL ops with -EOPNOTSUPP stubs. */
void fab_ops_fill(struct fab_ops *dst, const struct fab_ops *src);

/* fab_auto_remote -- the fab that an auto @fab (auto.c) reaches other hosts with: verbs or tcp. */
struct fab *fab_auto_remote(struct fab *fab);

/* A held link waiting for fab_accept(); providers embed it in their link. */
struct fab_pending {
	struct fab_pending *next;
	struct fab_link *link;
	uint8_t priv[FAB_PRIV_MAX]; /* the connector's private data */
	size_t priv_len;
	int queued; /* under the provider's lock: 1 from push until accept or remove */
};

/* The accept queue of a fab, under the provider's lock; fab_acceptq_ready() peeks without it. */
struct fab_acceptq {
	pthread_mutex_t *lock; /* the provider's */
	pthread_cond_t *cond;  /* signaled under @lock when a link is queued */
	struct fab_pending *head, *tail;
};

/* fab_acceptq_init -- an empty queue guarded by the provider's @lock, waking @cond. */
void fab_acceptq_init(struct fab_acceptq *q, pthread_mutex_t *lock, pthread_cond_t *cond);

/* fab_acceptq_push -- with the lock held: queue @link, @p filled in (priv), and wake acceptors. */
void fab_acceptq_push(struct fab_acceptq *q, struct fab_pending *p, struct fab_link *link);

/*
 * fab_acceptq_remove -- with the lock held: take @p out of the queue if it
 * is still there (a held link the provider refuses before anyone accepted
 * it). Returns whether it was; if not, fab_accept() gave it to the caller.
 */
bool fab_acceptq_remove(struct fab_acceptq *q, struct fab_pending *p);

/*
 * fab_acceptq_accept -- fab_accept() on @q: take the oldest link, waiting
 * up to @timeout_ms (0: do not wait; < 0: forever), give it @ctx, and
 * return it in *@out with the connector's private data in @priv
 * (FAB_PRIV_MAX bytes of room; may be NULL) and its length in *@priv_len
 * (may be NULL). Takes the lock itself. 0, -EINVAL, -EAGAIN (none came).
 */
int fab_acceptq_accept(struct fab_acceptq *q, uint64_t ctx, int timeout_ms, struct fab_link **out,
                       void *priv, size_t *priv_len);

/* fab_acceptq_ready -- whether a link waits; lock-free (pairs with the push's release). */
static inline bool fab_acceptq_ready(const struct fab_acceptq *q)
{
	return __atomic_load_n(&q->head, __ATOMIC_ACQUIRE) != NULL;
}

/*
 * Bounds against strangers (fab_accept() in fabric.h): a held link waits
 * at most fab_hold_ms() for fab_link_admit() or fab_link_close(); a fab
 * holds at most FAB_MAX_UNADMITTED links not admitted yet (before their
 * handshake or held), FAB_MAX_UNADMITTED_HOST of them from one IP address.
 * Beyond that, verbs refuses a new connection at once; tcp, whose
 * strangers can hold connections that never speak, makes room for it by
 * closing the link that has least to show (tcp/link.c): a member's link
 * is admitted however many unproven ones strangers keep open.
 */
#define FAB_HOLD_MIN_MS         2000
#define FAB_MAX_UNADMITTED      128
#define FAB_MAX_UNADMITTED_HOST 16

/* fab_hold_ms -- the bound of a held link: max(FAB_HOLD_MIN_MS, @attr->timeout_ms). */
static inline uint32_t fab_hold_ms(const struct fab_attr *attr)
{
	return attr->timeout_ms > FAB_HOLD_MIN_MS ? attr->timeout_ms : FAB_HOLD_MIN_MS;
}

/* A rate-limited warning: at most one a second, counting those it swallowed. */
struct fab_ratelog {
	uint64_t next_ns;
	unsigned dropped;
};

/*
 * fab_refuse_log -- warn, at most once a second per @rl, that provider
 * @prov refused a connection from @who because @why. Not MT-safe: one
 * thread per @rl (the provider's own).
 */
void fab_refuse_log(struct fab_ratelog *rl, const char *prov, const struct fab_addr *who,
                    const char *why);

/*
 * fab_copy_out -- @len bytes from memory others may be writing (@src) to
 * @dst; aligned words of @src with one 8-byte atomic load each (never torn).
 */
void fab_copy_out(void *dst, const void *src, size_t len);

/*
 * fab_copy_in -- @len bytes into memory others may be reading (@dst), in
 * ascending address order, aligned words of @dst with one 8-byte atomic
 * store each, @pause_ns between words (0: none). @src may be shared too.
 * Without a pause, where both ends are 8-byte aligned, in 16-byte blocks
 * where the CPU makes a 16-byte aligned access atomic (x86 with AVX):
 * each aligned word is still loaded and stored whole.
 */
void fab_copy_in(void *dst, const void *src, size_t len, uint64_t pause_ns);

/*
 * fab_land_write -- a remote WRITE's payload into target memory: lines in
 * ascending order; with a slow-write knob (@slow_ns > 0) lines in an order
 * drawn from *@rng, words ascending within a line, @slow_ns between words
 * (the worst a legal NIC does, DESIGN §3). Ends with a release fence.
 */
void fab_land_write(uint64_t slow_ns, uint64_t *rng, void *dst, const void *src, size_t len);

/* fab_mr_check -- the arguments of fab_mr_reg(): 0 or -EINVAL. */
int fab_mr_check(const void *addr, size_t len, unsigned access, struct fab_mr **out);

/* fab_connect_check -- the arguments of fab_connect(): 0 or -EINVAL. */
int fab_connect_check(const struct fab_addr *peer, const void *priv, size_t priv_len,
                      struct fab_link **out);

/*
 * fab_wr_check -- the form of work request @w (opcode, flags, lengths up
 * to @max_len): 0 or -EINVAL; -EMSGSIZE for an inline payload above
 * @max_inline. Whether
 * its buffers lie in registered regions is the provider's to check.
 */
int fab_wr_check(const struct fab_wr *w, uint32_t max_len, uint32_t max_inline);

/*
 * fab_recv_check -- @n receive buffers at @wr, each inside a region of
 * @kt with local write access: 0 or -EINVAL.
 */
int fab_recv_check(const struct keytab *kt, const struct fab_recv_wr *wr, int n);

/*
 * fab_credits_take / fab_credits_give -- the completion-queue entries a
 * fab has not promised yet (*@credits): every request and RECV takes one
 * when posted, so the CQ never overflows. Take returns false, and takes
 * nothing, when fewer than @n are left.
 */
static inline bool fab_credits_take(int64_t *credits, int64_t n)
{
	if (__atomic_sub_fetch(credits, n, __ATOMIC_ACQ_REL) >= 0)
		return true;
	__atomic_add_fetch(credits, n, __ATOMIC_RELAXED);
	return false;
}

static inline void fab_credits_give(int64_t *credits, int64_t n)
{
	if (n)
		__atomic_fetch_add(credits, n, __ATOMIC_RELAXED);
}

/* fab_pow2_at_least -- the smallest power of two >= @n (1 for 0). */
static inline uint32_t fab_pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* fab_deadline_ns -- the lc_now_ns() value @timeout_ms from now (< 0: an hour). */
static inline uint64_t fab_deadline_ns(int timeout_ms)
{
	return lc_now_ns() + (uint64_t)(timeout_ms < 0 ? 3600000 : timeout_ms) * 1000000ull;
}

#endif
