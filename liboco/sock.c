/* SPDX-License-Identifier: BSD-2-Clause */
/* sock.c -- socket helpers shared by the control plane and the tcp provider. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sock.h"

int lc_sock_io_full(int fd, void *buf, size_t len, int out, uint64_t deadline_ns)
{
	uint8_t *p = buf;

	while (len > 0) {
		struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		uint64_t now = lc_now_ns();
		ssize_t n;
		int r;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)((deadline_ns - now) / 1000000ull) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		n = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
		        : recv(fd, p, len, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int lc_sock_drain(int fd)
{
	uint8_t sink[4096];

	for (int i = 0; i < 64; i++) {
		ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	}
	return 1;
}

void lc_sock_close(int fd)
{
	if (fd < 0)
		return;
	lc_sock_drain(fd);
	close(fd);
}

void lc_sock_close_all(int *fd, unsigned n, unsigned ms)
{
	struct pollfd *pfd = calloc(n, sizeof(*pfd));
	uint64_t deadline = lc_now_ns() + (uint64_t)ms * 1000000ull;
	unsigned left = 0;

	for (unsigned i = 0; i < n; i++) {
		if (pfd != NULL)
			pfd[i].fd = -1; /* poll() skips it */
		if (fd[i] < 0)
			continue;
		shutdown(fd[i], SHUT_WR); /* our FIN, behind what we sent */
		if (pfd != NULL && lc_sock_drain(fd[i])) {
			pfd[i] = (struct pollfd){.fd = fd[i], .events = POLLIN};
			left++;
			continue;
		}
		lc_sock_close(fd[i]); /* its EOF came (or no memory to wait with) */
		fd[i] = -1;
	}
	while (left > 0) {
		uint64_t now = lc_now_ns();

		if (now >= deadline)
			break;
		if (poll(pfd, n, (int)((deadline - now) / 1000000ull) + 1) < 0 && errno != EINTR)
			break;
		for (unsigned i = 0; i < n; i++) {
			if (fd[i] < 0 || pfd[i].revents == 0 || lc_sock_drain(fd[i]))
				continue;
			close(fd[i]);
			fd[i] = pfd[i].fd = -1;
			left--;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		lc_sock_close(fd[i]); /* late: perhaps a RST */
		fd[i] = -1;
	}
	free(pfd);
}
