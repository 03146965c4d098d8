/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * verbs.h -- private header of the verbs provider: the fabric provider on
 * libibverbs and librdmacm, for RDMA NICs and Soft-RoCE (rdma_rxe), with
 * the semantics of fabric.h.
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
 *
 * Files: fab.c (open, close, the ops table), device.c (device, port and
 * listener setup), cm.c (rdma_cm: the event thread, connect, accept),
 * link.c (link lifecycle, QP, zombies, the event thread's doorbell), post.c (posting), cq.c
 * (completions, the wait fd), mr.c (memory registration).
 */
#ifndef LOCO_FABRIC_VERBS_H
#define LOCO_FABRIC_VERBS_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../keytab.h"
#include "../provider.h"

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
#define VRB_HOLD_CHECK_MS 100 /* event thread: held links' bound check period */
#define VRB_MAX_DEPTH     65536
#define VRB_KEYS          8192         /* local-key table slots: at most half hold regions */
#define VRB_CQ_SLACK      64           /* CQ entries beyond cq_depth, for the close markers */
#define VRB_DOWN_WEAK     (1ull << 63) /* the cause may be replaced by a real error */

enum vrb_link_state {
	VRB_LINK_ACCEPTING = 1, /* passive side: admitted (rdma_accept), not established yet */
	VRB_LINK_UP,            /* established */
	VRB_LINK_CLOSED,        /* fab_link_close() called: a zombie until drained */
	VRB_LINK_HELD,    /* passive side: CONNECT_REQUEST queued, neither accepted nor rejected */
	VRB_LINK_REFUSED, /* passive side: rejected (bound) or failed while held; the user's */
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
	char peer[FAB_ADDR_STRLEN];
	struct fab_addr peer_addr;  /* where the peer connects from (fab_link_peer) */
	struct fab_pending pending; /* in the accept queue; the connector's private data */
	uint64_t hold_deadline;     /* HELD: refused at this lc_now_ns() unless admitted */
	uint8_t peer_init_depth, peer_resp_res; /* the connector's, for rdma_accept() */

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
	struct fab_acceptq acceptq;
	unsigned nzombies;
	struct fab_ratelog refuse_log; /* event thread: connection requests refused */
	struct keytab kt; /* the regions by lkey (VRB_KEYS slots), for checks at post time */

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

static inline struct vrb_link *to_vrb_link(struct fab_link *l)
{
	return container_of(l, struct vrb_link, base);
}

static inline struct vrb_fab *to_vrb_fab(struct fab *f)
{
	return container_of(f, struct vrb_fab, base);
}

/* vrb_link_cause -- 0 while @l is up, else what fab_link_state() reports. */
static inline int vrb_link_cause(const struct vrb_link *l)
{
	return -(int)(uint32_t)__atomic_load_n(&l->down, __ATOMIC_ACQUIRE);
}

/* vrb_link_flush_status -- the status of @l's flushed requests. */
static inline int vrb_link_flush_status(const struct vrb_link *l)
{
	uint64_t d = __atomic_load_n(&l->down, __ATOMIC_ACQUIRE);
	int err = (int)((d >> 32) & 0xffff);

	return err ? -err : -ECANCELED;
}

/* cq.c */
int vrb_poll(struct fab *fab, struct fab_wc *wc, int max);
int vrb_wait_fd(struct fab *fab);
int vrb_arm(struct fab *fab);
int vrb_wait(struct fab *fab, int timeout_ms);

/* post.c */
int vrb_post(struct fab_link *link, const struct fab_wr *wr, int n);
int vrb_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n);

/* link.c */
void vrb_addr_str(const struct sockaddr *sa, char *buf, size_t len);
void vrb_link_disconnect(struct vrb_link *l);
bool vrb_set_down(struct vrb_link *l, int cause, int err, bool weak);
bool vrb_link_down(struct vrb_link *l, int cause, int err, bool weak, const char *why);
struct vrb_link *vrb_link_new(struct vrb_fab *f, struct rdma_cm_id *id);
void vrb_link_free(struct vrb_link *l);
int vrb_link_create_qp(struct vrb_link *l);
void vrb_link_set_rnr(struct vrb_link *l);
void vrb_link_add(struct vrb_fab *f, struct vrb_link *l, int state);
void vrb_link_unlink(struct vrb_fab *f, struct vrb_link *l);
void vrb_reap_zombies(struct vrb_fab *f);
int vrb_link_admit(struct fab_link *link);
int vrb_link_close(struct fab_link *link);
int vrb_link_state(struct fab_link *link);
int vrb_link_peer(struct fab_link *link, struct fab_addr *out);
void vrb_kick(struct vrb_fab *f);

/* cm.c */
void *vrb_event_main(void *arg);
int vrb_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                size_t priv_len, int timeout_ms, struct fab_link **out);
int vrb_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len);

/* device.c */
int vrb_bind_listener(struct vrb_fab *f, const struct fab_attr *attr);
int vrb_setup_device(struct vrb_fab *f);

/* mr.c */
int vrb_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out);
int vrb_mr_dereg(struct fab_mr *mr);

#endif /* LOCO_FABRIC_VERBS_H */
