/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * auto.c -- the "auto" provider: a fab that stacks two, and picks one per
 * link at connect time -- shm to peers on this host, the remote fabric
 * (verbs when a device opens, else tcp) to the others. See
 * loco-fabric-auto(7).
 *
 * Both fabs serve one address: the remote fab listens on ip:port, and the
 * shm fab (FAB_ATTR_ADDR_OWNED) on the abstract unix name made of the same
 * ip:port and the address's tag (random bits the shm fab drew, which
 * auto_get_addr() adds to the address), which exists only in this host's
 * network namespace. A connect tries shm first: when the address has no
 * tag or the name is not there (or another user serves it), shm says
 * -EHOSTUNREACH at once, before anything is sent, and the remote fab
 * connects instead. Peers that run one fabric only interoperate: a
 * tcp-only node on this host is reached over tcp, an shm-only node over
 * shm.
 *
 * One pair of keys names a region on both fabs: the primary chooses them
 * (verbs: its device; else shm, random as alone), the other, opened with
 * FAB_ATTR_KEYS_GIVEN, registers the same region under them
 * (fab_mr_reg_key()), so the core announces one rkey and posts one lkey
 * whatever link it uses. Links are the stacked fabs' own
 * (fab_post() goes straight to their provider: nothing is added on the
 * data path); only fab-wide calls pass through here: accept, poll, arm,
 * wait, progress, mr_reg.
 *
 * Thread safety: as every provider (fabric.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "../../log.h"
#include "../fabric.h"
#include "../provider.h"

#define AUTO_PRE_KEY 0xfffffff0u /* shm's key for the adoption before verbs registers */
/* progress: the remote fab found no work this long: shm sleeps every time, not in turns */
#define AUTO_REMOTE_QUIET_NS (10ull * 1000000ull)

enum {
	AUTO_SHM,
	AUTO_REMOTE,
	AUTO_N
};

struct auto_fab {
	struct fab base;
	struct fab_ops ops;
	struct fab *sub[AUTO_N]; /* sub[AUTO_SHM] NULL: every link on the remote fab */
	int epfd;                /* both wait fds (fab_wait_fd()) */
	unsigned turn;           /* which fab poll() and accept() ask first */
	unsigned pturn;          /* atomic: which fab progress() lets sleep */
	uint64_t remote_work_ns; /* atomic: when the remote fab's progress last found work */
	int no_progress[AUTO_N]; /* atomic: that fab said -EOPNOTSUPP to progress() */
	unsigned primary;        /* the fab that chooses the regions' keys */
};

struct auto_mr {
	struct fab_mr base;
	struct fab_mr *sub[AUTO_N];
};

static inline struct auto_fab *to_auto(struct fab *fab)
{
	return container_of(fab, struct auto_fab, base);
}

static void auto_close(struct fab *fab)
{
	struct auto_fab *f = to_auto(fab);

	for (int i = 0; i < AUTO_N; i++)
		fab_close(f->sub[i]);
	if (f->epfd >= 0)
		close(f->epfd);
	free(f);
}

struct fab *fab_auto_remote(struct fab *fab)
{
	return to_auto(fab)->sub[AUTO_REMOTE];
}

/* open_remote -- verbs when it is built and opens, else tcp (on given keys when @keyed). */
static int open_remote(const struct fab_attr *attr, bool keyed, struct fab **out)
{
	struct fab_attr a = *attr;
	int ret;

#ifdef LOCO_HAVE_VERBS
	ret = fab_verbs_ops.open(&a, out);
	if (ret == 0)
		return 0;
	lc_log_info("auto: no usable RDMA device (%s): tcp to other hosts", strerror(-ret));
#endif
	if (keyed)
		a.flags |= FAB_ATTR_KEYS_GIVEN;
	ret = fab_tcp_ops.open(&a, out);
	return ret;
}

/* open_shm -- shm on the remote fab's ip:port, in this host's namespace (given keys: @keyed). */
static int open_shm(struct auto_fab *f, const struct fab_attr *attr, bool keyed)
{
	char where[FAB_ADDR_STRLEN];
	struct fab_addr fa;
	struct fab_attr a = *attr;
	int ret = fab_get_addr(f->sub[AUTO_REMOTE], &fa);

	if (ret == 0)
		ret = fab_addr_format(&fa, where, sizeof(where));
	if (ret)
		return ret;
	a.listen_addr = where;
	a.flags |= FAB_ATTR_ADDR_OWNED | (keyed ? FAB_ATTR_KEYS_GIVEN : 0);
	return fab_shm_ops.open(&a, &f->sub[AUTO_SHM]);
}

/*
 * auto_open -- the remote fab (verbs, else tcp), then shm on its address.
 * Who chooses the keys: verbs (its device does), else shm; LOCO_AUTO_KEYS
 * =remote makes tcp choose them too, so that the tests run shm on given
 * keys, as it runs beside verbs, on a host without RDMA.
 */
static int auto_open(const struct fab_attr *attr, struct fab **out)
{
	const char *knob = getenv("LOCO_AUTO_SHM"), *keys = getenv("LOCO_AUTO_KEYS");
	bool want_shm = knob == NULL || strcmp(knob, "0") != 0;
	bool remote_keys = keys != NULL && strcmp(keys, "remote") == 0;
	struct auto_fab *f = calloc(1, sizeof(*f));
	int ret;

	if (f == NULL)
		return -ENOMEM;
	f->epfd = -1;
	f->base.attr = *attr;
	fab_ops_fill(&f->ops, &fab_auto_ops);
	f->base.ops = &f->ops;
	ret = open_remote(attr, want_shm && !remote_keys, &f->sub[AUTO_REMOTE]);
	if (ret)
		goto err;
	f->primary = AUTO_SHM;
	if (strcmp(f->sub[AUTO_REMOTE]->ops->name, "tcp") != 0 || remote_keys || !want_shm)
		f->primary = AUTO_REMOTE; /* the device chooses the keys */
	if (!want_shm) {
		lc_log_info("auto: LOCO_AUTO_SHM=0: %s to every peer",
		            f->sub[AUTO_REMOTE]->ops->name);
	} else if ((ret = open_shm(f, attr, f->primary == AUTO_REMOTE)) != 0) {
		lc_log_warn("auto: shm does not open (%s): %s to every peer", strerror(-ret),
		            f->sub[AUTO_REMOTE]->ops->name);
		f->sub[AUTO_SHM] = NULL;
		if (f->primary == AUTO_SHM) { /* tcp again, choosing its own keys */
			fab_close(f->sub[AUTO_REMOTE]);
			f->sub[AUTO_REMOTE] = NULL;
			f->primary = AUTO_REMOTE;
			ret = open_remote(attr, false, &f->sub[AUTO_REMOTE]);
			if (ret)
				goto err;
		}
	}
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (f->epfd < 0) {
		ret = -errno;
		goto err;
	}
	for (int i = 0; i < AUTO_N; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};

		if (f->sub[i] != NULL &&
		    epoll_ctl(f->epfd, EPOLL_CTL_ADD, fab_wait_fd(f->sub[i]), &ev) < 0) {
			ret = -errno;
			goto err;
		}
	}
	*out = &f->base;
	return 0;
err:
	auto_close(&f->base);
	return ret;
}

