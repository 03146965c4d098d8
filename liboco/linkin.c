/* SPDX-License-Identifier: BSD-2-Clause */
/* linkin.c -- data links other nodes open to us: checked, then admitted (linkin.h, auth.h). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linkin.h"
#include "log.h"
#include "manager.h"

/* hs_limit -- how long a link may wait for its member's session: the handshake bound. */
static uint64_t hs_limit(const loco_manager_t *m)
{
	uint64_t limit = (uint64_t)m->cfg.fail_timeout_ms * 1000000ull;

	return limit > LC_IO_TIMEOUT_MS * 1000000ull ? limit : LC_IO_TIMEOUT_MS * 1000000ull;
}

/* log_window -- a new second: say how many refusals the last one kept quiet. */
static void log_window(loco_manager_t *m, uint64_t sec)
{
	if (sec == m->linkin.log_sec)
		return;
	if (m->linkin.log_quiet > 0)
		lc_log_warn("manager: %u more data link(s) refused in the last second",
		            m->linkin.log_quiet);
	m->linkin.log_sec = sec;
	m->linkin.log_n = 0;
	m->linkin.log_quiet = 0;
}

/*
 * refuse -- close @link, which claims @node/@inc (0: nothing readable),
 * and say why with its real address; rate-limited (linkin.h).
 */
static void refuse(loco_manager_t *m, struct fab_link *link, uint32_t node, uint64_t inc,
                   const char *why)
{
	uint64_t sec = lc_now_ns() / 1000000000ull;
	char addr[FAB_ADDR_STRLEN] = "unknown";
	struct fab_addr fa;

	m->linkin.refused++;
	log_window(m, sec);
	if (m->linkin.log_n < LC_LINKIN_LOG_MAX) {
		m->linkin.log_n++;
		if (fab_link_peer(link, &fa) != 0 || fab_addr_format(&fa, addr, sizeof(addr)) != 0)
			snprintf(addr, sizeof(addr), "unknown");
		lc_log_warn("manager: refused a data link from %s claiming node %u (incarnation "
		            "%llx): %s",
		            addr, node, (unsigned long long)inc, why);
	} else {
		m->linkin.log_quiet++;
	}
	fab_link_close(link);
}

/* why_str -- a refusal's cause for the log. */
static const char *why_str(int err)
{
	return err == -ESTALE ? "replayed private data (its counter was used)"
	                      : "no valid proof of the cluster key for that member";
}

/* admit -- let @link serve; 0, or -errno (then it is closed). */
static int admit(struct fab_link *link, const struct lc_link_priv *priv)
{
	int ret = fab_link_admit(link);

	if (ret) {
		lc_log_info("manager: data link from node %u went down before it was admitted: %s",
		            priv->node, strerror(-ret));
		fab_link_close(link);
	}
	return ret;
}

/* session -- @node/@inc's authenticated session, or NULL. m->lock held. */
static struct lc_conn *session(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	struct lc_member *mb = lc_members_find(lc_members_first(&m->members), node);

	if (mb == NULL || mb->info.inc != inc || mb->conn == NULL || !mb->conn->link_key_set ||
	    mb->conn->state != LC_CONN_UP || lc_conn_is_dead(mb->conn))
		return NULL;
	return mb->conn;
}

/* proof_in -- the proof a link from @c's peer to us must make. */
static void proof_in(const loco_manager_t *m, const struct lc_conn *c, struct lc_link_proof *out)
{
	memcpy(out->key, c->link_key, LC_LINK_KEY_LEN);
	out->from_node = c->peer.node;
	out->from_inc = c->peer.inc;
	out->to_node = m->node_id;
	out->to_inc = m->inc;
}

/* check_in -- whether @priv proves a link on session @c; 0 or -EACCES/-ESTALE. */
static int check_in(const loco_manager_t *m, const struct lc_conn *c,
                    const struct lc_link_priv *priv)
{
	struct lc_link_proof proof;
	int ret;

	proof_in(m, c, &proof);
	ret = lc_link_priv_check(&proof, priv, c->link_ctr_seen);
	sodium_memzero(&proof, sizeof(proof));
	return ret;
}

int lc_linkin_proof(loco_manager_t *m, uint32_t node, uint64_t inc, struct lc_link_proof *out)
{
	struct lc_conn *c = session(m, node, inc);

	if (c == NULL)
		return -ENOTCONN;
	memcpy(out->key, c->link_key, LC_LINK_KEY_LEN);
	out->from_node = m->node_id;
	out->from_inc = m->inc;
	out->to_node = node;
	out->to_inc = inc;
	return 0;
}

uint64_t lc_linkin_counter(loco_manager_t *m)
{
	return __atomic_add_fetch(&m->linkin.counter, 1, __ATOMIC_RELAXED);
}

/* pending_unlink -- take *@pp off the list and free it (its link is the caller's). */
static void pending_unlink(loco_manager_t *m, struct lc_pending_link **pp)
{
	struct lc_pending_link *p = *pp;

	*pp = p->next;
	m->linkin.npending--;
	free(p);
}

