/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * link.c -- the life of a tcp link: creation and publication to the NIC
 * thread, connect (HELLO, then the HELLO_ACK that says we were admitted),
 * accept (HELLO, the link held in the accept queue, admission answers the
 * HELLO with HELLO_ACK), the caps on links not admitted yet, close and
 * free. Failure is in state.c; the HELLO and hold bounds in nic.c.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "../../sock.h"
#include "tcp.h"

static int set_sock_opts(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

/*
 * link_new -- a link on @fd. A passive one (accepted, not admitted yet)
 * gets only the room for a HELLO: a stranger's connection costs little
 * until it proved itself; its queues come with the HELLO, its buffers with
 * admission (link_alloc_queues(), link_alloc_io()).
 */
static struct tcp_link *link_new(struct tcp_fab *f, int fd, int passive)
{
	struct tcp_link *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->fab = f;
	l->fd = fd;
	l->base.fab = &f->base;
	l->passive = passive;
	l->admitted = l->admit_done = !passive;
	l->acked_psn = (uint32_t)-1;
	l->rx_cap = passive ? TCP_HDR_LEN + TCP_HELLO_LEN : TCP_RX_CAP;
	l->rx = malloc(l->rx_cap);
	pthread_spin_init(&l->post_lock, PTHREAD_PROCESS_PRIVATE);
	if (l->rx == NULL) {
		l->fd = -1;
		tcp_link_free(l);
		return NULL;
	}
	return l;
}

/* link_alloc_queues -- the send and receive queues (posting needs them). 0, -ENOMEM. */
static int link_alloc_queues(struct tcp_link *l)
{
	const struct fab_attr *a = &l->fab->base.attr;
	uint32_t sq = fab_pow2_at_least(a->sq_depth), rq = fab_pow2_at_least(a->rq_depth);

	l->sq_mask = sq - 1;
	l->rq_mask = rq - 1;
	l->sq = calloc(sq, sizeof(*l->sq));
	l->sq_inline = malloc((size_t)sq * a->max_inline);
	l->rq = calloc(rq, sizeof(*l->rq));
	return l->sq == NULL || l->sq_inline == NULL || l->rq == NULL ? -ENOMEM : 0;
}

/*
 * link_alloc_io -- the full rx buffer, and the tx buffer sized from the
 * peer's announced limits (l->hello).
 */
static int link_alloc_io(struct tcp_link *l)
{
	const struct tcp_hello *h = &l->hello;

	if (l->rx_cap < TCP_RX_CAP) {
		uint8_t *rx = realloc(l->rx, TCP_RX_CAP);

		if (rx == NULL)
			return -ENOMEM;
		l->rx = rx;
		l->rx_cap = TCP_RX_CAP;
	}
	l->peer_sq_depth = h->sq_depth;
	l->peer_read_window = h->read_window;
	/* READ data + one header per READ segment or atomic the peer may have in flight */
	l->tx_reserve =
	    h->read_window + ((size_t)h->sq_depth + h->read_window / TCP_MAX_SEG + 8) * TCP_HDR_LEN;
	l->tx_cap = l->tx_reserve + 2 * (TCP_HDR_LEN + TCP_MAX_SEG);
	l->tx = malloc(l->tx_cap);
	return l->tx ? 0 : -ENOMEM;
}

void tcp_link_free(struct tcp_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	pthread_spin_destroy(&l->post_lock);
	free(l->sq);
	free(l->sq_inline);
	free(l->rq);
	free(l->rx);
	free(l->tx);
	free(l);
}

/*
 * Admission under a flood. Nothing tells a member's connection from a
 * stranger's before the caller checked its proof (after fab_accept()), so
 * the caps on links not admitted yet cannot sort them, and refusing
 * newcomers once the caps were met let a stranger who keeps them full
 * (reopening what we close) refuse every member for as long as it liked.
 * So a newcomer always comes in, and room is made by closing the link
 * that has least to show for itself: one that sent no HELLO yet (silent),
 * then one whose HELLO waits in the accept queue; the oldest of those;
 * from the newcomer's address when that cap is the one met. A connector
 * sends its HELLO right after connect() and it is read as the connection
 * is accepted (tcp_nic_accept()), and the caller takes held links on its
 * next turn: a member's link is closed only if the cap's worth of newer
 * connections (from its own address, for that cap) came in before that,
 * not however long the flood lasts. The links the caller took are its to
 * bound (the core's pending links, linkin.h) and count no more here. One
 * in, one out: memory and fds stay within the caps, and the cost is the
 * scan the caps already made.
 */

/* unadmitted -- whether @x counts against the caps: accepted, not admitted, and still ours. */
static int unadmitted(const struct tcp_link *x)
{
	return x->passive &&
	       (x->state == TCP_LINK_HANDSHAKE || (x->state == TCP_LINK_HELD && x->pending.queued));
}

/* gives_way -- whether @x goes before @v: silent first, then older. */
static int gives_way(const struct tcp_link *x, const struct tcp_link *v)
{
	int xs = x->state == TCP_LINK_HANDSHAKE, vs = v->state == TCP_LINK_HANDSHAKE;

	/* link ids grow with each link published: a smaller one is older */
	return xs != vs ? xs : x->base.id < v->base.id;
}

/*
 * admission_room -- under the lock: the index in links[] of the link to
 * close so that a new connection from @peer fits the caps on links not
 * admitted yet, or -1 when it fits as it is.
 */
static int admission_room(struct tcp_fab *f, const struct fab_addr *peer)
{
	unsigned total = 0, host = 0;
	int any = -1, same = -1;

	for (unsigned i = 0; i < f->nlinks; i++) {
		const struct tcp_link *x = f->links[i];

		if (!unadmitted(x))
			continue;
		total++;
		if (any < 0 || gives_way(x, f->links[any]))
			any = (int)i;
		if (!fab_same_host(&x->peer, peer))
			continue;
		host++;
		if (same < 0 || gives_way(x, f->links[same]))
			same = (int)i;
	}
	if (host >= FAB_MAX_UNADMITTED_HOST)
		return same; /* it counts in the total too */
	return total >= FAB_MAX_UNADMITTED ? any : -1;
}

/*
 * make_room -- the NIC, under the lock: close the link admission_room()
 * names for a new connection from @peer, and take it out of links[] and
 * the accept queue at once, so that the table too stays within the caps;
 * it is freed at the NIC's next sync (nic_sync()): the events of this
 * turn may still name it.
 */
static void make_room(struct tcp_fab *f, const struct fab_addr *peer)
{
	int i = admission_room(f, peer);
	struct tcp_link *v;

	if (i < 0)
		return;
	v = f->links[i];
	fab_refuse_log(&f->refuse_log, "tcp", &v->peer,
	               v->state == TCP_LINK_HANDSHAKE
	                   ? "closed to make room: silent, and too many not admitted yet"
	                   : "closed to make room: too many not admitted yet");
	if (v->state == TCP_LINK_HELD)
		fab_acceptq_remove(&f->acceptq, &v->pending); /* queued: unadmitted() */
	tcp_link_fail(v, -ECONNREFUSED, -ECONNREFUSED, NULL);
	v->reap = 0; /* nobody's: freed with the evicted */
	f->links[i] = f->links[--f->nlinks];
	v->evicted_next = f->evicted;
	f->evicted = v;
}

/*
 * link_publish -- add @l to the fab's links; the NIC picks it up. A
 * passive link is published by the NIC and makes room for itself within
 * the caps. 0, or -ENOSPC / -errno with *@why.
 */
static int link_publish(struct tcp_fab *f, struct tcp_link *l, const char **why)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = l};

	pthread_mutex_lock(&f->lock);
	if (f->nlinks == TCP_MAX_LINKS) {
		pthread_mutex_unlock(&f->lock);
		*why = "the link table is full";
		return -ENOSPC;
	}
	if (l->passive)
		make_room(f, &l->peer); /* one in, one out */
	l->base.id = ++f->next_link_id;
	/* input may be handled before the NIC's view has the link: it is complete here */
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, l->fd, &ev) < 0) {
		int ret = -errno;

		pthread_mutex_unlock(&f->lock);
		*why = "epoll_ctl failed";
		return ret;
	}
	f->links[f->nlinks++] = l;
	__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/*
 * tcp_on_hello -- the HELLO of a passive link: the link is held, queued
 * for fab_accept(), and its socket no longer read (nor answered: the
 * HELLO_ACK waits for admission) -- only its hang-up is watched.
 */
