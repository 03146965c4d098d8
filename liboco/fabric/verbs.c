/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * verbs.c -- the fabric provider on libibverbs and librdmacm: RDMA NICs
 * and Soft-RoCE (rdma_rxe), with the semantics of fabric.h.
 *
 * One fab is one device port: a protection domain, ONE completion queue
 * (with a completion channel for fab_wait_fd/fab_arm) shared by every
 * link, and an rdma_cm listening id bound to the listen address. A link
 * is one RC queue pair on its own rdma_cm id. Connections are set up by
 * rdma_cm: fab_connect() resolves and connects on a private event channel,
 * then migrates the id to the fab's channel; the fab's event thread
 * answers CONNECT_REQUEST (QP on the fab's PD/CQ, rdma_accept), queues the
 * ESTABLISHED links for fab_accept(), and takes links down on DISCONNECTED.
 *
 * Work requests keep a software send queue per link (struct vrb_sqe): the
 * verbs wr_id points at the slot, so a completion names its request. The
 * provider signals every sig_every-th request itself, so the hardware
 * send queue never fills with unreaped unsignaled requests, and swallows
 * the completions the user did not ask for. A completion at slot p retires
 * every earlier slot of the link (RC completes in order). Every posted
 * request and RECV reserves a completion-queue entry (cq_credits), so the
 * CQ cannot overflow: failed requests always complete, signaled or not.
 *
 * A closed link becomes a zombie: its QP is moved to the error state and
 * the event thread destroys it once every request and RECV it held has
 * been flushed through fab_poll() (the completions carry link_ctx and
 * link_id, never the freed handle), and after the reaper has left the
 * call that may still have touched it (reap_lock).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../clock.h"
#include "../log.h"
#include "provider.h"

#define VRB_PRIV_MAGIC    0x4c /* 'L': our private data in rdma_connect */
#define VRB_PRIV_VERSION  1
#define VRB_PRIV_HDR      4 /* magic, version, length, reserved; then the bytes */
#define VRB_POST_BATCH    32
#define VRB_POLL_BATCH    32
#define VRB_POLL_ROUNDS   64 /* bound of one fab_poll(): CQ batches */
#define VRB_RETRY_CNT     6  /* transport retries before RETRY_EXC_ERR (rxe: 7 = forever) */
#define VRB_RNR_RETRY     7  /* 7 = retry forever: a SEND waits for a RECV */
#define VRB_MIN_RNR_TIMER 12 /* 0.64 ms between RNR retries */
#define VRB_RD_ATOMIC     16 /* READs/atomics in flight per QP, at most */
#define VRB_BACKLOG       128
#define VRB_CM_BATCH      32  /* rdma_cm events per wake-up of the event thread */
#define VRB_REAP_MS       20  /* event thread: zombie check period */
#define VRB_RESOLVE_MS    100 /* first address resolution attempt (doubles up to 1 s) */
#define VRB_MAX_DEPTH     65536
#define VRB_KEYS          8192         /* local-key table slots: at most half hold regions */
#define VRB_CQ_SLACK      64           /* CQ entries beyond cq_depth, for the close markers */
#define VRB_DOWN_WEAK     (1ull << 63) /* the cause may be replaced by a real error */

enum vrb_link_state {
	VRB_LINK_ACCEPTING = 1, /* passive side: accepted by rdma_cm, not established yet */
	VRB_LINK_PENDING,       /* established, waiting in the accept queue */
	VRB_LINK_UP,            /* handed to the user */
	VRB_LINK_CLOSED,        /* fab_link_close() called: a zombie until drained */
};

struct vrb_link;

/* A slot of the software send queue; the verbs wr_id points at it. */
struct vrb_sqe {
	uint64_t wrid;
	struct vrb_link *link;
	uint32_t len;
	uint8_t opcode;
	uint8_t user_sig; /* the user asked for a completion */
	uint8_t internal; /* our close marker: never reported */
	uint8_t fault;    /* its local buffer was outside its lkey's region: -EFAULT */
};

/*
 * A registered region as the local-key table knows it. Written under
 * fab->lock, read lock-free by posters: @seq is odd while the entry is
 * written (a seqlock), @state 0 free, 1 in use, 2 removed.
 */
struct vrb_key {
	uint32_t seq;
	uint32_t state;
	uint32_t lkey;
	unsigned access;
	uintptr_t base;
	size_t len;
};

/* A slot of the receive queue; wr_id is its address with bit 0 set. */
struct vrb_rqe {
	uint64_t wrid;
	struct vrb_link *link;
};

struct vrb_link {
	struct fab_link base;
	struct vrb_fab *fab;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	int state;             /* enum vrb_link_state, under fab->lock */
	uint64_t down;         /* atomic: 0, or -cause | -flush status << 32 | weak */
	int disconnected;      /* atomic: rdma_disconnect() issued */
	struct vrb_link *next; /* fab->links */
	struct vrb_link *next_q;
	char peer[FAB_ADDR_STRLEN];
	uint8_t priv[FAB_PRIV_MAX];
	size_t priv_len;

	pthread_spinlock_t lock; /* posters of this link */
	struct vrb_sqe *sq;
	uint32_t sq_mask;
	uint32_t sq_cap;
	uint32_t sig_every;
	uint32_t sq_prod;     /* under lock; atomic for readers */
	uint32_t sq_last_sig; /* under lock */
	uint32_t sq_done;     /* poller; atomic for readers */
	struct vrb_rqe *rq;
	uint32_t rq_mask;
	uint32_t rq_cap;
	uint32_t rq_prod; /* under lock; atomic for readers */
	uint32_t rq_done; /* poller; atomic for readers */
};

struct vrb_fab {
	struct fab base;
	struct fab_ops ops;
	char dev[64];
	uint8_t port;
	struct ibv_context *ctx; /* librdmacm's context of the device */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid;
	struct fab_addr addr;
	char addr_str[FAB_ADDR_STRLEN];
	int epfd, ctl_fd, acc_fd;
	pthread_t thr;
	int thr_started;
	int stop; /* atomic */

	uint32_t max_msg;
	uint8_t rd_atom, init_rd_atom, ack_timeout;
	int atomics;
	unsigned unacked; /* CQ events got, not acked (under reap_lock) */

	pthread_mutex_t lock; /* links, the accept queue, link states */
	pthread_cond_t cond;
	struct vrb_link *links;
	struct vrb_link *acc_head, *acc_tail;
	unsigned nzombies;
	unsigned nkeys;
	struct vrb_key *keys; /* VRB_KEYS slots, open addressing on the lkey */

	int64_t cq_credits; /* atomic: CQ entries not promised to a request */

	/*
	 * One reaper of the CQ at a time: fab_poll() and fab_arm() (which
	 * reaps what arrived before its request for notification) may be
	 * called from different threads -- a progress thread arming while a
	 * waiter polls. Two at once walked one link's send queue and the
	 * stash together. Held while the links' queues may be touched, so
	 * taking it also waits out a reaper before a zombie is freed.
	 */
	pthread_mutex_t reap_lock;
	/* completions reaped from the CQ but not returned yet (under reap_lock) */
	struct fab_wc *stash;
	uint32_t stash_mask;
	uint32_t stash_head, stash_tail;
};

struct vrb_mr {
	struct fab_mr base;
	struct ibv_mr *mr;
};

/* Where one fab_poll() puts completions. */
struct vrb_out {
	struct fab_wc *wc;
	int n, max;
	int64_t released; /* CQ credits to give back */
};

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

static inline struct vrb_link *to_vrb_link(struct fab_link *l)
{
	return container_of(l, struct vrb_link, base);
}

static inline struct vrb_fab *to_vrb_fab(struct fab *f)
{
	return container_of(f, struct vrb_fab, base);
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	struct fab_addr a = {.len = sizeof(struct sockaddr_in)};

	snprintf(buf, len, "?");
	if (sa == NULL || sa->sa_family != AF_INET)
		return;
	memcpy(&a.ss, sa, sizeof(struct sockaddr_in));
	fab_addr_format(&a, buf, len);
}

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

/* ack_timeout_exp -- the QP's local ACK timeout exponent for a dead-peer bound of @ms. */
static uint8_t ack_timeout_exp(uint32_t ms)
{
	/* (retries + 1) tries of 4.096 us * 2^t each must fit in @ms */
	uint64_t per_try_ns = (uint64_t)ms * 1000000ull / (VRB_RETRY_CNT + 1);
	uint8_t t = 1;

	while (t < 31 && 4096ull << (t + 1) <= per_try_ns)
		t++;
	return t;
}

/* ------------------------------------------------------------------ */
/* link state                                                         */

static inline int link_cause(const struct vrb_link *l)
{
	return -(int)(uint32_t)__atomic_load_n(&l->down, __ATOMIC_ACQUIRE);
}

static inline int link_flush_status(const struct vrb_link *l)
{
	uint64_t d = __atomic_load_n(&l->down, __ATOMIC_ACQUIRE);
	int err = (int)((d >> 32) & 0xffff);

	return err ? -err : -ECANCELED;
}

/* link_disconnect -- move the QP to the error state and tell the peer (once). */
static void link_disconnect(struct vrb_link *l)
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
 * set_down / link_down -- take @l down: @cause is what fab_link_state() reports,
 * @err the status of its flushed requests. The first caller wins (a weak
 * cause, set for a flush nobody explained, yields to a real error). The QP
 * goes to the error state, so the device flushes every outstanding and
 * later request, and the peer is told (DREQ). Returns whether it did.
 */
static bool set_down(struct vrb_link *l, int cause, int err, bool weak)
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

static bool link_down(struct vrb_link *l, int cause, int err, bool weak, const char *why)
{
	if (!set_down(l, cause, err, weak))
		return false;
	if (why != NULL)
		lc_log_warn("verbs: %s: link %u to %s down: %s", l->fab->dev, l->base.id, l->peer,
		            why);
	link_disconnect(l);
	return true;
}

/* ------------------------------------------------------------------ */
/* completions                                                        */

static void cq_release(struct vrb_fab *f, int64_t n)
{
	if (n)
		__atomic_fetch_add(&f->cq_credits, n, __ATOMIC_RELAXED);
}

/* cq_reserve -- promise @n CQ entries; false when the CQ could overflow. */
static bool cq_reserve(struct vrb_fab *f, int64_t n)
{
	if (__atomic_sub_fetch(&f->cq_credits, n, __ATOMIC_ACQ_REL) < 0) {
		__atomic_add_fetch(&f->cq_credits, n, __ATOMIC_RELAXED);
		return false;
	}
	return true;
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
		if (link_cause(l) == 0)
			link_down(l, -ECANCELED, -ECANCELED, true,
			          "the device flushed a request for no reported reason");
		status = link_flush_status(l);
	} else if (w->status != IBV_WC_SUCCESS) {
		char why[128];

		status = vrb_status(w->status);
		snprintf(why, sizeof(why), "%s %s failed: %s (vendor error 0x%x)",
		         fab_opcode_str(e->opcode), e->user_sig ? "(signaled)" : "(unsignaled)",
		         ibv_wc_status_str(w->status), w->vendor_err);
		/* a dead peer times every later request out too; other errors cancel them */
		link_down(l, status, status == -ETIMEDOUT ? -ETIMEDOUT : -ECANCELED, false, why);
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
		link_down(l, c.status, -ECANCELED, false, why);
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

static int vrb_poll(struct fab *fab, struct fab_wc *wc, int max)
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
	cq_release(f, o.released);
	return o.n;
}

static int vrb_wait_fd(struct fab *fab)
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
	cq_release(f, o.released);
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
	waiting = f->acc_head != NULL;
	pthread_mutex_unlock(&f->lock);
	return waiting ? -EAGAIN : 0;
}

