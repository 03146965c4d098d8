/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rop.c -- loco_write(3)'s bound handle: every node WRITEs its id, 100 times through one
 * loco_rhandle_t per peer, into slot me of each peer's region; each node then finds slot i
 * holding i for every node i (its own slot it sets itself).
 */
#include <loco.h>

#include "docex.h"

static loco_channel_t *ch;
static loco_object_t *obj;
static loco_region_t *mem, *buf;
static loco_ack_key_t *ack;

/* fragment -- the page's example, to @peer. */
static int fragment(loco_rref_t peer, uint32_t me)
{
#include "rop.inc"
	return ret;
}

static int run(struct dx *x)
{
	int ret;

	if ((ret = dx_channel(x, "rop", x->nodes, &ch)) ||
	    (ret = loco_object_create(ch, "slots", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "mem", 8 * (x->nodes + 1), LOCO_ACCESS_WRITE, &mem)) ||
	    (ret = loco_region_create(obj, "buf", 8, 0, &buf)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("rop", "setup", ret);
	*(uint64_t *)loco_region_ptr(buf) = x->me;
	((uint64_t *)loco_region_ptr(mem))[x->me] = x->me;
	for (uint32_t n = 1; n <= x->nodes; n++) {
		loco_rref_t peer;

		if (n == x->me)
			continue;
		if ((ret = loco_region_remote(mem, n, &peer)) || (ret = fragment(peer, x->me)))
			return dx_err("rop", "write", ret);
	}
	return 0;
}

static int check(struct dx *x)
{
	return dx_check_slots("rop", loco_region_ptr(mem), x->nodes);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_channel_destroy(ch);
	ch = NULL, obj = NULL, mem = NULL, buf = NULL, ack = NULL;
	return 0;
}

const struct dx_example dx_rop[] = {
    {"rop", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
