/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * manager.c -- loco_init()/loco_fini() and the manager's accessors. What
 * each part does is in manager.h; the threads are started here.
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

#include "chan.h"
#include "dial.h"
#include "handle.h"
#include "log.h"
#include "manager.h"
#include "pmix_boot.h"
#include "wait.h"
#include "wake.h"

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

static void wake_fn(void *arg)
{
	lc_wake(arg);
}

/* landed_fn -- the tcp NIC thread executed a remote WRITE or atomic: wake blocked waiters. */
static void landed_fn(void *arg)
{
	loco_manager_t *m = arg;

	lc_wait_signal(&m->wait);
}

/*
 * drive_fn -- a waiter lends its thread to the fabric instead of sleeping
 * (fab_progress(); the tcp provider's NIC role), and reaps the
 * completions that brought, so neither needs a thread hop.
 */
static int drive_fn(void *arg, int64_t ns)
{
	loco_manager_t *m = arg;
	int ret = fab_progress(m->fab, ns);

	if (ret > 0)
		lc_progress_reap(m);
	if (ret == 2) { /* a peer's WRITE landed: waiters that sleep elsewhere look again */
		lc_wait_signal(&m->wait);
		ret = 1;
	}
	return ret;
}

/* ack_in_view -- whether @node is in the installed view (LOCO_ACK_IGNORE_LEFT; waiters only). */
static int ack_in_view(void *arg, uint32_t node)
{
	loco_manager_t *m = arg;
	int in;

	pthread_mutex_lock(&m->lock);
	in = node == m->node_id || lc_ms_inc(m->ms, node) != 0;
	pthread_mutex_unlock(&m->lock);
	return in;
}

/* derive_key -- the cluster key from the secret m->cfg.secret. */
static void derive_key(loco_manager_t *m)
{
	crypto_generichash(m->key, sizeof(m->key), (const unsigned char *)m->cfg.secret,
	                   strlen(m->cfg.secret), NULL, 0);
}

/* manager_new -- the manager's memory, locks and identity (nothing started). */
static int manager_new(const struct lc_config *cfg, loco_manager_t **out)
{
	loco_manager_t *m = lc_handle_alloc(NULL, sizeof(*m)); /* a handle: loco_fini() kills it */
	struct timespec ts;
	int ret;

	if (m == NULL)
		return -ENOMEM;
	m->lfd = m->epfd = m->evfd = -1;
	m->cfg = *cfg;
	if (lc_members_init(m) != 0 || lc_view_init(m) != 0) {
		lc_members_fini(m);
		lc_handle_bury(m);
		return -ENOMEM;
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	lc_mem_init(&m->mem);
	lc_progress_init(m);
	lc_chans_init(m);
	m->node_id = cfg->node_id;
	/* a restart gets a larger incarnation: wall-clock ns plus random low bits */
	clock_gettime(CLOCK_REALTIME, &ts);
	m->inc = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
	         (randombytes_random() & 0xfff);
	snprintf(m->fabric, sizeof(m->fabric), "%s", cfg->fabric);
	derive_key(m);
	ret = lc_pollers_init(&m->pollers, wake_fn, m, &m->progress);
	if (ret == 0)
		ret = lc_ack_table_init(&m->acks, 4096);
	if (ret == 0 && (ret = lc_links_init(&m->links)) != 0)
		lc_ack_table_fini(&m->acks);
	if (ret) {
		lc_pollers_fini(m->pollers);
		lc_view_fini(m);
		lc_members_fini(m);
		free(m);
		return ret;
	}
	lc_wait_init(&m->wait, cfg->wait);
	if (cfg->wait_window_ns > 0) /* LOCO_WAIT_WINDOW_US: fixed, not learnt */
		lc_wait_fix_window(&m->wait, cfg->wait_window_ns);
	lc_ack_table_hooks(&m->acks, lc_progress_reap, m, ack_in_view, &m->wait);
	lc_chan_subscribe(m);
	*out = m;
	return 0;
}

/* manager_free -- undo manager_new() (and whatever of the rest was set up). */
/*
 * manager_tomb_fini -- when the graveyard frees a finished manager: its
 * view state and lock, which the view calls on a finished manager
 * (loco_view(), loco_manager_partitioned()) still read until then.
 */
static void manager_tomb_fini(void *h)
{
	loco_manager_t *m = h;

	pthread_mutex_destroy(&m->lock);
	lc_view_fini(m);
}

static void manager_free(loco_manager_t *m)
{
	lc_dials_stop(m);
	lc_members_free(m);
	lc_graves_reap(m, 1); /* the links are gone: nothing lands any more */
	lc_chan_events_free(m);
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->epfd >= 0)
		close(m->epfd);
	if (m->evfd >= 0)
		close(m->evfd);
	fab_close(m->fab);
	lc_links_fini(&m->links); /* no link is left: lc_links_hold() finds no slot */
	lc_wait_fini(&m->wait);   /* the progress thread, its only reader, has stopped */
	lc_ack_table_fini(&m->acks);
	lc_pollers_fini(m->pollers);
	lc_mem_fini(&m->mem);
	lc_pmix_free(m->pmix);
	sodium_memzero(m->key, sizeof(m->key));
	lc_progress_fini(m);
	pthread_cond_destroy(&m->cond);
	lc_members_fini(m);
	/*
	 * Channels and objects the program left open, and the manager: dead
	 * handles now, so that calls on them after loco_fini() return -EBADF
	 * (handle.c). Their memory is not freed: a call must still read a
	 * magic word there, and the manager's fields (loco_view()).
	 */
	lc_handle_fini_manager(m, 0);
	lc_handle_bury_fn(m, manager_tomb_fini);
}

