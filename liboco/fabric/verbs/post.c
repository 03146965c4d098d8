/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * post.c -- posting on a verbs link: checking work requests (local
 * buffers against the region table, before the device sees them), their
 * verbs form, the software send queue with self-signaling, and RECVs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "../../log.h"
#include "verbs.h"

/*
 * local_ok -- whether @lkey names a region of this fab that holds
 * [@addr, @addr + @len) with @access. Lock-free (keytab_check()).
 * The device checks the same: this finds it before posting, because a
 * local protection error raised while earlier requests are in flight
 * silences an rxe QP for good (Linux 6.1: no completion at all).
 */
static bool local_ok(const struct vrb_fab *f, uint32_t lkey, const void *addr, uint64_t len,
                     unsigned access)
{
	void *p;

	return keytab_check(&f->kt, lkey, (uintptr_t)addr, len, access, &p) == 0;
}

/*
 * check_wr -- 0 for a valid request, 1 when its local buffer lies outside
 * the region of its lkey (an execution error: -EFAULT completion), or a
 * negative errno for a bad request.
 */
static int check_wr(const struct vrb_fab *f, const struct fab_wr *w)
{
	int ret = fab_wr_check(w, f->max_msg, f->base.attr.max_inline);

	if (ret)
		return ret;
	switch (w->opcode) {
	case FAB_OP_CAS:
	case FAB_OP_FAA:
		if (!f->atomics)
			return -EOPNOTSUPP;
		return local_ok(f, w->lkey, w->local, 8, FAB_ACCESS_LOCAL_WRITE) ? 0 : 1;
	default:
		if (w->len == 0 || (w->flags & FAB_WR_INLINE))
			return 0;
		return local_ok(f, w->lkey, w->local, w->len,
		                w->opcode == FAB_OP_READ ? FAB_ACCESS_LOCAL_WRITE : 0)
		           ? 0
		           : 1;
	}
}

/* build_wr -- the verbs form of @w in slot @e. */
static void build_wr(const struct fab_wr *w, struct vrb_sqe *e, bool sig, bool fault,
                     struct ibv_send_wr *s, struct ibv_sge *sge)
{
	*sge = (struct ibv_sge){.addr = (uintptr_t)w->local, .length = w->len, .lkey = w->lkey};
	*s = (struct ibv_send_wr){
	    .wr_id = (uintptr_t)e,
	    .sg_list = sge,
	    .num_sge = w->len ? 1 : 0,
	    .send_flags =
	        (sig ? IBV_SEND_SIGNALED : 0) | (w->flags & FAB_WR_FENCE ? IBV_SEND_FENCE : 0),
	};
	switch (w->opcode) {
	case FAB_OP_WRITE:
		s->opcode = IBV_WR_RDMA_WRITE;
		break;
	case FAB_OP_WRITE_IMM:
		s->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		s->imm_data = htonl(w->imm);
		break;
	case FAB_OP_READ:
		s->opcode = IBV_WR_RDMA_READ;
		break;
	case FAB_OP_SEND:
		s->opcode = IBV_WR_SEND_WITH_IMM;
		s->imm_data = htonl(w->imm);
		break;
	case FAB_OP_CAS:
		s->opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		s->wr.atomic.remote_addr = w->remote_addr;
		s->wr.atomic.rkey = w->rkey;
		s->wr.atomic.compare_add = w->compare;
		s->wr.atomic.swap = w->swap;
		break;
	case FAB_OP_FAA:
		s->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		s->wr.atomic.remote_addr = w->remote_addr;
		s->wr.atomic.rkey = w->rkey;
		s->wr.atomic.compare_add = w->swap;
		break;
	}
	if (w->opcode != FAB_OP_CAS && w->opcode != FAB_OP_FAA) {
		s->wr.rdma.remote_addr = w->remote_addr;
		s->wr.rdma.rkey = w->rkey;
		if (w->flags & FAB_WR_INLINE)
			s->send_flags |= IBV_SEND_INLINE;
	}
	e->wrid = w->wrid;
	e->len = w->len;
	e->opcode = w->opcode;
	e->user_sig = (w->flags & FAB_WR_SIGNALED) != 0;
	e->internal = 0;
	e->fault = fault;
	if (fault) {
		/* the QP is already in the error state: a zero-length WRITE, flushed */
		*s = (struct ibv_send_wr){.wr_id = (uintptr_t)e,
		                          .opcode = IBV_WR_RDMA_WRITE,
		                          .send_flags = IBV_SEND_SIGNALED};
	}
}

