/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map_move.c -- how the map's keys follow its members: the masks and the
 * object callbacks, the copy thread (restoring the replica count, giving
 * a joiner its keys), the join handshake (map.done, map.act) and the
 * graceful leave (loco_map_leave, map.bye). See map.c.
 */
#include "map_impl.h"

/* ---- joins and leaves ------------------------------------------------------ */

/* map_wake -- a change of the masks: the copy thread runs a pass. */
void map_wake(loco_map_t *map)
{
	__atomic_add_fetch(&map->epoch, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&map->tlock);
	pthread_cond_signal(&map->tcond);
	pthread_mutex_unlock(&map->tlock);
}

/* map_set_bit -- @node's bit (its nodes[] index) in set @m to @on; 1 if it changed. */
int map_set_bit(loco_map_t *map, map_set_t *m, uint32_t node, int on)
{
	int i = map_node_index(map, node);
	uint64_t bit, old, *w;

	if (i < 0)
		return 0;
	w = &m->w[(unsigned)i / 64];
	bit = 1ull << ((unsigned)i % 64);
	old = on ? __atomic_fetch_or(w, bit, __ATOMIC_SEQ_CST)
	         : __atomic_fetch_and(w, ~bit, __ATOMIC_SEQ_CST);
	if (((old & bit) != 0) == (on != 0))
		return 0;
	if (m == &map->active) { /* not absorbed here yet: readers wait for map_absorb */
		__atomic_add_fetch(&map->agen, 1, __ATOMIC_SEQ_CST);
		map_info_set(map, 0, 0);
	}
	return 1;
}

/*
 * map_show_owned -- under lock: every entry readable if this node serves its
 * key now, hidden otherwise. Returns how many changed.
 */
unsigned map_show_owned(loco_map_t *map)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < map->nslots; i++) {
		struct slot_hdr *h = (void *)map_slot_ptr(map, loco_region_ptr(map->tab), i);

		if (h->seq != 0)
			n += (unsigned)map_slot_show(map, i,
			                             map_owns(map, map_slot_key_hash(map, i)));
	}
	return n;
}

/*
 * copy_all -- every entry this node map_owns now goes to the nodes that
 * should hold it now (each takes it if newer); a slot whose write is
 * under way is waited for (its write may have missed a node that paired
 * since). Returns 0, or 1 when the masks changed meanwhile (or on stop).
 */
