/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * link.c -- the life of a verbs link: creation, its RC QP, the fab's list
 * of links, going down (cause and flush status, the QP to the error
 * state), close (the close marker), and zombies freed once drained.
 */
#include <errno.h>
#include <unistd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../log.h"
#include "verbs.h"

/* vrb_kick -- wake the event thread (it frees zombies, watches the CM). */
void vrb_kick(struct vrb_fab *f)
{
	uint64_t one = 1;

	if (write(f->ctl_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_warn("verbs: %s: cannot wake the event thread: %s", f->dev, strerror(errno));
}

/* vrb_addr_str -- "ip:port" of @sa into @buf, or "?" when it is not IPv4. */
void vrb_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	struct fab_addr a = {.len = sizeof(struct sockaddr_in)};

	snprintf(buf, len, "?");
	if (sa == NULL || sa->sa_family != AF_INET)
		return;
	memcpy(&a.ss, sa, sizeof(struct sockaddr_in));
	fab_addr_format(&a, buf, len);
}

/* vrb_link_disconnect -- move the QP to the error state and tell the peer (once). */
void vrb_link_disconnect(struct vrb_link *l)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (__atomic_exchange_n(&l->disconnected, 1, __ATOMIC_ACQ_REL))
		return;
	/* librdmacm moves the QP to the error state first, then sends DREQ/DREP */
	if (rdma_disconnect(l->id) != 0 && ibv_modify_qp(l->qp, &a, IBV_QP_STATE) != 0)
		lc_log_warn("verbs: %s: link %u to %s: cannot move the QP to the error state: %s",
		            l->fab->dev, l->base.id, l->peer, strerror(errno));
}

/*
 * vrb_set_down / vrb_link_down -- take @l down: @cause is what fab_link_state() reports,
 * @err the status of its flushed requests. The first caller wins (a weak
 * cause, set for a flush nobody explained, yields to a real error). The QP
 * goes to the error state, so the device flushes every outstanding and
 * later request, and the peer is told (DREQ). Returns whether it did.
 */
bool vrb_set_down(struct vrb_link *l, int cause, int err, bool weak)
{
	uint64_t want = (uint64_t)(uint32_t)-cause | (uint64_t)(uint16_t)-err << 32 |
	                (weak ? VRB_DOWN_WEAK : 0);
	uint64_t cur = __atomic_load_n(&l->down, __ATOMIC_ACQUIRE);

	for (int i = 0; i < 8; i++) {
		if (cur != 0 && (!(cur & VRB_DOWN_WEAK) || weak))
			return false;
		if (__atomic_compare_exchange_n(&l->down, &cur, want, false, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE))
			return true;
	}
	return false;
}

bool vrb_link_down(struct vrb_link *l, int cause, int err, bool weak, const char *why)
{
	if (!vrb_set_down(l, cause, err, weak))
		return false;
	if (why != NULL)
		lc_log_warn("verbs: %s: link %u to %s down: %s", l->fab->dev, l->base.id, l->peer,
		            why);
	vrb_link_disconnect(l);
	return true;
}

struct vrb_link *vrb_link_new(struct vrb_fab *f, struct rdma_cm_id *id)
{
	const struct fab_attr *a = &f->base.attr;
	struct vrb_link *l = calloc(1, sizeof(*l));
	/* one slot more than the depth: the close marker */
	uint32_t sq = fab_pow2_at_least(a->sq_depth + 1), rq = fab_pow2_at_least(a->rq_depth);

	if (l == NULL)
		return NULL;
	l->fab = f;
	l->id = id;
	l->base.fab = &f->base;
	l->sq_mask = sq - 1;
	l->sq_cap = a->sq_depth;
	l->sig_every = a->sq_depth / 2 ? a->sq_depth / 2 : 1;
	if (l->sig_every > 64)
		l->sig_every = 64;
	l->sq_last_sig = 0; /* unsignaled requests in a row: at most sig_every */
	l->rq_mask = rq - 1;
	l->rq_cap = a->rq_depth;
	l->sq = calloc(sq, sizeof(*l->sq));
	l->rq = calloc(rq, sizeof(*l->rq));
	if (l->sq == NULL || l->rq == NULL) {
		free(l->sq);
		free(l->rq);
		free(l);
		return NULL;
	}
	for (uint32_t i = 0; i < sq; i++)
		l->sq[i].link = l;
	for (uint32_t i = 0; i < rq; i++)
		l->rq[i].link = l;
	pthread_spin_init(&l->lock, PTHREAD_PROCESS_PRIVATE);
	vrb_addr_str(rdma_get_peer_addr(id), l->peer, sizeof(l->peer));
	if (rdma_get_peer_addr(id) != NULL && rdma_get_peer_addr(id)->sa_family == AF_INET) {
		memcpy(&l->peer_addr.ss, rdma_get_peer_addr(id), sizeof(struct sockaddr_in));
		l->peer_addr.len = sizeof(struct sockaddr_in);
	}
	return l;
}