static int vrb_arm(struct fab *fab)
{
	return do_arm(to_vrb_fab(fab), true);
}

static int vrb_wait(struct fab *fab, int timeout_ms)
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

/* ------------------------------------------------------------------ */
/* posting                                                            */

static uint32_t key_slot(uint32_t lkey)
{
	return (lkey * 2654435761u) & (VRB_KEYS - 1);
}

/* key_add -- remember region @mr (under f->lock). 0 or -ENOSPC. */
static int key_add(struct vrb_fab *f, const struct ibv_mr *mr, unsigned access)
{
	uint32_t i = key_slot(mr->lkey);

	if (f->nkeys >= VRB_KEYS / 2)
		return -ENOSPC;
	for (uint32_t n = 0; n < VRB_KEYS; n++, i = (i + 1) & (VRB_KEYS - 1)) {
		struct vrb_key *k = &f->keys[i];

		if (k->state == 1)
			continue;
		/* odd: readers retry; pairs with the acquire loads in key_check() */
		__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		k->lkey = mr->lkey;
		k->access = access;
		k->base = (uintptr_t)mr->addr;
		k->len = mr->length;
		__atomic_store_n(&k->state, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELEASE);
		f->nkeys++;
		return 0;
	}
	return -ENOSPC;
}

/* key_remove -- forget the region of @lkey (under f->lock); its slot becomes a tombstone. */
static void key_remove(struct vrb_fab *f, uint32_t lkey)
{
	uint32_t i = key_slot(lkey);

	for (uint32_t n = 0; n < VRB_KEYS && f->keys[i].state != 0;
	     n++, i = (i + 1) & (VRB_KEYS - 1)) {
		struct vrb_key *k = &f->keys[i];

		if (k->state == 1 && k->lkey == lkey) {
			__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_RELEASE);
			__atomic_store_n(&k->state, 2, __ATOMIC_RELAXED);
			__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELEASE);
			f->nkeys--;
			return;
		}
	}
}

/*
 * key_check -- whether @lkey names a region of this fab that holds
 * [@addr, @addr + @len) with @access. Lock-free (seqlock per slot).
 * The device checks the same: this finds it before posting, because a
 * local protection error raised while earlier requests are in flight
 * silences an rxe QP for good (Linux 6.1: no completion at all).
 */
