/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kv.h -- what the KV store's programs share: the cluster file, and the
 * map they all make.
 *
 * Node ids: the key holders are 1 .. holders (the servers started first,
 * and room for servers added later), the client ids holders + 1 ..
 * KV_IDS_MAX (256, the core's member ceiling; the map itself has none for
 * clients). kv-ycsb and the kv command line join the cluster as one of
 * them, the first one no live client holds: an id comes back as a new
 * incarnation once its client left, so clients come and go any number of
 * times, up to KV_IDS_MAX - holders at once.
 * "kv stat" reads the servers' counters through their admin sockets
 * (kv_admin_path()), and the clients' in the cluster file: a GET is the
 * client's own one-sided READ, which no server's CPU sees, so each
 * client adds its map's counts of gets and writes there when it leaves
 * (kv_client_close()).
 *
 * The cluster file (--cluster PATH, mode 0600: it holds the secret) has
 * "secret HEX", "holders N", "replicas R", "value_max B", "capacity N"
 * and one "server ID ADDR" line per server that started; every server
 * adds its line under an flock. "counted gets G writes W clients N": the
 * sums of the clients that left (kv_counts_add(), under the same flock).
 */
#ifndef KV_KV_H
#define KV_KV_H

#include <stddef.h>
#include <stdint.h>

#include <loco.h>
#include <loco/map.h>

#define KV_IDS_MAX 256 /* node ids of a store, servers and clients: the core's member ceiling */
#define KV_SEC     1000000000ll

struct kv_conf {
	uint32_t holders;  /* key-holding ids 1 .. holders */
	uint32_t replicas; /* copies of each key */
	size_t value_max;
	uint32_t capacity; /* slots per holder */
	char secret[130];
	char join[512]; /* the servers' addresses, comma-separated */
	uint32_t nservers;
};

/* kv_map_cfg -- the map configuration of @c (ids arrays filled into @ids). */
void kv_map_cfg(const struct kv_conf *c, loco_map_cfg_t *cfg, uint32_t ids[KV_IDS_MAX]);

/* kv_conf_read -- read the cluster file @path. 0, -errno, -EINVAL (malformed). */
int kv_conf_read(const char *path, struct kv_conf *c);

/* kv_conf_add_server -- add (or replace) server @id at @addr to @path, writing @c's settings. */
int kv_conf_add_server(const char *path, const struct kv_conf *c, uint32_t id, const char *addr);

/*
 * kv_client_open -- join the cluster of @path as a client and make the map:
 * tries the client ids in turn (one a live client holds is refused and
 * skipped). 0 and the handles; -errno (-EADDRINUSE: every client id is
 * held by a live client).
 */
int kv_client_open(const char *path, struct kv_conf *c, loco_manager_t **m, loco_channel_t **ch,
                   loco_map_t **map);

/* kv_admin_path -- server @id's admin socket: "@path.s@id" (a unix socket, mode 0600). */
void kv_admin_path(const char *path, uint32_t id, char *buf, size_t len);

/* kv_server_ids -- the ids of the servers in @path (up to @max); their count, or -errno. */
int kv_server_ids(const char *path, uint32_t *ids, int max);

/*
 * kv_client_close -- leave: add this client's gets and writes (its map's
 * counters) to the cluster file @path (kv_counts_add()), then destroy map,
 * channel, manager.
 */
void kv_client_close(const char *path, loco_manager_t *m, loco_channel_t *ch, loco_map_t *map);

/* kv_counts_add -- add @gets and @writes of one client that left to @path's counts. 0 or -errno. */
int kv_counts_add(const char *path, uint64_t gets, uint64_t writes);

/* kv_counts_read -- the clients' counts in @path (all 0 when none left yet). 0 or -errno. */
int kv_counts_read(const char *path, uint64_t *gets, uint64_t *writes, uint64_t *clients);

/*
 * kv_fabrics -- the fabric of this node's link to each key holder that is
 * up (loco_manager_member_fabric()): into @names their names ("shm", or "shm+tcp"
 * when they differ; "none" without a link) and into @detail "shm to
 * nodes 1,2,3,4". Their count of links.
 */
int kv_fabrics(loco_manager_t *m, uint32_t holders, char *names, size_t nlen, char *detail,
               size_t dlen);

/* kv_fabric_why -- why those fabrics: what LOCO_FABRIC says (a static string). */
const char *kv_fabric_why(void);

#endif
