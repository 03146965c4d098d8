/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map.c -- a replicated hash map (loco/map.h), built only on the public
 * object-author API (loco/channel.h) and the rpc object (loco/rpc.h).
 *
 * Every member has an object @name with a region "tab" (capacity slots,
 * remotely readable) and "scr" (local: the landing buffers of GET's
 * READs, one group each), and an rpc endpoint "@name.rpc" with one
 * server thread and two handlers: "map.op" (a client's put/del/cas, run
 * by the key's owner) and "map.rep" (a write forwarded by an owner to a
 * replica, or copied by an owner after a view change).
 *
 * A slot: {seq, sum, ver, klen, vlen | DEL} then key_max (rounded to 8)
 * bytes of key, then the value. seq is odd while a writer changes the
 * slot and grows by 2 per write; sum = XXH3(ver, klen, vlen, key, value)
 * seeded with seq. A reader (a READ over the fabric, or a memcpy on the
 * owner itself) takes a slot whose seq is even and whose sum matches;
 * anything else is torn or in flight and read again. A slot never used
 * is all zero. Slots are never freed: a deleted key stays as a tombstone
 * (DEL set) with its version, so that versions only grow and a copy of
 * an older version never brings a key back; a key's probe sequence
 * (groups g, g + 1, ...) ends at the first empty slot.
 *
 * Writes: @lock serializes the changes of this node's table (the rpc
 * server thread, the copy thread and an application thread that owns the
 * key run them). An owner runs one write of a key at a time: under @lock
 * it checks the key's state in its table (del of a deleted key, cas of
 * another version: it fails there, against the state readers see), marks
 * the slot busy and takes the next version; then it forwards the write to
 * the live replicas and waits, then applies it and clears busy. A write
 * that finds the slot busy is retried by its caller (MAP_BUSY): never
 * waited for inside a handler, whose thread may be the busy write's.
 * So a write visible at the owner is on every live replica, every
 * decision is made on visible state, and a later version always wins
 * everywhere (replicas take a version only if newer).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include <loco.h>
#include <loco/map.h>
#include <loco/rpc.h>

#include "obj_util.h"

#define MAP_READERS   32u /* GETs in flight at once (landing buffers) */
#define MAP_HDR       32u
#define MAP_DEL       0x80000000u /* vlen flag: a tombstone */
#define MAP_HIDE      0x40000000u /* vlen flag: held, not owned here: readers do not take it */
#define MAP_LEN       0x3fffffffu
#define INFO_ACTIVE   1 /* info word: this node serves its keys */
#define INFO_JOINING  2 /* info word: this node waits for the copies of its keys */
#define INFO_LEAVING  3 /* info word: this node handed its keys over */
#define MAP_NOT_OWNER 1 /* op handler status: the callee does not own the key (retry) */
#define MAP_BUSY      2 /* op handler status: a write of the key is under way (retry) */
#define MAP_FWD_NS    (30ll * 1000000000ll)
#define MAP_SETTLE_NS (100ll * 1000000ll) /* a change of the masks is copied for this late */

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

struct slot_meta {
	uint8_t busy; /* an owner's write of this slot's key is under way */
};

struct loco_map {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *tab, *scr;
	loco_rpc_ep_t *ep;
	uint32_t op_id, rep_id;
	uint32_t me;
	uint32_t nodes[LOCO_RPC_NODES_MAX];
	uint32_t nnodes;
	size_t key_max, key_area, value_max, slot_len, group_len;
	uint32_t nslots, ngroups, R;
	uint32_t all[LOCO_RPC_NODES_MAX]; /* nodes, then clients */
	uint32_t nall;
	uint32_t act_id, done_id, bye_id;
	loco_region_t *info;  /* this node's INFO_* word, read by the others */
	loco_ack_key_t *cack; /* the copy thread's reads of the others' info words */
	uint32_t present;     /* atomic: bit i = nodes[i] is paired (P) */
	uint32_t active;      /* atomic: bit i = nodes[i] serves its keys (A, subset of P) */
	uint32_t done_from;   /* atomic (a joiner): the holders that copied their keys here */
	uint32_t pushed;      /* atomic: the joiners this node copied its keys to */
	int joining;          /* atomic: this node waits for its copies (cfg.join) */
	int leaving;          /* atomic: loco_map_leave() ran: no key is this node's */
	int may_act;          /* atomic: loco_map_sync() ran: a joiner may start serving */
	uint64_t epoch;       /* atomic: grows with every change of @present */
	pthread_mutex_t lock; /* writes to the table, @meta */
	struct slot_meta *meta;
	loco_ack_key_t *acks[MAP_READERS];
	uint32_t rbusy; /* atomic: readers taken */
	/* the copy thread */
	pthread_t thr;
	int thr_started;
	pthread_mutex_t tlock;
	pthread_cond_t tcond;
	int stop;
	uint8_t *cbuf; /* the copy thread's message */
	/* counters (atomic) */
	uint64_t gets, get_reads, get_retries, writes, redirects, applied, resync;
};

/* ---- hashing and placement ------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t key_hash(const void *key, size_t klen)
{
	return XXH3_64bits(key, klen);
}

/*
 * rank -- the key-holding nodes of mask @pres by rendezvous score for
 * @kh, best first, up to @max into @out; returns how many.
 */
static unsigned rank(const loco_map_t *map, uint64_t kh, uint32_t pres, uint32_t *out, unsigned max)
{
	uint64_t sc[LOCO_RPC_NODES_MAX];
	uint32_t id[LOCO_RPC_NODES_MAX];
	unsigned n = 0;

	for (uint32_t i = 0; i < map->nnodes; i++) {
		uint64_t s;
		unsigned j;

		if (!(pres & (1u << i)))
			continue;
		s = mix64(kh ^ mix64(map->nodes[i] * 0x9e3779b97f4a7c15ull));
		for (j = n;
		     j > 0 && (sc[j - 1] < s || (sc[j - 1] == s && id[j - 1] > map->nodes[i]));
		     j--) {
			sc[j] = sc[j - 1];
			id[j] = id[j - 1];
		}
		sc[j] = s;
		id[j] = map->nodes[i];
		n++;
	}
	if (n > max)
		n = max;
	memcpy(out, id, n * sizeof(uint32_t));
	return n;
}

static int node_index(const loco_map_t *map, uint32_t node)
{
	for (uint32_t i = 0; i < map->nnodes; i++)
		if (map->nodes[i] == node)
			return (int)i;
	return -1;
}

static uint32_t mask_of(const uint32_t *m)
{
	return __atomic_load_n(m, __ATOMIC_ACQUIRE);
}

/* owner_of -- the owner of @kh among the active nodes, or 0. */
static uint32_t owner_of(const loco_map_t *map, uint64_t kh)
{
	uint32_t top;

	return rank(map, kh, mask_of(&map->active), &top, 1) ? top : 0;
}