/* open_endpoints -- the fabric, the control listener, epoll and the wake fd. */
static int open_endpoints(loco_manager_t *m)
{
	char fab_listen[LC_ADDR_MAX + 1];
	struct fab_attr fattr = {0};
	struct fab_addr fa;
	int ret;

	fab_listen_addr(m->cfg.addr, fab_listen, sizeof(fab_listen));
	fattr.listen_addr = fab_listen;
	fattr.device = m->cfg.device;
	fattr.timeout_ms = m->cfg.fail_timeout_ms;
	fattr.max_inline = m->cfg.max_inline;
	/*
	 * The provider's own spin (tcp: its NIC thread's, yielding, after
	 * work) follows the wait policy: adaptive and spin spin, sleep and
	 * block leave it blocking in epoll (LOCO_TCP_SPIN_US still wins).
	 */
	fattr.spin_us = m->cfg.wait == LOCO_WAIT_SPIN || m->cfg.wait == LOCO_WAIT_ADAPTIVE
	                    ? FAB_SPIN_AUTO
	                    : FAB_SPIN_NONE;
	/*
	 * Not under adaptive: a landing that must wake someone costs its
	 * writer a system call, and adaptive's waiters sleep in the fabric
	 * where they can (shm, 4 nodes on 2 cores, barrier: 26-106 us a
	 * round with it, 5.5-6.2 us without).
	 */
	if (m->cfg.wait == LOCO_WAIT_BLOCK) {
		/* remote WRITEs and atomics wake blocked waiters where the provider can tell */
		fattr.landed = landed_fn;
		fattr.landed_arg = m;
	}
	ret = fab_open(m->cfg.fabric, &fattr, &m->fab);
	if (ret)
		return ret;
	lc_memlock_check(fab_uses_device(m->fab)); /* warns only when a verbs device pins memory */
	if ((lc_wait_policy(&m->wait) != LOCO_WAIT_BLOCK || fab_block_drives(m->fab)) &&
	    fab_progress(m->fab, 0) != -EOPNOTSUPP) {
		/* a software fabric: waiters do its work (block leaves it to its thread, but on tcp) */
		lc_wait_set_drive(&m->wait, drive_fn, m);
	}
	ret = fab_get_addr(m->fab, &fa);
	if (ret == 0)
		ret = fab_addr_format(&fa, m->fab_addr, sizeof(m->fab_addr));
	if (ret)
		return ret;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->epfd < 0 || m->evfd < 0)
		return -errno;
	ret = lc_member_listen(m, m->cfg.addr);
	if (ret == 0)
		ret = epoll_add(m, m->evfd, &m->evfd);
	if (ret == 0)
		ret = epoll_add(m, fab_wait_fd(m->fab), m->fab);
	if (ret == 0)
		lc_progress_fab_watched(m);
	if (ret == 0)
		ret = epoll_add(m, m->lfd, &m->lfd);
	return ret;
}

