/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-landed.c -- on shm the target's CPU does nothing for a WRITE, so a
 * core that asked to be told (fab_attr.landed, LOCO_WAIT=block) is told
 * by the target's provider thread, rung by the initiator
 * (loco-fabric-shm(7), "Waiting"):
 *
 * 1. B opens with a landed callback; A WRITEs, then FAAs, into B: after
 *    each, B's callback runs within 5 s (bounded loop), and the data is
 *    there when it runs.
 * 2. A READ alone does not call it (100 ms of quiet after a READ).
 * 3. A fab opened without a callback gets no rings: its provider thread
 *    is not woken by WRITEs (the peer sees want_landed 0).
 */
#include <stdio.h>
#include <string.h>

#include "../../liboco/fabric/shm/shm.h"
#include "helpers.h"

#define LEN 4096

static unsigned calls; /* atomic */
static uint8_t *tgt;
static uint64_t seen; /* atomic: the target's word 0 when the callback last ran */

static void landed(void *arg)
{
	uint64_t v;

	(void)arg;
	memcpy(&v, tgt, 8);
	__atomic_store_n(&seen, v, __ATOMIC_RELEASE);
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELEASE);
}

/* wait_calls -- wait (bounded) until the callback ran more than @n times. */
static bool wait_calls(unsigned n, int ms)
{
	int64_t end = t_now_ms() + ms;

	while (__atomic_load_n(&calls, __ATOMIC_ACQUIRE) <= n && t_now_ms() < end)
		t_sleep_ms(1);
	return __atomic_load_n(&calls, __ATOMIC_ACQUIRE) > n;
}

int main(void)
{
	struct fab_attr battr = {.landed = landed};
	struct fab *a, *b;
	struct fab_mr *tmr, *lmr;
	struct fab_link *la, *lb;
	struct fab_wr wr;
	uint64_t *loc;
	unsigned n;

	t_init("shm-landed", 60);
	if (strcmp(t_provider(), "shm") != 0)
		t_skip("shm only");
	a = t_fab_open(NULL);
	b = t_fab_open(&battr);
	tgt = t_alloc(LEN);
	loc = t_alloc(LEN);
	tmr = t_mr_reg(b, tgt, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE |
	                   FAB_ACCESS_REMOTE_ATOMIC);
	lmr = t_mr_reg(a, loc, LEN, FAB_ACCESS_LOCAL_WRITE);
	t_pair(a, b, 1, 2, &la, &lb);

	/* 1. WRITE, then FAA: the callback runs after each, with the data there */
	n = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
	loc[0] = 41;
	T_ASSERT_OK(t_run(la, &(struct fab_wr){.wrid = 1,
	                                       .opcode = FAB_OP_WRITE,
	                                       .local = loc,
	                                       .len = 8,
	                                       .lkey = lmr->lkey,
	                                       .remote_addr = (uintptr_t)tgt,
	                                       .rkey = tmr->rkey}));
	if (!wait_calls(n, 5000))
		T_FAIL("no landed call within 5 s of a WRITE");
	T_ASSERT_EQ(__atomic_load_n(&seen, __ATOMIC_ACQUIRE), 41);
	n = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
	wr = t_wr_faa(2, 0, loc + 1, lmr->lkey, (uintptr_t)tgt, tmr->rkey, 1);
	T_ASSERT_OK(t_run(la, &wr));
	if (!wait_calls(n, 5000))
		T_FAIL("no landed call within 5 s of a FAA");
	T_ASSERT_EQ(__atomic_load_n(&seen, __ATOMIC_ACQUIRE), 42);
	printf("landed: called after a WRITE and after a FAA, the data there: ok\n");

	/* 2. a READ does not call it */
	t_sleep_ms(100);
	n = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
	wr = t_wr_rdma(FAB_OP_READ, 3, 0, loc + 2, 8, lmr->lkey, (uintptr_t)tgt, tmr->rkey);
	T_ASSERT_OK(t_run(la, &wr));
	if (wait_calls(n, 100))
		T_FAIL("a READ called landed");
	printf("landed: not called after a READ: ok\n");

	/* 3. no callback: nobody is rung (the fab page says so) */
	T_ASSERT_EQ(to_shm_fab(a)->fpage->want_landed, 0);
	T_ASSERT_EQ(to_shm_fab(b)->fpage->want_landed, 1);
	printf("landed: announced only by the fab that asked: ok (%u calls in all)\n",
	       __atomic_load_n(&calls, __ATOMIC_ACQUIRE));

	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(tmr));
	T_ASSERT_OK(fab_mr_dereg(lmr));
	fab_close(a);
	fab_close(b);
	printf("shm-landed: PASS\n");
	return T_EXIT_PASS;
}
