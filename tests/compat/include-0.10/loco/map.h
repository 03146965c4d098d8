/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/map.h -- a replicated hash map over the nodes of a channel.
 *
 * Keys are spread over the map's key-holding members ("nodes") that are
 * present (paired in the channel now) by rendezvous (highest random
 * weight) hashing: the key's owner is the present node with the highest
 * score, its replicas the next replicas - 1. Each node keeps its keys (the
 * ones it owns and the ones it replicates) in a table of registered
 * memory: groups of slots, each slot {seq, checksum, version, key,
 * value}.
 *
 * loco_map_get() is one RDMA READ of the key's slot group at its owner in
 * the common case, validated by the slot's checksum (XXH3) and its
 * sequence number (odd while the owner writes it): a torn or in-flight
 * slot is read again, never returned. loco_map_put(), loco_map_del() and
 * loco_map_cas() are one call (loco/rpc.h) to the owner, which WRITEs
 * the write into a log at every live replica (one-sided, in parallel)
 * and waits for the completions before it applies the write to its own
 * table and replies: an acknowledged write is on every live replica (in
 * its table or its log, which it takes before it serves the key). When
 * the owner leaves, the first replica holds its keys already and
 * becomes their owner; owners then copy their keys to the replicas the
 * new view asks for, which restores the replica count. Operations are
 * linearizable per key while the set of present nodes stays or shrinks
 * (see loco_map(3): a node joining moves ownership to it before it has
 * the keys).
 *
 * Every member calls loco_map_create() with the same name, members and
 * sizes (agreed when the peers pair).
 *
 * Thread safety: MT-safe, except loco_map_destroy() (no operation may be
 * in progress). Appeared in loco 0.6.
 */
#ifndef LOCO_MAP_H
#define LOCO_MAP_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_map loco_map_t;

#define LOCO_MAP_KEY_MAX      256u  /* largest key_max */
#define LOCO_MAP_VALUE_MAX    4096u /* largest value_max */
#define LOCO_MAP_REPLICAS_MAX 4u    /* largest replica count */
#define LOCO_MAP_GROUP        4u    /* slots of a group: what one GET reads */

/* A map's configuration: 0 in a size field means its default. */
typedef struct loco_map_cfg {
	const uint32_t *nodes; /* members that hold keys, 1 .. LOCO_RPC_NODES_MAX */
	uint32_t nnodes;
	const uint32_t *clients; /* members that only use the map (may be NULL) */
	uint32_t nclients;       /* nnodes + nclients <= LOCO_RPC_NODES_MAX */
	size_t key_max;          /* largest key (64 B) <= LOCO_MAP_KEY_MAX; agreed */
	size_t value_max;        /* largest value (256 B) <= LOCO_MAP_VALUE_MAX; agreed */
	uint32_t capacity; /* slots of each node's table (4096; a multiple of the group); agreed */
	uint32_t replicas; /* copies of each key (1) <= LOCO_MAP_REPLICAS_MAX; agreed */
	int join;          /* 1: this node joins a map in use: it serves once it has its keys */
} loco_map_cfg_t;

/* What the map did on this node, and what its table holds (loco_map_stats()). */
typedef struct loco_map_stats {
	uint64_t gets;        /* loco_map_get() calls */
	uint64_t get_reads;   /* slot groups read from another node */
	uint64_t get_retries; /* reads of a torn, in-flight or unreachable group, done again */
	uint64_t writes;      /* put, del and cas calls */
	uint64_t redirects;   /* writes retried: the callee was not (yet) the owner */
	uint64_t applied;     /* writes applied to this node's table (owned and replicated) */
	uint64_t resync;      /* entries this node copied to replicas after a view change */
	uint64_t owned;       /* entries (deleted ones too) this node owns now */
	uint64_t replicas;    /* entries it holds as one of their replicas now */
	uint64_t stale;       /* entries it holds that are neither */
	uint64_t used;        /* slots in use of its table */
} loco_map_stats_t;

