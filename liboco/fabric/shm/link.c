/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * link.c -- the life of an shm link: its making and freeing, its pages
 * (ours made, the peer's mapped), the fab's table of links (links[], the
 * provider thread's epoll), connect (HELLO, then the ACK that admission
 * sends), the provider thread's side of accepting (same uid, caps, HELLO,
 * hold bounds, a peer's death or hang-up), admission, close, state and
 * peer. The socket and its messages are msg.c's; taking a link down and
 * running what waited for admission, post.c's; waking the poller, cq.c's.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "shm.h"

#define EV_SOCK  1ull
#define EV_PIDFD 2ull

static struct shm_link *link_new(struct shm_fab *f, int fd, int passive)
{
	const struct fab_attr *a = &f->base.attr;
	uint32_t sq = fab_pow2_at_least(a->sq_depth), rq = fab_pow2_at_least(a->rq_depth);
	struct shm_link *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->fab = f;
	l->fd = fd;
	l->pidfd = l->mine_fd = l->peer_bell = l->peer_rnr = -1;
	l->base.fab = &f->base;
	l->passive = passive;
	l->rng = lc_now_ns() | 1;
	pthread_mutex_init(&l->sock_lock, NULL);
	pthread_spin_init(&l->post_lock, PTHREAD_PROCESS_PRIVATE);
	l->dq_mask = sq - 1;
	l->rq_mask = rq - 1;
	l->dq = calloc(sq, sizeof(*l->dq));
	l->dq_inline = malloc((size_t)sq * a->max_inline);
	l->rq = calloc(rq, sizeof(*l->rq));
	l->maps = calloc(SHM_MAX_ARENAS, sizeof(*l->maps));
	if (l->dq == NULL || l->dq_inline == NULL || l->rq == NULL || l->maps == NULL) {
		l->fd = -1;
		shm_link_free(l);
		return NULL;
	}
	return l;
}

void shm_link_free(struct shm_link *l)
{
	if (l->maps != NULL)
		for (unsigned i = 0; i < SHM_MAX_ARENAS; i++)
			if (l->maps[i].base != NULL)
				munmap(l->maps[i].base, l->maps[i].size);
	if (l->mine != NULL)
		munmap(l->mine, sizeof(*l->mine));
	if (l->peer != NULL)
		munmap(l->peer, sizeof(*l->peer));
	if (l->pfab != NULL)
		munmap((void *)l->pfab, sizeof(*l->pfab));
	if (l->pbell != NULL)
		munmap(l->pbell, sizeof(*l->pbell));
	if (l->fd >= 0)
		close(l->fd);
	if (l->pidfd >= 0)
		close(l->pidfd);
	if (l->mine_fd >= 0)
		close(l->mine_fd);
	if (l->peer_bell >= 0)
		close(l->peer_bell);
	if (l->peer_rnr >= 0)
		close(l->peer_rnr);
	pthread_spin_destroy(&l->post_lock);
	pthread_mutex_destroy(&l->sock_lock);
	free(l->dq);
	free(l->dq_inline);
	free(l->rq);
	free(l->maps);
	free(l);
}

/* make_page -- our link page for @l (the peer writes its records into it). 0 or -errno. */
static int make_page(struct shm_link *l)
{
	void *p;

	if (l->mine != NULL)
		return 0;
	l->mine_fd = memfd_create("loco-shm-link", MFD_CLOEXEC);
	if (l->mine_fd < 0)
		return -errno;
	if (ftruncate(l->mine_fd, sizeof(struct shm_lpage)) < 0)
		return -errno;
	p = mmap(NULL, sizeof(struct shm_lpage), PROT_READ | PROT_WRITE, MAP_SHARED, l->mine_fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	l->mine = p;
	l->mine->magic = SHM_MAGIC;
	return 0;
}

/*
 * map_peer -- map the peer's fab page (read-only), link page and bell
 * page, and keep its doorbell and progress bell.
 */
static int map_peer(struct shm_link *l, int *fds)
{
	struct stat st;
	void *fp, *lp, *bp;

	if (fstat(fds[0], &st) < 0 || (size_t)st.st_size < sizeof(struct shm_fpage) ||
	    fstat(fds[1], &st) < 0 || (size_t)st.st_size < sizeof(struct shm_lpage) ||
	    fstat(fds[4], &st) < 0 || (size_t)st.st_size < sizeof(struct shm_bpage)) {
		shm_close_fds(fds, SHM_NFDS);
		return -EPROTO;
	}
	fp = mmap(NULL, sizeof(struct shm_fpage), PROT_READ, MAP_SHARED, fds[0], 0);
	lp = mmap(NULL, sizeof(struct shm_lpage), PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	bp = mmap(NULL, sizeof(struct shm_bpage), PROT_READ | PROT_WRITE, MAP_SHARED, fds[4], 0);
	close(fds[0]);
	close(fds[1]);
	close(fds[4]);
	if (fp == MAP_FAILED || lp == MAP_FAILED || bp == MAP_FAILED) {
		if (fp != MAP_FAILED)
			munmap(fp, sizeof(struct shm_fpage));
		if (lp != MAP_FAILED)
			munmap(lp, sizeof(struct shm_lpage));
		if (bp != MAP_FAILED)
			munmap(bp, sizeof(struct shm_bpage));
		close(fds[2]);
		close(fds[3]);
		return -ENOMEM;
	}
	l->pfab = fp;
	l->peer = lp;
	l->pbell = bp;
	l->peer_bell = fds[2];
	l->peer_rnr = fds[3];
	if (l->pfab->magic != SHM_MAGIC || l->peer->magic != SHM_MAGIC ||
	    l->pbell->magic != SHM_MAGIC)
		return -EPROTO;
	return 0;
}

/* announce -- under fab->lock: send our pages (as @type) and every arena to the peer. */
static int announce(struct shm_link *l, uint32_t type)
{
	struct shm_fab *f = l->fab;
	struct shm_msg m = {.magic = SHM_MAGIC, .version = SHM_VERSION, .type = type};
	int fds[SHM_NFDS] = {f->fpage_fd, l->mine_fd, fab_swcq_wait_fd(&f->cq), f->rnr_evfd,
	                     f->bpage_fd};
	int ret;

	m.id = f->narenas; /* the ARENA messages that follow at once */
	ret = shm_send_msg(l->fd, &m, fds, SHM_NFDS);

	for (unsigned i = 0; ret == 0 && i < f->narenas; i++)
		ret = shm_send_arena(l, i);
	if (ret == 0)
		l->announced = 1;
	return ret;
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int epoll_add(struct shm_fab *f, int fd, uint64_t kind, uint32_t id, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = (kind << 32) | id};

	return epoll_ctl(f->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* publish -- under fab->lock: add @l to the fab (links[], the thread's epoll). */
static int publish(struct shm_fab *f, struct shm_link *l, uint32_t sock_events)
{
	unsigned n = f->nlinks;

	if (n == SHM_MAX_LINKS)
		return -ENOSPC;
	l->base.id = ++f->next_link_id;
	if (epoll_add(f, l->fd, EV_SOCK, l->base.id, sock_events) < 0)
		return -errno;
	if (l->pidfd >= 0)
		epoll_add(f, l->pidfd, EV_PIDFD, l->base.id, EPOLLIN);
	l->in_epoll = 1;
	__atomic_store_n(&f->links[n], l, __ATOMIC_RELEASE);
	__atomic_store_n(&f->nlinks, n + 1, __ATOMIC_RELEASE);
	return 0;
}

static void epoll_forget(struct shm_fab *f, struct shm_link *l)
{
	if (!l->in_epoll)
		return;
	epoll_ctl(f->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	if (l->pidfd >= 0)
		epoll_ctl(f->epfd, EPOLL_CTL_DEL, l->pidfd, NULL);
	l->in_epoll = 0;
}

/* unpublish -- under fab->lock: remove @l; when it returns, fab_poll() no longer sees it. */
static void unpublish(struct shm_fab *f, struct shm_link *l)
{
	unsigned n = f->nlinks, seq;

	epoll_forget(f, l);
	for (unsigned i = 0; i < n; i++) {
		if (f->links[i] != l)
			continue;
		__atomic_store_n(&f->links[i], f->links[n - 1], __ATOMIC_RELEASE);
		__atomic_store_n(&f->links[n - 1], NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&f->nlinks, n - 1, __ATOMIC_RELEASE);
		break;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* removal, then the walkers' marks */
	/* the poller's walk, and a driver's (fab_progress()) */
	for (unsigned *busy = &f->poll_busy; busy != NULL;
	     busy = busy == &f->poll_busy ? &f->drive_busy : NULL) {
		seq = __atomic_load_n(busy, __ATOMIC_SEQ_CST);
		if (seq & 1)
			for (int i = 0;
			     i < 10000000 && __atomic_load_n(busy, __ATOMIC_ACQUIRE) == seq; i++)
				lc_cpu_relax();
	}
}

int shm_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx, const void *priv,
                size_t priv_len, int timeout_ms, struct fab_link **out)
{
	struct shm_fab *f = to_shm_fab(fab);
	uint64_t deadline = fab_deadline_ns(timeout_ms);
	struct shm_msg m = {.magic = SHM_MAGIC, .version = SHM_VERSION, .type = SHM_M_HELLO};
	char where[FAB_ADDR_STRLEN] = "?";
	struct sockaddr_un sun;
	struct ucred cred;
	socklen_t slen, clen = sizeof(cred);
	struct shm_link *l = NULL;
	int fd, ret, fds[SHM_NFDS], nfds = 0;

	if (fab_connect_check(peer, priv, priv_len, out))
		return -EINVAL;
	fab_addr_format(peer, where, sizeof(where));
	ret = shm_abstract_name(peer, f->uid, &sun, &slen);
	if (ret == -EHOSTUNREACH && !(f->base.attr.flags & FAB_ATTR_ADDR_OWNED)) {
		lc_log_info("shm: %s has no shm endpoint (no name in the address)", where);
		ret = -ECONNREFUSED; /* alone: as when nobody listens */
	}
	if (ret)
		return ret; /* stacked (auto): -EHOSTUNREACH, the remote fabric connects */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	while (connect(fd, (struct sockaddr *)&sun, slen) < 0) {
		ret = errno == ENOENT ? -ECONNREFUSED : -errno;
		if (ret == -ECONNREFUSED && (f->base.attr.flags & FAB_ATTR_ADDR_OWNED))
			ret = -EHOSTUNREACH; /* stacked (auto): no such endpoint on this host */
		if (ret != -EAGAIN && ret != -EINTR)
			goto err;
		if (lc_now_ns() > deadline) {
			ret = -ETIMEDOUT;
			goto err;
		}
		poll(NULL, 0, 1); /* the backlog is full */
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != f->uid) {
		lc_log_warn("shm: %s is served by another user: refused", where);
		ret = (f->base.attr.flags & FAB_ATTR_ADDR_OWNED) ? -EHOSTUNREACH : -ECONNREFUSED;
		goto err;
	}
	m.priv_len = (uint32_t)priv_len;
	if (priv_len)
		memcpy(m.priv, priv, priv_len);
	ret = shm_send_msg(fd, &m, NULL, 0);
	if (ret)
		goto err;
	/* the ACK comes at admission; a close is a refusal */
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = lc_now_ns();

		ret = shm_recv_msg(fd, &m, fds, &nfds);
		if (ret == 1)
			break;
		if (ret == 0) {
			ret = -ECONNREFUSED;
			goto err;
		}
		if (ret != -EAGAIN)
			goto err;
		if (now >= deadline) {
			ret = -ETIMEDOUT;
			goto err;
		}
		poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
	}
	if (m.type != SHM_M_ACK || nfds != SHM_NFDS) {
		shm_close_fds(fds, nfds);
		ret = -EPROTO;
		goto err;
	}
	l = link_new(f, fd, 0);
	if (l == NULL) {
		shm_close_fds(fds, nfds);
		ret = -ENOMEM;
		goto err;
	}
	l->pid = cred.pid;
	l->pidfd = pidfd_of(cred.pid);
	l->peer_addr = *peer;
	ret = map_peer(l, fds);
	if (ret == 0)
		ret = shm_read_arenas(l, m.id, deadline);
	if (ret == 0)
		ret = make_page(l);
	if (ret)
		goto err_free;
	l->base.ctx = ctx;
	l->state = SHM_LINK_UP;
	pthread_mutex_lock(&f->lock);
	ret = publish(f, l, EPOLLIN | EPOLLRDHUP);
	if (ret == 0)
		ret = announce(l, SHM_M_FDS);
	if (ret) {
		unpublish(f, l);
		pthread_mutex_unlock(&f->lock);
		goto err_free;
	}
	pthread_mutex_unlock(&f->lock);
	*out = &l->base;
	return 0;

err_free:
	shm_link_free(l); /* closes fd */
	lc_log_info("shm: connect to %s failed: %s", where, strerror(-ret));
	return ret;
err:
	lc_log_info("shm: connect to %s failed: %s", where, strerror(-ret));
	close(fd);
	return ret;
}

int shm_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out, void *priv,
               size_t *priv_len)
{
	return fab_acceptq_accept(&to_shm_fab(fab)->acceptq, ctx, timeout_ms, out, priv, priv_len);
}

/* gone -- the thread, under fab->lock: @l's socket hung up or its peer died. */
static void gone(struct shm_fab *f, struct shm_link *l, int err)
{
	int st = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);

	epoll_forget(f, l);
	if (st == SHM_LINK_HANDSHAKE || (st == SHM_LINK_HELD && l->pending.queued)) {
		/* nobody's: free it */
		fab_acceptq_remove(&f->acceptq, &l->pending);
		unpublish(f, l);
		shm_link_free(l);
		return;
	}
	if (st == SHM_LINK_UP)
		lc_log_info("shm: link %u: the peer %s", l->base.id,
		            err == -ETIMEDOUT ? "was not admitted in time" : "closed or died");
	shm_link_fail(l, err, err, NULL);
}

void shm_thread_accept(struct shm_fab *f)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		unsigned total = 0, same = 0;
		const char *why = NULL;
		struct shm_link *l;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				lc_log_warn("shm: accept failed: %s", strerror(errno));
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
		    cred.uid != f->uid) {
			fab_refuse_log(&f->refuse_log, "shm", &f->addr, "another user");
			close(fd);
			continue;
		}
		for (unsigned k = 0; k < f->nlinks; k++) {
			const struct shm_link *x = f->links[k];
			int st = __atomic_load_n(&x->state, __ATOMIC_RELAXED);

			if (!x->passive || (st != SHM_LINK_HANDSHAKE && st != SHM_LINK_HELD))
				continue;
			total++;
			same += x->pid == cred.pid;
		}
		if (total >= FAB_MAX_UNADMITTED)
			why = "too many connections not admitted yet";
		else if (same >= FAB_MAX_UNADMITTED_HOST)
			why = "too many connections not admitted yet from that process";
		l = why ? NULL : link_new(f, fd, 1);
		if (l == NULL) {
			fab_refuse_log(&f->refuse_log, "shm", &f->addr,
			               why ? why : "out of memory");
			close(fd);
			continue;
		}
		l->pid = cred.pid;
		l->pidfd = pidfd_of(cred.pid);
		l->peer_addr = f->addr;
		((struct sockaddr_in *)&l->peer_addr.ss)->sin_port = 0;
		/* the tag names our endpoint, not the peer's */
		memset(l->peer_addr.tag, 0, sizeof(l->peer_addr.tag));
		l->state = SHM_LINK_HANDSHAKE;
		l->deadline = lc_now_ns() + SHM_HELLO_MS * 1000000ull;
		if (publish(f, l, EPOLLIN | EPOLLRDHUP) != 0) {
			fab_refuse_log(&f->refuse_log, "shm", &f->addr, "the link table is full");
			unpublish(f, l);
			shm_link_free(l);
		}
	}
}

void shm_thread_input(struct shm_fab *f, struct shm_link *l)
{
	int st = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
	struct epoll_event ev = {.events = EPOLLRDHUP, .data.u64 = (EV_SOCK << 32) | l->base.id};
	struct shm_msg m;
	int fds[SHM_NFDS], nfds, r;

	if (st == SHM_LINK_UP) {
		if (shm_link_drain(l) != 0)
			gone(f, l, -ECONNRESET);
		return;
	}
	if (st != SHM_LINK_HANDSHAKE)
		return;
	r = shm_recv_msg(l->fd, &m, fds, &nfds);
	if (r == -EAGAIN)
		return;
	shm_close_fds(fds, nfds);
	if (r != 1 || m.type != SHM_M_HELLO || m.priv_len > FAB_PRIV_MAX) {
		if (r != 0)
			fab_refuse_log(&f->refuse_log, "shm", &f->addr, "bad HELLO");
		gone(f, l, -EPROTO);
		return;
	}
	memcpy(l->pending.priv, m.priv, m.priv_len);
	l->pending.priv_len = m.priv_len;
	/* held: only its hang-up is watched until admission */
	epoll_ctl(f->epfd, EPOLL_CTL_MOD, l->fd, &ev);
	__atomic_store_n(&l->state, SHM_LINK_HELD, __ATOMIC_RELEASE);
	l->deadline = lc_now_ns() + (uint64_t)fab_hold_ms(&f->base.attr) * 1000000ull;
	fab_acceptq_push(&f->acceptq, &l->pending, &l->base);
	shm_cq_wake(f); /* a poller blocked on the wait fd takes accepted links too */
}

void shm_thread_sock(struct shm_fab *f, struct shm_link *l, uint32_t events)
{
	uint32_t id = l->base.id;

	if (events & EPOLLIN)
		shm_thread_input(f, l);
	/* the input may have freed it */
	for (unsigned i = 0; i < f->nlinks; i++)
		if (f->links[i] == l && f->links[i]->base.id == id) {
			if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				gone(f, l, -ECONNRESET);
			return;
		}
}

void shm_thread_pid(struct shm_fab *f, struct shm_link *l)
{
	gone(f, l, -ECONNRESET);
}

void shm_thread_timers(struct shm_fab *f)
{
	uint64_t now = lc_now_ns();

	for (unsigned i = 0; i < f->nlinks; i++) {
		struct shm_link *l = f->links[i];
		int st = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);

		if (!l->passive || l->admitting || now < l->deadline ||
		    (st != SHM_LINK_HANDSHAKE && st != SHM_LINK_HELD))
			continue;
		if (st == SHM_LINK_HELD)
			fab_refuse_log(&f->refuse_log, "shm", &f->addr,
			               "held link not admitted in time");
		gone(f, l, -ETIMEDOUT);
		i--; /* the table may have shrunk; recheck this slot */
		if (i + 1 >= f->nlinks)
			break;
	}
}

