/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * chan_object.c -- the objects' side of a channel (chan.h):
 * loco_object_sync(), which waits until the peers hold an object, and
 * object messages (loco_object_on_msg(), loco_object_send()), which
 * travel on the control connections and are delivered by channel.c's
 * callback queue.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "conn.h"
#include "handle.h"
#include "log.h"
#include "wait.h"

/*
 * obj_held_by -- @p announced @o: every parameter of it, and a region of
 * it when it has any listed one here. Not every region: some are one node's only (an
 * owned_var's staging ring on its owner). The first region an object
 * makes is the one pushed to (the stock objects make it first). m->lock.
 */
static int obj_held_by(const loco_object_t *o, const struct lc_peer *p)
{
	char full[LOCO_NAME_MAX + 2];
	int region = 1;

	for (const struct loco_region *r = o->regions; r != NULL; r = r->next)
		if (r->idx != LC_IDX_NONE)
			region = 0; /* it announces a region: the peer must announce one */

	if (!region) { /* a region named "object/...": they sort together, from "object/" on */
		size_t n = strlen(o->name);

		snprintf(full, sizeof(full), "%s/", o->name);
		for (uint32_t i = lc_peer_entry_lower(p, full, 0);
		     i < p->nregions && !region && strncmp(p->regions[i].name, full, n + 1) == 0;
		     i++)
			region = !(p->regions[i].access & LC_REGION_PARAM);
	}
	if (!region)
		return 0;
	for (unsigned k = 0; k < o->nparams; k++) {
		lc_param_name(o, &o->params[k], full);
		if (lc_peer_entry(p, full, 1) == NULL)
			return 0;
	}
	return 1;
}

/*
 * obj_sync_count -- the peers holding @o in *@held, those paired in the
 * channel in *@paired; the first that misses it in @miss[]. m->lock held.
 */
static void obj_sync_count(const loco_object_t *o, uint32_t *held, uint32_t *paired, uint32_t *miss,
                           uint32_t nmiss_max, uint32_t *nmiss)
{
	*held = *paired = *nmiss = 0;
	struct lc_peer *p;

	for (uint32_t i = 0; (p = lc_peer_next(o->ch, &i)) != NULL;) {
		if (!__atomic_load_n(&p->present, __ATOMIC_RELAXED))
			continue;
		(*paired)++;
		if (obj_held_by(o, p))
			(*held)++;
		else if (*nmiss < nmiss_max)
			miss[(*nmiss)++] = p->node;
	}
}

int loco_object_sync(loco_object_t *obj, int64_t timeout_ns)
{
	uint64_t start = lc_now_ns();
	unsigned delay_us = 50;
	loco_manager_t *m;
	uint32_t miss[16];
	int ret = lc_handle_ok(obj);

	if (ret)
		return ret;
	m = obj->ch->m;
	for (;;) {
		uint32_t held, paired, nmiss, pending;

		ret = loco_object_status(obj);
		if (ret)
			return ret;
		if (loco_manager_partitioned(m))
			return -LOCO_EPARTITION;
		pthread_mutex_lock(&m->lock);
		obj_sync_count(obj, &held, &paired, miss, 16, &nmiss);
		pending = obj->ch->cb_pending;
		pthread_mutex_unlock(&m->lock);
		/* the mismatch check runs as the entries arrive: look again first */
		ret = loco_object_status(obj);
		if (ret)
			return ret;
		if (held == paired && pending == 0) /* and the objects' peer_join callbacks ran */
			return (int)held;
		if (timeout_ns >= 0 && lc_now_ns() - start >= (uint64_t)timeout_ns) {
			char list[16 * 11 + 8];
			size_t off = 0;

			list[0] = '\0';
			for (uint32_t i = 0; i < nmiss; i++)
				off += (size_t)snprintf(list + off, sizeof(list) - off, " %u",
				                        miss[i]);
			lc_log_warn(
			    "manager: channel %s object %s: sync timed out: %u of %u paired "
			    "peer(s) hold it; missing on node(s)%s%s",
			    obj->ch->name, obj->name, held, paired, list,
			    paired - held > nmiss ? " ..." : "");
			return -ETIMEDOUT;
		}
		usleep(delay_us);
		delay_us = delay_us < 2000 ? delay_us * 2 : 2000;
	}
}

