/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe.c -- the rpipe's set-up and the state both ends share (the
 * design is in rpipe_impl.h). Public API only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obj_util.h"
#include "rpipe_impl.h"

/* rp_peer_leave -- on the progress thread: the other end left for good. */
static void rp_peer_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpipe_t *p = arg;

	(void)obj, (void)view;
	/* after a reset, the leave of the incarnation that was lost is no news */
	if (node == (p->is_writer ? p->reader : p->writer) &&
	    !__atomic_load_n(&p->renewing, __ATOMIC_ACQUIRE))
		__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE); /* pairs with is_lost() */
}

/* incs -- both ends' incarnations in the installed view: 0, or -ENOENT */
static int incs(loco_rpipe_t *p, uint64_t inc[2])
{
	if (loco_manager_member_incarnation(p->m, p->writer, &inc[0]) != 0 ||
	    loco_manager_member_incarnation(p->m, p->reader, &inc[1]) != 0)
		return -ENOENT;
	return 0;
}

/* sess_of -- the session of both ends' incarnations @inc (writer, reader) */
static uint64_t sess_of(const uint64_t inc[2])
{
	return XXH3_64bits(inc, 2 * sizeof(inc[0]));
}

/*
 * rp_peer_join -- on the progress thread: a node paired. The other end's
 * pairing gives the session its records will be summed with (a hash of
 * both incarnations, as rp_sess() works it out), kept for a push reader
 * whose writer leaves before the reader first looked: what landed in
 * its ring is still taken then (rp_sess()).
 */
static void rp_peer_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	loco_rpipe_t *p = arg;
	uint64_t inc[2];

	(void)obj, (void)view;
	if (!p->is_writer && !p->pull && node == p->writer && incs(p, inc) == 0)
		__atomic_store_n(&p->join_sess, sess_of(inc), __ATOMIC_RELEASE);
}

static const struct loco_object_ops rp_ops = {
    .peer_join = rp_peer_join,
    .peer_leave = rp_peer_leave,
};

/* rp_new -- the state both kinds of pipe share, without regions: 0 or -errno */
static int rp_new(loco_channel_t *ch, uint32_t writer, uint32_t reader, size_t ring_bytes,
                  loco_rpipe_t **out)
{
	loco_rpipe_t *p;
	uint32_t me;
	int ret;

	if (ch == NULL || out == NULL || writer == 0 || reader == 0 || writer == reader ||
	    ring_bytes < LOCO_RPIPE_RING_MIN || ring_bytes > LOCO_RPIPE_RING_MAX ||
	    ring_bytes % 64 != 0)
		return -EINVAL;
	me = loco_manager_node_id(loco_channel_manager(ch));
	if (me != writer && me != reader)
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*p), (void **)&p);
	if (ret)
		return ret;
	p->ch = ch;
	p->m = loco_channel_manager(ch);
	p->size = ring_bytes;
	p->mask = (ring_bytes & (ring_bytes - 1)) == 0 ? ring_bytes - 1 : 0;
	p->batch = ring_bytes / LOCO_RPIPE_RETURN_DIV;
	p->writer = writer;
	p->reader = reader;
	p->me = me;
	p->is_writer = me == writer;
	ret = -ENOMEM;
	p->xs = XXH3_createState();
	if (p->xs == NULL)
		goto err_free;
	ret = loco_ack_key_create(p->m, &p->dack);
	if (ret)
		goto err_free;
	ret = loco_ack_key_create(p->m, &p->cack);
	if (ret)
		goto err_dack;
	*out = p;
	return 0;
err_dack:
	loco_ack_key_destroy(p->dack);
err_free:
	XXH3_freeState(p->xs);
	loco_handle_free(p);
	return ret;
}

/* rp_free -- what rp_new() made */
static void rp_free(loco_rpipe_t *p)
{
	loco_ack_key_destroy(p->dack); /* waits for the WRITEs in flight */
	loco_ack_key_destroy(p->cack);
	XXH3_freeState(p->xs);
	loco_handle_free(p);
}

