/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-callv.c -- loco_rpc_callv(): a call of several arguments from
 * anywhere in the caller's memory; small ones copied, large ones READ by
 * the callee from buffers registered on first use and kept in a cache.
 *
 * loco-run -n 2. Node 2 serves "sumv" (one server thread): the checksum
 * and length of what it got (the arguments one after the other). Node 1:
 *   1. ROUNDS calls of 5 arguments (40 B and 300 B copied; 600 B, 256 KiB
 *      of heap and 600 KiB of mmap READ), their bytes changed every
 *      round: every sum right (the same buffers, registered once);
 *   2. 24 distinct buffers in turn, twice (more than LOCO_RPC_REG_MAX: the
 *      cache drops and registers), every sum right;
 *   3. a ticket: consumed, then complete; loco_rpc_mem_forget() of its
 *      buffer before the wait is -EBUSY, after it 0;
 *   4. a buffer unmapped: the next call with it is -EFAULT; a buffer
 *      forgotten, unmapped and mapped again (with other bytes): the call
 *      sends the new bytes;
 *   5. bad vectors: 9 arguments -E2BIG, none or an empty one -EINVAL,
 *      more than pull_bytes -EMSGSIZE.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <loco/rpc.h>

#include "scenario.h"

#define TMO    (30 * SC_NS)
#define ROUNDS 30
#define NBUF   24

static uint64_t fnv(uint64_t s, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s = (s ^ b[i]) * 1099511628211ull;
	return s;
}

static int sumv(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t v[2] = {fnv(1469598103934665603ull, msg->data, msg->len), msg->len};

	(void)arg;
	if (cap < sizeof(v))
		return -ERANGE;
	memcpy(ret, v, sizeof(v));
	*rl = sizeof(v);
	return 0;
}

static void fill(void *p, size_t n, uint32_t seed)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 8));
}

static void *map(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	SC_ASSERT(p != MAP_FAILED);
	return p;
}

/* any_mapped -- whether any page of [@p, @p + @n) is mapped (mincore() fails with ENOMEM if none) */
static bool any_mapped(void *p, size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec[1];

	for (size_t o = 0; o < n; o += pg)
		if (mincore((uint8_t *)p + o, 1, vec) == 0)
			return true;
	return false;
}

/* call -- callv @a[0 .. @n) to node 2 and check the sum and length it got */
static void call(loco_rpc_ep_t *ep, const loco_rpc_arg_t *a, unsigned n, const char *what)
{
	uint64_t s = 1469598103934665603ull, len = 0, v[2] = {0};

	for (unsigned i = 0; i < n; i++) {
		s = fnv(s, a[i].ptr, a[i].len);
		len += a[i].len;
	}
	SC_ASSERT_OK(loco_rpc_callv(ep, 2, loco_rpc_id("sumv"), a, n, v, sizeof(v), NULL, TMO));
	if (v[0] != s || v[1] != len)
		SC_FAIL("%s: node 2 got %llu bytes summing %#llx, sent %llu summing %#llx", what,
		        (unsigned long long)v[1], (unsigned long long)v[0], (unsigned long long)len,
		        (unsigned long long)s);
}

