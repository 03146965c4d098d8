/* SPDX-License-Identifier: BSD-2-Clause */
/* auth.c -- authentication of control connections (the protocol is in auth.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "manager.h"

/* lc_self_info -- this node as a member list entry. */
void lc_self_info(const loco_manager_t *m, struct lc_member_info *out)
{
	memset(out, 0, sizeof(*out));
	out->node = m->node_id;
	out->inc = m->inc;
	memcpy(out->ctrl_addr, m->ctrl_addr, sizeof(out->ctrl_addr));
	memcpy(out->fab_addr, m->fab_addr, sizeof(out->fab_addr));
}

/* mac -- mac_x of auth.h over both nonces and both identities. */
static void mac(const loco_manager_t *m, char role, const uint8_t *nonce_c, const uint8_t *nonce_s,
                uint32_t node_c, uint64_t inc_c, uint32_t node_s, uint64_t inc_s,
                uint8_t out[LC_MAC_LEN])
{
	uint8_t msg[1 + 2 * LC_NONCE_LEN + 2 * 12], *p = msg;

	*p++ = (uint8_t)role;
	memcpy(p, nonce_c, LC_NONCE_LEN);
	p += LC_NONCE_LEN;
	memcpy(p, nonce_s, LC_NONCE_LEN);
	p += LC_NONCE_LEN;
	memcpy(p, &node_c, 4);
	memcpy(p + 4, &inc_c, 8);
	memcpy(p + 12, &node_s, 4);
	memcpy(p + 16, &inc_s, 8);
	crypto_auth_hmacsha256(out, msg, sizeof(msg), m->key);
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void lc_auth_link_key(const uint8_t key[32], const uint8_t *nonce_c, const uint8_t *nonce_s,
                      uint32_t node_c, uint64_t inc_c, uint32_t node_s, uint64_t inc_s,
                      uint8_t out[LC_LINK_KEY_LEN])
{
	static const char label[] = "loco link key";
	uint8_t msg[sizeof(label) - 1 + 2 * LC_NONCE_LEN + 2 * 12], *p = msg;

	memcpy(p, label, sizeof(label) - 1);
	p += sizeof(label) - 1;
	memcpy(p, nonce_c, LC_NONCE_LEN);
	p += LC_NONCE_LEN;
	memcpy(p, nonce_s, LC_NONCE_LEN);
	p += LC_NONCE_LEN;
	p = put32(p, node_c);
	p = put64(p, inc_c);
	p = put32(p, node_s);
	put64(p, inc_s);
	crypto_generichash(out, LC_LINK_KEY_LEN, msg, sizeof(msg), key, 32);
}

/* link_tag -- the tag of auth.h over @proof's ends and @counter. */
static void link_tag(const struct lc_link_proof *proof, uint64_t counter,
                     uint8_t out[LC_LINK_TAG_LEN])
{
	static const char label[] = "loco link v1";
	uint8_t msg[sizeof(label) - 1 + 2 * 12 + 8], *p = msg;

	memcpy(p, label, sizeof(label) - 1);
	p += sizeof(label) - 1;
	p = put32(p, proof->from_node);
	p = put64(p, proof->from_inc);
	p = put32(p, proof->to_node);
	p = put64(p, proof->to_inc);
	put64(p, counter);
	crypto_generichash(out, LC_LINK_TAG_LEN, msg, sizeof(msg), proof->key, LC_LINK_KEY_LEN);
}

void lc_link_priv_make(const struct lc_link_proof *proof, uint64_t counter,
                       uint8_t out[LC_LINK_PRIV_LEN])
{
	uint8_t *p = out;

	*p++ = LC_LINK_PRIV_VERSION;
	*p++ = 0;
	*p++ = 0;
	*p++ = 0;
	p = put32(p, proof->from_node);
	p = put64(p, proof->from_inc);
	p = put64(p, counter);
	link_tag(proof, counter, p);
}

int lc_link_priv_decode(const void *buf, size_t len, struct lc_link_priv *out)
{
	const uint8_t *p = buf;

	if (buf == NULL || len != LC_LINK_PRIV_LEN || p[0] != LC_LINK_PRIV_VERSION || p[1] != 0 ||
	    p[2] != 0 || p[3] != 0)
		return -EPROTO;
	out->node = get32(p + 4);
	out->inc = get64(p + 8);
	out->counter = get64(p + 16);
	memcpy(out->tag, p + 24, LC_LINK_TAG_LEN);
	return 0;
}

int lc_link_priv_check(const struct lc_link_proof *proof, const struct lc_link_priv *priv,
                       uint64_t seen)
{
	uint8_t want[LC_LINK_TAG_LEN];
	int ok;

	if (priv->node != proof->from_node || priv->inc != proof->from_inc)
		return -EACCES;
	link_tag(proof, priv->counter, want);
	ok = sodium_memcmp(want, priv->tag, LC_LINK_TAG_LEN) == 0;
	sodium_memzero(want, sizeof(want));
	if (!ok)
		return -EACCES;
	return priv->counter > seen ? 0 : -ESTALE;
}

void lc_auth_refuse(struct lc_conn *c, int err, const char *why)
{
	struct lc_msg msg = {.type = LC_MSG_REFUSE};

	msg.u.refuse.err = (uint32_t)err;
	snprintf(msg.u.refuse.reason, sizeof(msg.u.refuse.reason), "%s", why);
	lc_conn_send(c, &msg);
}

int lc_auth_connect(loco_manager_t *m, const char *addr, struct lc_conn **out, struct lc_msg *msg)
{
	struct fab_addr a;
	struct lc_conn *c;
	int fd, ret, one = 1;

	ret = fab_addr_parse(addr, 0, &a);
	if (ret) {
		lc_log_err("manager: bad member address %s", addr);
		return ret;
	}
	fd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a.ss, a.len) < 0 && errno != EINPROGRESS) {
		ret = -errno;
		close(fd);
		return ret;
	}
	c = lc_conn_new(fd, 1, m->node_id, m->inc);
	if (c == NULL) {
		close(fd);
		return -ENOMEM;
	}
	snprintf(c->peer.ctrl_addr, sizeof(c->peer.ctrl_addr), "%s", addr);
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_HELLO;
	memcpy(msg->u.hello.nonce, c->nonce_mine, LC_NONCE_LEN);
	snprintf(msg->u.hello.fabric, sizeof(msg->u.hello.fabric), "%s", m->fabric);
	lc_self_info(m, &msg->u.hello.self);
	/* queued: it goes out once the connection is made (EPOLLOUT) */
	ret = lc_conn_send(c, msg);
	if (ret && ret != -EAGAIN) {
		lc_conn_free(c);
		return ret;
	}
	c->state = LC_CONN_CHALLENGE;
	*out = c;
	return 0;
}