static bool key_check(const struct vrb_fab *f, uint32_t lkey, uintptr_t addr, uint64_t len,
                      unsigned access)
{
	uint32_t i = key_slot(lkey);

	for (uint32_t n = 0; n < VRB_KEYS; n++, i = (i + 1) & (VRB_KEYS - 1)) {
		const struct vrb_key *k = &f->keys[i];
		uint32_t seq, state, klkey;
		unsigned kacc;
		uintptr_t base;
		size_t klen;

		for (int tries = 0;; tries++) {
			seq = __atomic_load_n(&k->seq, __ATOMIC_ACQUIRE);
			state = __atomic_load_n(&k->state, __ATOMIC_RELAXED);
			klkey = __atomic_load_n(&k->lkey, __ATOMIC_RELAXED);
			kacc = __atomic_load_n(&k->access, __ATOMIC_RELAXED);
			base = __atomic_load_n(&k->base, __ATOMIC_RELAXED);
			klen = __atomic_load_n(&k->len, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (!(seq & 1) && seq == __atomic_load_n(&k->seq, __ATOMIC_RELAXED))
				break;
			if (tries == 64)
				return true; /* a region changes under us: let the device judge */
		}
		if (state == 0)
			return false; /* no such key */
		if (state != 1 || klkey != lkey)
			continue;
		return addr >= base && len <= klen && addr - base <= klen - len &&
		       (kacc & access) == access;
	}
	return false;
}

/*
 * check_wr -- 0 for a valid request, 1 when its local buffer lies outside
 * the region of its lkey (an execution error: -EFAULT completion), or a
 * negative errno for a bad request.
 */
static int check_wr(const struct vrb_fab *f, const struct fab_wr *w)
{
	if (w->flags & ~(FAB_WR_SIGNALED | FAB_WR_INLINE | FAB_WR_FENCE))
		return -EINVAL;
	switch (w->opcode) {
	case FAB_OP_CAS:
	case FAB_OP_FAA:
		if (w->len != 8 || (w->remote_addr & 7) || w->local == NULL)
			return -EINVAL;
		if (!f->atomics)
			return -EOPNOTSUPP;
		return key_check(f, w->lkey, (uintptr_t)w->local, 8, FAB_ACCESS_LOCAL_WRITE) ? 0
		                                                                             : 1;
	case FAB_OP_WRITE:
	case FAB_OP_WRITE_IMM:
	case FAB_OP_READ:
	case FAB_OP_SEND:
		if ((w->len && w->local == NULL) || w->len > f->max_msg)
			return -EINVAL;
		if ((w->flags & FAB_WR_INLINE) &&
		    (w->len > f->base.attr.max_inline || w->opcode == FAB_OP_READ))
			return -EINVAL;
		if (w->len == 0 || (w->flags & FAB_WR_INLINE))
			return 0;
		return key_check(f, w->lkey, (uintptr_t)w->local, w->len,
		                 w->opcode == FAB_OP_READ ? FAB_ACCESS_LOCAL_WRITE : 0)
		           ? 0
		           : 1;
	default:
		return -EINVAL;
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

static int vrb_post(struct fab_link *link, const struct fab_wr *wr, int n)
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
	    !cq_reserve(f, n)) {
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
			faulted = set_down(l, -EFAULT, -ECANCELED, false);
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
		link_disconnect(l);
	}
	if (ret == 0)
		return 0;

	/* the device refused a request that passed our checks: the link cannot go on */
	cq_release(f, n - (int64_t)(prod - start));
	lc_log_err("verbs: %s: link %u to %s: ibv_post_send refused request %u of %d (%s): %s",
	           f->dev, l->base.id, l->peer, prod - start, n,
	           fab_opcode_str(wr[prod - start].opcode), strerror(ret));
	link_down(l, -EIO, -ECANCELED, false, "the device refused a request");
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

static int vrb_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n)
{
	struct vrb_link *l = to_vrb_link(link);
	struct vrb_fab *f = l->fab;
	struct ibv_recv_wr r[VRB_POST_BATCH], *bad = NULL;
	struct ibv_sge sge[VRB_POST_BATCH];
	uint32_t prod, start;
	int ret;

	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (wr[i].len &&
		    (wr[i].local == NULL || !key_check(f, wr[i].lkey, (uintptr_t)wr[i].local,
		                                       wr[i].len, FAB_ACCESS_LOCAL_WRITE)))
			return -EINVAL;
	pthread_spin_lock(&l->lock);
	start = prod = l->rq_prod;
	if (prod - __atomic_load_n(&l->rq_done, __ATOMIC_ACQUIRE) + (uint32_t)n > l->rq_cap ||
	    !cq_reserve(f, n)) {
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
	cq_release(f, n - (int64_t)(prod - start));
	lc_log_err("verbs: %s: link %u to %s: ibv_post_recv refused buffer %u of %d: %s", f->dev,
	           l->base.id, l->peer, prod - start, n, strerror(ret));
	link_down(l, -EIO, -ECANCELED, false, "the device refused a receive buffer");
	return -EIO;
}

/* ------------------------------------------------------------------ */
/* links                                                              */

static struct vrb_link *link_new(struct vrb_fab *f, struct rdma_cm_id *id)
{
	const struct fab_attr *a = &f->base.attr;
	struct vrb_link *l = calloc(1, sizeof(*l));
	/* one slot more than the depth: the close marker */
	uint32_t sq = pow2_at_least(a->sq_depth + 1), rq = pow2_at_least(a->rq_depth);

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
	addr_str(rdma_get_peer_addr(id), l->peer, sizeof(l->peer));
	return l;
}

/* link_free -- destroy the QP, the id and the memory (the id's events all acked). */
static void link_free(struct vrb_link *l)
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

/* link_create_qp -- the link's RC QP on the fab's PD and CQ, with its rdma_cm options. */
static int link_create_qp(struct vrb_link *l)
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

/* link_set_rnr -- RNR NAK timer of an RTS QP (rdma_cm leaves 0, which means 655 ms). */
static void link_set_rnr(struct vrb_link *l)
{
	struct ibv_qp_attr a = {.min_rnr_timer = VRB_MIN_RNR_TIMER};

	if (ibv_modify_qp(l->qp, &a, IBV_QP_MIN_RNR_TIMER) != 0)
		lc_log_info("verbs: %s: link %u to %s: cannot set the RNR timer: %s", l->fab->dev,
		            l->base.id, l->peer, strerror(errno));
}

static void conn_param(const struct vrb_fab *f, struct rdma_conn_param *p, const void *priv,
                       uint8_t len)
{
	*p = (struct rdma_conn_param){
	    .private_data = priv,
	    .private_data_len = len,
	    .responder_resources = f->rd_atom,
	    .initiator_depth = f->init_rd_atom,
	    .retry_count = VRB_RETRY_CNT,
	    .rnr_retry_count = VRB_RNR_RETRY,
	};
}

static void fab_add_link(struct vrb_fab *f, struct vrb_link *l, int state)
{
	pthread_mutex_lock(&f->lock);
	l->state = state;
	l->next = f->links;
	f->links = l;
	pthread_mutex_unlock(&f->lock);
}

/* fab_unlink -- remove @l from f->links (under f->lock). */
static void fab_unlink(struct vrb_fab *f, struct vrb_link *l)
{
	for (struct vrb_link **p = &f->links; *p != NULL; p = &(*p)->next) {
		if (*p == l) {
			*p = l->next;
			return;
		}
	}
}

static void kick(struct vrb_fab *f)
{
	uint64_t one = 1;

	if (write(f->ctl_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_warn("verbs: %s: cannot wake the event thread: %s", f->dev, strerror(errno));
}

/* ------------------------------------------------------------------ */
/* the rdma_cm event thread                                           */

/* A copy of an event, taken before it is acked. */
struct vrb_event {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	uint8_t priv[64];
	uint8_t priv_len;
	uint8_t initiator_depth, responder_resources;
};

/* get_event -- take, copy and ack the next event of @ch (non-blocking fd: -EAGAIN). */
static int get_event(struct rdma_event_channel *ch, struct vrb_event *out)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev) != 0)
		return -errno;
	*out = (struct vrb_event){
	    .type = ev->event,
	    .status = ev->status,
	    .id = ev->id,
	    .listen_id = ev->listen_id,
	};
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data != NULL) {
		out->initiator_depth = ev->param.conn.initiator_depth;
		out->responder_resources = ev->param.conn.responder_resources;
		out->priv_len = ev->param.conn.private_data_len < sizeof(out->priv)
		                    ? ev->param.conn.private_data_len
		                    : (uint8_t)sizeof(out->priv);
		memcpy(out->priv, ev->param.conn.private_data, out->priv_len);
	}
	/* ack at once: rdma_destroy_id() waits for the acks of its id's events */
	rdma_ack_cm_event(ev);
	return 0;
}

