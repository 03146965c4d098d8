/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map.c -- a replicated hash map (loco/map.h), built only on the public
 * object-author API (loco/channel.h) and the rpc object (loco/rpc.h).
 *
 * Every member has an object @name with regions "tab" (capacity slots,
 * remotely readable), "scr" (local: the landing buffers of GET's READs
 * and of the owners' info words, one each, the copy thread's info reads,
 * and the staging of the writes' log records), "info" (this node's info
 * word: state, INFO_* active, joining, leaving, and above it a hash of
 * the active set it absorbed, see Logs) and, on a key holder, "log" (its inbound
 * logs, remotely writable: see Logs), and an rpc endpoint "@name.rpc"
 * whose calls the map's server thread runs (loco_rpc_progress: while
 * calls come it waits between them by the manager's policy, so under
 * LOCO_WAIT=spin a call reaches its handler without a thread wake-up;
 * idle 5 ms, it naps, 50 us doubling to 1 ms) with five handlers:
 * "map.op" (a client's put/del/cas, run by the key's owner), "map.rep"
 * (an entry an owner copies to a holder after a change of the sets),
 * "map.done", "map.act" (a join) and "map.bye" (a graceful leave). Files:
 * this one has the API, GET and the writes' callers; map_core.c
 * placement, slots, the logs and the owner's side of a write;
 * map_move.c the server and copy threads, joins and leaves.
 *
 * Membership: two sets over the key holders (bitmaps by cfg.nodes
 * index, up to LOCO_MAP_NODES_MAX bits in atomic 64-bit words): present
 * (P: paired in the channel) and active (A: serving, a subset of P);
 * done_from, pushed and byed are such sets too. A key's owner is the
 * first of A by rendezvous score; an owner sends its writes to the first
 * `replicas` of A and of P (so a joiner, in P and not yet in A, gets
 * them). A slot whose key this node does not own is hidden (MAP_HIDE,
 * under the checksum): a reader that still routes to a former owner
 * reads again. Deaths and leaves clear both sets (object callbacks);
 * the first replica then owns the key and already holds it (in its table
 * or its logs); the copy thread absorbs the change (see Logs) and, once
 * it is MAP_SETTLE_NS old, copies every entry it owns to the holders the
 * sets now ask for. A joiner (cfg.join) is active only once every holder
 * copied its keys to it ("map.done") and every paired key holder took it
 * into A ("map.act": refused while a write of a moving key is under way
 * there, then that node hides what it no longer owns); clients are not
 * called: they read its info word (peers_pass) and, until they know,
 * their GETs read again (the published hash differs) and their writes
 * are refused by the former owner. loco_map_leave() stops
 * writes, hands every entry over, hides the table and says "map.bye".
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
 * Writes: one round trip from the caller to the owner (the "map.op"
 * call; none when the caller owns the key). @lock serializes the changes
 * of this node's table (the server thread, the copy thread, the poller
 * and an application thread that owns the key run them). An owner runs
 * one write of a key at a time: under @lock it checks the key's state in
 * its table (del of a deleted key, cas of another version: it fails
 * there, against the state readers see), marks the slot busy and takes
 * the next version; then it WRITEs the write as a record into its log at
 * each live replica, all in parallel on one ack key, and waits for the
 * completions (the record is then in every replica's memory), then
 * applies it and clears busy, and replies. A write that finds the slot
 * busy is retried by its caller (MAP_BUSY): never waited for inside a
 * handler, whose thread may be the busy write's. So a write visible at
 * the owner is in every live replica's log, every decision is made on
 * visible state, and a later version always wins everywhere (replicas
 * take a version only if newer).
 *
 * Logs: a key holder's "log" region has one slice per key holder (index
 * in cfg.nodes; its own is unused): a control line (the next sequence
 * number it takes, for the owner to READ) and a ring of log_recs records
 * of rec_len bytes, each laid out as a slot: {seq, sum, ver, klen, vlen |
 * DEL}, key, value, sum = XXH3 seeded with seq. Sequence numbers start at
 * 1 and record seq lives at place (seq - 1) % log_recs. The owner keeps,
 * per holder, the next number to write (tail) and the holder's head as
 * last read: when tail - head reaches log_recs, or after the holder came
 * back (peer_join/leave) or a WRITE to it failed (sync), it READs the
 * holder's control word before it writes: it never overwrites a record
 * not taken, and a new incarnation of either side starts at the head the
 * holder has. A holder takes records in order (map_drain, under @lock):
 * the one at its head is taken when its seq is the expected one, its
 * fields are in range and its sum matches, checked on a copy; anything
 * else (not landed yet, torn, another lap's, malformed) is left there,
 * never applied. A taken record is applied as a copy (its version only
 * if newer; a full table counts it in log_bad) and the control word
 * moves on. Records are taken by a poller on the progress thread
 * (MAP_POLL_NS; only when @lock is free), at the start of each write
 * this node owns, before each copy pass, the leave and the census
 * (loco_map_stats), and by map_absorb. The poller parks when it finds
 * nothing (an idle holder's progress thread then sleeps: it woke every
 * 500 us for it, 8 % of a core); an owner kicks it with an object message
 * (MAP_MSG_DRAIN, on the holder's progress thread: never behind a server
 * thread that may itself wait for room) at every half slice it writes
 * there, and about every millisecond while it waits for room.
 *
 * Absorbing a change of A: a holder that comes to own a key (its owner
 * died, left, or a joiner activated) may hold the key's last writes only
 * in its logs. map_absorb (under @lock) takes every record its logs hold
 * (every write acknowledged by a former owner landed there before the
 * acknowledgement), shows what it owns and hides the rest, and then
 * publishes a 62-bit hash of the A it absorbed (map_set_hash, never 0)
 * in its info word; every change of A clears it first (map_set_bit). A
 * GET READs the owner's info word, then the key's group (requests to one
 * node execute in order), and takes the result only if the owner
 * published the hash of the A the reader routed by (else it reads
 * again; two sets hash alike with probability 2^-62: a hash, because A
 * has up to 256 bits and the state must come in the same 8-byte READ);
 * an owner's own writes and reads absorb first when the published hash
 * is not the current set's.
 * So no one reads a key at, or writes it through, a new owner before
 * that owner took its former owner's acknowledged writes.
 *
 * Memory per key holder, besides the table (capacity x slot_len) and the
 * rpc endpoint: log = nnodes x (64 + log_recs x rec_len), rec_len =
 * slot_len rounded up to 64, log_recs = min(256 KiB, 2 MiB / nnodes) /
 * rec_len within [16, 256]; staging in "scr" = 16 writers x (8 x rec_len
 * + 64). At the defaults (key_max 64, value_max 256: rec_len 384) that
 * is 96 KiB per key holder of the map up to 8 holders, about 2 MiB in
 * all from 6 holders on (21 records a slice at 256), and 49 KiB of
 * staging; a client has no log. Per member: its id in @all (4 bytes;
 * holders 28 more: nodes, nsorted, in_head, out). Per peer that calls
 * this node: the rpc ring it makes on its first call (loco/rpc.h), and
 * nothing else: clients cost a holder nothing until they write to it
 * (GETs are one-sided). loco_map_stats() reports pipes_in, pipes_out and
 * mem_bytes (tests/objects/map-mem, map-scale).
 *
 * Members: up to LOCO_MAP_NODES_MAX key holders (the core's member
 * ceiling; it sizes the sets); clients without a limit of the map's: the
 * rpc endpoint gets the member list up to MAP_RPC_LIST_MAX entries, no
 * list above (any node of the channel; map.op and map.rep then refuse
 * non-members: map_member, map_node_index, binary searches).
 */
#include "map_impl.h"

/* map_free -- what create made (its thread stopped), in reverse: for destroy, a failed create. */
static void map_free(loco_map_t *map)
{
	if (map->sthr_started) {
		__atomic_store_n(&map->sstop, 1, __ATOMIC_RELEASE);
		pthread_join(map->sthr, NULL);
	}
	if (map->poller != NULL)
		loco_poller_remove(map->poller);
	loco_rpc_destroy(map->ep);
	loco_object_destroy(map->obj);
	for (unsigned i = 0; i < MAP_READERS; i++)
		loco_ack_key_destroy(map->acks[i]);
	for (unsigned i = 0; i < MAP_WRITERS; i++)
		loco_ack_key_destroy(map->wacks[i]);
	if (map->out != NULL)
		for (unsigned i = 0; i < map->nnodes; i++)
			pthread_mutex_destroy(&map->out[i].lock);
	loco_ack_key_destroy(map->cack);
	free(map->out);
	free(map->in_head);
	free(map->nodes);
	free(map->nsorted);
	free(map->all);
	free(map->cpeers);
	free(map->meta);
	free(map->cbuf);
	free(map->dbuf);
	pthread_cond_destroy(&map->tcond);
	pthread_mutex_destroy(&map->tlock);
	pthread_mutex_destroy(&map->lock);
	loco_handle_free(map);
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

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cfg_check(const loco_map_cfg_t *c)
{
	if (c->nodes == NULL || c->nnodes == 0 || c->nnodes > LOCO_MAP_NODES_MAX ||
	    (c->nclients && c->clients == NULL) || c->nclients > UINT32_MAX - c->nnodes ||
	    c->nnodes + c->nclients < 2)
		return -EINVAL;
	if (c->key_max == 0 || c->key_max > LOCO_MAP_KEY_MAX || c->value_max > LOCO_MAP_VALUE_MAX ||
	    c->replicas == 0 || c->replicas > LOCO_MAP_REPLICAS_MAX || c->replicas > c->nnodes ||
	    c->capacity == 0 || c->capacity % LOCO_MAP_GROUP || c->capacity > (1u << 24))
		return -EINVAL;
	return 0;
}

/*
 * members_make -- @map's member tables from @c: nodes (cfg order), nsorted
 * (id and index, by id), all (holders and clients, ascending). -EINVAL: a
 * 0 id, an id twice, or this node not among them.
 */
static int members_make(loco_map_t *map, const loco_map_cfg_t *c)
{
	uint32_t n = c->nnodes + c->nclients;

	map->nodes = malloc(c->nnodes * sizeof(uint32_t));
	map->nsorted = malloc(c->nnodes * sizeof(uint64_t));
	map->all = malloc((size_t)n * sizeof(uint32_t));
	map->cpeers = malloc(MAP_PEERS_BUF * sizeof(uint32_t));
	map->out = calloc(c->nnodes, sizeof(*map->out));
	map->in_head = calloc(c->nnodes, sizeof(uint64_t));
	if (map->nodes == NULL || map->nsorted == NULL || map->all == NULL || map->cpeers == NULL ||
	    map->out == NULL || map->in_head == NULL)
		return -ENOMEM;
	memcpy(map->nodes, c->nodes, c->nnodes * sizeof(uint32_t));
	for (uint32_t i = 0; i < c->nnodes; i++)
		map->nsorted[i] = (uint64_t)c->nodes[i] << 32 | i;
	if (c->nclients)
		memcpy(map->all + c->nnodes, c->clients, c->nclients * sizeof(uint32_t));
	memcpy(map->all, c->nodes, c->nnodes * sizeof(uint32_t));
	qsort(map->nsorted, c->nnodes, sizeof(uint64_t), cmp_u64);
	qsort(map->all, n, sizeof(uint32_t), cmp_u32);
	map->nall = n;
	for (uint32_t i = 0; i < n; i++)
		if (map->all[i] == 0 || (i > 0 && map->all[i] == map->all[i - 1]))
			return -EINVAL;
	map->heap_bytes = c->nnodes * (sizeof(uint32_t) + sizeof(uint64_t) + sizeof(*map->out) +
	                               sizeof(uint64_t)) +
	                  (size_t)n * sizeof(uint32_t) + MAP_PEERS_BUF * sizeof(uint32_t);
	return map_member(map, map->me) ? 0 : -EINVAL;
}

int loco_map_create(loco_channel_t *ch, const char *name, const loco_map_cfg_t *cfg,
                    loco_map_t **out)
{
	char rname[LOCO_NAME_MAX];
	uint32_t *ids;
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
	ret = loco_handle_alloc(ch, sizeof(*map), (void **)&map);
	if (ret)
		return ret;
	map->m = loco_channel_manager(ch);
	map->ch = ch;
	map->me = loco_manager_node_id(map->m);
	ret = cfg_check(&c);
	if (ret) {
		loco_handle_free(map);
		return ret;
	}
	map->nnodes = c.nnodes;
	ret = members_make(map, &c);
	if (ret) {
		map->nnodes = map->out != NULL ? map->nnodes : 0;
		for (unsigned i = 0; map->out != NULL && i < map->nnodes; i++)
			pthread_mutex_init(&map->out[i].lock, NULL);
		pthread_mutex_init(&map->lock, NULL);
		pthread_mutex_init(&map->tlock, NULL);
		pthread_cond_init(&map->tcond, NULL);
		map_free(map);
		return ret;
	}
	map->key_max = c.key_max;
	map->key_area = (c.key_max + 7) & ~(size_t)7;
	map->value_max = c.value_max;
	map->slot_len = MAP_HDR + map->key_area + ((c.value_max + 7) & ~(size_t)7);
	map->group_len = map->slot_len * LOCO_MAP_GROUP;
	map->nslots = c.capacity;
	map->ngroups = c.capacity / LOCO_MAP_GROUP;
	map->R = c.replicas;
	map->rec_len = (map->slot_len + 63) & ~(size_t)63;
	/* a slice per holder: MAP_LOG_BYTES each, less with many holders (MAP_LOG_TOTAL in all) */
	map->log_recs =
	    (uint32_t)((MAP_LOG_TOTAL / map->nnodes < MAP_LOG_BYTES ? MAP_LOG_TOTAL / map->nnodes
	                                                            : MAP_LOG_BYTES) /
	               map->rec_len);
	if (map->log_recs > MAP_LOG_RECS)
		map->log_recs = MAP_LOG_RECS;
	if (map->log_recs < MAP_LOG_RECS_MIN)
		map->log_recs = MAP_LOG_RECS_MIN;
	map->slice_len = MAP_LOG_CTL + (size_t)map->log_recs * map->rec_len;
	map->stg_off = ((size_t)MAP_READERS * (map->group_len + 8) + 8 + 63) & ~(size_t)63;
	map->wstride = MAP_TGT_MAX * map->rec_len + 64;
	for (unsigned i = 0; i < map->nnodes; i++) {
		pthread_mutex_init(&map->out[i].lock, NULL);
		map->out[i].sync = 1; /* its head is read before the first write */
		map->in_head[i] = 1;
	}
	pthread_mutex_init(&map->lock, NULL);
	pthread_mutex_init(&map->tlock, NULL);
	pthread_cond_init(&map->tcond, NULL);
	ret = -ENOMEM;
	map->meta = calloc(map->nslots, sizeof(*map->meta));
	map->cbuf = malloc(sizeof(struct op_msg) + LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX);
	map->dbuf = malloc(map->rec_len);
	if (map->meta == NULL || map->cbuf == NULL || map->dbuf == NULL)
		goto err;
	for (unsigned i = 0; i < MAP_READERS; i++) {
		ret = loco_ack_key_create(map->m, &map->acks[i]);
		if (ret)
			goto err;
	}
	for (unsigned i = 0; i < MAP_WRITERS; i++) {
		ret = loco_ack_key_create_cfg(
		    map->m, &(loco_ack_key_cfg_t){.flags = LOCO_ACK_IGNORE_LEFT}, &map->wacks[i]);
		if (ret)
			goto err;
	}
	ret = loco_ack_key_create(map->m, &map->cack);
	if (ret)
		goto err;
	ret = loco_object_create(ch, name, &map_ops, map, &map->obj);
	if (ret)
		goto err;
	shape[0] = c.key_max;
	shape[1] = c.value_max;
	shape[2] = c.replicas;
	shape[3] = 2; /* the slot format's version (2: the logs) */
	ret = loco_object_agree(map->obj, "shape", XXH3_64bits(shape, sizeof(shape)) >> 1);
	if (ret == 0)
		ret = loco_object_agree(map->obj, "nodes",
		                        XXH3_64bits(c.nodes, c.nnodes * sizeof(uint32_t)) >> 1);
	if (ret == 0)
		ret = loco_region_create(map->obj, "tab", (size_t)map->nslots * map->slot_len,
		                         LOCO_ACCESS_READ, &map->tab);
	if (ret == 0)
		ret = loco_region_create(map->obj, "scr",
		                         map->stg_off + (size_t)MAP_WRITERS * map->wstride, 0,
		                         &map->scr);
	if (ret == 0)
		ret = loco_region_create(map->obj, "info", 8, LOCO_ACCESS_READ, &map->info);
	if (ret == 0 && map_node_index(map, map->me) >= 0) /* a key holder: its inbound logs */
		ret = loco_region_create(map->obj, "log", (size_t)map->nnodes * map->slice_len,
		                         LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &map->log);
	if (ret)
		goto err;
	/* the rpc's members: the list, or any node of the channel when it is longer than the
	   rpc takes (the handlers then refuse strangers: map_member) */
	if (map->nall <= MAP_RPC_LIST_MAX)
		loco_rpc_cfg_default(&rc, map->all, map->nall);
	else
		loco_rpc_cfg_default(&rc, NULL, 0);
	rc.inline_max = sizeof(struct op_msg) + c.key_max + c.value_max;
	if (rc.inline_max < 1024)
		rc.inline_max = 1024;
	rc.ring_bytes = 16 * rc.inline_max > 65536 ? 16 * rc.inline_max : 65536;
	rc.pull_bytes = 4096;
	rc.threads = 0; /* map_serve_thread runs the calls */
	rc.max_depth = LOCO_RPC_DEPTH_MAX;
	ret = loco_rpc_create(ch, rname, &rc, &map->ep);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.op", map_h_op, map, &map->op_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.rep", map_h_rep, map, &map->rep_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.done", map_h_done, map, &map->done_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.act", map_h_act, map, &map->act_id);
	if (ret == 0)
		ret = loco_rpc_register(map->ep, "map.bye", map_h_bye, map, &map->bye_id);
	if (ret)
		goto err;
	/* this node, and the peers paired before the object existed (later ones: peer_join) */
	map_set_bit(map, &map->present, map->me, 1);
	if (!c.join)
		map_set_bit(map, &map->active, map->me, 1);
	map->joining = c.join && map_node_index(map, map->me) >= 0;
	*(uint64_t *)loco_region_ptr(map->info) = map->joining ? INFO_JOINING : INFO_ACTIVE;
	if (map->log != NULL) {
		for (uint32_t s = 0; s < map->nnodes; s++)
			*(uint64_t *)((uint8_t *)loco_region_ptr(map->log) + s * map->slice_len) =
			    1;
		pthread_mutex_lock(&map->lock);
		map_absorb(map);
		pthread_mutex_unlock(&map->lock);
		ret = loco_poller_add(map->m, map_poll, map, MAP_POLL_NS, &map->poller);
		/* after the poller: a kick before would find none (its first turn drains) */
		if (ret == 0)
			ret = loco_object_on_msg(map->obj, map_on_msg, map);
		if (ret)
			goto err;
	}
	ids = map->cpeers; /* the copy thread does not run yet */
	np = loco_channel_peers(ch, ids, MAP_PEERS_BUF);
	for (int i = 0; i < np && i < (int)MAP_PEERS_BUF; i++)
		map_set_bit(map, &map->present, ids[i], 1);
	if (pthread_create(&map->sthr, NULL, map_serve_thread, map)) {
		ret = -ENOMEM;
		goto err;
	}
	map->sthr_started = 1;
	if (pthread_create(&map->thr, NULL, map_copy_thread, map)) {
		ret = -ENOMEM;
		goto err;
	}
	map->thr_started = 1;
	*out = map;
	return 0;

err:
	map_free(map);
	return ret;
}

void loco_map_destroy(loco_map_t *map)
{
	OBJ_DESTROY_CHECK(map);
	if (map->thr_started) {
		pthread_mutex_lock(&map->tlock);
		__atomic_store_n(&map->stop, 1, __ATOMIC_RELEASE);
		pthread_cond_signal(&map->tcond);
		pthread_mutex_unlock(&map->tlock);
		pthread_join(map->thr, NULL);
	}
	map_free(map);
}

int loco_map_sync(loco_map_t *map, int64_t timeout_ns)
{
	int64_t dl = obj_deadline(timeout_ns);
	loco_waiter_t w;
	int ret;

	OBJ_CHECK(map);
	ret = loco_object_sync(map->obj, timeout_ns);
	if (ret < 0)
		return ret;
	{
		/* every member here: their rpc endpoints made before the first call (a member
		   still to come, a joiner, is not waited for: calls to the others wait) */
		uint32_t *ids = malloc(MAP_PEERS_BUF * sizeof(uint32_t));
		int np, found = 0;

		if (ids == NULL)
			return -ENOMEM;
		np = loco_channel_peers(map->ch, ids, MAP_PEERS_BUF);
		for (int k = 0; k < np && k < (int)MAP_PEERS_BUF; k++)
			found += map_member(map, ids[k]);
		free(ids);
		if (found == (int)map->nall - 1 && map->nall <= MAP_RPC_LIST_MAX) {
			ret = loco_rpc_sync(map->ep, obj_left_ns(dl));
			if (ret)
				return ret;
		}
	}
	__atomic_store_n(&map->may_act, 1, __ATOMIC_RELEASE);
	map_wake(map);
	loco_waiter_init(&w, map->m);
	for (;;) {
		map_set_t p, a;

		map_set_load(&map->present, &p);
		map_set_load(&map->active, &a);
		if (map_set_subset(&p, &a))
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
 * group_read -- group @g of @owner's table into reader @r's buffer (this
 * node's own: copied). With @info (the first group a GET reads), @owner's
 * info word too, read before the group (requests to one node execute in
 * order), into *@info. Returns 0 or the fabric's error.
 */
static int group_read(loco_map_t *map, unsigned r, uint32_t owner, uint32_t g, uint64_t *info,
                      int64_t dl)
{
	uint8_t *scr = loco_region_ptr(map->scr);
	uint8_t *buf = scr + (size_t)r * map->group_len;
	size_t ioff = (size_t)MAP_READERS * map->group_len + 8 + (size_t)r * 8;
	loco_rref_t rr, ri;
	loco_rhandle_t hi;
	int ret;

	if (owner == map->me) {
		if (info != NULL)
			*info = __atomic_load_n((uint64_t *)loco_region_ptr(map->info),
			                        __ATOMIC_SEQ_CST);
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
	if (ret == 0 && info != NULL)
		ret = loco_region_remote(map->info, owner, &ri);
	if (ret == 0 && info != NULL)
		ret = loco_rhandle_bind(map->scr, &ri, &hi);
	if (ret == 0 && info != NULL) {
		/* with the group's READ (tcp: one socket write, one turn of the owner) */
		loco_rop_t op = {.opcode = LOCO_ROP_READ,
		                 .flags = LOCO_ROP_MORE,
		                 .local = map->scr,
		                 .loff = ioff,
		                 .len = 8,
		                 .acks = {map->acks[r]}};

		ret = loco_rop_post(&hi, &op);
	}
	if (ret == 0)
		ret = loco_read(map->scr, (size_t)r * map->group_len, &rr,
		                (size_t)g * map->group_len, map->group_len, map->acks[r]);
	if (ret == 0) {
		int64_t left = obj_left_ns(dl);

		ret = loco_ack_wait(map->acks[r],
		                    left < 0 || left > 1000000000ll ? 1000000000ll : left);
	}
	if (ret == 0 && info != NULL)
		memcpy(info, scr + ioff, 8);
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

	OBJ_CHECK(map);
	if (key == NULL || (val == NULL && cap))
		return -EINVAL;
	if (klen == 0 || klen > map->key_max)
		return -EMSGSIZE;
	if (__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	__atomic_add_fetch(&map->gets, 1, __ATOMIC_RELAXED);
	kh = map_key_hash(key, klen);
	r = reader_take(map);
	loco_waiter_init(&w, map->m);
	for (;;) {
		uint8_t *buf = (uint8_t *)loco_region_ptr(map->scr) + (size_t)r * map->group_len;
		uint32_t owner = 0, g0 = (uint32_t)(kh % map->ngroups);
		uint64_t info = 0;
		int torn = 0;
		map_set_t a;

		map_set_load(&map->active, &a);
		if (map_rank(map, kh, &a, &owner, 1) == 0) {
			ret = -EHOSTUNREACH;
			break;
		}
		ret = -ENOENT;
		for (uint32_t k = 0; k < map->ngroups && !torn; k++) {
			uint32_t g = (g0 + k) % map->ngroups;
			int end = 0;

			if (group_read(map, r, owner, g, k == 0 ? &info : NULL, dl)) {
				torn = 1;
				break;
			}
			/* the owner serves the keys of this set only once it absorbed it: took
			   every write its logs hold (map_absorb); until then, read again */
			if (k == 0 && !map_published(info, &a)) {
				if (owner == map->me) {
					pthread_mutex_lock(&map->lock);
					map_absorbed(map);
					pthread_mutex_unlock(&map->lock);
				}
				torn = 1;
				break;
			}
			for (uint32_t j = 0; j < LOCO_MAP_GROUP; j++) {
				uint8_t *s = buf + (size_t)j * map->slot_len;
				struct slot_hdr h;
				int c = map_slot_check(map, s);

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

	OBJ_CHECK(map);
	if (key == NULL || (val == NULL && vlen))
		return -EINVAL;
	if (klen == 0 || klen > map->key_max || vlen > map->value_max)
		return -EMSGSIZE;
	if (__atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	__atomic_add_fetch(&map->writes, 1, __ATOMIC_RELAXED);
	kh = map_key_hash(key, klen);
	len = map_msg_build(msg, op, 0, expect, key, klen, val, vlen);
	loco_waiter_init(&w, map->m);
	for (;;) {
		loco_rpc_ticket_t t;
		uint32_t owner;
		int st = 0;

		owner = map_owner_of(map, kh);
		if (owner == 0)
			return -EHOSTUNREACH;
		if (owner == map->me) {
			ret = map_owner_op(map, op, kh, key, klen, expect, val, vlen, &ver);
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
			/* a holder that left gracefully refused every write once it was leaving: a
			   call it never answered was not applied (an applied one was answered before
			   it handed its keys over), so it goes to the new owner */
			if (ret == -ECONNRESET &&
			    map_set_test(&map->byed, map_node_index(map, owner)))
				st = MAP_NOT_OWNER;
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
	OBJ_CHECK_OR(map, 0);
	if (key == NULL || klen == 0)
		return 0;
	return map_owner_of(map, map_key_hash(key, klen));
}

/*
 * loco_map_stats is versioned: programs built before loco 0.11 (LOCO_0.6)
 * have the 88-byte struct of the counters alone, and get only those; from
 * 0.11 on (LOCO_0.11, the default) the struct ends with what the node
 * holds now (pipes_in, pipes_out, mem_bytes). Test: tests/compat (the
 * map example built on loco 0.10's headers, under ASan).
 */
#define MAP_STATS_0_6 offsetof(loco_map_stats_t, pipes_in)
void map_stats_0_11(loco_map_t *map, loco_map_stats_t *st);
void map_stats_0_6(loco_map_t *map, loco_map_stats_t *st);
__asm__(".symver map_stats_0_11, loco_map_stats@@LOCO_0.11");
__asm__(".symver map_stats_0_6, loco_map_stats@LOCO_0.6");

void map_stats_0_6(loco_map_t *map, loco_map_stats_t *st)
{
	loco_map_stats_t all;

	if (loco_handle_check(map) || st == NULL)
		return;
	memset(&all, 0, sizeof(all));
	map_stats_0_11(map, &all);
	memcpy(st, &all, MAP_STATS_0_6); /* (the caller's struct ends there) */
}

void map_stats_0_11(loco_map_t *map, loco_map_stats_t *st)
{
	loco_rpc_stats_t rs;
	map_set_t a;
	uint8_t *tab;

	if (loco_handle_check(map) || st == NULL)
		return;
	memset(st, 0, sizeof(*st));
	st->gets = __atomic_load_n(&map->gets, __ATOMIC_RELAXED);
	st->get_reads = __atomic_load_n(&map->get_reads, __ATOMIC_RELAXED);
	st->get_retries = __atomic_load_n(&map->get_retries, __ATOMIC_RELAXED);
	st->writes = __atomic_load_n(&map->writes, __ATOMIC_RELAXED);
	st->redirects = __atomic_load_n(&map->redirects, __ATOMIC_RELAXED);
	st->resync = __atomic_load_n(&map->resync, __ATOMIC_RELAXED);
	tab = loco_region_ptr(map->tab);
	loco_rpc_stats(map->ep, &rs);
	st->pipes_in = rs.pipes_in;
	st->pipes_out = rs.pipes_out;
	st->mem_bytes = rs.mem_bytes + sizeof(*map) + map->heap_bytes +
	                (size_t)map->nslots * (map->slot_len + sizeof(*map->meta)) +
	                loco_region_len(map->scr) + 8 + (map->log ? loco_region_len(map->log) : 0) +
	                sizeof(struct op_msg) + LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX +
	                map->rec_len;
	pthread_mutex_lock(&map->lock);
	map_set_load(&map->active, &a);
	map_drain(map); /* what the logs hold counts, in the tables and in applied */
	st->applied = __atomic_load_n(&map->applied, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < map->nslots; i++) {
		struct slot_hdr *h = (void *)map_slot_ptr(map, tab, i);
		uint32_t reps[LOCO_MAP_REPLICAS_MAX];
		unsigned n, k;

		if (h->seq == 0)
			continue;
		st->used++;
		if (h->ver == 0)
			continue; /* a key being made: not an entry yet */
		n = map_rank(map, map_key_hash((uint8_t *)h + MAP_HDR, h->klen), &a, reps, map->R);
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
