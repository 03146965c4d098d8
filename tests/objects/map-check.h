/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-check.h -- a linearizability checker for one key of a map (a
 * register that may be absent), after Wing & Gong with Lowe's memoization
 * (the WGL search): operations are taken in an order consistent with
 * real time (an operation can be linearized only before every operation
 * that was invoked after it returned), each must be legal in the register
 * model from the state the earlier ones left, and a (set of linearized
 * operations, state) pair already explored is never explored again.
 * * Model: the state is a value, 0 for absent (written values are never 0),
 * and the key's version (0 at first; every write that succeeds adds one,
 * a delete too, as loco_map(3) says). A version given as 0 in a GET or
 * PUT record is not checked.
 *   PUT v        always legal; value := v, version + 1 (== the PUT's version)
 *   GET -> r     legal iff value == r (r == 0: the GET said -ENOENT) and
 *                the version is the GET's
 *   DEL -> 0     legal iff value != 0; value := 0, version + 1
 *   DEL -> ENOENT legal iff value == 0
 *   CAS e -> v   legal iff (e == 0 ? value == 0 : value != 0 && version == e);
 *                value := v, version + 1
 *   CAS e failed legal iff not so
 *
 * Operations whose outcome is unknown (an error: the write may have
 * happened or not) are given as MC_PUT_MAYBE / MC_DEL_MAYBE: legal
 * either way, with a response time of INT64_MAX (they may take effect at
 * any later time, or never).
 *
 * Thread safety: none (one checker per thread). Tests only.
 */
#ifndef LOCO_TESTS_MAP_CHECK_H
#define LOCO_TESTS_MAP_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum mc_kind {
	MC_GET = 1,
	MC_PUT,
	MC_DEL,
	MC_DEL_ENOENT,
	MC_PUT_MAYBE,
	MC_DEL_MAYBE,
	MC_CAS,     /* succeeded */
	MC_CAS_FAIL /* -ECANCELED */
};

struct mc_op {
	int64_t inv, resp; /* CLOCK_MONOTONIC ns */
	int kind;          /* enum mc_kind */
	uint64_t val;      /* PUT, CAS: the value written; GET: the value read (0: absent) */
	uint64_t ver;      /* GET, PUT: the version returned (0: unchecked); CAS: expected */
};

/* the register's state */
struct mc_state {
	uint64_t val, ver;
};

#define MC_OPS_MAX   1024u
#define MC_CACHE_LOG 18 /* memo entries: 1 << MC_CACHE_LOG */

enum {
	MC_OK = 0,
	MC_NOT_LINEARIZABLE = 1,
	MC_TOO_BIG = 2
};

struct mc_entry {
	int is_call;
	int64_t t;
	unsigned op;
	struct mc_entry *match; /* call <-> return */
	struct mc_entry *prev, *next;
};

struct mc_memo {
	uint64_t *bits; /* (1 << MC_CACHE_LOG) * words; a row of zeros with state 0 is free */
	struct mc_state *state;
	uint8_t *used;
	unsigned words;
	size_t n, cap;
};

