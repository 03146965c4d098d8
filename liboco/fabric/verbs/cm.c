/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cm.c -- connection management on rdma_cm: the fab's event thread
 * (connect requests held in the accept queue until fab_link_admit()
 * accepts them, the caps and the bound on held links, DISCONNECTED and
 * errors take links down, zombie reaping), fab_connect() on a private
 * event channel (it returns on ESTABLISHED, fails on REJECTED), and
 * fab_accept().
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "verbs.h"

static void conn_param(const struct vrb_fab *f, struct rdma_conn_param *p, const void *priv,
                       uint8_t len)
{
	*p = (struct rdma_conn_param){
	    .private_data = priv,
	    .private_data_len = len,
	    .responder_resources = f->rd_atom,
	    .initiator_depth = f->init_rd_atom,
	    .retry_count = VRB_RETRY_CNT,
	    .rnr_retry_count = VRB_RNR_RETRY,
	};
}

/* A copy of an event, taken before it is acked. */
struct vrb_event {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	uint8_t priv[64];
	uint8_t priv_len;
	uint8_t initiator_depth, responder_resources;
};

/* get_event -- take, copy and ack the next event of @ch (non-blocking fd: -EAGAIN). */
static int get_event(struct rdma_event_channel *ch, struct vrb_event *out)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev) != 0)
		return -errno;
	*out = (struct vrb_event){
	    .type = ev->event,
	    .status = ev->status,
	    .id = ev->id,
	    .listen_id = ev->listen_id,
	};
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data != NULL) {
		out->initiator_depth = ev->param.conn.initiator_depth;
		out->responder_resources = ev->param.conn.responder_resources;
		out->priv_len = ev->param.conn.private_data_len < sizeof(out->priv)
		                    ? ev->param.conn.private_data_len
		                    : (uint8_t)sizeof(out->priv);
		memcpy(out->priv, ev->param.conn.private_data, out->priv_len);
	}
	/* ack at once: rdma_destroy_id() waits for the acks of its id's events */
	rdma_ack_cm_event(ev);
	return 0;
}

/*
 * admission_full -- under f->lock: whether a connection request from
 * @from would pass the caps on held links. NULL, or why not.
 */
static const char *admission_full(struct vrb_fab *f, const struct fab_addr *from)
{
	unsigned total = 0, host = 0;

	for (struct vrb_link *x = f->links; x != NULL; x = x->next) {
		if (x->state != VRB_LINK_HELD)
			continue;
		total++;
		host += fab_same_host(&x->peer_addr, from);
	}
	if (total >= FAB_MAX_UNADMITTED)
		return "too many connections not admitted yet";
	if (host >= FAB_MAX_UNADMITTED_HOST)
		return "too many connections not admitted yet from that address";
	return NULL;
}

/*
 * on_connect_request -- a peer connects: a QP on our PD and CQ, and the
 * link held in the accept queue with the connector's private data. No
 * rdma_accept() yet: the QP stays in INIT, so the peer can reach nothing,
 * until fab_link_admit(); fab_link_close() or the bound rejects it.
 */