/* loco_map_cfg_default -- a configuration for key-holding members @nodes[0 .. @n). */
void loco_map_cfg_default(loco_map_cfg_t *cfg, const uint32_t *nodes, uint32_t n);

/*
 * loco_map_create -- map @name in @ch (this node among cfg->nodes or
 * cfg->clients): its table, its rpc endpoint and its copy thread. Make
 * it before loco_channel_join(), or wait with loco_map_sync() after.
 * Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOMEM, -ENOSPC (the
 * channel's announced entries), or the fabric's error.
 */
int loco_map_create(loco_channel_t *ch, const char *name, const loco_map_cfg_t *cfg,
                    loco_map_t **out);

/* loco_map_destroy -- stop the map's threads, free it. NULL-safe. */
void loco_map_destroy(loco_map_t *map);

/*
 * loco_map_sync -- wait until every other member made the map and paired.
 * Returns 0; as loco_rpc_sync().
 */
int loco_map_sync(loco_map_t *map, int64_t timeout_ns);

/*
 * loco_map_get -- the value of @key (@klen bytes) into @val (@cap bytes),
 * its length into *@vlen and its version into *@version (both may be
 * NULL). Returns 0; -ENOENT (no such key), -EMSGSIZE (@klen > key_max or
 * 0), -ENOBUFS (the value is longer than @cap), -ETIMEDOUT (no valid
 * read within @timeout_ns, < 0: forever), -EHOSTUNREACH (no key-holding
 * node is present), -EINVAL.
 */
int loco_map_get(loco_map_t *map, const void *key, size_t klen, void *val, size_t cap, size_t *vlen,
                 uint64_t *version, int64_t timeout_ns);

/*
 * loco_map_put -- set @key to the @vlen bytes at @val; the new version
 * into *@version (may be NULL). Returns 0; -EMSGSIZE (key or value too
 * long), -ENOSPC (the owner's table is full: nothing changed; a
 * replica whose table is full keeps the write in no slot and the caller
 * is not told: see loco_map(3)),
 * -ETIMEDOUT,
 * -EHOSTUNREACH, -EINVAL, or the rpc's error (the write may then have
 * happened or not).
 */
int loco_map_put(loco_map_t *map, const void *key, size_t klen, const void *val, size_t vlen,
                 uint64_t *version, int64_t timeout_ns);

/* loco_map_del -- delete @key. Returns 0; -ENOENT (no such key); as loco_map_put(). */
int loco_map_del(loco_map_t *map, const void *key, size_t klen, int64_t timeout_ns);

/*
 * loco_map_cas -- set @key to @val only if its version is @expect (0:
 * only if it does not exist); the new version into *@version. Returns 0;
 * -ECANCELED (the version is another: nothing changed); as loco_map_put().
 */
int loco_map_cas(loco_map_t *map, const void *key, size_t klen, uint64_t expect, const void *val,
                 size_t vlen, uint64_t *version, int64_t timeout_ns);

/*
 * loco_map_leave -- hand this node's keys over before it leaves: no write
 * starts here any more, the ones under way finish, every entry goes to
 * the nodes that hold its key without this one, then this node's table
 * is hidden from readers. Call it before loco_map_destroy() and
 * loco_fini() (a graceful leave); this node's later operations on the
 * map return -ESHUTDOWN. Returns 0; -ETIMEDOUT, -EINVAL, or an rpc error.
 */
int loco_map_leave(loco_map_t *map, int64_t timeout_ns);

/* loco_map_owner -- the node that owns @key in this node's view now (0: none present). */
uint32_t loco_map_owner(loco_map_t *map, const void *key, size_t klen);

/* loco_map_stats -- this node's counters and table census into *@st (scans the table). */
void loco_map_stats(loco_map_t *map, loco_map_stats_t *st);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_MAP_H */
