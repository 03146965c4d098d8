/* SPDX-License-Identifier: BSD-2-Clause */
/* dial.c -- dialing (dial.h): the control connections to make, the dialer thread's data links. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dial.h"
#include "log.h"
#include "manager.h"
#include "wake.h"

/* A member the dialer must open a data link to. */
struct lc_dial {
	struct lc_member_info info;
	struct lc_link_proof proof; /* from the member's authenticated session (auth.h) */
	uint64_t next_ns;           /* next attempt */
	uint64_t deadline;          /* give up after */
	unsigned delay_ms;          /* back-off */
	int busy;                   /* being dialled now */
	int cancelled;              /* while busy: drop it when done */
	struct lc_dial *next;
};

struct lc_dials {
	pthread_mutex_t lock; /* a leaf: guards everything here */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC */
	pthread_t thread;
	int started;
	int stop;
	struct lc_dial *todo;
	struct lc_dial_done *done, **done_tail;
};

/* finish -- queue a finished data link for the progress thread. d->lock held. */
static void finish(loco_manager_t *m, struct fab_link *link, const struct lc_member_info *info)
{
	struct lc_dials *d = m->dial.dials;
	struct lc_dial_done *x = calloc(1, sizeof(*x));

	if (x == NULL) {
		lc_log_err("manager: out of memory: dropping a data link to node %u", info->node);
		fab_link_close(link);
		return;
	}
	*x = (struct lc_dial_done){.link = link, .info = *info};
	*d->done_tail = x;
	d->done_tail = &x->next;
	lc_wake(m);
}

/* permanent -- errors that retrying cannot fix. */
static int permanent(int err)
{
	return err == -LOCO_EAUTH || err == -EEXIST || err == -EPROTO || err == -EALREADY ||
	       err == -ESTALE || err == -EPROTONOSUPPORT;
}

static void unlink_dial(struct lc_dials *d, struct lc_dial *x)
{
	for (struct lc_dial **pp = &d->todo; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	}
	sodium_memzero(x, sizeof(*x)); /* its session key */
	free(x);
}

/* due -- the next dial to make now, or NULL and *@wake when to look again. d->lock held. */
static struct lc_dial *due(struct lc_dials *d, uint64_t now, uint64_t *wake)
{
	*wake = now + 100000000ull;
	for (struct lc_dial *x = d->todo; x != NULL; x = x->next) {
		if (x->busy)
			continue;
		if (x->next_ns <= now)
			return x;
		if (x->next_ns < *wake)
			*wake = x->next_ns;
	}
	return NULL;
}

static void wait_until(struct lc_dials *d, uint64_t now, uint64_t wake)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)((wake - now) / 1000000000ull);
	ts.tv_nsec += (long)((wake - now) % 1000000000ull);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&d->cond, &d->lock, &ts);
}