/*
 * join_contact -- have the progress thread connect to the contact @addr
 * (one try) and wait until a committed view has us, or the attempt
 * failed, until @deadline. Returns 0 (a member), the handshake's error,
 * -EAGAIN (retry: e.g. our id's old incarnation is not confirmed gone).
 */
static int join_contact(loco_manager_t *m, const char *addr, uint64_t deadline)
{
	struct lc_member_info contact = {0};
	int done = 0, ret = -ETIMEDOUT;

	snprintf(contact.ctrl_addr, sizeof(contact.ctrl_addr), "%s", addr);
	pthread_mutex_lock(&m->lock);
	lc_dial_join_begin(m);
	lc_dial_ctrl(m, &contact, 1);
	pthread_mutex_unlock(&m->lock);
	/* the handshake is bounded by the progress thread's handshake timeout */
	while (!done && lc_now_ns() < deadline + 3000000000ull) {
		usleep(1000);
		pthread_mutex_lock(&m->lock);
		done = lc_dial_join_result(m, &ret);
		pthread_mutex_unlock(&m->lock);
	}
	return done ? ret : -ETIMEDOUT;
}

/*
 * join_any -- try each of @contacts in turn until one admits us or the join timeout passes. Our
 * own address is no contact: joining through it would meet ourselves ("node id in use").
 */
static int join_any(loco_manager_t *m, const char *contacts, uint64_t deadline)
{
	int ret = -ETIMEDOUT, delay_ms = 10;

	while (lc_now_ns() < deadline) {
		const char *p = contacts;
		int tried = 0;

		while (*p != '\0') {
			size_t len = strcspn(p, ",");
			char one[LC_ADDR_MAX + 1];

			snprintf(one, sizeof(one), "%.*s",
			         (int)(len < LC_ADDR_MAX ? len : LC_ADDR_MAX), p);
			p += len + (p[len] == ',');
			if (strcmp(one, m->ctrl_addr) == 0)
				continue;
			tried++;
			ret = join_contact(m, one, deadline);
			if (ret == -EEXIST)
				lc_log_err(
				    "manager: node id %u is in use by a live member: refused",
				    m->node_id);
			if (ret == 0 || ret == -LOCO_EAUTH || ret == -EEXIST || ret == -EPROTO ||
			    ret == -ESTALE || ret == -EPROTONOSUPPORT || ret == -ENOMEM)
				return ret;
		}
		if (tried == 0) {
			lc_log_err("manager: LOCO_JOIN (%s) names no member but this node (%s)",
			           contacts, m->ctrl_addr);
			return -EINVAL;
		}
		usleep((useconds_t)delay_ms * 1000);
		delay_ms = delay_ms < 200 ? delay_ms * 2 : 200;
	}
	lc_log_err("manager: no member answered at %s within %u ms", contacts,
	           m->cfg.join_timeout_ms);
	pthread_mutex_lock(&m->lock);
	lc_view_late_hint(m, "joining the cluster");
	pthread_mutex_unlock(&m->lock);
	return -ETIMEDOUT;
}

