/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * reduce.c -- loco_reduce(3): halfway() of EXAMPLE, 30 rounds on every node: node N starts at
 * 10 N and ends within 1e-6 of the mean.
 */
#include <math.h>

#include <loco.h>
#include <loco/reduce.h>

#include "docex.h"

#include "reduce.inc"

static loco_channel_t *ch;

static int run(struct dx *x)
{
	double v = 10.0 * x->me, mean = 10.0 * (x->nodes + 1) / 2;
	int ret;

	if ((ret = dx_channel(x, "reduce", x->nodes, &ch)))
		return dx_err("reduce", "setup", ret);
	if ((ret = dx_err("reduce", "halfway", halfway(ch, &v, 30))))
		return ret;
	return dx_check("reduce", fabs(v - mean) < 1e-6, "%.9f after 30 rounds, mean %.9f", v,
	                mean);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_channel_destroy(ch);
	ch = NULL;
	return 0;
}

const struct dx_example dx_reduce[] = {
    {"reduce", run, NULL, fini},
    {NULL, NULL, NULL, NULL},
};