/* on_connect_request -- a peer connects: QP on our PD and CQ, then rdma_accept. */
static void on_connect_request(struct vrb_fab *f, const struct vrb_event *ev)
{
	struct rdma_conn_param p;
	struct vrb_link *l;
	char peer[FAB_ADDR_STRLEN];
	size_t plen = ev->priv_len >= VRB_PRIV_HDR ? ev->priv[2] : 0;

	addr_str(rdma_get_peer_addr(ev->id), peer, sizeof(peer));
	if (ev->priv_len < VRB_PRIV_HDR || ev->priv[0] != VRB_PRIV_MAGIC ||
	    ev->priv[1] != VRB_PRIV_VERSION || plen > FAB_PRIV_MAX ||
	    VRB_PRIV_HDR + plen > ev->priv_len) {
		lc_log_warn("verbs: %s: connection request from %s without LOCO's header: rejected",
		            f->dev, peer);
		goto err_reject;
	}
	if (ev->id->verbs != f->ctx) {
		lc_log_warn("verbs: %s: connection request from %s arrived on another device: "
		            "rejected",
		            f->dev, peer);
		goto err_reject;
	}
	l = link_new(f, ev->id);
	if (l == NULL) {
		lc_log_err("verbs: %s: out of memory accepting a link from %s", f->dev, peer);
		goto err_reject;
	}
	memcpy(l->priv, ev->priv + VRB_PRIV_HDR, plen);
	l->priv_len = plen;
	if (link_create_qp(l) != 0)
		goto err_free;
	ev->id->context = l;
	conn_param(f, &p, NULL, 0);
	/* never promise more than the connector asked for */
	if (p.responder_resources > ev->initiator_depth)
		p.responder_resources = ev->initiator_depth;
	if (p.initiator_depth > ev->responder_resources)
		p.initiator_depth = ev->responder_resources;
	fab_add_link(f, l, VRB_LINK_ACCEPTING);
	if (rdma_accept(ev->id, &p) != 0) {
		lc_log_err("verbs: %s: rdma_accept of the link from %s failed: %s", f->dev, peer,
		           strerror(errno));
		pthread_mutex_lock(&f->lock);
		fab_unlink(f, l);
		pthread_mutex_unlock(&f->lock);
		link_free(l); /* destroys the id: the peer sees a reject or a timeout */
		return;
	}
	link_set_rnr(l);
	return;

err_free:
	l->id = NULL; /* destroyed below, after the reject */
	link_free(l);
err_reject:
	rdma_reject(ev->id, NULL, 0);
	rdma_destroy_id(ev->id);
}

static void on_established(struct vrb_fab *f, struct vrb_link *l)
{
	uint64_t one = 1;

	pthread_mutex_lock(&f->lock);
	if (l->state == VRB_LINK_ACCEPTING) {
		l->state = VRB_LINK_PENDING;
		if (f->acc_tail)
			f->acc_tail->next_q = l;
		else
			__atomic_store_n(&f->acc_head, l, __ATOMIC_RELEASE);
		f->acc_tail = l;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->lock);
	lc_log_info("verbs: %s: link %u from %s established", f->dev, l->base.id, l->peer);
	/* a poller blocked on the wait fd takes accepted links too */
	if (write(f->acc_fd, &one, sizeof(one)) < 0)
		lc_log_warn("verbs: %s: cannot wake the poller: %s", f->dev, strerror(errno));
}

/* on_link_event -- an event for one of our links (id->context). */
static void on_link_event(struct vrb_fab *f, const struct vrb_event *ev)
{
	struct vrb_link *l = ev->id->context;
	char why[96];

	if (l == NULL)
		return;
	switch (ev->type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		on_established(f, l);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (link_down(l, -ECONNRESET, -ECONNRESET, false, NULL))
			lc_log_info("verbs: %s: link %u to %s: the peer disconnected", f->dev,
			            l->base.id, l->peer);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		pthread_mutex_lock(&f->lock);
		if (l->state == VRB_LINK_ACCEPTING) {
			/* never established, never seen by the user: drop it */
			fab_unlink(f, l);
			pthread_mutex_unlock(&f->lock);
			lc_log_info("verbs: %s: link from %s not established: %s (status %d)",
			            f->dev, l->peer, rdma_event_str(ev->type), ev->status);
			link_free(l);
			break;
		}
		pthread_mutex_unlock(&f->lock);
		snprintf(why, sizeof(why), "%s (status %d)", rdma_event_str(ev->type), ev->status);
		link_down(l, -ECONNRESET, -ECONNRESET, false, why);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		link_down(l, -EIO, -EIO, false, "the device was removed");
		break;
	default:
		break; /* TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do */
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

/* reap_zombies -- free closed links whose every request has been polled. */
static void reap_zombies(struct vrb_fab *f)
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
		link_free(l);
	}
}

