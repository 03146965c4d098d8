/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map_impl.h -- the map's state and what its files share (objects/ only):
 * map.c has the API, GET and the writes' callers; map_core.c placement,
 * the slots, the logs and the owner's side of a write; map_move.c the
 * server and copy threads, joins and leaves. The design is in map.c.
 *
 * Thread safety: as loco/map.h; @lock guards the table's writes and @meta.
 */
#ifndef LOCO_OBJECTS_MAP_IMPL_H
#define LOCO_OBJECTS_MAP_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loco.h>
#include <loco/map.h>
#include <loco/rpc.h>

#include "obj_hash.h"
#include "obj_util.h"

/* a set of key holders by cfg.nodes index (bits up to LOCO_MAP_NODES_MAX); each word atomic */
#define MAP_SET_WORDS (LOCO_MAP_NODES_MAX / 64u)
typedef struct map_set {
	uint64_t w[MAP_SET_WORDS];
} map_set_t;

#define MAP_RPC_LIST_MAX 2048u /* members listed to the rpc endpoint; more: any (NULL) */
#define MAP_LOG_TOTAL    (2u * 1024u * 1024u) /* a holder's inbound logs: about this, at most */
#define MAP_PEERS_BUF    4096u                /* ids of a channel's peers one scan takes */

#define MAP_READERS      32u /* GETs in flight at once (landing buffers) */
#define MAP_HDR          32u
#define MAP_DEL          0x80000000u /* vlen flag: a tombstone */
#define MAP_HIDE         0x40000000u /* vlen flag: held, not owned here: readers do not take it */
#define MAP_LEN          0x3fffffffu
#define INFO_ACTIVE      1 /* info word: this node serves its keys */
#define INFO_JOINING     2 /* info word: this node waits for the copies of its keys */
#define INFO_LEAVING     3 /* info word: this node handed its keys over */
#define MAP_NOT_OWNER    1 /* op handler status: the callee does not own the key (retry) */
#define MAP_BUSY         2 /* op handler status: a write of the key is under way (retry) */
#define MAP_FWD_NS       (30ll * 1000000000ll)
#define MAP_SETTLE_NS    (100ll * 1000000ll) /* a change of the masks is copied for this late */
#define MAP_WRITERS      16u /* owner writes in flight at once (staging buffers, ack keys) */
#define MAP_TGT_MAX      (2u * LOCO_MAP_REPLICAS_MAX) /* targets of one write (map_targets) */
#define MAP_LOG_RECS     256u              /* records of one inbound log slice (a ring), at most */
#define MAP_LOG_RECS_MIN 16u               /* ... at least */
#define MAP_LOG_BYTES    (256u * 1024u)    /* ... and about this many bytes between the two */
#define MAP_POLL_NS      (500ll * 1000ll)  /* the poller that takes the records: its period */
#define MAP_MSG_DRAIN    1                 /* object message: take your records (map_on_msg) */
#define MAP_KICK_NS      (1000ll * 1000ll) /* a writer short of room kicks again this often */
#define MAP_BUSY_NS \
	(5ll * 1000000ll) /* the server thread waits by the policy this long after a call */
#define MAP_NAP_NS  (50ll * 1000ll) /* ... then naps this long, doubling up to 1 ms */
#define MAP_LOG_CTL 64u  /* a slice's control line: the next sequence number its holder takes */
#define INFO_STATE  3ull /* info word: the state (INFO_*); above it, the absorbed set's hash */
#define INFO_SHIFT  2    /* ... which takes the word's other 62 bits */

enum {
	OP_PUT = 1,
	OP_DEL = 2,
	OP_CAS = 3
};

struct slot_hdr {
	uint64_t seq;
	uint64_t sum;
	uint64_t ver;
	uint32_t klen;
	uint32_t vlen; /* | MAP_DEL */
};

/* a call's payload: op (map.op) or a forwarded write (map.rep), then key, then value */
struct op_msg {
	uint8_t op;
	uint8_t del;
	uint16_t klen;
	uint32_t vlen;
	uint64_t ver; /* op: the expected version (cas); rep: the version */
};

/* this node's log at another key holder (by nodes[] index): the owner's side of a slice */
struct log_out {
	pthread_mutex_t lock; /* @tail, @head */
	uint64_t tail;        /* the next sequence number to write there */
	uint64_t head;        /* the holder's next one to take, as last read */
	int sync;             /* atomic: read the holder's head before the next write (its new
	                         incarnation, a failed WRITE): @tail starts again from it */
};

struct slot_meta {
	uint8_t busy; /* an owner's write of this slot's key is under way */
};

