/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * atomics.c -- fabric atomics are atomic with respect to each other on the
 * same word (DESIGN §3).
 *
 * Three initiator processes, each with its own fab and link, hit words of
 * a fourth (target) process at the same time: K FAA(+1) on word A (up to
 * 16 in flight), K CAS-increment loops on word B, and on word C an
 * alternation of FAA(+1) and CAS increments. Every increment moves its word
 * from v to v + 1 exactly once, so the old values the successful operations
 * returned, over all processes, must be exactly 0 .. 3K-1 on each word, and
 * each word must end at 3K.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define NPROC  3
#define K      2000
#define WINDOW 16
#define REG    4096u
#define WA     0 /* byte offsets of the three words, on separate lines */
#define WB     64
#define WC     128
#define TMO    10000

struct result {
	uint64_t faa_old[K]; /* word A */
	uint64_t cas_old[K]; /* word B: compare value of each successful CAS */
	uint64_t mix_old[K]; /* word C: FAA old values and successful CAS values */
	uint64_t cas_tries;  /* CAS attempts on B and C */
};

struct iarg {
	struct t_target *t;
	int id;
};

static uint64_t wrid;

static uint64_t one_cas(struct fab_link *link, uint64_t *res, uint32_t lkey,
                        const struct t_region *r, uint64_t off, uint64_t cmp, uint64_t swap)
{
	struct fab_wr wr = t_wr_cas(++wrid, 0, res, lkey, r->addr + off, r->rkey, cmp, swap);

	T_ASSERT_EQ(t_run(link, &wr), 0);
	return *res;
}

static uint64_t one_faa(struct fab_link *link, uint64_t *res, uint32_t lkey,
                        const struct t_region *r, uint64_t off)
{
	struct fab_wr wr = t_wr_faa(++wrid, 0, res, lkey, r->addr + off, r->rkey, 1);

	T_ASSERT_EQ(t_run(link, &wr), 0);
	return *res;
}

/* cas_increment -- one increment of the word at @off by CAS; returns the value it replaced */
static uint64_t cas_increment(struct fab_link *link, uint64_t *res, uint32_t lkey,
                              const struct t_region *r, uint64_t off, uint64_t *guess,
                              uint64_t *tries)
{
	for (unsigned n = 0; n < 100000; n++) {
		uint64_t v = *guess, old = one_cas(link, res, lkey, r, off, v, v + 1);

		++*tries;
		if (old == v) {
			*guess = v + 1;
			return v;
		}
		*guess = old;
	}
	T_FAIL("100000 CAS attempts without success");
}

static int initiator(struct t_chan *ch, void *arg)
{
	const struct iarg *a = arg;
	const struct t_region *r = &a->t->reg[0];
	struct result *res = calloc(1, sizeof(*res));
	uint64_t *buf = t_alloc(4096), guess_b = 0, guess_c = 0;
	struct fab *fab = t_fab_open(NULL);
	struct fab_mr *mr = t_mr_reg(fab, buf, 4096, FAB_ACCESS_LOCAL_WRITE);
	struct fab_link *link = t_connect(fab, &a->t->addr, (uint64_t)a->id, NULL, 0);

	T_ASSERT(res != NULL);
	t_send_u64(ch, 1);                     /* ready */
	T_ASSERT_EQ(t_recv_u64(ch, 30000), 2); /* go */

	/* word A: FAA +1, WINDOW in flight, each with its own result slot */
	for (uint64_t i = 0; i < K + WINDOW; i++) {
		struct fab_wr wr;

		if (i >= WINDOW) {
			T_EXPECT_WC(fab, 1000000 + i - WINDOW, FAB_OP_FAA, 0, TMO, NULL);
			res->faa_old[i - WINDOW] = buf[(i - WINDOW) % WINDOW];
		}
		if (i >= K)
			continue;
		buf[i % WINDOW] = UINT64_MAX;
		wr = t_wr_faa(1000000 + i, FAB_WR_SIGNALED, &buf[i % WINDOW], mr->lkey,
		              r->addr + WA, r->rkey, 1);
		T_ASSERT_OK(fab_post(link, &wr, 1));
	}
	/* word B: CAS increments */
	for (unsigned i = 0; i < K; i++)
		res->cas_old[i] =
		    cas_increment(link, &buf[WINDOW], mr->lkey, r, WB, &guess_b, &res->cas_tries);
	/* word C: FAA and CAS increments on the same word */
	for (unsigned i = 0; i < K; i++) {
		if (i % 2 == 0)
			res->mix_old[i] = one_faa(link, &buf[WINDOW], mr->lkey, r, WC);
		else
			res->mix_old[i] = cas_increment(link, &buf[WINDOW], mr->lkey, r, WC,
			                                &guess_c, &res->cas_tries);
	}
	T_EXPECT_NONE(fab, 20);
	t_send(ch, res, sizeof(*res));

	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);
	free(res);
	return T_EXIT_PASS;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* check_all -- @v (NPROC * K values) must be a permutation of 0 .. NPROC*K-1 */
