/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * device.c -- choosing and setting up the device of a verbs fab: the
 * device and port (fab_attr.device, LOCO_DEVICE, or the listen address),
 * the listening rdma_cm id, the device's limits, PD, completion channel,
 * CQ and wait fds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "../../log.h"
#include "verbs.h"

/* ack_timeout_exp -- the QP's local ACK timeout exponent for a dead-peer bound of @ms. */
static uint8_t ack_timeout_exp(uint32_t ms)
{
	/* (retries + 1) tries of 4.096 us * 2^t each must fit in @ms */
	uint64_t per_try_ns = (uint64_t)ms * 1000000ull / (VRB_RETRY_CNT + 1);
	uint8_t t = 1;

	while (t < 31 && 4096ull << (t + 1) <= per_try_ns)
		t++;
	return t;
}

/* port_active -- the first active port of @dev (or @want_port when not 0), or 0. */
static uint8_t port_active(struct ibv_device *dev, uint8_t want_port)
{
	struct ibv_context *c = ibv_open_device(dev);
	struct ibv_device_attr da;
	uint8_t found = 0;

	if (c == NULL)
		return 0;
	if (ibv_query_device(c, &da) == 0) {
		for (uint8_t p = 1; p <= da.phys_port_cnt && found == 0; p++) {
			struct ibv_port_attr pa;

			if (want_port && p != want_port)
				continue;
			if (ibv_query_port(c, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
				found = p;
		}
	}
	ibv_close_device(c);
	return found;
}

/*
 * pick_device -- the device to use when the listen address does not name
 * one: @want ("name" or "name:port") or the first device with an active
 * port. Fills @name and *@port; -ENODEV when there is none.
 */
static int pick_device(const char *want, char *name, size_t len, uint8_t *port)
{
	struct ibv_device **list;
	char wname[64] = "";
	unsigned long wport = 0;
	int num = 0, ret = -ENODEV;

	if (want != NULL) {
		const char *colon = strchr(want, ':');
		size_t n = colon ? (size_t)(colon - want) : strlen(want);

		if (n == 0 || n >= sizeof(wname))
			return -EINVAL;
		memcpy(wname, want, n);
		wname[n] = '\0';
		if (colon != NULL) {
			char *end;

			wport = strtoul(colon + 1, &end, 10);
			if (*end != '\0' || wport == 0 || wport > 255)
				return -EINVAL;
		}
	}
	list = ibv_get_device_list(&num);
	if (list == NULL || num == 0) {
		lc_log_info("verbs: no RDMA device (ibv_get_device_list found none)");
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	for (int i = 0; i < num; i++) {
		const char *dn = ibv_get_device_name(list[i]);
		uint8_t p;

		if (wname[0] && strcmp(dn, wname) != 0)
			continue;
		p = port_active(list[i], (uint8_t)wport);
		if (p == 0) {
			if (wname[0]) {
				lc_log_err("verbs: device %s has no active port%s", dn,
				           wport ? " of that number" : "");
				ret = -ENETDOWN;
			}
			continue;
		}
		snprintf(name, len, "%s", dn);
		*port = p;
		ret = 0;
		break;
	}
	if (ret == -ENODEV)
		lc_log_info("verbs: %s", wname[0] ? "no RDMA device of that name"
		                                  : "no RDMA device with an active port");
	ibv_free_device_list(list);
	return ret;
}

/* device_ip -- an IPv4 address of an interface that rdma_cm maps to @dev port @port. */
static int device_ip(struct vrb_fab *f, const char *dev, uint8_t port, struct in_addr *out)
{
	struct ifaddrs *ifs, *i;
	int ret = -EADDRNOTAVAIL;

	if (getifaddrs(&ifs) != 0)
		return -errno;
	for (i = ifs; i != NULL && ret != 0; i = i->ifa_next) {
		struct sockaddr_in sin;
		struct rdma_cm_id *id;

		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
			continue;
		memcpy(&sin, i->ifa_addr, sizeof(sin));
		if ((ntohl(sin.sin_addr.s_addr) >> 24) == 127)
			continue;
		sin.sin_port = 0;
		if (rdma_create_id(f->ch, &id, NULL, RDMA_PS_TCP) != 0)
			break;
		if (rdma_bind_addr(id, (struct sockaddr *)&sin) == 0 && id->verbs != NULL &&
		    strcmp(ibv_get_device_name(id->verbs->device), dev) == 0 &&
		    id->port_num == port) {
			*out = sin.sin_addr;
			ret = 0;
		}
		rdma_destroy_id(id);
	}
	freeifaddrs(ifs);
	return ret;
}

/*
 * vrb_bind_listener -- choose the device and bind the listening id. A specific
 * listen IP names its device (rdma_cm maps it); a loopback or wildcard IP,
 * or none, means the device of fab_attr.device / LOCO_DEVICE (default the
 * first with an active port), listening on that device's IPv4 address.
 */
int vrb_bind_listener(struct vrb_fab *f, const struct fab_attr *attr)
{
	const char *want = attr->device;
	const char *where = attr->listen_addr ? attr->listen_addr : "127.0.0.1:0";
	struct fab_addr a;
	struct sockaddr_in *sin = (struct sockaddr_in *)&a.ss;
	uint32_t ip;
	char name[64] = "";
	uint8_t port = 0;
	int ret;

	if (want == NULL || *want == '\0')
		want = getenv("LOCO_DEVICE");
	if (want != NULL && *want == '\0')
		want = NULL;
	ret = fab_addr_parse(where, 0, &a);
	if (ret) {
		lc_log_err("verbs: bad listen address %s", where);
		return ret;
	}
	ip = ntohl(sin->sin_addr.s_addr);
	/* also when the address names the device: -ENODEV when there is none */
	ret = pick_device(want, name, sizeof(name), &port);
	if (ret == -EINVAL)
		lc_log_err("verbs: bad device %s (name or name:port)", want);
	if (ret)
		return ret;
	if (want == NULL && ip != INADDR_ANY && (ip >> 24) != 127)
		name[0] = '\0'; /* the address chooses */
	f->ch = rdma_create_event_channel();
	if (f->ch == NULL) {
		ret = errno == ENOENT ? -ENODEV : -errno;
		lc_log_err("verbs: cannot open rdma_cm (/dev/infiniband/rdma_cm): %s",
		           strerror(errno));
		return ret;
	}
	if (rdma_create_id(f->ch, &f->lid, f, RDMA_PS_TCP) != 0) {
		ret = -errno;
		lc_log_err("verbs: rdma_create_id failed: %s", strerror(-ret));
		return ret;
	}
	if (ip == INADDR_ANY || (ip >> 24) == 127) {
		ret = device_ip(f, name, port, &sin->sin_addr);
		if (ret) {
			lc_log_err("verbs: device %s port %u has no IPv4 address that rdma_cm can "
			           "bind: give an address of its interface (fab_attr.listen_addr, "
			           "LOCO_ADDR)",
			           name, port);
			return ret;
		}
		lc_log_info("verbs: %s port %u: listening on its address instead of %s", name, port,
		            where);
	}
	if (rdma_bind_addr(f->lid, (struct sockaddr *)sin) != 0) {
		ret = -errno;
		lc_log_err("verbs: cannot bind rdma_cm to %s: %s", where, strerror(-ret));
		return ret;
	}
	if (f->lid->verbs == NULL) {
		lc_log_err("verbs: %s is not the address of an RDMA device", where);
		return -EADDRNOTAVAIL;
	}
	snprintf(f->dev, sizeof(f->dev), "%s", ibv_get_device_name(f->lid->verbs->device));
	f->port = f->lid->port_num;
	if (name[0] && (strcmp(name, f->dev) != 0 || port != f->port)) {
		lc_log_err("verbs: listen address %s is on %s port %u, not on the device asked for "
		           "(%s)",
		           where, f->dev, f->port, want);
		return -EINVAL;
	}
	if (rdma_listen(f->lid, VRB_BACKLOG) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: rdma_listen on %s failed: %s", f->dev, where,
		           strerror(-ret));
		return ret;
	}
	memset(&f->addr, 0, sizeof(f->addr));
	memcpy(&f->addr.ss, rdma_get_local_addr(f->lid), sizeof(struct sockaddr_in));
	f->addr.len = sizeof(struct sockaddr_in);
	fab_addr_format(&f->addr, f->addr_str, sizeof(f->addr_str));
	f->ctx = f->lid->verbs;
	return 0;
}

/* probe_inline -- the largest inline payload up to @want the device accepts on an RC QP. */
static uint32_t probe_inline(struct vrb_fab *f, uint32_t want)
{
	for (uint32_t n = want;; n /= 2) {
		struct ibv_qp_init_attr qa = {
		    .send_cq = f->cq,
		    .recv_cq = f->cq,
		    .cap = {.max_send_wr = 1,
		            .max_recv_wr = 1,
		            .max_send_sge = 1,
		            .max_recv_sge = 1,
		            .max_inline_data = n},
		    .qp_type = IBV_QPT_RC,
		};
		struct ibv_qp *qp = ibv_create_qp(f->pd, &qa);

		if (qp != NULL) {
			ibv_destroy_qp(qp);
			return qa.cap.max_inline_data < n ? qa.cap.max_inline_data : n;
		}
		if (n == 0)
			return 0;
	}
}

/* vrb_setup_device -- PD, completion channel, CQ, limits, the wait fd. */
int vrb_setup_device(struct vrb_fab *f)
{
	struct fab_attr *a = &f->base.attr;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct epoll_event ev = {.events = EPOLLIN};
	uint32_t inl;
	int ret;

	if (ibv_query_device(f->ctx, &da) != 0 || ibv_query_port(f->ctx, f->port, &pa) != 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot query the device: %s", f->dev, strerror(-ret));
		return ret;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		lc_log_err("verbs: %s port %u is %s, not active", f->dev, f->port,
		           ibv_port_state_str(pa.state));
		return -ENETDOWN;
	}
	if (a->sq_depth > (uint32_t)da.max_qp_wr || a->rq_depth > (uint32_t)da.max_qp_wr ||
	    a->cq_depth + VRB_CQ_SLACK > (uint32_t)da.max_cqe) {
		lc_log_err("verbs: %s: sq_depth %u, rq_depth %u or cq_depth %u beyond the device's "
		           "limits (%d work requests, %d CQ entries)",
		           f->dev, a->sq_depth, a->rq_depth, a->cq_depth, da.max_qp_wr, da.max_cqe);
		return -EINVAL;
	}
	f->max_msg = pa.max_msg_sz;
	f->atomics = da.atomic_cap != IBV_ATOMIC_NONE;
	f->rd_atom =
	    (uint8_t)(da.max_qp_rd_atom < VRB_RD_ATOMIC ? da.max_qp_rd_atom : VRB_RD_ATOMIC);
	f->init_rd_atom = (uint8_t)(da.max_qp_init_rd_atom < VRB_RD_ATOMIC ? da.max_qp_init_rd_atom
	                                                                   : VRB_RD_ATOMIC);
	f->ack_timeout = ack_timeout_exp(a->timeout_ms);

	f->pd = ibv_alloc_pd(f->ctx);
	f->cc = f->pd ? ibv_create_comp_channel(f->ctx) : NULL;
	f->cq =
	    f->cc ? ibv_create_cq(f->ctx, (int)(a->cq_depth + VRB_CQ_SLACK), f, f->cc, 0) : NULL;
	if (f->cq == NULL) {
		ret = errno ? -errno : -ENOMEM;
		lc_log_err("verbs: %s: cannot create the %s: %s", f->dev,
		           f->pd == NULL   ? "protection domain"
		           : f->cc == NULL ? "completion channel"
		                           : "completion queue",
		           strerror(-ret));
		return ret;
	}
	inl = probe_inline(f, a->max_inline);
	if (inl < a->max_inline)
		lc_log_info("verbs: %s: inline payloads limited to %u bytes (asked %u)", f->dev,
		            inl, a->max_inline);
	a->max_inline = inl;

	if (fcntl(f->cc->fd, F_SETFL, fcntl(f->cc->fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(f->ch->fd, F_SETFL, fcntl(f->ch->fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(f->ctx->async_fd, F_SETFL, fcntl(f->ctx->async_fd, F_GETFL) | O_NONBLOCK) < 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot make the event fds non-blocking: %s", f->dev,
		           strerror(-ret));
		return ret;
	}
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->acc_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->epfd < 0 || f->ctl_fd < 0 || f->acc_fd < 0) {
		ret = -errno;
		lc_log_err("verbs: %s: cannot create the wait fds: %s", f->dev, strerror(-ret));
		return ret;
	}
	ev.data.fd = f->cc->fd;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->cc->fd, &ev) < 0)
		return -errno;
	ev.data.fd = f->acc_fd;
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->acc_fd, &ev) < 0)
		return -errno;
	return 0;
}