static int copy_all(loco_map_t *map, uint64_t epoch)
{
	uint8_t *tab = loco_region_ptr(map->tab);
	uint8_t key[LOCO_MAP_KEY_MAX];
	loco_waiter_t w;

	pthread_mutex_lock(&map->lock);
	map_drain(map); /* the writes its logs hold go with the copies */
	pthread_mutex_unlock(&map->lock);
	loco_waiter_init(&w, map->m);
	for (uint32_t i = 0; i < map->nslots; i++) {
		uint32_t reps[2 * LOCO_MAP_REPLICAS_MAX];
		struct slot_hdr *h = (void *)map_slot_ptr(map, tab, i);
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
			kh = map_key_hash(key, klen);
			map_slot_show(map, i, map_owns(map, kh));
			if (map_owns(map, kh))
				len = map_msg_build(
				    map->cbuf, 0, (h->vlen & MAP_DEL) != 0, h->ver, key, klen,
				    (uint8_t *)h + MAP_HDR + map->key_area, h->vlen & MAP_LEN);
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
		n = map_targets(map, kh, reps, NULL);
		if (n > 0 && map_forward(map, reps, n, map->cbuf, len) == 0)
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
	return v & INFO_STATE;
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
 * that this node map_owns went there, and every write since goes there too. A joiner whose
 * copies all came activates itself: "map.act" to every paired member, then it serves.
 */
static void peers_pass(loco_map_t *map, int copied)
{
	uint32_t *ids = map->cpeers;
	int np = loco_channel_peers(map->ch, ids, MAP_PEERS_BUF), changed = 0, me;
	map_set_t pend, done;

	if (np > (int)MAP_PEERS_BUF)
		np = (int)MAP_PEERS_BUF;
	for (int k = 0; k < np; k++) {
		int i = map_node_index(map, ids[k]);
		uint64_t v;

		if (i < 0 || map_set_test(&map->active, i) || !map_set_test(&map->present, i))
			continue;
		v = info_read(map, ids[k]);
		if (v == INFO_ACTIVE) {
			changed |= map_set_bit(map, &map->active, ids[k], 1);
		} else if (v == INFO_JOINING && copied && map_node_index(map, map->me) >= 0 &&
		           !__atomic_load_n(&map->joining, __ATOMIC_ACQUIRE) &&
		           !map_set_test(&map->pushed, i)) {
			if (call_until(map, ids[k], map->done_id) == 0)
				map_set_bit(map, &map->pushed, ids[k], 1);
		}
	}
	if (changed)
		map_wake(map);
	if (!__atomic_load_n(&map->joining, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&map->may_act, __ATOMIC_ACQUIRE))
		return; /* a joiner that joined the channel (loco_map_sync): done from every paired holder, and
	   every holder in the cluster's view paired (one that pairs late has keys to copy) */
	me = map_node_index(map, map->me);
	map_set_load(&map->present, &pend);
	pend.w[(unsigned)me / 64] &= ~(1ull << ((unsigned)me % 64));
	map_set_load(&map->done_from, &done);
	if (!map_set_subset(&pend, &done))
		return;
	{
		int nm = loco_manager_members(map->m, ids, MAP_PEERS_BUF);

		if (nm > (int)MAP_PEERS_BUF)
			nm = (int)MAP_PEERS_BUF;
		for (int k = 0; k < nm; k++) {
			int i = map_node_index(map, ids[k]);

			if (i >= 0 && ids[k] != map->me && !map_set_has(&pend, i))
				return;
		}
	}
	/* every paired key holder takes this node into its active set (a client learns it from
	   the info word: it makes no write and serves no read, so it needs no handshake, and
	   this node calls no client) */
	np = loco_channel_peers(map->ch, ids, MAP_PEERS_BUF);
	if (np > (int)MAP_PEERS_BUF)
		np = (int)MAP_PEERS_BUF;
	for (int k = 0; k < np; k++)
		if (map_node_index(map, ids[k]) >= 0 && call_until(map, ids[k], map->act_id) != 0)
			return; /* again on the next pass (a node that left is no longer paired) */
	pthread_mutex_lock(&map->lock);
	map_set_bit(map, &map->active, map->me, 1);
	__atomic_store_n(&map->joining, 0, __ATOMIC_RELEASE);
	map_info_set(map, INFO_ACTIVE, 0);
	map_absorb(map); /* every write of its keys since the copies is in its logs */
	pthread_mutex_unlock(&map->lock);
	map_wake(map);
}

/* map_h_done -- "map.done", on a joiner: the caller copied its keys here. */
int map_h_done(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;

	(void)ret;
	(void)cap;
	(void)rl;
	map_set_bit(map, &map->done_from, msg->caller, 1);
	map_wake(map);
	return 0;
}

/*
 * map_h_act -- "map.act": the caller, a joiner that has its keys, serves from
 * now on. Its keys are no longer this node's: no write starts here for
 * them; MAP_BUSY while one is under way (the joiner asks again), else
 * they are hidden from readers here before the reply.
 */
int map_h_act(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;
	int st = 0;

	(void)ret;
	(void)cap;
	(void)rl;
	pthread_mutex_lock(&map->lock);
	if (map_set_bit(map, &map->active, msg->caller, 1))
		__atomic_add_fetch(&map->epoch, 1, __ATOMIC_ACQ_REL);
	for (uint32_t i = 0; i < map->nslots && st == 0; i++)
		if (map->meta[i].busy && !map_owns(map, map_slot_key_hash(map, i)))
			st = MAP_BUSY;
	if (st == 0)
		map_absorb(map);
	pthread_mutex_unlock(&map->lock);
	map_wake(map);
	return st;
}

/*
 * map_h_bye -- "map.bye": the caller handed its keys over (loco_map_leave) and
 * leaves: it no longer serves nor holds any key, from now on here.
 */
int map_h_bye(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	loco_map_t *map = arg;

	(void)ret;
	(void)cap;
	(void)rl;
	pthread_mutex_lock(&map->lock);
	map_set_bit(map, &map->byed, msg->caller, 1);
	map_set_bit(map, &map->active, msg->caller, 0);
	map_set_bit(map, &map->present, msg->caller, 0);
	map_log_resync(map, msg->caller);
	map_absorb(map);
	pthread_mutex_unlock(&map->lock);
	map_wake(map);
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
		if (map_node_index(map, map->me) >= 0) {
			pthread_mutex_lock(&map->lock);
			map_absorb(map);
			pthread_mutex_unlock(&map->lock);
		}
	}
	return obj_now_ns() - *seen_ns >= MAP_SETTLE_NS;
}

void *map_copy_thread(void *arg)
{
	loco_map_t *map = arg;
	uint64_t done = 0, seen = 0;
	int64_t seen_ns = 0;

	pthread_mutex_lock(&map->tlock);
	while (!__atomic_load_n(&map->stop, __ATOMIC_ACQUIRE)) {
		uint64_t e = __atomic_load_n(&map->epoch, __ATOMIC_ACQUIRE);
		int holder = map_node_index(map, map->me) >= 0, pending;
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
		{
			map_set_t a, p;

			map_set_load(&map->active, &a);
			map_set_load(&map->present, &p);
			pending = !map_set_subset(&p, &a) ||
			          __atomic_load_n(&map->joining, __ATOMIC_ACQUIRE);
		}
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

/*
 * map_serve_thread -- runs the calls that reach this node (map.op and the
 * others): while calls come, it waits between them by the manager's
 * policy (LOCO_WAIT=spin: it spins, so a call reaches its handler without
 * a thread wake-up); once none came for MAP_BUSY_NS, it naps, from
 * MAP_NAP_NS doubling up to 1 ms, so that idle members (a replica: it
 * takes its writes from the logs) leave the CPUs to the busy ones.
 */
void *map_serve_thread(void *arg)
{
	loco_map_t *map = arg;
	int64_t last = obj_now_ns(), nap = MAP_NAP_NS;
	loco_waiter_t w;

	loco_waiter_init(&w, map->m);
	while (!__atomic_load_n(&map->sstop, __ATOMIC_ACQUIRE)) {
		int64_t now;

		if (loco_rpc_progress(map->ep, 64) > 0) {
			last = obj_now_ns();
			nap = MAP_NAP_NS;
			loco_waiter_reset(&w);
			continue;
		}
		now = obj_now_ns();
		if (now - last < MAP_BUSY_NS || loco_waiter_policy(&w) != LOCO_WAIT_SPIN) {
			loco_waiter_pause(&w);
		} else {
			struct timespec ts = {0, (long)nap};

			nanosleep(&ts, NULL);
			nap = nap * 2 > 1000000 ? 1000000 : nap * 2;
		}
	}
	return NULL;
}

static void map_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)obj;
	(void)view;
	if (map_set_bit(arg, &((loco_map_t *)arg)->present, node, 1)) {
		map_log_resync(arg, node); /* a new incarnation: its logs start afresh */
		map_wake(arg);
	}
}

/* map_peer_leave -- @node left: out of every mask (its next incarnation starts afresh) */
static void map_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_map_t *map = arg;
	int changed;

	(void)obj;
	(void)view;
	changed = map_set_bit(map, &map->active, node, 0);
	changed |= map_set_bit(map, &map->present, node, 0);
	map_set_bit(map, &map->done_from, node, 0);
	map_set_bit(map, &map->pushed, node, 0);
	map_log_resync(map, node);
	if (changed) /* a client's leave changes nothing here */
		map_wake(map);
}