/* join_cluster -- through @contacts; then wait (bounded) until every member of its list is up. */
static int join_cluster(loco_manager_t *m, const char *contacts)
{
	uint64_t deadline = lc_now_ns() + (uint64_t)m->cfg.join_timeout_ms * 1000000ull;
	struct lc_member_info *list = calloc(LC_MAX_MEMBERS, sizeof(*list));
	uint32_t n;
	int ret;

	if (list == NULL)
		return -ENOMEM;
	ret = join_any(m, contacts, deadline);
	if (ret) {
		free(list);
		return ret;
	}
	/*
	 * The progress thread connects to the members with higher ids; lower
	 * ones come to us. The members are those of the view installed now,
	 * read again each time: one that left meanwhile (another joiner that
	 * came and went) is not waited for until the join timeout.
	 */
	for (;;) {
		uint32_t missing = 0;

		pthread_mutex_lock(&m->lock);
		n = lc_ms_members(m->ms, list, LC_MAX_MEMBERS);
		for (uint32_t i = 0; i < n; i++) {
			struct lc_member *mb = lc_member_find(m, list[i].node);

			if (list[i].node != m->node_id && (mb == NULL || !mb->up))
				missing++;
		}
		pthread_mutex_unlock(&m->lock);
		if (missing == 0)
			break;
		if (lc_now_ns() >= deadline) {
			lc_log_warn("manager: joined, but %u member(s) did not connect yet",
			            missing);
			break;
		}
		usleep(2000);
	}
	free(list);
	return 0;
}

/*
 * The managers alive in this process (the only process-wide state): one
 * manager per process, since a second one would fight the first for the
 * node's identity, listener and memory; LOCO_MANY_MANAGERS=1 lifts it
 * for tests that run several nodes in one process.
 */
static unsigned lc_managers;

/* managers_enter -- count a new manager, or -EALREADY when one is alive and that is refused. */
static int managers_enter(void)
{
	const char *many = getenv("LOCO_MANY_MANAGERS");
	unsigned none = 0;

	if (many != NULL && strcmp(many, "1") == 0) {
		__atomic_add_fetch(&lc_managers, 1, __ATOMIC_ACQ_REL);
		return 0;
	}
	if (__atomic_compare_exchange_n(&lc_managers, &none, 1, 0, __ATOMIC_ACQ_REL,
	                                __ATOMIC_ACQUIRE))
		return 0;
	lc_log_err("manager: one manager per process: a manager is already running in this "
	           "process (loco_fini() it first; LOCO_MANY_MANAGERS=1 allows more, for tests)");
	return -EALREADY;
}

static void managers_leave(void)
{
	__atomic_sub_fetch(&lc_managers, 1, __ATOMIC_ACQ_REL);
}

static int init(const loco_config_t *cfg, loco_manager_t **out);

int loco_init(const loco_config_t *cfg, loco_manager_t **out)
{
	loco_manager_t *m;
	int ret;

	if (out == NULL)
		return -EINVAL;
	ret = managers_enter();
	if (ret)
		return ret;
	ret = init(cfg, &m);
	if (ret) {
		managers_leave();
		return ret;
	}
	*out = m;
	return 0;
}