static void on_connect_request(struct vrb_fab *f, const struct vrb_event *ev)
{
	struct vrb_link *l;
	struct fab_addr from = {0};
	const struct sockaddr *sa = rdma_get_peer_addr(ev->id);
	size_t plen = ev->priv_len >= VRB_PRIV_HDR ? ev->priv[2] : 0;
	const char *why;
	uint64_t one = 1;

	if (sa != NULL && sa->sa_family == AF_INET) {
		memcpy(&from.ss, sa, sizeof(struct sockaddr_in));
		from.len = sizeof(struct sockaddr_in);
	}
	if (ev->priv_len < VRB_PRIV_HDR || ev->priv[0] != VRB_PRIV_MAGIC ||
	    ev->priv[1] != VRB_PRIV_VERSION || plen > FAB_PRIV_MAX ||
	    VRB_PRIV_HDR + plen > ev->priv_len) {
		fab_refuse_log(&f->refuse_log, "verbs", &from,
		               "no LOCO header in the private data");
		goto err_reject;
	}
	if (ev->id->verbs != f->ctx) {
		fab_refuse_log(&f->refuse_log, "verbs", &from, "it arrived on another device");
		goto err_reject;
	}
	pthread_mutex_lock(&f->lock);
	why = admission_full(f, &from);
	pthread_mutex_unlock(&f->lock);
	if (why != NULL) {
		fab_refuse_log(&f->refuse_log, "verbs", &from, why);
		goto err_reject;
	}
	l = vrb_link_new(f, ev->id);
	if (l == NULL) {
		lc_log_err("verbs: %s: out of memory accepting a link", f->dev);
		goto err_reject;
	}
	memcpy(l->pending.priv, ev->priv + VRB_PRIV_HDR, plen);
	l->pending.priv_len = plen;
	if (vrb_link_create_qp(l) != 0)
		goto err_free;
	ev->id->context = l;
	l->peer_init_depth = ev->initiator_depth;
	l->peer_resp_res = ev->responder_resources;
	l->hold_deadline = lc_now_ns() + (uint64_t)fab_hold_ms(&f->base.attr) * 1000000ull;
	pthread_mutex_lock(&f->lock);
	l->state = VRB_LINK_HELD;
	l->next = f->links;
	f->links = l;
	fab_acceptq_push(&f->acceptq, &l->pending, &l->base);
	pthread_mutex_unlock(&f->lock);
	lc_log_debug("verbs: %s: link %u from %s held for admission", f->dev, l->base.id, l->peer);
	/* a poller blocked on the wait fd takes accepted links too */
	if (write(f->acc_fd, &one, sizeof(one)) < 0)
		lc_log_warn("verbs: %s: cannot wake the poller: %s", f->dev, strerror(errno));
	return;

err_free:
	l->id = NULL; /* destroyed below, after the reject */
	vrb_link_free(l);
err_reject:
	rdma_reject(ev->id, NULL, 0);
	rdma_destroy_id(ev->id);
}

int vrb_link_admit(struct fab_link *link)
{
	struct vrb_link *l = to_vrb_link(link);
	struct vrb_fab *f = l->fab;
	struct rdma_conn_param p;
	int ret;

	pthread_mutex_lock(&f->lock);
	ret = vrb_link_cause(l);
	if (l->state != VRB_LINK_HELD || ret != 0) {
		pthread_mutex_unlock(&f->lock);
		return ret;
	}
	l->state = VRB_LINK_ACCEPTING; /* the bound no longer applies */
	pthread_mutex_unlock(&f->lock);
	conn_param(f, &p, NULL, 0);
	/* never promise more than the connector asked for */
	if (p.responder_resources > l->peer_init_depth)
		p.responder_resources = l->peer_init_depth;
	if (p.initiator_depth > l->peer_resp_res)
		p.initiator_depth = l->peer_resp_res;
	if (rdma_accept(l->id, &p) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: rdma_accept of the link from %s failed: %s", f->dev, l->peer,
		           strerror(-ret));
		vrb_link_down(l, ret, -ECANCELED, false, NULL);
		return ret;
	}
	vrb_link_set_rnr(l);
	return vrb_link_cause(l);
}

/*
 * vrb_check_holds -- the event thread: reject held links past their bound.
 * Those still in the accept queue are nobody's: freed. Those the user
 * took are marked down (-ETIMEDOUT) for the user to close. Returns
 * whether links are still held (the thread then checks again soon).
 */
