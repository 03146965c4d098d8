/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_frame.c -- the rpc's frame decoder (format in rpc_frame.h). The
 * message comes from a ring another node writes: nothing in it is
 * trusted; no read goes past @len.
 */
#include <errno.h>
#include <string.h>

#include "rpc_frame.h"

/*
 * vec_parse -- an RF_VEC body of @plen bytes at @p: struct rf_vec, its
 * argument table, the copied bytes (which fill the rest exactly). Sets
 * @f's vn, varg, vcopy and vlen. 0 or -EBADMSG.
 */
static int vec_parse(const uint8_t *p, uint64_t plen, const struct rf_limits *lim,
                     struct rf_frame *f)
{
	struct rf_vec v;
	uint64_t copied = 0, total = 0;

	if (plen < sizeof(v))
		return -EBADMSG;
	memcpy(&v, p, sizeof(v));
	if (v.n == 0 || v.n > RF_VEC_MAX || v.rsv != 0 ||
	    plen - sizeof(v) < (uint64_t)v.n * sizeof(struct rf_varg))
		return -EBADMSG;
	f->vn = v.n;
	f->varg = p + sizeof(v);
	f->vcopy = f->varg + (size_t)v.n * sizeof(struct rf_varg);
	for (uint32_t i = 0; i < v.n; i++) {
		struct rf_varg a;

		memcpy(&a, f->varg + (size_t)i * sizeof(a), sizeof(a));
		if (a.len == 0 || a.len > lim->pull_max ||
		    (a.how != RF_VARG_COPY && a.how != RF_VARG_READ) ||
		    (a.how == RF_VARG_COPY && (a.addr != 0 || a.rkey != 0)) ||
		    (a.how == RF_VARG_READ && a.addr + a.len < a.addr))
			return -EBADMSG;
		copied += a.how == RF_VARG_COPY ? a.len : 0;
		total += a.len;
	}
	/* the copied bytes fill the rest exactly; all of them fit the callee's pull room */
	if (copied != plen - sizeof(v) - (uint64_t)v.n * sizeof(struct rf_varg) ||
	    total > lim->pull_max)
		return -EBADMSG;
	f->vlen = total;
	return 0;
}

int rf_next(const void *msg, size_t len, size_t *pos, const struct rf_limits *lim,
            struct rf_frame *f)
{
	const uint8_t *b = msg;
	size_t at = *pos, left, adv;

	if (at >= len)
		return 0;
	left = len - at;
	if (left < RF_HDR)
		return -EBADMSG;
	memcpy(&f->h, b + at, sizeof(f->h));
	if (f->h.plen > left - RF_HDR)
		return -EBADMSG;
	if (f->h.rsv[0] | f->h.rsv[1] | f->h.rsv[2] | f->h.rsv2)
		return -EBADMSG;
	switch (f->h.kind) {
	case RF_CALL:
		break;
	case RF_RET:
		if (f->h.slot >= lim->slots)
			return -EBADMSG;
		break;
	case RF_PULL:
		if (f->h.slot >= lim->slots || f->h.plen != sizeof(struct rf_pull))
			return -EBADMSG;
		memcpy(&f->pull, b + at + RF_HDR, sizeof(f->pull));
		if (f->pull.len == 0 || f->pull.len > lim->pull_max ||
		    f->pull.off > lim->send_len || f->pull.len > lim->send_len - f->pull.off)
			return -EBADMSG;
		break;
	case RF_DEST:
		if (f->h.slot >= lim->slots || f->h.plen != sizeof(struct rf_dest))
			return -EBADMSG;
		memcpy(&f->dest, b + at + RF_HDR, sizeof(f->dest));
		if (f->dest.len == 0 || f->dest.rsv != 0 ||
		    f->dest.addr + f->dest.len < f->dest.addr)
			return -EBADMSG; /* where it lies is the callee's check (its regions) */
		break;
	case RF_VEC:
		if (f->h.slot >= lim->slots || vec_parse(b + at + RF_HDR, f->h.plen, lim, f) != 0)
			return -EBADMSG;
		break;
	case RF_TREE:
	case RF_TREEV: {
		uint32_t th[2];
		uint64_t rest;

		if (f->h.plen < sizeof(th) || (f->h.kind == RF_TREEV && f->h.slot >= lim->slots))
			return -EBADMSG;
		memcpy(th, b + at + RF_HDR, sizeof(th));
		if (th[1] > RF_TREE_MAX || (uint64_t)th[1] * 4 > f->h.plen - sizeof(th))
			return -EBADMSG;
		f->origin = th[0];
		f->nsub = th[1];
		f->sub = b + at + RF_HDR + sizeof(th);
		f->args = f->sub + (size_t)th[1] * 4;
		rest = f->h.plen - sizeof(th) - (uint64_t)th[1] * 4;
		f->alen = (uint32_t)rest;
		/* RF_TREEV: the rest is an RF_VEC body (the bytes to READ from the sender) */
		if (f->h.kind == RF_TREEV && vec_parse(f->args, rest, lim, f) != 0)
			return -EBADMSG;
		break;
	}
	default:
		return -EBADMSG;
	}
	f->payload = b + at + RF_HDR;
	if (f->h.kind != RF_TREE && f->h.kind != RF_TREEV) {
		f->args = f->payload;
		f->alen = f->h.plen;
	}
	adv = rf_r8(RF_HDR + (size_t)f->h.plen);
	*pos = adv > left ? len : at + adv; /* the last frame's padding may be cut */
	return 1;
}