/* owns -- whether this node serves @kh now: active, not leaving, and first among the active. */
static int owns(const loco_map_t *map, uint64_t kh)
{
	return !__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE) && owner_of(map, kh) == map->me;
}

/*
 * targets -- where this node, owning @kh, sends its writes: the other
 * nodes among the first `replicas` of the active nodes and of the paired
 * ones (a joiner gets the writes of the keys it will hold before it
 * serves). Returns how many, into @out.
 */
static unsigned targets(const loco_map_t *map, uint64_t kh, uint32_t *out)
{
	uint32_t a[LOCO_MAP_REPLICAS_MAX], p[LOCO_MAP_REPLICAS_MAX];
	unsigned na = rank(map, kh, mask_of(&map->active), a, map->R);
	unsigned np = rank(map, kh, mask_of(&map->present), p, map->R), n = 0;

	for (unsigned i = 0; i < na + np; i++) {
		uint32_t id = i < na ? a[i] : p[i - na];
		unsigned j;

		if (id == map->me)
			continue;
		for (j = 0; j < n && out[j] != id; j++)
			;
		if (j == n)
			out[n++] = id;
	}
	return n;
}

/* ---- slots ---------------------------------------------------------------- */

static uint8_t *slot_ptr(const loco_map_t *map, uint8_t *base, uint32_t i)
{
	return base + (size_t)i * map->slot_len;
}

static uint64_t slot_sum(const loco_map_t *map, const uint8_t *s, uint64_t seq)
{
	const struct slot_hdr *h = (const void *)s;
	uint64_t x = XXH3_64bits_withSeed(&h->ver, 16 + h->klen, seq);

	return XXH3_64bits_withSeed(s + MAP_HDR + map->key_area, h->vlen & MAP_LEN, x);
}

enum {
	SLOT_EMPTY,
	SLOT_VALID,
	SLOT_TORN
};

/* slot_check -- what a copy of a slot (in a buffer no one writes) holds. */
static int slot_check(const loco_map_t *map, const uint8_t *s)
{
	struct slot_hdr h;

	memcpy(&h, s, sizeof(h));
	if (h.seq == 0)
		return (h.sum | h.ver | h.klen | h.vlen) == 0 ? SLOT_EMPTY : SLOT_TORN;
	if ((h.seq & 1) || h.klen == 0 || h.klen > map->key_max ||
	    (h.vlen & MAP_LEN) > map->value_max)
		return SLOT_TORN;
	return slot_sum(map, s, h.seq) == h.sum ? SLOT_VALID : SLOT_TORN;
}

/*
 * slot_write -- under lock: slot @s holds @key at version @ver (@del: a
 * tombstone) with value @val; seq odd meanwhile.
 */
static void slot_write(const loco_map_t *map, uint8_t *s, uint64_t ver, int del, const void *key,
                       size_t klen, const void *val, size_t vlen, int readable)
{
	struct slot_hdr *h = (void *)s;
	uint64_t seq = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&h->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	h->ver = ver;
	h->klen = (uint32_t)klen;
	h->vlen = (uint32_t)vlen | (del ? MAP_DEL : 0) | (readable ? 0 : MAP_HIDE);
	memmove(s + MAP_HDR, key, klen);
	if (vlen)
		memmove(s + MAP_HDR + map->key_area, val, vlen);
	h->sum = slot_sum(map, s, seq + 2);
	__atomic_store_n(&h->seq, seq + 2, __ATOMIC_RELEASE);
}

/*
 * slot_find -- under lock: the slot of @key in this node's table, or with
 * @make the first empty slot of its probe sequence (filled with a
 * version-0 tombstone of @key); -ENOENT, -ENOSPC.
 */
static int slot_find(loco_map_t *map, uint64_t kh, const void *key, size_t klen, int make,
                     uint32_t *out)
{
	uint8_t *tab = loco_region_ptr(map->tab);
	uint32_t g0 = (uint32_t)(kh % map->ngroups);

	for (uint32_t k = 0; k < map->ngroups; k++) {
		uint32_t g = (g0 + k) % map->ngroups;

		for (uint32_t j = 0; j < LOCO_MAP_GROUP; j++) {
			uint32_t i = g * LOCO_MAP_GROUP + j;
			uint8_t *s = slot_ptr(map, tab, i);
			struct slot_hdr *h = (void *)s;

			if (h->seq == 0) {
				if (!make)
					return -ENOENT;
				slot_write(map, s, 0, 1, key, klen, NULL, 0, 0);
				*out = i;
				return 0;
			}
			if (h->klen == klen && memcmp(s + MAP_HDR, key, klen) == 0) {
				*out = i;
				return 0;
			}
		}
	}
	return make ? -ENOSPC : -ENOENT;
}

/*
 * apply -- under lock: slot @i takes version @ver of its key if newer;
 * readable only if this node serves the key (@kh) now.
 */
static void apply(loco_map_t *map, uint32_t i, uint64_t kh, uint64_t ver, int del, const void *val,
                  size_t vlen)
{
	uint8_t *s = slot_ptr(map, loco_region_ptr(map->tab), i);
	struct slot_hdr *h = (void *)s;

	if (ver <= h->ver)
		return;
	slot_write(map, s, ver, del, s + MAP_HDR, h->klen, val, vlen, owns(map, kh));
	__atomic_add_fetch(&map->applied, 1, __ATOMIC_RELAXED);
}

/*
 * slot_show -- under lock: slot @i readable (@on) or hidden, as its
 * key's owner says; its content unchanged. Returns 1 if it changed.
 */
static int slot_show(loco_map_t *map, uint32_t i, int on)
{
	uint8_t *s = slot_ptr(map, loco_region_ptr(map->tab), i);
	struct slot_hdr *h = (void *)s;

	if (h->seq == 0 || ((h->vlen & MAP_HIDE) == 0) == (on != 0))
		return 0;
	slot_write(map, s, h->ver, (h->vlen & MAP_DEL) != 0, s + MAP_HDR, h->klen,
	           s + MAP_HDR + map->key_area, h->vlen & MAP_LEN, on);
	return 1;
}

/* slot_key_hash -- under lock: the hash of slot @i's key. */
static uint64_t slot_key_hash(const loco_map_t *map, uint32_t i)
{
	const struct slot_hdr *h = (const void *)slot_ptr(map, loco_region_ptr(map->tab), i);

	return key_hash((const uint8_t *)h + MAP_HDR, h->klen);
}

/* apply_copy -- a replica's write (forward or copy): make the key's slot, take @ver if newer. */
static int apply_copy(loco_map_t *map, const void *key, size_t klen, uint64_t ver, int del,
                      const void *val, size_t vlen)
{
	uint64_t kh = key_hash(key, klen);
	uint32_t i;
	int ret;

	pthread_mutex_lock(&map->lock);
	ret = slot_find(map, kh, key, klen, 1, &i);
	if (ret == 0)
		apply(map, i, kh, ver, del, val, vlen);
	pthread_mutex_unlock(&map->lock);
	return ret;
}

