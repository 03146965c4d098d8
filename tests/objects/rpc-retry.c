/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-retry.c -- loco_rpc_call_retry(): a full ring queues the call in the
 * library, which posts it as room comes and tells through the callback.
 *
 * loco-run -n 2. Node 2 serves "seq" (one server thread, an 8 KiB ring
 * from node 1): it counts the calls, checks they come in order, counts any
 * that carry the "never" flag, and holds the first call of each phase
 * until node 1 WRITEs the phase into its "go" word, so that the ring
 * fills. Node 1:
 *   1. CALLS calls in order, timeout -1: the ones the ring takes at once
 *      return 0, the others -EINPROGRESS; once the queue is full
 *      (-ENOBUFS) node 1 lets the handler go and retries that call as
 *      room comes. Every queued call's callback says 0, and node 2 got
 *      all CALLS, in order, each once.
 *   2. with the handler held again: a call queued with no timeout, then
 *      NEVER calls with a 1 ms timeout behind it: they end -ETIMEDOUT
 *      while the head still waits, and never reach node 2; after go, the
 *      head arrives. A plain loco_rpc_call() with timeout 0 meanwhile is
 *      -EAGAIN (it would pass the queue).
 *   3. bad arguments; then, once node 2 holds again (node 1 READs the
 *      phase it holds), the ring and the queue filled to -ENOBUFS: at
 *      destroy every queued call has ended, with 0 (room the ring gave
 *      back before the hold) or -ECANCELED (some), and nothing else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/rpc.h>

#include "scenario.h"

#define TMO   (30 * SC_NS)
#define CALLS 3000
#define NEVER 5

struct call {
	uint32_t seq;
	uint32_t phase; /* the handler holds the first call of a phase until go >= phase */
	uint32_t never; /* 1: must not arrive (its time ran out in the queue) */
	uint32_t pad[13];
};

/* node 2 */
static volatile uint64_t *go;
static uint32_t got, next_seq, out_of_order, nevers, held_phase;

static int seq(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	struct call c;

	(void)arg, (void)ret, (void)cap, (void)rl;
	if (msg->len != sizeof(c))
		return -EINVAL;
	memcpy(&c, msg->data, sizeof(c));
	if (c.phase > held_phase) { /* the first call of a phase: hold it (10 s at most) */
		held_phase = c.phase;
		__atomic_store_n(&go[1], c.phase, __ATOMIC_RELEASE); /* node 1 READs it */
		for (int i = 0; i < 10000 && __atomic_load_n(go, __ATOMIC_ACQUIRE) < c.phase; i++)
			usleep(1000);
	}
	if (c.never)
		nevers++;
	if (c.seq != next_seq)
		out_of_order++;
	next_seq = c.seq + 1;
	got++;
	return 0;
}

/* count -- node 2's counts, for node 1 */
static int count(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint32_t v[3] = {got, out_of_order, nevers};

	(void)arg, (void)msg;
	if (cap < sizeof(v))
		return -ERANGE;
	memcpy(ret, v, sizeof(v));
	*rl = sizeof(v);
	return 0;
}

/* node 1: what the callbacks said */
static uint32_t ended, ended_ok, ended_timeout, ended_canceled, ended_other;

static void done(void *arg, uint32_t node, uint32_t id, int status)
{
	(void)arg, (void)node, (void)id;
	if (status == 0)
		__atomic_add_fetch(&ended_ok, 1, __ATOMIC_RELAXED);
	else if (status == -ETIMEDOUT)
		__atomic_add_fetch(&ended_timeout, 1, __ATOMIC_RELAXED);
	else if (status == -ECANCELED)
		__atomic_add_fetch(&ended_canceled, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&ended_other, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&ended, 1, __ATOMIC_RELEASE);
}

static void let_go(loco_region_t *src, const loco_rref_t *go2, loco_ack_key_t *ack, uint64_t phase)
{
	*(uint64_t *)loco_region_ptr(src) = phase;
	SC_ASSERT_OK(loco_write(src, 0, go2, 0, 8, ack));
	SC_ASSERT_OK(loco_ack_wait(ack, TMO));
}

