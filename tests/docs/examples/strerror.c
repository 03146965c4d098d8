/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * strerror.c -- loco_strerror(3): its fragment, on an owned_var that node 1 owns and pushes
 * to the others; the count it returns is no error, and loco_strerror() says so.
 */
#include <stdio.h>
#include <string.h>

#include <loco.h>
#include <loco/owned_var.h>

#include "docex.h"

static loco_channel_t *ch;
static loco_owned_var_t *ov;
static loco_ack_key_t *ack;

static int fragment(struct dx *x)
{
	char want[64];
#include "strerror.inc"
	if (ret < 0)
		return ret;
	snprintf(want, sizeof(want), "not an error code (a count: %d)", ret);
	return dx_check("strerror", ret == (int)x->nodes - 1, "push_broadcast returned %d", ret) ||
	       dx_check("strerror", strcmp(loco_strerror(ret), want) == 0, "loco_strerror(%d): %s",
	                ret, loco_strerror(ret)) ||
	       dx_err("strerror", "loco_ack_wait", loco_ack_wait(ack, 10 * DX_SEC));
}

static int run(struct dx *x)
{
	uint64_t v = 42;
	int ret;

	if ((ret = dx_channel(x, "strerror", x->nodes, &ch)) ||
	    (ret = loco_owned_var_create(ch, "v", 1, sizeof(v), &ov)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("strerror", "setup", ret);
	if (x->me != 1)
		return 0;
	if ((ret = loco_owned_var_store(ov, &v)))
		return dx_err("strerror", "store", ret);
	return fragment(x);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	loco_owned_var_destroy(ov);
	loco_channel_destroy(ch);
	ack = NULL, ov = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_strerror[] = {
    {"strerror", run, NULL, fini},
    {NULL, NULL, NULL, NULL},
};
