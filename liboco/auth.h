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
 * Thread safety: every step runs on the progress thread; nothing here
 * blocks (the connector's connect is non-blocking).
 */
#ifndef LOCO_LC_AUTH_H
#define LOCO_LC_AUTH_H

#include <loco.h>

#include "conn.h"
#include "ctrl_wire.h"

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

#endif /* LOCO_LC_AUTH_H */