void tcp_on_hello(struct tcp_link *l, const struct tcp_frame *fr, const uint8_t *data)
{
	struct tcp_fab *f = l->fab;
	struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET, .data.ptr = l};
	struct tcp_hello h;

	if (fr->type != TCP_F_HELLO || tcp_hello_decode(data, fr->len, &h) != 0) {
		fab_refuse_log(&f->refuse_log, "tcp", &l->peer, "bad HELLO");
		tcp_link_fail(l, -EPROTO, -EPROTO, NULL);
		return;
	}
	if (link_alloc_queues(l) != 0) {
		tcp_link_fail(l, -ENOMEM, -ENOMEM, "out of memory for the link's queues");
		return;
	}
	l->hello = h;
	memcpy(l->pending.priv, h.priv, h.priv_len);
	l->pending.priv_len = h.priv_len;
	l->rx_len = 0;
	if (epoll_ctl(f->epfd, EPOLL_CTL_MOD, l->fd, &ev) < 0) {
		tcp_link_fail(l, -errno, -errno, "epoll_ctl failed");
		return;
	}
	l->state = TCP_LINK_HELD;
	l->hs_deadline = lc_now_ns() + (uint64_t)fab_hold_ms(&f->base.attr) * 1000000ull;
	pthread_mutex_lock(&f->lock);
	fab_acceptq_push(&f->acceptq, &l->pending, &l->base);
	pthread_mutex_unlock(&f->lock);
	tcp_cq_wake(f); /* a poller blocked on the wait fd takes accepted links too */
}

