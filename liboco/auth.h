/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * auth.h -- authentication of control connections.
 *
 *   connector                          acceptor
 *   HELLO(nonce_c, who I am)  ---->
 *                             <----    CHALLENGE(nonce_s, mac_s)
 *   check mac_s; AUTH(mac_c)  ---->
 *                             <----    check mac_c; WELCOME(members)
 *
 * mac_x = HMAC-SHA256(key, role_x | nonce_c | nonce_s | node_c | inc_c |
 * node_s | inc_s), key = BLAKE2b(secret): each side proves it knows the
 * secret without sending it, bound to both fresh nonces and both
 * identities. A wrong secret is refused and logged on both sides.
 *
 * Data links. Once a session is authenticated both sides hold its
 * link key
 *   K = BLAKE2b-256 keyed with key, over "loco link key" | nonce_c |
 *       nonce_s | node_c | inc_c | node_s | inc_s,
 * which only holders of the secret can compute, and which is fresh for
 * every control session (both nonces). A data link's connector proves,
 * in the link's private data (links.h: version, node, inc, counter, tag),
 *   tag = BLAKE2b-128 keyed with K, over "loco link v1" | from node |
 *         from inc | to node | to inc | counter,
 * that it holds K and is the member it claims, bound to this session and
 * this acceptor. The counter is one-time: a node numbers every link it
 * opens from one counter (linkin.h), and the acceptor admits a link only
 * when its counter is above the highest one admitted on the session, so
 * a captured private data cannot open a second link. The tag is checked
 * in constant time. A link is admitted (fab_link_admit()) and bound to
 * its member only after the check; a wrong tag, a replayed counter, a
 * stale incarnation or a malformed private data is refused
 * (fab_link_close()) and logged with the link's real address. A link
 * whose session is not authenticated yet waits, held, within bounds
 * (linkin.h). The self link uses a random key the node draws at start.
 *
 * What this does not do: the tcp fabric's bytes are neither encrypted
 * nor authenticated after the link is admitted, so an on-path attacker
 * can still read and inject traffic on an admitted link
 * (loco-fabric-tcp(7)); an off-path stranger cannot open a link at all.
 *
 * Thread safety: every step runs on the progress thread; nothing here
 * blocks (the connector's connect is non-blocking).
 */
#ifndef LOCO_LC_AUTH_H
#define LOCO_LC_AUTH_H

#include <loco.h>

#include "conn.h"
#include "ctrl_wire.h"
#include "links.h"

/*
 * lc_auth_connect -- start a connection to the manager at @addr: a
 * non-blocking connect with HELLO queued (@msg is scratch). The progress
 * thread adopts it; the steps follow as messages arrive. Returns 0 and
 * *@out (state LC_CONN_CHALLENGE); -errno of socket/connect, -ENOMEM.
 */
int lc_auth_connect(loco_manager_t *m, const char *addr, struct lc_conn **out, struct lc_msg *msg);

/*
 * lc_auth_challenge -- connector: check the CHALLENGE in @msg; on success
 * fill @msg with the AUTH to send (state LC_CONN_WELCOME) and return 0;
 * -LOCO_EAUTH when the acceptor does not know the secret.
 */
int lc_auth_challenge(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg);

/*
 * lc_auth_hello -- acceptor: check the HELLO in @msg (@known_inc: the
 * incarnation we know of that node, 0: none); on success fill @msg
 * with the CHALLENGE to send and return 0, else return the refusal's
 * -errno with *@why set (send REFUSE, drop the connection).
 */
int lc_auth_hello(loco_manager_t *m, struct lc_conn *c, struct lc_msg *msg, uint64_t known_inc,
                  const char **why);

/* lc_auth_check -- acceptor: whether the AUTH in @msg proves the secret. 0 or -LOCO_EAUTH. */
int lc_auth_check(loco_manager_t *m, struct lc_conn *c, const struct lc_msg *msg);

/* lc_self_info -- this node as a member list entry (HELLO, WELCOME). */
void lc_self_info(const loco_manager_t *m, struct lc_member_info *out);

/* lc_auth_refuse -- queue a REFUSE(@err, @why) on @c. */
void lc_auth_refuse(struct lc_conn *c, int err, const char *why);

/* The proof a data link's connector makes: who to whom, with which session key. */
struct lc_link_proof {
	uint8_t key[LC_LINK_KEY_LEN];
	uint32_t from_node, to_node;
	uint64_t from_inc, to_inc;
};

/*
 * lc_auth_link_key -- the data-link key K of a session (above) between
 * connector @node_c/@inc_c and acceptor @node_s/@inc_s, from the cluster
 * @key and both handshake nonces.
 */
void lc_auth_link_key(const uint8_t key[32], const uint8_t *nonce_c, const uint8_t *nonce_s,
                      uint32_t node_c, uint64_t inc_c, uint32_t node_s, uint64_t inc_s,
                      uint8_t out[LC_LINK_KEY_LEN]);

/* lc_link_priv_make -- the private data (links.h) proving @proof with one-time @counter. */
void lc_link_priv_make(const struct lc_link_proof *proof, uint64_t counter,
                       uint8_t out[LC_LINK_PRIV_LEN]);

/*
 * lc_link_priv_decode -- decode @len bytes at @buf into *@out. 0, or
 * -EPROTO (wrong length, version or padding; *@out untouched).
 */
int lc_link_priv_decode(const void *buf, size_t len, struct lc_link_priv *out);

/*
 * lc_link_priv_check -- whether @priv proves @proof (its from_* must
 * match @priv's node and inc) with a counter above @seen. 0; -EACCES
 * (a claim or a tag that @proof does not vouch for), -ESTALE (a counter
 * at or below @seen: a replay). Constant time in the tag.
 */
int lc_link_priv_check(const struct lc_link_proof *proof, const struct lc_link_priv *priv,
                       uint64_t seen);

#endif /* LOCO_LC_AUTH_H */
