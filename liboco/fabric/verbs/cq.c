/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cq.c -- the completion queue of a verbs fab: reaping it (one reaper at a
 * time, reap_lock) into the caller's array or the stash, retiring the
 * send-queue slots a completion covers, swallowing the completions the
 * user did not ask for, and the wait fd (arm, wait).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../log.h"
#include "verbs.h"

/* Where one fab_poll() puts completions. */
struct vrb_out {
	struct fab_wc *wc;
	int n, max;
	int64_t released; /* CQ credits to give back */
};

/* vrb_status -- the fabric status of a verbs completion status (fabric.h contract). */
static int vrb_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECANCELED;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_LOC_PROT_ERR:
		return -EFAULT;
	case IBV_WC_REM_INV_REQ_ERR:
		return -EINVAL;
	case IBV_WC_LOC_LEN_ERR:
		return -EMSGSIZE;
	default:
		return -EIO;
	}
}

/* emit -- hand a completion to the caller's array, or stash it when that is full. */
static void emit(struct vrb_fab *f, struct vrb_out *o, const struct fab_wc *c)
{
	if (o->n < o->max) {
		o->wc[o->n++] = *c;
		o->released++;
		return;
	}
	/* the stash holds at most what the credits allow: cq_depth entries */
	f->stash[f->stash_tail++ & f->stash_mask] = *c;
}

static void emit_sqe(struct vrb_fab *f, struct vrb_out *o, const struct vrb_sqe *e,
                     const struct fab_wc *tmpl, int status)
{
	struct fab_wc c = *tmpl;

	c.wrid = e->wrid;
	c.opcode = e->opcode;
	c.status = status;
	c.len = status == 0 ? e->len : 0;
	emit(f, o, &c);
}

/* on_send_wc -- a completion of the send queue: retire its slot and the ones before it. */
static void on_send_wc(struct vrb_fab *f, struct vrb_out *o, const struct ibv_wc *w)
{
	struct vrb_sqe *e = (struct vrb_sqe *)(uintptr_t)w->wr_id;
	struct vrb_link *l = e->link;
	uint32_t done = l->sq_done;
	uint32_t pos = done + (((uint32_t)(e - l->sq) - done) & l->sq_mask);
	struct fab_wc tmpl = {
	    .link_ctx = __atomic_load_n(&l->base.ctx, __ATOMIC_RELAXED),
	    .link_id = l->base.id,
	};
	int status = 0;

	if (w->status == IBV_WC_WR_FLUSH_ERR) {
		/* we always set the cause before moving the QP to the error state */
		if (vrb_link_cause(l) == 0)
			vrb_link_down(l, -ECANCELED, -ECANCELED, true,
			              "the device flushed a request for no reported reason");
		status = vrb_link_flush_status(l);
	} else if (w->status != IBV_WC_SUCCESS) {
		char why[128];

		status = vrb_status(w->status);
		snprintf(why, sizeof(why), "%s %s failed: %s (vendor error 0x%x)",
		         fab_opcode_str(e->opcode), e->user_sig ? "(signaled)" : "(unsignaled)",
		         ibv_wc_status_str(w->status), w->vendor_err);
		/* a dead peer times every later request out too; other errors cancel them */
		vrb_link_down(l, status, status == -ETIMEDOUT ? -ETIMEDOUT : -ECANCELED, false,
		              why);
	}

	/*
	 * Earlier slots without a completion of their own executed: RC
	 * completes in order, and a failed or flushed request always gets
	 * its own completion (IB spec), signaled or not.
	 */
	for (; done != pos; done++) {
		const struct vrb_sqe *x = &l->sq[done & l->sq_mask];

		if (x->user_sig)
			emit_sqe(f, o, x, &tmpl, 0);
		else
			o->released++;
	}
	if (e->fault)
		status = -EFAULT; /* found at post time; the device only flushed it */
	if (e->internal || (status == 0 && !e->user_sig && !e->fault))
		o->released++; /* our own signal or marker: swallowed */
	else
		emit_sqe(f, o, e, &tmpl, status);
	/* the last touch of the link's send queue: pairs with posters' acquire loads */
	__atomic_store_n(&l->sq_done, pos + 1, __ATOMIC_RELEASE);
}

