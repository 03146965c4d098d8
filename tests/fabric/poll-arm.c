/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * poll-arm.c -- fab_arm() may run while another thread is in fab_poll()
 * (fabric.h): one thread blocks on the wait fd while another polls, as the
 * manager's progress thread and a thread waiting on an ack key do. Every
 * completion is still delivered exactly once, by fab_poll().
 *
 * On verbs, arming also reaps what reached the CQ before the request for
 * notification; done at the same time as a poll, both walked the same
 * link's send queue and lost or doubled completions, so an ack key waited
 * forever (seen as lock-dead-holder-verbs hanging under load).
 *
 * The main thread posts ROUNDS bursts of BURST signaled FAA(1)s on one
 * word of the target and polls until every burst's completions are in;
 * an arming thread calls fab_arm() in a loop meanwhile. Checked: each WRID
 * completes once, with FAB_OP_FAA and status 0, none is missing after a
 * bounded wait, no completion arrives that was not posted; the old values
 * are all distinct and the word ends at ROUNDS x BURST (every FAA ran
 * once).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define ROUNDS 300
#define BURST  48
#define TOTAL  (ROUNDS * BURST)
#define TMO_MS 10000

static struct fab *fab;
static int stop;             /* atomic: the arming thread returns */
static uint64_t arms, armed; /* arming thread's counts (read after join) */

static void *arm_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		int ret = fab_arm(fab);

		if (ret != 0 && ret != -EAGAIN)
			T_FAIL("fab_arm: %s", t_errname(ret));
		arms++;
		armed += ret == 0;
	}
	return NULL;
}

int main(void)
{
	struct t_target_opts o = {
	    .nreg = 1,
	    .reg = {{64, FAB_ACCESS_REMOTE_ATOMIC | FAB_ACCESS_REMOTE_READ}},
	};
	struct t_target t;
	struct fab_link *link;
	struct fab_mr *mr;
	struct fab_wc wc[32];
	struct fab_wr wr[BURST];
	uint64_t *res, want;
	uint8_t *seen;
	pthread_t thr;
	unsigned got_total = 0;

	t_init("poll-arm", 100);
	t_target_spawn(&o, &t);
	fab = t_fab_open(NULL);
	res = t_alloc((size_t)TOTAL * 8);
	seen = calloc(TOTAL, 1);
	T_ASSERT(seen != NULL);
	mr = t_mr_reg(fab, res, (size_t)TOTAL * 8, FAB_ACCESS_LOCAL_WRITE);
	link = t_connect(fab, &t.addr, 1, NULL, 0);
	T_ASSERT_EQ(pthread_create(&thr, NULL, arm_main, NULL), 0);

	for (unsigned r = 0; r < ROUNDS; r++) {
		unsigned got = 0;
		int64_t dl;

		for (unsigned i = 0; i < BURST; i++) {
			unsigned k = r * BURST + i;

			wr[i] = t_wr_faa(k + 1, FAB_WR_SIGNALED, &res[k], mr->lkey, t.reg[0].addr,
			                 t.reg[0].rkey, 1);
		}
		T_ASSERT_OK(fab_post(link, wr, BURST));
		for (dl = t_now_ms() + TMO_MS; got < BURST;) {
			int n = fab_poll(fab, wc, 32);

			if (n < 0)
				T_FAIL("fab_poll: %s", t_errname(n));
			for (int i = 0; i < n; i++) {
				uint64_t k = wc[i].wrid - 1;
				char s[128];

				if (k < (uint64_t)r * BURST || k >= (uint64_t)(r + 1) * BURST)
					T_FAIL("round %u: a completion nobody posted now: %s", r,
					       t_wc_str(&wc[i], s, sizeof(s)));
				if (seen[k]++)
					T_FAIL("round %u: WRID %llu completed twice", r,
					       (unsigned long long)wc[i].wrid);
				if (wc[i].status != 0 || wc[i].opcode != FAB_OP_FAA)
					T_FAIL("round %u: %s", r, t_wc_str(&wc[i], s, sizeof(s)));
				got++;
			}
			if (n == 0 && t_now_ms() > dl)
				T_FAIL("round %u: %u of %u completions after %d ms: the rest were "
				       "lost",
				       r, got, BURST, TMO_MS);
		}
		got_total += got;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	T_ASSERT_EQ(pthread_join(thr, NULL), 0);
	T_EXPECT_NONE(fab, 50);

	/* every FAA ran once: the old values are 0 .. TOTAL - 1, each once */
	memset(seen, 0, TOTAL);
	for (unsigned k = 0; k < TOTAL; k++) {
		if (res[k] >= TOTAL || seen[res[k]]++)
			T_FAIL("FAA %u returned %llu: a duplicate or out of range", k,
			       (unsigned long long)res[k]);
	}
	want = TOTAL;
	T_ASSERT(t_target_check(&t, 0, 0, &want, 8) < 0);
	printf("%u FAAs in bursts of %d, %u completions, each once; %llu fab_arm() calls (%llu "
	       "armed) from another thread meanwhile\n",
	       TOTAL, BURST, got_total, (unsigned long long)arms, (unsigned long long)armed);

	T_ASSERT_OK(fab_link_close(link));
	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);
	t_target_quit(&t, NULL);
	t_target_free(&t);
	t_free(res, (size_t)TOTAL * 8);
	free(seen);
	printf("poll-arm: PASS\n");
	return T_EXIT_PASS;
}