/*
 * post_seg -- post @n requests from the link's slot *@prod on; the first
 * one is a fault marker when @fault. Under l->lock. Returns 0, or the
 * error of ibv_post_send() with *@prod past what it took.
 */
static int post_seg(struct vrb_link *l, const struct fab_wr *wr, int n, bool fault, uint32_t *prod)
{
	struct ibv_send_wr s[VRB_POST_BATCH], *bad = NULL;
	struct ibv_sge sge[VRB_POST_BATCH];
	int ret;

	for (int i = 0; i < n;) {
		int k = n - i < VRB_POST_BATCH ? n - i : VRB_POST_BATCH;

		for (int j = 0; j < k; j++) {
			uint32_t p = *prod + (uint32_t)j;
			bool mark = fault && i + j == 0;
			/* signal every sig_every-th request ourselves: the SQ always drains */
			bool sig = mark || (wr[i + j].flags & FAB_WR_SIGNALED) ||
			           p - l->sq_last_sig >= l->sig_every;

			if (sig)
				l->sq_last_sig = p;
			build_wr(&wr[i + j], &l->sq[p & l->sq_mask], sig, mark, &s[j], &sge[j]);
			s[j].next = j + 1 < k ? &s[j + 1] : NULL;
		}
		ret = ibv_post_send(l->qp, s, &bad);
		if (ret) {
			*prod += bad ? (uint32_t)(bad - s) : 0;
			return ret;
		}
		*prod += (uint32_t)k;
		i += k;
	}
	return 0;
}

int vrb_post(struct fab_link *link, const struct fab_wr *wr, int n)
{
	struct vrb_link *l = to_vrb_link(link);
	struct vrb_fab *f = l->fab;
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	uint32_t prod, start;
	int ret, fault = -1;
	bool faulted = false;

	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		ret = check_wr(f, &wr[i]);
		if (ret < 0)
			return ret;
		if (ret > 0 && fault < 0)
			fault = i;
	}

	pthread_spin_lock(&l->lock);
	start = prod = l->sq_prod;
	if (prod - __atomic_load_n(&l->sq_done, __ATOMIC_ACQUIRE) + (uint32_t)n > l->sq_cap ||
	    !fab_credits_take(&f->cq_credits, n)) {
		pthread_spin_unlock(&l->lock);
		return -EAGAIN;
	}
	if (fault < 0) {
		ret = post_seg(l, wr, n, false, &prod);
	} else {
		/*
		 * A local buffer outside its region: what comes before it runs
		 * (or is flushed), then the QP enters the error state, and the
		 * bad request completes -EFAULT, the later ones -ECANCELED.
		 */
		ret = post_seg(l, wr, fault, false, &prod);
		if (ret == 0) {
			faulted = vrb_set_down(l, -EFAULT, -ECANCELED, false);
			if (faulted && ibv_modify_qp(l->qp, &err, IBV_QP_STATE) != 0)
				lc_log_warn("verbs: %s: link %u to %s: cannot move the QP to the "
				            "error state: %s",
				            f->dev, l->base.id, l->peer, strerror(errno));
			ret = post_seg(l, wr + fault, n - fault, faulted, &prod);
		}
	}
	/* pairs with the reaper's acquire load (drained zombies) */
	__atomic_store_n(&l->sq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->lock);
	if (faulted) {
		lc_log_warn("verbs: %s: link %u to %s down: %s %s: local buffer %p+%u outside the "
		            "region of lkey 0x%x",
		            f->dev, l->base.id, l->peer, fab_opcode_str(wr[fault].opcode),
		            wr[fault].flags & FAB_WR_SIGNALED ? "(signaled)" : "(unsignaled)",
		            wr[fault].local, wr[fault].len, wr[fault].lkey);
		vrb_link_disconnect(l);
	}
	if (ret == 0)
		return 0;

	/* the device refused a request that passed our checks: the link cannot go on */
	fab_credits_give(&f->cq_credits, n - (int64_t)(prod - start));
	lc_log_err("verbs: %s: link %u to %s: ibv_post_send refused request %u of %d (%s): %s",
	           f->dev, l->base.id, l->peer, prod - start, n,
	           fab_opcode_str(wr[prod - start].opcode), strerror(ret));
	vrb_link_down(l, -EIO, -ECANCELED, false, "the device refused a request");
	return -EIO;
}

