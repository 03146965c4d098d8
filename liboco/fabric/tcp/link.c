/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * link.c -- the life of a tcp link: creation and publication to the NIC
 * thread, connect (HELLO) and accept (HELLO_ACK, the accept queue),
 * failure, close and free.
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

static struct tcp_link *link_new(struct tcp_fab *f, int fd)
{
	const struct fab_attr *a = &f->base.attr;
	struct tcp_link *l = calloc(1, sizeof(*l));
	uint32_t sq = fab_pow2_at_least(a->sq_depth), rq = fab_pow2_at_least(a->rq_depth);

	if (l == NULL)
		return NULL;
	l->fab = f;
	l->fd = fd;
	l->base.fab = &f->base;
	l->sq_mask = sq - 1;
	l->rq_mask = rq - 1;
	l->sq = calloc(sq, sizeof(*l->sq));
	l->sq_inline = malloc((size_t)sq * a->max_inline);
	l->rq = calloc(rq, sizeof(*l->rq));
	l->rx = malloc(TCP_RX_CAP);
	l->acked_psn = (uint32_t)-1;
	pthread_spin_init(&l->post_lock, PTHREAD_PROCESS_PRIVATE);
	if (l->sq == NULL || l->sq_inline == NULL || l->rq == NULL || l->rx == NULL) {
		free(l->sq);
		free(l->sq_inline);
		free(l->rq);
		free(l->rx);
		free(l);
		return NULL;
	}
	return l;
}

/* link_setup_tx -- size the tx buffer from the peer's announced limits. */
static int link_setup_tx(struct tcp_link *l, const struct tcp_hello *h)
{
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

/* link_publish -- add @l to the fab's links; the NIC picks it up. */
static int link_publish(struct tcp_fab *f, struct tcp_link *l)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};

	pthread_mutex_lock(&f->lock);
	if (f->nlinks == TCP_MAX_LINKS) {
		pthread_mutex_unlock(&f->lock);
		return -ENOSPC;
	}
	l->base.id = ++f->next_link_id;
	/* input may be handled before the NIC's view has the link: it is complete here */
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, l->fd, &ev) < 0) {
		int ret = -errno;

		pthread_mutex_unlock(&f->lock);
		return ret;
	}
	f->links[f->nlinks++] = l;
	__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void tcp_on_hello(struct tcp_link *l, const struct tcp_frame *fr, const uint8_t *data)
{
	struct tcp_fab *f = l->fab;
	struct tcp_hello h, mine = {.magic = TCP_MAGIC, .version = TCP_VERSION};
	struct tcp_frame ack = {.type = TCP_F_HELLO_ACK, .len = TCP_HELLO_LEN};

	if (fr->type != TCP_F_HELLO || tcp_hello_decode(data, fr->len, &h) != 0) {
		lc_log_warn("tcp: link %u: bad HELLO from the connecting peer", l->base.id);
		tcp_link_fail(l, -EPROTO, -EPROTO, NULL);
		return;
	}
	if (link_setup_tx(l, &h) != 0) {
		tcp_link_fail(l, -ENOMEM, -ENOMEM, "out of memory for the tx buffer");
		return;
	}
	memcpy(l->pending.priv, h.priv, h.priv_len);
	l->pending.priv_len = h.priv_len;
	mine.sq_depth = l->sq_mask + 1;
	mine.read_window = TCP_READ_WINDOW;
	tcp_hello_encode(&mine, tcp_tx_frame(l, &ack));
	l->state = TCP_LINK_UP;
	pthread_mutex_lock(&f->lock);
	fab_acceptq_push(&f->acceptq, &l->pending, &l->base);
	pthread_mutex_unlock(&f->lock);
	tcp_cq_wake(f); /* a poller blocked on the wait fd takes accepted links too */
}

void tcp_nic_accept(struct tcp_fab *f)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tcp_link *l;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				lc_log_warn("tcp: accept failed: %s", strerror(errno));
			return;
		}
		set_sock_opts(fd);
		l = link_new(f, fd);
		if (l == NULL) {
			lc_log_err("tcp: out of memory accepting a link");
			close(fd);
			continue;
		}
		l->state = TCP_LINK_HANDSHAKE;
		if (link_publish(f, l) != 0) {
			lc_log_err("tcp: cannot add an accepted link");
			tcp_link_free(l);
		}
	}
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
	ret = lc_sock_io_full(fd, buf, sizeof(buf), 1, deadline);
	if (ret == 0)
		ret = lc_sock_io_full(fd, buf, sizeof(buf), 0, deadline);
	if (ret)
		goto err_close;
	if (tcp_wire_decode(buf, sizeof(buf), &fr) != (long)sizeof(buf) ||
	    fr.type != TCP_F_HELLO_ACK || tcp_hello_decode(buf + TCP_HDR_LEN, fr.len, &h) != 0) {
		ret = -EPROTO;
		goto err_close;
	}
	l = link_new(f, fd);
	if (l == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = link_setup_tx(l, &h);
	if (ret) {
		l->fd = -1;
		tcp_link_free(l);
		goto err_close;
	}
	l->base.ctx = ctx;
	l->state = TCP_LINK_UP;
	ret = link_publish(f, l);
	if (ret) {
		lc_log_err("tcp: cannot add the link to %s: %s", where, strerror(-ret));
		tcp_link_free(l); /* closes fd */
		return ret;
	}
	tcp_nic_kick(f);
	*out = &l->base;
	return 0;

err_close:
	lc_log_info("tcp: connect to %s failed: %s", where, strerror(-ret));
	close(fd);
	return ret;
}

int tcp_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len)
{
	return fab_acceptq_accept(&to_tcp_fab(fab)->acceptq, ctx, timeout_ms, out, priv, priv_len);
}

int tcp_link_close(struct fab_link *link)
{
	struct tcp_link *l = to_tcp_link(link);
	struct tcp_fab *f = l->fab;

	pthread_mutex_lock(&f->lock);
	l->close_req = 1;
	__atomic_add_fetch(&f->links_gen, 1, __ATOMIC_RELEASE);
	tcp_nic_kick(f);
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

/* tcp_link_admit -- TODO(step 6): links still serve from establishment. */
int tcp_link_admit(struct fab_link *link)
{
	return tcp_link_state(link);
}
