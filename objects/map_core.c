/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map_core.c -- the map's placement (rendezvous hashing over the active
 * and the paired key holders), its slots (write, find, validate, show or
 * hide), the inbound logs (records, map_drain, map_absorb) and the
 * owner's side of a write (map.op: map_replicate; map.rep: a copy). See
 * map.c.
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

/* ---- sets of key holders ------------------------------------------------- */

/* map_set_load -- a copy of set @m (word by word, each atomic). */
void map_set_load(const map_set_t *m, map_set_t *out)
{
	for (unsigned k = 0; k < MAP_SET_WORDS; k++)
		out->w[k] = __atomic_load_n(&m->w[k], __ATOMIC_ACQUIRE);
}

/* map_set_has -- whether a copy @s holds index @i. */
int map_set_has(const map_set_t *s, int i)
{
	return i >= 0 && (s->w[(unsigned)i / 64] >> ((unsigned)i % 64) & 1);
}

/* map_set_test -- whether the live set @m holds index @i. */
int map_set_test(const map_set_t *m, int i)
{
	return i >= 0 &&
	       (__atomic_load_n(&m->w[(unsigned)i / 64], __ATOMIC_ACQUIRE) >> ((unsigned)i % 64) &
	        1);
}

/* map_set_subset -- whether copy @a is within copy @b. */
int map_set_subset(const map_set_t *a, const map_set_t *b)
{
	for (unsigned k = 0; k < MAP_SET_WORDS; k++)
		if (a->w[k] & ~b->w[k])
			return 0;
	return 1;
}

int map_set_empty(const map_set_t *s)
{
	for (unsigned k = 0; k < MAP_SET_WORDS; k++)
		if (s->w[k])
			return 0;
	return 1;
}

/*
 * map_set_hash -- what an owner publishes of the active set it absorbed
 * (its info word above the state) and a reader compares with the set it
 * routed by: 62 bits of XXH3 over the set, never 0 (0: nothing absorbed).
 * Two different sets give the same hash with probability 2^-62.
 */
uint64_t map_set_hash(const map_set_t *s)
{
	uint64_t h = XXH3_64bits(s->w, sizeof(s->w)) >> INFO_SHIFT;

	return h ? h : 1;
}

/*
 * map_rank -- the key-holding nodes of set @s by rendezvous score for
 * @kh, best first, up to @max (at most LOCO_MAP_REPLICAS_MAX) into @out;
 * returns how many. Costs one score per member of @s.
 */
unsigned map_rank(const loco_map_t *map, uint64_t kh, const map_set_t *s, uint32_t *out,
                  unsigned max)
{
	uint64_t sc[LOCO_MAP_REPLICAS_MAX + 1];
	uint32_t id[LOCO_MAP_REPLICAS_MAX + 1];
	unsigned n = 0;

	if (max > LOCO_MAP_REPLICAS_MAX)
		max = LOCO_MAP_REPLICAS_MAX;
	for (unsigned k = 0; k < MAP_SET_WORDS; k++) {
		for (uint64_t w = s->w[k]; w != 0; w &= w - 1) {
			uint32_t i = k * 64 + (uint32_t)__builtin_ctzll(w), node;
			uint64_t x;
			unsigned j;

			if (i >= map->nnodes)
				break;
			node = map->nodes[i];
			x = mix64(kh ^ mix64(node * 0x9e3779b97f4a7c15ull));
			for (j = n;
			     j > 0 && (sc[j - 1] < x || (sc[j - 1] == x && id[j - 1] > node));
			     j--) {
				sc[j] = sc[j - 1];
				id[j] = id[j - 1];
			}
			sc[j] = x;
			id[j] = node;
			if (n < max)
				n++;
		}
	}
	memcpy(out, id, n * sizeof(uint32_t));
	return n;
}

