/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * local-fault.c -- a request whose local buffer lies outside its lkey's
 * region completes with -EFAULT, and only that request is blamed: the
 * requests in flight before it and those after it complete successfully
 * or are flushed (-ECANCELED), never with -EFAULT. The link is then down
 * with -EFAULT as its cause. Also: remote write or atomic access without
 * local write access is refused at registration, on every provider.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define BIG (256u * 1024)

int main(void)
{
	struct fab *a, *b;
	struct fab_link *la, *lb;
	struct fab_mr *mr_a, *mr_b;
	uint8_t *local = t_alloc(BIG + 64), *remote = t_alloc(BIG), *stray = t_alloc(64);
	struct fab_wr wr[4];
	int faults = 0, seen = 0;

	t_init("local-fault", 60);
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	t_pair(a, b, 1, 2, &la, &lb);
	{
		struct fab_mr *bad = NULL;

		T_ASSERT_EQ(fab_mr_reg(b, remote, BIG, FAB_ACCESS_REMOTE_WRITE, &bad), -EINVAL);
		T_ASSERT_EQ(fab_mr_reg(b, remote, BIG, FAB_ACCESS_REMOTE_ATOMIC, &bad), -EINVAL);
		T_ASSERT(bad == NULL);
	}
	mr_a = t_mr_reg(a, local, BIG + 64, FAB_ACCESS_LOCAL_WRITE);
	mr_b = t_mr_reg(b, remote, BIG,
	                FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE);

	/* configure: two big READs in flight, then a WRITE from an unregistered buffer, then more */
	wr[0] = t_wr_rdma(FAB_OP_READ, 10, FAB_WR_SIGNALED, local, BIG, mr_a->lkey,
	                  (uintptr_t)remote, mr_b->rkey);
	wr[1] =
	    t_wr_rdma(FAB_OP_READ, 11, 0, local, BIG, mr_a->lkey, (uintptr_t)remote, mr_b->rkey);
	wr[2] = t_wr_rdma(FAB_OP_WRITE, 12, 0, stray, 8, mr_a->lkey, (uintptr_t)remote, mr_b->rkey);
	wr[3] = t_wr_rdma(FAB_OP_WRITE, 13, FAB_WR_SIGNALED, local + BIG, 8, mr_a->lkey,
	                  (uintptr_t)remote + 8, mr_b->rkey);

	/* run */
	T_ASSERT_OK(fab_post(la, wr, 4));

	/* verify: exactly the stray request carries -EFAULT */
	for (int i = 0; i < 8; i++) {
		struct fab_wc wc;
		char s[128];

		if (t_poll_one(a, &wc, 5000) != 0)
			break;
		seen++;
		if (wc.status == -EFAULT) {
			T_ASSERT_EQ(wc.wrid, 12);
			faults++;
		} else if (wc.status != 0 && wc.status != -ECANCELED) {
			T_FAIL("unexpected completion %s", t_wc_str(&wc, s, sizeof(s)));
		}
		if (wc.wrid == 13)
			break;
	}
	T_ASSERT_EQ(faults, 1);
	T_ASSERT(seen >= 2);
	T_ASSERT_EQ(fab_link_state(la), -EFAULT);

	fab_link_close(la);
	fab_link_close(lb);
	fab_mr_dereg(mr_a);
	fab_mr_dereg(mr_b);
	fab_close(a);
	fab_close(b);
	t_free(local, BIG + 64);
	t_free(remote, BIG);
	t_free(stray, 64);
	return T_EXIT_PASS;
}
