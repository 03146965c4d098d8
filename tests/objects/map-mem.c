/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-mem.c -- what a map costs a node, by its role and the member
 * counts, on one node (the others never come: a map's memory is made at
 * create, and what is per peer comes with the first call): a key holder
 * and a client of maps with 8, 32 and 256 key holders, each with 24,
 * 1000 and 3000 clients (3000: more than the rpc's 2048-entry list, so
 * the map gives its rpc no list and checks membership itself), the
 * default sizes (key_max 64, value_max 256, capacity 4096, 1 replica).
 * Prints loco_map_stats' mem_bytes of each, and checks that clients
 * cost a holder nothing but their ids in the member list (4 bytes
 * each): no region, log slice or rpc ring per client (pipes_in 0), and
 * that a client's memory does not grow with the holders but by their
 * ids and log-free tables either.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/map.h>

#define CHECK(c)                                                                                \
	do {                                                                                    \
		if (!(c)) {                                                                     \
			fprintf(stderr, "map-mem: %s:%d: %s failed\n", __FILE__, __LINE__, #c); \
			exit(1);                                                                \
		}                                                                               \
	} while (0)

static uint32_t ids[256 + 3000 + 1];

/* mem -- mem_bytes of a map with @h holders and @c clients, this node holder (@holder) or client */
static uint64_t mem(loco_manager_t *m, uint32_t h, uint32_t c, int holder, uint64_t *pipes_in)
{
	uint32_t me = loco_manager_node_id(m), next = me + 1;
	loco_map_stats_t st;
	loco_channel_t *ch;
	loco_map_cfg_t cfg;
	loco_map_t *map;
	char name[64];

	for (uint32_t i = 0; i < h + c; i++)
		ids[i] = (holder ? i == 0 : i == h) ? me : next++;
	snprintf(name, sizeof(name), "mm-%u-%u-%d", h, c, holder);
	CHECK(loco_channel_create(m, NULL, name, h + c, &ch) == 0);
	loco_map_cfg_default(&cfg, ids, h);
	cfg.clients = ids + h;
	cfg.nclients = c;
	CHECK(loco_map_create(ch, "mm", &cfg, &map) == 0);
	loco_map_stats(map, &st);
	loco_map_destroy(map);
	CHECK(loco_channel_destroy(ch) == 0);
	*pipes_in = st.pipes_in;
	return st.mem_bytes;
}

int main(void)
{
	static const uint32_t hs[] = {8, 32, 256}, cs[] = {24, 1000, 3000};
	loco_manager_t *m;
	loco_map_cfg_t cfg;
	loco_channel_t *ch;
	loco_map_t *map;
	uint32_t too_many[LOCO_MAP_NODES_MAX + 1];

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
	if (loco_init(NULL, &m) != 0) {
		fprintf(stderr, "map-mem: loco_init failed\n");
		return 1;
	}
	printf("%-8s %-8s %14s %14s\n", "holders", "clients", "holder (B)", "client (B)");
	for (unsigned i = 0; i < 3; i++) {
		uint64_t hm[3], cm[3], pin;

		for (unsigned j = 0; j < 3; j++) {
			hm[j] = mem(m, hs[i], cs[j], 1, &pin);
			CHECK(pin == 0);
			cm[j] = mem(m, hs[i], cs[j], 0, &pin);
			CHECK(pin == 0);
			printf("%-8u %-8u %14llu %14llu\n", hs[i], cs[j], (unsigned long long)hm[j],
			       (unsigned long long)cm[j]);
		}
		/* clients: their ids (4 B each in the map's sorted list; up to 2048 in the rpc's
		   list too), nothing else */
		for (unsigned j = 1; j < 3; j++) {
			CHECK(hm[j] - hm[0] <= 8 * (uint64_t)(cs[j] - cs[0]));
			CHECK(cm[j] - cm[0] <= 8 * (uint64_t)(cs[j] - cs[0]));
		}
		CHECK(cm[0] < hm[0]); /* a client has no logs */
	}
	/* the ceiling: 256 holders, no more */
	for (uint32_t i = 0; i <= LOCO_MAP_NODES_MAX; i++)
		too_many[i] = loco_manager_node_id(m) + i;
	CHECK(loco_channel_create(m, NULL, "mm-max", 2, &ch) == 0);
	loco_map_cfg_default(&cfg, too_many, LOCO_MAP_NODES_MAX + 1);
	CHECK(loco_map_create(ch, "mm", &cfg, &map) == -EINVAL);
	CHECK(loco_channel_destroy(ch) == 0);
	loco_fini(m);
	printf("map-mem: a client costs a holder its id; no region, slice or ring at create\n");
	return 0;
}
