/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * torn-word.c -- an aligned 8-byte word is never torn (DESIGN §3), in
 * both directions.
 *
 * 1. WRITE vs CPU reads: the initiator WRITEs the whole 4 KiB region, every
 *    byte of every word equal to a counter (0x0101.., 0x0202.., ...), from
 *    sources at varying misalignments, to a target that lands writes slowly
 *    (LOCO_TCP_SLOW_WRITE); a target thread loads every word atomically and
 *    checks that its 8 bytes are equal.
 * 2. CPU writes vs READ: a target thread keeps storing such uniform words
 *    with atomic stores while the initiator READs ranges and checks every
 *    word it gets back.
 * Both sides count their checks and the scans that saw a write in
 * progress (words of different values), so the test cannot pass without
 * having raced; on a loaded machine they go on (bounded) until they have.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define REG      4096u /* the words both sides race on */
#define PUB      REG   /* then the checker's published counts (never written remotely) */
#define RLEN     (REG + 4096u)
#define NWORDS   (REG / 8)
#define NWRITES  3000 /* at least; more until the race was observed (bounded) */
#define NREADS   3000
#define MINWORDS 1000000
#define MAXTIME  40000 /* ms */
#define WINDOW   8
#define TMO      10000

static inline bool uniform(uint64_t v)
{
	return v == (v & 0xff) * 0x0101010101010101ull;
}

/* target thread of part 1: atomic loads of every word, all bytes equal */
static int load_checker(struct t_app *app)
{
	const uint64_t *w = (const uint64_t *)app->base[0];
	uint64_t *pub = (uint64_t *)(app->base[0] + PUB);
	uint64_t deadline = t_now_ns() + 110ull * 1000000000u;
	int64_t words = 0, torn = 0, mixed = 0, scans = 0;

	while (!t_app_stopped(app) && t_now_ns() < deadline) {
		uint64_t first = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
		bool mix = false;

		for (size_t i = 0; i < NWORDS; i++) {
			uint64_t v = __atomic_load_n(&w[i], __ATOMIC_RELAXED);

			if (!uniform(v) && torn++ == 0)
				snprintf(app->rep.msg, sizeof(app->rep.msg),
				         "word %zu read as 0x%016llx", i, (unsigned long long)v);
			mix |= v != first;
		}
		words += NWORDS;
		mixed += mix;
		if (++scans % 64 == 0) {
			/* read by the initiator through the shared mapping */
			__atomic_store_n(&pub[0], (uint64_t)words, __ATOMIC_RELAXED);
			__atomic_store_n(&pub[1], (uint64_t)mixed, __ATOMIC_RELAXED);
		}
	}
	app->rep.v[0] = words;
	app->rep.v[1] = torn;
	app->rep.v[2] = mixed;
	return torn != 0;
}

/* target thread of part 2: sweeps of atomic stores of uniform words */
static int storer(struct t_app *app)
{
	uint64_t *w = (uint64_t *)app->base[0];
	uint64_t deadline = t_now_ns() + 110ull * 1000000000u;
	int64_t sweeps = 0;

	while (!t_app_stopped(app) && t_now_ns() < deadline) {
		uint64_t v = (uint64_t)(sweeps & 0xff) * 0x0101010101010101ull;

		/* no yield: the sweeps must run while the NIC thread serves READs */
		for (size_t i = 0; i < NWORDS; i++)
			__atomic_store_n(&w[i], v, __ATOMIC_RELAXED);
		sweeps++;
	}
	app->rep.v[0] = sweeps;
	return 0;
}

/*
 * part 1: uniform WRITEs of the whole region, WINDOW in flight. Every WRITE
 * covers every word, so a scan that sees two values raced a WRITE. The
 * local source starts at a varying misalignment.
 */
