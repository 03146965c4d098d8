/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fab.c -- open and close a tcp fab (listening socket, event fds, the NIC
 * thread) and the provider's ops table.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "tcp.h"

static int tcp_listen(struct tcp_fab *f, const char *where)
{
	struct fab_addr a;
	int one = 1, ret;

	ret = fab_addr_parse(where ? where : "127.0.0.1:0", 0, &a);
	if (ret) {
		lc_log_err("tcp: bad listen address %s", where);
		return ret;
	}
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->lfd < 0)
		return -errno;
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(f->lfd, (struct sockaddr *)&a.ss, a.len) < 0 || listen(f->lfd, 128) < 0) {
		ret = -errno;
		lc_log_err("tcp: cannot listen on %s: %s", where ? where : "127.0.0.1:0",
		           strerror(-ret));
		return ret;
	}
	f->addr.len = sizeof(f->addr.ss);
	if (getsockname(f->lfd, (struct sockaddr *)&f->addr.ss, &f->addr.len) < 0)
		return -errno;
	return 0;
}

static void tcp_close(struct fab *fab);

static int tcp_open(const struct fab_attr *attr, struct fab **out)
{
	struct tcp_fab *f;
	struct epoll_event ev;
	const char *slow = getenv("LOCO_TCP_SLOW_WRITE"), *fail = getenv("LOCO_TCP_FAIL_READS");
	int ret;

	if (attr->max_inline > TCP_MAX_SEG || attr->sq_depth > 65536 || attr->rq_depth > 65536 ||
	    attr->cq_depth > (1u << 24))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->lfd = f->epfd = f->evfd = f->load.fd = -1;
	for (unsigned i = 0; i < TCP_LINGERS; i++)
		f->lingers[i].fd = -1;
	f->base.attr = *attr;
	fab_ops_fill(&f->ops, &fab_tcp_ops);
	f->base.ops = &f->ops;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->nic_mu, NULL);
	pthread_cond_init(&f->cond, NULL);
	fab_acceptq_init(&f->acceptq, &f->lock, &f->cond);
	f->rng = lc_now_ns() | 1;
	if (slow != NULL && *slow != '\0')
		f->slow_ns = strtoull(slow, NULL, 10);
	/* test knob "N[@B]": the first N READs (of exactly B bytes) take their link down */
	if (fail != NULL && *fail != '\0') {
		char *end;

		f->fail_reads = (uint32_t)strtoul(fail, &end, 10);
		if (*end == '@')
			f->fail_reads_len = (uint32_t)strtoul(end + 1, NULL, 10);
	}
	/*
	 * After work the NIC thread looks again for spin_us, yielding
	 * whenever nothing came (nic.c), before it sleeps in epoll: the next
	 * request of a burst then needs no wake-up (2 vCPUs, 8 B READ: 31-42
	 * us with no spin, a halted vCPU's wake-up; 10-11 us with 50 us).
	 * Only while the host has CPUs to spare (hostload.h): where every CPU
	 * is taken even a yielding spin takes CPU from the threads beside it
	 * (on 2 cores, a fresh clone with an unconditional spin failed 3
	 * sanitizer tests). LOCO_TCP_SPIN_US sets it; 0 turns it off.
	 */
	if (attr->spin_us == FAB_SPIN_AUTO)
		f->base.attr.spin_us = TCP_SPIN_US;
	else if (attr->spin_us == FAB_SPIN_NONE) /* the manager's wait policy sleeps */
		f->base.attr.spin_us = 0;
	if (getenv("LOCO_TCP_SPIN_US") != NULL)
		f->base.attr.spin_us = (uint32_t)strtoul(getenv("LOCO_TCP_SPIN_US"), NULL, 10);
	if (f->base.attr.spin_us)
		lc_hostload_init(&f->load);
	f->ack_delay_ns = TCP_ACK_DELAY_NS; /* lazy requests' ACKs (nic.c: ack_waits()) */
	if (getenv("LOCO_TCP_ACK_DELAY_US") != NULL)
		f->ack_delay_ns = strtoull(getenv("LOCO_TCP_ACK_DELAY_US"), NULL, 10) * 1000ull;
	/* far below the dead-peer bound, which a held ACK must never reach */
	if (f->ack_delay_ns > (uint64_t)f->base.attr.timeout_ms * 250000ull)
		f->ack_delay_ns = (uint64_t)f->base.attr.timeout_ms * 250000ull;
	/* one producer at a time (the NIC role), no lock */
	ret =
	    fab_swcq_init(&f->cq, &(struct fab_swcq_attr){.name = "tcp", .depth = attr->cq_depth});
	if (ret)
		goto err_close;
	if (attr->flags & FAB_ATTR_KEYS_GIVEN) {
		/* stacked (auto): another fab chose the keys, unguessable there */
		ret = keytab_init_foreign(&f->kt, 2 * TCP_KEYS);
	} else {
		ret = keytab_init(&f->kt, TCP_KEYS);
		if (ret == 0)
			ret = keytab_randomize(
			    &f->kt); /* rkeys nobody can guess (loco-fabric-tcp(7)) */
	}
	if (ret)
		goto err_close;
	ret = tcp_listen(f, attr->listen_addr);
	if (ret)
		goto err_close;
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->epfd < 0 || f->evfd < 0) {
		ret = -errno;
		lc_log_err("tcp: cannot create the NIC's event fds: %s", strerror(-ret));
		goto err_close;
	}
	ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->lfd, &ev);
	ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = f};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->evfd, &ev);
	ret = -pthread_create(&f->nic, NULL, tcp_nic_main, f);
	if (ret) {
		lc_log_err("tcp: cannot start the NIC thread: %s", strerror(-ret));
		goto err_close;
	}
	*out = &f->base;
	return 0;

