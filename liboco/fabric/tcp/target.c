/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * target.c -- the NIC's target role: executing the peer's requests against
 * registered memory (WRITE landing, READ, atomics, SEND delivery), answering
 * them with ACKs, credits and NAKs, and the tear-free copies both roles use.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../../clock.h"
#include "../../log.h"
#include "tcp.h"

/* tcp_send_acks -- answer executed requests and announce new RECVs. */
void tcp_send_acks(struct tcp_link *l)
{
	uint32_t last = l->exec_psn - 1;
	uint32_t rq_prod = __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);

	if (l->state != TCP_LINK_UP)
		return;
	if (l->acked_psn != last && !l->nak_sent) {
		struct tcp_frame f = {.type = TCP_F_ACK, .psn = last};

		if (tcp_tx_response(l, &f) == NULL)
			return;
		l->acked_psn = last;
	}
	if (l->credits_sent != rq_prod && !l->nak_sent) {
		struct tcp_frame f = {.type = TCP_F_CREDIT, .a = rq_prod};

		/* rq_prod is a 32-bit count: the peer tracks the same wrap */
		if (tcp_tx_response(l, &f) == NULL)
			return;
		l->credits_sent = rq_prod;
	}
	if (l->acked_psn == last) {
		l->ack_urgent = 0;
		l->ack_owed_ns = 0;
	}
}

/* alive_every -- how often a long request's target says it is alive: TCP_ALIVE_NS, or a quarter
   of the failure bound if that is shorter */
static uint64_t alive_every(const struct tcp_link *l)
{
	uint64_t every = (uint64_t)l->fab->base.attr.timeout_ms * 250000ull;

	return every == 0 || every > TCP_ALIVE_NS ? TCP_ALIVE_NS : every;
}

/*
 * alive_send -- restate our RECV count (a CREDIT, which changes nothing at
 * the peer) as a sign of life at @t. Not while output is pending: those
 * bytes tell the peer the same; and the tx room kept for responses
 * (link.c) counts no frame of ours that is not an answer to one of its
 * requests.
 */
static void alive_send(struct tcp_link *l, uint64_t t)
{
	struct tcp_frame f = {.type = TCP_F_CREDIT};

	if (l->nak_sent || tcp_tx_used(l) > 0)
		return;
	f.a = __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE);
	if (tcp_tx_response(l, &f) == NULL)
		return;
	l->credits_sent = f.a;
	l->alive_ns = t;
}

/*
 * target_alive -- a request of many segments is still arriving: a sign of
 * life at most every alive_every(). The initiator hears nothing else until
 * the last segment's ACK, and its dead-peer clock (nic.c) runs from the
 * last byte it heard: without this, a WRITE that takes longer than the
 * bound to cross a slow link fails a live link. RC hardware acknowledges
 * packets, not messages, for the same reason.
 */
static void target_alive(struct tcp_link *l)
{
	l->seg_open = 1;
	if (l->last_rx_ns - l->alive_ns >= alive_every(l))
		alive_send(l, l->last_rx_ns);
}

/*
 * tcp_target_keepalive -- the role's timers at @now: while a request of
 * several segments is part-way in, a sign of life every alive_every() even
 * when no segment comes. On a lossy link TCP can hold the rest of the
 * request back for longer than the bound behind one lost segment (a 2
 * Mbit/s link shaped by tbf, BBR: 25-40 % of the bytes sent again, and the
 * next in-order byte 0.9 s late, while the peer's kernel SACKed what came
 * after it); the initiator then heard nothing and failed a live link
 * (slow-link in CI: "no answer from the peer for 1000 ms"). A target whose
 * process stopped says nothing, so its peer still finds it silent. Returns
 * the ms until the next one is due, or -1 with no request part-way in.
 */
int tcp_target_keepalive(struct tcp_link *l, uint64_t now)
{
	uint64_t every = alive_every(l), due;

	if (!l->seg_open || l->nak_sent)
		return -1;
	if (now - l->alive_ns >= every) {
		alive_send(l, now);
		tcp_tx_flush(l);
	}
	due = l->alive_ns + every;
	return due > now ? (int)((due - now + 999999) / 1000000ull) : 1;
}

static void target_nak(struct tcp_link *l, uint32_t psn, int err)
{
	struct tcp_frame f = {.type = TCP_F_NAK, .psn = psn, .key = (uint32_t)-err};

	if (l->nak_sent)
		return;
	lc_log_info("tcp: link %u: refused request %u: %s", l->base.id, psn, strerror(-err));
	l->nak_sent = 1;
	tcp_send_acks(l); /* answer what executed before it */
	tcp_tx_response(l, &f);
}

