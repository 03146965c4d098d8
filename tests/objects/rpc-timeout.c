/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-timeout.c -- a call_return whose wait times out leaves no write
 * into the caller's buffer, and its reply slot comes back only once the
 * late reply landed; the broadcast form reaches every other member once.
 *
 * loco-run -n 3; every member's endpoint has 2 reply slots. First each
 * node calls "hello" on all the others (loco_rpc_call_all) and waits
 * until it got one hello from each of the two others. Then node 1 calls
 * node 2's "slow" (300 ms before it answers) twice with tickets: a wait
 * with timeout 0 gives -EAGAIN and keeps the ticket, a wait of 50 ms
 * gives -ETIMEDOUT and drops it; node 1 then fills both result buffers
 * with 0xAA. With both slots held by dropped calls, a call_return with
 * timeout 0 gets -EBUSY; one with 5 s waits until a late reply landed,
 * takes its slot, and is answered right. Both buffers still hold 0xAA
 * (a late reply never reached them), and node 1 counted 2 timeouts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "scenario.h"

#define TMO      (30 * SC_NS)
#define BOX_DONE 1

static unsigned hellos[64];

static int hello(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint32_t from;

	(void)arg, (void)ret, (void)cap, (void)rl;
	SC_ASSERT_EQ(msg->len, sizeof(from));
	memcpy(&from, msg->data, sizeof(from));
	SC_ASSERT_EQ(from, msg->caller);
	hellos[msg->caller]++;
	return 0;
}

static int slow(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg;
	sc_sleep_ms(300);
	memset(ret, 0x55, cap);
	*rl = cap;
	return 7;
}

static int echo(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg;
	SC_ASSERT(msg->len <= cap);
	memcpy(ret, msg->data, msg->len);
	*rl = msg->len;
	return 0;
}

/* run -- run calls until mailbox @box of every node is set */
static void run_until_all(loco_rpc_ep_t *ep, struct sc_sync *sync, const uint32_t *all, int n)
{
	int64_t dl = sc_now_ms() + 60000;

	for (;;) {
		int done = 1;

		for (int q = 0; q < n; q++)
			done &= sc_sync_get(sync, BOX_DONE + all[q]) != 0;
		if (done)
			return;
		if (sc_now_ms() > dl)
			SC_FAIL("the others not done in 60 s");
		if (loco_rpc_progress(ep, 64) == 0)
			sc_sleep_ms(1);
	}
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	loco_rpc_stats_t st;
	struct sc_sync sync;
	uint32_t me;
	int64_t dl;

	sc_init("rpc-timeout", argc, argv, 110);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rto", 3, &ch));
	loco_rpc_cfg_default(&cfg, all, 3);
	cfg.ret_slots = 2;
	cfg.ret_max = 64;
	SC_ASSERT_OK(loco_rpc_create(ch, "t", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "hello", hello, NULL, NULL));
	SC_ASSERT_OK(loco_rpc_register(ep, "slow", slow, NULL, NULL));
	SC_ASSERT_OK(loco_rpc_register(ep, "echo", echo, NULL, NULL));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* broadcast: one hello from each other member */
	SC_ASSERT_OK(loco_rpc_call_all(ep, loco_rpc_id("hello"), &me, sizeof(me), TMO));
	dl = sc_now_ms() + 20000;
	while (hellos[all[0]] + hellos[all[1]] + hellos[all[2]] < 2) {
		if (sc_now_ms() > dl)
			SC_FAIL("hellos missing after 20 s");
		if (loco_rpc_progress(ep, 64) == 0)
			sc_sleep_ms(1);
	}
	for (int q = 0; q < 3; q++)
		SC_ASSERT_EQ(hellos[all[q]], all[q] == me ? 0 : 1);
	sc_log("one hello from each other member");
	sc_sync_wait(&sync, "hellos", SC_WAIT_MS);

	if (me == 1) {
		static uint8_t b[2][64];
		loco_rpc_ticket_t t[2];
		uint64_t v = 0x1234, r = 0;
		int status = 0;
		int64_t t0;

		for (int i = 0; i < 2; i++) {
			SC_ASSERT_OK(loco_rpc_call_return(ep, 2, loco_rpc_id("slow"), NULL, 0, b[i],
			                                  sizeof(b[i]), &t[i], TMO));
			SC_ASSERT_EQ(loco_rpc_wait(ep, &t[i], &status, NULL, 0), -EAGAIN);
			SC_ASSERT_EQ(loco_rpc_wait(ep, &t[i], &status, NULL, 50000000), -ETIMEDOUT);
			SC_ASSERT_EQ(loco_rpc_wait(ep, &t[i], &status, NULL, 0),
			             -EINVAL);            /* dropped */
			memset(b[i], 0xAA, sizeof(b[i])); /* the user reuses the buffer */
		}
		/* both slots wait for late replies */
		SC_ASSERT_EQ(loco_rpc_call_return(ep, 2, loco_rpc_id("echo"), &v, sizeof(v), &r,
		                                  sizeof(r), NULL, 0),
		             -EBUSY);
		t0 = sc_now_ns();
		SC_ASSERT_OK(loco_rpc_call_return(ep, 2, loco_rpc_id("echo"), &v, sizeof(v), &r,
		                                  sizeof(r), NULL, 5 * SC_NS));
		SC_ASSERT_EQ(r, v);
		sc_log("a slot came back after %.0f ms (a late reply landed)",
		       (double)(sc_now_ns() - t0) / 1e6);
		sc_sleep_ms(700); /* the second late reply lands too */
		(void)loco_rpc_progress(ep, 64);
		for (int i = 0; i < 2; i++)
			for (size_t j = 0; j < sizeof(b[i]); j++)
				if (b[i][j] != 0xAA)
					SC_FAIL("buffer %d byte %zu: 0x%02x, a late reply wrote it",
					        i, j, b[i][j]);
		/* and both slots serve again */
		for (int i = 0; i < 4; i++) {
			v = (uint64_t)i;
			SC_ASSERT_OK(loco_rpc_call_return(ep, 2, loco_rpc_id("echo"), &v, sizeof(v),
			                                  &r, sizeof(r), NULL, 5 * SC_NS));
			SC_ASSERT_EQ(r, v);
		}
		loco_rpc_stats(ep, &st);
		sc_log("timeouts %llu, buffers untouched", (unsigned long long)st.timeouts);
		SC_ASSERT_EQ(st.timeouts, 2);
	}
	sc_sync_put(&sync, BOX_DONE + me, 1);
	run_until_all(ep, &sync, all, 3);
	sc_sync_wait(&sync, "done", 60000);
	loco_rpc_destroy(ep);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