int lc_auth_challenge(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg)
{
	uint8_t want[LC_MAC_LEN];

	c->peer.node = msg->src_node;
	c->peer.inc = msg->src_inc;
	memcpy(c->nonce_peer, msg->u.challenge.nonce, LC_NONCE_LEN);
	mac(m, 'S', c->nonce_mine, c->nonce_peer, m->node_id, m->inc, c->peer.node, c->peer.inc,
	    want);
	if (sodium_memcmp(want, msg->u.challenge.mac, LC_MAC_LEN) != 0) {
		lc_log_err("manager: node %u at %s failed authentication: wrong cluster secret "
		           "(LOCO_SECRET)",
		           c->peer.node, c->peer.ctrl_addr);
		return -LOCO_EAUTH;
	}
	/* the acceptor proved the secret: the session's data-link key (auth.h) */
	lc_auth_link_key(m->key, c->nonce_mine, c->nonce_peer, m->node_id, m->inc, c->peer.node,
	                 c->peer.inc, c->link_key);
	c->link_key_set = 1;
	c->link_ctr_seen = 0;
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_AUTH;
	mac(m, 'C', c->nonce_mine, c->nonce_peer, m->node_id, m->inc, c->peer.node, c->peer.inc,
	    msg->u.auth.mac);
	c->state = LC_CONN_WELCOME;
	return 0;
}

int lc_auth_hello(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg, uint64_t known_inc,
                  const char **why)
{
	const struct lc_member_info *who = &msg->u.hello.self;

	if (strcmp(msg->u.hello.fabric, m->fabric) != 0) {
		lc_log_err("manager: node %u uses fabric %s, we use %s: refused", who->node,
		           msg->u.hello.fabric, m->fabric);
		*why = "fabric mismatch";
		return -EPROTO;
	}
	if (who->node == m->node_id || who->node == 0 || who->node != msg->src_node ||
	    who->inc != msg->src_inc) {
		lc_log_err("manager: refused a node claiming id %u (ours is %u)", who->node,
		           m->node_id);
		*why = "node id in use";
		return -EEXIST;
	}
	if (known_inc > who->inc) {
		*why = "stale incarnation";
		return -ESTALE;
	}
	c->peer = *who;
	memcpy(c->nonce_peer, msg->u.hello.nonce, LC_NONCE_LEN);
	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_CHALLENGE;
	memcpy(msg->u.challenge.nonce, c->nonce_mine, LC_NONCE_LEN);
	mac(m, 'S', c->nonce_peer, c->nonce_mine, c->peer.node, c->peer.inc, m->node_id, m->inc,
	    msg->u.challenge.mac);
	c->state = LC_CONN_AUTH;
	return 0;
}

int lc_auth_check(loco_manager_t *m, struct lc_conn *c, const struct lc_msg *msg)
{
	uint8_t want[LC_MAC_LEN];

	mac(m, 'C', c->nonce_peer, c->nonce_mine, c->peer.node, c->peer.inc, m->node_id, m->inc,
	    want);
	if (sodium_memcmp(want, msg->u.auth.mac, LC_MAC_LEN) != 0) {
		lc_log_err("manager: node %u (%s) failed authentication: wrong cluster secret "
		           "(LOCO_SECRET); refused",
		           c->peer.node, c->peer.ctrl_addr);
		return -LOCO_EAUTH;
	}
	lc_auth_link_key(m->key, c->nonce_peer, c->nonce_mine, c->peer.node, c->peer.inc,
	                 m->node_id, m->inc, c->link_key);
	c->link_key_set = 1;
	c->link_ctr_seen = 0;
	c->state = LC_CONN_UP;
	return 0;
}