int rpipe_open_unlisted(loco_object_t *obj, const char *prefix, uint32_t writer, uint32_t reader,
                        size_t ring_bytes, loco_rpipe_t **out)
{
	char rn[LOCO_NAME_MAX + 1], cn[LOCO_NAME_MAX + 1];
	loco_rpipe_t *p;
	int ret;

	if (obj == NULL || prefix == NULL || out == NULL ||
	    snprintf(rn, sizeof(rn), "%s.ring", prefix) >= (int)sizeof(rn) ||
	    snprintf(cn, sizeof(cn), "%s.ctl", prefix) >= (int)sizeof(cn))
		return -EINVAL;
	ret = rp_new(loco_object_channel(obj), writer, reader, ring_bytes, &p);
	if (ret)
		return ret;
	p->unlisted = 1;
	p->obj = obj;
	/* the writer's ctl and shadow are read by a reader that mends (rpipe_mend.c) */
	ret = loco_region_create(obj, cn, CTL_LEN,
	                         LOCO_ACCESS_WRITE | LOCO_ACCESS_UNLISTED |
	                             (p->is_writer ? LOCO_ACCESS_READ : 0),
	                         &p->ctl);
	if (ret == 0)
		ret = loco_region_create(obj, rn, ring_bytes,
		                         (p->is_writer ? LOCO_ACCESS_READ : LOCO_ACCESS_WRITE) |
		                             LOCO_ACCESS_UNLISTED,
		                         &p->ring);
	if (ret) {
		rp_free(p); /* the regions go with @obj */
		return ret;
	}
	p->base = loco_region_ptr(p->ring);
	p->ctlw = loco_region_ptr(p->ctl);
	*out = p;
	return 0;
}

void rpipe_refs(const loco_rpipe_t *p, loco_rref_t *ring, loco_rref_t *ctl)
{
	(void)loco_region_rref(p->ring, ring);
	(void)loco_region_rref(p->ctl, ctl);
}

int rpipe_attach(loco_rpipe_t *p, const loco_rref_t *rring, const loco_rref_t *rctl, uint64_t sess)
{
	if (p->have_sess)
		return -EBUSY;
	if (rring != NULL) /* the reader's ring; for a reader, the writer's shadow */
		(void)loco_rhandle_bind(p->ring, rring, &p->rring); /* (no NULL: cannot fail) */
	(void)loco_rhandle_bind(p->ctl, rctl, &p->rctl);
	p->can_mend = !p->is_writer && !p->pull && rring != NULL;
	if (p->can_mend)
		rp_mend_mark(p);
	p->sess = sess;
	p->have_peer = 1;
	__atomic_store_n(&p->have_sess, 1, __ATOMIC_RELEASE);
	return 0;
}

void rpipe_lose(loco_rpipe_t *p)
{
	__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE); /* pairs with is_lost() */
}

void loco_rpipe_cfg_default(loco_rpipe_cfg_t *cfg)
{
	if (cfg != NULL)
		*cfg = (loco_rpipe_cfg_t){.ring_bytes = 64 * 1024,
		                          .return_div = LOCO_RPIPE_RETURN_DIV,
		                          .mode = LOCO_RPIPE_PUSH};
}

