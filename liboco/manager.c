/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * manager.c -- loco_init()/loco_fini(), configuration, and the progress
 * thread: it reaps fabric completions (ack keys), accepts data links,
 * serves the control plane, runs the failure detector and calls the
 * pollers (poller.c). It blocks in epoll when idle (the fabric's wait fd
 * is in the set), so an idle node burns no CPU; while pollers are active
 * it sleeps at most their period between turns, since the remote WRITEs
 * they watch for give no event.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "manager.h"
#include "sock.h"

#define LC_WCS 64

void lc_wake(loco_manager_t *m)
{
	uint64_t one = 1;

	if (write(m->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		lc_log_warn("manager: cannot wake the progress thread: %s", strerror(errno));
}

/* reap -- hand completions to their ack keys; fabric errors feed the failure detector. */
static int reap(loco_manager_t *m)
{
	struct fab_wc wc[LC_WCS];
	int n = fab_poll(m->fab, wc, LC_WCS);

	for (int i = 0; i < n; i++) {
		if (wc[i].status != 0) {
			lc_log_debug("manager: %s to node %u failed: %s",
			             fab_opcode_str(wc[i].opcode), (unsigned)wc[i].link_ctx,
			             strerror(-wc[i].status));
			if (wc[i].status == -ECONNRESET || wc[i].status == -ETIMEDOUT)
				lc_member_link_error(m, (uint32_t)wc[i].link_ctx, wc[i].status);
			else
				lc_member_link_check(m, (uint32_t)wc[i].link_ctx);
		}
		if (lc_wrid_type(wc[i].wrid) == LC_WRID_ACK)
			lc_ack_complete(&m->acks, wc[i].wrid, wc[i].status);
		else if (wc[i].status != 0 && wc[i].status != -ECANCELED)
			lc_log_warn("manager: unacknowledged %s to node %u failed: %s",
			            fab_opcode_str(wc[i].opcode), (unsigned)wc[i].link_ctx,
			            strerror(-wc[i].status));
	}
	return n;
}

/*
 * try_reap -- a thread waiting on an ack key reaps completions itself when
 * no one else is: the completion reaches its key without waking the
 * progress thread (one thread hop less per operation).
 */
static void try_reap(void *arg)
{
	loco_manager_t *m = arg;

	if (pthread_mutex_trylock(&m->poll_lock) != 0)
		return;
	while (reap(m) > 0)
		;
	pthread_mutex_unlock(&m->poll_lock);
}

/*
 * wait_events -- epoll_wait() for at most @timeout_ns (>= 0), to the
 * nanosecond with epoll_pwait2() where the kernel has it (pollers' periods
 * may be below a millisecond), else rounded up to whole milliseconds.
 */
static int wait_events(loco_manager_t *m, struct epoll_event *ev, int max, int64_t timeout_ns)
{
#ifdef LOCO_HAVE_EPOLL_PWAIT2
	if (timeout_ns % 1000000 != 0 && !m->no_pwait2) {
		struct timespec ts = {.tv_sec = timeout_ns / 1000000000,
		                      .tv_nsec = timeout_ns % 1000000000};
		int n = epoll_pwait2(m->epfd, ev, max, &ts, NULL);

		if (n >= 0 || errno != ENOSYS)
			return n;
		m->no_pwait2 = 1; /* ENOSYS: whole milliseconds from now on */
	}
#endif
	if (timeout_ns > (int64_t)INT32_MAX * 1000000)
		timeout_ns = (int64_t)INT32_MAX * 1000000;
	return epoll_wait(m->epfd, ev, max, (int)((timeout_ns + 999999) / 1000000));
}

static void *progress_main(void *arg)
{
	loco_manager_t *m = arg;
	struct epoll_event ev[32];

	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		uint64_t now, wake;
		int64_t period;
		int n, busy = 0;

		pthread_mutex_lock(&m->poll_lock);
		while (reap(m) > 0)
			busy = 1;
		pthread_mutex_unlock(&m->poll_lock);
		pthread_mutex_lock(&m->lock);
		lc_link_accept(m);
		now = lc_now_ns();
		wake = lc_member_timers(m, now);
		pthread_mutex_unlock(&m->lock);
		/* without m->lock: a poller's function may call anything a callback may */
		if (lc_pollers_run(m, &period))
			busy = 1;
		if (busy) {
			n = epoll_wait(m->epfd, ev, 32, 0);
		} else if (__atomic_load_n(&m->waiters, __ATOMIC_ACQUIRE) > 0 ||
		           now - __atomic_load_n(&m->last_wait_ns, __ATOMIC_RELAXED) < 5000000ull) {
			/*
			 * Threads are waiting on ack keys and reap completions
			 * themselves: do not arm the CQ (each completion would
			 * wake us for nothing), look every millisecond for
			 * completions nobody waits for.
			 */
			n = wait_events(m, ev, 32,
			                period > 0 && period < 1000000 ? period : 1000000);
		} else if (fab_arm(m->fab) != 0) {
			n = epoll_wait(m->epfd, ev, 32, 0);
		} else {
			/* round up: waking a little late is fine, early means a spin */
			int64_t t = (int64_t)((wake > now ? wake - now + 999999 : 0) / 1000000ull);

			t *= 1000000;
			if (period > 0 && period < t)
				t = period; /* the pollers watch for WRITEs, which wake nobody */
			n = wait_events(m, ev, 32, t);
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == (void *)&m->lfd) {
				pthread_mutex_lock(&m->lock);
				lc_ctrl_accept(m);
				pthread_mutex_unlock(&m->lock);
			} else if (p == (void *)&m->evfd) {
				uint64_t v;

				if (read(m->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					lc_log_warn("manager: eventfd: %s", strerror(errno));
			} else if (p == (void *)m->fab) {
				/* completions: reaped at the top of the loop */
			} else {
				pthread_mutex_lock(&m->lock);
				lc_conn_input(m, p);
				pthread_mutex_unlock(&m->lock);
			}
		}
	}
	return NULL;
}

/* cfg_str / cfg_u32 -- a setting: the environment wins over the struct. */
static const char *cfg_str(const char *env, const char *field, const char *def)
{
	const char *v = getenv(env);

	if (v != NULL && *v != '\0')
		return v;
	return field != NULL && *field != '\0' ? field : def;
}

static int cfg_u32(const char *env, uint32_t field, uint32_t def, uint32_t *out)
{
	const char *v = getenv(env);
	char *end;
	unsigned long x;

	if (v == NULL || *v == '\0') {
		*out = field ? field : def;
		return 0;
	}
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end != '\0' || x > UINT32_MAX) {
		lc_log_err("manager: %s=%s is not a number", env, v);
		return -EINVAL;
	}
	*out = x ? (uint32_t)x : def; /* 0 means "the default", as in the struct */
	return 0;
}

/* fab_listen_addr -- the data plane listens on the control plane's IP, any port. */
static void fab_listen_addr(const char *ctrl, char *out, size_t len)
{
	const char *colon = strrchr(ctrl, ':');
	size_t n = colon ? (size_t)(colon - ctrl) : strlen(ctrl);

	if (n >= len - 3)
		n = len - 3;
	memcpy(out, ctrl, n);
	memcpy(out + n, ":0", 3);
}

static int epoll_add(loco_manager_t *m, int fd, void *ptr)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};

	return epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* stop_threads -- end the progress and dialer threads. */
