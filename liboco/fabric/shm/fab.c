/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fab.c -- open and close an shm fab (the reserved port, the unix
 * listening socket, the sealed fab page, event fds, the provider thread),
 * the provider thread's loop, and the ops table.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../clock.h"
#include "../../log.h"
#include "shm.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define EV_KICK (3ull << 32)
#define EV_RNR  (4ull << 32)

static void shm_fab_close(struct fab *fab);

/* random_tag -- fill @tag with random bits, not all zero (a zero tag means none). 0 or -errno. */
static int random_tag(uint8_t *tag)
{
	for (int i = 0; i < 8; i++) {
		ssize_t n = getrandom(tag, FAB_ADDR_TAG_LEN, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n == FAB_ADDR_TAG_LEN) {
			for (size_t k = 0; k < FAB_ADDR_TAG_LEN; k++)
				if (tag[k] != 0)
					return 0;
		}
	}
	return -EIO;
}

/*
 * shm_listen -- reserve ip:port with a bound TCP socket (never listening:
 * it only makes the port ours on this host) and listen on an abstract unix
 * name made of it and random bits (the address's tag, which peers learn
 * with the address, over the control plane). Any user of the host can bind
 * any abstract name, and a name made of uid and ip:port alone could be
 * bound first to stop this node (~28k sockets cover every port of the
 * ephemeral range): 128 random bits cannot be. A name that is taken
 * anyway is a collision: new bits, a few times.
 */
static int shm_listen(struct shm_fab *f, const char *where)
{
	struct sockaddr_un sun;
	socklen_t slen;
	int ret = fab_addr_parse(where ? where : "127.0.0.1:0", 0, &f->addr);

	if (ret) {
		lc_log_err("shm: bad listen address %s", where);
		return ret;
	}
	if (f->base.attr.flags & FAB_ATTR_ADDR_OWNED) {
		/* stacked on a fab that owns ip:port (auto): only the unix name is ours */
		if (((const struct sockaddr_in *)&f->addr.ss)->sin_port == 0)
			return -EINVAL;
	} else {
		f->port_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (f->port_fd < 0)
			return -errno;
		if (bind(f->port_fd, (struct sockaddr *)&f->addr.ss, f->addr.len) < 0) {
			ret = -errno;
			lc_log_err("shm: cannot reserve %s: %s", where ? where : "127.0.0.1:0",
			           strerror(-ret));
			return ret;
		}
		f->addr.len = sizeof(f->addr.ss);
		if (getsockname(f->port_fd, (struct sockaddr *)&f->addr.ss, &f->addr.len) < 0)
			return -errno;
	}
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->lfd < 0)
		return -errno;
	for (int i = 0;; i++) {
		ret = random_tag(f->addr.tag);
		if (ret) {
			lc_log_err("shm: no random bits for the unix name: %s", strerror(-ret));
			return ret;
		}
		ret = shm_abstract_name(&f->addr, f->uid, &sun, &slen);
		if (ret)
			return ret;
		if (bind(f->lfd, (struct sockaddr *)&sun, slen) == 0)
			break;
		if (errno != EADDRINUSE || i == 3)
			goto err_listen;
	}
	if (listen(f->lfd, 128) == 0)
		return 0;
err_listen:
	ret = -errno;
	lc_log_err("shm: cannot listen on @%s: %s", sun.sun_path + 1, strerror(-ret));
	return ret;
}

