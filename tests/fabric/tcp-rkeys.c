/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-rkeys.c -- the tcp provider's remote keys cannot be guessed, and a
 * wrong key only fails the request (DESIGN §3; loco-fabric-tcp(7)).
 *
 * 1. Eight fabrics opened one after the other each register the same
 *    buffer as their first region: the eight rkeys (and lkeys) all differ.
 *    Before step 6 the first region of a program always got key 0x1000.
 * 2. READ and WRITE with random wrong keys on fresh links complete with
 *    -EACCES, and the target's region is unchanged.
 */
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define NFABS 8
#define LEN   4096

int main(void)
{
	uint32_t rkey[NFABS], lkey[NFABS];
	uint8_t *abuf, *bbuf, pattern[LEN];
	uint64_t rng = (uint64_t)t_now_ns() | 1;

	t_init("tcp-rkeys", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("tcp only: the verbs device picks its keys; verbs links are protected by "
		       "admission");
	abuf = t_alloc(LEN);
	bbuf = t_alloc(LEN);

	/* 1. fresh fabrics, same first region */
	for (int i = 0; i < NFABS; i++) {
		struct fab *f = t_fab_open(NULL);
		struct fab_mr *mr = t_mr_reg(f, abuf, LEN, FAB_ACCESS_LOCAL_WRITE);

		rkey[i] = mr->rkey;
		lkey[i] = mr->lkey;
		T_ASSERT_OK(fab_mr_dereg(mr));
		fab_close(f);
		printf("fabric %d: first rkey 0x%08x\n", i, rkey[i]);
		for (int j = 0; j < i; j++)
			if (rkey[j] == rkey[i] || lkey[j] == lkey[i])
				T_FAIL(
				    "fabrics %d and %d gave their first region the same key 0x%x",
				    j, i, rkey[i]);
	}
	printf("first keys of %d fresh fabrics all differ: ok\n", NFABS);

	/* 2. wrong keys fail with -EACCES */
	memset(pattern, 0x3c, LEN);
	memcpy(abuf, pattern, LEN);
	for (int i = 0; i < 4; i++) {
		struct fab *a = t_fab_open(NULL), *b = t_fab_open(NULL);
		struct fab_mr *amr = t_mr_reg(a, abuf, LEN,
		                              FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE |
		                                  FAB_ACCESS_REMOTE_READ);
		struct fab_mr *bmr = t_mr_reg(b, bbuf, LEN, FAB_ACCESS_LOCAL_WRITE);
		struct fab_link *la, *lb;
		uint32_t wrong;

		do
			wrong = (uint32_t)t_rand(&rng);
		while (wrong == amr->rkey);
		t_pair(b, a, 1, 2, &lb, &la);
		memset(bbuf, 0x77, LEN);
		T_ASSERT_ERR(
		    t_run(lb, &(struct fab_wr){.wrid = 1,
		                               .opcode = i & 1 ? FAB_OP_READ : FAB_OP_WRITE,
		                               .local = bbuf,
		                               .len = 64,
		                               .lkey = bmr->lkey,
		                               .remote_addr = (uintptr_t)abuf,
		                               .rkey = wrong}),
		    -EACCES);
		T_ASSERT(t_mem_equal(abuf, pattern, LEN, "target after a wrong key"));
		T_ASSERT_OK(fab_link_close(lb));
		T_ASSERT_OK(fab_link_close(la));
		T_ASSERT_OK(fab_mr_dereg(amr));
		T_ASSERT_OK(fab_mr_dereg(bmr));
		fab_close(a);
		fab_close(b);
	}
	printf("random wrong keys: -EACCES, target unchanged: ok\n");
	t_free(abuf, LEN);
	t_free(bbuf, LEN);
	printf("tcp-rkeys: PASS\n");
	return T_EXIT_PASS;
}
