/* SPDX-License-Identifier: BSD-2-Clause */
/* sock.c -- socket helpers shared by the control plane and the tcp provider. */
#include <errno.h>
#include <poll.h>
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

void lc_sock_close(int fd)
{
	uint8_t sink[4096];

	if (fd < 0)
		return;
	for (int i = 0; i < 64; i++) {
		ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
	}
	close(fd);
}