const struct loco_object_ops map_ops = {
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

	OBJ_CHECK(map);
	if (map_node_index(map, map->me) < 0 || __atomic_load_n(&map->leaving, __ATOMIC_ACQUIRE))
		return 0;
	tab = loco_region_ptr(map->tab);
	/* 1. no write starts here any more; the ones under way finish */
	map_info_set(map, INFO_LEAVING, 0);
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
	/* 2. every entry to the nodes that hold it without this one (its logs' too) */
	pthread_mutex_lock(&map->lock);
	map_drain(map);
	pthread_mutex_unlock(&map->lock);
	for (uint32_t i = 0; i < map->nslots; i++) {
		uint32_t reps[LOCO_MAP_REPLICAS_MAX];
		struct slot_hdr *h = (void *)map_slot_ptr(map, tab, i);
		map_set_t pres;
		int me = map_node_index(map, map->me);
		size_t len = 0;
		unsigned n, k;
		uint64_t kh = 0;

		pthread_mutex_lock(&map->lock);
		if (h->seq != 0 && h->ver != 0) {
			memcpy(key, (uint8_t *)h + MAP_HDR, h->klen);
			kh = map_key_hash(key, h->klen);
			len = map_msg_build(map->cbuf, 0, (h->vlen & MAP_DEL) != 0, h->ver, key,
			                    h->klen, (uint8_t *)h + MAP_HDR + map->key_area,
			                    h->vlen & MAP_LEN);
		}
		pthread_mutex_unlock(&map->lock);
		if (len == 0)
			continue;
		map_set_load(&map->active, &pres);
		pres.w[(unsigned)me / 64] &= ~(1ull << ((unsigned)me % 64));
		n = map_rank(map, kh, &pres, reps, map->R);
		for (k = 0; k < n && ret == 0; k++)
			ret = map_forward(map, &reps[k], 1, map->cbuf, len);
		if (ret)
			return ret;
	}
	/* 3. hidden from readers: the ones that still route here read again */
	pthread_mutex_lock(&map->lock);
	for (uint32_t i = 0; i < map->nslots; i++)
		map_slot_show(map, i, 0);
	pthread_mutex_unlock(&map->lock);
	/* 4. every member takes this node out of its sets: the new owners serve at once (a
	   client, too: a write it sent here that was never answered was never applied) */
	{
		uint32_t *ids = malloc(MAP_PEERS_BUF * sizeof(uint32_t));
		int np;

		if (ids == NULL)
			return -ENOMEM;
		np = loco_channel_peers(map->ch, ids, MAP_PEERS_BUF);
		if (np > (int)MAP_PEERS_BUF)
			np = (int)MAP_PEERS_BUF;
		for (int k = 0; k < np && ret == 0; k++) {
			if (!map_member(map, ids[k]))
				continue;
			ret = call_until(map, ids[k], map->bye_id);
			if (ret == -ECONNRESET)
				ret = 0;
		}
		free(ids);
	}
	return ret;
}