static bool vrb_check_holds(struct vrb_fab *f)
{
	struct vrb_link *drop[32], *refuse[32], **p, *l;
	int ndrop = 0, nrefuse = 0;
	uint64_t now = lc_now_ns();
	bool held = false;

	pthread_mutex_lock(&f->lock);
	for (p = &f->links; (l = *p) != NULL;) {
		if (l->state != VRB_LINK_HELD) {
			p = &l->next;
			continue;
		}
		if (now < l->hold_deadline || ndrop == 32 || nrefuse == 32) {
			held = true;
			p = &l->next;
			continue;
		}
		if (fab_acceptq_remove(&f->acceptq, &l->pending)) {
			*p = l->next;
			drop[ndrop++] = l;
			continue;
		}
		l->state = VRB_LINK_REFUSED;
		vrb_set_down(l, -ETIMEDOUT, -ECANCELED, false);
		refuse[nrefuse++] = l; /* the user's: freed only through close, by this thread */
		p = &l->next;
	}
	pthread_mutex_unlock(&f->lock);
	for (int i = 0; i < ndrop + nrefuse; i++) {
		l = i < ndrop ? drop[i] : refuse[i - ndrop];
		lc_log_info("verbs: %s: link %u from %s: not admitted within %u ms: rejected",
		            f->dev, l->base.id, l->peer, fab_hold_ms(&f->base.attr));
		if (rdma_reject(l->id, NULL, 0) != 0)
			lc_log_info("verbs: %s: link %u from %s: rdma_reject failed: %s", f->dev,
			            l->base.id, l->peer, strerror(errno));
		if (i < ndrop)
			vrb_link_free(l);
	}
	return held;
}

static void on_established(struct vrb_fab *f, struct vrb_link *l)
{
	pthread_mutex_lock(&f->lock);
	if (l->state == VRB_LINK_ACCEPTING)
		l->state = VRB_LINK_UP;
	pthread_mutex_unlock(&f->lock);
	lc_log_info("verbs: %s: link %u from %s established", f->dev, l->base.id, l->peer);
}

/* on_link_event -- an event for one of our links (id->context). */
static void on_link_event(struct vrb_fab *f, const struct vrb_event *ev)
{
	struct vrb_link *l = ev->id->context;
	char why[96];

	if (l == NULL)
		return;
	switch (ev->type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		on_established(f, l);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (vrb_link_down(l, -ECONNRESET, -ECONNRESET, false, NULL))
			lc_log_info("verbs: %s: link %u to %s: the peer disconnected", f->dev,
			            l->base.id, l->peer);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		pthread_mutex_lock(&f->lock);
		if (l->state == VRB_LINK_HELD && fab_acceptq_remove(&f->acceptq, &l->pending)) {
			/* never accepted, never seen by the user: drop it */
			vrb_link_unlink(f, l);
			pthread_mutex_unlock(&f->lock);
			lc_log_info("verbs: %s: link from %s not established: %s (status %d)",
			            f->dev, l->peer, rdma_event_str(ev->type), ev->status);
			vrb_link_free(l);
			break;
		}
		if (l->state == VRB_LINK_HELD)
			l->state = VRB_LINK_REFUSED; /* the user's: fab_link_admit() reports it */
		pthread_mutex_unlock(&f->lock);
		snprintf(why, sizeof(why), "%s (status %d)", rdma_event_str(ev->type), ev->status);
		vrb_link_down(l, -ECONNRESET, -ECONNRESET, false, why);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		vrb_link_down(l, -EIO, -EIO, false, "the device was removed");
		break;
	default:
		break; /* TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do */
	}
}

/*
 * log_async -- the device's asynchronous events, logged: a QP that a
 * fatal event put into the error state shows no error completion of its
 * own, only flushes ("the device flushed a request for no reported
 * reason"): this line names the cause. Each is acknowledged at once (a
 * QP's destroy waits for its events' acks), and nothing else is done.
 */
static void log_async(struct vrb_fab *f)
{
	for (int i = 0; i < VRB_CM_BATCH; i++) {
		struct ibv_async_event ae;
		uint32_t qpn = 0;

		if (ibv_get_async_event(f->ctx, &ae) != 0)
			return; /* EAGAIN: drained */
		switch (ae.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR:
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			qpn = ae.element.qp != NULL ? ae.element.qp->qp_num : 0;
			break;
		default:
			break;
		}
		if (ae.event_type == IBV_EVENT_COMM_EST)
			lc_log_debug("verbs: %s: async event %s (QP %u)", f->dev,
			             ibv_event_type_str(ae.event_type), qpn);
		else
			lc_log_warn("verbs: %s: async event %s (link %u; 0: none)", f->dev,
			            ibv_event_type_str(ae.event_type), qpn);
		ibv_ack_async_event(&ae);
	}
}

