/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-consumed.c -- loco_rpc_consumed(): the caller learns that the callee
 * has a call_buffer payload before the call completes, and may refill its
 * bytes then.
 *
 * loco-run -n 2. Node 2 serves "hold" (one server thread): it waits until
 * node 1 WRITEs the call's round into node 2's "go" word, then returns a
 * checksum of the payload it got. Node 1, ROUNDS times: fills 64 KiB of
 * its send region with the round's pattern, calls "hold" with a ticket,
 * waits in loco_rpc_consumed(), finds the call not complete (the handler
 * is held), overwrites its bytes with garbage, lets the handler go, and
 * gets the checksum of the pattern: the callee had read the bytes before
 * it said so. Also: a second pulled call queued behind a held one is not
 * consumed yet (-EAGAIN at timeout 0, -ETIMEDOUT after 50 ms); a
 * call_buffer_to payload is consumed once the callee took the call; an
 * inline payload is consumed at once; NULL and done tickets are -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/rpc.h>

#include "scenario.h"

#define TMO    (30 * SC_NS)
#define ROUNDS 20
#define LEN    (64u * 1024)

static volatile uint64_t *go; /* node 2: the round node 1 lets go */

static uint64_t pattern_sum(const uint8_t *b, size_t n)
{
	uint64_t s = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		s = (s ^ b[i]) * 1099511628211ull;
	return s;
}

static void fill(uint8_t *b, size_t n, uint32_t round)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13 + round * 5 + (i >> 10));
	memcpy(b, &round, sizeof(round));
}

/* hold -- wait (10 s at most) until node 1 lets round @round go, then the payload's sum */
static int hold(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t sum;
	uint32_t round;

	(void)arg;
	if (msg->len < sizeof(round) || cap < sizeof(sum))
		return -ERANGE;
	memcpy(&round, msg->data, sizeof(round));
	for (int i = 0; i < 10000 && __atomic_load_n(go, __ATOMIC_ACQUIRE) < round + 1u; i++)
		usleep(1000);
	if (__atomic_load_n(go, __ATOMIC_ACQUIRE) < round + 1u)
		return -ETIMEDOUT;
	sum = pattern_sum(msg->data, msg->len);
	memcpy(ret, &sum, sizeof(sum));
	*rl = sizeof(sum);
	return 0;
}