/* vrb_link_free -- destroy the QP, the id and the memory (the id's events all acked). */
void vrb_link_free(struct vrb_link *l)
{
	if (l->qp != NULL)
		rdma_destroy_qp(l->id);
	if (l->id != NULL && rdma_destroy_id(l->id) != 0)
		lc_log_warn("verbs: %s: link %u to %s: rdma_destroy_id failed: %s", l->fab->dev,
		            l->base.id, l->peer, strerror(errno));
	pthread_spin_destroy(&l->lock);
	free(l->sq);
	free(l->rq);
	free(l);
}

/* vrb_link_create_qp -- the link's RC QP on the fab's PD and CQ, with its rdma_cm options. */
int vrb_link_create_qp(struct vrb_link *l)
{
	struct vrb_fab *f = l->fab;
	struct ibv_qp_init_attr qa = {
	    .send_cq = f->cq,
	    .recv_cq = f->cq,
	    .cap = {.max_send_wr = l->sq_cap + 1, /* + the close marker */
	            .max_recv_wr = l->rq_cap,
	            .max_send_sge = 1,
	            .max_recv_sge = 1,
	            .max_inline_data = f->base.attr.max_inline},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 0,
	};
	uint8_t tmo = f->ack_timeout;
	int ret;

	if (rdma_create_qp(l->id, f->pd, &qa) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot create a QP for the link to %s: %s", f->dev, l->peer,
		           strerror(-ret));
		return ret;
	}
	l->qp = l->id->qp;
	l->base.id = l->qp->qp_num;
	/* the dead-peer bound: a silent peer fails the link within timeout_ms */
	if (rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, sizeof(tmo)))
		lc_log_info("verbs: %s: link %u to %s: cannot set the ACK timeout (%s): the kernel "
		            "default applies",
		            f->dev, l->base.id, l->peer, strerror(errno));
	return 0;
}

/* vrb_link_set_rnr -- RNR NAK timer of an RTS QP (rdma_cm leaves 0, which means 655 ms). */
void vrb_link_set_rnr(struct vrb_link *l)
{
	struct ibv_qp_attr a = {.min_rnr_timer = VRB_MIN_RNR_TIMER};

	if (ibv_modify_qp(l->qp, &a, IBV_QP_MIN_RNR_TIMER) != 0)
		lc_log_info("verbs: %s: link %u to %s: cannot set the RNR timer: %s", l->fab->dev,
		            l->base.id, l->peer, strerror(errno));
}

void vrb_link_add(struct vrb_fab *f, struct vrb_link *l, int state)
{
	pthread_mutex_lock(&f->lock);
	l->state = state;
	l->next = f->links;
	f->links = l;
	pthread_mutex_unlock(&f->lock);
}

/* vrb_link_unlink -- remove @l from f->links (under f->lock). */
void vrb_link_unlink(struct vrb_fab *f, struct vrb_link *l)
{
	for (struct vrb_link **p = &f->links; *p != NULL; p = &(*p)->next) {
		if (*p == l) {
			*p = l->next;
			return;
		}
	}
}

/*
 * wait_poller -- wait until a reaper (fab_poll(), fab_arm()) that may have
 * seen a link has left: the links just unlisted are out of its reach.
 */
static void wait_poller(struct vrb_fab *f)
{
	pthread_mutex_lock(&f->reap_lock);
	pthread_mutex_unlock(&f->reap_lock);
}

static bool link_drained(const struct vrb_link *l)
{
	return __atomic_load_n(&l->sq_done, __ATOMIC_ACQUIRE) ==
	           __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&l->rq_done, __ATOMIC_ACQUIRE) ==
	           __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);
}