/* ---- the owner's side ----------------------------------------------------- */

/* msg_build -- a map.rep / map.op message into @buf; its length. */
static size_t msg_build(uint8_t *buf, int op, int del, uint64_t ver, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
	struct op_msg h = {.op = (uint8_t)op,
	                   .del = (uint8_t)del,
	                   .klen = (uint16_t)klen,
	                   .vlen = (uint32_t)vlen,
	                   .ver = ver};

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), key, klen);
	if (vlen)
		memcpy(buf + sizeof(h) + klen, val, vlen);
	return sizeof(h) + klen + vlen;
}

/*
 * forward -- send the write of @msg (@len bytes) to the live replicas in
 * @reps[0 .. @n) and wait for them. Returns 0, or the first error other
 * than a replica that left (-ECONNRESET).
 */
static int forward(loco_map_t *map, const uint32_t *reps, unsigned n, const void *msg, size_t len)
{
	loco_rpc_ticket_t t[2 * LOCO_MAP_REPLICAS_MAX];
	int posted[2 * LOCO_MAP_REPLICAS_MAX] = {0}, err = 0, ret, st;

	for (unsigned k = 0; k < n; k++) {
		ret = loco_rpc_call_return(map->ep, reps[k], map->rep_id, msg, len, NULL, 0, &t[k],
		                           MAP_FWD_NS);
		if (ret == 0)
			posted[k] = 1;
		else if (ret != -ECONNRESET && err == 0)
			err = ret;
	}
	for (unsigned k = 0; k < n; k++) {
		if (!posted[k])
			continue;
		st = 0;
		ret = loco_rpc_wait(map->ep, &t[k], &st, NULL, MAP_FWD_NS);
		if (ret == 0 && st < 0)
			ret = st;
		if (ret && ret != -ECONNRESET && err == 0)
			err = ret;
	}
	return err;
}

/*
 * owner_op -- run put/del/cas of @key as its owner (the caller checked
 * that this node ranks first): take the next version, forward, apply.
 * The new version into *@ver. Returns 0, -ENOENT, -ECANCELED, -ENOSPC, or
 * a forward's error (then applied here anyway).
 */
static int owner_op(loco_map_t *map, int op, uint64_t kh, const void *key, size_t klen,
                    uint64_t expect, const void *val, size_t vlen, uint64_t *ver)
{
	uint8_t msg[sizeof(struct op_msg) + LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX];
	uint32_t reps[2 * LOCO_MAP_REPLICAS_MAX], i;
	uint64_t cur, nv;
	unsigned n;
	int ret, cur_del, del = op == OP_DEL;
	struct slot_hdr *h;

	pthread_mutex_lock(&map->lock);
	ret =
	    owns(map, kh) ? 0 : -EXDEV; /* checked under @lock: h_act changes the owners under it */
	if (ret == 0)
		ret = slot_find(map, kh, key, klen, op != OP_DEL, &i);
	if (ret == 0 && map->meta[i].busy)
		ret = -EINPROGRESS; /* another write of this key is under way: the caller retries */
	if (ret) {
		pthread_mutex_unlock(&map->lock);
		return ret;
	}
	h = (void *)slot_ptr(map, loco_region_ptr(map->tab), i);
	cur = h->ver;
	cur_del = (h->vlen & MAP_DEL) != 0;
	if ((op == OP_DEL && cur_del) ||
	    (op == OP_CAS && (expect == 0 ? !cur_del : (cur_del || cur != expect)))) {
		pthread_mutex_unlock(&map->lock);
		return op == OP_DEL ? -ENOENT : -ECANCELED;
	}
	nv = cur + 1;
	map->meta[i].busy = 1;
	pthread_mutex_unlock(&map->lock);

	n = targets(map, kh, reps);
	ret = 0;
	if (n > 0) {
		size_t len = msg_build(msg, 0, del, nv, key, klen, val, del ? 0 : vlen);

		ret = forward(map, reps, n, msg, len);
	}
	pthread_mutex_lock(&map->lock);
	apply(map, i, kh, nv, del, val, del ? 0 : vlen);
	map->meta[i].busy = 0;
	pthread_mutex_unlock(&map->lock);
	if (ret == 0)
		*ver = nv;
	return ret;
}

/* h_op -- "map.op": a client's write, on the owner's server thread. */
static int h_op(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;
	struct op_msg h;
	const uint8_t *p = msg->data;
	uint64_t kh, ver = 0;
	int st;

	if (msg->len < sizeof(h))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.klen == 0 || h.klen > map->key_max || h.vlen > map->value_max ||
	    msg->len != sizeof(h) + h.klen + h.vlen || h.op < OP_PUT || h.op > OP_CAS)
		return -EINVAL;
	kh = key_hash(p + sizeof(h), h.klen);
	if (!owns(map, kh))
		return MAP_NOT_OWNER;
	st = owner_op(map, h.op, kh, p + sizeof(h), h.klen, h.ver, p + sizeof(h) + h.klen, h.vlen,
	              &ver);
	if (st == -EINPROGRESS)
		return MAP_BUSY;
	if (st == -EXDEV)
		return MAP_NOT_OWNER;
	if (st == 0 && cap >= sizeof(ver)) {
		memcpy(ret, &ver, sizeof(ver));
		*rl = sizeof(ver);
	}
	return st;
}

/* h_rep -- "map.rep": a write an owner forwarded or copied here. */
static int h_rep(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;
	struct op_msg h;
	const uint8_t *p = msg->data;

	(void)ret;
	(void)cap;
	(void)rl;
	if (msg->len < sizeof(h))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.klen == 0 || h.klen > map->key_max || h.vlen > map->value_max ||
	    msg->len != sizeof(h) + h.klen + h.vlen || h.ver == 0)
		return -EINVAL;
	if (node_index(map, map->me) < 0)
		return -EPERM; /* a client holds no keys */
	if (__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return 0; /* handed over: the owner's copies after the view change restore the count */
	return apply_copy(map, p + sizeof(h), h.klen, h.ver, h.del, p + sizeof(h) + h.klen, h.vlen);
}

/* ---- joins and leaves ------------------------------------------------------ */

/* wake -- a change of the masks: the copy thread runs a pass. */
static void wake(loco_map_t *map)
{
	__atomic_add_fetch(&map->epoch, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&map->tlock);
	pthread_cond_signal(&map->tcond);
	pthread_mutex_unlock(&map->tlock);
}

/* set_bit -- @node's bit in mask @m to @on (nodes[] index); 1 if it changed. */
static int set_bit(loco_map_t *map, uint32_t *m, uint32_t node, int on)
{
	int i = node_index(map, node);
	uint32_t bit, old;

	if (i < 0)
		return 0;
	bit = 1u << i;
	old = on ? __atomic_fetch_or(m, bit, __ATOMIC_ACQ_REL)
	         : __atomic_fetch_and(m, ~bit, __ATOMIC_ACQ_REL);
	return ((old & bit) != 0) != (on != 0);
}