static void *event_main(void *arg)
{
	struct vrb_fab *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd[2] = {{.fd = f->ch->fd, .events = POLLIN},
		                        {.fd = f->ctl_fd, .events = POLLIN}};
		unsigned zombies;
		uint64_t v;
		int r;

		pthread_mutex_lock(&f->lock);
		zombies = f->nzombies;
		pthread_mutex_unlock(&f->lock);
		r = poll(pfd, 2, zombies ? VRB_REAP_MS : -1);
		if (r < 0 && errno != EINTR) {
			lc_log_err("verbs: %s: event thread: poll failed: %s", f->dev,
			           strerror(errno));
			break;
		}
		if (pfd[1].revents && read(f->ctl_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			lc_log_warn("verbs: %s: eventfd read: %s", f->dev, strerror(errno));
		for (int i = 0; i < VRB_CM_BATCH; i++) {
			struct vrb_event ev;

			if (get_event(f->ch, &ev) != 0)
				break; /* EAGAIN: drained */
			lc_log_debug("verbs: %s: rdma_cm event %s (status %d)", f->dev,
			             rdma_event_str(ev.type), ev.status);
			if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST)
				on_connect_request(f, &ev);
			else if (ev.id != f->lid)
				on_link_event(f, &ev);
			else
				lc_log_info("verbs: %s: listener event %s (status %d)", f->dev,
				            rdma_event_str(ev.type), ev.status);
		}
		reap_zombies(f);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* open and close                                                     */

/* port_active -- the first active port of @dev (or @want_port when not 0), or 0. */
static uint8_t port_active(struct ibv_device *dev, uint8_t want_port)
{
	struct ibv_context *c = ibv_open_device(dev);
	struct ibv_device_attr da;
	uint8_t found = 0;

	if (c == NULL)
		return 0;
	if (ibv_query_device(c, &da) == 0) {
		for (uint8_t p = 1; p <= da.phys_port_cnt && found == 0; p++) {
			struct ibv_port_attr pa;

			if (want_port && p != want_port)
				continue;
			if (ibv_query_port(c, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
				found = p;
		}
	}
	ibv_close_device(c);
	return found;
}

/*
 * pick_device -- the device to use when the listen address does not name
 * one: @want ("name" or "name:port") or the first device with an active
 * port. Fills @name and *@port; -ENODEV when there is none.
 */
static int pick_device(const char *want, char *name, size_t len, uint8_t *port)
{
	struct ibv_device **list;
	char wname[64] = "";
	unsigned long wport = 0;
	int num = 0, ret = -ENODEV;

	if (want != NULL) {
		const char *colon = strchr(want, ':');
		size_t n = colon ? (size_t)(colon - want) : strlen(want);

		if (n == 0 || n >= sizeof(wname))
			return -EINVAL;
		memcpy(wname, want, n);
		wname[n] = '\0';
		if (colon != NULL) {
			char *end;

			wport = strtoul(colon + 1, &end, 10);
			if (*end != '\0' || wport == 0 || wport > 255)
				return -EINVAL;
		}
	}
	list = ibv_get_device_list(&num);
	if (list == NULL || num == 0) {
		lc_log_info("verbs: no RDMA device (ibv_get_device_list found none)");
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	for (int i = 0; i < num; i++) {
		const char *dn = ibv_get_device_name(list[i]);
		uint8_t p;

		if (wname[0] && strcmp(dn, wname) != 0)
			continue;
		p = port_active(list[i], (uint8_t)wport);
		if (p == 0) {
			if (wname[0]) {
				lc_log_err("verbs: device %s has no active port%s", dn,
				           wport ? " of that number" : "");
				ret = -ENETDOWN;
			}
			continue;
		}
		snprintf(name, len, "%s", dn);
		*port = p;
		ret = 0;
		break;
	}
	if (ret == -ENODEV)
		lc_log_info("verbs: %s", wname[0] ? "no RDMA device of that name"
		                                  : "no RDMA device with an active port");
	ibv_free_device_list(list);
	return ret;
}

/* device_ip -- an IPv4 address of an interface that rdma_cm maps to @dev port @port. */
static int device_ip(struct vrb_fab *f, const char *dev, uint8_t port, struct in_addr *out)
{
	struct ifaddrs *ifs, *i;
	int ret = -EADDRNOTAVAIL;

	if (getifaddrs(&ifs) != 0)
		return -errno;
	for (i = ifs; i != NULL && ret != 0; i = i->ifa_next) {
		struct sockaddr_in sin;
		struct rdma_cm_id *id;

		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
			continue;
		memcpy(&sin, i->ifa_addr, sizeof(sin));
		if ((ntohl(sin.sin_addr.s_addr) >> 24) == 127)
			continue;
		sin.sin_port = 0;
		if (rdma_create_id(f->ch, &id, NULL, RDMA_PS_TCP) != 0)
			break;
		if (rdma_bind_addr(id, (struct sockaddr *)&sin) == 0 && id->verbs != NULL &&
		    strcmp(ibv_get_device_name(id->verbs->device), dev) == 0 &&
		    id->port_num == port) {
			*out = sin.sin_addr;
			ret = 0;
		}
		rdma_destroy_id(id);
	}
	freeifaddrs(ifs);
	return ret;
}

/*
 * bind_listener -- choose the device and bind the listening id. A specific
 * listen IP names its device (rdma_cm maps it); a loopback or wildcard IP,
 * or none, means the device of fab_attr.device / LOCO_DEVICE (default the
 * first with an active port), listening on that device's IPv4 address.
 */
static int bind_listener(struct vrb_fab *f, const struct fab_attr *attr)
{
	const char *want = attr->device;
	const char *where = attr->listen_addr ? attr->listen_addr : "127.0.0.1:0";
	struct fab_addr a;
	struct sockaddr_in *sin = (struct sockaddr_in *)&a.ss;
	uint32_t ip;
	char name[64] = "";
	uint8_t port = 0;
	int ret;

	if (want == NULL || *want == '\0')
		want = getenv("LOCO_DEVICE");
	if (want != NULL && *want == '\0')
		want = NULL;
	ret = fab_addr_parse(where, 0, &a);
	if (ret) {
		lc_log_err("verbs: bad listen address %s", where);
		return ret;
	}
	ip = ntohl(sin->sin_addr.s_addr);
	/* also when the address names the device: -ENODEV when there is none */
	ret = pick_device(want, name, sizeof(name), &port);
	if (ret == -EINVAL)
		lc_log_err("verbs: bad device %s (name or name:port)", want);
	if (ret)
		return ret;
	if (want == NULL && ip != INADDR_ANY && (ip >> 24) != 127)
		name[0] = '\0'; /* the address chooses */
	f->ch = rdma_create_event_channel();
	if (f->ch == NULL) {
		ret = errno == ENOENT ? -ENODEV : -errno;
		lc_log_err("verbs: cannot open rdma_cm (/dev/infiniband/rdma_cm): %s",
		           strerror(errno));
		return ret;
	}
	if (rdma_create_id(f->ch, &f->lid, f, RDMA_PS_TCP) != 0) {
		ret = -errno;
		lc_log_err("verbs: rdma_create_id failed: %s", strerror(-ret));
		return ret;
	}
	if (ip == INADDR_ANY || (ip >> 24) == 127) {
		ret = device_ip(f, name, port, &sin->sin_addr);
		if (ret) {
			lc_log_err("verbs: device %s port %u has no IPv4 address that rdma_cm can "
			           "bind: give an address of its interface (fab_attr.listen_addr, "
			           "LOCO_ADDR)",
			           name, port);
			return ret;
		}
		lc_log_info("verbs: %s port %u: listening on its address instead of %s", name, port,
		            where);
	}
	if (rdma_bind_addr(f->lid, (struct sockaddr *)sin) != 0) {
		ret = -errno;
		lc_log_err("verbs: cannot bind rdma_cm to %s: %s", where, strerror(-ret));
		return ret;
	}
	if (f->lid->verbs == NULL) {
		lc_log_err("verbs: %s is not the address of an RDMA device", where);
		return -EADDRNOTAVAIL;
	}
	snprintf(f->dev, sizeof(f->dev), "%s", ibv_get_device_name(f->lid->verbs->device));
	f->port = f->lid->port_num;
	if (name[0] && (strcmp(name, f->dev) != 0 || port != f->port)) {
		lc_log_err("verbs: listen address %s is on %s port %u, not on the device asked for "
		           "(%s)",
		           where, f->dev, f->port, want);
		return -EINVAL;
	}
	if (rdma_listen(f->lid, VRB_BACKLOG) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: rdma_listen on %s failed: %s", f->dev, where,
		           strerror(-ret));
		return ret;
	}
	memset(&f->addr, 0, sizeof(f->addr));
	memcpy(&f->addr.ss, rdma_get_local_addr(f->lid), sizeof(struct sockaddr_in));
	f->addr.len = sizeof(struct sockaddr_in);
	fab_addr_format(&f->addr, f->addr_str, sizeof(f->addr_str));
	f->ctx = f->lid->verbs;
	return 0;
}

/* probe_inline -- the largest inline payload up to @want the device accepts on an RC QP. */
static uint32_t probe_inline(struct vrb_fab *f, uint32_t want)
{
	for (uint32_t n = want;; n /= 2) {
		struct ibv_qp_init_attr qa = {
		    .send_cq = f->cq,
		    .recv_cq = f->cq,
		    .cap = {.max_send_wr = 1,
		            .max_recv_wr = 1,
		            .max_send_sge = 1,
		            .max_recv_sge = 1,
		            .max_inline_data = n},
		    .qp_type = IBV_QPT_RC,
		};
		struct ibv_qp *qp = ibv_create_qp(f->pd, &qa);

		if (qp != NULL) {
			ibv_destroy_qp(qp);
			return qa.cap.max_inline_data < n ? qa.cap.max_inline_data : n;
		}
		if (n == 0)
			return 0;
	}
}

/* setup_device -- PD, completion channel, CQ, limits, the wait fd. */
static int setup_device(struct vrb_fab *f)
{
	struct fab_attr *a = &f->base.attr;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct epoll_event ev = {.events = EPOLLIN};
	uint32_t inl;
	int ret;

	if (ibv_query_device(f->ctx, &da) != 0 || ibv_query_port(f->ctx, f->port, &pa) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot query the device: %s", f->dev, strerror(-ret));
		return ret;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		lc_log_err("verbs: %s port %u is %s, not active", f->dev, f->port,
		           ibv_port_state_str(pa.state));
		return -ENETDOWN;
	}
	if (a->sq_depth > (uint32_t)da.max_qp_wr || a->rq_depth > (uint32_t)da.max_qp_wr ||
	    a->cq_depth + VRB_CQ_SLACK > (uint32_t)da.max_cqe) {
		lc_log_err("verbs: %s: sq_depth %u, rq_depth %u or cq_depth %u beyond the device's "
		           "limits (%d work requests, %d CQ entries)",
		           f->dev, a->sq_depth, a->rq_depth, a->cq_depth, da.max_qp_wr, da.max_cqe);
		return -EINVAL;
	}
	f->max_msg = pa.max_msg_sz;
	f->atomics = da.atomic_cap != IBV_ATOMIC_NONE;
	f->rd_atom =
	    (uint8_t)(da.max_qp_rd_atom < VRB_RD_ATOMIC ? da.max_qp_rd_atom : VRB_RD_ATOMIC);
	f->init_rd_atom = (uint8_t)(da.max_qp_init_rd_atom < VRB_RD_ATOMIC ? da.max_qp_init_rd_atom
	                                                                   : VRB_RD_ATOMIC);
	f->ack_timeout = ack_timeout_exp(a->timeout_ms);

	f->pd = ibv_alloc_pd(f->ctx);
	f->cc = f->pd ? ibv_create_comp_channel(f->ctx) : NULL;
	f->cq =
	    f->cc ? ibv_create_cq(f->ctx, (int)(a->cq_depth + VRB_CQ_SLACK), f, f->cc, 0) : NULL;
	if (f->cq == NULL) {
		ret = errno ? -errno : -ENOMEM;
		lc_log_err("verbs: %s: cannot create the %s: %s", f->dev,
		           f->pd == NULL   ? "protection domain"
		           : f->cc == NULL ? "completion channel"
		                           : "completion queue",
		           strerror(-ret));
		return ret;
	}
	inl = probe_inline(f, a->max_inline);
	if (inl < a->max_inline)
		lc_log_info("verbs: %s: inline payloads limited to %u bytes (asked %u)", f->dev,
		            inl, a->max_inline);
	a->max_inline = inl;

	if (fcntl(f->cc->fd, F_SETFL, fcntl(f->cc->fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(f->ch->fd, F_SETFL, fcntl(f->ch->fd, F_GETFL) | O_NONBLOCK) < 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot make the event fds non-blocking: %s", f->dev,
		           strerror(-ret));
		return ret;
	}
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->acc_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->epfd < 0 || f->ctl_fd < 0 || f->acc_fd < 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot create the wait fds: %s", f->dev, strerror(-ret));
		return ret;
	}
	ev.data.fd = f->cc->fd;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->cc->fd, &ev) < 0)
		return -errno;
	ev.data.fd = f->acc_fd;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->acc_fd, &ev) < 0)
		return -errno;
	return 0;
}