/* rp_create -- this node's end of a listed pipe (loco_rpipe_create_cfg()). */
static int rp_create(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                     size_t ring_bytes, uint32_t return_div, uint32_t mode, loco_rpipe_t **out)
{
	unsigned ring_acc, ctl_acc = LOCO_ACCESS_WRITE;
	loco_rpipe_t *p;
	int ret;

	if (name == NULL || out == NULL)
		return -EINVAL;
	ret = rp_new(ch, writer, reader, ring_bytes, &p);
	if (ret)
		return ret;
	p->batch = ring_bytes / return_div;
	p->pull = mode == LOCO_RPIPE_PULL;
	ret = loco_object_create(ch, name, &rp_ops, p, &p->obj);
	if (ret)
		goto err_new;
	/*
	 * both ends must name the same ends, ring and mode: checked as they
	 * pair. The ends go in one parameter (writer << 32 | reader), the
	 * mode with the ring (ring_bytes | mode << 32: a push pipe's value is
	 * its size, as before pull pipes were): a pipe takes 4 of the
	 * channel's announced entries (2 parameters, 2 regions).
	 */
	ret = loco_object_agree(p->obj, "ends", (uint64_t)writer << 32 | reader);
	if (ret == 0)
		ret = loco_object_agree(p->obj, "ring", ring_bytes | (uint64_t)mode << 32);
	if (ret)
		goto err_obj;
	/*
	 * push: the reader's ring is written; pull: the writer's is read, and
	 * its tail word; push too, by a reader that mends (rpipe_mend.c)
	 */
	ring_acc = p->is_writer ? LOCO_ACCESS_READ : p->pull ? 0 : LOCO_ACCESS_WRITE;
	ctl_acc |= p->is_writer ? LOCO_ACCESS_READ : 0;
	/* the ctl first: loco_object_sync() waits for the first region */
	ret = loco_region_create(p->obj, "ctl", CTL_LEN, ctl_acc, &p->ctl);
	if (ret)
		goto err_obj;
	ret = loco_region_create(p->obj, "ring", ring_bytes, ring_acc, &p->ring);
	if (ret)
		goto err_obj;
	p->base = loco_region_ptr(p->ring);
	p->ctlw = loco_region_ptr(p->ctl);
	*out = p;
	return 0;

err_obj:
	loco_object_destroy(p->obj); /* and its regions */
err_new:
	rp_free(p);
	return ret;
}

int loco_rpipe_create_cfg(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                          const loco_rpipe_cfg_t *cfg, loco_rpipe_t **out)
{
	if (cfg == NULL || cfg->return_div < 1 || cfg->return_div > LOCO_RPIPE_RETURN_DIV_MAX ||
	    (cfg->mode != LOCO_RPIPE_PUSH && cfg->mode != LOCO_RPIPE_PULL))
		return -EINVAL;
	return rp_create(ch, name, writer, reader, cfg->ring_bytes, cfg->return_div, cfg->mode,
	                 out);
}

int loco_rpipe_create(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                      size_t ring_bytes, loco_rpipe_t **out)
{
	return rp_create(ch, name, writer, reader, ring_bytes, LOCO_RPIPE_RETURN_DIV,
	                 LOCO_RPIPE_PUSH, out);
}

void loco_rpipe_destroy(loco_rpipe_t *p)
{
	OBJ_DESTROY_CHECK(p);
	/*
	 * Only one data WRITE at a time is signaled: the unsignaled ones
	 * after it may still be queued, from the shadow about to be freed.
	 * WRITEs to one node execute in order, so one signaled ctl WRITE
	 * (the last "want" again: the reader takes it as before) completes
	 * after every one of them, and destroying cack waits for it.
	 */
	if (p->pull) {
		rp_pull_destroy(p);
	} else if (p->is_writer && p->have_sess && !is_lost(p)) {
		loco_waiter_t w;
		int64_t dl = obj_deadline(5 * 1000000000ll);

		loco_waiter_init(&w, p->m);
		while (rp_ctl_put(p, p->asked) == -EAGAIN && obj_now_ns() < dl)
			loco_waiter_pause(&w);
	}
	if (!p->unlisted)
		loco_object_destroy(p->obj);
	rp_free(p);
}

size_t loco_rpipe_max_msg(const loco_rpipe_t *p)
{
	OBJ_CHECK_OR(p, 0);
	return (size_t)p->size - LOCO_RPIPE_OVERHEAD;
}

void loco_rpipe_stats(const loco_rpipe_t *p, loco_rpipe_stats_t *st)
{
	if (loco_handle_check(p) == 0 && st != NULL)
		*st = p->st;
}