static void write_side(struct fab *fab, struct t_target *t)
{
	const struct t_region *r = &t->reg[0];
	const size_t slot = REG + 64;
	uint8_t *src = t_alloc(WINDOW * slot);
	struct fab_mr *mr = t_mr_reg(fab, src, WINDOW * slot, FAB_ACCESS_LOCAL_WRITE);
	struct fab_link *link = t_connect(fab, &t->addr, 1, NULL, 0);
	const uint64_t *pub = (const uint64_t *)(t->mem[0] + PUB);
	bool tcp = strcmp(t_provider(), "tcp") == 0;
	int64_t start = t_now_ms();
	struct t_report rep;
	uint64_t c;

	/* on a loaded machine keep writing (bounded) until the checker raced us */
	for (c = 0;; c++) {
		uint8_t *s = src + (c % WINDOW) * slot + c % 8;
		struct fab_wr wr;

		if (c >= NWRITES && __atomic_load_n(&pub[0], __ATOMIC_RELAXED) >= MINWORDS &&
		    (!tcp || __atomic_load_n(&pub[1], __ATOMIC_RELAXED) >= 10))
			break;
		if (c >= NWRITES && t_now_ms() - start > MAXTIME)
			break;

		if (c >= WINDOW) /* the slot's previous WRITE is complete: reuse it */
			T_EXPECT_WC(fab, c - WINDOW + 1, FAB_OP_WRITE, 0, TMO, NULL);
		memset(s, (int)((c + 1) & 0xff), REG);
		wr = t_wr_rdma(FAB_OP_WRITE, c + 1, FAB_WR_SIGNALED, s, REG, mr->lkey, r->addr,
		               r->rkey);
		T_ASSERT_OK(fab_post(link, &wr, 1));
	}
	for (uint64_t k = c - WINDOW; k < c; k++)
		T_EXPECT_WC(fab, k + 1, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_NONE(fab, 20);
	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(mr));
	t_free(src, WINDOW * slot);

	t_target_quit(t, &rep);
	printf("write side: %llu WRITEs in %lld ms; target checked %lld words, %lld torn, %lld "
	       "scans saw a WRITE in progress\n",
	       (unsigned long long)c, (long long)(t_now_ms() - start), (long long)rep.v[0],
	       (long long)rep.v[1], (long long)rep.v[2]);
	if (rep.status != 0 || rep.v[1] != 0)
		T_FAIL("torn word at the target: %s", rep.msg);
	T_ASSERT(rep.v[0] >= MINWORDS); /* non-vacuous: the reader really ran */
	/* the slow knob of tcp makes every WRITE observable while it lands */
	if (tcp)
		T_ASSERT(rep.v[2] >= 10);
}

/* part 2: READs of random aligned ranges while the target stores */
static void read_side(struct fab *fab, struct t_target *t)
{
	const struct t_region *r = &t->reg[0];
	uint64_t *dst = t_alloc(REG);
	struct fab_mr *mr = t_mr_reg(fab, dst, REG, FAB_ACCESS_LOCAL_WRITE);
	struct fab_link *link = t_connect(fab, &t->addr, 2, NULL, 0);
	int64_t words = 0, mixed = 0;
	uint64_t rng = 11;
	struct t_report rep;

	int64_t start = t_now_ms();
	unsigned i;

	/* on a loaded machine keep reading (bounded) until a READ raced a sweep */
	for (i = 0; i < NREADS || (mixed == 0 && t_now_ms() - start < MAXTIME); i++) {
		size_t first = 0, nw = NWORDS;
		bool mix = false;

		if (i % 2 == 1) {
			first = t_rand(&rng) % NWORDS;
			nw = 1 + t_rand(&rng) % (NWORDS - first);
		}
		memset(dst, 0x5a, nw * 8); /* 0x5a5a.. is uniform: 0x12 breaks it */
		((uint8_t *)dst)[3] = 0x12;
		T_ASSERT_EQ(t_run(link, &(struct fab_wr){.wrid = i + 1,
		                                         .opcode = FAB_OP_READ,
		                                         .local = dst,
		                                         .len = (uint32_t)(nw * 8),
		                                         .lkey = mr->lkey,
		                                         .remote_addr = r->addr + first * 8,
		                                         .rkey = r->rkey}),
		            0);
		for (size_t k = 0; k < nw; k++) {
			if (!uniform(dst[k]))
				T_FAIL("READ %u returned torn word %zu: 0x%016llx", i, first + k,
				       (unsigned long long)dst[k]);
			mix |= dst[k] != dst[0];
		}
		words += (int64_t)nw;
		mixed += mix;
	}
	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(mr));
	t_free(dst, REG);
	t_target_quit(t, &rep);
	printf("read side: %u READs checked %lld words, %lld READs raced a store sweep; target "
	       "made %lld sweeps\n",
	       i, (long long)words, (long long)mixed, (long long)rep.v[0]);
	T_ASSERT(words >= NREADS * (int64_t)NWORDS / 4);
	T_ASSERT(rep.v[0] > 0);
	T_ASSERT(mixed > 0); /* the READs really ran while the target stored */
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{RLEN, FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE}},
	    .slow_write_ns = "100",
	    .app = load_checker,
	};
	struct t_target wt, rt;
	struct fab *fab;

	t_init("torn-word", 110);
	t_target_spawn(&o, &wt);
	o.slow_write_ns = NULL;
	o.app = storer;
	t_target_spawn(&o, &rt);

	fab = t_fab_open(NULL);
	write_side(fab, &wt);
	read_side(fab, &rt);
	fab_close(fab);
	t_target_free(&wt);
	t_target_free(&rt);
	printf("torn-word: PASS\n");
	return T_EXIT_PASS;
}