static void vrb_close(struct fab *fab);

static int vrb_open(const struct fab_attr *attr, struct fab **out)
{
	struct vrb_fab *f;
	uint32_t stash;
	int ret;

	if (attr->sq_depth > VRB_MAX_DEPTH || attr->rq_depth > VRB_MAX_DEPTH ||
	    attr->cq_depth > (1u << 24) || attr->max_inline > 65536 || attr->timeout_ms == 0)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->epfd = f->ctl_fd = f->acc_fd = -1;
	f->base.attr = *attr;
	fab_ops_fill(&f->ops, &fab_verbs_ops);
	f->base.ops = &f->ops;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->reap_lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	snprintf(f->dev, sizeof(f->dev), "?");
	f->cq_credits = attr->cq_depth;
	stash = pow2_at_least(attr->cq_depth);
	f->stash_mask = stash - 1;
	f->stash = calloc(stash, sizeof(*f->stash));
	f->keys = calloc(VRB_KEYS, sizeof(*f->keys));
	if (f->stash == NULL || f->keys == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = bind_listener(f, attr);
	if (ret)
		goto err_close;
	ret = setup_device(f);
	if (ret)
		goto err_close;
	ret = -pthread_create(&f->thr, NULL, event_main, f);
	if (ret) {
		lc_log_err("verbs: %s: cannot start the event thread: %s", f->dev, strerror(-ret));
		goto err_close;
	}
	f->thr_started = 1;
	lc_log_info("verbs: %s port %u: listening on %s (inline %u, ack timeout 2^%u x 4.096 us, "
	            "atomics %s)",
	            f->dev, f->port, f->addr_str, f->base.attr.max_inline, f->ack_timeout,
	            f->atomics ? "yes" : "no");
	*out = &f->base;
	return 0;

err_close:
	vrb_close(&f->base);
	return ret;
}

static void vrb_close(struct fab *fab)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	unsigned open = 0;

	if (f->thr_started) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		kick(f);
		pthread_join(f->thr, NULL);
	}
	while (f->links != NULL) {
		struct vrb_link *l = f->links;

		f->links = l->next;
		open += l->state != VRB_LINK_CLOSED;
		link_free(l);
	}
	if (open)
		lc_log_warn("verbs: %s: closing the fabric with %u link(s) open", f->dev, open);
	if (f->lid != NULL)
		rdma_destroy_id(f->lid);
	if (f->cq != NULL) {
		if (f->unacked)
			ibv_ack_cq_events(f->cq, f->unacked);
		ibv_destroy_cq(f->cq);
	}
	if (f->cc != NULL)
		ibv_destroy_comp_channel(f->cc);
	if (f->pd != NULL && ibv_dealloc_pd(f->pd) != 0)
		lc_log_warn("verbs: %s: memory regions still registered at close", f->dev);
	if (f->ch != NULL)
		rdma_destroy_event_channel(f->ch);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->ctl_fd >= 0)
		close(f->ctl_fd);
	if (f->acc_fd >= 0)
		close(f->acc_fd);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->reap_lock);
	pthread_mutex_destroy(&f->lock);
	free(f->stash);
	free(f->keys);
	free(f);
}

