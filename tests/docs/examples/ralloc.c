/* SPDX-License-Identifier: BSD-2-Clause */
/* ralloc.c -- loco_ralloc(3): use() of EXAMPLE on every node: a block of node 1's heap. */
#include <loco.h>
#include <loco/ralloc.h>

#include "docex.h"

#include "ralloc.inc"

static loco_channel_t *ch;
static loco_ralloc_t *ra;
static loco_object_t *obj;
static loco_region_t *buf;
static loco_ack_key_t *ack;

static int run(struct dx *x)
{
	loco_ralloc_cfg_t cfg = {.heap_len = 1u << 20, .numa_node = -1};
	int ret;

	if ((ret = dx_channel(x, "ralloc", x->nodes, &ch)) ||
	    (ret = loco_ralloc_create(ch, "heap", &cfg, &ra)) ||
	    (ret = loco_object_create(ch, "src", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "buf", 4096, 0, &buf)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("ralloc", "setup", ret);
	return dx_err("ralloc", "use", use(ra, buf, ack));
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	if (obj != NULL)
		loco_object_destroy(obj);
	loco_ralloc_destroy(ra);
	loco_channel_destroy(ch);
	ack = NULL, obj = NULL, buf = NULL, ra = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_ralloc[] = {
    {"ralloc", run, NULL, fini},
    {NULL, NULL, NULL, NULL},
};
