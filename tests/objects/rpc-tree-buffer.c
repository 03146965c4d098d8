/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-tree-buffer.c -- loco_rpc_call_buffer_all(): a buffer beyond
 * inline_max reaches every member exactly once, whole, down a tree.
 *
 * loco-run -n 9. Every node makes endpoint "tb" with the member list 1..9
 * and a handler "bcast" that checks the bytes (a header naming the origin
 * and the round, then a pattern of the round's seed), that msg->caller is
 * the origin, and counts the call by origin and round. Each round one of
 * nodes 1, 5 and 9 broadcasts round_sizes[r % 4] bytes (above inline_max
 * up to the endpoint's pull_bytes; up to a page from the heap, above from
 * the send region), from a buffer it changes as soon as the call returns
 * (the members it passed the call to hold the bytes by then). Checks:
 *   - every other member runs the handler exactly once per round, with
 *     the whole pattern: a torn, late or repeated copy fails;
 *   - a tree, not a loop: the origin posts RPC_TREE_FANOUT (4) calls for
 *     its 8 peers, each other member READs the bytes once, and across the
 *     members every round adds 8 calls in all (each member but the origin
 *     was passed the call once);
 *   - argument errors: NULL, 0 bytes (-EINVAL), above pull_bytes
 *     (-EMSGSIZE).
 * LOCO_TEST_TREE_MAX caps the sizes (the verbs run in the VM: see
 * tests/objects/meson.build).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpc.h>

#include "scenario.h"

#define N      9u
#define ROUNDS 24u /* at least 12 under LOCO_TEST_SCALE: every size from every origin */
#define TMO    (30 * SC_NS)
#define FANOUT 4u /* objects/rpc_impl.h: RPC_TREE_FANOUT */

static const size_t round_sizes[4] = {1100, 4096, 65536 + 24, 1u << 20};

struct hdr {
	uint32_t origin, round;
	uint64_t seed;
};

static unsigned got[N + 1][ROUNDS + 1]; /* by origin and round */
static unsigned bad;
static uint32_t rounds;

static uint8_t pat(uint64_t seed, size_t i)
{
	return (uint8_t)((seed >> (i % 8 * 8)) + i * 131);
}

static size_t size_max = SIZE_MAX; /* LOCO_TEST_TREE_MAX: the largest broadcast (see main) */

static size_t round_size(uint32_t r)
{
	return round_sizes[r % 4] < size_max ? round_sizes[r % 4] : size_max;
}

static uint32_t round_origin(uint32_t r)
{
	static const uint32_t o[3] = {1, 5, 9};

	return o[r % 3];
}

static int bcast(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	const uint8_t *b = msg->data;
	struct hdr h;

	(void)arg, (void)ret, (void)cap, (void)rl;
	if (msg->len < sizeof(h)) {
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		return 0;
	}
	memcpy(&h, b, sizeof(h));
	if (h.origin < 1 || h.origin > N || h.round < 1 || h.round > rounds ||
	    h.origin != msg->caller || msg->len != round_size(h.round)) {
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		return 0;
	}
	for (size_t i = sizeof(h); i < msg->len; i++)
		if (b[i] != pat(h.seed, i)) {
			__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
			return 0;
		}
	__atomic_add_fetch(&got[h.origin][h.round], 1, __ATOMIC_RELEASE);
	return 0;
}

/* fill -- round @r's bytes of @origin into @buf */
static void fill(uint8_t *buf, uint32_t origin, uint32_t r)
{
	struct hdr h = {.origin = origin, .round = r, .seed = 0x9e3779b97f4a7c15ull * (r + 7)};

	memcpy(buf, &h, sizeof(h));
	for (size_t i = sizeof(h); i < round_size(r); i++)
		buf[i] = pat(h.seed, i);
}

int main(int argc, char **argv)
{
	uint32_t nodes[N], me;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	loco_rpc_stats_t st0, st1;
	struct sc_sync sync;
	uint64_t calls_all = 0;
	uint8_t *heap, *send;
	uint32_t id;

	sc_init("rpc-tree-buffer", argc, argv,
	        170); /* before loco-run's 190: a hang prints its stacks */
	if (getenv("LOCO_TEST_TREE_MAX") != NULL)
		size_max = strtoull(getenv("LOCO_TEST_TREE_MAX"), NULL, 10);
	rounds = sc_scaled(ROUNDS) < 12 ? 12 : sc_scaled(ROUNDS);
	if (sc_nodes() != N)
		SC_FAIL("run with loco-run -n %u", N);
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT(me >= 1 && me <= N);
	for (uint32_t i = 0; i < N; i++)
		nodes[i] = i + 1;
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rtb", N, &ch));
	loco_rpc_cfg_default(&cfg, nodes, N);
	cfg.threads = 1; /* a server thread: the main thread waits in sc_sync */
	SC_ASSERT(round_sizes[0] > cfg.inline_max && round_sizes[3] == cfg.pull_bytes);
	SC_ASSERT_OK(loco_rpc_create(ch, "tb", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "bcast", bcast, NULL, &id));
	SC_ASSERT_OK(loco_channel_join(ch, 60 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 60 * SC_NS));
	sc_sync_open(&sync, m, N);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	/*
	 * Up to a page the bytes come from the heap (registered by the call,
	 * one page: a registration on shm cannot grow over pages it adopted
	 * from a mapping it shares with others), above from the send region
	 * (its own registration).
	 */
	heap = aligned_alloc(4096, 4096);
	SC_ASSERT(heap != NULL);
	send = loco_region_ptr(loco_rpc_send_region(ep));

	SC_ASSERT_EQ(loco_rpc_call_buffer_all(ep, id, NULL, 100, TMO), -EINVAL);
	SC_ASSERT_EQ(loco_rpc_call_buffer_all(ep, id, send, 0, TMO), -EINVAL);
	SC_ASSERT_EQ(loco_rpc_call_buffer_all(ep, id, send, cfg.pull_bytes + 1, TMO), -EMSGSIZE);

	for (uint32_t r = 1; r <= rounds; r++) {
		uint32_t origin = round_origin(r);

		/* counters before anybody sends: the origin waits for every node's */
		loco_rpc_stats(ep, &st0);
		sc_sync_wait(&sync, "ready", SC_WAIT_MS);
		if (me == origin) {
			uint8_t *buf = round_size(r) <= 4096 ? heap : send;

			fill(buf, me, r);
			SC_ASSERT_OK(loco_rpc_call_buffer_all(ep, id, buf, round_size(r), TMO));
			memset(buf, 0xee, round_size(r)); /* held by the members it went to */
		} else {
			SC_WAIT_UNTIL(__atomic_load_n(&got[origin][r], __ATOMIC_ACQUIRE) != 0,
			              SC_WAIT_MS, "the round's broadcast");
		}
		sc_sync_wait(&sync, "round", SC_WAIT_MS);
		loco_rpc_stats(ep, &st1);
		if (me == origin) {
			/* one call per group of the tree, none more (a loop would post 8) */
			if (st1.calls - st0.calls != FANOUT)
				SC_FAIL("round %u: the origin posted %llu calls for %u peers", r,
				        (unsigned long long)(st1.calls - st0.calls), N - 1);
			SC_ASSERT_EQ(st1.pulls, st0.pulls);
		} else {
			SC_ASSERT_EQ(st1.pulls - st0.pulls, 1); /* READ once, from its parent */
		}
		calls_all += st1.calls - st0.calls;
	}

	/* across the members, every round passed the call to each non-origin once */
	sc_sync_put(&sync, me, calls_all); /* mailbox i: node i's */
	sc_sync_wait(&sync, "counted", SC_WAIT_MS);
	if (me == 1) {
		uint64_t sum = 0;

		for (uint32_t n = 1; n <= N; n++)
			sum += sc_sync_get(&sync, n);
		if (sum != (uint64_t)rounds * (N - 1))
			SC_FAIL("%llu calls in all for %u rounds of %u members",
			        (unsigned long long)sum, rounds, N - 1);
	}
	for (uint32_t r = 1; r <= rounds; r++) {
		uint32_t origin = round_origin(r);
		unsigned want = me == origin ? 0 : 1;

		if (got[origin][r] != want)
			SC_FAIL("round %u from node %u ran %u times here", r, origin,
			        got[origin][r]);
	}
	SC_ASSERT_EQ(bad, 0);
	sc_log("%u broadcasts of 1100 B .. %zu B reached the 8 others once each, down a tree",
	       rounds, round_size(3));

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_rpc_destroy(ep);
	free(heap); /* (after the endpoint, which kept its registration) */
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