static int vrb_get_addr(struct fab *fab, struct fab_addr *out)
{
	if (out == NULL)
		return -EINVAL;
	*out = to_vrb_fab(fab)->addr;
	return 0;
}

/* ------------------------------------------------------------------ */
/* connect and accept                                                 */

/* wait_event -- the next event of a private channel, waiting until @deadline. */
static int wait_event(struct rdma_event_channel *ch, uint64_t deadline, struct vrb_event *ev)
{
	for (;;) {
		struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
		uint64_t now = lc_now_ns();
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)((deadline - now) / 1000000ull) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return get_event(ch, ev);
	}
}

/* expect_event -- wait for event @want; map the failures to an errno. */
static int expect_event(struct rdma_event_channel *ch, uint64_t deadline,
                        enum rdma_cm_event_type want, const char **what)
{
	struct vrb_event ev;
	int ret = wait_event(ch, deadline, &ev);

	if (ret) {
		*what = ret != -ETIMEDOUT                      ? "cannot read rdma_cm events"
		        : want == RDMA_CM_EVENT_ADDR_RESOLVED  ? "address not resolved in time"
		        : want == RDMA_CM_EVENT_ROUTE_RESOLVED ? "route not resolved in time"
		                                               : "no answer in time";
		return ret;
	}
	if (ev.type == want)
		return 0;
	*what = rdma_event_str(ev.type);
	switch (ev.type) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED; /* nobody listens there, or the peer refused */
	case RDMA_CM_EVENT_UNREACHABLE:
		return -ETIMEDOUT;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev.status < 0 ? ev.status : -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return ev.status < 0 ? ev.status : -ECONNREFUSED;
	default:
		return -EPROTO;
	}
}

/*
 * resolve_addr -- a new id of @ch with the address from @src to @dst
 * resolved, retried with short timeouts until @deadline. The kernel can
 * miss the neighbour update of an ARP reply that comes before it queued
 * the request (a veth peer answers at once); the request then completes
 * only when its own timeout expires. Short attempts keep that wait short.
 */
static int resolve_addr(struct rdma_event_channel *ch, struct rdma_cm_id **out,
                        struct sockaddr *src, const struct sockaddr *dst, uint64_t deadline,
                        const char **what)
{
	int step = VRB_RESOLVE_MS, ret = -ETIMEDOUT;

	*what = "address not resolved in time";
	for (int i = 0; i < 64; i++) {
		uint64_t now = lc_now_ns();
		struct rdma_cm_id *id;
		int ms;

		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)((deadline - now) / 1000000ull) + 1;
		if (ms > step)
			ms = step;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) {
			*what = "rdma_create_id";
			return -errno;
		}
		if (rdma_resolve_addr(id, src, (struct sockaddr *)dst, ms) != 0) {
			ret = -errno;
			*what = "rdma_resolve_addr";
			rdma_destroy_id(id);
			return ret;
		}
		ret = expect_event(ch, deadline, RDMA_CM_EVENT_ADDR_RESOLVED, what);
		if (ret == 0) {
			*out = id;
			return 0;
		}
		rdma_destroy_id(id);
		if (ret != -ETIMEDOUT && ret != -ENODATA)
			return ret;
		step = step < 1000 ? 2 * step : 1000;
	}
	return ret;
}