static void stop_threads(loco_manager_t *m)
{
	__atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
	lc_wake(m);
	pthread_mutex_lock(&m->lock);
	pthread_cond_broadcast(&m->dial_cond);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->progress, NULL);
	if (m->dialer_started)
		pthread_join(m->dialer, NULL);
}

int loco_init(const loco_config_t *cfg, loco_manager_t **out)
{
	static const loco_config_t none;
	const char *fabric, *addr, *join, *secret;
	char fab_listen[LC_ADDR_MAX + 1];
	struct fab_attr fattr = {0};
	struct fab_addr fa;
	pthread_mutexattr_t ma;
	loco_manager_t *m;
	uint32_t node_id;
	int ret;

	if (out == NULL)
		return -EINVAL;
	if (cfg == NULL)
		cfg = &none;
	if (sodium_init() < 0) {
		lc_log_err("manager: libsodium failed to initialise");
		return -ENOSYS;
	}
	fabric = cfg_str("LOCO_FABRIC", cfg->fabric, "tcp");
	addr = cfg_str("LOCO_ADDR", cfg->addr, "127.0.0.1:0");
	join = cfg_str("LOCO_JOIN", cfg->join, NULL);
	secret = cfg_str("LOCO_SECRET", cfg->secret, "loco");
	ret = cfg_u32("LOCO_NODE_ID", cfg->node_id, join ? 0 : 1, &node_id);
	if (ret)
		return ret;
	if (node_id == 0) {
		lc_log_err("manager: %s",
		           join ? "a joining node needs an id: set LOCO_NODE_ID (>= 1)"
		                : "LOCO_NODE_ID must be >= 1");
		return -EINVAL;
	}
	if (strlen(fabric) > LC_FABRIC_MAX || strlen(addr) > LC_ADDR_MAX)
		return -EINVAL;

	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	m->lfd = m->epfd = m->evfd = -1;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&m->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&m->mem_lock, NULL);
	pthread_mutex_init(&m->poll_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&m->dial_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	pthread_rwlock_init(&m->links_lock, NULL);
	ret = lc_pollers_init(m);
	if (ret)
		goto err_free;
	m->node_id = node_id;
	/* a restart gets a larger incarnation: wall-clock ns plus random low bits */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		m->inc = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
		         (randombytes_random() & 0xfff);
	}
	snprintf(m->fabric, sizeof(m->fabric), "%s", fabric);
	crypto_generichash(m->key, sizeof(m->key), (const unsigned char *)secret, strlen(secret),
	                   NULL, 0);
	ret = cfg_u32("LOCO_FAIL_TIMEOUT_MS", cfg->fail_timeout_ms, 1000, &m->fail_timeout_ms);
	if (ret == 0)
		ret = cfg_u32("LOCO_JOIN_TIMEOUT_MS", cfg->join_timeout_ms, 10000,
		              &m->join_timeout_ms);
	if (ret)
		goto err_free;
	if (m->fail_timeout_ms < 100)
		m->fail_timeout_ms = 100;

	ret = lc_ack_table_init(&m->acks, 4096);
	if (ret)
		goto err_free;
	m->acks.progress = try_reap;
	m->acks.progress_arg = m;
	lc_memlock_check(fabric);

	fab_listen_addr(addr, fab_listen, sizeof(fab_listen));
	fattr.listen_addr = fab_listen;
	fattr.device = cfg_str("LOCO_DEVICE", cfg->device, NULL);
	fattr.timeout_ms = m->fail_timeout_ms;
	ret = fab_open(fabric, &fattr, &m->fab);
	if (ret)
		goto err_acks;
	ret = fab_get_addr(m->fab, &fa);
	if (ret == 0)
		ret = fab_addr_format(&fa, m->fab_addr, sizeof(m->fab_addr));
	if (ret)
		goto err_fab;

	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->epfd < 0 || m->evfd < 0) {
		ret = -errno;
		goto err_fds;
	}
	ret = lc_ctrl_listen(m, addr);
	if (ret)
		goto err_fds;
	ret = epoll_add(m, m->evfd, &m->evfd);
	if (ret == 0)
		ret = epoll_add(m, fab_wait_fd(m->fab), m->fab);
	if (ret == 0)
		ret = epoll_add(m, m->lfd, &m->lfd);
	if (ret)
		goto err_fds;
	ret = -pthread_create(&m->progress, NULL, progress_main, m);
	if (ret) {
		lc_log_err("manager: cannot start the progress thread: %s", strerror(-ret));
		goto err_fds;
	}
	ret = -pthread_create(&m->dialer, NULL, lc_dialer_main, m);
	if (ret) {
		lc_log_err("manager: cannot start the dialer thread: %s", strerror(-ret));
		goto err_stop;
	}
	m->dialer_started = 1;
	m->ready = 1;
	lc_self_link(m);
	lc_log_info("manager: node %u (incarnation %llx) control %s fabric %s %s", m->node_id,
	            (unsigned long long)m->inc, m->ctrl_addr, m->fabric, m->fab_addr);

	if (join != NULL) {
		ret = lc_join(m, join);
		if (ret)
			goto err_stop;
	}
	*out = m;
	return 0;

