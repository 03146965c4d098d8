/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fab.c -- open and close a verbs fab (device, event thread) and the
 * provider's ops table.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../log.h"
#include "verbs.h"

static void vrb_close(struct fab *fab);

static int vrb_open(const struct fab_attr *attr, struct fab **out)
{
	struct vrb_fab *f;
	uint32_t stash;
	int ret;

	if (attr->sq_depth > VRB_MAX_DEPTH || attr->rq_depth > VRB_MAX_DEPTH ||
	    attr->cq_depth > (1u << 24) || attr->max_inline > 65536 || attr->timeout_ms == 0)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->epfd = f->ctl_fd = f->acc_fd = -1;
	f->base.attr = *attr;
	fab_ops_fill(&f->ops, &fab_verbs_ops);
	f->base.ops = &f->ops;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->reap_lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	fab_acceptq_init(&f->acceptq, &f->lock, &f->cond);
	snprintf(f->dev, sizeof(f->dev), "?");
	f->cq_credits = attr->cq_depth;
	stash = fab_pow2_at_least(attr->cq_depth);
	f->stash_mask = stash - 1;
	f->stash = calloc(stash, sizeof(*f->stash));
	if (f->stash == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = keytab_init_foreign(&f->kt, VRB_KEYS);
	if (ret)
		goto err_close;
	ret = vrb_bind_listener(f, attr);
	if (ret)
		goto err_close;
	ret = vrb_setup_device(f);
	if (ret)
		goto err_close;
	ret = -pthread_create(&f->thr, NULL, vrb_event_main, f);
	if (ret) {
		lc_log_err("verbs: %s: cannot start the event thread: %s", f->dev, strerror(-ret));
		goto err_close;
	}
	f->thr_started = 1;
	lc_log_info("verbs: %s port %u: listening on %s (inline %u, ack timeout 2^%u x 4.096 us, "
	            "atomics %s)",
	            f->dev, f->port, f->addr_str, f->base.attr.max_inline, f->ack_timeout,
	            f->atomics ? "yes" : "no");
	*out = &f->base;
	return 0;

err_close:
	vrb_close(&f->base);
	return ret;
}

static void vrb_close(struct fab *fab)
{
	struct vrb_fab *f = to_vrb_fab(fab);
	unsigned open = 0;

	if (f->thr_started) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		vrb_kick(f);
		pthread_join(f->thr, NULL);
	}
	while (f->links != NULL) {
		struct vrb_link *l = f->links;

		f->links = l->next;
		open += l->state != VRB_LINK_CLOSED;
		vrb_link_free(l);
	}
	if (open)
		lc_log_warn("verbs: %s: closing the fabric with %u link(s) open", f->dev, open);
	if (f->lid != NULL)
		rdma_destroy_id(f->lid);
	if (f->cq != NULL) {
		if (f->unacked)
			ibv_ack_cq_events(f->cq, f->unacked);
		ibv_destroy_cq(f->cq);
	}
	if (f->cc != NULL)
		ibv_destroy_comp_channel(f->cc);
	if (f->pd != NULL && ibv_dealloc_pd(f->pd) != 0)
		lc_log_warn("verbs: %s: memory regions still registered at close", f->dev);
	if (f->ch != NULL)
		rdma_destroy_event_channel(f->ch);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->ctl_fd >= 0)
		close(f->ctl_fd);
	if (f->acc_fd >= 0)
		close(f->acc_fd);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->reap_lock);
	pthread_mutex_destroy(&f->lock);
	free(f->stash);
	keytab_fini(&f->kt);
	free(f);
}

static int vrb_get_addr(struct fab *fab, struct fab_addr *out)
{
	if (out == NULL)
		return -EINVAL;
	*out = to_vrb_fab(fab)->addr;
	return 0;
}

const struct fab_ops fab_verbs_ops = {
    .size = sizeof(struct fab_ops),
    .name = "verbs",
    .accept = vrb_accept,
    .arm = vrb_arm,
    .close = vrb_close,
    .connect = vrb_connect,
    .get_addr = vrb_get_addr,
    .link_admit = vrb_link_admit,
    .link_close = vrb_link_close,
    .link_peer = vrb_link_peer,
    .link_state = vrb_link_state,
    .mr_dereg = vrb_mr_dereg,
    .mr_reg = vrb_mr_reg,
    .open = vrb_open,
    .poll = vrb_poll,
    .post = vrb_post,
    .post_recv = vrb_post_recv,
    .wait = vrb_wait,
    .wait_fd = vrb_wait_fd,
};
