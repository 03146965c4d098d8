/* SPDX-License-Identifier: BSD-2-Clause */
/* barrier.c -- loco_barrier(3): rounds() of EXAMPLE, 5 rounds on every node. */
#include <loco.h>
#include <loco/barrier.h>

#include "docex.h"

#include "barrier.inc"

static loco_channel_t *ch;
static int worked;

static void work(int round)
{
	worked += round == worked;
}

static int run(struct dx *x)
{
	int ret;

	if ((ret = dx_channel(x, "barrier", x->nodes, &ch)))
		return dx_err("barrier", "setup", ret);
	if ((ret = dx_err("barrier", "rounds", rounds(ch, 5, work))))
		return ret;
	return dx_check("barrier", worked == 5, "%d rounds of work", worked);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_channel_destroy(ch);
	ch = NULL;
	return 0;
}

const struct dx_example dx_barrier[] = {
    {"barrier", run, NULL, fini},
    {NULL, NULL, NULL, NULL},
};
