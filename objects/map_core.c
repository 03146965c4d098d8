/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map_core.c -- the map's placement (rendezvous hashing over the active
 * and the paired key holders), its slots (write, find, validate, show or
 * hide) and the owner's side of a write (map.op, map.rep). See map.c.
 */
#include "map_impl.h"

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

uint64_t map_key_hash(const void *key, size_t klen)
{
	return XXH3_64bits(key, klen);
}

/*
 * map_rank -- the key-holding nodes of mask @pres by rendezvous score for
 * @kh, best first, up to @max into @out; returns how many.
 */
unsigned map_rank(const loco_map_t *map, uint64_t kh, uint32_t pres, uint32_t *out, unsigned max)
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

int map_node_index(const loco_map_t *map, uint32_t node)
{
	for (uint32_t i = 0; i < map->nnodes; i++)
		if (map->nodes[i] == node)
			return (int)i;
	return -1;
}

uint32_t map_mask_of(const uint32_t *m)
{
	return __atomic_load_n(m, __ATOMIC_ACQUIRE);
}

/* map_owner_of -- the owner of @kh among the active nodes, or 0. */
uint32_t map_owner_of(const loco_map_t *map, uint64_t kh)
{
	uint32_t top;

	return map_rank(map, kh, map_mask_of(&map->active), &top, 1) ? top : 0;
}

/* map_owns -- whether this node serves @kh now: active, not leaving, and first among the active. */
int map_owns(const loco_map_t *map, uint64_t kh)
{
	return !__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE) &&
	       map_owner_of(map, kh) == map->me;
}

/*
 * map_targets -- where this node, owning @kh, sends its writes: the other
 * nodes among the first `replicas` of the active nodes and of the paired
 * ones (a joiner gets the writes of the keys it will hold before it
 * serves). Returns how many, into @out.
 */
unsigned map_targets(const loco_map_t *map, uint64_t kh, uint32_t *out)
{
	uint32_t a[LOCO_MAP_REPLICAS_MAX], p[LOCO_MAP_REPLICAS_MAX];
	unsigned na = map_rank(map, kh, map_mask_of(&map->active), a, map->R);
	unsigned np = map_rank(map, kh, map_mask_of(&map->present), p, map->R), n = 0;

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

uint8_t *map_slot_ptr(const loco_map_t *map, uint8_t *base, uint32_t i)
{
	return base + (size_t)i * map->slot_len;
}

static uint64_t slot_sum(const loco_map_t *map, const uint8_t *s, uint64_t seq)
{
	const struct slot_hdr *h = (const void *)s;
	uint64_t x = XXH3_64bits_withSeed(&h->ver, 16 + h->klen, seq);

	return XXH3_64bits_withSeed(s + MAP_HDR + map->key_area, h->vlen & MAP_LEN, x);
}

/* map_slot_check -- what a copy of a slot (in a buffer no one writes) holds. */
int map_slot_check(const loco_map_t *map, const uint8_t *s)
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
			uint8_t *s = map_slot_ptr(map, tab, i);
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
	uint8_t *s = map_slot_ptr(map, loco_region_ptr(map->tab), i);
	struct slot_hdr *h = (void *)s;

	if (ver <= h->ver)
		return;
	slot_write(map, s, ver, del, s + MAP_HDR, h->klen, val, vlen, map_owns(map, kh));
	__atomic_add_fetch(&map->applied, 1, __ATOMIC_RELAXED);
}

/*
 * map_slot_show -- under lock: slot @i readable (@on) or hidden, as its
 * key's owner says; its content unchanged. Returns 1 if it changed.
 */
int map_slot_show(loco_map_t *map, uint32_t i, int on)
{
	uint8_t *s = map_slot_ptr(map, loco_region_ptr(map->tab), i);
	struct slot_hdr *h = (void *)s;

	if (h->seq == 0 || ((h->vlen & MAP_HIDE) == 0) == (on != 0))
		return 0;
	slot_write(map, s, h->ver, (h->vlen & MAP_DEL) != 0, s + MAP_HDR, h->klen,
	           s + MAP_HDR + map->key_area, h->vlen & MAP_LEN, on);
	return 1;
}