static void *dialer_main(void *arg)
{
	loco_manager_t *m = arg;
	struct lc_dials *d = m->dial.dials;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		uint64_t now = lc_now_ns(), wake;
		struct lc_dial *x = due(d, now, &wake);
		struct lc_member_info info;
		struct lc_link_proof proof;
		struct fab_link *link = NULL;
		uint64_t inc;
		int ret;

		if (x == NULL) {
			wait_until(d, now, wake);
			continue;
		}
		x->busy = 1;
		info = x->info;
		proof = x->proof;
		inc = __atomic_load_n(&m->inc, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&d->lock);
		/* a fresh counter each attempt: the acceptor admits each one once */
		ret = lc_link_open(m->fab, info.fab_addr, &proof, lc_linkin_counter(m),
		                   (int)m->cfg.fail_timeout_ms, &link);
		sodium_memzero(&proof, sizeof(proof));
		pthread_mutex_lock(&d->lock);
		x->busy = 0;
		if (ret == 0 && inc != __atomic_load_n(&m->inc, __ATOMIC_ACQUIRE)) {
			/* we rejoined as a new incarnation meanwhile: the link names the old one */
			fab_link_close(link);
			ret = -EAGAIN;
		}
		if (ret == 0)
			finish(m, link, &info);
		now = lc_now_ns();
		if (ret == 0 || x->cancelled || permanent(ret) || now >= x->deadline) {
			if (ret != 0 && !x->cancelled)
				lc_log_warn("manager: could not connect to node %u at %s: %s",
				            info.node, info.ctrl_addr, strerror(-ret));
			unlink_dial(d, x);
			continue;
		}
		x->next_ns = now + (uint64_t)x->delay_ms * 1000000ull;
		x->delay_ms = x->delay_ms < 500 ? x->delay_ms * 2 : 500;
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int lc_dials_start(loco_manager_t *m)
{
	struct lc_dials *d = calloc(1, sizeof(*d));
	pthread_condattr_t ca;
	int ret;

	if (d == NULL)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	d->done_tail = &d->done;
	m->dial.dials = d;
	ret = -pthread_create(&d->thread, NULL, dialer_main, m);
	if (ret) {
		lc_log_err("manager: cannot start the dialer thread: %s", strerror(-ret));
		return ret; /* lc_dials_stop() frees */
	}
	d->started = 1;
	return 0;
}

void lc_dials_stop(loco_manager_t *m)
{
	struct lc_dials *d = m->dial.dials;

	if (d == NULL)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = 1;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->started)
		pthread_join(d->thread, NULL);
	while (d->todo != NULL)
		unlink_dial(d, d->todo);
	while (d->done != NULL) {
		struct lc_dial_done *x = d->done;

		d->done = x->next;
		fab_link_close(x->link);
		free(x);
	}
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	m->dial.dials = NULL;
}