/* map_node_index -- @node's index in cfg.nodes, or -1 (a client, a stranger). */
int map_node_index(const loco_map_t *map, uint32_t node)
{
	uint32_t lo = 0, hi = map->nnodes;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2, id = (uint32_t)(map->nsorted[mid] >> 32);

		if (id == node)
			return (int)(uint32_t)map->nsorted[mid];
		if (id < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* map_member -- whether @node is a member of the map (a key holder or a client). */
int map_member(const loco_map_t *map, uint32_t node)
{
	uint32_t lo = 0, hi = map->nall;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (map->all[mid] == node)
			return 1;
		if (map->all[mid] < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* map_owner_of -- the owner of @kh among the active nodes, or 0. */
uint32_t map_owner_of(const loco_map_t *map, uint64_t kh)
{
	map_set_t a;
	uint32_t top;

	map_set_load(&map->active, &a);
	return map_rank(map, kh, &a, &top, 1) ? top : 0;
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
 * serves). Returns how many, into @out; and, when @owner is not NULL, the
 * owner of @kh among the active nodes (map_owner_of()) in *@owner, 0 for
 * none: the same ranking, not a second one.
 */
unsigned map_targets(const loco_map_t *map, uint64_t kh, uint32_t *out, uint32_t *owner)
{
	uint32_t a[LOCO_MAP_REPLICAS_MAX], p[LOCO_MAP_REPLICAS_MAX];
	map_set_t sa, sp;
	unsigned na, np, n = 0;

	map_set_load(&map->active, &sa);
	map_set_load(&map->present, &sp);
	na = map_rank(map, kh, &sa, a, map->R);
	np = map_rank(map, kh, &sp, p, map->R);
	if (owner != NULL)
		*owner = na > 0 ? a[0] : 0;

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
	uint64_t x = obj_sum(&h->ver, 16 + h->klen, seq);

	return obj_sum(s + MAP_HDR + map->key_area, h->vlen & MAP_LEN, x);
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

/* apply_locked -- under lock: a replica's write (a log record, a copy): make the key's slot, take @ver if newer. */
static int apply_locked(loco_map_t *map, const void *key, size_t klen, uint64_t ver, int del,
                        const void *val, size_t vlen)
{
	uint64_t kh = map_key_hash(key, klen);
	uint32_t i;
	int ret;

	ret = slot_find(map, kh, key, klen, 1, &i);
	if (ret == 0)
		apply(map, i, kh, ver, del, val, vlen);
	return ret;
}

/* apply_copy -- a copy (map.rep): apply_locked under lock. */
static int apply_copy(loco_map_t *map, const void *key, size_t klen, uint64_t ver, int del,
                      const void *val, size_t vlen)
{
	int ret;

	pthread_mutex_lock(&map->lock);
	ret = apply_locked(map, key, klen, ver, del, val, vlen);
	pthread_mutex_unlock(&map->lock);
	return ret;
}

/* ---- the logs ------------------------------------------------------------- */

/*
 * map_rec_build -- record @seq of a write (@key at version @ver, @del: a
 * tombstone, value @val) into @r, laid out as a slot: {seq, sum, ver,
 * klen, vlen | DEL}, key, value; sum = slot_sum() seeded with @seq.
 * Returns the bytes to send (the value's tail is not).
 */
size_t map_rec_build(const loco_map_t *map, uint8_t *r, uint64_t seq, uint64_t ver, int del,
                     const void *key, size_t klen, const void *val, size_t vlen)
{
	struct slot_hdr *h = (void *)r;

	h->seq = seq;
	h->ver = ver;
	h->klen = (uint32_t)klen;
	h->vlen = (uint32_t)vlen | (del ? MAP_DEL : 0);
	memcpy(r + MAP_HDR, key, klen);
	if (vlen)
		memcpy(r + MAP_HDR + map->key_area, val, vlen);
	h->sum = slot_sum(map, r, seq);
	return MAP_HDR + map->key_area + ((vlen + 7) & ~(size_t)7);
}

/*
 * map_rec_check -- whether @r (a copy no one writes) is a whole record
 * numbered @seq: 1, else 0 (not landed yet, torn, from an earlier lap,
 * or malformed: never applied).
 */
int map_rec_check(const loco_map_t *map, const uint8_t *r, uint64_t seq)
{
	struct slot_hdr h;

	memcpy(&h, r, sizeof(h));
	if (h.seq != seq || h.ver == 0 || h.klen == 0 || h.klen > map->key_max ||
	    (h.vlen & MAP_HIDE) || (h.vlen & MAP_LEN) > map->value_max ||
	    ((h.vlen & MAP_DEL) && (h.vlen & MAP_LEN)))
		return 0;
	return slot_sum(map, r, seq) == h.sum;
}

/* log_rec -- record @seq's place in slice @s of this node's logs. */
static uint8_t *log_rec(const loco_map_t *map, uint32_t s, uint64_t seq)
{
	return (uint8_t *)loco_region_ptr(map->log) + (size_t)s * map->slice_len + MAP_LOG_CTL +
	       (size_t)((seq - 1) % map->log_recs) * map->rec_len;
}

/*
 * map_drain -- under lock: take every whole record of this node's logs,
 * in order, slice by slice (a copy of each is checked, then applied as a
 * replica's write: a version only if newer), and tell the writers how far
 * (each slice's control word). Returns how many it took.
 */
unsigned map_drain(loco_map_t *map)
{
	int me = map_node_index(map, map->me);
	unsigned n = 0;

	if (map->log == NULL)
		return 0;
	for (uint32_t s = 0; s < map->nnodes; s++) {
		uint64_t *ctl =
		    (uint64_t *)((uint8_t *)loco_region_ptr(map->log) + (size_t)s * map->slice_len);
		uint64_t h0 = map->in_head[s];

		if ((int)s == me)
			continue;
		for (uint32_t k = 0; k < map->log_recs; k++) {
			uint64_t seq = map->in_head[s];
			const uint8_t *r = log_rec(map, s, seq);
			struct slot_hdr *h = (void *)map->dbuf;
			size_t len;

			if (__atomic_load_n((const uint64_t *)r, __ATOMIC_ACQUIRE) != seq)
				break; /* not there yet */
			memcpy(map->dbuf, r, MAP_HDR);
			if (h->klen > map->key_max || (h->vlen & MAP_LEN) > map->value_max)
				break; /* torn, or never whole: map_rec_check refuses it */
			len = map->key_area + (((h->vlen & MAP_LEN) + 7) & ~(size_t)7);
			memcpy(map->dbuf + MAP_HDR, r + MAP_HDR, len);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (!map_rec_check(map, map->dbuf, seq))
				break;
			if (apply_locked(
			        map, map->dbuf + MAP_HDR, h->klen, h->ver, (h->vlen & MAP_DEL) != 0,
			        map->dbuf + MAP_HDR + map->key_area, h->vlen & MAP_LEN) != 0) {
				uint64_t nb =
				    __atomic_add_fetch(&map->log_bad, 1, __ATOMIC_RELAXED);

				if (loco_log_due(nb))
					loco_log(LOCO_LOG_WARN,
					         "map in %s: a record from node %u's log not "
					         "applied: no room "
					         "(log_bad: %llu so far)",
					         loco_channel_name(map->ch),
					         (unsigned)map->nodes[s], (unsigned long long)nb);
			}
			map->in_head[s] = seq + 1;
			n++;
		}
		if (map->in_head[s] != h0)
			__atomic_store_n(ctl, map->in_head[s], __ATOMIC_RELEASE);
	}
	if (n)
		__atomic_add_fetch(&map->log_taken, n, __ATOMIC_RELAXED);
	return n;
}

/*
 * map_poll -- the poller of a key holder: drain the logs when @lock is free;
 * park when there was nothing (an owner's MAP_MSG_DRAIN kicks it).
 */
int map_poll(void *arg)
{
	loco_map_t *map = arg;
	unsigned n;

	if (pthread_mutex_trylock(&map->lock) != 0)
		return LOCO_POLLER_IDLE; /* its holder drains, or the next turn */
	n = map_drain(map);
	pthread_mutex_unlock(&map->lock);
	return n ? LOCO_POLLER_BUSY : LOCO_POLLER_PARK;
}

/* map_on_msg -- an object message (progress thread): MAP_MSG_DRAIN kicks the poller */
void map_on_msg(loco_object_t *obj, uint32_t from, const void *msg, size_t len, void *arg)
{
	loco_map_t *map = arg;

	(void)obj;
	(void)from;
	if (len == 1 && *(const uint8_t *)msg == MAP_MSG_DRAIN)
		loco_poller_kick(map->poller);
}

/* kick -- ask holder @node to take its records (never waits; a lost one is sent again) */
static void kick(loco_map_t *map, uint32_t node)
{
	uint8_t m = MAP_MSG_DRAIN;

	(void)loco_object_send(map->obj, node, &m, 1);
}

/* map_info_set -- this node's info word: state @st (keeping the hash), or the absorbed set's hash (@st 0). */
void map_info_set(loco_map_t *map, uint64_t st, uint64_t hash)
{
	uint64_t *w = loco_region_ptr(map->info);
	uint64_t o = __atomic_load_n(w, __ATOMIC_SEQ_CST), v;

	do
		v = st ? (o & ~INFO_STATE) | st : (o & INFO_STATE) | hash << INFO_SHIFT;
	while (!__atomic_compare_exchange_n(w, &o, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
}

/*
 * map_published -- whether info word @w says its node serves with active
 * set @a (a copy): it absorbed that set (map_absorb: it published its
 * hash) and no change since.
 */
int map_published(uint64_t w, const map_set_t *a)
{
	uint64_t st = w & INFO_STATE;

	return (st == INFO_ACTIVE || st == INFO_LEAVING) && !map_set_empty(a) &&
	       w >> INFO_SHIFT == map_set_hash(a);
}

/*
 * map_absorb -- under lock (a key holder): the active set as it is now
 * takes effect here: drain the logs (every write acknowledged to a former
 * owner of a key this node owns now is in them), show what this node owns
 * and hide the rest, then publish the set's hash in the info word, unless
 * the set changed meanwhile (map_set_bit cleared it: absorbed again later).
 */
void map_absorb(loco_map_t *map)
{
	uint64_t g = __atomic_load_n(&map->agen, __ATOMIC_SEQ_CST);
	map_set_t a;

	map_set_load(&map->active, &a);
	map_drain(map);
	map_show_owned(map);
	map_info_set(map, 0, map_set_hash(&a));
	if (__atomic_load_n(&map->agen, __ATOMIC_SEQ_CST) != g)
		map_info_set(map, 0, 0);
}

/* map_absorbed -- under lock: map_absorb until this node published its active set (bounded). */
void map_absorbed(loco_map_t *map)
{
	for (int k = 0; k < 4; k++) {
		map_set_t a;

		map_set_load(&map->active, &a);
		if (map_published(
		        __atomic_load_n((uint64_t *)loco_region_ptr(map->info), __ATOMIC_SEQ_CST),
		        &a))
			return;
		map_absorb(map);
	}
}

/* map_log_resync -- the next write to @node reads its head first (a new incarnation, a failure). */
void map_log_resync(loco_map_t *map, uint32_t node)
{
	int i = map_node_index(map, node);

	if (i >= 0)
		__atomic_store_n(&map->out[i].sync, 1, __ATOMIC_RELEASE);
}

static unsigned writer_take(loco_map_t *map)
{
	loco_waiter_t w;

	loco_waiter_init(&w, map->m);
	for (;;) {
		uint32_t b = __atomic_load_n(&map->wbusy, __ATOMIC_RELAXED);

		if ((b & ((1u << MAP_WRITERS) - 1)) != (1u << MAP_WRITERS) - 1) {
			unsigned i = (unsigned)__builtin_ctz(~b);

			if (__atomic_compare_exchange_n(&map->wbusy, &b, b | (1u << i), 0,
			                                __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return i;
			continue;
		}
		loco_waiter_pause(&w);
	}
}

static void writer_put(loco_map_t *map, unsigned i)
{
	__atomic_and_fetch(&map->wbusy, ~(1u << i), __ATOMIC_RELEASE);
}

static int present(const loco_map_t *map, int idx)
{
	return map_set_test(&map->present, idx);
}

/*
 * log_reserve -- a sequence number of this node's slice at holder @node
 * (nodes[] @idx) into *@seq, for writer @w: when the slice looks full, or
 * its head is not known (sync), read the holder's control word and wait
 * for room (never overwrite a record not taken). Returns 0; -ECONNRESET
 * (@node is gone); -ETIMEDOUT, or a READ's error, at @dl.
 */
static int log_reserve(loco_map_t *map, unsigned w, int idx, uint32_t node, int64_t dl,
                       uint64_t *seq)
{
	struct log_out *o = &map->out[idx];
	size_t lo = map->stg_off + (size_t)w * map->wstride + MAP_TGT_MAX * map->rec_len;
	int me = map_node_index(map, map->me);
	uint64_t half = map->log_recs / 2 ? map->log_recs / 2 : 1;
	int64_t kicked = 0;
	loco_waiter_t wt;

	loco_waiter_init(&wt, map->m);
	for (;;) {
		loco_rref_t rr;
		uint64_t h = 0;
		int64_t now;
		int ret;

		pthread_mutex_lock(&o->lock);
		if (!__atomic_load_n(&o->sync, __ATOMIC_ACQUIRE) &&
		    o->tail - o->head < map->log_recs) {
			*seq = o->tail++;
			pthread_mutex_unlock(&o->lock);
			if (*seq % half == 0)
				kick(map, node); /* its poller parks: half a slice waits there */
			return 0;
		}
		pthread_mutex_unlock(&o->lock);
		if (!present(map, idx))
			return -ECONNRESET;
		/* short of room: the holder must drain (a kick may be lost: again now and then) */
		now = obj_now_ns();
		if (now - kicked >= MAP_KICK_NS) {
			kick(map, node);
			kicked = now;
		}
		ret = loco_region_remote(map->log, node, &rr);
		if (ret == 0)
			ret = loco_read(map->scr, lo, &rr, (size_t)me * map->slice_len, 8,
			                map->wacks[w]);
		if (ret == 0) {
			int64_t left = obj_left_ns(dl);

			ret = loco_ack_wait(map->wacks[w],
			                    left < 0 || left > 1000000000ll ? 1000000000ll : left);
		}
		if (ret == 0) {
			int room;

			memcpy(&h, (uint8_t *)loco_region_ptr(map->scr) + lo, 8);
			if (h == 0)
				h = 1; /* a holder that took nothing yet */
			pthread_mutex_lock(&o->lock);
			if (__atomic_load_n(&o->sync, __ATOMIC_ACQUIRE)) {
				o->tail = o->head = h;
				__atomic_store_n(&o->sync, 0, __ATOMIC_RELEASE);
			} else if (h > o->head) {
				o->head = h;
			}
			room = o->tail - o->head < map->log_recs;
			pthread_mutex_unlock(&o->lock);
			if (room)
				continue;
		}
		if (dl >= 0 && obj_now_ns() >= dl)
			return ret ? ret : -ETIMEDOUT;
		loco_waiter_pause(&wt);
	}
}

/*
 * map_replicate -- the write of @key at version @ver (@del, @val) into
 * this node's log at each holder of @reps[0 .. @n), in parallel: reserve
 * a record in each, WRITE them (one ack key), wait for every completion:
 * then the record is in each live replica's memory. Returns 0, or the
 * first error other than a replica that left (-ECONNRESET).
 */
static int map_replicate(loco_map_t *map, const uint32_t *reps, unsigned n, uint64_t ver, int del,
                         const void *key, size_t klen, const void *val, size_t vlen)
{
	int64_t dl = obj_deadline(MAP_FWD_NS);
	unsigned w = writer_take(map);
	size_t base = map->stg_off + (size_t)w * map->wstride;
	uint8_t *stg = (uint8_t *)loco_region_ptr(map->scr) + base;
	loco_ack_key_t *ack = map->wacks[w];
	int me = map_node_index(map, map->me), idx[MAP_TGT_MAX], err = 0, ret, nf;
	int again[MAP_TGT_MAX] = {0}, ferr[MAP_TGT_MAX] = {0};
	uint64_t seq[MAP_TGT_MAX];
	size_t len[MAP_TGT_MAX];
	struct loco_ack_failure f[MAP_TGT_MAX];
	loco_waiter_t wt;

	for (unsigned k = 0; k < n; k++) {
		idx[k] = map_node_index(map, reps[k]);
		if (idx[k] < 0)
			continue;
		ret = log_reserve(map, w, idx[k], reps[k], dl, &seq[k]);
		if (ret) {
			if (ret != -ECONNRESET && err == 0)
				err = ret;
			idx[k] = -1;
		}
	}
	loco_waiter_init(&wt, map->m);
	for (unsigned k = 0; k < n; k++) {
		if (idx[k] < 0)
			continue;
		len[k] = map_rec_build(map, stg + (size_t)k * map->rec_len, seq[k], ver, del, key,
		                       klen, val, vlen);
		for (;;) {
			loco_rref_t rr;

			ret = loco_region_remote(map->log, reps[k], &rr);
			if (ret == 0)
				ret = loco_write(map->scr, base + (size_t)k * map->rec_len, &rr,
				                 (size_t)me * map->slice_len + MAP_LOG_CTL +
				                     (size_t)((seq[k] - 1) % map->log_recs) *
				                         map->rec_len,
				                 len[k], ack);
			if (ret == 0)
				break;
			if (!present(map, idx[k]))
				ret = -ECONNRESET;
			else if ((ret == -EAGAIN || ret == -ENOTCONN || ret == -ENOENT) &&
			         (dl < 0 || obj_now_ns() < dl)) {
				loco_waiter_pause(&wt);
				continue;
			}
			break;
		}
		loco_waiter_reset(&wt);
		if (ret) { /* a hole in the slice: the next write reads the holder's head */
			map_log_resync(map, reps[k]);
			if (ret != -ECONNRESET && err == 0)
				err = ret;
			idx[k] = -1;
		}
	}
	/* every WRITE completes (a dead peer's within the fabric's bound) before the buffers go;
	   one that failed to a holder still paired is posted again (a hole would stop the
	   holder's slice) -- its link may be down for good while its failure is not confirmed
	   yet: then the posts fail too, and are tried again -- until the holder leaves (its
	   records no longer matter) or @dl (an error): the slice is then read again from the
	   holder's head */
	for (;;) {
		int posted = 0, pending = 0;

		/* until the key is empty (each WRITE completes within the fabric's bound), so
		   that the failures listed below are all of this round's */
		ret = loco_ack_wait(ack, -1);
		nf = loco_ack_failures(ack, f, MAP_TGT_MAX, NULL);
		for (int j = 0; j < nf && j < (int)MAP_TGT_MAX; j++)
			for (unsigned k = 0; k < n; k++)
				if (idx[k] >= 0 && reps[k] == f[j].node) {
					again[k] = 1;
					ferr[k] = f[j].error ? f[j].error : -EIO;
				}
		for (unsigned k = 0; k < n; k++) {
			loco_rref_t rr;

			if (idx[k] < 0 || !again[k])
				continue;
			if (!present(map, idx[k])) {
				ret = -ECONNRESET; /* it left: its records no longer matter */
			} else if (dl >= 0 && obj_now_ns() >= dl) {
				ret = ferr[k];
			} else {
				ret = loco_region_remote(map->log, reps[k], &rr);
				if (ret == 0)
					ret = loco_write(
					    map->scr, base + (size_t)k * map->rec_len, &rr,
					    (size_t)me * map->slice_len + MAP_LOG_CTL +
					        (size_t)((seq[k] - 1) % map->log_recs) *
					            map->rec_len,
					    len[k], ack);
				if (ret == 0) {
					again[k] = 0;
					posted = 1;
					continue;
				}
				if (ret == -EAGAIN || ret == -ENOTCONN || ret == -ENOENT ||
				    ret == -ECONNRESET) {
					pending =
					    1; /* its link is down, its failure not known yet */
					continue;
				}
			}
			if (ret != -ECONNRESET && err == 0)
				err = ret;
			map_log_resync(map, reps[k]);
			again[k] = 0;
			idx[k] = -1;
		}
		if (!posted && !pending)
			break;
		if (!posted)
			loco_waiter_pause(&wt);
	}
	writer_put(map, w);
	return err;
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
 * that this node ranks first): take the next version, map_replicate (the
 * record in every live replica's log), apply. The new version into *@ver.
 * Returns 0, -ENOENT, -ECANCELED, -ENOSPC, or a map_replicate's error
 * (then applied here anyway).
 */
int map_owner_op(loco_map_t *map, int op, uint64_t kh, const void *key, size_t klen,
                 uint64_t expect, const void *val, size_t vlen, uint64_t *ver)
{
	uint32_t reps[2 * LOCO_MAP_REPLICAS_MAX], i, owner;
	uint64_t cur, nv;
	unsigned n;
	int ret, cur_del, del = op == OP_DEL;
	struct slot_hdr *h;

	pthread_mutex_lock(&map->lock);
	map_drain(map);    /* keeps the logs short; cheap when they are empty */
	map_absorbed(map); /* a key this node came to own: its former owner's writes first */
	/*
	 * Who owns the key and where its write goes, from one ranking (as
	 * map_owns() and map_targets() would, each ranking the nodes again),
	 * under @lock: map_h_act changes the owners under it. A joiner that
	 * pairs after this gets the key from the copy thread, which waits for
	 * the slot's busy mark below to clear (map_move.c).
	 */
	n = map_targets(map, kh, reps, &owner);
	ret = !__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE) && owner == map->me ? 0 : -EXDEV;
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

	ret = 0;
	if (n > 0)
		ret = map_replicate(map, reps, n, nv, del, key, klen, val, del ? 0 : vlen);
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

	if (!map_member(map, msg->caller))
		return -EPERM; /* not a member (the rpc takes any node past MAP_RPC_LIST_MAX) */
	if (msg->len < sizeof(h))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.klen == 0 || h.klen > map->key_max || h.vlen > map->value_max ||
	    msg->len != sizeof(h) + h.klen + h.vlen || h.op < OP_PUT || h.op > OP_CAS)
		return -EINVAL;
	kh = map_key_hash(p + sizeof(h), h.klen);
	/* map_owner_op() says -EXDEV when this node does not own it (under the map's lock) */
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
	if (map_node_index(map, msg->caller) < 0)
		return -EPERM; /* only key holders copy entries */
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