/* rp_peer -- look the other end's regions up once: 0, -ENOENT (not paired yet), or an error. */
int rp_peer(loco_rpipe_t *p)
{
	uint32_t other = p->is_writer ? p->reader : p->writer;
	loco_rref_t ctl, ring;
	int ret;

	if (p->have_peer)
		return 0;
	if (p->unlisted)
		return -ENOENT; /* rpipe_attach() tells */
	/* every end posts to the other's ring: writes, pulls, or mends (rpipe_mend.c) */
	ret = loco_region_remote(p->ctl, other, &ctl);
	if (ret == 0)
		ret = loco_region_remote(p->ring, other, &ring);
	if (ret == 0)
		ret = loco_rhandle_bind(p->ring, &ring, &p->rring);
	if (ret == 0)
		ret = loco_rhandle_bind(p->ctl, &ctl, &p->rctl);
	if (ret == 0) {
		p->can_mend = !p->is_writer;
		p->have_peer = 1;
	}
	return ret;
}

/*
 * sess_left -- a push reader whose writer left before it paired: the
 * session of the writer's pairing (rp_peer_join()), without its regions
 * (no space returned, no mending: the pipe is lost), so that the records
 * that landed before the leave are taken, as a paired reader takes them.
 * 0, or -ENOENT.
 */
static int sess_left(loco_rpipe_t *p)
{
	uint64_t s = __atomic_load_n(&p->join_sess, __ATOMIC_ACQUIRE);

	if (!is_lost(p) || s == 0 || s == p->old_sess)
		return -ENOENT;
	p->sess = s;
	p->have_peer = 0;
	p->can_mend = 0;
	p->have_sess = 1;
	return 0;
}

int rp_sess(loco_rpipe_t *p)
{
	uint64_t inc[2], again[2], s;
	loco_rref_t probe;
	int ret;

	if (__atomic_load_n(&p->have_sess, __ATOMIC_ACQUIRE)) /* pairs with rpipe_attach() */
		return 0;
	if (p->unlisted)
		return -ENOENT;
	/*
	 * the incarnations, the regions, the incarnations again: regions read
	 * between two equal readings are those incarnations' (a member's
	 * regions are dropped before a view can hold its next incarnation)
	 */
	if (loco_region_remote(p->ctl, p->is_writer ? p->reader : p->writer, &probe) != 0)
		return sess_left(p); /* not paired: no lock taken (a reader polls this) */
	if (incs(p, inc) != 0)
		return sess_left(p); /* paired just before the view that has it: soon */
	p->have_peer = 0;
	ret = rp_peer(p);
	if (ret)
		return ret;
	if (incs(p, again) != 0 || memcmp(inc, again, sizeof(inc)) != 0) {
		p->have_peer = 0;
		return -ENOENT; /* the view moved on meanwhile: look again */
	}
	s = sess_of(inc);
	if (s == p->old_sess) {
		p->have_peer = 0; /* those were the old one's regions: look again */
		return -ENOENT;   /* nobody new yet: the old one may still be in the view */
	}
	if (p->is_writer || p->pull) {
		/*
		 * the old session's WRITEs (a pull reader's READs) that failed after a reset: the old
		 * incarnation's link was closed (its operations completed) before
		 * the view that let the new one pair
		 */
		(void)loco_ack_wait(p->dack, 0);
		(void)loco_ack_wait(p->cack, 0);
	}
	p->sess = s;
	if (p->can_mend)
		rp_mend_mark(p);
	p->have_sess = 1;
	/* a new incarnation paired: the old one's leave ran before (views come in order) */
	__atomic_store_n(&p->renewing, 0, __ATOMIC_RELEASE);
	return 0;
}

int loco_rpipe_reset(loco_rpipe_t *p)
{
	OBJ_CHECK(p);
	if (!is_lost(p))
		return -EBUSY;
	if (p->is_writer) {
		(void)loco_ack_wait(p->dack, 0); /* the lost session's errors */
		(void)loco_ack_wait(p->cack, 0);
		p->tail = 0;
		p->asked = 0;
		p->resv_len = 0;
		__atomic_store_n(&p->ctlw[0], 0, __ATOMIC_RELEASE); /* the old reader's head */
		__atomic_store_n(&p->ctlw[CTL_TAIL], 0, __ATOMIC_RELEASE);
	} else {
		rp_mend_reset(p);
		p->head = 0;
		p->published = 0;
		p->peek_rec = 0;
	}
	if (p->pull)
		rp_pull_reset(p);
	p->seq = 0;
	p->ctl_err = 0;
	if (p->have_sess)
		p->old_sess = p->sess;
	p->have_sess = 0;
	p->have_peer = 0;
	p->st.resets++;
	__atomic_store_n(&p->renewing, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&p->lost, 0, __ATOMIC_RELEASE); /* pairs with is_lost() */
	return 0;
}