static void node1(loco_rpc_ep_t *ep)
{
	static uint8_t small1[40], small2[300];
	uint8_t *mid = malloc(600), *heap = malloc(256 * 1024), *mapped = map(600 * 1024),
	        *bufs[NBUF], *x, *y;
	uint32_t hid = loco_rpc_id("sumv");
	loco_rpc_ticket_t t;
	uint64_t v[2];
	int status, ret;

	SC_ASSERT(heap != NULL && mid != NULL);
	/* 1 */
	for (uint32_t r = 0; r < ROUNDS; r++) {
		loco_rpc_arg_t a[5] = {{small1, sizeof(small1)},
		                       {heap, 256 * 1024},
		                       {small2, sizeof(small2)},
		                       {mapped + 8, 600 * 1024 - 8},
		                       {mid, 600}};

		fill(small1, sizeof(small1), r);
		fill(small2, sizeof(small2), r + 1);
		fill(mid, 600, r + 2);
		fill(heap, 256 * 1024, r + 3);
		fill(mapped, 600 * 1024, r + 4);
		call(ep, a, 5, "five arguments");
	}
	sc_log("%d calls of 5 arguments (2 copied, 3 READ), bytes changed every round", ROUNDS);

	/* 2 */
	for (int i = 0; i < NBUF; i++) {
		bufs[i] = map(64 * 1024);
		fill(bufs[i], 64 * 1024, (uint32_t)i);
	}
	for (int k = 0; k < 2 * NBUF; k++) {
		loco_rpc_arg_t a[2] = {{small1, 8}, {bufs[k % NBUF], 64 * 1024}};

		call(ep, a, 2, "one of 24 buffers");
	}
	sc_log("%d buffers in turn, twice (the cache keeps %u)", NBUF, LOCO_RPC_REG_MAX);

	/* 3 */
	{
		loco_rpc_arg_t a[1] = {{heap, 256 * 1024}};

		fill(heap, 256 * 1024, 99);
		SC_ASSERT_OK(loco_rpc_callv(ep, 2, hid, a, 1, v, sizeof(v), &t, TMO));
		SC_ASSERT_OK(loco_rpc_consumed(ep, &t, TMO));
		SC_ASSERT_EQ(loco_rpc_mem_forget(ep, heap, 256 * 1024), -EBUSY);
		SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, NULL, TMO));
		SC_ASSERT_OK(status);
		SC_ASSERT_EQ(v[0], fnv(1469598103934665603ull, heap, 256 * 1024));
		SC_ASSERT_OK(loco_rpc_mem_forget(ep, heap, 256 * 1024));
	}
	sc_log("a ticket: consumed, then complete; forget -EBUSY while in flight, then 0");

	/* 4 */
	x = map(1 << 20);
	fill(x, 1 << 20, 5);
	{
		loco_rpc_arg_t a[1] = {{x, 1 << 20}};

		call(ep, a, 1, "1 MiB");
		SC_ASSERT_OK(munmap(x, 1 << 20));
		ret = loco_rpc_callv(ep, 2, hid, a, 1, v, sizeof(v), NULL, TMO);
		/*
		 * Another thread of the process (the fabric's, mapping a peer's memory) may map
		 * something at x's address in between; the cache cannot tell that from x (rpc_mem.c)
		 * and the call then READs it. Only a still unmapped x must fail.
		 */
		if (ret != -EFAULT && any_mapped(x, 1 << 20))
			sc_log(
			    "x's address was mapped again by another thread: -EFAULT not checked");
		else
			SC_ASSERT_EQ(ret, -EFAULT);
	}
	y = map(1 << 20);
	fill(y, 1 << 20, 6);
	{
		loco_rpc_arg_t a[1] = {{y, 1 << 20}};

		call(ep, a, 1, "1 MiB");
		SC_ASSERT_OK(loco_rpc_mem_forget(ep, y, 1 << 20));
		SC_ASSERT_OK(munmap(y, 1 << 20));
		x = map(1 << 20); /* often at y's address */
		fill(x, 1 << 20, 7);
		a[0].ptr = x;
		call(ep, a, 1, "1 MiB mapped again");
	}
	SC_ASSERT_OK(loco_rpc_mem_forget(ep, x, 1 << 20)); /* (x is unmapped at the end) */
	sc_log("an unmapped buffer: -EFAULT; forgotten, unmapped, mapped again%s: the new bytes",
	       x == y ? " at its address" : "");

	/* 5 */
	{
		loco_rpc_arg_t a[9], big[2] = {{x, 1 << 20}, {small1, 8}};

		for (int i = 0; i < 9; i++)
			a[i] = (loco_rpc_arg_t){small1, 8};
		SC_ASSERT_EQ(loco_rpc_callv(ep, 2, hid, a, 9, v, sizeof(v), NULL, TMO), -E2BIG);
		SC_ASSERT_EQ(loco_rpc_callv(ep, 2, hid, a, 0, v, sizeof(v), NULL, TMO), -EINVAL);
		SC_ASSERT_EQ(loco_rpc_callv(ep, 2, hid, NULL, 1, v, sizeof(v), NULL, TMO), -EINVAL);
		a[1].len = 0;
		SC_ASSERT_EQ(loco_rpc_callv(ep, 2, hid, a, 2, v, sizeof(v), NULL, TMO), -EINVAL);
		a[1] = (loco_rpc_arg_t){NULL, 8};
		SC_ASSERT_EQ(loco_rpc_callv(ep, 2, hid, a, 2, v, sizeof(v), NULL, TMO), -EINVAL);
		SC_ASSERT_EQ(loco_rpc_callv(ep, 2, hid, big, 2, v, sizeof(v), NULL, TMO),
		             -EMSGSIZE);
		SC_ASSERT_EQ(loco_rpc_callv(ep, 1, hid, big + 1, 1, v, sizeof(v), NULL, TMO),
		             -EINVAL);
		SC_ASSERT_EQ(loco_rpc_mem_forget(ep, NULL, 8), -EINVAL);
	}
	sc_log("bad vectors refused");
	for (int i = 0; i < NBUF; i++)
		SC_ASSERT_OK(munmap(bufs[i], 64 * 1024));
	munmap(x, 1 << 20);
	munmap(mapped, 600 * 1024);
	free(heap);
	free(mid);
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	struct sc_sync sync;

	sc_init("rpc-callv", argc, argv, 110);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2");
	m = sc_start();
	SC_WAIT_UNTIL(sc_members_are(m, all, 2), SC_WAIT_MS, "members {1, 2}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rcallv", 2, &ch));
	loco_rpc_cfg_default(&cfg, all, 2);
	cfg.threads = 1;
	SC_ASSERT_OK(loco_rpc_create(ch, "v", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "sumv", sumv, NULL, NULL));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "made", SC_WAIT_MS);
	if (loco_manager_node_id(m) == 1)
		node1(ep);
	sc_sync_wait(&sync, "done", 60000);
	loco_rpc_destroy(ep);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
