/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * common.c -- default attributes, -EOPNOTSUPP stubs for
 * ops a provider leaves unset (rdma-core's verbs_set_ops habit: the data
 * path never checks for NULL), and address helpers shared by providers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"
#include "fabric.h"
#include "names.h"
#include "provider.h"

void fab_attr_defaults(struct fab_attr *a)
{
	if (a->sq_depth == 0)
		a->sq_depth = 256;
	if (a->rq_depth == 0)
		a->rq_depth = 256;
	if (a->cq_depth == 0)
		a->cq_depth = 4096;
	if (a->max_inline == 0)
		a->max_inline = 256;
	if (a->timeout_ms == 0)
		a->timeout_ms = 2000;
}

static int stub_accept(struct fab *f, uint64_t c, int t, struct fab_link **o, void *p, size_t *l)
{
	(void)f, (void)c, (void)t, (void)o, (void)p, (void)l;
	return -EOPNOTSUPP;
}

static int stub_connect(struct fab *f, const struct fab_addr *a, uint64_t c, const void *p,
                        size_t l, int t, struct fab_link **o)
{
	(void)f, (void)a, (void)c, (void)p, (void)l, (void)t, (void)o;
	return -EOPNOTSUPP;
}

static int stub_get_addr(struct fab *f, struct fab_addr *o)
{
	(void)f, (void)o;
	return -EOPNOTSUPP;
}

static int stub_link(struct fab_link *l)
{
	(void)l;
	return -EOPNOTSUPP;
}

static int stub_mr_dereg(struct fab_mr *m)
{
	(void)m;
	return -EOPNOTSUPP;
}

static int stub_mr_reg(struct fab *f, void *a, size_t l, unsigned acc, struct fab_mr **o)
{
	(void)f, (void)a, (void)l, (void)acc, (void)o;
	return -EOPNOTSUPP;
}

static int stub_mr_reg_key(struct fab *f, void *a, size_t l, unsigned acc, uint32_t lk, uint32_t rk,
                           struct fab_mr **o)
{
	(void)f, (void)a, (void)l, (void)acc, (void)lk, (void)rk, (void)o;
	return -EOPNOTSUPP;
}

static int stub_poll(struct fab *f, struct fab_wc *wc, int max)
{
	(void)f, (void)wc, (void)max;
	return -EOPNOTSUPP;
}

static int stub_post(struct fab_link *l, const struct fab_wr *wr, int n)
{
	(void)l, (void)wr, (void)n;
	return -EOPNOTSUPP;
}

static int stub_post_recv(struct fab_link *l, const struct fab_recv_wr *wr, int n)
{
	(void)l, (void)wr, (void)n;
	return -EOPNOTSUPP;
}

static int stub_link_peer(struct fab_link *l, struct fab_addr *out)
{
	(void)l, (void)out;
	return -EOPNOTSUPP;
}

static int stub_fab(struct fab *f)
{
	(void)f;
	return -EOPNOTSUPP;
}

static int stub_progress(struct fab *f, int64_t t)
{
	(void)f, (void)t;
	return -EOPNOTSUPP;
}

static int stub_wait(struct fab *f, int t)
{
	(void)f, (void)t;
	return -EOPNOTSUPP;
}

/*
 * fab_ops_filled -- a copy of @src with every NULL op replaced by a stub.
 * Each provider keeps one such copy and points its handles at it.
 */
void fab_ops_fill(struct fab_ops *dst, const struct fab_ops *src)
{
	*dst = (struct fab_ops){
	    .size = sizeof(struct fab_ops),
	    .name = src->name,
	    .accept = src->accept ? src->accept : stub_accept,
	    .arm = src->arm ? src->arm : stub_fab,
	    .close = src->close,
	    .connect = src->connect ? src->connect : stub_connect,
	    .get_addr = src->get_addr ? src->get_addr : stub_get_addr,
	    .link_admit = src->link_admit ? src->link_admit : stub_link,
	    .link_close = src->link_close ? src->link_close : stub_link,
	    .link_peer = src->link_peer ? src->link_peer : stub_link_peer,
	    .link_state = src->link_state ? src->link_state : stub_link,
	    .mr_dereg = src->mr_dereg ? src->mr_dereg : stub_mr_dereg,
	    .mr_reg = src->mr_reg ? src->mr_reg : stub_mr_reg,
	    .mr_reg_key = src->mr_reg_key ? src->mr_reg_key : stub_mr_reg_key,
	    .open = src->open,
	    .poll = src->poll ? src->poll : stub_poll,
	    .post = src->post ? src->post : stub_post,
	    .post_recv = src->post_recv ? src->post_recv : stub_post_recv,
	    .progress = src->progress ? src->progress : stub_progress,
	    .wait = src->wait ? src->wait : stub_wait,
	    .wait_fd = src->wait_fd ? src->wait_fd : stub_fab,
	    .post_now = src->post_now, /* NULL: fab_post_now() says -EWOULDBLOCK itself */
	};
}

