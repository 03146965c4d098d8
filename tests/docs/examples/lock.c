/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock.c -- loco_lock(3): locked_increment() of EXAMPLE, 3 times on every node, on a lock
 * and a counter both hosted on node 1: no increment is lost.
 */
#include <loco.h>
#include <loco/atomic_var.h>
#include <loco/lock.h>

#include "docex.h"

#include "lock.inc"

#define TIMES 3

static loco_channel_t *ch;
static loco_lock_t *lk;
static loco_atomic_var_t *ctr;

static int run(struct dx *x)
{
	int ret;

	if ((ret = dx_channel(x, "lock", x->nodes, &ch)) ||
	    (ret = loco_lock_create(ch, "lock", 1, &lk)) ||
	    (ret = loco_atomic_var_create(ch, "ctr", 1, &ctr)) || (ret = dx_join(ch)))
		return dx_err("lock", "setup", ret);
	for (int i = 0; i < TIMES && ret == 0; i++)
		ret = dx_err("lock", "locked_increment", locked_increment(lk, ctr));
	return ret;
}

static int check(struct dx *x)
{
	uint64_t v = 0;
	int ret = dx_err("lock", "read", loco_atomic_var_read(ctr, &v, DX_SEC));

	if (ret == 0)
		ret =
		    dx_check("lock", v == TIMES * x->nodes, "counter %llu", (unsigned long long)v);
	return ret;
}

static int fini(struct dx *x)
{
	(void)x;
	loco_atomic_var_destroy(ctr);
	loco_lock_destroy(lk);
	loco_channel_destroy(ch);
	ctr = NULL, lk = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_lock[] = {
    {"lock", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