static uint64_t mc_hash(const uint64_t *b, unsigned words, struct mc_state st)
{
	uint64_t h = st.val * 0x9e3779b97f4a7c15ull + st.ver * 0xc2b2ae3d27d4eb4full + 1;

	for (unsigned i = 0; i < words; i++) {
		h ^= b[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
		h *= 0xbf58476d1ce4e5b9ull;
	}
	return h ^ (h >> 29);
}

/* mc_memo_add -- 1 if (@b, @st) was new (now added), 0 if seen, -1 when full. */
static int mc_memo_add(struct mc_memo *m, const uint64_t *b, struct mc_state st)
{
	size_t i = mc_hash(b, m->words, st) & (m->cap - 1);

	if (m->n * 4 >= m->cap * 3)
		return -1;
	for (;; i = (i + 1) & (m->cap - 1)) {
		if (!m->used[i]) {
			m->used[i] = 1;
			memcpy(&m->bits[i * m->words], b, m->words * 8);
			m->state[i] = st;
			m->n++;
			return 1;
		}
		if (m->state[i].val == st.val && m->state[i].ver == st.ver &&
		    memcmp(&m->bits[i * m->words], b, m->words * 8) == 0)
			return 0;
	}
}

/* mc_step -- whether op @o is legal from state *@st; the new state into *@st. */
static int mc_step(const struct mc_op *o, struct mc_state *st)
{
	int match;

	switch (o->kind) {
	case MC_GET:
		return st->val == o->val && (o->val == 0 || o->ver == 0 || st->ver == o->ver);
	case MC_PUT:
		if (o->ver != 0 && o->ver != st->ver + 1)
			return 0;
		st->val = o->val;
		st->ver++;
		return 1;
	case MC_DEL:
		if (st->val == 0)
			return 0;
		st->val = 0;
		st->ver++;
		return 1;
	case MC_DEL_ENOENT:
		return st->val == 0;
	case MC_CAS:
	case MC_CAS_FAIL:
		match = o->ver == 0 ? st->val == 0 : st->val != 0 && st->ver == o->ver;
		if (o->kind == MC_CAS_FAIL)
			return !match;
		if (!match)
			return 0;
		st->val = o->val;
		st->ver++;
		return 1;
	default:
		return 0;
	}
}

static int mc_cmp_entry(const void *a, const void *b)
{
	const struct mc_entry *x = *(struct mc_entry *const *)a, *y = *(struct mc_entry *const *)b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	/* at equal times a call goes first: the operations overlap (the weaker claim) */
	return y->is_call - x->is_call;
}

/*
 * mc_check -- whether the history @ops[0 .. @n) of one key, starting from
 * an absent key, is linearizable: MC_OK, MC_NOT_LINEARIZABLE, or
 * MC_TOO_BIG (more than MC_OPS_MAX operations, or the memo filled up).
 * *@explored: the states the search explored.
 */
static int mc_check(const struct mc_op *in, size_t n, size_t *explored)
{
	struct mc_op *ops;
	struct mc_entry *ent, **order, head = {0}, **stack_e;
	uint64_t *lin;
	struct mc_state *stack_s, st = {0, 0};
	struct mc_memo memo = {0};
	size_t sp = 0, nops = 0;
	int res = MC_OK;

	if (n > MC_OPS_MAX)
		return MC_TOO_BIG;
	/* an unknown outcome is two choices: it happened (at any time after its call), or not;
	   modelled as an operation that never returns, legal with any effect: expanded below
	   into PUT (or DEL) with resp = INT64_MAX, and the "never happened" choice as the
	   search's freedom to leave it unlinearized at the end */
	ops = calloc(n ? n : 1, sizeof(*ops));
	for (size_t i = 0; i < n; i++) {
		ops[nops] = in[i];
		if (ops[nops].kind == MC_PUT_MAYBE || ops[nops].kind == MC_DEL_MAYBE) {
			ops[nops].kind = ops[nops].kind == MC_PUT_MAYBE ? MC_PUT : MC_DEL;
			ops[nops].resp = INT64_MAX;
		}
		nops++;
	}
	memo.words = (unsigned)((nops + 63) / 64 + 1);
	memo.cap = (size_t)1 << MC_CACHE_LOG;
	memo.bits = calloc(memo.cap * memo.words, 8);
	memo.state = calloc(memo.cap, sizeof(*memo.state));
	memo.used = calloc(memo.cap, 1);
	ent = calloc(2 * nops + 1, sizeof(*ent));
	order = calloc(2 * nops + 1, sizeof(*order));
	lin = calloc(memo.words, 8);
	stack_e = calloc(nops + 1, sizeof(*stack_e));
	stack_s = calloc(nops + 1, sizeof(*stack_s));
	if (!ops || !memo.bits || !memo.state || !memo.used || !ent || !order || !lin || !stack_e ||
	    !stack_s) {
		res = MC_TOO_BIG;
		goto out;
	}
	for (size_t i = 0; i < nops; i++) {
		ent[2 * i] = (struct mc_entry){.is_call = 1, .t = ops[i].inv, .op = (unsigned)i};
		ent[2 * i + 1] =
		    (struct mc_entry){.is_call = 0, .t = ops[i].resp, .op = (unsigned)i};
		ent[2 * i].match = &ent[2 * i + 1];
		ent[2 * i + 1].match = &ent[2 * i];
		order[2 * i] = &ent[2 * i];
		order[2 * i + 1] = &ent[2 * i + 1];
	}
	qsort(order, 2 * nops, sizeof(*order), mc_cmp_entry);
	{
		struct mc_entry *p = &head;

		for (size_t i = 0; i < 2 * nops; i++) {
			p->next = order[i];
			order[i]->prev = p;
			p = order[i];
		}
		p->next = NULL;
	}
	{
		struct mc_entry *e = head.next;

		while (head.next != NULL) {
			/* the unreturned (unknown) operations may stay unlinearized: done once only
			   they remain */
			int only_maybe = 1;

			for (struct mc_entry *q = head.next; q != NULL; q = q->next)
				if (!q->is_call && q->t != INT64_MAX) {
					only_maybe = 0;
					break;
				}
			if (only_maybe)
				break;
			if (e == NULL || !e->is_call) {
				/* a return reached (or the end): backtrack */
				if (sp == 0) {
					res = MC_NOT_LINEARIZABLE;
					break;
				}
				sp--;
				e = stack_e[sp];
				st = stack_s[sp];
				lin[e->op / 64] &= ~(1ull << (e->op % 64));
				/* unlift: put the call and its return back */
				e->match->prev->next = e->match;
				if (e->match->next)
					e->match->next->prev = e->match;
				e->prev->next = e;
				e->next->prev = e;
				e = e->next;
				continue;
			}
			{
				struct mc_state ns = st;
				int r;

				if (mc_step(&ops[e->op], &ns)) {
					lin[e->op / 64] |= 1ull << (e->op % 64);
					r = mc_memo_add(&memo, lin, ns);
					if (r < 0) {
						res = MC_TOO_BIG;
						break;
					}
					if (r == 1) {
						stack_e[sp] = e;
						stack_s[sp] = st;
						sp++;
						st = ns;
						/* lift: take the call and its return out */
						e->prev->next = e->next;
						e->next->prev = e->prev;
						e->match->prev->next = e->match->next;
						if (e->match->next)
							e->match->next->prev = e->match->prev;
						e = head.next;
						continue;
					}
					lin[e->op / 64] &= ~(1ull << (e->op % 64));
				}
				e = e->next;
			}
		}
	}
out:
	if (explored)
		*explored = memo.n;
	free(ops);
	free(memo.bits);
	free(memo.state);
	free(memo.used);
	free(ent);
	free(order);
	free(lin);
	free(stack_e);
	free(stack_s);
	return res;
}

#endif /* LOCO_TESTS_MAP_CHECK_H */