/* let_go -- WRITE @round + 1 into node 2's go word */
static void let_go(loco_region_t *src, const loco_rref_t *go2, loco_ack_key_t *ack, uint32_t round)
{
	*(uint64_t *)loco_region_ptr(src) = round + 1u;
	SC_ASSERT_OK(loco_write(src, 0, go2, 0, 8, ack));
	SC_ASSERT_OK(loco_ack_wait(ack, TMO));
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *gor, *src, *in;
	loco_ack_key_t *ack;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	struct sc_sync sync;
	uint32_t me, hid;

	sc_init("rpc-consumed", argc, argv, 110);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 2), SC_WAIT_MS, "members {1, 2}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rcons", 2, &ch));
	loco_rpc_cfg_default(&cfg, all, 2);
	cfg.threads = 1;
	SC_ASSERT_OK(loco_rpc_create(ch, "c", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "hold", hold, NULL, &hid));
	SC_ASSERT_OK(loco_object_create(ch, "go", NULL, NULL, &obj));
	SC_ASSERT_OK(loco_region_create(obj, "go", 64, LOCO_ACCESS_WRITE, &gor));
	SC_ASSERT_OK(loco_region_create(obj, "src", 64, 0, &src));
	SC_ASSERT_OK(loco_region_create(obj, "in", LEN, LOCO_ACCESS_WRITE, &in));
	SC_ASSERT_OK(loco_rpc_dest_add(ep, in));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	go = loco_region_ptr(gor);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	SC_ASSERT_EQ(loco_object_sync(obj, 20 * SC_NS), 1);
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "made", SC_WAIT_MS);

	if (me == 1) {
		uint8_t *send = loco_region_ptr(loco_rpc_send_region(ep)), small[64];
		loco_rpc_ticket_t t, t2;
		loco_rref_t go2, in2;
		uint64_t sum = 0, sum2 = 0, want, want2;
		uint32_t r = 0;
		size_t rl = 0;
		int status;

		SC_ASSERT_OK(loco_region_remote(gor, 2, &go2));
		SC_ASSERT_OK(loco_region_remote(in, 2, &in2));
		for (; r < ROUNDS; r++) {
			fill(send, LEN, r);
			want = pattern_sum(send, LEN);
			SC_ASSERT_OK(loco_rpc_call_buffer(ep, 2, hid, send, LEN, &sum, sizeof(sum),
			                                  &t, TMO));
			SC_ASSERT_OK(loco_rpc_consumed(ep, &t, TMO));
			/* consumed, not complete: the handler is held until we let it go */
			SC_ASSERT_EQ(loco_rpc_wait(ep, &t, &status, NULL, 0), -EAGAIN);
			memset(send, 0xee, LEN); /* the callee has its own copy */
			let_go(src, &go2, ack, r);
			SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, &rl, TMO));
			SC_ASSERT_OK(status);
			SC_ASSERT_EQ(rl, sizeof(sum));
			SC_ASSERT_EQ(sum, want);
		}
		sc_log("%d payloads consumed before their calls completed, then refilled", ROUNDS);

		/* a pulled call behind a held one: not consumed until the lane takes it */
		fill(send, LEN / 2, r);
		want = pattern_sum(send, LEN / 2);
		fill(send + LEN / 2, LEN / 2, r + 1);
		want2 = pattern_sum(send + LEN / 2, LEN / 2);
		SC_ASSERT_OK(
		    loco_rpc_call_buffer(ep, 2, hid, send, LEN / 2, &sum, sizeof(sum), &t, TMO));
		SC_ASSERT_OK(loco_rpc_consumed(ep, &t, TMO));
		SC_ASSERT_OK(loco_rpc_call_buffer(ep, 2, hid, send + LEN / 2, LEN / 2, &sum2,
		                                  sizeof(sum2), &t2, TMO));
		SC_ASSERT_EQ(loco_rpc_consumed(ep, &t2, 0), -EAGAIN);
		SC_ASSERT_EQ(loco_rpc_consumed(ep, &t2, 50 * 1000000ll), -ETIMEDOUT);
		let_go(src, &go2, ack, r);
		SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, NULL, TMO));
		SC_ASSERT_OK(status);
		SC_ASSERT_EQ(sum, want);
		SC_ASSERT_OK(loco_rpc_consumed(ep, &t2, TMO));
		let_go(src, &go2, ack, r + 1);
		SC_ASSERT_OK(loco_rpc_wait(ep, &t2, &status, NULL, TMO));
		SC_ASSERT_OK(status);
		SC_ASSERT_EQ(sum2, want2);
		r += 2;
		sc_log("a call queued behind a held one: -EAGAIN, -ETIMEDOUT, then consumed");

		/* call_buffer_to: consumed once the callee took the call */
		fill(send, 4096, r);
		want = pattern_sum(send, 4096);
		SC_ASSERT_OK(loco_rpc_call_buffer_to(ep, 2, hid, send, 4096, &in2, 0, &sum,
		                                     sizeof(sum), &t, TMO));
		SC_ASSERT_OK(loco_rpc_consumed(ep, &t, TMO));
		SC_ASSERT_EQ(loco_rpc_wait(ep, &t, &status, NULL, 0), -EAGAIN);
		let_go(src, &go2, ack, r);
		SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, NULL, TMO));
		SC_ASSERT_OK(status);
		SC_ASSERT_EQ(sum, want); /* (in place there: our bytes are not read again) */
		r++;

		/* inline: consumed at once, even while the handler is held */
		fill(small, sizeof(small), r);
		want = pattern_sum(small, sizeof(small));
		SC_ASSERT_OK(loco_rpc_call_buffer(ep, 2, hid, small, sizeof(small), &sum,
		                                  sizeof(sum), &t, TMO));
		SC_ASSERT_OK(loco_rpc_consumed(ep, &t, 0));
		let_go(src, &go2, ack, r);
		SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, NULL, TMO));
		SC_ASSERT_EQ(sum, want);

		/* bad tickets */
		SC_ASSERT_EQ(loco_rpc_consumed(ep, NULL, 0), -EINVAL);
		SC_ASSERT_EQ(loco_rpc_consumed(ep, &t, 0), -EINVAL); /* done */
		SC_ASSERT_EQ(loco_rpc_consumed(NULL, &t, 0), -EINVAL);
		sc_log("call_buffer_to and inline payloads; bad tickets -EINVAL");
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