int shm_link_admit(struct fab_link *link)
{
	struct shm_link *l = to_shm_link(link);
	struct shm_fab *f = l->fab;
	uint64_t deadline = fab_deadline_ns((int)f->base.attr.timeout_ms);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
	                         .data.u64 = (EV_SOCK << 32) | l->base.id};
	struct shm_msg m;
	int ret, fds[SHM_NFDS], nfds = 0;

	pthread_mutex_lock(&f->lock);
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_HELD) {
		pthread_mutex_unlock(&f->lock);
		return shm_link_state(link);
	}
	ret = make_page(l);
	if (ret == 0)
		ret = announce(l, SHM_M_ACK);
	l->admitting = ret == 0;
	pthread_mutex_unlock(&f->lock);
	/* the connector answers with its pages */
	while (ret == 0) {
		struct pollfd p = {.fd = l->fd, .events = POLLIN};
		uint64_t now = lc_now_ns();

		pthread_mutex_lock(&l->sock_lock);
		ret = shm_recv_msg(l->fd, &m, fds, &nfds);
		pthread_mutex_unlock(&l->sock_lock);
		if (ret == 1) {
			ret = m.type == SHM_M_FDS && nfds == SHM_NFDS ? map_peer(l, fds) : -EPROTO;
			if (ret == -EPROTO && !(m.type == SHM_M_FDS && nfds == SHM_NFDS))
				shm_close_fds(fds, nfds);
			if (ret == 0)
				ret = shm_read_arenas(l, m.id, deadline);
			break;
		}
		if (ret == 0)
			ret = -ECONNRESET;
		else if (ret == -EAGAIN && now >= deadline)
			ret = -ETIMEDOUT;
		else if (ret == -EAGAIN)
			ret = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1) < 0 &&
			              errno != EINTR
			          ? -errno
			          : 0;
	}
	pthread_mutex_lock(&f->lock);
	l->admitting = 0;
	if (ret == 0 && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_HELD) {
		__atomic_store_n(&l->state, SHM_LINK_UP, __ATOMIC_RELEASE);
		if (l->in_epoll)
			epoll_ctl(f->epfd, EPOLL_CTL_MOD, l->fd, &ev);
		shm_link_progress(l); /* requests posted while it was held */
	} else if (ret) {
		shm_link_fail(l, ret, ret, NULL);
	}
	pthread_mutex_unlock(&f->lock);
	return shm_link_state(link);
}

int shm_link_close(struct fab_link *link)
{
	struct shm_link *l = to_shm_link(link);
	struct shm_fab *f = l->fab;

	pthread_mutex_lock(&f->lock);
	fab_acceptq_remove(&f->acceptq, &l->pending);
	unpublish(f, l);
	pthread_mutex_unlock(&f->lock);
	shm_link_fail(l, -ECANCELED, -ECANCELED, NULL);
	shm_link_free(l);
	return 0;
}

int shm_link_state(struct fab_link *link)
{
	struct shm_link *l = to_shm_link(link);

	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_DOWN)
		return 0;
	return __atomic_load_n(&l->cause, __ATOMIC_ACQUIRE);
}

int shm_link_peer(struct fab_link *link, struct fab_addr *out)
{
	struct shm_link *l = to_shm_link(link);

	if (l->peer_addr.len == 0 || out == NULL)
		return -ENOTCONN;
	*out = l->peer_addr;
	return 0;
}
