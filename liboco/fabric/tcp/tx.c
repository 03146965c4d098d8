/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tx.c -- a link's output: the linear tx buffer, framing into it,
 * non-blocking sends with EPOLLOUT when the socket is full, and the tcp_drain
 * of a link that went down after our NAK.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../log.h"
#include "tcp.h"

void tcp_link_set_out(struct tcp_link *l, int want)
{
	struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = l};

	if (l->want_out == want || l->fd < 0)
		return;
	l->want_out = want;
	if (epoll_ctl(l->fab->epfd, EPOLL_CTL_MOD, l->fd, &ev) < 0)
		lc_log_warn("tcp: epoll_ctl on link %u: %s", l->base.id, strerror(errno));
}

/* tx_room -- free bytes at the end of the tx buffer, compacting first if needed. */
static size_t tx_room(struct tcp_link *l, size_t need)
{
	if (l->tx_cap - l->tx_len < need && l->tx_off > 0) {
		memmove(l->tx, l->tx + l->tx_off, l->tx_len - l->tx_off);
		l->tx_len -= l->tx_off;
		l->tx_off = 0;
	}
	return l->tx_cap - l->tx_len;
}

/* tcp_tx_frame -- append a frame header and room for @f->len payload bytes; returns the payload. */
uint8_t *tcp_tx_frame(struct tcp_link *l, const struct tcp_frame *f)
{
	uint8_t *p;

	if (tx_room(l, TCP_HDR_LEN + f->len) < TCP_HDR_LEN + f->len)
		return NULL;
	p = l->tx + l->tx_len;
	tcp_wire_encode(f, p);
	l->tx_len += TCP_HDR_LEN + f->len;
	return p + TCP_HDR_LEN;
}

/* tcp_tx_response -- append a response; the peer's limits guarantee room. */
uint8_t *tcp_tx_response(struct tcp_link *l, const struct tcp_frame *f)
{
	uint8_t *p = tcp_tx_frame(l, f);

	if (p == NULL)
		tcp_link_fail(l, -EPROTO, -EPROTO, "peer exceeded its announced window");
	return p;
}

void tcp_tx_flush(struct tcp_link *l)
{
	while (l->state != TCP_LINK_DOWN && tcp_tx_used(l) > 0) {
		ssize_t n =
		    send(l->fd, l->tx + l->tx_off, tcp_tx_used(l), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tcp_link_set_out(l, 1);
				return;
			}
			tcp_link_fail(l, -ECONNRESET, -ECONNRESET, strerror(errno));
			return;
		}
		l->tx_off += (size_t)n;
	}
	if (l->state != TCP_LINK_DOWN) {
		l->tx_off = l->tx_len = 0;
		tcp_link_set_out(l, 0);
	}
}

/* tcp_drain -- a link down after our NAK: finish sending, half-close, discard input to EOF. */
void tcp_drain(struct tcp_link *l, int timed_out)
{
	uint8_t junk[4096];
	ssize_t n;

	while (!timed_out && tcp_tx_used(l) > 0) {
		n = send(l->fd, l->tx + l->tx_off, tcp_tx_used(l), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* EPOLLOUT stays armed */
		if (n < 0)
			timed_out = 1;
		else
			l->tx_off += (size_t)n;
	}
	if (!timed_out && l->draining == 1) {
		shutdown(l->fd, SHUT_WR);
		tcp_link_set_out(l, 0);
		l->draining = 2;
	}
	for (int i = 0; !timed_out && i < 64; i++) {
		n = recv(l->fd, junk, sizeof(junk), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		break; /* EOF or error */
	}
	epoll_ctl(l->fab->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	close(l->fd);
	l->fd = -1;
	l->draining = 0;
}
