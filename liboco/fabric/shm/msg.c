/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * msg.c -- the socket of an shm link: the abstract unix name of a fab,
 * the messages (HELLO, ACK, FDS, ARENA) with their fds (SCM_RIGHTS), and
 * the ARENA messages taken in: each maps a peer's arena of registered
 * memory (the ones that follow ACK or FDS at setup, and later ones as
 * they come: shm_link_drain(), from the provider thread and from a post
 * that finds a key's arena not mapped yet). Calls no other file of the
 * provider.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "shm.h"

/*
 * shm_abstract_name -- the abstract unix name of the fab at @a:
 * "loco-shm-<uid>-<ip>:<port>/<tag>". Only the tag's random bits make it
 * unguessable (the rest is for ss -x): a fab that listened on a name made
 * of uid and ip:port alone could be stopped by anyone on the host who bound
 * it first. -EHOSTUNREACH when @a has no tag (no shm endpoint: e.g. a
 * tcp-only node), -EINVAL when the name does not fit.
 */
int shm_abstract_name(const struct fab_addr *a, uid_t uid, void *sun_, socklen_t *len)
{
	struct sockaddr_un *sun = sun_;
	char where[FAB_ADDR_STRLEN];
	const char *host;
	int n;

	if (!fab_addr_has_tag(a))
		return -EHOSTUNREACH;
	if (fab_addr_format(a, where, sizeof(where)) != 0)
		return -EINVAL;
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	/* LOCO_SHM_HOST (tests): fabs with different values act as if on different hosts */
	host = getenv("LOCO_SHM_HOST");
	if (host != NULL && *host != '\0')
		n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "loco-shm-%u-%s-%s",
		             (unsigned)uid, host, where);
	else
		n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "loco-shm-%u-%s",
		             (unsigned)uid, where);
	if (n < 0 || (size_t)n >= sizeof(sun->sun_path) - 1)
		return -EINVAL;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	return 0;
}

/* shm_send_msg -- one message with up to SHM_NFDS fds; waits up to 1 s for room. 0 or -errno. */
int shm_send_msg(int fd, const struct shm_msg *m, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(SHM_NFDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	uint64_t deadline = lc_now_ns() + 1000000000ull;

	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(*m))
			return 0;
		if (errno == EINTR)
			continue;
		if ((errno != EAGAIN && errno != EWOULDBLOCK) || lc_now_ns() > deadline)
			return errno == EPIPE ? -ECONNRESET : -errno;
		poll(&p, 1, 10);
	}
}

/*
 * shm_recv_msg -- one message, non-blocking, with its fds (up to SHM_NFDS; others
 * closed). Returns 1, 0 at EOF, -EAGAIN, -EPROTO (wrong size or magic).
 */
int shm_recv_msg(int fd, struct shm_msg *m, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
	struct msghdr mh = {.msg_iov = &iov,
	                    .msg_iovlen = 1,
	                    .msg_control = u.buf,
	                    .msg_controllen = sizeof(u.buf)};
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int x;

			memcpy(&x, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
			if (*nfds < SHM_NFDS)
				fds[(*nfds)++] = x;
			else
				close(x);
		}
	}
	if (n == 0)
		return 0;
	if ((size_t)n != sizeof(*m) || m->magic != SHM_MAGIC || m->version != SHM_VERSION ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EPROTO;
	}
	return 1;
}

/* shm_close_fds -- close the @n fds a message brought that nobody keeps. */
void shm_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* shm_send_arena -- tell @l's peer of our arena @id (an ARENA message with its memfd). */
int shm_send_arena(struct shm_link *l, unsigned id)
{
	struct shm_msg m = {.magic = SHM_MAGIC,
	                    .version = SHM_VERSION,
	                    .type = SHM_M_ARENA,
	                    .id = id,
	                    .size = l->fab->arenas[id].size};

	return shm_send_msg(l->fd, &m, &l->fab->arenas[id].fd, 1);
}

/* map_arena -- an ARENA message (@m, its fd): map the peer's arena. 0 or -EPROTO. */
static int map_arena(struct shm_link *l, const struct shm_msg *m, int *fds, int nfds)
{
	struct stat st;
	void *p;

	if (m->type != SHM_M_ARENA || nfds != 1 || m->id >= SHM_MAX_ARENAS ||
	    __atomic_load_n(&l->maps[m->id].base, __ATOMIC_RELAXED) != NULL ||
	    fstat(fds[0], &st) < 0 || (uint64_t)st.st_size < m->size || m->size == 0) {
		shm_close_fds(fds, nfds);
		return -EPROTO;
	}
	p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (p == MAP_FAILED) {
		lc_log_warn("shm: link %u: cannot map arena %u of %llu bytes: %s", l->base.id,
		            m->id, (unsigned long long)m->size, strerror(errno));
		return 0;
	}
	l->maps[m->id].size = m->size;
	/* pairs with the load of base in remote_ptr() */
	__atomic_store_n(&l->maps[m->id].base, (uint8_t *)p, __ATOMIC_RELEASE);
	return 0;
}

/* shm_read_arenas -- the @n ARENA messages that follow ACK or FDS, by @deadline. */
int shm_read_arenas(struct shm_link *l, uint32_t n, uint64_t deadline)
{
	int ret = 0;

	pthread_mutex_lock(&l->sock_lock);
	for (uint32_t got = 0; got < n && ret == 0;) {
		struct pollfd p = {.fd = l->fd, .events = POLLIN};
		struct shm_msg m;
		int fds[SHM_NFDS], nfds, r = shm_recv_msg(l->fd, &m, fds, &nfds);
		uint64_t now = lc_now_ns();

		if (r == 1) {
			ret = map_arena(l, &m, fds, nfds);
			got++;
		} else if (r == 0) {
			ret = -ECONNRESET;
		} else if (r != -EAGAIN) {
			ret = r;
		} else if (now >= deadline) {
			ret = -ETIMEDOUT;
		} else {
			poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
		}
	}
	pthread_mutex_unlock(&l->sock_lock);
	return ret;
}

/*
 * shm_link_drain -- take in what waits on @l's socket now (ARENA
 * messages: each maps the peer's arena), without waiting, under
 * sock_lock. 0, or -ECONNRESET (the socket closed) or -EPROTO.
 */
int shm_link_drain(struct shm_link *l)
{
	int ret = 0;

	pthread_mutex_lock(&l->sock_lock);
	for (int i = 0; i < 256 && ret == 0; i++) {
		struct shm_msg m;
		int fds[SHM_NFDS], nfds, r = shm_recv_msg(l->fd, &m, fds, &nfds);

		if (r == -EAGAIN)
			break;
		if (r <= 0)
			ret = r == 0 ? -ECONNRESET : r;
		else
			ret = map_arena(l, &m, fds, nfds);
	}
	pthread_mutex_unlock(&l->sock_lock);
	return ret;
}
