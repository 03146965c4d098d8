/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * misuse.c -- handles used after they are gone (Step 14): a destroyed
 * object, channel, ack key or poller used again, any call after
 * loco_fini(), double destroys and NULL handles. Each case runs in its
 * own process: "misuse" forks one child per case and gives it 10 s;
 * "misuse N" runs case N in this process (to debug one).
 *
 * A case passes when the call returns what loco(7) promises (-EBADF for
 * a gone handle, -EINVAL for NULL; 0/NULL from the accessors that cannot
 * return an error; a void call returns), or when the process aborts with
 * a message naming the misuse ("misuse"). A signal, a hang or another
 * return value fails it. One node alone, on tcp.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/atomic_var.h>
#include <loco/barrier.h>
#include <loco/lock.h>
#include <loco/map.h>
#include <loco/owned_var.h>
#include <loco/ralloc.h>
#include <loco/reduce.h>
#include <loco/rpc.h>
#include <loco/rpipe.h>
#include <loco/shared_region.h>
#include <loco/sst.h>

#define CASE_TIMEOUT_S 10

/* ASan reports the read of freed memory that graveyard-evicted makes on purpose */
#if defined(__SANITIZE_ADDRESS__)
#define MISUSE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MISUSE_ASAN 1
#endif
#endif
#define NS 1000000000ll

/* what a case's misused call must give */
enum expect {
	EBADF_RET,  /* returns -EBADF */
	EINVAL_RET, /* NULL handle: returns -EINVAL, as before */
	SURVIVE,    /* a call with no error to return (void, an accessor): it returns */
};

static loco_manager_t *M;
static loco_channel_t *C;

static void die(const char *what, int ret)
{
	fprintf(stderr, "misuse: setup failed: %s: %s\n", what, loco_strerror(ret));
	exit(2);
}