/* auto_get_addr -- the remote fab's ip:port, with the tag that names the shm fab on this host. */
static int auto_get_addr(struct fab *fab, struct fab_addr *out)
{
	struct auto_fab *f = to_auto(fab);
	struct fab_addr a, s;
	int ret = fab_get_addr(f->sub[AUTO_REMOTE], &a);

	if (ret == 0 && f->sub[AUTO_SHM] != NULL) {
		ret = fab_get_addr(f->sub[AUTO_SHM], &s);
		memcpy(a.tag, s.tag, sizeof(a.tag));
	}
	if (ret == 0)
		*out = a;
	return ret;
}

static int auto_connect(struct fab *fab, const struct fab_addr *peer, uint64_t ctx,
                        const void *priv, size_t priv_len, int timeout_ms, struct fab_link **out)
{
	struct auto_fab *f = to_auto(fab);
	int ret = -EHOSTUNREACH;

	if (f->sub[AUTO_SHM] != NULL)
		ret = fab_connect(f->sub[AUTO_SHM], peer, ctx, priv, priv_len, timeout_ms, out);
	/* only when shm sent nothing (no such endpoint here): the proof is single-use */
	if (ret == -EHOSTUNREACH)
		ret = fab_connect(f->sub[AUTO_REMOTE], peer, ctx, priv, priv_len, timeout_ms, out);
	return ret;
}