/*
 * tcp_nic_admit -- the NIC, under fab->lock: serve the held link @l from
 * now on, and answer its HELLO. A peer that sent anything after its HELLO
 * before hearing the answer does not speak the protocol: refused.
 */
void tcp_nic_admit(struct tcp_link *l)
{
	struct tcp_fab *f = l->fab;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = l};
	struct tcp_hello mine = {.magic = TCP_MAGIC, .version = TCP_VERSION};
	struct tcp_frame ack = {.type = TCP_F_HELLO_ACK, .len = TCP_HELLO_LEN};
	uint8_t b;
	ssize_t n;

	if (l->state == TCP_LINK_HELD) {
		n = recv(l->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n > 0) {
			tcp_link_fail(l, -EPROTO, -EPROTO, "the peer sent frames before admission");
		} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			tcp_link_fail(l, -ECONNRESET, -ECONNRESET, NULL);
		} else if (link_alloc_io(l) != 0) {
			tcp_link_fail(l, -ENOMEM, -ENOMEM, "out of memory for the link's buffers");
		} else {
			mine.sq_depth = l->sq_mask + 1;
			mine.read_window = TCP_READ_WINDOW;
			tcp_hello_encode(&mine, tcp_tx_frame(l, &ack));
			l->state = TCP_LINK_UP;
			l->admitted = 1;
			l->last_rx_ns = lc_now_ns();
			l->want_out = 0;
			if (epoll_ctl(f->epfd, EPOLL_CTL_MOD, l->fd, &ev) < 0)
				tcp_link_fail(l, -errno, -errno, "epoll_ctl failed");
			else
				tcp_tx_flush(l);
		}
	}
	l->admit_done = 1;
	pthread_cond_broadcast(&f->cond);
}

/*
 * tcp_nic_reap -- the NIC, under fab->lock: whether @l, a passive link
 * that went down before admission, is nobody's: never queued, or still in
 * the accept queue (taken out here). The caller then frees it.
 */
int tcp_nic_reap(struct tcp_fab *f, struct tcp_link *l)
{
	int reap = l->reap;

	l->reap = 0;
	if (l->close_req)
		return 0; /* the caller owns it and closes it */
	return reap == TCP_LINK_HANDSHAKE || fab_acceptq_remove(&f->acceptq, &l->pending);
}

struct tcp_link *tcp_link_accepted(struct tcp_fab *f, int fd, const struct fab_addr *peer)
{
	const char *why = NULL;
	struct tcp_link *l;

	set_sock_opts(fd);
	l = link_new(f, fd, 1);
	if (l == NULL) {
		lc_log_err("tcp: out of memory accepting a link");
		close(fd);
		return NULL;
	}
	l->peer = *peer;
	l->state = TCP_LINK_HANDSHAKE;
	l->hs_deadline = lc_now_ns() + TCP_HELLO_MS * 1000000ull;
	if (link_publish(f, l, &why) != 0) {
		fab_refuse_log(&f->refuse_log, "tcp", peer, why);
		tcp_link_free(l); /* closes fd */
		return NULL;
	}
	return l;
}