/* hold -- keep @link until its member's session is authenticated, within the bounds. */
static void hold(loco_manager_t *m, struct fab_link *link, const struct lc_link_priv *priv)
{
	struct lc_pending_link *p;
	unsigned same = 0;

	for (p = m->linkin.pending; p != NULL; p = p->next)
		if (p->priv.node == priv->node)
			same++;
	if (m->linkin.npending >= LC_PENDING_MAX || same >= LC_PENDING_PER_NODE) {
		refuse(m, link, priv->node, priv->inc,
		       "too many links wait for an authenticated session");
		return;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		refuse(m, link, priv->node, priv->inc, "out of memory");
		return;
	}
	*p = (struct lc_pending_link){
	    .link = link, .priv = *priv, .since_ns = lc_now_ns(), .next = m->linkin.pending};
	m->linkin.pending = p;
	m->linkin.npending++;
}

/* expire -- refuse the waiting links past the handshake bound, or already down. */
static void expire(loco_manager_t *m, uint64_t now)
{
	uint64_t limit = hs_limit(m);

	for (struct lc_pending_link **pp = &m->linkin.pending; *pp != NULL;) {
		struct lc_pending_link *p = *pp;
		struct fab_link *link = p->link;
		struct lc_link_priv priv = p->priv;
		int down = fab_link_state(link);

		if (now - p->since_ns <= limit && down == 0) {
			pp = &p->next;
			continue;
		}
		pending_unlink(m, pp);
		/* down: the connector gave up, or the fabric's own hold bound passed */
		refuse(m, link, priv.node, priv.inc,
		       down != 0 ? "went down before its member's session was authenticated"
		                 : "no authenticated session within the handshake bound");
	}
}

struct fab_link *lc_linkin_take(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	struct lc_conn *c = session(m, node, inc);
	struct fab_link *found = NULL;

	if (c == NULL)
		return NULL;
	for (struct lc_pending_link **pp = &m->linkin.pending; *pp != NULL;) {
		struct lc_pending_link *p = *pp;
		struct fab_link *link = p->link;
		struct lc_link_priv priv = p->priv;
		int ret;

		/* a newer incarnation's link waits for its own session */
		if (priv.node != node || priv.inc > inc) {
			pp = &p->next;
			continue;
		}
		pending_unlink(m, pp);
		if (priv.inc < inc) {
			refuse(m, link, priv.node, priv.inc, "a stale incarnation");
			continue;
		}
		if (found != NULL) {
			refuse(m, link, priv.node, priv.inc,
			       "another link of that member was admitted");
			continue;
		}
		ret = check_in(m, c, &priv);
		if (ret) {
			refuse(m, link, priv.node, priv.inc, why_str(ret));
			continue;
		}
		c->link_ctr_seen = priv.counter; /* one-time: check_in() wants more next time */
		if (admit(link, &priv) == 0) {
			link->ctx = priv.node; /* completions name the node */
			found = link;
		}
	}
	return found;
}

void lc_linkin_forget(loco_manager_t *m, uint32_t node, uint64_t inc)
{
	for (struct lc_pending_link **pp = &m->linkin.pending; *pp != NULL;) {
		struct lc_pending_link *p = *pp;
		struct fab_link *link = p->link;

		if (p->priv.node != node || p->priv.inc > inc) {
			pp = &p->next;
			continue;
		}
		pending_unlink(m, pp);
		fab_link_close(link);
	}
}

void lc_linkin_free(loco_manager_t *m)
{
	while (m->linkin.pending != NULL) {
		struct fab_link *link = m->linkin.pending->link;

		pending_unlink(m, &m->linkin.pending);
		fab_link_close(link);
	}
	sodium_memzero(m->linkin.self_key, sizeof(m->linkin.self_key));
}

/* self_proof -- the proof of our self link. */
static void self_proof(const loco_manager_t *m, struct lc_link_proof *out)
{
	memcpy(out->key, m->linkin.self_key, LC_LINK_KEY_LEN);
	out->from_node = out->to_node = m->node_id;
	out->from_inc = out->to_inc = m->inc;
}

/* accept_self -- a link claiming to be our own self link. */
static void accept_self(loco_manager_t *m, struct fab_link *link, const struct lc_link_priv *priv)
{
	struct lc_link_proof proof;
	int ret = -EACCES;

	if (__atomic_load_n(&m->linkin.self_ready, __ATOMIC_ACQUIRE) && priv->inc == m->inc &&
	    m->linkin.self_served == NULL) {
		self_proof(m, &proof);
		ret = lc_link_priv_check(&proof, priv, m->linkin.self_seen);
		sodium_memzero(&proof, sizeof(proof));
	}
	if (ret) {
		refuse(m, link, priv->node, priv->inc, why_str(ret));
		return;
	}
	m->linkin.self_seen = priv->counter;
	if (admit(link, priv) == 0) {
		link->ctx = priv->node;
		m->linkin.self_served = link; /* the far end of our self link */
	}
}

