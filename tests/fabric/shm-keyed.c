/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-keyed.c -- shm on keys another fab chose (FAB_ATTR_KEYS_GIVEN,
 * fab_mr_reg_key(): how auto stacks shm beside verbs, whose device picks
 * the keys, lkey and rkey apart).
 *
 * Target B takes four regions whose rkeys all fall on one slot of its
 * published table (they differ above the slot bits), with lkeys unlike
 * the rkeys. Initiator A, a plain shm fab: a WRITE through each rkey
 * lands in its own region and nowhere else, a READ gives it back; after
 * the second region goes, the third and fourth are still found (the probe
 * goes past the hole) and the second's key is refused (-EACCES, target
 * untouched); a key that was never given is refused; the ninth key on
 * one slot does not fit (-ENOSPC: SHM_PROBE entries per slot run); a
 * registration without keys on such a fab is -EINVAL, and lkey != rkey is
 * taken (tcp's own table would refuse it).
 */
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define NREG    4
#define LEN     4096
#define SLOT    0x123u
#define RKEY(i) (SLOT | (0x1000u * (7 + (i))))
#define LKEY(i) (0xa0000u + (i))

int main(void)
{
	struct fab_attr keyed = {.flags = FAB_ATTR_KEYS_GIVEN};
	struct fab *a, *b;
	struct fab_mr *tmr[NREG], *lmr, *extra[8], *bad = NULL;
	struct fab_link *la, *lb;
	uint8_t *tgt[NREG], *loc;
	struct fab_wr wr;
	int nextra = 0;

	t_init("shm-keyed", 60);
	if (strcmp(t_provider(), "shm") != 0)
		t_skip("shm only");
	a = t_fab_open(NULL);
	b = t_fab_open(&keyed);
	loc = t_alloc(LEN);
	lmr = t_mr_reg(a, loc, LEN, FAB_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < NREG; i++) {
		tgt[i] = t_alloc(LEN);
		memset(tgt[i], 0, LEN);
		T_ASSERT_OK(fab_mr_reg_key(b, tgt[i], LEN,
		                           FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ |
		                               FAB_ACCESS_REMOTE_WRITE,
		                           LKEY(i), RKEY(i), &tmr[i]));
		T_ASSERT_EQ(tmr[i]->rkey, RKEY(i));
		T_ASSERT_EQ(tmr[i]->lkey, LKEY(i));
	}
	T_ASSERT_EQ(fab_mr_reg(b, loc, LEN, FAB_ACCESS_LOCAL_WRITE, &bad), -EINVAL);
	T_ASSERT(bad == NULL);
	t_pair(a, b, 1, 2, &la, &lb);

	/* every key reaches its own region, though all share one slot */
	for (int i = 0; i < NREG; i++) {
		memset(loc, 0x10 + i, LEN);
		wr = t_wr_rdma(FAB_OP_WRITE, 1, 0, loc, LEN, lmr->lkey, (uintptr_t)tgt[i], RKEY(i));
		T_ASSERT_OK(t_run(la, &wr));
	}
	for (int i = 0; i < NREG; i++) {
		T_ASSERT_EQ(tgt[i][0], 0x10 + i);
		T_ASSERT_EQ(tgt[i][LEN - 1], 0x10 + i);
		memset(loc, 0, LEN);
		wr = t_wr_rdma(FAB_OP_READ, 2, 0, loc, LEN, lmr->lkey, (uintptr_t)tgt[i], RKEY(i));
		T_ASSERT_OK(t_run(la, &wr));
		T_ASSERT_EQ(loc[LEN / 2], 0x10 + i);
	}
	printf("shm-keyed: %d regions on one slot, each key to its own region: ok\n", NREG);

	/* a hole in the run: the keys after it are still found, its own is refused */
	T_ASSERT_OK(fab_mr_dereg(tmr[1]));
	for (int i = 2; i < NREG; i++) {
		memset(loc, 0x30 + i, LEN);
		wr = t_wr_rdma(FAB_OP_WRITE, 3, 0, loc, LEN, lmr->lkey, (uintptr_t)tgt[i], RKEY(i));
		T_ASSERT_OK(t_run(la, &wr));
		T_ASSERT_EQ(tgt[i][7], 0x30 + i);
	}
	memset(loc, 0x77, LEN);
	wr = t_wr_rdma(FAB_OP_WRITE, 4, 0, loc, LEN, lmr->lkey, (uintptr_t)tgt[1], RKEY(1));
	T_ASSERT_EQ(t_run(la, &wr), -EACCES);
	T_ASSERT_EQ(tgt[1][0], 0x11); /* untouched */
	printf("shm-keyed: past a removed entry the others are found; its key refused: ok\n");
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb)); /* an -EACCES takes the link down (DESIGN 3) */

	/* a key never given, on a fresh link */
	t_pair(a, b, 5, 6, &la, &lb);
	wr = t_wr_rdma(FAB_OP_WRITE, 5, 0, loc, 8, lmr->lkey, (uintptr_t)tgt[0], SLOT | 0x99000u);
	T_ASSERT_EQ(t_run(la, &wr), -EACCES);
	T_ASSERT_EQ(tgt[0][0], 0x10);
	printf("shm-keyed: a key never given is refused: ok\n");

	/* one slot's run holds SHM_PROBE entries: 3 in use, 5 more fit, the next does not */
	for (int i = 0; i < 8; i++) {
		int r = fab_mr_reg_key(
		    b, tgt[0], 64, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ,
		    0xb0000u + (uint32_t)i, SLOT | (0x1000u * (20 + (uint32_t)i)), &extra[nextra]);

		if (r == -ENOSPC)
			break;
		T_ASSERT_OK(r);
		nextra++;
	}
	T_ASSERT_EQ(nextra, 5);
	printf("shm-keyed: %d more keys on the slot fit, the next is -ENOSPC: ok\n", nextra);

	for (int i = 0; i < nextra; i++)
		T_ASSERT_OK(fab_mr_dereg(extra[i]));
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	for (int i = 0; i < NREG; i++) {
		if (i != 1)
			T_ASSERT_OK(fab_mr_dereg(tmr[i]));
		t_free(tgt[i], LEN);
	}
	T_ASSERT_OK(fab_mr_dereg(lmr));
	fab_close(a);
	fab_close(b);
	t_free(loc, LEN);
	printf("shm-keyed: PASS\n");
	return T_EXIT_PASS;
}
