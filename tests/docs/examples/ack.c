/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ack.c -- loco_ack(3): push_all() of EXAMPLE pushes this node's slot of a shared region to
 * every peer; once every node has, each copy holds every node's id.
 */
#include <loco.h>
#include <loco/shared_region.h>

#include "docex.h"

#include "ack.inc"

static loco_channel_t *ch;
static loco_shared_region_t *sr;
static loco_ack_key_t *ack;

static int run(struct dx *x)
{
	uint32_t peers[64];
	uint64_t *slot;
	int ret, n;

	if ((ret = dx_channel(x, "ack", x->nodes, &ch)) ||
	    (ret = loco_shared_region_create(ch, "ids", 64 * sizeof(uint64_t),
	                                     LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &sr)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("ack", "setup", ret);
	slot = loco_shared_region_ptr(sr);
	slot[x->me] = x->me;
	n = loco_channel_peers(ch, peers, 64);
	if ((ret = dx_check("ack", n == (int)x->nodes - 1, "%d peers", n)))
		return ret;
	return dx_err("ack", "push_all",
	              push_all(sr, peers, n, x->me * sizeof(uint64_t), sizeof(uint64_t), ack));
}

/* every node's writes into the others' copies have landed: its wait returned */
static int check(struct dx *x)
{
	return dx_check_slots("ack", loco_shared_region_ptr(sr), x->nodes);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	loco_shared_region_destroy(sr);
	loco_channel_destroy(ch);
	ack = NULL, sr = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_ack[] = {
    {"ack", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