/* on_recv_wc -- a completion of the receive queue (RQs complete in order). */
static void on_recv_wc(struct vrb_fab *f, struct vrb_out *o, const struct ibv_wc *w)
{
	struct vrb_rqe *r = (struct vrb_rqe *)(uintptr_t)(w->wr_id & ~1ull);
	struct vrb_link *l = r->link;
	struct fab_wc c = {
	    .wrid = r->wrid,
	    .link_ctx = __atomic_load_n(&l->base.ctx, __ATOMIC_RELAXED),
	    .link_id = l->base.id,
	    .opcode = FAB_OP_RECV,
	};

	if (w->status == IBV_WC_SUCCESS) {
		if (w->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			c.opcode = FAB_OP_RECV_IMM;
		c.len = w->byte_len;
		if (w->wc_flags & IBV_WC_WITH_IMM) {
			c.imm = ntohl(w->imm_data);
			c.has_imm = 1;
		}
	} else if (w->status == IBV_WC_WR_FLUSH_ERR) {
		c.status = -ECANCELED;
	} else {
		char why[128];

		c.status = vrb_status(w->status);
		snprintf(why, sizeof(why), "RECV failed: %s (vendor error 0x%x)",
		         ibv_wc_status_str(w->status), w->vendor_err);
		vrb_link_down(l, c.status, -ECANCELED, false, why);
	}
	emit(f, o, &c);
	__atomic_store_n(&l->rq_done, l->rq_done + 1, __ATOMIC_RELEASE);
}

/* reap_cq -- move CQ entries into @o (then into the stash); returns the CQEs seen. */
static int reap_cq(struct vrb_fab *f, struct vrb_out *o, int rounds)
{
	struct ibv_wc w[VRB_POLL_BATCH];
	int seen = 0;

	for (int r = 0; r < rounds; r++) {
		int want = o->max - o->n, k;

		if (want <= 0)
			want = VRB_POLL_BATCH / 2; /* arm(): look, and keep what is found */
		if (want > VRB_POLL_BATCH)
			want = VRB_POLL_BATCH;
		k = ibv_poll_cq(f->cq, want, w);
		if (k < 0) {
			lc_log_err("verbs: %s: ibv_poll_cq failed: %d", f->dev, k);
			break;
		}
		for (int i = 0; i < k; i++) {
			if (w[i].wr_id & 1)
				on_recv_wc(f, o, &w[i]);
			else
				on_send_wc(f, o, &w[i]);
		}
		seen += k;
		if (k < want || o->n >= o->max)
			break;
	}
	return seen;
}

int vrb_poll(struct fab *fab, struct fab_wc *wc, int max)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	struct vrb_out o = {.wc = wc, .max = max};

	if (wc == NULL || max <= 0)
		return -EINVAL;
	pthread_mutex_lock(&f->reap_lock);
	while (o.n < max && f->stash_head != f->stash_tail) {
		o.wc[o.n++] = f->stash[f->stash_head++ & f->stash_mask];
		o.released++;
	}
	if (o.n < max)
		reap_cq(f, &o, VRB_POLL_ROUNDS);
	pthread_mutex_unlock(&f->reap_lock);
	fab_credits_give(&f->cq_credits, o.released);
	return o.n;
}

int vrb_wait_fd(struct fab *fab)
{
	return to_vrb_fab(fab)->epfd;
}

/*
 * arm_cq -- under reap_lock: ack the CQ events that made the wait fd
 * readable, request the next one, and reap what arrived before the
 * request (it would wake nobody) into the stash.
 */
static int arm_cq(struct vrb_fab *f)
{
	struct vrb_out o = {.wc = NULL, .max = 0};
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int ret;

	for (int i = 0; i < 1024 && ibv_get_cq_event(f->cc, &ev_cq, &ev_ctx) == 0; i++)
		f->unacked++;
	if (f->unacked) {
		ibv_ack_cq_events(f->cq, f->unacked);
		f->unacked = 0;
	}
	if (ibv_req_notify_cq(f->cq, 0) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: ibv_req_notify_cq failed: %s", f->dev, strerror(-ret));
		return ret;
	}
	reap_cq(f, &o, 4);
	fab_credits_give(&f->cq_credits, o.released);
	return f->stash_head != f->stash_tail ? -EAGAIN : 0;
}

/* do_arm -- request a CQ event; -EAGAIN when completions (or, with @accepts, links) wait. */
static int do_arm(struct vrb_fab *f, bool accepts)
{
	uint64_t v;
	int ret, waiting;

	if (read(f->acc_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&f->reap_lock);
	ret = arm_cq(f);
	pthread_mutex_unlock(&f->reap_lock);
	if (ret != 0 || !accepts)
		return ret;
	pthread_mutex_lock(&f->lock);
	waiting = fab_acceptq_ready(&f->acceptq);
	pthread_mutex_unlock(&f->lock);
	return waiting ? -EAGAIN : 0;
}

int vrb_arm(struct fab *fab)
{
	return do_arm(to_vrb_fab(fab), true);
}

int vrb_wait(struct fab *fab, int timeout_ms)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	struct pollfd pfd = {.fd = f->epfd, .events = POLLIN};
	int r = do_arm(f, false); /* like tcp: completions only */

	if (r == -EAGAIN)
		return 0;
	if (r < 0)
		return r;
	r = poll(&pfd, 1, timeout_ms);
	if (r == 0)
		return -ETIMEDOUT;
	return r < 0 && errno != EINTR ? -errno : 0;
}