/* wait_ended -- until @n callbacks ran (30 s at most) */
static void wait_ended(uint32_t n, const char *what)
{
	for (int i = 0; i < 30000 && __atomic_load_n(&ended, __ATOMIC_ACQUIRE) < n; i++)
		usleep(1000);
	if (__atomic_load_n(&ended, __ATOMIC_ACQUIRE) < n)
		SC_FAIL("%s: %u of %u callbacks ran", what, ended, n);
}

/* node 1: node 2's go word, and the phase let go so far */
static loco_region_t *go_src;
static loco_ack_key_t *go_ack;
static loco_rref_t go2;
static uint64_t released;

/* held_seen -- the phase node 2 holds a call of (its go region's word 1, READ) */
static uint64_t held_seen(void)
{
	volatile uint64_t *w = loco_region_ptr(go_src);

	SC_ASSERT_OK(loco_read(go_src, 8, &go2, 8, 8, go_ack));
	SC_ASSERT_OK(loco_ack_wait(go_ack, TMO));
	return w[1];
}

/*
 * issue -- call_retry @c; on -ENOBUFS (the queue is full) let the held
 * handler go and try again as room comes (20 s at most)
 */
static int issue(loco_rpc_ep_t *ep, uint32_t hid, const struct call *c, int64_t tmo, int *full)
{
	int ret;

	for (int i = 0; i < 100000; i++) {
		ret = loco_rpc_call_retry(ep, 2, hid, c, sizeof(*c), tmo, done, NULL);
		if (ret != -ENOBUFS)
			return ret;
		*full = 1;
		if (released < c->phase) {
			let_go(go_src, &go2, go_ack, c->phase);
			released = c->phase;
		}
		usleep(200);
	}
	return ret;
}

