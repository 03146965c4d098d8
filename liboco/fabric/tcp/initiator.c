/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * initiator.c -- the NIC's initiator role: posting work requests and
 * RECVs, issuing them as frames within the peer's limits, and completing
 * them from the peer's responses (ACK, READ data, atomic value, NAK,
 * credits). Flushing them when the link fails is in state.c.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "../../clock.h"
#include "../../log.h"
#include "tcp.h"

/* complete_upto -- requests before @psn have executed at the target. */
static void complete_upto(struct tcp_link *l, uint32_t psn)
{
	struct tcp_fab *f = l->fab;

	while (tcp_psn_before(l->sq_done, psn) && tcp_psn_before(l->sq_done, l->sq_issue)) {
		struct tcp_sqe *e = &l->sq[l->sq_done & l->sq_mask];

		if (e->wr.flags & FAB_WR_SIGNALED)
			tcp_cq_push(f, l, e->wr.wrid, e->wr.opcode, 0, e->wr.len, 0, 0);
		else
			fab_swcq_give_credit(&f->cq, 1);
		if (e->wr.opcode == FAB_OP_CAS || e->wr.opcode == FAB_OP_FAA)
			l->atomics_inflight--;
		l->sq_done++;
	}
	__atomic_store_n(&l->sq_free, l->sq_done, __ATOMIC_RELEASE);
}

static int local_ok(struct tcp_link *l, const struct fab_wr *wr, unsigned access)
{
	void *p;

	if (wr->len == 0 || (wr->flags & FAB_WR_INLINE))
		return 0;
	return keytab_check(&l->fab->kt, wr->lkey, (uintptr_t)wr->local, wr->len, access, &p);
}