/*
 * show_owned -- under lock: every entry readable if this node serves its
 * key now, hidden otherwise. Returns how many changed.
 */
static unsigned show_owned(loco_map_t *map)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < map->nslots; i++) {
		struct slot_hdr *h = (void *)slot_ptr(map, loco_region_ptr(map->tab), i);

		if (h->seq != 0)
			n += (unsigned)slot_show(map, i, owns(map, slot_key_hash(map, i)));
	}
	return n;
}

/*
 * copy_all -- every entry this node owns now goes to the nodes that
 * should hold it now (each takes it if newer); a slot whose write is
 * under way is waited for (its write may have missed a node that paired
 * since). Returns 0, or 1 when the masks changed meanwhile (or on stop).
 */
static int copy_all(loco_map_t *map, uint64_t epoch)
{
	uint8_t *tab = loco_region_ptr(map->tab);
	uint8_t key[LOCO_MAP_KEY_MAX];
	loco_waiter_t w;

	loco_waiter_init(&w, map->m);
	for (uint32_t i = 0; i < map->nslots; i++) {
		uint32_t reps[2 * LOCO_MAP_REPLICAS_MAX];
		struct slot_hdr *h = (void *)slot_ptr(map, tab, i);
		uint64_t kh = 0;
		size_t len = 0, klen;
		unsigned n;
		int busy;

		if (__atomic_load_n(&map->epoch, __ATOMIC_ACQUIRE) != epoch ||
		    __atomic_load_n(&map->stop, __ATOMIC_ACQUIRE))
			return 1;
		pthread_mutex_lock(&map->lock);
		busy = map->meta[i].busy;
		if (!busy && h->seq != 0 && h->ver != 0) {
			klen = h->klen;
			memcpy(key, (uint8_t *)h + MAP_HDR, klen);
			kh = key_hash(key, klen);
			slot_show(map, i, owns(map, kh));
			if (owns(map, kh))
				len = msg_build(map->cbuf, 0, (h->vlen & MAP_DEL) != 0, h->ver, key,
				                klen, (uint8_t *)h + MAP_HDR + map->key_area,
				                h->vlen & MAP_LEN);
		}
		pthread_mutex_unlock(&map->lock);
		if (busy) {
			loco_waiter_pause(&w);
			i--; /* again, once its write is done */
			continue;
		}
		loco_waiter_reset(&w);
		if (len == 0)
			continue;
		n = targets(map, kh, reps);
		if (n > 0 && forward(map, reps, n, map->cbuf, len) == 0)
			__atomic_add_fetch(&map->resync, n, __ATOMIC_RELAXED);
	}
	return 0;
}

/* info_read -- node @node's info word (0: not known yet). */
static uint64_t info_read(loco_map_t *map, uint32_t node)
{
	size_t off = (size_t)MAP_READERS * map->group_len;
	loco_rref_t rr;
	uint64_t v = 0;

	if (loco_region_remote(map->info, node, &rr) != 0 ||
	    loco_read(map->scr, off, &rr, 0, 8, map->cack) != 0 ||
	    loco_ack_wait(map->cack, 1000000000ll) != 0)
		return 0;
	memcpy(&v, (uint8_t *)loco_region_ptr(map->scr) + off, 8);
	return v;
}