/* accept_once -- one look at both accept queues, starting with the turn's. */
static int accept_once(struct auto_fab *f, uint64_t ctx, struct fab_link **out, void *priv,
                       size_t *priv_len)
{
	unsigned first = f->turn++ & 1;

	for (unsigned k = 0; k < AUTO_N; k++) {
		struct fab *s = f->sub[(first + k) % AUTO_N];
		int ret;

		if (s == NULL)
			continue;
		ret = fab_accept(s, ctx, 0, out, priv, priv_len);
		if (ret != -EAGAIN)
			return ret;
	}
	return -EAGAIN;
}

static int auto_accept(struct fab *fab, uint64_t ctx, int timeout_ms, struct fab_link **out,
                       void *priv, size_t *priv_len)
{
	struct auto_fab *f = to_auto(fab);
	uint64_t deadline = fab_deadline_ns(timeout_ms);
	int ret;

	for (;;) {
		ret = accept_once(f, ctx, out, priv, priv_len);
		if (ret != -EAGAIN || timeout_ms == 0 ||
		    (timeout_ms > 0 && lc_now_ns() >= deadline))
			return ret;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
}

static int auto_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access,
                       struct fab_mr **out)
{
	struct auto_fab *f = to_auto(fab);
	struct auto_mr *m;
	struct fab_mr *first;
	int ret;

	if (fab_mr_check(addr, len, access, out))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	/*
	 * shm adopts private memory into a memfd mapped over it (a copy of
	 * the pages: loco-fabric-shm(7)), so beside verbs it must see the
	 * region first, or verbs would pin the pages that adoption replaces
	 * (the core's arena chunks are adopted at their first region, local
	 * ones too): the region under keys of our own, gone at once (the
	 * adoption stays), before verbs registers it.
	 */
	if (f->primary == AUTO_REMOTE && f->sub[AUTO_SHM] != NULL) {
		struct fab_mr *pre = NULL;

		ret = -EEXIST;
		for (uint32_t k = 0; ret == -EEXIST && k < 64; k++) /* a key verbs holds: another */
			ret = fab_mr_reg_key(f->sub[AUTO_SHM], addr, len, access, AUTO_PRE_KEY - k,
			                     AUTO_PRE_KEY - k, &pre);
		if (ret == 0)
			ret = fab_mr_dereg(pre);
		if (ret) {
			free(m);
			return ret;
		}
	}
	/* the primary chooses the keys; the other registers the region under them */
	ret = fab_mr_reg(f->sub[f->primary], addr, len, access, &m->sub[f->primary]);
	first = m->sub[f->primary];
	if (ret == 0 && f->sub[f->primary ^ 1] != NULL) {
		ret = fab_mr_reg_key(f->sub[f->primary ^ 1], addr, len, access, first->lkey,
		                     first->rkey, &m->sub[f->primary ^ 1]);
		if (ret)
			fab_mr_dereg(first);
	}
	if (ret) {
		free(m);
		return ret;
	}
	m->base = (struct fab_mr){.fab = fab,
	                          .addr = addr,
	                          .len = len,
	                          .lkey = first->lkey,
	                          .rkey = first->rkey,
	                          .access = access};
	*out = &m->base;
	return 0;
}

static int auto_mr_dereg(struct fab_mr *mr)
{
	struct auto_mr *m = container_of(mr, struct auto_mr, base);
	int ret = 0;

	/* the remote fab first: the key stays shm's until both forgot it */
	for (int i = AUTO_N - 1; i >= 0; i--) {
		int r = fab_mr_dereg(m->sub[i]);

		if (r && ret == 0)
			ret = r;
	}
	free(m);
	return ret;
}

static int auto_poll(struct fab *fab, struct fab_wc *wc, int max)
{
	struct auto_fab *f = to_auto(fab);
	unsigned first = f->turn++ & 1;
	int n = 0;

	for (unsigned k = 0; k < AUTO_N && n < max; k++) {
		struct fab *s = f->sub[(first + k) % AUTO_N];
		int r;

		if (s == NULL)
			continue;
		r = fab_poll(s, wc + n, max - n);
		if (r < 0 && n == 0)
			return r;
		if (r > 0)
			n += r;
	}
	return n;
}