err_close:
	tcp_close(&f->base);
	return ret;
}

static void tcp_close(struct fab *fab)
{
	struct tcp_fab *f = to_tcp_fab(fab);

	if (f->nic) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		tcp_nic_kick(f);
		tcp_nic_unpark(f);
		pthread_join(f->nic, NULL);
	}
	tcp_linger_fini(f); /* the peers' FINs, TCP_LINGER_MS at most */
	if (f->nlinks)
		lc_log_warn("tcp: closing the fabric with %u link(s) open", f->nlinks);
	for (unsigned i = 0; i < f->nlinks; i++)
		tcp_link_free(f->links[i]);
	while (f->evicted != NULL) {
		struct tcp_link *l = f->evicted;

		f->evicted = l->evicted_next;
		tcp_link_free(l);
	}
	if (f->lfd >= 0)
		close(f->lfd);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->evfd >= 0)
		close(f->evfd);
	lc_hostload_fini(&f->load);
	keytab_fini(&f->kt);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->nic_mu);
	fab_swcq_fini(&f->cq);
	free(f);
}

/* the CQ's consumer side: ../swcq.c */
static int tcp_poll(struct fab *fab, struct fab_wc *wc, int max)
{
	return fab_swcq_poll(&to_tcp_fab(fab)->cq, wc, max);
}

/*
 * tcp_arm -- fab_arm(): -EAGAIN for an accepted link too (the poller blocked
 * on the wait fd takes them: tcp_cq_wake() after the push). Checked after
 * the arm announced: pairs with the fence in fab_swcq_wake(). fab_wait()
 * waits for completions only, as on verbs.
 */
static int tcp_arm(struct fab *fab)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	int ret = fab_swcq_arm(&f->cq);

	if (ret == 0 && fab_acceptq_ready(&f->acceptq)) {
		fab_swcq_disarm(&f->cq);
		ret = -EAGAIN;
	}
	return ret;
}

static int tcp_wait(struct fab *fab, int timeout_ms)
{
	return fab_swcq_wait(&to_tcp_fab(fab)->cq, timeout_ms);
}

static int tcp_wait_fd(struct fab *fab)
{
	return fab_swcq_wait_fd(&to_tcp_fab(fab)->cq);
}

static int tcp_get_addr(struct fab *fab, struct fab_addr *out)
{
	*out = to_tcp_fab(fab)->addr;
	return 0;
}

const struct fab_ops fab_tcp_ops = {
    .size = sizeof(struct fab_ops),
    .name = "tcp",
    .accept = tcp_accept,
    .arm = tcp_arm,
    .close = tcp_close,
    .connect = tcp_connect,
    .get_addr = tcp_get_addr,
    .link_admit = tcp_link_admit,
    .link_close = tcp_link_close,
    .link_peer = tcp_link_peer,
    .link_state = tcp_link_state,
    .mr_dereg = tcp_mr_dereg,
    .mr_reg = tcp_mr_reg,
    .mr_reg_key = tcp_mr_reg_key,
    .open = tcp_open,
    .poll = tcp_poll,
    .post = tcp_post,
    .post_recv = tcp_post_recv,
    .progress = tcp_progress,
    .wait = tcp_wait,
    .wait_fd = tcp_wait_fd,
};
