/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * acceptq.c -- the accept queue the providers share: held links a peer
 * opened wait there, in order, for fab_accept() (the caller then admits
 * or refuses them); the provider's lock guards it, its condition variable
 * wakes the acceptors, and the provider takes out those it refuses first.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "provider.h"

void fab_acceptq_init(struct fab_acceptq *q, pthread_mutex_t *lock, pthread_cond_t *cond)
{
	*q = (struct fab_acceptq){.lock = lock, .cond = cond};
}

void fab_acceptq_push(struct fab_acceptq *q, struct fab_pending *p, struct fab_link *link)
{
	p->link = link;
	p->next = NULL;
	p->queued = 1;
	if (q->tail)
		q->tail->next = p;
	else
		__atomic_store_n(&q->head, p, __ATOMIC_RELEASE); /* fab_acceptq_ready() peeks */
	q->tail = p;
	pthread_cond_broadcast(q->cond);
}

bool fab_acceptq_remove(struct fab_acceptq *q, struct fab_pending *p)
{
	struct fab_pending *prev = NULL;

	if (!p->queued)
		return false;
	for (struct fab_pending *c = q->head; c != NULL; prev = c, c = c->next) {
		if (c != p)
			continue;
		if (prev == NULL)
			__atomic_store_n(&q->head, c->next, __ATOMIC_RELEASE);
		else
			prev->next = c->next;
		if (q->tail == c)
			q->tail = prev;
		p->queued = 0;
		p->next = NULL;
		return true;
	}
	p->queued = 0;
	return false;
}

/*
 * wait_nonnull -- with @lock held, wait on @cond until *@slot is not NULL
 * or @timeout_ms passes (0: do not wait; < 0: forever). Returns 0 when
 * *@slot is set, -EAGAIN.
 */
static int wait_nonnull(pthread_cond_t *cond, pthread_mutex_t *lock, void *const *slot,
                        int timeout_ms)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms > 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	while (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == NULL && ret == 0) {
		if (timeout_ms == 0)
			ret = ETIMEDOUT;
		else if (timeout_ms < 0)
			ret = pthread_cond_wait(cond, lock);
		else
			ret = pthread_cond_timedwait(cond, lock, &ts);
	}
	return __atomic_load_n(slot, __ATOMIC_ACQUIRE) != NULL ? 0 : -EAGAIN;
}

int fab_acceptq_accept(struct fab_acceptq *q, uint64_t ctx, int timeout_ms, struct fab_link **out,
                       void *priv, size_t *priv_len)
{
	struct fab_pending *p;

	if (out == NULL)
		return -EINVAL;
	pthread_mutex_lock(q->lock);
	if (wait_nonnull(q->cond, q->lock, (void *const *)&q->head, timeout_ms)) {
		pthread_mutex_unlock(q->lock);
		return -EAGAIN;
	}
	p = q->head;
	__atomic_store_n(&q->head, p->next, __ATOMIC_RELEASE);
	if (q->head == NULL)
		q->tail = NULL;
	p->queued = 0;
	/* requests the caller posts before admission complete with ctx: read atomically */
	__atomic_store_n(&p->link->ctx, ctx, __ATOMIC_RELAXED);
	pthread_mutex_unlock(q->lock);
	if (priv != NULL)
		memcpy(priv, p->priv, p->priv_len);
	if (priv_len != NULL)
		*priv_len = p->priv_len;
	*out = p->link;
	return 0;
}