void fab_close(struct fab *fab)
{
	if (fab != NULL)
		fab->ops->close(fab);
}

const char *fab_opcode_str(int opcode)
{
	static const char *const names[] = {
	    [FAB_OP_WRITE] = "WRITE", [FAB_OP_WRITE_IMM] = "WRITE_IMM",
	    [FAB_OP_READ] = "READ",   [FAB_OP_CAS] = "CAS",
	    [FAB_OP_FAA] = "FAA",     [FAB_OP_SEND] = "SEND",
	    [FAB_OP_RECV] = "RECV",   [FAB_OP_RECV_IMM] = "RECV_IMM",
	};
	if (opcode <= 0 || opcode > FAB_OP_RECV_IMM)
		return "?";
	return names[opcode];
}

/* parse_tag -- exactly 2 * FAB_ADDR_TAG_LEN lower-case hex digits, not all zero. 0 or -EINVAL. */
static int parse_tag(const char *hex, uint8_t *tag)
{
	for (size_t i = 0; i < 2 * FAB_ADDR_TAG_LEN; i++) {
		char c = hex[i];
		unsigned v;

		if (c >= '0' && c <= '9')
			v = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = (unsigned)(c - 'a' + 10);
		else
			return -EINVAL; /* also the NUL of a short tag */
		tag[i / 2] = (uint8_t)(i % 2 ? tag[i / 2] | v : v << 4);
	}
	if (hex[2 * FAB_ADDR_TAG_LEN] != '\0')
		return -EINVAL;
	for (size_t i = 0; i < FAB_ADDR_TAG_LEN; i++)
		if (tag[i] != 0)
			return 0;
	return -EINVAL; /* a zero tag means none: it is not written */
}

int fab_addr_parse(const char *str, uint16_t default_port, struct fab_addr *out)
{
	char host[FAB_ADDR_STRLEN];
	const char *colon = NULL, *stop;
	unsigned long port = default_port;
	struct sockaddr_in *sin;
	struct fab_addr tmp;
	size_t hlen;

	if (str == NULL || out == NULL)
		return -EINVAL;
	memset(&tmp, 0, sizeof(tmp));
	/* "ip:port/tag": the tag ends the string */
	stop = strchr(str, '/');
	if (stop == NULL)
		stop = str + strlen(str);
	else if (parse_tag(stop + 1, tmp.tag) != 0)
		return -EINVAL;
	for (const char *p = str; p < stop; p++)
		if (*p == ':')
			colon = p;
	hlen = colon ? (size_t)(colon - str) : (size_t)(stop - str);
	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, str, hlen);
	host[hlen] = '\0';
	if (colon != NULL) {
		char *end;

		if (colon[1] < '0' || colon[1] > '9')
			return -EINVAL; /* strtoul would take "+80", " 80" or "-1" */
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || end != stop || end == colon + 1 || port > 65535)
			return -EINVAL;
	}
	sin = (struct sockaddr_in *)&tmp.ss;
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
		return -EINVAL;
	tmp.len = sizeof(*sin);
	*out = tmp; /* written only on success */
	return 0;
}

int fab_addr_format(const struct fab_addr *addr, char *buf, size_t len)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&addr->ss;
	char ip[INET_ADDRSTRLEN], tag[2 * FAB_ADDR_TAG_LEN + 2] = "";

	if (addr->ss.ss_family != AF_INET ||
	    inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)) == NULL)
		return -EINVAL;
	if (fab_addr_has_tag(addr)) {
		tag[0] = '/';
		for (size_t i = 0; i < FAB_ADDR_TAG_LEN; i++)
			snprintf(tag + 1 + 2 * i, 3, "%02x", addr->tag[i]);
	}
	if ((size_t)snprintf(buf, len, "%s:%u%s", ip, ntohs(sin->sin_port), tag) >= len)
		return -ENOSPC;
	return 0;
}

bool fab_same_host(const struct fab_addr *a, const struct fab_addr *b)
{
	if (a->ss.ss_family != b->ss.ss_family)
		return false;
	if (a->ss.ss_family == AF_INET)
		return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)&b->ss)->sin_addr.s_addr;
	if (a->ss.ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr,
		              &((const struct sockaddr_in6 *)&b->ss)->sin6_addr,
		              sizeof(struct in6_addr)) == 0;
	return false;
}

void fab_refuse_log(struct fab_ratelog *rl, const char *prov, const struct fab_addr *who,
                    const char *why)
{
	uint64_t now = lc_now_ns();
	char where[FAB_ADDR_STRLEN] = "?";

	if (now < rl->next_ns) {
		rl->dropped++;
		return;
	}
	if (who != NULL)
		fab_addr_format(who, where, sizeof(where));
	if (rl->dropped)
		lc_log_warn("%s: refused a connection from %s: %s (and %u more refused in the last "
		            "second)",
		            prov, where, why, rl->dropped);
	else
		lc_log_warn("%s: refused a connection from %s: %s", prov, where, why);
	rl->dropped = 0;
	rl->next_ns = now + 1000000000ull;
}
