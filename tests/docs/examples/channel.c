/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * channel.c -- loco_channel(3): kv_open() of EXAMPLE on every node of the job; once every node
 * has returned from it, each is paired with all the others in "kv/log"; then kv_close().
 */
#include <loco.h>

#include "docex.h"

#include "channel.inc"

static struct kv kv;

static int run(struct dx *x)
{
	return dx_err("channel", "kv_open", kv_open(x->m, x->nodes, &kv));
}

static int check(struct dx *x)
{
	int n = loco_channel_peers(kv.log, NULL, 0);

	return dx_check("channel", n == (int)x->nodes - 1, "%s: %d peers",
	                loco_channel_name(kv.log), n);
}

static int fini(struct dx *x)
{
	(void)x;
	kv_close(&kv);
	kv = (struct kv){0};
	return 0;
}

const struct dx_example dx_channel_ex[] = {
    {"channel", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
