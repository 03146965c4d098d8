/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc.c -- loco_rpc(3): EXAMPLE's handler and calls on nodes 1 and 2: node 1 gets 40 + 2 from
 * node 2, which serves until it has run that call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco.h>
#include <loco/rpc.h>

#include "docex.h"

#define SEC DX_SEC

#include "rpc_handler.inc"

static loco_channel_t *ch;
static loco_rpc_ep_t *ep_;

static uint64_t handled(const loco_rpc_ep_t *ep)
{
	loco_rpc_stats_t st = {0};

	loco_rpc_stats(ep, &st);
	return st.handled;
}

static int fragment(loco_channel_t *ch, uint32_t me)
{
#define done (handled(ep) > 0) /* node 2: once it has run node 1's call */
#include "rpc_calls.inc"
#undef done
	ep_ = ep;
	return me == 1 ? dx_check("rpc", sum == 42, "40 + 2 = %lld", (long long)sum) : 0;
}

static int run(struct dx *x)
{
	int ret;

	if (x->me > 2)
		return 0;
	if ((ret = dx_channel(x, "rpc", 2, &ch)))
		return dx_err("rpc", "setup", ret);
	return fragment(ch, x->me);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_rpc_destroy(ep_);
	loco_channel_destroy(ch);
	ep_ = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_rpc[] = {
    {"rpc", run, NULL, fini},
    {NULL, NULL, NULL, NULL},
};