err_stop:
	stop_threads(m);
	lc_members_free(m);
err_fds:
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->epfd >= 0)
		close(m->epfd);
	if (m->evfd >= 0)
		close(m->evfd);
err_fab:
	fab_close(m->fab);
err_acks:
	lc_ack_table_fini(&m->acks);
err_free:
	lc_pollers_fini(m);
	sodium_memzero(m->key, sizeof(m->key));
	pthread_rwlock_destroy(&m->links_lock);
	pthread_cond_destroy(&m->dial_cond);
	pthread_mutex_destroy(&m->poll_lock);
	pthread_mutex_destroy(&m->mem_lock);
	pthread_mutex_destroy(&m->lock);
	free(m);
	return ret;
}

void loco_fini(loco_manager_t *m)
{
	if (m == NULL)
		return;
	if (m->channels != NULL)
		lc_log_warn("manager: loco_fini with channels still open");
	pthread_mutex_lock(&m->lock);
	m->leaving = 1;
	lc_members_leave(m); /* tell everyone: a graceful leave, not a failure */
	pthread_mutex_unlock(&m->lock);
	stop_threads(m);
	lc_members_free(m);
	close(m->lfd);
	close(m->epfd);
	close(m->evfd);
	fab_close(m->fab);
	lc_ack_table_fini(&m->acks);
	lc_pollers_fini(m);
	lc_mem_fini(m);
	sodium_memzero(m->key, sizeof(m->key));
	pthread_rwlock_destroy(&m->links_lock);
	pthread_cond_destroy(&m->dial_cond);
	pthread_mutex_destroy(&m->poll_lock);
	pthread_mutex_destroy(&m->mem_lock);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

uint32_t loco_node_id(const loco_manager_t *m)
{
	return m->node_id;
}

const char *loco_addr(const loco_manager_t *m)
{
	return m->ctrl_addr;
}

uint64_t loco_incarnation(const loco_manager_t *m)
{
	return m->inc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int loco_members(loco_manager_t *m, uint32_t *ids, size_t max)
{
	uint32_t all[LC_MAX_NODES + 1];
	size_t n = 0;

	if (m == NULL || (ids == NULL && max > 0))
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	all[n++] = m->node_id;
	for (struct lc_member *mb = m->members; mb != NULL && n <= LC_MAX_NODES; mb = mb->next)
		if (mb->up)
			all[n++] = mb->info.node;
	pthread_mutex_unlock(&m->lock);
	qsort(all, n, sizeof(all[0]), cmp_u32);
	if (n > 0 && max > 0) /* ids may be NULL with max 0: counting only */
		memcpy(ids, all, (n < max ? n : max) * sizeof(ids[0]));
	return (int)n;
}

/* ------------------------------------------------------------------ */
/* ack keys: the public wrappers                                      */

int loco_ack_key_create(loco_manager_t *m, loco_ack_key_t **out)
{
	if (m == NULL || out == NULL)
		return -EINVAL;
	return lc_ack_key_new(&m->acks, m, out);
}

void loco_ack_key_destroy(loco_ack_key_t *key)
{
	if (key == NULL)
		return;
	/* every attached operation completes within the fabric's dead-peer bound */
	while (lc_ack_wait(key, 1000000000ll) == -ETIMEDOUT)
		lc_log_warn("manager: ack key destroy waits for %zu operation(s)",
		            loco_ack_outstanding(key));
	lc_ack_key_free(key);
}

int loco_ack_wait(loco_ack_key_t *key, int64_t timeout_ns)
{
	loco_manager_t *m;
	int ret;

	if (key == NULL)
		return -EINVAL;
	m = key->manager;
	if (timeout_ns == 0) {
		/*
		 * Only a test: reap once ourselves, but do not count as a
		 * waiter -- a loop of tests would keep the progress thread
		 * from arming the completion queue (1 ms ticks, not sleep).
		 */
		if (loco_ack_outstanding(key) > 0)
			try_reap(m);
		return lc_ack_wait(key, 0);
	}
	__atomic_add_fetch(&m->waiters, 1, __ATOMIC_ACQ_REL);
	ret = lc_ack_wait(key, timeout_ns);
	__atomic_store_n(&m->last_wait_ns, lc_now_ns(), __ATOMIC_RELAXED);
	__atomic_sub_fetch(&m->waiters, 1, __ATOMIC_ACQ_REL);
	return ret;
}

size_t loco_ack_outstanding(const loco_ack_key_t *key)
{
	return key ? lc_ack_outstanding(key) : 0;
}