/* ------------------------------------------------------------------ */
/* object messages                                                    */

/*
 * A control connection whose queue holds more than this refuses object
 * messages (-ENOBUFS) rather than risk filling up, which would drop the
 * member (conn.h): set-up messages wait for a connection that keeps up.
 */
#define LC_OBJ_MSG_QUEUED (LC_CONN_TXQ_MAX / 2)

_Static_assert(LOCO_OBJECT_MSG_MAX == LC_OBJ_MSG_MAX, "an object message fits one OBJ");
/*
 * The longest announcement (LC_CHAN_ENTRIES_MAX entries of the longest
 * names, 2.5 MB) fits half a control connection's queue: an application
 * thread queues all of its pages at once, and a queue that overflows
 * drops the member (conn.h).
 */
_Static_assert((LC_CHAN_ENTRIES_MAX / LC_MAX_REGIONS) * (LC_CTRL_HDR_LEN + 2 + LC_NAME_MAX + 20 +
                                                         LC_MAX_REGIONS * (2 + LC_NAME_MAX + 24)) <=
                   LC_CONN_TXQ_MAX / 2,
               "the longest announcement fits half a control queue");
_Static_assert(LC_CHAN_ENTRIES_MAX % LC_RR_PAGE == 0 && LC_CHAN_ENTRIES_MAX < LC_IDX_NONE,
               "local region indexes fill whole pages, and none is LC_IDX_NONE");

int loco_object_on_msg(loco_object_t *obj, loco_object_msg_fn fn, void *arg)
{
	loco_manager_t *m;
	int ret = lc_handle_ok(obj);

	if (ret)
		return ret;
	m = obj->ch->m;
	pthread_mutex_lock(&m->lock);
	obj->msg_fn = fn;
	obj->msg_arg = arg;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int loco_object_send(loco_object_t *obj, uint32_t node, const void *msg, size_t len)
{
	loco_channel_t *ch;
	loco_manager_t *m;
	struct lc_member *mb;
	struct lc_peer *p;
	struct lc_msg *tx;
	int ret = lc_handle_ok(obj);

	if (ret)
		return ret;
	if (msg == NULL && len > 0)
		return -EINVAL;
	if (len > LOCO_OBJECT_MSG_MAX)
		return -EMSGSIZE;
	ch = obj->ch;
	m = ch->m;
	/* pairs with the release store of loco_channel_join() */
	if (!__atomic_load_n(&ch->joined, __ATOMIC_ACQUIRE))
		return -LOCO_ENOTJOINED;
	pthread_mutex_lock(&m->lock);
	p = lc_peer_get(ch, node);
	mb = node != m->node_id ? lc_member_find(m, node) : NULL;
	if (p == NULL || !__atomic_load_n(&p->present, __ATOMIC_RELAXED) || mb == NULL || !mb->up ||
	    mb->conn == NULL || lc_conn_is_dead(mb->conn)) {
		ret = -ENOTCONN;
		goto out;
	}
	if (lc_conn_queued(mb->conn) > LC_OBJ_MSG_QUEUED) {
		ret = -ENOBUFS;
		goto out;
	}
	tx = lc_members_tx_msg(&m->members); /* m->lock serializes its users */
	tx->type = LC_MSG_OBJ;
	snprintf(tx->u.obj.chan, sizeof(tx->u.obj.chan), "%s", ch->name);
	snprintf(tx->u.obj.obj, sizeof(tx->u.obj.obj), "%s", obj->name);
	tx->u.obj.len = (uint32_t)len;
	if (len > 0)
		memcpy(tx->u.obj.data, msg, len);
	ret = lc_conn_send(mb->conn, tx);
out:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

int loco_handle_alloc(loco_channel_t *ch, size_t size, void **out)
{
	int ret = loco_handle_check(ch);
	void *h;

	if (ret)
		return ret;
	if (out == NULL || size == 0)
		return -EINVAL;
	h = lc_handle_alloc(ch->m, size);
	if (h == NULL)
		return -ENOMEM;
	*out = h;
	return 0;
}