static int auto_arm(struct fab *fab)
{
	struct auto_fab *f = to_auto(fab);
	int ret = 0;

	/* arm both: one with work waiting says -EAGAIN, and the caller polls first */
	for (int i = 0; i < AUTO_N; i++) {
		int r;

		if (f->sub[i] == NULL)
			continue;
		r = fab_arm(f->sub[i]);
		if (r != 0 && ret == 0)
			ret = r;
	}
	return ret;
}

static int auto_wait_fd(struct fab *fab)
{
	return to_auto(fab)->epfd;
}

static int auto_wait(struct fab *fab, int timeout_ms)
{
	struct auto_fab *f = to_auto(fab);
	struct epoll_event ev[AUTO_N];

	if (auto_arm(fab) == -EAGAIN)
		return 0;
	if (epoll_wait(f->epfd, ev, AUTO_N, timeout_ms) == 0)
		return -ETIMEDOUT;
	return 0;
}

/*
 * auto_progress -- lend the thread to both fabrics. One of them may sleep
 * (a waiter can block in one place only): each call, the other one's work
 * is done at once (timeout 0) and then this call's sleeper waits, the two
 * taking turns, so that under a growing sleep a landing on either is seen
 * within two sleeps; while the remote fab has had no work for
 * AUTO_REMOTE_QUIET_NS (all peers on this host, say), shm sleeps every
 * time and the remote fab is only polled. A fabric that needs no thread
 * (-EOPNOTSUPP) is left out; with one fabric only, it sleeps every time.
 */
/* usable -- whether sub-fabric @i is there and may need a thread. */
static bool usable(struct auto_fab *f, unsigned i)
{
	return f->sub[i] != NULL && !__atomic_load_n(&f->no_progress[i], __ATOMIC_RELAXED);
}

/* drive -- fab_progress() of sub-fabric @i; remembers -EOPNOTSUPP. */
static int drive(struct auto_fab *f, unsigned i, int64_t timeout_ns)
{
	int r = fab_progress(f->sub[i], timeout_ns);

	if (r == -EOPNOTSUPP)
		__atomic_store_n(&f->no_progress[i], 1, __ATOMIC_RELAXED);
	return r;
}

static int auto_progress(struct fab *fab, int64_t timeout_ns)
{
	struct auto_fab *f = to_auto(fab);
	uint64_t now = lc_now_ns(), last = __atomic_load_n(&f->remote_work_ns, __ATOMIC_RELAXED);
	unsigned a = __atomic_fetch_add(&f->pturn, 1, __ATOMIC_RELAXED) & 1, b;
	int r = -EOPNOTSUPP, s;

	/* the remote fabric quiet for a while: shm sleeps every time (its landings wake it) */
	if (now - last > AUTO_REMOTE_QUIET_NS)
		a = AUTO_SHM;
	b = a ^ 1;
	if (!usable(f, a)) { /* the sleeper must be one that needs a thread */
		a = b;
		b = a ^ 1;
	}
	if (!usable(f, a))
		return -EOPNOTSUPP;
	if (usable(f, b)) {
		r = drive(f, b, 0);
		if (r > 0 && b == AUTO_REMOTE)
			__atomic_store_n(&f->remote_work_ns, now, __ATOMIC_RELAXED);
		if (r > 0)
			return r;
	}
	s = drive(f, a, timeout_ns);
	if (s > 0 && a == AUTO_REMOTE)
		__atomic_store_n(&f->remote_work_ns, now, __ATOMIC_RELAXED);
	return s == -EOPNOTSUPP ? r : s;
}

const struct fab_ops fab_auto_ops = {
    .size = sizeof(struct fab_ops),
    .name = "auto",
    .accept = auto_accept,
    .arm = auto_arm,
    .close = auto_close,
    .connect = auto_connect,
    .get_addr = auto_get_addr,
    .mr_dereg = auto_mr_dereg,
    .mr_reg = auto_mr_reg,
    .open = auto_open,
    .poll = auto_poll,
    .progress = auto_progress,
    .wait = auto_wait,
    .wait_fd = auto_wait_fd,
};
