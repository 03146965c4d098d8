/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * line-order.c -- within one 64-byte aligned line a WRITE lands in
 * ascending address order; across lines no order is promised (DESIGN §3).
 *
 * The initiator writes whole lines with a generation g in every word, g
 * increasing: line 0 alone, lines 0-3, or lines 1-2. The target lands
 * writes slowly (LOCO_TCP_SLOW_WRITE). A target thread snapshots lines 3,
 * 2, 1, 0 in that order, each line's words from the last to the first, with
 * acquire loads. If words land in ascending order, a reader that scans a
 * line downwards never finds a word newer than a word it read before it:
 * word[i] >= word[j] for i < j. That is the assertion.
 *
 * The thread also counts lines caught half-written (word 0 newer than word
 * 7) and snapshots where line 3 of a write had landed before a lower line
 * of the same write (lines out of order; only line 3 is compared, because
 * only the four-line writes touch it). On tcp the knob must produce both:
 * that proves the knob works and the reader really raced the writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define REG     4096u
#define NLINES  4
#define NWRITES 6000  /* at least; more until the reader saw what it must (bounded) */
#define MAXTIME 40000 /* ms */
#define PUB     2048u /* the reader publishes its counts here (never written remotely) */
#define WINDOW  8
#define TMO     10000

static int snapshotter(struct t_app *app)
{
	const uint64_t *w = (const uint64_t *)app->base[0];
	uint64_t *pub = (uint64_t *)(app->base[0] + PUB);
	uint64_t deadline = t_now_ns() + 110ull * 1000000000u;
	int64_t snaps = 0, errors = 0, mixed = 0, inversions = 0, live = 0;

	while (!t_app_stopped(app) && t_now_ns() < deadline) {
		uint64_t s[NLINES][8], max3 = 0;
		bool inv = false;

		for (int l = NLINES - 1; l >= 0; l--)
			for (int k = 7; k >= 0; k--)
				s[l][k] = __atomic_load_n(&w[l * 8 + k], __ATOMIC_ACQUIRE);
		for (int k = 0; k < 8; k++)
			max3 = s[NLINES - 1][k] > max3 ? s[NLINES - 1][k] : max3;
		for (int l = 0; l < NLINES; l++) {
			for (int k = 0; k < 7; k++) {
				if (s[l][k] < s[l][k + 1] && errors++ == 0)
					snprintf(
					    app->rep.msg, sizeof(app->rep.msg),
					    "line %d: word %d = %llu read after word %d = %llu", l,
					    k, (unsigned long long)s[l][k], k + 1,
					    (unsigned long long)s[l][k + 1]);
			}
			mixed += s[l][0] != s[l][7];
			/* line 3 (read first) holds generation max3: did line l not yet? */
			for (int k = 0; k < 8 && l < NLINES - 1; k++)
				inv |= s[l][k] < max3;
		}
		inversions += inv;
		live += s[0][0] != 0;
		if (++snaps % 64 == 0) {
			/* read by the initiator through the shared mapping */
			__atomic_store_n(&pub[0], (uint64_t)mixed, __ATOMIC_RELAXED);
			__atomic_store_n(&pub[1], (uint64_t)inversions, __ATOMIC_RELAXED);
		}
	}
	app->rep.v[0] = snaps;
	app->rep.v[1] = errors;
	app->rep.v[2] = mixed;
	app->rep.v[3] = inversions;
	app->rep.v[4] = live;
	return errors != 0;
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{REG, FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE}},
	    .slow_write_ns = "300",
	    .app = snapshotter,
	};
	static const struct {
		unsigned first, n;
	} modes[] = {{0, 1}, {0, 4}, {1, 2}};
	const size_t slot = NLINES * 64;
	struct t_target t;
	struct t_report rep;
	struct fab_link *link;
	struct fab_mr *mr;
	struct fab *fab;
	uint64_t *src, g;
	bool tcp = strcmp(t_provider(), "tcp") == 0;
	int64_t start;

	t_init("line-order", 100);
	t_target_spawn(&o, &t);
	fab = t_fab_open(NULL);
	src = t_alloc(WINDOW * slot);
	mr = t_mr_reg(fab, src, WINDOW * slot, FAB_ACCESS_LOCAL_WRITE);
	link = t_connect(fab, &t.addr, 1, NULL, 0);

	/*
	 * On a loaded machine the reader may not run while writes land: keep
	 * writing (bounded) until it has seen a half-written line and lines out
	 * of order, which the tcp knob must produce.
	 */
	start = t_now_ms();
	for (g = 1;; g++) {
		uint64_t *s = src + ((g - 1) % WINDOW) * (slot / 8);
		const uint64_t *pub = (const uint64_t *)(t.mem[0] + PUB);
		unsigned m = (unsigned)(g % 3);
		struct fab_wr wr;

		if (g > NWRITES && (!tcp || (__atomic_load_n(&pub[0], __ATOMIC_RELAXED) > 0 &&
		                             __atomic_load_n(&pub[1], __ATOMIC_RELAXED) > 0)))
			break;
		if (g > NWRITES && t_now_ms() - start > MAXTIME)
			break;
		if (g > WINDOW) /* the slot's previous WRITE is complete: reuse it */
			T_EXPECT_WC(fab, g - WINDOW, FAB_OP_WRITE, 0, TMO, NULL);
		for (size_t k = 0; k < modes[m].n * 8; k++)
			s[k] = g;
		wr = t_wr_rdma(FAB_OP_WRITE, g, FAB_WR_SIGNALED, s, modes[m].n * 64, mr->lkey,
		               t.reg[0].addr + modes[m].first * 64, t.reg[0].rkey);
		T_ASSERT_OK(fab_post(link, &wr, 1));
	}
	for (uint64_t k = g - WINDOW; k < g; k++)
		T_EXPECT_WC(fab, k, FAB_OP_WRITE, 0, TMO, NULL);
	T_EXPECT_NONE(fab, 20);
	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);

	t_target_quit(&t, &rep);
	printf("line-order: %llu WRITEs in %lld ms\n", (unsigned long long)(g - 1),
	       (long long)(t_now_ms() - start));
	printf("line-order: %lld snapshots (%lld after the first write), %lld descending-order "
	       "violations, %lld half-written lines seen, %lld snapshots with lines out of order\n",
	       (long long)rep.v[0], (long long)rep.v[4], (long long)rep.v[1], (long long)rep.v[2],
	       (long long)rep.v[3]);
	if (rep.status != 0 || rep.v[1] != 0)
		T_FAIL("a line landed out of ascending word order: %s", rep.msg);
	T_ASSERT(rep.v[4] >= 10000); /* non-vacuous: the reader ran while writes landed */
	if (tcp) {
		/* LOCO_TCP_SLOW_WRITE must really expose partial lines and shuffled lines */
		T_ASSERT(rep.v[2] > 0);
		T_ASSERT(rep.v[3] > 0);
	}
	t_target_free(&t);
	t_free(src, WINDOW * slot);
	printf("line-order: PASS\n");
	return T_EXIT_PASS;
}