/* make_fpage -- the fab page, sealed: nobody else can map it writable. */
static int make_fpage(struct shm_fab *f)
{
	void *p;

	f->fpage_fd = memfd_create("loco-shm-fab", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (f->fpage_fd < 0)
		return -errno;
	if (ftruncate(f->fpage_fd, sizeof(struct shm_fpage)) < 0)
		return -errno;
	p = mmap(NULL, sizeof(struct shm_fpage), PROT_READ | PROT_WRITE, MAP_SHARED, f->fpage_fd,
	         0);
	if (p == MAP_FAILED)
		return -errno;
	f->fpage = p;
	if (fcntl(f->fpage_fd, F_ADD_SEALS,
	          F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
		lc_log_err("shm: cannot seal the key table (Linux >= 5.1 needed): %s",
		           strerror(errno));
		return -errno;
	}
	f->fpage->magic = SHM_MAGIC;
	{
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
		pthread_mutex_init(&f->fpage->life, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	return 0;
}

/* make_bpage -- the bell page, which every peer maps read-write (fab_progress()). */
static int make_bpage(struct shm_fab *f)
{
	void *p;

	f->bpage_fd = memfd_create("loco-shm-bell", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (f->bpage_fd < 0)
		return -errno;
	if (ftruncate(f->bpage_fd, sizeof(struct shm_bpage)) < 0 ||
	    fcntl(f->bpage_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	p = mmap(NULL, sizeof(struct shm_bpage), PROT_READ | PROT_WRITE, MAP_SHARED, f->bpage_fd,
	         0);
	if (p == MAP_FAILED)
		return -errno;
	f->bpage = p;
	f->bpage->magic = SHM_MAGIC;
	return 0;
}

static struct shm_link *link_by_id(struct shm_fab *f, uint32_t id)
{
	for (unsigned i = 0; i < f->nlinks; i++)
		if (f->links[i]->base.id == id)
			return f->links[i];
	return NULL;
}

static void *shm_thread_main(void *arg)
{
	struct shm_fab *f = arg;
	struct epoll_event ev[32];

	/* our life, for peers to see (shm_peer_gone()) */
	if (pthread_mutex_lock(&f->fpage->life) != 0)
		lc_log_warn("shm: cannot take the life lock: peers will think this node dead");
	__atomic_store_n(&f->alive, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		int n = epoll_wait(f->epfd, ev, 32, 100);

		pthread_mutex_lock(&f->lock);
		for (int i = 0; i < n; i++) {
			uint64_t u = ev[i].data.u64, v;
			struct shm_link *l;

			if (u == 0) {
				shm_thread_accept(f);
				continue;
			}
			if (u == EV_RNR) {
				/* a peer posted RECVs or freed ring room we wait for */
				if (read(f->rnr_evfd, &v, sizeof(v)) < 0)
					(void)0;
				int landed = 0;

				for (unsigned k = 0; k < f->nlinks; k++) {
					struct shm_link *x = f->links[k];

					shm_link_progress(x);
					if (x->mine != NULL &&
					    __atomic_load_n(&x->mine->landed, __ATOMIC_RELAXED))
						landed |= __atomic_exchange_n(&x->mine->landed, 0,
						                              __ATOMIC_SEQ_CST);
				}
				/* a peer's WRITE or atomic changed our memory (LOCO_WAIT=block) */
				if (landed && f->base.attr.landed != NULL)
					f->base.attr.landed(f->base.attr.landed_arg);
				continue;
			}
			if (u == EV_KICK) {
				if (read(f->evfd, &v, sizeof(v)) < 0)
					(void)0;
				continue;
			}
			l = link_by_id(f, (uint32_t)u);
			if (l == NULL)
				continue; /* closed meanwhile */
			if ((u >> 32) == 1)
				shm_thread_sock(f, l, ev[i].events);
			else
				shm_thread_pid(f, l);
		}
		shm_thread_timers(f);
		pthread_mutex_unlock(&f->lock);
		shm_disarm(f); /* nobody drove for a while: peers stop bumping the bell page */
	}
	pthread_mutex_unlock(&f->fpage->life);
	return NULL;
}

static int shm_fab_open(const struct fab_attr *attr, struct fab **out)
{
	struct shm_fab *f;
	struct epoll_event ev;
	const char *slow = getenv("LOCO_SHM_SLOW_WRITE");
	int ret;

	if (attr->max_inline > 65536 || attr->sq_depth > 65536 || attr->rq_depth > SHM_RQ_MAX ||
	    attr->cq_depth > (1u << 24))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->lfd = f->port_fd = f->epfd = f->evfd = f->rnr_evfd = f->fpage_fd = -1;
	f->bpage_fd = -1;
	f->base.attr = *attr;
	f->uid = geteuid();
	fab_ops_fill(&f->ops, &fab_shm_ops);
	f->base.ops = &f->ops;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->drive_mu, NULL);
	pthread_cond_init(&f->cond, NULL);
	fab_acceptq_init(&f->acceptq, &f->lock, &f->cond);
	if (attr->flags & FAB_ATTR_KEYS_GIVEN) {
		/* stacked on verbs (auto): the device's keys, lkey and rkey apart */
		ret = keytab_init_foreign(&f->kt, 2 * SHM_KEYS);
	} else {
		ret = keytab_init(&f->kt, SHM_KEYS);
		if (ret == 0)
			ret = keytab_randomize(&f->kt);
	}
	if (ret == 0)
		ret = make_fpage(f);
	if (ret == 0)
		ret = make_bpage(f);
	if (ret == 0)
		ret = fab_swcq_init(&f->cq, &(struct fab_swcq_attr){.name = "shm",
		                                                    .depth = attr->cq_depth,
		                                                    .flags = FAB_SWCQ_MP,
		                                                    .rung = &f->bpage->rings,
		                                                    .mirror = &f->fpage->waiting,
		                                                    .ready = shm_ready,
		                                                    .arg = f});
	if (ret)
		goto err_close;
	/* the knob of the torn-read hunts; the tcp name works too (the test harness sets it) */
	if (slow == NULL || *slow == '\0')
		slow = getenv("LOCO_TCP_SLOW_WRITE");
	if (slow != NULL && *slow != '\0')
		f->fpage->slow_ns = strtoull(slow, NULL, 10);
	f->fpage->want_landed = attr->landed != NULL;
	ret = shm_listen(f, attr->listen_addr);
	if (ret)
		goto err_close;
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->rnr_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->epfd < 0 || f->evfd < 0 || f->rnr_evfd < 0) {
		ret = -errno;
		goto err_close;
	}
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 0};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->lfd, &ev);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = EV_KICK};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->evfd, &ev);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = EV_RNR};
	epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->rnr_evfd, &ev);
	ret = -pthread_create(&f->thread, NULL, shm_thread_main, f);
	if (ret) {
		lc_log_err("shm: cannot start the provider thread: %s", strerror(-ret));
		goto err_close;
	}
	while (!__atomic_load_n(&f->alive, __ATOMIC_ACQUIRE))
		sched_yield(); /* peers must not see us dead */
	*out = &f->base;
	return 0;

