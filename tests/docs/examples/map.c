/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map.c -- loco_map(3): EXAMPLE's fragment on nodes 1, 2 and 3 at once: each puts "ada" and
 * swaps it for "ada lovelace" on the version it read; the last write is one of those swaps.
 */
#include <string.h>

#include <loco.h>
#include <loco/map.h>

#include "docex.h"

#define SEC DX_SEC

static loco_channel_t *ch;
static loco_map_t *map_;

static void fragment(loco_channel_t *ch)
{
#include "map.inc"
	map_ = map;
}

static int run(struct dx *x)
{
	int ret;

	if (x->me > 3)
		return 0;
	if ((ret = dx_channel(x, "map", 3, &ch)))
		return dx_err("map", "setup", ret);
	fragment(ch);
	return dx_check("map", map_ != NULL, "no map");
}

static int check(struct dx *x)
{
	char val[64];
	size_t len = 0;
	uint64_t ver;
	int ret;

	if (x->me > 3)
		return 0;
	ret = loco_map_get(map_, "user:1", 6, val, sizeof(val), &len, &ver, SEC);
	if (ret)
		return dx_err("map", "get", ret);
	return dx_check("map", len == 12 && memcmp(val, "ada lovelace", 12) == 0,
	                "user:1 is '%.*s'", (int)len, val);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_map_destroy(map_);
	loco_channel_destroy(ch);
	map_ = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_map[] = {
    {"map", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