/*
 * loco_rpipe_sync -- wait until the other end's regions are known (it
 * made the pipe and paired): only the two ends matter, not the channel's
 * other nodes (so not loco_object_sync()).
 */
int loco_rpipe_sync(loco_rpipe_t *p, int64_t timeout_ns)
{
	int64_t deadline = obj_deadline(timeout_ns);
	loco_waiter_t w;
	int ret;

	OBJ_CHECK(p);
	loco_waiter_init(&w, p->m);
	while ((ret = rp_sess(p)) == -ENOENT) {
		/* a mismatch or an unjoined channel: rp_sess() says only -ENOENT */
		int st = p->unlisted ? 0 : loco_object_status(p->obj);

		if (st)
			return st;
		if (loco_channel_partitioned(p->ch))
			return -LOCO_EPARTITION;
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	return ret;
}

/* rp_lose -- the pipe is unusable from now on. */
int rp_lose(loco_rpipe_t *p)
{
	__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE);
	return -ECONNRESET;
}

/*
 * rp_check -- the state every call looks at first: 0 or the error to
 * return. An unlisted end's owner checks its object and the partition
 * itself (once per call of its own, not twice).
 */
int rp_check(loco_rpipe_t *p)
{
	int ret = p->unlisted ? 0 : loco_object_status(p->obj);

	if (ret)
		return ret;
	if (p->is_writer && p->have_sess) { /* before: the lost session's, if any */
		if (p->sig_pending) {
			/*
			 * errors of completed data WRITEs: the signaled one says. A
			 * link's: the reader mends (rpipe_mend.c); others lose the pipe.
			 */
			ret = loco_ack_wait(p->dack, 0);
			if (ret != 0 && ret != -ETIMEDOUT && !rp_link_err(p, ret))
				return rp_lose(p);
			if (ret != -ETIMEDOUT)
				p->sig_pending = 0;
		}
		if (is_lost(p))
			return -ECONNRESET;
	}
	if (!p->unlisted && loco_channel_partitioned(p->ch))
		return -LOCO_EPARTITION;
	return 0;
}

int rp_ctl_reap(loco_rpipe_t *p)
{
	int ret = loco_ack_wait(p->cack, 0);

	if (ret == 0 || ret == -ETIMEDOUT)
		return 0;
	if (p->is_writer && !rp_link_err(p, ret))
		return rp_lose(p);
	p->ctl_err = 1; /* lost with a link: a head (a push writer's want) is written again */
	return 0;
}

/*
 * rp_ctl_put -- write @v into the other end's ctl word 0 from a source slot.
 * Every ctl WRITE is signaled and WRITEs to one node complete in order:
 * with fewer than CTL_SLOTS outstanding, the slot used CTL_SLOTS WRITEs
 * ago is free. Returns 0 when posted, -EAGAIN (try later), or an error.
 */
int rp_ctl_put(loco_rpipe_t *p, uint64_t v)
{
	unsigned slot = (unsigned)(p->ctl_n % CTL_SLOTS);
	int ret;

	if (loco_ack_outstanding(p->cack) >= CTL_SLOTS)
		return -EAGAIN;
	ret = rp_ctl_reap(p);
	if (ret)
		return ret;
	__atomic_store_n(&p->ctlw[CTL_SRC + slot], v, __ATOMIC_RELEASE);
	ret = loco_rop_post(&p->rctl, &(loco_rop_t){.opcode = LOCO_ROP_WRITE,
	                                            .local = p->ctl,
	                                            .loff = (CTL_SRC + slot) * 8,
	                                            .len = 8,
	                                            .acks = {p->cack}});
	if (ret == 0)
		p->ctl_n++;
	return ret;
}