/* call_until -- call handler @id on @node until it says 0 (MAP_BUSY: again); 0 or the error. */
static int call_until(loco_map_t *map, uint32_t node, uint32_t id)
{
	int64_t dl = obj_deadline(MAP_FWD_NS);
	loco_waiter_t w;

	loco_waiter_init(&w, map->m);
	for (;;) {
		loco_rpc_ticket_t t;
		int st = 0, ret;

		ret = loco_rpc_call_return(map->ep, node, id, &map->me, sizeof(map->me), NULL, 0,
		                           &t, obj_left_ns(dl));
		if (ret == 0)
			ret = loco_rpc_wait(map->ep, &t, &st, NULL, obj_left_ns(dl));
		if (ret)
			return ret;
		if (st != MAP_BUSY)
			return st;
		if (obj_now_ns() >= dl)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/*
 * peers_pass -- the paired nodes not active yet: read their info word; an
 * active one joins the active mask, a joiner gets "map.done" once a
 * whole copy_all() ran since it paired (@copied): every key it will hold
 * that this node owns went there, and every write since goes there too. A joiner whose copies all came
 * activates itself: "map.act" to every paired member, then it serves.
 */
static void peers_pass(loco_map_t *map, int copied)
{
	uint32_t ids[64], pend;
	int np = loco_channel_peers(map->ch, ids, 64), changed = 0;

	for (int k = 0; k < np && k < 64; k++) {
		int i = node_index(map, ids[k]);
		uint64_t v;

		if (i < 0 || (mask_of(&map->active) & (1u << i)) ||
		    !(mask_of(&map->present) & (1u << i)))
			continue;
		v = info_read(map, ids[k]);
		if (v == INFO_ACTIVE) {
			changed |= set_bit(map, &map->active, ids[k], 1);
		} else if (v == INFO_JOINING && copied && node_index(map, map->me) >= 0 &&
		           !__atomic_load_n(&map->joining, __ATOMIC_ACQUIRE) &&
		           !(mask_of(&map->pushed) & (1u << i))) {
			if (call_until(map, ids[k], map->done_id) == 0)
				set_bit(map, &map->pushed, ids[k], 1);
		}
	}
	if (changed)
		wake(map);
	if (!__atomic_load_n(&map->joining, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&map->may_act, __ATOMIC_ACQUIRE))
		return; /* a joiner that joined the channel (loco_map_sync): done from every paired holder, and
	   every holder in the cluster's view paired (one that pairs late has keys to copy) */
	pend = mask_of(&map->present) & ~(1u << node_index(map, map->me));
	if ((mask_of(&map->done_from) & pend) != pend)
		return;
	{
		uint32_t mem[64];
		int nm = loco_members(map->m, mem, 64);

		for (int k = 0; k < nm && k < 64; k++) {
			int i = node_index(map, mem[k]);

			if (i >= 0 && mem[k] != map->me && !(pend & (1u << i)))
				return;
		}
	}
	for (int k = 0; k < np && k < 64; k++) {
		uint32_t j;

		for (j = 0; j < map->nall && map->all[j] != ids[k]; j++)
			;
		if (j < map->nall && call_until(map, ids[k], map->act_id) != 0)
			return; /* again on the next pass (a node that left is no longer paired) */
	}
	pthread_mutex_lock(&map->lock);
	set_bit(map, &map->active, map->me, 1);
	__atomic_store_n(&map->joining, 0, __ATOMIC_RELEASE);
	show_owned(map);
	pthread_mutex_unlock(&map->lock);
	__atomic_store_n((uint64_t *)loco_region_ptr(map->info), INFO_ACTIVE, __ATOMIC_RELEASE);
	wake(map);
}

/* h_done -- "map.done", on a joiner: the caller copied its keys here. */
static int h_done(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;

	(void)ret;
	(void)cap;
	(void)rl;
	set_bit(map, &map->done_from, msg->caller, 1);
	wake(map);
	return 0;
}

/*
 * h_act -- "map.act": the caller, a joiner that has its keys, serves from
 * now on. Its keys are no longer this node's: no write starts here for
 * them; MAP_BUSY while one is under way (the joiner asks again), else
 * they are hidden from readers here before the reply.
 */
static int h_act(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;
	int st = 0;

	(void)ret;
	(void)cap;
	(void)rl;
	pthread_mutex_lock(&map->lock);
	if (set_bit(map, &map->active, msg->caller, 1))
		__atomic_add_fetch(&map->epoch, 1, __ATOMIC_ACQ_REL);
	for (uint32_t i = 0; i < map->nslots && st == 0; i++)
		if (map->meta[i].busy && !owns(map, slot_key_hash(map, i)))
			st = MAP_BUSY;
	if (st == 0)
		show_owned(map);
	pthread_mutex_unlock(&map->lock);
	wake(map);
	return st;
}

/*
 * h_bye -- "map.bye": the caller handed its keys over (loco_map_leave) and
 * leaves: it no longer serves nor holds any key, from now on here.
 */
static int h_bye(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;

	(void)ret;
	(void)cap;
	(void)rl;
	pthread_mutex_lock(&map->lock);
	set_bit(map, &map->active, msg->caller, 0);
	set_bit(map, &map->present, msg->caller, 0);
	show_owned(map);
	pthread_mutex_unlock(&map->lock);
	wake(map);
	return 0;
}

/*
 * settled -- whether change @e of the masks is MAP_SETTLE_NS old (@seen,
 * @seen_ns: the change last seen and when). Entries a change gives this
 * node become readable at once; its copies wait: when the members
 * destroy a map together, a copy sent to a member whose map is gone
 * would write into freed memory (a bad key: the fabric takes the link
 * down).
 */
static int settled(loco_map_t *map, uint64_t e, uint64_t *seen, int64_t *seen_ns)
{
	if (e != *seen) {
		*seen = e;
		*seen_ns = obj_now_ns();
		if (node_index(map, map->me) >= 0) {
			pthread_mutex_lock(&map->lock);
			show_owned(map);
			pthread_mutex_unlock(&map->lock);
		}
	}
	return obj_now_ns() - *seen_ns >= MAP_SETTLE_NS;
}

static void *copy_thread(void *arg)
{
	loco_map_t *map = arg;
	uint64_t done = 0, seen = 0;
	int64_t seen_ns = 0;

	pthread_mutex_lock(&map->tlock);
	while (!__atomic_load_n(&map->stop, __ATOMIC_ACQUIRE)) {
		uint64_t e = __atomic_load_n(&map->epoch, __ATOMIC_ACQUIRE);
		int holder = node_index(map, map->me) >= 0, pending;
		long nap;
		struct timespec ts;

		pthread_mutex_unlock(&map->tlock);
		/* a change is copied for once it is MAP_SETTLE_NS old */
		if (e != done && settled(map, e, &seen, &seen_ns)) {
			if (!holder || __atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
				done = e; /* nothing to copy: a client, or a node that left */
			else if (copy_all(map, e) == 0)
				done = e;
		}
		pending = mask_of(&map->active) != mask_of(&map->present) ||
		          __atomic_load_n(&map->joining, __ATOMIC_ACQUIRE);
		if (pending)
			peers_pass(map, done == e &&
			                    __atomic_load_n(&map->epoch, __ATOMIC_ACQUIRE) == e);
		pthread_mutex_lock(&map->tlock);
		if (__atomic_load_n(&map->epoch, __ATOMIC_ACQUIRE) != done && done == e)
			continue; /* changed meanwhile */
		/* settling: 10 ms; a node waiting to become active: 20 ms; else a change wakes us */
		nap = e != done ? 10000000l : pending ? 20000000l : 200000000l;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += nap;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&map->tcond, &map->tlock, &ts);
	}
	pthread_mutex_unlock(&map->tlock);
	return NULL;
}

static void map_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)obj;
	(void)view;
	if (set_bit(arg, &((loco_map_t *)arg)->present, node, 1))
		wake(arg);
}

/* map_peer_leave -- @node left: out of every mask (its next incarnation starts afresh) */
static void map_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_map_t *map = arg;
	int changed;

	(void)obj;
	(void)view;
	changed = set_bit(map, &map->active, node, 0);
	changed |= set_bit(map, &map->present, node, 0);
	set_bit(map, &map->done_from, node, 0);
	set_bit(map, &map->pushed, node, 0);
	if (changed) /* a client's leave changes nothing here */
		wake(map);
}

static const struct loco_object_ops map_ops = {
    .peer_join = map_peer_join,
    .peer_leave = map_peer_leave,
};