int tcp_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                size_t priv_len, int timeout_ms, struct fab_link **out)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	uint64_t deadline = fab_deadline_ns(timeout_ms);
	uint8_t buf[TCP_HDR_LEN + TCP_HELLO_LEN];
	struct tcp_hello h = {.magic = TCP_MAGIC, .version = TCP_VERSION};
	struct tcp_frame fr = {.type = TCP_F_HELLO, .len = TCP_HELLO_LEN};
	char where[FAB_ADDR_STRLEN] = "?";
	const char *why = NULL;
	struct tcp_link *l;
	int fd, ret;

	if (fab_connect_check(peer, priv, priv_len, out))
		return -EINVAL;
	fab_addr_format(peer, where, sizeof(where));
	fd = socket(peer->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	set_sock_opts(fd);
	if (connect(fd, (const struct sockaddr *)&peer->ss, peer->len) < 0 &&
	    errno != EINPROGRESS) {
		ret = -errno;
		goto err_close;
	}
	{
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		uint64_t now = lc_now_ns();

		ret = poll(&pfd, 1, now < deadline ? (int)((deadline - now) / 1000000ull) : 0);
		if (ret == 0) {
			ret = -ETIMEDOUT;
			goto err_close;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (ret < 0 || soerr) {
			ret = ret < 0 ? -errno : -soerr;
			goto err_close;
		}
	}
	h.priv_len = (uint16_t)priv_len;
	if (priv_len)
		memcpy(h.priv, priv, priv_len);
	h.sq_depth = fab_pow2_at_least(fab->attr.sq_depth);
	h.read_window = TCP_READ_WINDOW;
	tcp_wire_encode(&fr, buf);
	tcp_hello_encode(&h, buf + TCP_HDR_LEN);
	/* the answer comes only when the acceptor admitted us; a close is a refusal */
	ret = lc_sock_io_full(fd, buf, sizeof(buf), 1, deadline);
	if (ret == 0)
		ret = lc_sock_io_full(fd, buf, sizeof(buf), 0, deadline);
	if (ret == -ECONNRESET || ret == -EPIPE)
		ret = -ECONNREFUSED;
	if (ret)
		goto err_close;
	if (tcp_wire_decode(buf, sizeof(buf), &fr) != (long)sizeof(buf) ||
	    fr.type != TCP_F_HELLO_ACK || tcp_hello_decode(buf + TCP_HDR_LEN, fr.len, &h) != 0) {
		ret = -EPROTO;
		goto err_close;
	}
	l = link_new(f, fd, 0);
	if (l == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	l->hello = h;
	ret = link_alloc_queues(l);
	if (ret == 0)
		ret = link_alloc_io(l);
	if (ret) {
		l->fd = -1;
		tcp_link_free(l);
		goto err_close;
	}
	l->peer.len = sizeof(l->peer.ss);
	if (getpeername(fd, (struct sockaddr *)&l->peer.ss, &l->peer.len) < 0)
		l->peer = *peer;
	l->base.ctx = ctx;
	l->state = TCP_LINK_UP;
	ret = link_publish(f, l, &why);
	if (ret) {
		lc_log_err("tcp: cannot add the link to %s: %s", where, why);
		tcp_link_free(l); /* closes fd */
		return ret;
	}
	tcp_nic_wake(f);
	*out = &l->base;
	return 0;

err_close:
	lc_log_info("tcp: connect to %s failed: %s", where, strerror(-ret));
	close(fd);
	return ret;
}

/*
 * tcp_accept -- fab_accept(). A held link that went down while it waited
 * in the queue (its peer left, the hold bound passed) stays there until
 * the NIC's next sync takes it out: until then it is closed here and the
 * next one taken, rather than handed to the caller, whose admission would
 * only fail, and which might take it for the live connection that came
 * after it.
 */
int tcp_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	uint64_t deadline = fab_deadline_ns(timeout_ms);
	uint8_t p[FAB_PRIV_MAX];
	struct fab_link *link;
	size_t plen;

	if (out == NULL)
		return -EINVAL;
	/* each turn takes one link out of the queue, which the caps bound */
	for (int i = 0; i <= FAB_MAX_UNADMITTED; i++) {
		uint64_t now = lc_now_ns();
		int tmo = timeout_ms <= 0   ? timeout_ms
		          : now >= deadline ? 0
		                            : (int)((deadline - now + 999999) / 1000000ull);
		int ret = fab_acceptq_accept(&f->acceptq, ctx, tmo, &link, p, &plen);

		if (ret)
			return ret;
		if (tcp_link_state(link) == 0) {
			if (priv != NULL)
				memcpy(priv, p, plen);
			if (priv_len != NULL)
				*priv_len = plen;
			*out = link;
			return 0;
		}
		tcp_link_close(link);
	}
	return -EAGAIN;
}

int tcp_link_close(struct fab_link *link)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;

	pthread_mutex_lock(&f->lock);
	l->close_req = 1;
	__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
	tcp_nic_wake(f);
	while (!l->closed)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	tcp_link_free(l);
	return 0;
}

int tcp_link_state(struct fab_link *link)
{
	return __atomic_load_n(&to_tcp_link(link)->cause, __ATOMIC_ACQUIRE);
}

int tcp_link_admit(struct fab_link *link)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;

	pthread_mutex_lock(&f->lock);
	if (!l->admit_done) {
		l->admit_req = 1;
		__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
		tcp_nic_wake(f);
		while (!l->admit_done)
			pthread_cond_wait(&f->cond, &f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return tcp_link_state(link);
}

int tcp_link_peer(struct fab_link *link, struct fab_addr *out)
{
	struct tcp_link *l = to_tcp_link(link);

	if (l->peer.len == 0 || out == NULL)
		return -ENOTCONN;
	*out = l->peer;
	return 0;
}
