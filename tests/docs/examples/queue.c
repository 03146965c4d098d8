/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * queue.c -- loco_queue(3): EXAMPLE's job list. Every node but node 1 submits a job;
 * once they all have, node 1 runs them and finds one from each.
 */
#include <stdio.h>

#include <loco.h>
#include <loco/queue.h>

#include "docex.h"

#include "queue.inc"

static loco_channel_t *ch;
static loco_queue_t *q;

static int run(struct dx *x)
{
	char text[64];
	int ret;

	if ((ret = dx_channel(x, "queue", x->nodes, &ch)) || (ret = jobs_open(ch, &q)) ||
	    (ret = dx_join(ch)))
		return dx_err("queue", "setup", ret);
	if (x->me == 1)
		return 0;
	snprintf(text, sizeof(text), "from node %u", x->me);
	return dx_err("queue", "job_submit", job_submit(q, text));
}

/* every submit returned: the jobs are in node 1's memory */
static int check(struct dx *x)
{
	int n;

	if (x->me != 1)
		return 0;
	n = jobs_run(q);
	return dx_check("queue", n == (int)x->nodes - 1, "ran %d jobs of %u", n, x->nodes - 1);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_queue_destroy(q);
	loco_channel_destroy(ch);
	q = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_queue[] = {
    {"queue", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