static int vrb_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                       size_t priv_len, int timeout_ms, struct fab_link **out)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	uint64_t deadline =
	    lc_now_ns() + (uint64_t)(timeout_ms < 0 ? 3600000 : timeout_ms) * 1000000ull;
	uint8_t pd[VRB_PRIV_HDR + FAB_PRIV_MAX] = {VRB_PRIV_MAGIC, VRB_PRIV_VERSION,
	                                           (uint8_t)priv_len};
	char where[FAB_ADDR_STRLEN] = "?";
	struct rdma_event_channel *ch;
	struct rdma_conn_param p;
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in src;
	struct vrb_link *l = NULL;
	const char *what = "";
	int ret, ms;

	if (peer == NULL || out == NULL || priv_len > FAB_PRIV_MAX || (priv_len && priv == NULL) ||
	    peer->ss.ss_family != AF_INET)
		return -EINVAL;
	fab_addr_format(peer, where, sizeof(where));
	if (priv_len)
		memcpy(pd + VRB_PRIV_HDR, priv, priv_len);
	ch = rdma_create_event_channel();
	if (ch == NULL) {
		ret = -errno;
		lc_log_err("verbs: %s: connect to %s: cannot open an rdma_cm channel: %s", f->dev,
		           where, strerror(-ret));
		return ret;
	}
	/* from our own address: rdma_cm then resolves to our device */
	memcpy(&src, &f->addr.ss, sizeof(src));
	src.sin_port = 0;
	ms = timeout_ms < 0 ? 3600000 : timeout_ms > 0 ? timeout_ms : 1;
	ret = resolve_addr(ch, &id, (struct sockaddr *)&src, (const struct sockaddr *)&peer->ss,
	                   deadline, &what);
	if (ret)
		goto err_channel;
	if (id->verbs != f->ctx) {
		ret = -EINVAL;
		what = "the route leaves through another device";
		goto err_id;
	}
	if (rdma_resolve_route(id, ms) != 0) {
		ret = -errno;
		what = "rdma_resolve_route";
		goto err_id;
	}
	ret = expect_event(ch, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED, &what);
	if (ret)
		goto err_id;
	l = link_new(f, id);
	if (l == NULL) {
		ret = -ENOMEM;
		what = "out of memory";
		goto err_id;
	}
	snprintf(l->peer, sizeof(l->peer), "%s", where);
	ret = link_create_qp(l);
	if (ret) {
		what = "no QP";
		goto err_link;
	}
	l->base.ctx = ctx;
	id->context = l;
	conn_param(f, &p, pd, (uint8_t)(VRB_PRIV_HDR + priv_len));
	if (rdma_connect(id, &p) != 0) {
		ret = -errno;
		what = "rdma_connect";
		goto err_link;
	}
	ret = expect_event(ch, deadline, RDMA_CM_EVENT_ESTABLISHED, &what);
	if (ret)
		goto err_link;
	link_set_rnr(l);
	/* from now on the fab's event thread sees the link's events (DISCONNECTED) */
	if (rdma_migrate_id(id, f->ch) != 0) {
		ret = -errno;
		what = "rdma_migrate_id";
		goto err_link;
	}
	rdma_destroy_event_channel(ch);
	fab_add_link(f, l, VRB_LINK_UP);
	lc_log_info("verbs: %s: link %u to %s established", f->dev, l->base.id, where);
	*out = &l->base;
	return 0;

err_link:
	link_free(l); /* destroys the id */
	id = NULL;
err_id:
	if (id != NULL)
		rdma_destroy_id(id);
err_channel:
	rdma_destroy_event_channel(ch);
	lc_log_info("verbs: %s: connect to %s failed: %s: %s", f->dev, where, what, strerror(-ret));
	return ret;
}

static int vrb_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out,
                      void *priv, size_t *priv_len)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	struct vrb_link *l;

	if (out == NULL)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	if (fab_wait_nonnull(&f->cond, &f->lock, (void *const *)&f->acc_head, timeout_ms)) {
		pthread_mutex_unlock(&f->lock);
		return -EAGAIN;
	}
	l = f->acc_head;
	__atomic_store_n(&f->acc_head, l->next_q, __ATOMIC_RELEASE);
	if (f->acc_head == NULL)
		f->acc_tail = NULL;
	l->state = VRB_LINK_UP;
	__atomic_store_n(&l->base.ctx, ctx, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	if (priv != NULL)
		memcpy(priv, l->priv, l->priv_len);
	if (priv_len != NULL)
		*priv_len = l->priv_len;
	*out = &l->base;
	return 0;
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
		cq_release(f, 1);
		lc_log_warn("verbs: %s: link %u to %s: cannot post the close marker: %s", f->dev,
		            l->base.id, l->peer, strerror(ret));
	}
}

static int vrb_link_close(struct fab_link *link)
{
	struct vrb_link *l = to_vrb_link(link);
	struct vrb_fab *f = l->fab;

	/* outstanding requests are flushed: -ECANCELED unless the link was already down */
	link_down(l, -ECANCELED, -ECANCELED, false, NULL);
	link_disconnect(l);
	post_marker(l);
	pthread_mutex_lock(&f->lock);
	if (l->state != VRB_LINK_CLOSED) {
		l->state = VRB_LINK_CLOSED;
		f->nzombies++;
	}
	pthread_mutex_unlock(&f->lock);
	kick(f); /* the event thread frees it once its requests are polled */
	return 0;
}

static int vrb_link_state(struct fab_link *link)
{
	return link_cause(to_vrb_link(link));
}

/* ------------------------------------------------------------------ */
/* memory                                                             */

static int vrb_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	struct vrb_mr *m;
	int flags = 0, ret;

	if (addr == NULL || len == 0 || out == NULL || (access & ~0xfu))
		return -EINVAL;
	/* verbs: remote write and atomics need local write; we never add rights */
	if ((access & (FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & FAB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & FAB_ACCESS_LOCAL_WRITE)
		flags |= IBV_ACCESS_LOCAL_WRITE;
	if (access & FAB_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & FAB_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & FAB_ACCESS_REMOTE_ATOMIC)
		flags |= IBV_ACCESS_REMOTE_ATOMIC;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	m->mr = ibv_reg_mr(f->pd, addr, len, flags);
	if (m->mr == NULL) {
		ret = errno ? -errno : -ENOMEM;
		lc_log_err("verbs: %s: cannot register %zu bytes at %p: %s%s", f->dev, len, addr,
		           strerror(-ret),
		           ret == -ENOMEM || ret == -EPERM || ret == -EAGAIN
		               ? " (RLIMIT_MEMLOCK too low? see ulimit -l and loco-info(1))"
		               : "");
		free(m);
		return ret;
	}
	pthread_mutex_lock(&f->lock);
	ret = key_add(f, m->mr, access);
	pthread_mutex_unlock(&f->lock);
	if (ret) {
		lc_log_err("verbs: %s: more than %u regions registered", f->dev, VRB_KEYS / 2);
		ibv_dereg_mr(m->mr);
		free(m);
		return ret;
	}
	m->base = (struct fab_mr){.fab = fab,
	                          .addr = addr,
	                          .len = len,
	                          .lkey = m->mr->lkey,
	                          .rkey = m->mr->rkey,
	                          .access = access};
	*out = &m->base;
	return 0;
}

static int vrb_mr_dereg(struct fab_mr *mr)
{
	struct vrb_mr *m = container_of(mr, struct vrb_mr, base);
	struct vrb_fab *f = to_vrb_fab(mr->fab);
	int ret;

	pthread_mutex_lock(&f->lock);
	key_remove(f, m->mr->lkey);
	pthread_mutex_unlock(&f->lock);
	ret = ibv_dereg_mr(m->mr);

	if (ret) {
		lc_log_err("verbs: %s: ibv_dereg_mr failed: %s", to_vrb_fab(mr->fab)->dev,
		           strerror(ret));
		return -ret;
	}
	free(m);
	return 0;
}

const struct fab_ops fab_verbs_ops = {
    .size = sizeof(struct fab_ops),
    .name = "verbs",
    .accept = vrb_accept,
    .arm = vrb_arm,
    .close = vrb_close,
    .connect = vrb_connect,
    .get_addr = vrb_get_addr,
    .link_close = vrb_link_close,
    .link_state = vrb_link_state,
    .mr_dereg = vrb_mr_dereg,
    .mr_reg = vrb_mr_reg,
    .open = vrb_open,
    .poll = vrb_poll,
    .post = vrb_post,
    .post_recv = vrb_post_recv,
    .wait = vrb_wait,
    .wait_fd = vrb_wait_fd,
};