/* init -- loco_init() once counted: a manager, or an error. */
static int init(const loco_config_t *cfg, loco_manager_t **out)
{
	struct lc_pmix *pmix;
	struct lc_config c;
	loco_manager_t *m;
	int ret;

	if (sodium_init() < 0) {
		lc_log_err("manager: libsodium failed to initialise");
		return -ENOSYS;
	}
	ret = lc_config_read(cfg, &c);
	if (ret == 0)
		ret = lc_pmix_start(cfg, &c, &pmix); /* started by mpirun or srun: pmix_boot.h */
	if (ret)
		return ret;
	if (strlen(c.fabric) > LC_FABRIC_MAX || strlen(c.addr) > LC_ADDR_MAX) {
		lc_pmix_free(pmix);
		return -EINVAL;
	}
	ret = manager_new(&c, &m);
	if (ret) {
		lc_pmix_free(pmix);
		return ret;
	}
	m->pmix = pmix;
	ret = open_endpoints(m);
	if (ret)
		goto err_free;
	lc_view_self(m); /* the machine's own entry in views: our addresses */
	if (pmix != NULL) {
		/* our address to the job, the secret and whom to join from it */
		ret = lc_pmix_exchange(pmix, m->ctrl_addr, &m->cfg);
		if (ret)
			goto err_free;
		derive_key(m);
		lc_pmix_wipe_secret(pmix);
		m->cfg.secret = NULL; /* not kept (m->key is) */
		c = m->cfg;
	}
	ret = lc_dials_start(m);
	if (ret)
		goto err_free;
	if (c.join == NULL)
		lc_view_start_alone(m); /* before anyone can reach us: a joiner finds view 1 */
	ret = lc_progress_start(m);
	if (ret)
		goto err_free;
	lc_self_link(m);
	lc_log_info("manager: node %u (incarnation %llx) control %s fabric %s %s", m->node_id,
	            (unsigned long long)m->inc, m->ctrl_addr, m->fabric, m->fab_addr);
	if (c.join != NULL) {
		ret = join_cluster(m, c.join);
		if (ret)
			goto err_stop;
	}
	*out = m;
	return 0;

err_stop:
	lc_progress_stop(m);
err_free:
	manager_free(m);
	return ret;
}

void loco_fini(loco_manager_t *m)
{
	const char *obj = NULL, *chan = NULL;
	uint64_t deadline;
	unsigned nobj;

	if (m == NULL)
		return;
	if (lc_handle_ok(m)) {
		lc_log_err("misuse: loco_fini() of a manager finished already: ignored");
		return;
	}
	if (lc_chan_any(m))
		lc_log_warn("manager: loco_fini with channels still open");
	/*
	 * Tell everyone: a graceful leave, not a failure. The next view drops
	 * us, and it needs a majority of the current one, which may count on
	 * us: we take part until it is installed (bounded).
	 */
	lc_members_leave(m);
	deadline = lc_now_ns() + LC_IO_TIMEOUT_MS * 1000000ull;
	for (int left = 0; !left; usleep(1000)) {
		pthread_mutex_lock(&m->lock);
		left = lc_ms_left(m->ms);
		pthread_mutex_unlock(&m->lock);
		if (!left && lc_now_ns() >= deadline) {
			lc_log_warn("manager: leaving without a view that drops node %u: none came "
			            "within %u ms",
			            (unsigned)m->node_id, (unsigned)LC_IO_TIMEOUT_MS);
			break;
		}
	}
	while (!lc_members_sent(m) && lc_now_ns() < deadline + LC_IO_TIMEOUT_MS * 1000000ull)
		usleep(1000);
	lc_progress_stop(m);
	pthread_mutex_lock(&m->lock);
	nobj = lc_chan_open_objects(m, &obj, &chan);
	pthread_mutex_unlock(&m->lock);
	if (nobj > 0) {
		/*
		 * An object may run threads of its own (an rpc endpoint's
		 * servers, a map's) on the fabric, its regions and the wait
		 * state: freeing them under it would crash it. Only the object
		 * can stop them, so everything stays allocated: the handles die
		 * (calls on them return -EBADF) and the manager is leaked.
		 */
		lc_log_err("misuse: loco_fini() with %u object(s) still open (the first: '%s' in "
		           "channel '%s'): destroy objects and channels first; the manager's "
		           "fabric and memory are kept for them, never freed",
		           nobj, obj, chan);
		lc_handle_fini_manager(m, 1);
		lc_handle_kill(m);
	} else {
		manager_free(m);
	}
	managers_leave();
}