int loco_map_leave(loco_map_t *map, int64_t timeout_ns)
{
	int64_t dl = obj_deadline(timeout_ns);
	uint8_t key[LOCO_MAP_KEY_MAX];
	uint8_t *tab;
	loco_waiter_t w;
	uint32_t idle = 0;
	int ret = 0;

	if (map == NULL)
		return -EINVAL;
	if (node_index(map, map->me) < 0 || __atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return 0;
	tab = loco_region_ptr(map->tab);
	/* 1. no write starts here any more; the ones under way finish */
	__atomic_store_n((uint64_t *)loco_region_ptr(map->info), INFO_LEAVING, __ATOMIC_RELEASE);
	__atomic_store_n(&map->leaving, 1, __ATOMIC_RELEASE);
	loco_waiter_init(&w, map->m);
	while (idle < map->nslots) {
		pthread_mutex_lock(&map->lock);
		for (idle = 0; idle < map->nslots && !map->meta[idle].busy; idle++)
			;
		pthread_mutex_unlock(&map->lock);
		if (idle == map->nslots)
			break;
		if (dl >= 0 && obj_now_ns() >= dl)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	/* 2. every entry to the nodes that hold it without this one */
	for (uint32_t i = 0; i < map->nslots; i++) {
		uint32_t reps[LOCO_MAP_REPLICAS_MAX], pres;
		struct slot_hdr *h = (void *)slot_ptr(map, tab, i);
		size_t len = 0;
		unsigned n, k;
		uint64_t kh = 0;

		pthread_mutex_lock(&map->lock);
		if (h->seq != 0 && h->ver != 0) {
			memcpy(key, (uint8_t *)h + MAP_HDR, h->klen);
			kh = key_hash(key, h->klen);
			len =
			    msg_build(map->cbuf, 0, (h->vlen & MAP_DEL) != 0, h->ver, key, h->klen,
			              (uint8_t *)h + MAP_HDR + map->key_area, h->vlen & MAP_LEN);
		}
		pthread_mutex_unlock(&map->lock);
		if (len == 0)
			continue;
		pres = mask_of(&map->active) & ~(1u << node_index(map, map->me));
		n = rank(map, kh, pres, reps, map->R);
		for (k = 0; k < n && ret == 0; k++)
			ret = forward(map, &reps[k], 1, map->cbuf, len);
		if (ret)
			return ret;
	}
	/* 3. hidden from readers: the ones that still route here read again */
	pthread_mutex_lock(&map->lock);
	for (uint32_t i = 0; i < map->nslots; i++)
		slot_show(map, i, 0);
	pthread_mutex_unlock(&map->lock);
	/* 4. every member takes this node out of its masks: the new owners serve at once */
	{
		uint32_t ids[64];
		int np = loco_channel_peers(map->ch, ids, 64);

		for (int k = 0; k < np && k < 64; k++) {
			uint32_t j;

			for (j = 0; j < map->nall && map->all[j] != ids[k]; j++)
				;
			if (j == map->nall)
				continue;
			ret = call_until(map, ids[k], map->bye_id);
			if (ret && ret != -ECONNRESET)
				return ret;
		}
	}
	return 0;
}

/* ---- create / destroy ----------------------------------------------------- */

void loco_map_cfg_default(loco_map_cfg_t *cfg, const uint32_t *nodes, uint32_t n)
{
	if (cfg == NULL)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->nodes = nodes;
	cfg->nnodes = n;
	cfg->key_max = 64;
	cfg->value_max = 256;
	cfg->capacity = 4096;
	cfg->replicas = 1;
}

static int cfg_check(const loco_map_cfg_t *c, uint32_t me, uint32_t *all, uint32_t *nall)
{
	int found = 0;

	if (c->nodes == NULL || c->nnodes == 0 || (c->nclients && c->clients == NULL) ||
	    c->nnodes + c->nclients > LOCO_RPC_NODES_MAX || c->nnodes + c->nclients < 2)
		return -EINVAL;
	if (c->key_max == 0 || c->key_max > LOCO_MAP_KEY_MAX || c->value_max > LOCO_MAP_VALUE_MAX ||
	    c->replicas == 0 || c->replicas > LOCO_MAP_REPLICAS_MAX || c->replicas > c->nnodes ||
	    c->capacity == 0 || c->capacity % LOCO_MAP_GROUP || c->capacity > (1u << 24))
		return -EINVAL;
	*nall = 0;
	for (uint32_t i = 0; i < c->nnodes + c->nclients; i++) {
		uint32_t id = i < c->nnodes ? c->nodes[i] : c->clients[i - c->nnodes];

		if (id == 0)
			return -EINVAL;
		for (uint32_t j = 0; j < *nall; j++)
			if (all[j] == id)
				return -EINVAL;
		all[(*nall)++] = id;
		found |= id == me;
	}
	return found ? 0 : -EINVAL;
}

int loco_map_create(loco_channel_t *ch, const char *name, const loco_map_cfg_t *cfg,
                    loco_map_t **out)
{
	uint32_t all[LOCO_RPC_NODES_MAX], nall, ids[64];
	char rname[LOCO_NAME_MAX];
	loco_rpc_cfg_t rc;
	loco_map_cfg_t c;
	loco_map_t *map;
	uint64_t shape[4];
	int ret, np;

	if (ch == NULL || name == NULL || cfg == NULL || out == NULL)
		return -EINVAL;
	c = *cfg;
	if (c.key_max == 0)
		c.key_max = 64;
	if (c.value_max == 0)
		c.value_max = 256;
	if (c.capacity == 0)
		c.capacity = 4096;
	if (c.replicas == 0)
		c.replicas = 1;
	if (snprintf(rname, sizeof(rname), "%s.rpc", name) >= (int)sizeof(rname))
		return -EINVAL;
	map = calloc(1, sizeof(*map));
	if (map == NULL)
		return -ENOMEM;
	map->m = loco_channel_manager(ch);
	map->ch = ch;
	map->me = loco_node_id(map->m);
	ret = cfg_check(&c, map->me, all, &nall);
	if (ret) {
		free(map);
		return ret;
	}
	memcpy(map->nodes, c.nodes, c.nnodes * sizeof(uint32_t));
	map->nnodes = c.nnodes;
	map->key_max = c.key_max;
	map->key_area = (c.key_max + 7) & ~(size_t)7;
	map->value_max = c.value_max;
	map->slot_len = MAP_HDR + map->key_area + ((c.value_max + 7) & ~(size_t)7);
	map->group_len = map->slot_len * LOCO_MAP_GROUP;
	map->nslots = c.capacity;
	map->ngroups = c.capacity / LOCO_MAP_GROUP;
	map->R = c.replicas;
	pthread_mutex_init(&map->lock, NULL);
	pthread_mutex_init(&map->tlock, NULL);
	pthread_cond_init(&map->tcond, NULL);
	ret = -ENOMEM;
	map->meta = calloc(map->nslots, sizeof(*map->meta));
	map->cbuf = malloc(sizeof(struct op_msg) + LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX);
	if (map->meta == NULL || map->cbuf == NULL)
		goto err;
	for (unsigned i = 0; i < MAP_READERS; i++) {
		ret = loco_ack_key_create(map->m, &map->acks[i]);
		if (ret)
			goto err;
	}
	ret = loco_ack_key_create(map->m, &map->cack);
	if (ret)
		goto err;
	memcpy(map->all, all, nall * sizeof(uint32_t));
	map->nall = nall;
	ret = loco_object_create(ch, name, &map_ops, map, &map->obj);
	if (ret)
		goto err;
	shape[0] = c.key_max;
	shape[1] = c.value_max;
	shape[2] = c.replicas;
	shape[3] = 1; /* the slot format's version */
	ret = loco_object_agree(map->obj, "shape", XXH3_64bits(shape, sizeof(shape)) >> 1);
	if (ret == 0)
		ret = loco_object_agree(map->obj, "nodes",
		                        XXH3_64bits(c.nodes, c.nnodes * sizeof(uint32_t)) >> 1);
	if (ret == 0)
		ret = loco_region_create(map->obj, "tab", (size_t)map->nslots * map->slot_len,
		                         LOCO_ACCESS_READ, &map->tab);
	if (ret == 0)
		ret = loco_region_create(map->obj, "scr", MAP_READERS * map->group_len + 8, 0,
		                         &map->scr);
	if (ret == 0)
		ret = loco_region_create(map->obj, "info", 8, LOCO_ACCESS_READ, &map->info);
	if (ret)
		goto err;
	loco_rpc_cfg_default(&rc, all, nall);
	rc.inline_max = sizeof(struct op_msg) + c.key_max + c.value_max;
	if (rc.inline_max < 1024)
		rc.inline_max = 1024;
	rc.ring_bytes = 16 * rc.inline_max > 65536 ? 16 * rc.inline_max : 65536;
	rc.pull_bytes = 4096;
	rc.threads = 1;
	rc.max_depth = LOCO_RPC_DEPTH_MAX;
	ret = loco_rpc_create(ch, rname, &rc, &map->ep);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.op", h_op, map, &map->op_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.rep", h_rep, map, &map->rep_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.done", h_done, map, &map->done_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.act", h_act, map, &map->act_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.bye", h_bye, map, &map->bye_id);
	if (ret)
		goto err;
	/* this node, and the peers paired before the object existed (later ones: peer_join) */
	set_bit(map, &map->present, map->me, 1);
	if (!c.join)
		set_bit(map, &map->active, map->me, 1);
	map->joining = c.join && node_index(map, map->me) >= 0;
	*(uint64_t *)loco_region_ptr(map->info) = map->joining ? INFO_JOINING : INFO_ACTIVE;
	np = loco_channel_peers(ch, ids, 64);
	for (int i = 0; i < np && i < 64; i++)
		set_bit(map, &map->present, ids[i], 1);
	if (pthread_create(&map->thr, NULL, copy_thread, map)) {
		ret = -ENOMEM;
		goto err;
	}
	map->thr_started = 1;
	*out = map;
	return 0;

err:
	loco_rpc_destroy(map->ep);
	loco_object_destroy(map->obj);
	for (unsigned i = 0; i < MAP_READERS; i++)
		loco_ack_key_destroy(map->acks[i]);
	loco_ack_key_destroy(map->cack);
	free(map->meta);
	free(map->cbuf);
	pthread_cond_destroy(&map->tcond);
	pthread_mutex_destroy(&map->tlock);
	pthread_mutex_destroy(&map->lock);
	free(map);
	return ret;
}

void loco_map_destroy(loco_map_t *map)
{
	if (map == NULL)
		return;
	if (map->thr_started) {
		pthread_mutex_lock(&map->tlock);
		__atomic_store_n(&map->stop, 1, __ATOMIC_RELEASE);
		pthread_cond_signal(&map->tcond);
		pthread_mutex_unlock(&map->tlock);
		pthread_join(map->thr, NULL);
	}
	loco_rpc_destroy(map->ep);
	loco_object_destroy(map->obj);
	for (unsigned i = 0; i < MAP_READERS; i++)
		loco_ack_key_destroy(map->acks[i]);
	loco_ack_key_destroy(map->cack);
	free(map->meta);
	free(map->cbuf);
	pthread_cond_destroy(&map->tcond);
	pthread_mutex_destroy(&map->tlock);
	pthread_mutex_destroy(&map->lock);
	free(map);
}

int loco_map_sync(loco_map_t *map, int64_t timeout_ns)
{
	int64_t dl = obj_deadline(timeout_ns);
	loco_waiter_t w;
	int ret;

	if (map == NULL)
		return -EINVAL;
	ret = loco_object_sync(map->obj, timeout_ns);
	if (ret < 0)
		return ret;
	{
		/* every member here: their rpc pipes up before the first call (a member still
		   to come, a joiner, is not waited for: calls to the others wait for their pipes) */
		uint32_t ids[64];
		int np = loco_channel_peers(map->ch, ids, 64), found = 0;

		for (uint32_t j = 0; j < map->nall; j++)
			for (int k = 0; k < np && k < 64; k++)
				found += ids[k] == map->all[j];
		if (found == (int)map->nall - 1) {
			ret = loco_rpc_sync(map->ep, obj_left_ns(dl));
			if (ret)
				return ret;
		}
	}
	__atomic_store_n(&map->may_act, 1, __ATOMIC_RELEASE);
	wake(map);
	loco_waiter_init(&w, map->m);
	for (;;) {
		uint32_t p = mask_of(&map->present), a = mask_of(&map->active);

		if ((a & p) == p)
			return 0;
		if (dl >= 0 && obj_now_ns() >= dl)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
}

/* ---- GET ------------------------------------------------------------------ */

static unsigned reader_take(loco_map_t *map)
{
	loco_waiter_t w;

	loco_waiter_init(&w, map->m);
	for (;;) {
		uint32_t b = __atomic_load_n(&map->rbusy, __ATOMIC_RELAXED);

		if (~b != 0) {
			unsigned i = (unsigned)__builtin_ctz(~b);

			if (__atomic_compare_exchange_n(&map->rbusy, &b, b | (1u << i), 0,
			                                __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return i;
			continue;
		}
		loco_waiter_pause(&w);
	}
}

static void reader_put(loco_map_t *map, unsigned i)
{
	__atomic_and_fetch(&map->rbusy, ~(1u << i), __ATOMIC_RELEASE);
}

/*
 * group_read -- group @g of @owner's table into @buf (this node's own:
 * copied). Returns 0 or the fabric's error.
 */
static int group_read(loco_map_t *map, unsigned r, uint32_t owner, uint32_t g, int64_t dl)
{
	uint8_t *buf = (uint8_t *)loco_region_ptr(map->scr) + (size_t)r * map->group_len;
	loco_rref_t rr;
	int ret;

	if (owner == map->me) {
		memcpy(buf, (uint8_t *)loco_region_ptr(map->tab) + (size_t)g * map->group_len,
		       map->group_len);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		return 0;
	} /* a READ of an earlier try that failed to complete in time must not land later in a
	   buffer this GET, or the next one to take the buffer, validates */
	while (loco_ack_outstanding(map->acks[r]) > 0) {
		int64_t left = obj_left_ns(dl);

		(void)loco_ack_wait(map->acks[r],
		                    left < 0 || left > 1000000000ll ? 1000000000ll : left);
		if (dl >= 0 && obj_now_ns() >= dl && loco_ack_outstanding(map->acks[r]) > 0)
			return -ETIMEDOUT;
	}
	ret = loco_region_remote(map->tab, owner, &rr);
	if (ret == 0)
		ret = loco_read(map->scr, (size_t)r * map->group_len, &rr,
		                (size_t)g * map->group_len, map->group_len, map->acks[r]);
	if (ret == 0) {
		int64_t left = obj_left_ns(dl);

		ret = loco_ack_wait(map->acks[r],
		                    left < 0 || left > 1000000000ll ? 1000000000ll : left);
	}
	__atomic_add_fetch(&map->get_reads, 1, __ATOMIC_RELAXED);
	return ret;
}

int loco_map_get(loco_map_t *map, const void *key, size_t klen, void *val, size_t cap, size_t *vlen,
                 uint64_t *version, int64_t timeout_ns)
{
	int64_t dl = obj_deadline(timeout_ns);
	loco_waiter_t w;
	uint64_t kh;
	unsigned r;
	int ret;

	if (map == NULL || key == NULL || (val == NULL && cap))
		return -EINVAL;
	if (klen == 0 || klen > map->key_max)
		return -EMSGSIZE;
	if (__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	__atomic_add_fetch(&map->gets, 1, __ATOMIC_RELAXED);
	kh = key_hash(key, klen);
	r = reader_take(map);
	loco_waiter_init(&w, map->m);
	for (;;) {
		uint8_t *buf = (uint8_t *)loco_region_ptr(map->scr) + (size_t)r * map->group_len;
		uint32_t owner, g0 = (uint32_t)(kh % map->ngroups);
		int torn = 0;

		owner = owner_of(map, kh);
		if (owner == 0) {
			ret = -EHOSTUNREACH;
			break;
		}
		ret = -ENOENT;
		for (uint32_t k = 0; k < map->ngroups && !torn; k++) {
			uint32_t g = (g0 + k) % map->ngroups;
			int end = 0;

			if (group_read(map, r, owner, g, dl)) {
				torn = 1;
				break;
			}
			for (uint32_t j = 0; j < LOCO_MAP_GROUP; j++) {
				uint8_t *s = buf + (size_t)j * map->slot_len;
				struct slot_hdr h;
				int c = slot_check(map, s);

				if (c == SLOT_TORN) {
					torn = 1;
					break;
				}
				if (c == SLOT_EMPTY) {
					end = 1;
					break;
				}
				memcpy(&h, s, sizeof(h));
				if (h.klen != klen || memcmp(s + MAP_HDR, key, klen) != 0)
					continue;
				end = 1;
				if (h.vlen & MAP_HIDE) {
					torn = 1; /* its owner is moving: read again */
				} else if (h.vlen & MAP_DEL) {
					ret = -ENOENT;
				} else if ((h.vlen & MAP_LEN) > cap) {
					ret = -ENOBUFS;
				} else {
					if (h.vlen)
						memcpy(val, s + MAP_HDR + map->key_area, h.vlen);
					if (vlen)
						*vlen = h.vlen;
					if (version)
						*version = h.ver;
					ret = 0;
				}
				break;
			}
			if (end)
				break;
		}
		if (!torn)
			break;
		__atomic_add_fetch(&map->get_retries, 1, __ATOMIC_RELAXED);
		if (dl >= 0 && obj_now_ns() >= dl) {
			ret = -ETIMEDOUT;
			break;
		}
		loco_waiter_pause(&w);
	}
	reader_put(map, r);
	return ret;
}

/* ---- writes --------------------------------------------------------------- */

static int write_op(loco_map_t *map, int op, const void *key, size_t klen, uint64_t expect,
                    const void *val, size_t vlen, uint64_t *version, int64_t timeout_ns)
{
	uint8_t msg[sizeof(struct op_msg) + LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX];
	int64_t dl = obj_deadline(timeout_ns);
	loco_waiter_t w;
	uint64_t kh, ver = 0;
	size_t len;
	int ret;

	if (map == NULL || key == NULL || (val == NULL && vlen))
		return -EINVAL;
	if (klen == 0 || klen > map->key_max || vlen > map->value_max)
		return -EMSGSIZE;
	if (__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	__atomic_add_fetch(&map->writes, 1, __ATOMIC_RELAXED);
	kh = key_hash(key, klen);
	len = msg_build(msg, op, 0, expect, key, klen, val, vlen);
	loco_waiter_init(&w, map->m);
	for (;;) {
		loco_rpc_ticket_t t;
		uint32_t owner;
		int st = 0;

		owner = owner_of(map, kh);
		if (owner == 0)
			return -EHOSTUNREACH;
		if (owner == map->me) {
			ret = owner_op(map, op, kh, key, klen, expect, val, vlen, &ver);
			if (ret == -EINPROGRESS)
				st = MAP_BUSY;
			else if (ret == -EXDEV)
				st = MAP_NOT_OWNER;
		} else {
			ret = loco_rpc_call_return(map->ep, owner, map->op_id, msg, len, &ver,
			                           sizeof(ver), &t, obj_left_ns(dl));
			if (ret == 0)
				ret = loco_rpc_wait(map->ep, &t, &st, NULL, obj_left_ns(dl));
			if (ret == 0 && st < 0)
				ret = st;
		}
		if (st == MAP_NOT_OWNER || st == MAP_BUSY) {
			__atomic_add_fetch(&map->redirects, 1, __ATOMIC_RELAXED);
			if (dl >= 0 && obj_now_ns() >= dl)
				return -ETIMEDOUT;
			loco_waiter_pause(&w);
			continue;
		}
		break;
	}
	if (ret == 0 && version)
		*version = ver;
	return ret;
}

int loco_map_put(loco_map_t *map, const void *key, size_t klen, const void *val, size_t vlen,
                 uint64_t *version, int64_t timeout_ns)
{
	return write_op(map, OP_PUT, key, klen, 0, val, vlen, version, timeout_ns);
}

int loco_map_del(loco_map_t *map, const void *key, size_t klen, int64_t timeout_ns)
{
	return write_op(map, OP_DEL, key, klen, 0, NULL, 0, NULL, timeout_ns);
}

int loco_map_cas(loco_map_t *map, const void *key, size_t klen, uint64_t expect, const void *val,
                 size_t vlen, uint64_t *version, int64_t timeout_ns)
{
	return write_op(map, OP_CAS, key, klen, expect, val, vlen, version, timeout_ns);
}

uint32_t loco_map_owner(loco_map_t *map, const void *key, size_t klen)
{
	uint32_t top;

	if (map == NULL || key == NULL || klen == 0)
		return 0;
	(void)top;
	return owner_of(map, key_hash(key, klen));
}

void loco_map_stats(loco_map_t *map, loco_map_stats_t *st)
{
	uint8_t *tab;

	if (map == NULL || st == NULL)
		return;
	memset(st, 0, sizeof(*st));
	st->gets = __atomic_load_n(&map->gets, __ATOMIC_RELAXED);
	st->get_reads = __atomic_load_n(&map->get_reads, __ATOMIC_RELAXED);
	st->get_retries = __atomic_load_n(&map->get_retries, __ATOMIC_RELAXED);
	st->writes = __atomic_load_n(&map->writes, __ATOMIC_RELAXED);
	st->redirects = __atomic_load_n(&map->redirects, __ATOMIC_RELAXED);
	st->applied = __atomic_load_n(&map->applied, __ATOMIC_RELAXED);
	st->resync = __atomic_load_n(&map->resync, __ATOMIC_RELAXED);
	tab = loco_region_ptr(map->tab);
	pthread_mutex_lock(&map->lock);
	for (uint32_t i = 0; i < map->nslots; i++) {
		struct slot_hdr *h = (void *)slot_ptr(map, tab, i);
		uint32_t reps[LOCO_MAP_REPLICAS_MAX];
		unsigned n, k;

		if (h->seq == 0)
			continue;
		st->used++;
		if (h->ver == 0)
			continue; /* a key being made: not an entry yet */
		n = rank(map, key_hash((uint8_t *)h + MAP_HDR, h->klen), mask_of(&map->active),
		         reps, map->R);
		for (k = 0; k < n && reps[k] != map->me; k++)
			;
		if (k == 0 && n > 0)
			st->owned++;
		else if (k < n)
			st->replicas++;
		else
			st->stale++;
	}
	pthread_mutex_unlock(&map->lock);
}