#define OK(call)                             \
	do {                                 \
		int ok_ret_ = (call);        \
		if (ok_ret_ < 0)             \
			die(#call, ok_ret_); \
	} while (0)

/* mgr -- a manager alone on tcp; chan -- and a joined one-node channel "c" */
static void mgr(void)
{
	OK(loco_init(NULL, &M));
}

static void chan(void)
{
	mgr();
	OK(loco_channel_create(M, NULL, "c", 1, &C));
}

static void joined(void)
{
	OK(loco_channel_join(C, 5 * NS));
}

static int poll_fn(void *arg)
{
	(void)arg;
	return LOCO_POLLER_IDLE;
}

static int pred_fn(loco_sst_t *sst, void *arg)
{
	(void)sst;
	(void)arg;
	return 0;
}

static void trig_fn(loco_sst_t *sst, void *arg)
{
	(void)sst;
	(void)arg;
}

static int rpc_fn(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t ret_cap, size_t *ret_len)
{
	(void)arg;
	(void)msg;
	(void)ret;
	(void)ret_cap;
	*ret_len = 0;
	return 0;
}

/* ---- the manager after loco_fini() ------------------------------- */

static int m_fini_twice(void)
{
	mgr();
	loco_fini(M);
	loco_fini(M);
	return 0;
}

static int m_node_id(void)
{
	mgr();
	loco_fini(M);
	return (int)loco_manager_node_id(M);
}

static int m_addr(void)
{
	mgr();
	loco_fini(M);
	return loco_manager_addr(M) == NULL ? 0 : 1;
}

static int m_incarnation(void)
{
	mgr();
	loco_fini(M);
	return (int)loco_manager_incarnation(M);
}

static int m_members(void)
{
	uint32_t ids[8];

	mgr();
	loco_fini(M);
	return loco_manager_members(M, ids, 8);
}

static int m_member_fabric(void)
{
	const char *name;

	mgr();
	loco_fini(M);
	return loco_manager_member_fabric(M, 2, &name);
}

static int m_member_inc(void)
{
	uint64_t inc;

	mgr();
	loco_fini(M);
	return loco_manager_member_incarnation(M, 1, &inc);
}

static int m_view(void)
{
	mgr();
	loco_fini(M);
	return (int)loco_manager_view(M);
}

static int m_partitioned(void)
{
	mgr();
	loco_fini(M);
	return loco_manager_partitioned(M);
}

static int m_event_fn(void)
{
	mgr();
	loco_fini(M);
	return loco_manager_set_event_fn(M, NULL, NULL);
}

static int m_channel_create(void)
{
	loco_channel_t *ch;

	mgr();
	loco_fini(M);
	return loco_channel_create(M, NULL, "late", 1, &ch);
}

static int m_ack_create(void)
{
	loco_ack_key_t *k;

	mgr();
	loco_fini(M);
	return loco_ack_key_create(M, &k);
}

static int m_poller_add(void)
{
	loco_poller_t *p;

	mgr();
	loco_fini(M);
	return loco_poller_add(M, poll_fn, NULL, 0, &p);
}

static int m_waiter(void)
{
	loco_waiter_t w;

	mgr();
	loco_fini(M);
	loco_waiter_init(&w, M);
	loco_waiter_pause(&w);
	loco_waiter_wake(M);
	return 0;
}

/* ---- channels --------------------------------------------------- */

static int c_destroy_twice(void)
{
	chan();
	OK(loco_channel_destroy(C));
	return loco_channel_destroy(C);
}

static int c_join_after_destroy(void)
{
	chan();
	OK(loco_channel_destroy(C));
	return loco_channel_join(C, NS);
}

static int c_fence_after_destroy(void)
{
	chan();
	joined();
	OK(loco_channel_destroy(C));
	return loco_channel_fence(C);
}

static int c_peers_after_destroy(void)
{
	uint32_t ids[4];

	chan();
	joined();
	OK(loco_channel_destroy(C));
	return loco_channel_peers(C, ids, 4);
}

static int c_name_after_destroy(void)
{
	chan();
	OK(loco_channel_destroy(C));
	return loco_channel_name(C) == NULL ? 0 : 1;
}

static int c_partitioned_after_destroy(void)
{
	chan();
	OK(loco_channel_destroy(C));
	return loco_channel_partitioned(C);
}

static int c_child_of_destroyed(void)
{
	loco_channel_t *ch;

	chan();
	OK(loco_channel_destroy(C));
	return loco_channel_create(M, C, "child", 1, &ch);
}

static int c_object_in_destroyed(void)
{
	loco_object_t *o;

	chan();
	OK(loco_channel_destroy(C));
	return loco_object_create(C, "o", NULL, NULL, &o);
}

static int c_barrier_in_destroyed(void)
{
	loco_barrier_t *b;

	chan();
	joined();
	OK(loco_channel_destroy(C));
	return loco_barrier_create(C, "b", &b);
}

static int c_join_after_fini(void)
{
	chan();
	loco_fini(M); /* the channel left open */
	return loco_channel_join(C, NS);
}

static int c_destroy_after_fini(void)
{
	chan();
	joined();
	loco_fini(M);
	return loco_channel_destroy(C);
}

/* ---- generic objects (the object-author API) --------------------- */

static loco_object_t *obj(void)
{
	loco_object_t *o;

	chan();
	OK(loco_object_create(C, "o", NULL, NULL, &o));
	joined();
	loco_object_destroy(o);
	return o;
}

static int o_status(void)
{
	return loco_object_status(obj());
}

static int o_agree(void)
{
	return loco_object_agree(obj(), "k", 1);
}

static int o_region(void)
{
	loco_region_t *r;

	return loco_region_create(obj(), "r", 64, LOCO_ACCESS_WRITE, &r);
}

static int o_sync(void)
{
	return loco_object_sync(obj(), NS);
}

static int o_send(void)
{
	return loco_object_send(obj(), 2, "x", 1);
}

static int o_on_msg(void)
{
	return loco_object_on_msg(obj(), NULL, NULL);
}

static int o_destroy_twice(void)
{
	loco_object_destroy(obj());
	return 0;
}

/* a handle from a destroyed channel: object and channel gone, the object used */
static int o_agree_channel_gone(void)
{
	loco_object_t *o = obj();

	OK(loco_channel_destroy(C));
	C = NULL;
	return loco_object_agree(o, "k", 1);
}

static int o_status_after_fini(void)
{
	loco_object_t *o;

	chan();
	OK(loco_object_create(C, "o", NULL, NULL, &o));
	loco_fini(M); /* object and channel left open */
	return loco_object_status(o);
}

/* ---- ack keys and pollers -------------------------------------- */

static int a_wait_after_destroy(void)
{
	loco_ack_key_t *k;

	mgr();
	OK(loco_ack_key_create(M, &k));
	loco_ack_key_destroy(k);
	return loco_ack_wait(k, NS);
}

static int a_destroy_twice(void)
{
	loco_ack_key_t *k;

	mgr();
	OK(loco_ack_key_create(M, &k));
	loco_ack_key_destroy(k);
	loco_ack_key_destroy(k);
	return 0;
}

static int a_wait_after_fini(void)
{
	loco_ack_key_t *k;

	mgr();
	OK(loco_ack_key_create(M, &k));
	loco_ack_key_destroy(k);
	loco_fini(M);
	return loco_ack_wait(k, NS);
}

static int p_remove_twice(void)
{
	loco_poller_t *p;

	mgr();
	OK(loco_poller_add(M, poll_fn, NULL, 0, &p));
	OK(loco_poller_remove(p));
	return loco_poller_remove(p);
}

/* ---- stock objects: destroyed, then used ------------------------- */

static loco_atomic_var_t *av(void)
{
	loco_atomic_var_t *v;

	chan();
	OK(loco_atomic_var_create(C, "av", 1, &v));
	joined();
	loco_atomic_var_destroy(v);
	return v;
}

static int av_read(void)
{
	uint64_t x;

	return loco_atomic_var_read(av(), &x, NS);
}

static int av_faa(void)
{
	uint64_t x;

	return loco_atomic_var_faa(av(), 1, &x, NS);
}

static int av_destroy_twice(void)
{
	loco_atomic_var_destroy(av());
	return 0;
}

static loco_owned_var_t *ov(void)
{
	loco_owned_var_t *v;

	chan();
	OK(loco_owned_var_create(C, "ov", 1, 8, &v));
	joined();
	loco_owned_var_destroy(v);
	return v;
}

static int ov_store(void)
{
	uint64_t x = 1;

	return loco_owned_var_store(ov(), &x);
}

static int ov_load(void)
{
	uint64_t x;

	return loco_owned_var_load(ov(), &x);
}

static int ov_push(void)
{
	return loco_owned_var_push_broadcast(ov(), NULL);
}

static int ov_destroy_twice(void)
{
	loco_owned_var_destroy(ov());
	return 0;
}

static loco_sst_t *sst(void)
{
	loco_sst_t *s;

	chan();
	OK(loco_sst_create(C, "sst", 8, 4, &s));
	joined();
	loco_sst_destroy(s);
	return s;
}

static int sst_store(void)
{
	uint64_t x = 1;

	return loco_sst_store_mine(sst(), &x);
}

static int sst_read(void)
{
	uint64_t x;

	return loco_sst_read(sst(), 1, &x);
}

static int sst_push(void)
{
	return loco_sst_push_broadcast(sst(), NULL);
}

static int sst_rows(void)
{
	uint32_t ids[4];

	return loco_sst_rows(sst(), ids, 4);
}

static int sst_pred_remove_twice(void)
{
	loco_sst_predicate_t *p;
	loco_sst_t *s;

	chan();
	OK(loco_sst_create(C, "sst", 8, 4, &s));
	joined();
	OK(loco_sst_predicate_add(s, pred_fn, trig_fn, NULL, 0, &p));
	OK(loco_sst_predicate_remove(p));
	return loco_sst_predicate_remove(p);
}

static loco_barrier_t *bar(void)
{
	loco_barrier_t *b;

	chan();
	OK(loco_barrier_create(C, "b", &b));
	joined();
	loco_barrier_destroy(b);
	return b;
}

static int bar_wait(void)
{
	return loco_barrier_wait(bar(), NS);
}

static int bar_destroy_twice(void)
{
	loco_barrier_destroy(bar());
	return 0;
}

static int bar_wait_after_fini(void)
{
	loco_barrier_t *b;

	chan();
	OK(loco_barrier_create(C, "b", &b));
	joined();
	loco_fini(M); /* everything left open */
	return loco_barrier_wait(b, NS);
}

static loco_lock_t *lk(void)
{
	loco_lock_t *l;

	chan();
	OK(loco_lock_create(C, "lk", 1, &l));
	joined();
	loco_lock_destroy(l);
	return l;
}

static int lk_acquire(void)
{
	return loco_lock_acquire(lk(), NS);
}

static int lk_try(void)
{
	return loco_lock_try_acquire(lk());
}

static int lk_release(void)
{
	return loco_lock_release(lk());
}

static int lk_destroy_twice(void)
{
	loco_lock_destroy(lk());
	return 0;
}

static int lk_acquire_after_fini(void)
{
	loco_lock_t *l;

	chan();
	OK(loco_lock_create(C, "lk", 1, &l));
	joined();
	loco_fini(M);
	return loco_lock_acquire(l, NS);
}

static loco_rpipe_t *rp(void)
{
	loco_rpipe_t *p;

	chan();
	OK(loco_rpipe_create(C, "p", 1, 2, LOCO_RPIPE_RING_MIN, &p));
	joined();
	loco_rpipe_destroy(p);
	return p;
}

static int rp_write(void)
{
	return loco_rpipe_write(rp(), "x", 1, NS);
}

static int rp_reserve(void)
{
	void *ptr;

	return loco_rpipe_reserve(rp(), 8, &ptr, NS);
}

static int rp_read(void)
{
	char buf[8];
	size_t len;

	return loco_rpipe_read(rp(), buf, sizeof(buf), &len, NS);
}

static loco_rpc_ep_t *rpc(void)
{
	loco_rpc_cfg_t cfg;
	loco_rpc_ep_t *ep;

	chan();
	loco_rpc_cfg_default(&cfg, NULL, 0);
	OK(loco_rpc_create(C, "rpc", &cfg, &ep));
	joined();
	loco_rpc_destroy(ep);
	return ep;
}

static int rpc_register(void)
{
	return loco_rpc_register(rpc(), "f", rpc_fn, NULL, NULL);
}

static int rpc_call(void)
{
	return loco_rpc_call(rpc(), 1, loco_rpc_id("f"), "x", 1, NS);
}

static int rpc_progress(void)
{
	return loco_rpc_progress(rpc(), 8);
}

static int rpc_destroy_twice(void)
{
	loco_rpc_destroy(rpc());
	return 0;
}

static loco_ralloc_t *ra(void)
{
	loco_ralloc_cfg_t cfg = {.heap_len = 1 << 20, .numa_node = -1};
	loco_ralloc_t *r;

	chan();
	OK(loco_ralloc_create(C, "ra", &cfg, &r));
	joined();
	loco_ralloc_destroy(r);
	return r;
}

static int ra_alloc(void)
{
	loco_rptr_t p;

	return loco_ralloc_alloc(ra(), 1, 64, &p, NS);
}

static int ra_stats(void)
{
	loco_ralloc_stats_t st;

	return loco_ralloc_stats(ra(), &st);
}

static loco_map_t *map(void)
{
	uint32_t me = 1, client = 2;
	loco_map_cfg_t cfg;
	loco_map_t *mp;

	chan();
	loco_map_cfg_default(&cfg, &me, 1); /* a map takes 2 nodes: node 2 a client, never here */
	cfg.clients = &client;
	cfg.nclients = 1;
	OK(loco_map_create(C, "map", &cfg, &mp));
	joined();
	loco_map_destroy(mp);
	return mp;
}

static int map_put(void)
{
	return loco_map_put(map(), "k", 1, "v", 1, NULL, NS);
}

static int map_get(void)
{
	char v[8];
	size_t len;

	return loco_map_get(map(), "k", 1, v, sizeof(v), &len, NULL, NS);
}

static int map_leave(void)
{
	return loco_map_leave(map(), NS);
}

static loco_reduce_t *red(void)
{
	loco_reduce_t *r;

	chan();
	OK(loco_reduce_create(C, "r", 8, LOCO_REDUCE_SUM_U64, NULL, NULL, &r));
	joined();
	loco_reduce_destroy(r);
	return r;
}

static int red_run(void)
{
	uint64_t in = 1, out;

	return loco_reduce_run(red(), &in, &out, NULL, NS);
}

static int red_destroy_twice(void)
{
	loco_reduce_destroy(red());
	return 0;
}

static int sr_write(void)
{
	loco_shared_region_t *sr;
	loco_ack_key_t *k;

	chan();
	OK(loco_shared_region_create(C, "sr", 64, LOCO_ACCESS_WRITE, &sr));
	joined();
	OK(loco_ack_key_create(M, &k));
	loco_shared_region_destroy(sr);
	return loco_shared_region_write(sr, 1, 0, 8, k);
}

static int sst_destroy_twice(void)
{
	loco_sst_destroy(sst());
	return 0;
}

/* a predicate left armed dies with its sst */
static int sst_pred_after_sst(void)
{
	loco_sst_predicate_t *p;
	loco_sst_t *s;

	chan();
	OK(loco_sst_create(C, "sst", 8, 4, &s));
	joined();
	OK(loco_sst_predicate_add(s, pred_fn, trig_fn, NULL, 0, &p));
	loco_sst_destroy(s);
	return loco_sst_predicate_remove(p);
}

static int lk_holder(void)
{
	uint32_t node;

	return loco_lock_holder(lk(), &node, NS);
}

static int rp_destroy_twice(void)
{
	loco_rpipe_destroy(rp());
	return 0;
}

static int ra_destroy_twice(void)
{
	loco_ralloc_destroy(ra());
	return 0;
}

static int map_stats(void)
{
	loco_map_stats_t st;

	loco_map_stats(map(), &st);
	return 0;
}

static int map_destroy_twice(void)
{
	loco_map_destroy(map());
	return 0;
}

static int ov_sync_after_fini(void)
{
	loco_owned_var_t *v;

	chan();
	OK(loco_owned_var_create(C, "ov", 1, 8, &v));
	joined();
	loco_fini(M);
	return loco_owned_var_sync(v, NS);
}

static int a_failures_after_destroy(void)
{
	struct loco_ack_failure f[2];
	loco_ack_key_t *k;
	size_t dropped;

	mgr();
	OK(loco_ack_key_create(M, &k));
	loco_ack_key_destroy(k);
	return loco_ack_failures(k, f, 2, &dropped);
}

static int o_channel_after_destroy(void)
{
	return loco_object_channel(obj()) == NULL ? 0 : 1;
}

/*
 * A handle destroyed longer ago than the graveyard keeps (1024 handles):
 * its memory was freed, and the check aborts naming the misuse. The
 * handles destroyed since are ack keys, bigger than a poller, so malloc
 * does not hand the poller's memory to one of them. Under ASan the read
 * of freed memory is reported instead: the case is not run there.
 */
static int graveyard_evicted(void)
{
#ifdef MISUSE_ASAN
	return -EBADF;
#else
	loco_poller_t *p;
	loco_ack_key_t *k;

	mgr();
	OK(loco_poller_add(M, poll_fn, NULL, 0, &p));
	OK(loco_poller_remove(p));
	for (int i = 0; i < 1100; i++) {
		OK(loco_ack_key_create(M, &k));
		loco_ack_key_destroy(k);
	}
	return loco_poller_remove(p);
#endif
}

/* objects with threads of their own left open across loco_fini(): then used */
static int rpc_threads_after_fini(void)
{
	struct timespec pause = {1, 0};
	loco_rpc_cfg_t cfg;
	loco_rpc_ep_t *ep;

	chan();
	loco_rpc_cfg_default(&cfg, NULL, 0);
	cfg.threads = 2;
	OK(loco_rpc_create(C, "rpc", &cfg, &ep));
	joined();
	loco_fini(M);
	nanosleep(&pause, NULL); /* its server threads run on meanwhile */
	return loco_rpc_call(ep, 1, loco_rpc_id("f"), "x", 1, NS);
}

static int map_after_fini(void)
{
	struct timespec pause = {1, 0};
	uint32_t me = 1, client = 2;
	loco_map_cfg_t cfg;
	loco_map_t *mp;

	chan();
	loco_map_cfg_default(&cfg, &me, 1);
	cfg.clients = &client;
	cfg.nclients = 1;
	OK(loco_map_create(C, "map", &cfg, &mp));
	joined();
	loco_fini(M);
	nanosleep(&pause, NULL);
	return loco_map_put(mp, "k", 1, "v", 1, NULL, NS);
}

/* an operation attached to a destroyed ack key */
static int a_write_after_destroy(void)
{
	loco_shared_region_t *sr;
	loco_ack_key_t *k;

	chan();
	OK(loco_shared_region_create(C, "sr", 64, LOCO_ACCESS_WRITE, &sr));
	joined();
	OK(loco_ack_key_create(M, &k));
	loco_ack_key_destroy(k);
	return loco_shared_region_write(sr, 1, 0, 8, k);
}

/* ---- NULL handles ---------------------------------------------- */

static int n_members(void)
{
	return loco_manager_members(NULL, NULL, 0);
}

static int n_join(void)
{
	return loco_channel_join(NULL, NS);
}

static int n_barrier(void)
{
	return loco_barrier_wait(NULL, NS);
}

static int n_lock(void)
{
	return loco_lock_acquire(NULL, NS);
}

static int n_rpipe(void)
{
	return loco_rpipe_write(NULL, "x", 1, NS);
}

static int n_map(void)
{
	return loco_map_put(NULL, "k", 1, "v", 1, NULL, NS);
}

static int n_sst(void)
{
	uint64_t x;

	return loco_sst_read(NULL, 1, &x);
}

static int n_destroys(void)
{
	loco_fini(NULL);
	loco_barrier_destroy(NULL);
	loco_map_destroy(NULL);
	loco_object_destroy(NULL);
	return 0;
}

static const struct mcase {
	const char *name;
	int (*fn)(void);
	enum expect expect;
} cases[] = {
    {"fini-twice", m_fini_twice, SURVIVE},
    {"fini-node_id", m_node_id, SURVIVE},
    {"fini-addr", m_addr, SURVIVE},
    {"fini-incarnation", m_incarnation, SURVIVE},
    {"fini-members", m_members, EBADF_RET},
    {"fini-member_fabric", m_member_fabric, EBADF_RET},
    {"fini-member_incarnation", m_member_inc, EBADF_RET},
    {"fini-view", m_view, SURVIVE},
    {"fini-partitioned", m_partitioned, SURVIVE},
    {"fini-set_event_fn", m_event_fn, EBADF_RET},
    {"fini-channel_create", m_channel_create, EBADF_RET},
    {"fini-ack_key_create", m_ack_create, EBADF_RET},
    {"fini-poller_add", m_poller_add, EBADF_RET},
    {"fini-waiter", m_waiter, SURVIVE},
    {"channel-destroy-twice", c_destroy_twice, EBADF_RET},
    {"channel-destroy-join", c_join_after_destroy, EBADF_RET},
    {"channel-destroy-fence", c_fence_after_destroy, EBADF_RET},
    {"channel-destroy-peers", c_peers_after_destroy, EBADF_RET},
    {"channel-destroy-name", c_name_after_destroy, SURVIVE},
    {"channel-destroy-partitioned", c_partitioned_after_destroy, SURVIVE},
    {"channel-destroy-child", c_child_of_destroyed, EBADF_RET},
    {"channel-destroy-object_create", c_object_in_destroyed, EBADF_RET},
    {"channel-destroy-barrier_create", c_barrier_in_destroyed, EBADF_RET},
    {"fini-channel-join", c_join_after_fini, EBADF_RET},
    {"fini-channel-destroy", c_destroy_after_fini, EBADF_RET},
    {"object-destroy-status", o_status, EBADF_RET},
    {"object-destroy-agree", o_agree, EBADF_RET},
    {"object-destroy-region_create", o_region, EBADF_RET},
    {"object-destroy-sync", o_sync, EBADF_RET},
    {"object-destroy-send", o_send, EBADF_RET},
    {"object-destroy-on_msg", o_on_msg, EBADF_RET},
    {"object-destroy-twice", o_destroy_twice, SURVIVE},
    {"object-channel-gone-agree", o_agree_channel_gone, EBADF_RET},
    {"fini-object-status", o_status_after_fini, EBADF_RET},
    {"ack-destroy-wait", a_wait_after_destroy, EBADF_RET},
    {"ack-destroy-twice", a_destroy_twice, SURVIVE},
    {"fini-ack-wait", a_wait_after_fini, EBADF_RET},
    {"poller-remove-twice", p_remove_twice, EBADF_RET},
    {"atomic_var-destroy-read", av_read, EBADF_RET},
    {"atomic_var-destroy-faa", av_faa, EBADF_RET},
    {"atomic_var-destroy-twice", av_destroy_twice, SURVIVE},
    {"owned_var-destroy-store", ov_store, EBADF_RET},
    {"owned_var-destroy-load", ov_load, EBADF_RET},
    {"owned_var-destroy-push", ov_push, EBADF_RET},
    {"owned_var-destroy-twice", ov_destroy_twice, SURVIVE},
    {"sst-destroy-store", sst_store, EBADF_RET},
    {"sst-destroy-read", sst_read, EBADF_RET},
    {"sst-destroy-push", sst_push, EBADF_RET},
    {"sst-destroy-rows", sst_rows, EBADF_RET},
    {"sst-predicate-remove-twice", sst_pred_remove_twice, EBADF_RET},
    {"barrier-destroy-wait", bar_wait, EBADF_RET},
    {"barrier-destroy-twice", bar_destroy_twice, SURVIVE},
    {"fini-barrier-wait", bar_wait_after_fini, EBADF_RET},
    {"lock-destroy-acquire", lk_acquire, EBADF_RET},
    {"lock-destroy-try_acquire", lk_try, EBADF_RET},
    {"lock-destroy-release", lk_release, EBADF_RET},
    {"lock-destroy-twice", lk_destroy_twice, SURVIVE},
    {"fini-lock-acquire", lk_acquire_after_fini, EBADF_RET},
    {"rpipe-destroy-write", rp_write, EBADF_RET},
    {"rpipe-destroy-reserve", rp_reserve, EBADF_RET},
    {"rpipe-destroy-read", rp_read, EBADF_RET},
    {"rpc-destroy-register", rpc_register, EBADF_RET},
    {"rpc-destroy-call", rpc_call, EBADF_RET},
    {"rpc-destroy-progress", rpc_progress, EBADF_RET},
    {"rpc-destroy-twice", rpc_destroy_twice, SURVIVE},
    {"ralloc-destroy-alloc", ra_alloc, EBADF_RET},
    {"ralloc-destroy-stats", ra_stats, EBADF_RET},
    {"map-destroy-put", map_put, EBADF_RET},
    {"map-destroy-get", map_get, EBADF_RET},
    {"map-destroy-leave", map_leave, EBADF_RET},
    {"reduce-destroy-run", red_run, EBADF_RET},
    {"reduce-destroy-twice", red_destroy_twice, SURVIVE},
    {"shared_region-destroy-write", sr_write, EBADF_RET},
    {"sst-destroy-twice", sst_destroy_twice, SURVIVE},
    {"sst-destroy-predicate_remove", sst_pred_after_sst, EBADF_RET},
    {"lock-destroy-holder", lk_holder, EBADF_RET},
    {"rpipe-destroy-twice", rp_destroy_twice, SURVIVE},
    {"ralloc-destroy-twice", ra_destroy_twice, SURVIVE},
    {"map-destroy-stats", map_stats, SURVIVE},
    {"map-destroy-twice", map_destroy_twice, SURVIVE},
    {"fini-owned_var-sync", ov_sync_after_fini, EBADF_RET},
    {"ack-destroy-failures", a_failures_after_destroy, EBADF_RET},
    {"object-destroy-channel", o_channel_after_destroy, SURVIVE},
    {"graveyard-evicted", graveyard_evicted, EBADF_RET},
    {"ack-destroy-write", a_write_after_destroy, EBADF_RET},
    {"fini-rpc-threads-call", rpc_threads_after_fini, EBADF_RET},
    {"fini-map-put", map_after_fini, EBADF_RET},
    {"null-members", n_members, EINVAL_RET},
    {"null-channel-join", n_join, EINVAL_RET},
    {"null-barrier-wait", n_barrier, EINVAL_RET},
    {"null-lock-acquire", n_lock, EINVAL_RET},
    {"null-rpipe-write", n_rpipe, EINVAL_RET},
    {"null-map-put", n_map, EINVAL_RET},
    {"null-sst-read", n_sst, EINVAL_RET},
    {"null-destroys", n_destroys, SURVIVE},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* run_one -- case @i in this process: exit 0 when the call gave what it must */
static int run_one(int i)
{
	const struct mcase *c = &cases[i];
	int ret = c->fn();
	int want = c->expect == EBADF_RET ? -EBADF : c->expect == EINVAL_RET ? -EINVAL : ret;

	printf("case %d %s: returned %d (%s)\n", i, c->name, ret,
	       ret <= 0 ? loco_strerror(ret) : "a value");
	fflush(stdout);
	return ret == want ? 0 : 1;
}

/* aborted_by_name -- the child's output names the misuse (an abort that explains itself) */
static int aborted_by_name(const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strstr(buf, "misuse:") != NULL && strstr(buf, "setup failed") == NULL;
}

/* run_child -- fork case @i with its output in a file under @dir; "ok", or why it failed */
static const char *run_child(int i, const char *dir, char *log, size_t loglen)
{
	struct timespec tick = {0, 20000000};
	int status, fd;
	pid_t pid;

	snprintf(log, loglen, "%s/case-%d.log", dir, i);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return "cannot open the log";
	pid = fork();
	if (pid < 0)
		return "fork failed";
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		alarm(CASE_TIMEOUT_S + 5); /* should the parent die */
		/* _exit: a case leaves objects undestroyed on purpose; no leak check at exit */
		_exit(run_one(i));
	}
	close(fd);
	for (int waited = 0;; waited++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (waited >= CASE_TIMEOUT_S * 50) {
			kill(pid, SIGKILL); /* by its pid: our own child */
			waitpid(pid, &status, 0);
			return "HANG (killed after 10 s)";
		}
		nanosleep(&tick, NULL);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status) == 0   ? "ok"
		       : WEXITSTATUS(status) == 2 ? "setup failed"
		                                  : "wrong return value";
	if (WTERMSIG(status) == SIGABRT && aborted_by_name(log))
		return "ok";
	switch (WTERMSIG(status)) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGABRT:
		return "SIGABRT (no message naming the misuse)";
	case SIGBUS:
		return "SIGBUS";
	case SIGALRM:
		return "HANG (alarm)";
	default:
		return "killed by a signal";
	}
}

/* show_log -- a failed case's output, for the test log */
static void show_log(const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	close(fd);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/loco-misuse-XXXXXX";
	char log[64];
	int failed = 0;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
	setenv("LOCO_JOIN_TIMEOUT_MS", "2000", 1);
	if (argc > 1) {
		int i = atoi(argv[1]);

		if (i < 0 || i >= NCASES) {
			fprintf(stderr, "misuse: cases are 0 .. %d\n", NCASES - 1);
			return 2;
		}
		return run_one(i);
	}
	if (mkdtemp(dir) == NULL) {
		perror("misuse: mkdtemp");
		return 1;
	}
	for (int i = 0; i < NCASES; i++) {
		const char *res = run_child(i, dir, log, sizeof(log));
		int ok = strcmp(res, "ok") == 0;

		printf("%-3d %-34s %s\n", i, cases[i].name, res);
		if (!ok) {
			failed++;
			show_log(log);
		}
		fflush(stdout);
		unlink(log);
	}
	rmdir(dir);
	printf("%d of %d misuse cases failed%s\n", failed, NCASES,
	       failed ? " (\"misuse N\" runs case N alone)" : "");
	return failed ? 1 : 0;
}