/* map_slot_key_hash -- under lock: the hash of slot @i's key. */
uint64_t map_slot_key_hash(const loco_map_t *map, uint32_t i)
{
	const struct slot_hdr *h = (const void *)map_slot_ptr(map, loco_region_ptr(map->tab), i);

	return map_key_hash((const uint8_t *)h + MAP_HDR, h->klen);
}

/* apply_copy -- a replica's write (map_forward, copy): make the key's slot, take @ver if newer. */
static int apply_copy(loco_map_t *map, const void *key, size_t klen, uint64_t ver, int del,
                      const void *val, size_t vlen)
{
	uint64_t kh = map_key_hash(key, klen);
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

/* map_msg_build -- a map.rep / map.op message into @buf; its length. */
size_t map_msg_build(uint8_t *buf, int op, int del, uint64_t ver, const void *key, size_t klen,
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
 * map_forward -- send the write of @msg (@len bytes) to the live replicas in
 * @reps[0 .. @n) and wait for them. Returns 0, or the first error other
 * than a replica that left (-ECONNRESET).
 */
int map_forward(loco_map_t *map, const uint32_t *reps, unsigned n, const void *msg, size_t len)
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
 * map_owner_op -- run put/del/cas of @key as its owner (the caller checked
 * that this node ranks first): take the next version, map_forward, apply.
 * The new version into *@ver. Returns 0, -ENOENT, -ECANCELED, -ENOSPC, or
 * a map_forward's error (then applied here anyway).
 */
int map_owner_op(loco_map_t *map, int op, uint64_t kh, const void *key, size_t klen,
                 uint64_t expect, const void *val, size_t vlen, uint64_t *ver)
{
	uint8_t msg[sizeof(struct op_msg) + LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX];
	uint32_t reps[2 * LOCO_MAP_REPLICAS_MAX], i;
	uint64_t cur, nv;
	unsigned n;
	int ret, cur_del, del = op == OP_DEL;
	struct slot_hdr *h;

	pthread_mutex_lock(&map->lock);
	ret = map_owns(map, kh)
	          ? 0
	          : -EXDEV; /* checked under @lock: map_h_act changes the owners under it */
	if (ret == 0)
		ret = slot_find(map, kh, key, klen, op != OP_DEL, &i);
	if (ret == 0 && map->meta[i].busy)
		ret = -EINPROGRESS; /* another write of this key is under way: the caller retries */
	if (ret) {
		pthread_mutex_unlock(&map->lock);
		return ret;
	}
	h = (void *)map_slot_ptr(map, loco_region_ptr(map->tab), i);
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

	n = map_targets(map, kh, reps);
	ret = 0;
	if (n > 0) {
		size_t len = map_msg_build(msg, 0, del, nv, key, klen, val, del ? 0 : vlen);

		ret = map_forward(map, reps, n, msg, len);
	}
	pthread_mutex_lock(&map->lock);
	apply(map, i, kh, nv, del, val, del ? 0 : vlen);
	map->meta[i].busy = 0;
	pthread_mutex_unlock(&map->lock);
	if (ret == 0)
		*ver = nv;
	return ret;
}

/* map_h_op -- "map.op": a client's write, on the owner's server thread. */
int map_h_op(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
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
	kh = map_key_hash(p + sizeof(h), h.klen);
	if (!map_owns(map, kh))
		return MAP_NOT_OWNER;
	st = map_owner_op(map, h.op, kh, p + sizeof(h), h.klen, h.ver, p + sizeof(h) + h.klen,
	                  h.vlen, &ver);
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

/* map_h_rep -- "map.rep": a write an owner forwarded or copied here. */
int map_h_rep(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
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
	if (map_node_index(map, map->me) < 0)
		return -EPERM; /* a client holds no keys */
	if (__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return 0; /* handed over: the owner's copies after the view change restore the count */
	return apply_copy(map, p + sizeof(h), h.klen, h.ver, h.del, p + sizeof(h) + h.klen, h.vlen);
}