/* the accessors that cannot return an error give 0 or NULL for NULL or a finished manager */
uint32_t loco_node_id(const loco_manager_t *m)
{
	return lc_handle_ok(m) == 0 ? m->node_id : 0;
}

const char *loco_addr(const loco_manager_t *m)
{
	return lc_handle_ok(m) == 0 ? m->ctrl_addr : NULL;
}

uint32_t loco_job_size(const loco_manager_t *m)
{
	return lc_handle_ok(m) == 0 ? m->cfg.nodes : 0;
}

uint64_t loco_incarnation(const loco_manager_t *m)
{
	return lc_handle_ok(m) == 0 ? m->inc : 0;
}

int loco_members(loco_manager_t *m, uint32_t *ids, size_t max)
{
	uint32_t all[LC_MAX_NODES + 1];
	size_t n = 0;
	int ret = lc_handle_ok(m);

	if (ret)
		return ret;
	if (ids == NULL && max > 0)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	all[n++] = m->node_id;
	for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL && n <= LC_MAX_NODES;
	     mb = mb->next)
		if (mb->up)
			all[n++] = mb->info.node;
	pthread_mutex_unlock(&m->lock);
	lc_sort_u32(all, n);
	if (n > 0 && max > 0) /* ids may be NULL with max 0: counting only */
		memcpy(ids, all, (n < max ? n : max) * sizeof(ids[0]));
	return (int)n;
}