static void check_all(uint64_t *v, const char *what)
{
	qsort(v, NPROC * K, sizeof(*v), cmp_u64);
	for (uint64_t i = 0; i < NPROC * K; i++) {
		if (v[i] != i)
			T_FAIL("%s: sorted old values differ from 0..%d at index %llu: %llu "
			       "(an increment was lost or duplicated)",
			       what, NPROC * K - 1, (unsigned long long)i,
			       (unsigned long long)v[i]);
	}
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{REG,
	             FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC}},
	};
	static uint64_t faa[NPROC * K], cas[NPROC * K], mix[NPROC * K];
	static struct result res;
	uint8_t *want = calloc(1, REG);
	struct iarg args[NPROC];
	struct t_chan ch[NPROC];
	pid_t pid[NPROC];
	uint64_t tries = 0, total = NPROC * K;
	struct t_target t;
	int64_t diff;

	T_ASSERT(want != NULL);
	t_init("atomics", 100);
	t_target_spawn(&o, &t);
	for (int i = 0; i < NPROC; i++) {
		args[i] = (struct iarg){.t = &t, .id = i + 1};
		pid[i] = t_spawn(initiator, &args[i], &ch[i]);
	}
	for (int i = 0; i < NPROC; i++)
		T_ASSERT_EQ(t_recv_u64(&ch[i], 30000), 1);
	for (int i = 0; i < NPROC; i++)
		t_send_u64(&ch[i], 2);
	for (int i = 0; i < NPROC; i++) {
		t_recv(&ch[i], &res, sizeof(res), 60000);
		memcpy(faa + i * K, res.faa_old, sizeof(res.faa_old));
		memcpy(cas + i * K, res.cas_old, sizeof(res.cas_old));
		memcpy(mix + i * K, res.mix_old, sizeof(res.mix_old));
		tries += res.cas_tries;
		T_ASSERT_EQ(t_reap(pid[i], 10000), 0);
		t_chan_close(&ch[i]);
	}
	printf("atomics: %d processes x %d increments per word; %llu CAS attempts for %llu "
	       "CAS increments (%llu lost races)\n",
	       NPROC, K, (unsigned long long)tries, (unsigned long long)(total * 3 / 2),
	       (unsigned long long)(tries - total * 3 / 2));
	check_all(faa, "FAA on word A");
	check_all(cas, "CAS on word B");
	check_all(mix, "FAA and CAS on word C");

	/* the totals, as the target sees them in its own memory */
	memcpy(want + WA, &total, 8);
	memcpy(want + WB, &total, 8);
	memcpy(want + WC, &total, 8);
	diff = t_target_check(&t, 0, 0, want, REG);
	if (diff >= 0)
		T_FAIL(
		    "target memory differs at offset %lld: A %llu, B %llu, C %llu, expected %llu",
		    (long long)diff, (unsigned long long)*(uint64_t *)(t.mem[0] + WA),
		    (unsigned long long)*(uint64_t *)(t.mem[0] + WB),
		    (unsigned long long)*(uint64_t *)(t.mem[0] + WC), (unsigned long long)total);
	t_target_quit(&t, NULL);
	t_target_free(&t);
	free(want);
	printf("atomics: PASS\n");
	return T_EXIT_PASS;
}