void lc_dial_link(loco_manager_t *m, const struct lc_member_info *info)
{
	struct lc_dials *d = m->dial.dials;
	struct lc_link_proof proof;
	struct lc_dial *x;

	/* m->lock held: the proof comes from the member's authenticated session */
	if (lc_linkin_proof(m, info->node, info->inc, &proof) != 0) {
		lc_log_warn("manager: no authenticated session with node %u: no data link to it",
		            info->node);
		return;
	}
	pthread_mutex_lock(&d->lock);
	for (x = d->todo; x != NULL; x = x->next)
		if (x->info.node == info->node)
			break;
	if (x == NULL) {
		x = calloc(1, sizeof(*x));
		if (x == NULL) {
			pthread_mutex_unlock(&d->lock);
			lc_log_err("manager: out of memory: cannot connect to node %u", info->node);
			return;
		}
		x->next = d->todo;
		d->todo = x;
	}
	x->info = *info;
	x->proof = proof;
	sodium_memzero(&proof, sizeof(proof));
	x->cancelled = 0;
	x->next_ns = 0;
	x->delay_ms = 10;
	x->deadline = lc_now_ns() + (uint64_t)m->cfg.join_timeout_ms * 1000000ull;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

void lc_dial_cancel(loco_manager_t *m, uint32_t node)
{
	struct lc_dials *d = m->dial.dials;

	pthread_mutex_lock(&d->lock);
	for (struct lc_dial *x = d->todo; x != NULL; x = x->next) {
		if (x->info.node != node)
			continue;
		if (x->busy)
			x->cancelled = 1;
		else
			unlink_dial(d, x);
		break;
	}
	pthread_mutex_unlock(&d->lock);
}

struct lc_dial_done *lc_dial_take(loco_manager_t *m)
{
	struct lc_dials *d = m->dial.dials;
	struct lc_dial_done *list;

	pthread_mutex_lock(&d->lock);
	list = d->done;
	d->done = NULL;
	d->done_tail = &d->done;
	pthread_mutex_unlock(&d->lock);
	return list;
}

/* ------------------------------------------------------------------ */
/* control connections to make: the progress thread's list (m->lock)  */

void lc_cdial_free(loco_manager_t *m, struct lc_cdial *d)
{
	for (struct lc_cdial **pp = &m->dial.cdials; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	if (d->conn != NULL)
		d->conn->dial = NULL;
	free(d);
}

/* lc_cdial_failed -- @d's attempt failed with @err: retry later, or give up. m->lock held. */
void lc_cdial_failed(loco_manager_t *m, struct lc_cdial *d, int err)
{
	uint64_t now = lc_now_ns();

	d->conn = NULL;
	if (d->join) {
		lc_dial_join_answer(m, err);
		lc_cdial_free(m, d);
		return;
	}
	if (permanent(err) || now >= d->deadline) {
		lc_log_warn("manager: could not connect to node %u at %s: %s", d->info.node,
		            d->info.ctrl_addr, strerror(-err));
		lc_cdial_free(m, d);
		return;
	}
	d->next_ns = now + (uint64_t)d->delay_ms * 1000000ull;
	d->delay_ms = d->delay_ms < 500 ? d->delay_ms * 2 : 500;
}

/* lc_cdial_cancel -- nothing to do for @node any more (it is up, or gone). m->lock held. */
void lc_cdial_cancel(loco_manager_t *m, uint32_t node)
{
	for (struct lc_cdial *d = m->dial.cdials; d != NULL; d = d->next) {
		if (d->info.node == node && node != 0 && !d->join) {
			lc_cdial_free(m, d); /* an attempt under way goes on; admission decides */
			return;
		}
	}
}

void lc_dial_ctrl(loco_manager_t *m, const struct lc_member_info *info, int join)
{
	struct lc_cdial *d = NULL;

	if (info->node != 0 && !join)
		for (d = m->dial.cdials; d != NULL; d = d->next)
			if (d->info.node == info->node && !d->join)
				break;
	if (d == NULL) {
		d = calloc(1, sizeof(*d));
		if (d == NULL) {
			lc_log_err("manager: out of memory: cannot connect to %s", info->ctrl_addr);
			if (join) {
				lc_dial_join_answer(m, -ENOMEM);
			}
			return;
		}
		d->next = m->dial.cdials;
		m->dial.cdials = d;
	}
	d->info = *info;
	d->join = join;
	d->next_ns = 0;
	d->delay_ms = 10;
	d->deadline = lc_now_ns() + (uint64_t)m->cfg.join_timeout_ms * 1000000ull;
	lc_wake(m);
}

struct lc_cdial *lc_cdial_due(loco_manager_t *m, uint64_t now, uint64_t *wake)
{
	for (struct lc_cdial *d = m->dial.cdials; d != NULL; d = d->next) {
		if (d->conn != NULL)
			continue;
		if (d->next_ns <= now)
			return d;
		if (d->next_ns < *wake)
			*wake = d->next_ns;
	}
	return NULL;
}

void lc_cdials_free(loco_manager_t *m)
{
	while (m->dial.cdials != NULL)
		lc_cdial_free(m, m->dial.cdials);
}

int lc_cdial_pending(loco_manager_t *m, uint32_t node)
{
	for (struct lc_cdial *d = m->dial.cdials; d != NULL; d = d->next)
		if (d->info.node == node || (node == 0 && d->join))
			return 1;
	return 0;
}

void lc_dial_join_begin(loco_manager_t *m)
{
	m->dial.join_done = 0;
}

void lc_dial_join_answer(loco_manager_t *m, int ret)
{
	m->dial.join_ret = ret;
	m->dial.join_done = 1;
}

void lc_dial_join_answer_first(loco_manager_t *m, int ret)
{
	if (!m->dial.join_done)
		lc_dial_join_answer(m, ret);
}

int lc_dial_join_result(loco_manager_t *m, int *ret)
{
	*ret = m->dial.join_ret;
	return m->dial.join_done;
}