err_close:
	shm_fab_close(&f->base);
	return ret;
}

static void shm_fab_close(struct fab *fab)
{
	struct shm_fab *f = to_shm_fab(fab);
	uint64_t one = 1;

	if (f->thread) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		if (write(f->evfd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(f->thread, NULL);
	}
	if (f->nlinks)
		lc_log_warn("shm: closing the fabric with %u link(s) open", f->nlinks);
	for (unsigned i = 0; i < f->nlinks; i++)
		shm_link_free(f->links[i]);
	for (unsigned i = 0; i < f->narenas; i++)
		close(f->arenas[i].fd); /* the memory stays mapped where it was */
	if (f->fpage != NULL)
		munmap(f->fpage, sizeof(*f->fpage));
	if (f->fpage_fd >= 0)
		close(f->fpage_fd);
	if (f->bpage != NULL)
		munmap(f->bpage, sizeof(*f->bpage));
	if (f->bpage_fd >= 0)
		close(f->bpage_fd);
	if (f->lfd >= 0)
		close(f->lfd);
	if (f->port_fd >= 0)
		close(f->port_fd);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->evfd >= 0)
		close(f->evfd);
	if (f->rnr_evfd >= 0)
		close(f->rnr_evfd);
	keytab_fini(&f->kt);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->drive_mu);
	fab_swcq_fini(&f->cq);
	free(f);
}

static int shm_get_addr(struct fab *fab, struct fab_addr *out)
{
	*out = to_shm_fab(fab)->addr;
	return 0;
}

const struct fab_ops fab_shm_ops = {
    .size = sizeof(struct fab_ops),
    .name = "shm",
    .accept = shm_accept,
    .arm = shm_arm,
    .close = shm_fab_close,
    .connect = shm_connect,
    .get_addr = shm_get_addr,
    .link_admit = shm_link_admit,
    .link_close = shm_link_close,
    .link_peer = shm_link_peer,
    .link_state = shm_link_state,
    .mr_dereg = shm_mr_dereg,
    .mr_reg = shm_mr_reg,
    .mr_reg_key = shm_mr_reg_key,
    .open = shm_fab_open,
    .poll = shm_poll,
    .post = shm_post,
    .post_now = shm_post_now,
    .post_recv = shm_post_recv,
    .progress = shm_progress,
    .wait = shm_wait,
    .wait_fd = shm_wait_fd,
};