/* deliver_recv -- place SEND bytes into the current RECV buffer. */
static int deliver_recv(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data)
{
	struct fab_recv_wr *r;

	if (l->rq_cons == __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE))
		return -EPROTO; /* the peer sent without a credit */
	r = &l->rq[l->rq_cons & l->rq_mask];
	if ((f->flags & TCP_FL_FIRST))
		l->rq_fill = 0;
	if (f->len > r->len - l->rq_fill)
		return -EMSGSIZE;
	memcpy((uint8_t *)r->local + l->rq_fill, data, f->len);
	l->rq_fill += f->len;
	if (f->flags & TCP_FL_LAST) {
		tcp_cq_push(l->fab, l, r->wrid, FAB_OP_RECV, 0, l->rq_fill, f->key, 1);
		l->rq_cons++;
		__atomic_store_n(&l->rq_free, l->rq_cons, __ATOMIC_RELEASE);
	}
	return 0;
}

/* tcp_exec_request -- run one request frame at the target. */
void tcp_exec_request(struct tcp_link *l, const struct tcp_frame *f, const uint8_t *data)
{
	struct tcp_fab *fab = l->fab;
	void *p;
	int ret;

	if (l->nak_sent)
		return; /* error state: everything after the refused request is dropped */
	if (f->psn != l->exec_psn) {
		tcp_link_fail(l, -EPROTO, -EPROTO, "request out of sequence");
		return;
	}
	switch (f->type) {
	case TCP_F_WRITE:
	case TCP_F_WRITE_IMM:
		ret = keytab_check(&fab->kt, f->key, f->addr, tcp_wire_write_span(f),
		                   FAB_ACCESS_REMOTE_WRITE, &p);
		if (ret == 0 && f->type == TCP_F_WRITE_IMM && (f->flags & TCP_FL_FIRST) &&
		    l->rq_cons == __atomic_load_n(&l->rq_prod, __ATOMIC_ACQUIRE))
			ret = -EPROTO;
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		fab_land_write(fab->slow_ns, &fab->rng, p, data, f->len);
		if (f->flags & TCP_FL_LAST) {
			l->seg_open = 0;
			tcp_landed(fab);
		} else {
			target_alive(l);
		}
		if (f->type == TCP_F_WRITE_IMM) {
			l->imm_len = (f->flags & TCP_FL_FIRST) ? f->len : l->imm_len + f->len;
			if (f->flags & TCP_FL_LAST) {
				struct fab_recv_wr *r = &l->rq[l->rq_cons++ & l->rq_mask];

				tcp_cq_push(fab, l, r->wrid, FAB_OP_RECV_IMM, 0, l->imm_len,
				            (uint32_t)f->b, 1);
				__atomic_store_n(&l->rq_free, l->rq_cons, __ATOMIC_RELEASE);
			}
		}
		break;
	case TCP_F_SEND:
		ret = deliver_recv(l, f, data);
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		if (!(f->flags & TCP_FL_LAST))
			target_alive(l);
		else
			l->seg_open = 0;
		break;
	case TCP_F_READ: {
		struct tcp_frame r = {
		    .type = TCP_F_READ_RESP, .psn = f->psn, .len = (uint32_t)f->a};
		uint8_t *out;

		ret = keytab_check(&fab->kt, f->key, f->addr, f->a, FAB_ACCESS_REMOTE_READ, &p);
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		tcp_send_acks(l); /* keep ACKs in PSN order ahead of the response */
		out = tcp_tx_response(l, &r);
		if (out == NULL)
			return;
		fab_copy_out(out, p, f->a);
		if (f->flags & TCP_FL_LAST)
			l->acked_psn = f->psn;
		break;
	}
	case TCP_F_CAS:
	case TCP_F_FAA: {
		struct tcp_frame r = {.type = TCP_F_ATOMIC_RESP, .psn = f->psn};

		ret = keytab_check(&fab->kt, f->key, f->addr, 8, FAB_ACCESS_REMOTE_ATOMIC, &p);
		if (ret == 0 && (f->addr & 7))
			ret = -EINVAL;
		if (ret) {
			target_nak(l, f->psn, ret);
			return;
		}
		if (f->type == TCP_F_CAS) {
			uint64_t expected = f->a;

			__atomic_compare_exchange_n((uint64_t *)p, &expected, f->b, false,
			                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			r.a = expected; /* the old value either way */
		} else {
			r.a = __atomic_fetch_add((uint64_t *)p, f->a, __ATOMIC_SEQ_CST);
		}
		tcp_landed(fab);
		tcp_send_acks(l);
		if (tcp_tx_response(l, &r) == NULL)
			return;
		l->acked_psn = f->psn;
		break;
	}
	}
	if (f->flags & TCP_FL_LAST) {
		l->exec_psn++;
		if (f->flags & TCP_FL_ACKREQ)
			l->ack_urgent = 1;
	}
}
