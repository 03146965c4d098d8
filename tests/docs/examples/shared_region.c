/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shared_region.c -- loco_shared_region(3): exchange_ids() of EXAMPLE on a region made as its
 * comment says; each node's copy must then hold every peer's id in the peer's slot.
 */
#include <loco.h>
#include <loco/shared_region.h>

#include "docex.h"

#include "shared_region.inc"

static loco_channel_t *ch;
static loco_shared_region_t *sr;
static loco_ack_key_t *ack;

static int run(struct dx *x)
{
	uint64_t *slot;
	uint32_t peers[64];
	int ret, n;

	if ((ret = dx_channel(x, "shared_region", x->nodes, &ch)) ||
	    (ret = loco_shared_region_create(ch, "ids", 64 * SLOT,
	                                     LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &sr)) ||
	    (ret = loco_ack_key_create(x->m, &ack)))
		return dx_err("shared_region", "setup", ret);
	slot = loco_shared_region_ptr(sr);
	slot[x->me] = x->me;
	if ((ret = dx_join(ch)) || (ret = exchange_ids(ch, sr, x->me, ack)))
		return dx_err("shared_region", "exchange_ids", ret);
	n = loco_channel_peers(ch, peers, 64);
	ret = dx_check("shared_region", n == (int)x->nodes - 1, "%d peers", n);
	for (int i = 0; i < n && i < 64 && ret == 0; i++)
		ret = dx_check("shared_region", slot[peers[i]] == peers[i], "slot %u holds %llu",
		               peers[i], (unsigned long long)slot[peers[i]]);
	return ret;
}

/* every node's writes into the others' copies have landed: its wait returned */
static int check(struct dx *x)
{
	return dx_check_slots("shared_region", loco_shared_region_ptr(sr), x->nodes);
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

const struct dx_example dx_shared_region[] = {
    {"shared_region", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