struct loco_map {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *tab, *scr;
	loco_region_t *log; /* key holders: the inbound logs, one slice per holder (map.c) */
	loco_rpc_ep_t *ep;
	uint32_t op_id, rep_id;
	uint32_t me;
	uint32_t *nodes;   /* cfg.nodes, in its order (an index names a holder's bit and slice) */
	uint64_t *nsorted; /* id << 32 | index, ascending: map_node_index's binary search */
	uint32_t nnodes;
	size_t key_max, key_area, value_max, slot_len, group_len;
	uint32_t nslots, ngroups, R;
	uint32_t *all; /* every member, holders and clients, ascending (map_member) */
	uint32_t nall;
	uint32_t *cpeers; /* the copy thread's scans of the channel's peers (MAP_PEERS_BUF) */
	uint32_t act_id, done_id, bye_id;
	loco_region_t *info;  /* this node's INFO_* word, read by the others */
	loco_ack_key_t *cack; /* the copy thread's reads of the others' info words */
	map_set_t present;    /* atomic words: bit i = nodes[i] is paired (P) */
	map_set_t active;     /* atomic words: bit i = nodes[i] serves its keys (A, subset of P) */
	map_set_t done_from;  /* atomic words (a joiner): the holders that copied their keys here */
	map_set_t pushed;     /* atomic words: the joiners this node copied its keys to */
	map_set_t byed;       /* atomic words: the holders that left gracefully (map.bye) */
	int joining;          /* atomic: this node waits for its copies (cfg.join) */
	int leaving;          /* atomic: loco_map_leave() ran: no key is this node's */
	int may_act;          /* atomic: loco_map_sync() ran: a joiner may start serving */
	uint64_t epoch;       /* atomic: grows with every change of @present */
	pthread_mutex_t lock; /* writes to the table, @meta */
	struct slot_meta *meta;
	loco_ack_key_t *acks[MAP_READERS];
	uint32_t rbusy; /* atomic: readers taken */
	/* the logs (map_core.c): the replicas' side under @lock, the owners' in @out */
	size_t rec_len, slice_len, stg_off,
	    wstride;         /* stg_off: staging in "scr", wstride a writer's */
	uint64_t *in_head;   /* under lock: the next record to take from holder i (nnodes) */
	struct log_out *out; /* nnodes */
	loco_ack_key_t *wacks[MAP_WRITERS];
	uint32_t wbusy;        /* atomic: writers taken */
	uint8_t *dbuf;         /* under lock: a record being taken, copied out of the log */
	loco_poller_t *poller; /* takes the records (key holders) */
	uint32_t log_recs;     /* records of a slice */
	uint64_t agen;         /* atomic: grows with every change of @active (map_absorb) */
	/* the server thread: runs the rpc endpoint's calls (loco_rpc_progress) */
	pthread_t sthr;
	int sthr_started;
	int sstop; /* atomic */
	/* the copy thread */
	pthread_t thr;
	int thr_started;
	pthread_mutex_t tlock;
	pthread_cond_t tcond;
	int stop;
	uint8_t *cbuf; /* the copy thread's message */
	/* counters (atomic) */
	uint64_t gets, get_reads, get_retries, writes, redirects, applied, resync;
	uint64_t log_taken,
	    log_bad;       /* records applied from the logs; taken ones that failed (no room) */
	size_t heap_bytes; /* what create allocated besides the regions and the rpc endpoint */
};

/* what a copy of a slot holds (map_slot_check()) */
enum {
	SLOT_EMPTY,
	SLOT_VALID,
	SLOT_TORN
};

/* map_core.c */
uint64_t map_key_hash(const void *key, size_t klen);
unsigned map_rank(const loco_map_t *map, uint64_t kh, const map_set_t *s, uint32_t *out,
                  unsigned max);
int map_node_index(const loco_map_t *map, uint32_t node);
int map_member(const loco_map_t *map, uint32_t node);
void map_set_load(const map_set_t *m, map_set_t *out);
int map_set_has(const map_set_t *s, int i);
int map_set_test(const map_set_t *m, int i);
int map_set_subset(const map_set_t *a, const map_set_t *b);
int map_set_empty(const map_set_t *s);
uint64_t map_set_hash(const map_set_t *s);
uint32_t map_owner_of(const loco_map_t *map, uint64_t kh);
int map_owns(const loco_map_t *map, uint64_t kh);
unsigned map_targets(const loco_map_t *map, uint64_t kh, uint32_t *out, uint32_t *owner);
uint8_t *map_slot_ptr(const loco_map_t *map, uint8_t *base, uint32_t i);
int map_slot_check(const loco_map_t *map, const uint8_t *s);
int map_slot_show(loco_map_t *map, uint32_t i, int on);
uint64_t map_slot_key_hash(const loco_map_t *map, uint32_t i);
size_t map_msg_build(uint8_t *buf, int op, int del, uint64_t ver, const void *key, size_t klen,
                     const void *val, size_t vlen);
int map_forward(loco_map_t *map, const uint32_t *reps, unsigned n, const void *msg, size_t len);
int map_rec_check(const loco_map_t *map, const uint8_t *r, uint64_t seq);
size_t map_rec_build(const loco_map_t *map, uint8_t *r, uint64_t seq, uint64_t ver, int del,
                     const void *key, size_t klen, const void *val, size_t vlen);
unsigned map_drain(loco_map_t *map);
void map_absorb(loco_map_t *map);
void map_absorbed(loco_map_t *map);
void map_info_set(loco_map_t *map, uint64_t st, uint64_t hash);
int map_published(uint64_t w, const map_set_t *a);
int map_poll(void *arg);
void map_on_msg(loco_object_t *obj, uint32_t from, const void *msg, size_t len, void *arg);
void map_log_resync(loco_map_t *map, uint32_t node);
int map_owner_op(loco_map_t *map, int op, uint64_t kh, const void *key, size_t klen,
                 uint64_t expect, const void *val, size_t vlen, uint64_t *ver);
int map_h_op(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);
int map_h_rep(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);

/* map_move.c */
void map_wake(loco_map_t *map);
unsigned map_show_owned(loco_map_t *map);
int map_set_bit(loco_map_t *map, map_set_t *m, uint32_t node, int on);
int map_h_done(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);
int map_h_act(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);
int map_h_bye(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);
void *map_copy_thread(void *arg);
void *map_serve_thread(void *arg);
extern const struct loco_object_ops map_ops;

#endif /* LOCO_OBJECTS_MAP_IMPL_H */