/* vrb_reap_zombies -- free closed links whose every request has been polled. */
void vrb_reap_zombies(struct vrb_fab *f)
{
	struct vrb_link *dead = NULL, *l, **p;

	pthread_mutex_lock(&f->lock);
	for (p = &f->links; (l = *p) != NULL;) {
		if (l->state == VRB_LINK_CLOSED && link_drained(l)) {
			*p = l->next;
			l->next = dead;
			dead = l;
			f->nzombies--;
			continue;
		}
		p = &l->next;
	}
	pthread_mutex_unlock(&f->lock);
	if (dead == NULL)
		return;
	wait_poller(f);
	while ((l = dead) != NULL) {
		dead = l->next;
		vrb_link_free(l);
	}
}

/*
 * post_marker -- after the QP entered the error state, retire requests
 * that executed unsignaled and that no later completion covers: a
 * zero-length signaled WRITE (ib_drain_sq's trick), flushed by the
 * device, swallowed by the poller. Without it the zombie never drains.
 */
static void post_marker(struct vrb_link *l)
{
	struct vrb_fab *f = l->fab;
	struct ibv_send_wr s, *bad = NULL;
	struct vrb_sqe *e;
	uint32_t prod;
	int ret;

	pthread_spin_lock(&l->lock);
	prod = l->sq_prod;
	if (prod == __atomic_load_n(&l->sq_done, __ATOMIC_ACQUIRE) || l->sq_last_sig == prod - 1) {
		pthread_spin_unlock(&l->lock);
		return; /* nothing outstanding, or the last request reports itself */
	}
	/* the CQ has VRB_CQ_SLACK entries beyond the credits for this */
	if (__atomic_sub_fetch(&f->cq_credits, 1, __ATOMIC_ACQ_REL) < -VRB_CQ_SLACK) {
		__atomic_add_fetch(&f->cq_credits, 1, __ATOMIC_RELAXED);
		pthread_spin_unlock(&l->lock);
		lc_log_warn("verbs: %s: link %u to %s: no CQ room for the close marker: the link "
		            "is freed with the fabric",
		            f->dev, l->base.id, l->peer);
		return;
	}
	e = &l->sq[prod & l->sq_mask];
	*e = (struct vrb_sqe){.link = l, .opcode = FAB_OP_WRITE, .internal = 1};
	s = (struct ibv_send_wr){
	    .wr_id = (uintptr_t)e, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	ret = ibv_post_send(l->qp, &s, &bad);
	if (ret == 0) {
		l->sq_last_sig = prod;
		__atomic_store_n(&l->sq_prod, prod + 1, __ATOMIC_RELEASE);
	}
	pthread_spin_unlock(&l->lock);
	if (ret) {
		fab_credits_give(&f->cq_credits, 1);
		lc_log_warn("verbs: %s: link %u to %s: cannot post the close marker: %s", f->dev,
		            l->base.id, l->peer, strerror(ret));
	}
}

int vrb_link_close(struct fab_link *link)
{
	struct vrb_link *l = to_vrb_link(link);
	struct vrb_fab *f = l->fab;
	int held;

	pthread_mutex_lock(&f->lock);
	held = l->state == VRB_LINK_HELD;
	if (held)
		l->state = VRB_LINK_REFUSED; /* the event thread leaves it alone from now on */
	pthread_mutex_unlock(&f->lock);
	if (held && rdma_reject(l->id, NULL, 0) != 0)
		lc_log_info("verbs: %s: link %u from %s: rdma_reject failed: %s", f->dev,
		            l->base.id, l->peer, strerror(errno));
	/* outstanding requests are flushed: -ECANCELED unless the link was already down */
	vrb_link_down(l, -ECANCELED, -ECANCELED, false, NULL);
	vrb_link_disconnect(l);
	post_marker(l);
	pthread_mutex_lock(&f->lock);
	if (l->state != VRB_LINK_CLOSED) {
		l->state = VRB_LINK_CLOSED;
		f->nzombies++;
	}
	pthread_mutex_unlock(&f->lock);
	vrb_kick(f); /* the event thread frees it once its requests are polled */
	return 0;
}

int vrb_link_state(struct fab_link *link)
{
	return vrb_link_cause(to_vrb_link(link));
}

int vrb_link_peer(struct fab_link *link, struct fab_addr *out)
{
	struct vrb_link *l = to_vrb_link(link);

	if (l->peer_addr.len == 0 || out == NULL)
		return -ENOTCONN;
	*out = l->peer_addr;
	return 0;
}