/*
 * ready_add -- an admitted link for (@node, @inc): the member table takes
 * it (lc_linkin_ready(), from lc_member_handoffs()) in this same progress
 * turn. Without room (LC_READY_MAX admitted in one turn) it is closed: its
 * connector sees the link fail and dials again.
 */
static void ready_add(loco_manager_t *m, uint32_t node, uint64_t inc, struct fab_link *link)
{
	struct lc_linkin *li = &m->linkin;

	if (li->nready >= LC_READY_MAX) {
		fab_link_close(link);
		return;
	}
	li->ready[li->nready++] = (struct lc_ready_link){.node = node, .inc = inc, .link = link};
}

struct fab_link *lc_linkin_ready(loco_manager_t *m, uint32_t *node, uint64_t *inc)
{
	struct lc_linkin *li = &m->linkin;
	struct lc_ready_link r;

	if (li->nready == 0)
		return NULL;
	r = li->ready[--li->nready];
	*node = r.node;
	*inc = r.inc;
	return r.link;
}

int lc_linkin_newer(loco_manager_t *m, uint32_t *node, uint64_t *inc)
{
	struct lc_linkin *li = &m->linkin;

	if (li->nnewer == 0)
		return 0;
	li->nnewer--;
	*node = li->newer[li->nnewer].node;
	*inc = li->newer[li->nnewer].inc;
	return 1;
}

/* accept_one -- check a link just accepted: admit and bind it, hold it, or refuse it. */
static void accept_one(loco_manager_t *m, struct fab_link *link, const void *buf, size_t len)
{
	struct lc_link_priv priv;
	struct lc_member *mb;
	struct lc_conn *c;
	int ret;

	if (lc_link_priv_decode(buf, len, &priv) != 0) {
		refuse(m, link, 0, 0, "malformed private data");
		return;
	}
	if (priv.node == m->node_id) {
		accept_self(m, link, &priv);
		return;
	}
	mb = lc_members_find(lc_members_first(&m->members), priv.node);
	if (priv.node == 0 || (mb != NULL && mb->info.inc > priv.inc)) {
		refuse(m, link, priv.node, priv.inc, "a stale incarnation");
		return;
	}
	c = session(m, priv.node, priv.inc);
	if (c == NULL || mb->link != NULL) {
		/*
		 * No session yet (the handshake may still run), or the member
		 * has a link (a rebuild the other side started before we saw
		 * ours go down): wait, held, checked when taken.
		 */
		if (c != NULL && (ret = check_in(m, c, &priv)) != 0) {
			refuse(m, link, priv.node, priv.inc, why_str(ret));
			return;
		}
		hold(m, link, &priv);
		if (c != NULL && m->linkin.nnewer < LC_READY_MAX)
			m->linkin.newer[m->linkin.nnewer++] =
			    (struct lc_ready_link){.node = priv.node, .inc = priv.inc};
		return;
	}
	ret = check_in(m, c, &priv);
	if (ret) {
		refuse(m, link, priv.node, priv.inc, why_str(ret));
		return;
	}
	c->link_ctr_seen = priv.counter;
	if (admit(link, &priv) != 0)
		return;
	link->ctx = priv.node; /* completions name the node */
	ready_add(m, priv.node, priv.inc, link);
}

void lc_linkin_accept(loco_manager_t *m)
{
	uint8_t priv[FAB_PRIV_MAX];
	struct fab_link *link;
	size_t plen;

	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < 64 && fab_accept(m->fab, 0, 0, &link, priv, &plen) == 0; i++)
		accept_one(m, link, priv, plen);
	if (m->linkin.pending != NULL)
		expire(m, lc_now_ns());
	if (m->linkin.log_quiet > 0)
		log_window(m, lc_now_ns() / 1000000000ull);
	pthread_mutex_unlock(&m->lock);
}

void lc_self_link(loco_manager_t *m)
{
	struct lc_link_proof proof;
	struct fab_link *link;
	int ret;

	randombytes_buf(m->linkin.self_key, sizeof(m->linkin.self_key));
	/* pairs with the acquire load in accept_self() */
	__atomic_store_n(&m->linkin.self_ready, 1, __ATOMIC_RELEASE);
	self_proof(m, &proof);
	ret = lc_link_open(m->fab, m->fab_addr, &proof, lc_linkin_counter(m),
	                   (int)m->cfg.fail_timeout_ms, &link);
	sodium_memzero(&proof, sizeof(proof));
	if (ret)
		return;
	pthread_mutex_lock(&m->lock);
	m->linkin.self_link = link;
	lc_links_set(&m->links, m->node_id, link);
	pthread_mutex_unlock(&m->lock);
}

int lc_linkin_has_self(loco_manager_t *m)
{
	return m->linkin.self_link != NULL;
}

void lc_linkin_close_self(loco_manager_t *m)
{
	if (m->linkin.self_link != NULL)
		fab_link_close(m->linkin.self_link);
	if (m->linkin.self_served != NULL)
		fab_link_close(m->linkin.self_served);
	m->linkin.self_link = m->linkin.self_served = NULL;
}