int loco_member_fabric(loco_manager_t *m, uint32_t node, const char **name)
{
	int ret = lc_handle_ok(m);

	if (ret)
		return ret;
	if (name == NULL)
		return -EINVAL;
	ret = -ENOENT;
	pthread_mutex_lock(&m->lock);
	for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL; mb = mb->next)
		if (mb->info.node == node && mb->up && mb->link != NULL) {
			*name = mb->link->fab->ops->name; /* a provider's: static */
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

int loco_member_incarnation(loco_manager_t *m, uint32_t node, uint64_t *inc)
{
	uint64_t v;
	int ret = lc_handle_ok(m);

	if (ret)
		return ret;
	if (inc == NULL)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	v = lc_ms_inc(m->ms, node);
	pthread_mutex_unlock(&m->lock);
	if (v == 0)
		return -ENOENT;
	*inc = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* ack keys: the public wrappers                                      */

int loco_ack_key_create(loco_manager_t *m, loco_ack_key_t **out)
{
	return loco_ack_key_create_cfg(m, NULL, out);
}

void loco_ack_key_cfg_default(loco_ack_key_cfg_t *cfg)
{
	if (cfg != NULL)
		*cfg = (loco_ack_key_cfg_t){.flags = 0};
}

/* the name before loco 0.11: programs built against loco 0.4-0.10 call it */
int loco_ack_key_create_flags(loco_manager_t *m, unsigned flags, loco_ack_key_t **out)
{
	loco_ack_key_cfg_t cfg = {.flags = flags};

	return loco_ack_key_create_cfg(m, &cfg, out);
}

int loco_ack_key_create_cfg(loco_manager_t *m, const loco_ack_key_cfg_t *cfg, loco_ack_key_t **out)
{
	unsigned flags = cfg != NULL ? cfg->flags : 0;
	loco_ack_key_t *key;
	int ret = lc_handle_ok(m);

	if (ret)
		return ret;
	if (out == NULL || (flags & ~(LOCO_ACK_IGNORE_LEFT | LOCO_ACK_LAZY)) != 0)
		return -EINVAL;
	ret = lc_ack_key_new(&m->acks, m, &key);
	if (ret)
		return ret;
	key->flags = flags; /* before any operation is attached: no completion reads it */
	*out = key;
	return 0;
}

int loco_ack_failures(const loco_ack_key_t *key, struct loco_ack_failure *out, size_t max,
                      size_t *dropped)
{
	int ret = lc_handle_ok(key);

	if (ret)
		return ret;
	if (out == NULL && max > 0)
		return -EINVAL;
	return lc_ack_failures(key, out, max, dropped);
}

void loco_ack_key_destroy(loco_ack_key_t *key)
{
	if (key == NULL)
		return;
	if (lc_handle_ok(key)) {
		lc_log_err("misuse: loco_ack_key_destroy() of a key destroyed already (or of a "
		           "finished manager's): ignored");
		return;
	}
	/* every attached operation completes within the fabric's dead-peer bound */
	while (lc_ack_wait(key, 1000000000ll) == LC_ACK_BUSY)
		lc_log_warn("manager: ack key destroy waits for %zu operation(s)",
		            loco_ack_outstanding(key));
	lc_ack_key_free(key);
}

int loco_ack_wait(loco_ack_key_t *key, int64_t timeout_ns)
{
	loco_manager_t *m;
	int ret = lc_handle_ok(key), block;

	if (ret)
		return ret;
	m = key->manager;
	if (timeout_ns == 0) {
		/*
		 * Only a test: reap once ourselves (never blocking), but do not
		 * count as a waiter -- a loop of tests would keep the progress
		 * thread from arming the completion queue (1 ms ticks, not sleep).
		 */
		ret = lc_ack_wait(key, 0); /* idle: one look at the slots, no reap */
		if (ret != LC_ACK_BUSY)
			return ret;
		lc_progress_reap(m);
		ret = lc_ack_wait(key, 0);
		return ret == LC_ACK_BUSY ? -ETIMEDOUT : ret;
	}
	if (loco_manager_partitioned(m))
		return -LOCO_EPARTITION;
	/* nothing in flight: no waiter to count, no clock (one look at the slots) */
	ret = lc_ack_wait(key, 0);
	if (ret != LC_ACK_BUSY)
		return ret;
	/*
	 * A waiter that reaps itself keeps the progress thread from arming
	 * the completion queue (it looks every millisecond instead). Under
	 * the block policy the waiter sleeps on the completions instead: the
	 * progress thread arms the queue, reaps, and signals it.
	 */
	block = lc_wait_policy(&m->wait) == LOCO_WAIT_BLOCK;
	if (!block)
		lc_progress_waiter_enter(m);
	/*
	 * In slices, so that a partition ends the wait within the failure
	 * bound. A slice that ends with operations outstanding says
	 * LC_ACK_BUSY: an operation's own -ETIMEDOUT (its peer stopped
	 * answering) ends the wait with that error. (Both were -ETIMEDOUT: the
	 * error, cleared by the slice that returned it, was taken for "not
	 * yet", and the next slice found the key empty and returned 0.)
	 */
	for (int64_t left = timeout_ns;;) {
		int64_t slice = left < 0 || left > 50000000 ? 50000000 : left;

		ret = lc_ack_wait(key, slice);
		if (ret != LC_ACK_BUSY)
			break;
		if (left >= 0 && (left -= slice) <= 0) {
			/* one last look: emptied since the slice's last test, the key's result */
			lc_progress_reap(m);
			ret = lc_ack_wait(key, 0);
			if (ret == LC_ACK_BUSY)
				ret = -ETIMEDOUT;
			break;
		}
		if (loco_manager_partitioned(m)) {
			ret = -LOCO_EPARTITION;
			break;
		}
	}
	if (!block)
		lc_progress_waiter_leave(m);
	return ret;
}

size_t loco_ack_outstanding(const loco_ack_key_t *key)
{
	return lc_handle_ok(key) == 0 ? lc_ack_outstanding(key) : 0;
}

int loco_poller_add(loco_manager_t *m, int (*fn)(void *arg), void *arg, int64_t period_ns,
                    loco_poller_t **out)
{
	int ret = lc_handle_ok(m);

	return ret ? ret : lc_pollers_add(m->pollers, m, fn, arg, period_ns, out);
}