/*
 * reflush_rq -- receive buffers posted to a QP already in the error state
 * must complete flushed. Hardware flushes them by itself; Soft-RoCE
 * flushes a receive queue only when its responder runs, which nothing
 * triggers after the failure (a user QP's post does not enter the
 * kernel), so they never completed and the link never drained. Entering
 * the error state again runs it (any state may move to error); on
 * hardware it changes nothing. (fabric test close-failed)
 */
static void reflush_rq(struct vrb_link *l)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (ibv_modify_qp(l->qp, &a, IBV_QP_STATE) != 0)
		lc_log_warn("verbs: %s: link %u to %s: cannot flush receive buffers posted after "
		            "the failure: %s",
		            l->fab->dev, l->base.id, l->peer, strerror(errno));
}

int vrb_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n)
{
	struct vrb_link *l = to_vrb_link(link);
	struct vrb_fab *f = l->fab;
	struct ibv_recv_wr r[VRB_POST_BATCH], *bad = NULL;
	struct ibv_sge sge[VRB_POST_BATCH];
	uint32_t prod, start;
	int ret;

	if (fab_recv_check(&f->kt, wr, n))
		return -EINVAL;
	pthread_spin_lock(&l->lock);
	start = prod = l->rq_prod;
	if (prod - __atomic_load_n(&l->rq_done, __ATOMIC_ACQUIRE) + (uint32_t)n > l->rq_cap ||
	    !fab_credits_take(&f->cq_credits, n)) {
		pthread_spin_unlock(&l->lock);
		return -EAGAIN;
	}
	for (int i = 0; i < n;) {
		int k = n - i < VRB_POST_BATCH ? n - i : VRB_POST_BATCH;

		for (int j = 0; j < k; j++) {
			struct vrb_rqe *q = &l->rq[(prod + (uint32_t)j) & l->rq_mask];

			q->wrid = wr[i + j].wrid;
			sge[j] = (struct ibv_sge){.addr = (uintptr_t)wr[i + j].local,
			                          .length = wr[i + j].len,
			                          .lkey = wr[i + j].lkey};
			r[j] = (struct ibv_recv_wr){.wr_id = (uintptr_t)q | 1,
			                            .sg_list = &sge[j],
			                            .num_sge = wr[i + j].len ? 1 : 0,
			                            .next = j + 1 < k ? &r[j + 1] : NULL};
		}
		ret = ibv_post_recv(l->qp, r, &bad);
		if (ret) {
			prod += bad ? (uint32_t)(bad - r) : 0;
			goto err_partial;
		}
		prod += (uint32_t)k;
		i += k;
	}
	__atomic_store_n(&l->rq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->lock);
	if (__atomic_load_n(&l->down, __ATOMIC_SEQ_CST) != 0)
		reflush_rq(l);
	return 0;

err_partial:
	__atomic_store_n(&l->rq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->lock);
	fab_credits_give(&f->cq_credits, n - (int64_t)(prod - start));
	lc_log_err("verbs: %s: link %u to %s: ibv_post_recv refused buffer %u of %d: %s", f->dev,
	           l->base.id, l->peer, prod - start, n, strerror(ret));
	vrb_link_down(l, -EIO, -ECANCELED, false, "the device refused a receive buffer");
	return -EIO;
}
