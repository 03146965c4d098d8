/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-dest.c -- loco_rpc_call_buffer_to(): the payload is WRITten into a
 * region the callee named, then the call runs there and finds it in place.
 *
 * loco-run -n 3. Every node makes endpoint "d" (members 1..3, a server
 * thread) and object "dst" with regions "in" (given to the endpoint with
 * loco_rpc_dest_add()) and "other" (not given). Node 1 calls node 2's
 * "check" ROUNDS times with a different pattern of 4 KiB .. 256 KiB each
 * time, into "in" at a moving offset: the handler checks that msg->data
 * lies in its "in" region at that offset and holds the pattern (the WRITE
 * ran before the call), and returns a checksum the caller compares. A
 * call into "other" gets status -EFAULT (no destination region there);
 * a source outside the send region, a destination of another node and
 * one too short give -EINVAL before anything is sent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "scenario.h"

#define TMO    (30 * SC_NS)
#define ROUNDS 40
#define IN_LEN (1u << 20)

static loco_region_t *in_r;

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
		b[i] = (uint8_t)(i * 31 + round * 7 + (i >> 9));
}

static int check(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	const uint8_t *base = loco_region_ptr(in_r);
	const uint8_t *d = msg->data;
	uint8_t *want;
	uint64_t sum;
	uint32_t round;

	(void)arg;
	if (d < base || d + msg->len > base + IN_LEN || cap < sizeof(sum))
		return -ERANGE;
	memcpy(&round, d, sizeof(round)); /* the first word: the round */
	want = malloc(msg->len);
	SC_ASSERT(want != NULL);
	fill(want, msg->len, round);
	memcpy(want, &round, sizeof(round));
	if (memcmp(want, d, msg->len) != 0) {
		free(want);
		return -EILSEQ;
	}
	free(want);
	sum = pattern_sum(d, msg->len);
	memcpy(ret, &sum, sizeof(sum));
	*rl = sizeof(sum);
	return (int)((size_t)(d - base) / 64); /* where it landed, in lines */
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *other;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	struct sc_sync sync;
	uint32_t me;

	sc_init("rpc-dest", argc, argv, 110);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rdest", 3, &ch));
	loco_rpc_cfg_default(&cfg, all, 3);
	cfg.threads = 1;
	SC_ASSERT_OK(loco_rpc_create(ch, "d", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "check", check, NULL, NULL));
	SC_ASSERT_OK(loco_object_create(ch, "dst", NULL, NULL, &obj));
	SC_ASSERT_OK(loco_region_create(obj, "in", IN_LEN, LOCO_ACCESS_WRITE, &in_r));
	SC_ASSERT_OK(loco_region_create(obj, "other", 4096, LOCO_ACCESS_WRITE, &other));
	SC_ASSERT_EQ(loco_rpc_dest_add(ep, NULL), -EINVAL);
	SC_ASSERT_OK(loco_rpc_dest_add(ep, in_r));
	SC_ASSERT_EQ(loco_rpc_dest_add(ep, in_r), -EEXIST);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	SC_ASSERT_EQ(loco_object_sync(obj, 20 * SC_NS), 2);
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "made", SC_WAIT_MS);

	if (me == 1) {
		uint8_t *send = loco_region_ptr(loco_rpc_send_region(ep)), local[64] = {0};
		loco_rref_t in2, other2, in3;
		uint64_t sum = 0;
		int status;

		SC_ASSERT_OK(loco_region_remote(in_r, 2, &in2));
		SC_ASSERT_OK(loco_region_remote(other, 2, &other2));
		SC_ASSERT_OK(loco_region_remote(in_r, 3, &in3));
		for (uint32_t r = 0; r < ROUNDS; r++) {
			size_t len = (size_t)4096 << (r % 7),
			       off = (size_t)(r * 4160) % (IN_LEN - len);
			loco_rpc_ticket_t t;
			size_t rl = 0;

			off &= ~(size_t)63;
			fill(send, len, r);
			memcpy(send, &r, sizeof(r));
			SC_ASSERT_OK(loco_rpc_call_buffer_to(ep, 2, loco_rpc_id("check"), send, len,
			                                     &in2, off, &sum, sizeof(sum), &t,
			                                     TMO));
			SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, &rl, TMO));
			SC_ASSERT_EQ(status, (int)(off / 64));
			SC_ASSERT_EQ(rl, sizeof(sum));
			SC_ASSERT_EQ(sum, pattern_sum(send, len));
		}
		sc_log("%d payloads written in place and checked by the callee", ROUNDS);
		/* a place the callee did not give: refused there */
		status = loco_rpc_call_buffer_to(ep, 2, loco_rpc_id("check"), send, 64, &other2, 0,
		                                 &sum, sizeof(sum), NULL, TMO);
		SC_ASSERT_EQ(status, -EFAULT);
		/* refused here */
		SC_ASSERT_EQ(loco_rpc_call_buffer_to(ep, 2, loco_rpc_id("check"), local, 64, &in2,
		                                     0, NULL, 0, NULL, TMO),
		             -EINVAL);
		SC_ASSERT_EQ(loco_rpc_call_buffer_to(ep, 2, loco_rpc_id("check"), send, 64, &in3, 0,
		                                     NULL, 0, NULL, TMO),
		             -EINVAL);
		SC_ASSERT_EQ(loco_rpc_call_buffer_to(ep, 2, loco_rpc_id("check"), send, 64, &in2,
		                                     IN_LEN - 32, NULL, 0, NULL, TMO),
		             -EINVAL);
		sc_log("a place not given is refused (-EFAULT), bad arguments -EINVAL");
	}
	sc_sync_wait(&sync, "done", 60000);
	loco_rpc_destroy(ep);
	loco_object_destroy(obj);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