/* fail_read -- whether a READ of @len bytes is one LOCO_TCP_FAIL_READS fails (a test knob) */
static int fail_read(struct tcp_fab *f, uint32_t len)
{
	uint32_t n = __atomic_load_n(&f->fail_reads, __ATOMIC_RELAXED);

	if (n == 0 || (f->fail_reads_len != 0 && len != f->fail_reads_len))
		return 0;
	while (n != 0)
		if (__atomic_compare_exchange_n(&f->fail_reads, &n, n - 1, 0, __ATOMIC_RELAXED,
		                                __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/*
 * issue_one -- put as much of request @e on the wire as limits allow.
 * Returns 1 when it is fully issued, 0 when it must wait, -1 when the link failed.
 */
static int issue_one(struct tcp_link *l, struct tcp_sqe *e, uint32_t psn)
{
	const struct fab_wr *wr = &e->wr;
	size_t req_room = l->tx_cap - l->tx_reserve;
	struct tcp_frame f = {.psn = psn, .key = wr->rkey, .addr = wr->remote_addr};
	const uint8_t *src =
	    (wr->flags & FAB_WR_INLINE)
	        ? l->sq_inline + (size_t)(psn & l->sq_mask) * l->fab->base.attr.max_inline
	        : wr->local;
	uint8_t *p;

	if ((wr->flags & FAB_WR_FENCE) && e->sent == 0 &&
	    (l->read_inflight > 0 || l->atomics_inflight > 0 || l->sq_done != psn))
		return 0; /* wait for earlier READs and atomics to complete */

	if (e->sent == 0) {
		unsigned acc = (wr->opcode == FAB_OP_READ || wr->opcode == FAB_OP_CAS ||
		                wr->opcode == FAB_OP_FAA)
		                   ? FAB_ACCESS_LOCAL_WRITE
		                   : 0;

		if (local_ok(l, wr, acc) != 0) {
			l->fault_psn = psn; /* earlier requests in flight are flushed, not blamed */
			l->has_fault = 1;
			tcp_link_fail(l, -EFAULT, -ECANCELED,
			              "local buffer outside its region (lkey)");
			return -1;
		}
		if (wr->opcode == FAB_OP_READ && fail_read(l->fab, wr->len)) {
			tcp_link_fail(l, -ECONNRESET, -ECANCELED,
			              "LOCO_TCP_FAIL_READS: a READ took the link down");
			return -1;
		}
	}

	switch (wr->opcode) {
	case FAB_OP_CAS:
	case FAB_OP_FAA:
		if (tcp_tx_used(l) + TCP_HDR_LEN > req_room)
			return 0;
		f.type = wr->opcode == FAB_OP_CAS ? TCP_F_CAS : TCP_F_FAA;
		f.flags = TCP_FL_FIRST | TCP_FL_LAST;
		f.a = wr->opcode == FAB_OP_CAS ? wr->compare : wr->swap;
		f.b = wr->swap;
		tcp_tx_frame(l, &f);
		l->atomics_inflight++;
		return 1;
	case FAB_OP_READ:
		do {
			uint32_t left = wr->len - e->sent;
			uint32_t seg = left < TCP_MAX_SEG ? left : TCP_MAX_SEG;

			if (wr->len == 0)
				seg = 0;
			if (l->read_inflight + seg > l->peer_read_window ||
			    tcp_tx_used(l) + TCP_HDR_LEN > req_room)
				return 0;
			f.type = TCP_F_READ;
			f.addr = wr->remote_addr + e->sent;
			f.a = seg ? seg : 1; /* a 0-byte READ asks for 1 byte it ignores */
			f.flags =
			    (e->sent == 0 ? TCP_FL_FIRST : 0) | (seg == left ? TCP_FL_LAST : 0);
			tcp_tx_frame(l, &f);
			l->read_inflight += f.a;
			e->sent += seg;
		} while (e->sent < wr->len);
		return 1;
	case FAB_OP_WRITE:
	case FAB_OP_WRITE_IMM:
	case FAB_OP_SEND:
		if (wr->opcode != FAB_OP_WRITE && e->sent == 0 &&
		    l->credits_used == l->peer_credits)
			return 0; /* no RECV posted at the target yet (RNR) */
		do {
			uint32_t left = wr->len - e->sent;
			uint32_t seg = left < TCP_MAX_SEG ? left : TCP_MAX_SEG;

			if (tcp_tx_used(l) + TCP_HDR_LEN + seg > req_room && tcp_tx_used(l) > 0)
				return 0;
			f.type = wr->opcode == FAB_OP_WRITE  ? TCP_F_WRITE
			         : wr->opcode == FAB_OP_SEND ? TCP_F_SEND
			                                     : TCP_F_WRITE_IMM;
			f.len = seg;
			f.addr = wr->remote_addr + e->sent;
			f.flags =
			    (e->sent == 0 ? TCP_FL_FIRST : 0) | (seg == left ? TCP_FL_LAST : 0);
			f.a = wr->len;
			/* somebody may wait for the ACK of a request not posted lazy: at once */
			if (seg == left && !(wr->flags & FAB_WR_LAZY))
				f.flags |= TCP_FL_ACKREQ;
			if (wr->opcode == FAB_OP_SEND) {
				f.key = wr->imm;
				f.flags |= TCP_FL_HAS_IMM;
			}
			f.b = wr->imm;
			p = tcp_tx_frame(l, &f);
			if (p == NULL)
				return 0;
			fab_copy_out(p, src + e->sent, seg);
			if (e->sent == 0 && wr->opcode != FAB_OP_WRITE)
				l->credits_used++;
			e->sent += seg;
		} while (e->sent < wr->len);
		return 1;
	}
	return -1;
}

/* tcp_link_issue -- move posted requests onto the wire. Returns whether any moved. */
int tcp_link_issue(struct tcp_link *l)
{
	uint32_t prod = __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE);
	int moved = 0;

	if (l->state == TCP_LINK_DOWN) {
		if (l->sq_done != prod) {
			tcp_flush_sq(l, l->err, l->err);
			tcp_cq_wake(l->fab);
			return 1;
		}
		return 0;
	}
	if (l->state != TCP_LINK_UP)
		return 0;
	while (l->sq_issue != prod) {
		struct tcp_sqe *e = &l->sq[l->sq_issue & l->sq_mask];
		int r = issue_one(l, e, l->sq_issue);

		if (r <= 0)
			return moved || r < 0;
		if (l->sq_done == l->sq_issue)
			l->last_rx_ns = lc_now_ns(); /* the dead-peer clock starts now */
		l->sq_issue++;
		moved = 1;
	}
	return moved;
}

/* sqe_of -- the outstanding request @psn names, or NULL when it names none. */
static struct tcp_sqe *sqe_of(struct tcp_link *l, uint32_t psn)
{
	struct tcp_sqe *e = &l->sq[psn & l->sq_mask];

	if (tcp_psn_before(psn, l->sq_done))
		return NULL;
	/* a READ bigger than the window is answered while still being issued */
	if (tcp_psn_before(psn, l->sq_issue) || (psn == l->sq_issue && e->sent > 0))
		return e;
	return NULL;
}

/* tcp_on_response -- an initiator-side frame: ACK, READ data, atomic value, NAK, credits. */
void tcp_on_response(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data)
{
	struct tcp_sqe *e;

	switch (f->type) {
	case TCP_F_ACK:
		if (!tcp_psn_before(f->psn, l->sq_issue)) {
			tcp_link_fail(l, -EPROTO, -EPROTO, "ACK for a request never sent");
			return;
		}
		complete_upto(l, f->psn + 1);
		return;
	case TCP_F_CREDIT:
		l->peer_credits = (l->peer_credits & ~0xffffffffull) | (f->a & 0xffffffffull);
		if (l->peer_credits < l->credits_used)
			l->peer_credits += 1ull << 32;
		return;
	case TCP_F_READ_RESP:
		e = sqe_of(l, f->psn);
		if (e == NULL || e->wr.opcode != FAB_OP_READ ||
		    (uint64_t)e->recvd + f->len > (e->wr.len ? e->wr.len : 1)) {
			tcp_link_fail(l, -EPROTO, -EPROTO, "unexpected READ response");
			return;
		}
		if (e->wr.len)
			memcpy((uint8_t *)e->wr.local + e->recvd, data, f->len);
		e->recvd += f->len;
		l->read_inflight -= f->len;
		if (e->recvd >= e->wr.len)
			complete_upto(l, f->psn + 1);
		return;
	case TCP_F_ATOMIC_RESP:
		e = sqe_of(l, f->psn);
		if (e == NULL || (e->wr.opcode != FAB_OP_CAS && e->wr.opcode != FAB_OP_FAA)) {
			tcp_link_fail(l, -EPROTO, -EPROTO, "unexpected atomic response");
			return;
		}
		memcpy(e->wr.local, &f->a, 8);
		complete_upto(l, f->psn + 1);
		return;
	case TCP_F_NAK:
		e = sqe_of(l, f->psn);
		if (e == NULL || f->key == 0 || f->key > 4095) {
			tcp_link_fail(l, -EPROTO, -EPROTO, "unexpected NAK");
			return;
		}
		complete_upto(l, f->psn);
		tcp_link_fail(l, -(int)f->key, -ECANCELED, NULL);
		lc_log_info("tcp: link %u: request %u refused by the peer: %s", l->base.id, f->psn,
		            strerror((int)f->key));
		return;
	}
}

/*
 * post_inline -- issue @l's requests from the posting thread, when nobody
 * holds the NIC role and the link is not streaming (fewer than
 * TCP_INLINE_INFLIGHT requests in flight, nothing queued to send): they
 * then leave without a thread hop. On a streaming link the NIC thread
 * takes them, batching many into few sends. Returns whether all went.
 */
static int post_inline(struct tcp_fab *f, struct tcp_link *l)
{
	uint64_t cq0 = fab_swcq_tail(&f->cq);
	int all = 0;

	if (pthread_mutex_trylock(&f->nic_mu) != 0)
		return 0;
	__atomic_store_n(&f->role, TCP_ROLE_POSTER, __ATOMIC_RELAXED);
	if (l->state == TCP_LINK_UP && l->sq_issue - l->sq_done < TCP_INLINE_INFLIGHT &&
	    tcp_tx_used(l) == 0) {
		tcp_nic_touch(f);
		tcp_link_issue(l);
		if (l->state == TCP_LINK_UP) {
			tcp_send_acks(l); /* the ACKs a driver left: with this send */
			tcp_tx_flush(l);
		}
		tcp_nic_touch(f);
		all = l->sq_issue == __atomic_load_n(&l->sq_prod, __ATOMIC_ACQUIRE);
	}
	__atomic_store_n(&f->role, TCP_ROLE_NONE, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->nic_mu);
	if (fab_swcq_tail(&f->cq) != cq0)
		tcp_cq_wake(f);
	return all;
}

int tcp_post(struct fab_link *link, const struct fab_wr *wr, int n)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;
	uint32_t max_inline = f->base.attr.max_inline, prod;

	if (wr == NULL || n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		int ret = fab_wr_check(&wr[i], TCP_MAX_MSG, max_inline);

		if (ret)
			return ret;
	}

	pthread_spin_lock(&l->post_lock);
	prod = l->sq_prod;
	if (prod - __atomic_load_n(&l->sq_free, __ATOMIC_ACQUIRE) + (uint32_t)n > l->sq_mask + 1) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	/* each may produce a completion (errors always do): the ring can never overflow */
	if (!fab_swcq_take_credit(&f->cq, n)) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	for (int i = 0; i < n; i++, prod++) {
		struct tcp_sqe *e = &l->sq[prod & l->sq_mask];

		e->wr = wr[i];
		e->sent = e->recvd = 0;
		if (wr[i].flags & FAB_WR_INLINE)
			fab_copy_out(l->sq_inline + (size_t)(prod & l->sq_mask) * max_inline,
			             wr[i].local, wr[i].len);
	}
	/* pairs with the acquire load of sq_prod in tcp_link_issue() */
	__atomic_store_n(&l->sq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->post_lock);

	if (wr[n - 1].flags & FAB_WR_MORE) {
		/*
		 * The poster's next post sends it with its own (post_inline()
		 * issues the whole queue): a GET's two READs in one socket write
		 * and one turn of the target (map-lat GET 8 B on tcp, medians: 18-21 ->
		 * 11-14 us). Counted as work without a wake: if no post follows,
		 * a driver's next turn or the NIC thread's (at most 100 ms) sends it.
		 */
		__atomic_add_fetch(&f->work_seq, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	if (!post_inline(f, l))
		tcp_nic_wake(f);
	return 0;
}

int tcp_post_recv(struct fab_link *link, const struct fab_recv_wr *wr, int n)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;
	uint32_t prod;

	if (fab_recv_check(&f->kt, wr, n))
		return -EINVAL;
	pthread_spin_lock(&l->post_lock);
	prod = l->rq_prod;
	if (prod - __atomic_load_n(&l->rq_free, __ATOMIC_ACQUIRE) + (uint32_t)n > l->rq_mask + 1) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	if (!fab_swcq_take_credit(&f->cq, n)) {
		pthread_spin_unlock(&l->post_lock);
		return -EAGAIN;
	}
	for (int i = 0; i < n; i++, prod++)
		l->rq[prod & l->rq_mask] = wr[i];
	/* pairs with the acquire loads of rq_prod in the NIC (credits, delivery) */
	__atomic_store_n(&l->rq_prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(&l->post_lock);
	tcp_nic_wake(f);
	return 0;
}