void *vrb_event_main(void *arg)
{
	struct vrb_fab *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd[3] = {{.fd = f->ch->fd, .events = POLLIN},
		                        {.fd = f->ctl_fd, .events = POLLIN},
		                        {.fd = f->ctx->async_fd, .events = POLLIN}};
		unsigned zombies;
		bool held = vrb_check_holds(f);
		uint64_t v;
		int r;

		pthread_mutex_lock(&f->lock);
		zombies = f->nzombies;
		pthread_mutex_unlock(&f->lock);
		r = poll(pfd, 3, zombies ? VRB_REAP_MS : held ? VRB_HOLD_CHECK_MS : -1);
		if (r < 0 && errno != EINTR) {
			lc_log_err("verbs: %s: event thread: poll failed: %s", f->dev,
			           strerror(errno));
			break;
		}
		if (pfd[1].revents && read(f->ctl_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			lc_log_warn("verbs: %s: eventfd read: %s", f->dev, strerror(errno));
		if (pfd[2].revents)
			log_async(f);
		for (int i = 0; i < VRB_CM_BATCH; i++) {
			struct vrb_event ev;

			if (get_event(f->ch, &ev) != 0)
				break; /* EAGAIN: drained */
			lc_log_debug("verbs: %s: rdma_cm event %s (status %d)", f->dev,
			             rdma_event_str(ev.type), ev.status);
			if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST)
				on_connect_request(f, &ev);
			else if (ev.id != f->lid)
				on_link_event(f, &ev);
			else
				lc_log_info("verbs: %s: listener event %s (status %d)", f->dev,
				            rdma_event_str(ev.type), ev.status);
		}
		vrb_reap_zombies(f);
	}
	return NULL;
}

/* wait_event -- the next event of a private channel, waiting until @deadline. */
static int wait_event(struct rdma_event_channel *ch, uint64_t deadline, struct vrb_event *ev)
{
	for (;;) {
		struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
		uint64_t now = lc_now_ns();
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)((deadline - now) / 1000000ull) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return get_event(ch, ev);
	}
}

/* expect_event -- wait for event @want; map the failures to an errno. */
static int expect_event(struct rdma_event_channel *ch, uint64_t deadline,
                        enum rdma_cm_event_type want, const char **what)
{
	struct vrb_event ev;
	int ret = wait_event(ch, deadline, &ev);

	if (ret) {
		*what = ret != -ETIMEDOUT                      ? "cannot read rdma_cm events"
		        : want == RDMA_CM_EVENT_ADDR_RESOLVED  ? "address not resolved in time"
		        : want == RDMA_CM_EVENT_ROUTE_RESOLVED ? "route not resolved in time"
		                                               : "no answer in time";
		return ret;
	}
	if (ev.type == want)
		return 0;
	*what = rdma_event_str(ev.type);
	switch (ev.type) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED; /* nobody listens there, or the peer refused */
	case RDMA_CM_EVENT_UNREACHABLE:
		return -ETIMEDOUT;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev.status < 0 ? ev.status : -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return ev.status < 0 ? ev.status : -ECONNREFUSED;
	default:
		return -EPROTO;
	}
}

/*
 * resolve_addr -- a new id of @ch with the address from @src to @dst
 * resolved, retried with short timeouts until @deadline. The kernel can
 * miss the neighbour update of an ARP reply that comes before it queued
 * the request (a veth peer answers at once); the request then completes
 * only when its own timeout expires. Short attempts keep that wait short.
 */
static int resolve_addr(struct rdma_event_channel *ch, struct rdma_cm_id **out,
                        struct sockaddr *src, const struct sockaddr *dst, uint64_t deadline,
                        const char **what)
{
	int step = VRB_RESOLVE_MS, ret = -ETIMEDOUT;

	*what = "address not resolved in time";
	for (int i = 0; i < 64; i++) {
		uint64_t now = lc_now_ns();
		struct rdma_cm_id *id;
		int ms;

		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)((deadline - now) / 1000000ull) + 1;
		if (ms > step)
			ms = step;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) {
			*what = "rdma_create_id";
			return -errno;
		}
		if (rdma_resolve_addr(id, src, (struct sockaddr *)dst, ms) != 0) {
			ret = -errno;
			*what = "rdma_resolve_addr";
			rdma_destroy_id(id);
			return ret;
		}
		ret = expect_event(ch, deadline, RDMA_CM_EVENT_ADDR_RESOLVED, what);
		if (ret == 0) {
			*out = id;
			return 0;
		}
		rdma_destroy_id(id);
		if (ret != -ETIMEDOUT && ret != -ENODATA)
			return ret;
		step = step < 1000 ? 2 * step : 1000;
	}
	return ret;
}