static void node1(loco_rpc_ep_t *ep)
{
	uint32_t hid = loco_rpc_id("seq"), queued = 0, now = 0, s = 0, v[3];
	struct call c = {0};
	int full = 0, ret;

	/* 1 */
	for (; s < CALLS; s++) {
		c = (struct call){.seq = s, .phase = 1};
		ret = issue(ep, hid, &c, -1, &full);
		if (ret == 0)
			now++;
		else if (ret == -EINPROGRESS)
			queued++;
		else
			SC_FAIL("call %u: %s", s, loco_strerror(ret));
	}
	if (!full)
		SC_FAIL("the queue never filled (%u queued)", queued);
	wait_ended(queued, "phase 1");
	SC_ASSERT_EQ(ended_ok, queued);
	SC_ASSERT_OK(
	    loco_rpc_call_return(ep, 2, loco_rpc_id("count"), NULL, 0, v, sizeof(v), NULL, TMO));
	SC_ASSERT_EQ(v[0], CALLS);
	SC_ASSERT_EQ(v[1], 0);
	SC_ASSERT_EQ(v[2], 0);
	sc_log("%d calls: %u taken at once, %u queued and posted by the library, all in order",
	       CALLS, now, queued);

	/* 2: fill the ring behind a held call, queue one with no timeout, then NEVER short ones */
	ended = ended_ok = 0;
	queued = 0;
	for (ret = 0; ret != -EINPROGRESS && s < 2 * CALLS; s++) {
		c = (struct call){.seq = s, .phase = 2};
		ret = issue(ep, hid, &c, -1, &full);
		SC_ASSERT(ret == 0 || ret == -EINPROGRESS);
	}
	SC_ASSERT_EQ(ret, -EINPROGRESS);
	queued = 1;
	for (int i = 0; i < NEVER; i++) {
		struct call n = {.seq = 0xffffffffu, .phase = 2, .never = 1};

		SC_ASSERT_EQ(issue(ep, hid, &n, 1000000, &full), -EINPROGRESS);
	}
	/* a plain call would pass the queue: it waits behind it */
	SC_ASSERT_EQ(loco_rpc_call(ep, 2, hid, &c, sizeof(c), 0), -EAGAIN);
	wait_ended(NEVER, "phase 2 timeouts");
	SC_ASSERT_EQ(ended_timeout, NEVER);
	SC_ASSERT_EQ(ended_ok, 0); /* the head still waits */
	let_go(go_src, &go2, go_ack, 2);
	released = 2;
	wait_ended(NEVER + queued, "phase 2 head");
	SC_ASSERT_EQ(ended_ok, queued);
	SC_ASSERT_OK(
	    loco_rpc_call_return(ep, 2, loco_rpc_id("count"), NULL, 0, v, sizeof(v), NULL, TMO));
	SC_ASSERT_EQ(v[0], s);
	SC_ASSERT_EQ(v[1], 0);
	SC_ASSERT_EQ(v[2], 0); /* the ones that timed out never arrived */
	sc_log("%d calls timed out in the queue behind a waiting head and never arrived", NEVER);

	/* 3 */
	SC_ASSERT_EQ(loco_rpc_call_retry(ep, 2, hid, &c, sizeof(c), -1, NULL, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_rpc_call_retry(ep, 1, hid, &c, sizeof(c), -1, done, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_rpc_call_retry(ep, 2, hid, NULL, 8, -1, done, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_rpc_call_retry(ep, 2, hid, loco_region_ptr(loco_rpc_send_region(ep)),
	                                 64 * 1024, -1, done, NULL),
	             -EMSGSIZE);
	/*
	 * Queue calls that cannot be posted: once node 2 holds the phase's first
	 * call (it says so in its go region's word 1, which we READ), fill the
	 * ring and the queue until -ENOBUFS. Room the ring gave back before the
	 * hold may still let a few through (status 0); the rest end -ECANCELED
	 * in the destroy, and nothing else.
	 */
	ended = ended_ok = ended_timeout = ended_canceled = ended_other = 0;
	queued = 0;
	c = (struct call){.seq = s++, .phase = 3};
	SC_ASSERT_OK(loco_rpc_call(ep, 2, hid, &c, sizeof(c), TMO));
	for (int i = 0; i < 10000 && held_seen() < 3; i++)
		usleep(1000);
	SC_ASSERT_EQ(held_seen(), 3);
	for (ret = 0; ret != -ENOBUFS && s < 4 * CALLS; s++) {
		c = (struct call){.seq = s, .phase = 3};
		ret = loco_rpc_call_retry(ep, 2, hid, &c, sizeof(c), -1, done, NULL);
		SC_ASSERT(ret == 0 || ret == -EINPROGRESS || ret == -ENOBUFS);
		queued += ret == -EINPROGRESS;
	}
	SC_ASSERT_EQ(ret, -ENOBUFS);
	loco_rpc_destroy(ep);
	SC_ASSERT_EQ(ended, queued);
	SC_ASSERT_EQ(ended_ok + ended_canceled, queued);
	SC_ASSERT(ended_canceled > 0);
	SC_ASSERT_EQ(ended_other + ended_timeout, 0);
	let_go(go_src, &go2, go_ack, 3);
	sc_log("bad arguments refused; at destroy %u of %u queued calls end -ECANCELED (the rest "
	       "were posted first)",
	       ended_canceled, queued);
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *gor, *src;
	loco_ack_key_t *ack;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	struct sc_sync sync;
	uint32_t me;

	sc_init("rpc-retry", argc, argv, 110);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 2), SC_WAIT_MS, "members {1, 2}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rretry", 2, &ch));
	loco_rpc_cfg_default(&cfg, all, 2);
	cfg.threads = 1;
	cfg.ring_bytes = 8192;
	SC_ASSERT_OK(loco_rpc_create(ch, "r", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "seq", seq, NULL, NULL));
	SC_ASSERT_OK(loco_rpc_register(ep, "count", count, NULL, NULL));
	SC_ASSERT_OK(loco_object_create(ch, "go", NULL, NULL, &obj));
	SC_ASSERT_OK(loco_region_create(obj, "go", 64, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &gor));
	SC_ASSERT_OK(loco_region_create(obj, "src", 64, 0, &src));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	go = loco_region_ptr(gor);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	SC_ASSERT_EQ(loco_object_sync(obj, 20 * SC_NS), 1);
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "made", SC_WAIT_MS);
	if (me == 1) {
		SC_ASSERT_OK(loco_region_remote(gor, 2, &go2));
		go_src = src;
		go_ack = ack;
		node1(ep);
		ep = NULL;
	}
	sc_sync_wait(&sync, "done", 60000);
	loco_rpc_destroy(ep);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
