/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc.c -- node 2 serves three handlers, node 1 calls them: "add" with a
 * result (loco_rpc_call_return), "sum" on a 256 KiB buffer that node 2
 * pulls with an RDMA READ (loco_rpc_call_buffer), and COUNT one-way
 * "tick" calls batched by trad aggregation; then "quit", awaited.
 * Node 2 runs the calls in its own loop (loco_rpc_progress).
 *
 *   loco-run -n 2 ./rpc [COUNT]
 *
 * Exits 0 when every result is right and node 2 saw every tick.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/rpc.h>

#define SEC (1000000000ll)
#define BIG (256u * 1024)

static unsigned long ticks;
static int quit;

static int fail(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, loco_strerror(err));
	return 1;
}

static int add(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	int64_t v[2], s;

	(void)arg;
	if (msg->len != sizeof(v) || cap < sizeof(s))
		return -22; /* -EINVAL: the caller sees it as the status */
	memcpy(v, msg->data, sizeof(v));
	s = v[0] + v[1];
	memcpy(ret, &s, sizeof(s));
	*rl = sizeof(s);
	return 0;
}

static int sum(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	const uint8_t *b = msg->data; /* in node 2's registered memory: pulled, not copied */
	uint64_t s = 0;

	(void)arg;
	for (size_t i = 0; i < msg->len; i++)
		s += b[i];
	if (cap >= sizeof(s)) {
		memcpy(ret, &s, sizeof(s));
		*rl = sizeof(s);
	}
	return 0;
}

static int tick(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	unsigned long n;

	(void)arg, (void)ret, (void)cap, (void)rl;
	memcpy(&n, msg->data, sizeof(n));
	if (n != ticks) /* FIFO per caller: the ticks come in order */
		fprintf(stderr, "tick %lu came as %lu\n", n, ticks);
	ticks++;
	return 0;
}

static int stop(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)msg, (void)ret, (void)cap, (void)rl;
	quit = 1;
	return 0;
}

static int caller(loco_rpc_ep_t *ep, unsigned long count)
{
	int64_t v[2] = {40, 2}, s = 0;
	uint8_t *buf = loco_region_ptr(loco_rpc_send_region(ep));
	uint64_t want = 0, got = 0;
	int ret;

	ret = loco_rpc_call_return(ep, 2, loco_rpc_id("add"), v, sizeof(v), &s, sizeof(s), NULL,
	                           10 * SEC);
	if (ret)
		return fail("add", ret);
	printf("add(40, 2) = %lld\n", (long long)s);
	for (size_t i = 0; i < BIG; i++) {
		buf[i] = (uint8_t)(i * 7);
		want += buf[i];
	}
	ret = loco_rpc_call_buffer(ep, 2, loco_rpc_id("sum"), buf, BIG, &got, sizeof(got), NULL,
	                           10 * SEC);
	if (ret)
		return fail("sum", ret);
	printf("sum of %u bytes = %llu (expected %llu)\n", BIG, (unsigned long long)got,
	       (unsigned long long)want);
	for (unsigned long i = 0; i < count; i++)
		if ((ret = loco_rpc_call(ep, 2, loco_rpc_id("tick"), &i, sizeof(i), 10 * SEC)))
			return fail("tick", ret);
	/*
	 * "quit" with a result: it runs after every tick (FIFO per caller), so
	 * its answer says node 2 has them all -- a member that leaves has its
	 * calls still in the rings dropped, so node 1 waits for it
	 */
	if ((ret = loco_rpc_call_return(ep, 2, loco_rpc_id("quit"), NULL, 0, NULL, 0, NULL,
	                                10 * SEC)))
		return fail("quit", ret);
	return s == 42 && got == want ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const uint32_t nodes[] = {1, 2};
	unsigned long count = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	loco_rpc_cfg_t cfg;
	loco_rpc_ep_t *ep;
	loco_rpc_stats_t st;
	loco_channel_t *ch;
	loco_manager_t *m;
	uint32_t me;
	int ret;

	if ((ret = loco_init(NULL, &m)))
		return fail("init", ret);
	me = loco_node_id(m);
	if (me != 1 && me != 2) {
		fprintf(stderr, "run with loco-run -n 2\n");
		return 1;
	}
	loco_rpc_cfg_default(&cfg, nodes, 2);
	cfg.agg = LOCO_RPC_AGG_TRAD; /* small calls go in batches */
	if ((ret = loco_channel_create(m, NULL, "example-rpc", 2, &ch)) ||
	    (ret = loco_rpc_create(ch, "calc", &cfg, &ep)) ||
	    (ret = loco_rpc_register(ep, "add", add, NULL, NULL)) ||
	    (ret = loco_rpc_register(ep, "sum", sum, NULL, NULL)) ||
	    (ret = loco_rpc_register(ep, "tick", tick, NULL, NULL)) ||
	    (ret = loco_rpc_register(ep, "quit", stop, NULL, NULL)) ||
	    (ret = loco_channel_join(ch, 20 * SEC)) || (ret = loco_rpc_sync(ep, 20 * SEC)))
		return fail("setup", ret);
	if (me == 1) {
		ret = caller(ep, count);
	} else {
		while (!quit)
			if (loco_rpc_progress(ep, 256) < 0)
				break;
		printf("node 2: %lu ticks\n", ticks);
		ret = ticks == count ? 0 : 1;
	}
	loco_rpc_stats(ep, &st);
	printf("node %u: %llu calls sent in %llu ring messages, %llu run\n", me,
	       (unsigned long long)st.calls, (unsigned long long)st.records,
	       (unsigned long long)st.handled);
	loco_rpc_destroy(ep);
	loco_channel_destroy(ch);
	loco_fini(m);
	return ret;
}
