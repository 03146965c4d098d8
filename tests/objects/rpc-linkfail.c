/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-linkfail.c -- rpc calls go on over a data link that fails while both
 * nodes stay members: every one-way call runs once, in order, including
 * those flushed with the old link, and a caller that then only waits for
 * a reply gets it (the callee mends its ring from the caller's copy:
 * objects/rpipe_mend.c; the caller's OPEN sends that copy's reference).
 *
 * loco-run -n 2 with LOCO_TCP_FAIL_READS=LF_ROUNDS@LF_PROBE_LEN (tcp, mixed), as
 * rpipe-linkfail. Node 2 serves endpoint "rlf" with one server thread:
 * "add" (one-way: its argument must be the count of adds run so far, then
 * the count goes up) and "get" (returns the count). Node 1, each round:
 * BURST adds, a READ of LF_PROBE_LEN bytes from node 2 (it takes the link
 * down; what is queued behind it is flushed, posts just after it go to the
 * failed link), TAIL more adds, then a "get" whose reply must be the adds
 * so far, within 20 s. Then 5,000 more adds and a last "get".
 *
 * Before the mending the flushed adds were lost without an error: node 2's
 * ring waited for them for good, and the get timed out.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco/rpc.h>

#include "linkfail.h"
#include "scenario.h"

#define BURST 200u
#define TAIL  3u
#define MORE  5000u
#define TMO   (20 * SC_NS)

static uint64_t adds; /* node 2: adds run (its one server thread's) */
static int out_of_order;

static int add(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t k;

	(void)arg, (void)ret, (void)cap, (void)rl;
	if (msg->len != sizeof(k))
		return -EINVAL;
	memcpy(&k, msg->data, sizeof(k));
	if (k != adds && !out_of_order) {
		out_of_order = 1;
		sc_log("add %llu ran as the %lluth: out of order, doubled or one lost",
		       (unsigned long long)k, (unsigned long long)adds);
	}
	adds++;
	return 0;
}

static int get(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg;
	if (cap < sizeof(adds))
		return -EMSGSIZE;
	memcpy(ret, &adds, sizeof(adds));
	*rl = sizeof(adds);
	return out_of_order ? -EPROTO : 0;
}

static void add_one(loco_rpc_ep_t *ep, uint64_t k)
{
	int ret = loco_rpc_call(ep, 2, loco_rpc_id("add"), &k, sizeof(k), TMO);

	if (ret)
		SC_FAIL("add %llu: %s", (unsigned long long)k, loco_strerror(ret));
}

static void check_count(loco_rpc_ep_t *ep, uint64_t k, const char *when)
{
	uint64_t got = 0;
	int ret =
	    loco_rpc_call_return(ep, 2, loco_rpc_id("get"), NULL, 0, &got, sizeof(got), NULL, TMO);

	if (ret)
		SC_FAIL("%s: get: %s (node 2 never ran the adds lost with the link?)", when,
		        loco_strerror(ret));
	if (got != k)
		SC_FAIL("%s: node 2 ran %llu adds of %llu", when, (unsigned long long)got,
		        (unsigned long long)k);
}

static void caller(loco_manager_t *m, loco_rpc_ep_t *ep, loco_region_t *probe)
{
	loco_ack_key_t *ack;
	loco_rref_t rr;
	uint64_t k = 0;
	char when[32];

	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	lf_probe_remote(probe, &rr);
	check_count(ep, 0, "start"); /* the ring to node 2 is made */
	for (unsigned r = 0; r < LF_ROUNDS; r++) {
		int ret;

		for (unsigned i = 0; i < BURST; i++)
			add_one(ep, k++);
		ret = lf_probe(probe, &rr, ack, r);
		for (unsigned i = 0; i < TAIL; i++)
			add_one(ep, k++);
		snprintf(when, sizeof(when), "round %u", r);
		check_count(ep, k, when);
		(void)lf_probe_failed(ack, ret, r);
		sc_log("round %u: node 2 ran all %llu adds", r, (unsigned long long)k);
	}
	for (unsigned i = 0; i < MORE; i++)
		add_one(ep, k++);
	check_count(ep, k, "the end");
	loco_ack_key_destroy(ack);
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2};
	loco_region_t *probe;
	loco_object_t *pobj;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	struct sc_sync sync;
	uint32_t me;

	sc_init("rpc-linkfail", argc, argv,
	        150); /* before loco-run's 170: a hang prints its stacks */
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 2), SC_WAIT_MS, "members {1, 2}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rlf", 2, &ch));
	loco_rpc_cfg_default(&cfg, all, 2);
	cfg.threads = 1;
	SC_ASSERT_OK(loco_rpc_create(ch, "rlf", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "add", add, NULL, NULL));
	SC_ASSERT_OK(loco_rpc_register(ep, "get", get, NULL, NULL));
	probe = lf_probe_create(ch, &pobj);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (me == 1)
		caller(m, ep, probe);
	sc_sync_wait(&sync, "done", 3 * TMO / 1000000);
	if (me == 2) {
		sc_log("ran %llu adds",
		       (unsigned long long)__atomic_load_n(&adds, __ATOMIC_RELAXED));
		SC_ASSERT_EQ(out_of_order, 0);
		SC_ASSERT_EQ(adds, LF_ROUNDS * (BURST + TAIL) + MORE);
	}
	SC_ASSERT(sc_members_are(m, all, 2)); /* nobody was dropped: only the link failed */
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	loco_rpc_destroy(ep);
	loco_object_destroy(pobj);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