int vrb_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                size_t priv_len, int timeout_ms, struct fab_link **out)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	uint64_t deadline = fab_deadline_ns(timeout_ms);
	uint8_t pd[VRB_PRIV_HDR + FAB_PRIV_MAX] = {VRB_PRIV_MAGIC, VRB_PRIV_VERSION,
	                                           (uint8_t)priv_len};
	char where[FAB_ADDR_STRLEN] = "?";
	struct rdma_event_channel *ch;
	struct rdma_conn_param p;
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in src;
	struct vrb_link *l = NULL;
	const char *what = "";
	int ret, ms;

	if (fab_connect_check(peer, priv, priv_len, out) || peer->ss.ss_family != AF_INET)
		return -EINVAL;
	fab_addr_format(peer, where, sizeof(where));
	if (priv_len)
		memcpy(pd + VRB_PRIV_HDR, priv, priv_len);
	ch = rdma_create_event_channel();
	if (ch == NULL) {
		ret = -errno;
		lc_log_err("verbs: %s: connect to %s: cannot open an rdma_cm channel: %s", f->dev,
		           where, strerror(-ret));
		return ret;
	}
	/* from our own address: rdma_cm then resolves to our device */
	memcpy(&src, &f->addr.ss, sizeof(src));
	src.sin_port = 0;
	ms = timeout_ms < 0 ? 3600000 : timeout_ms > 0 ? timeout_ms : 1;
	ret = resolve_addr(ch, &id, (struct sockaddr *)&src, (const struct sockaddr *)&peer->ss,
	                   deadline, &what);
	if (ret)
		goto err_channel;
	if (id->verbs != f->ctx) {
		ret = -EINVAL;
		what = "the route leaves through another device";
		goto err_id;
	}
	if (rdma_resolve_route(id, ms) != 0) {
		ret = -errno;
		what = "rdma_resolve_route";
		goto err_id;
	}
	ret = expect_event(ch, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED, &what);
	if (ret)
		goto err_id;
	l = vrb_link_new(f, id);
	if (l == NULL) {
		ret = -ENOMEM;
		what = "out of memory";
		goto err_id;
	}
	snprintf(l->peer, sizeof(l->peer), "%s", where);
	ret = vrb_link_create_qp(l);
	if (ret) {
		what = "no QP";
		goto err_link;
	}
	l->base.ctx = ctx;
	id->context = l;
	conn_param(f, &p, pd, (uint8_t)(VRB_PRIV_HDR + priv_len));
	if (rdma_connect(id, &p) != 0) {
		ret = -errno;
		what = "rdma_connect";
		goto err_link;
	}
	ret = expect_event(ch, deadline, RDMA_CM_EVENT_ESTABLISHED, &what);
	if (ret)
		goto err_link;
	vrb_link_set_rnr(l);
	/* from now on the fab's event thread sees the link's events (DISCONNECTED) */
	if (rdma_migrate_id(id, f->ch) != 0) {
		ret = -errno;
		what = "rdma_migrate_id";
		goto err_link;
	}
	rdma_destroy_event_channel(ch);
	vrb_link_add(f, l, VRB_LINK_UP);
	lc_log_info("verbs: %s: link %u to %s established", f->dev, l->base.id, where);
	*out = &l->base;
	return 0;

err_link:
	vrb_link_free(l); /* destroys the id */
	id = NULL;
err_id:
	if (id != NULL)
		rdma_destroy_id(id);
err_channel:
	rdma_destroy_event_channel(ch);
	lc_log_info("verbs: %s: connect to %s failed: %s: %s", f->dev, where, what, strerror(-ret));
	return ret;
}

int vrb_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len)
{
	return fab_acceptq_accept(&to_vrb_fab(fab)->acceptq, ctx, timeout_ms, out, priv, priv_len);
}
