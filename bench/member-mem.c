/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * member-mem.c -- what one node holds for an rpc endpoint as the members
 * grow: measured at the size it is started with, worked out for 8, 32
 * and 256 members.
 *
 *   loco-run -n N build/bench/member-mem [-s SERVERS]
 *
 * Nodes 1..S (-s, default 8, at most N) are servers, the others clients,
 * as in a KV store: every node makes endpoint "m" with no member list
 * and one server thread; it notes the bytes the endpoint holds with no
 * pipe (loco_rpc_stats() mem_bytes: the fixed part); every client calls
 * "echo" on every server, every server on every other server (its
 * replicas); after a barrier each node notes the bytes again and its
 * pipes out and in, and writes them where node 1 reads them. Node 1
 * prints each node's figures, the bytes per pipe out (from a client:
 * its growth over its pipes) and per pipe in (from a server: what is
 * left of its growth over its pipes in), and the server's and the
 * client's bytes worked out for 8, 32 and 256 members with S servers: a
 * server has a pipe out to each other server and one in from every
 * other member, a client a pipe out to each server. Each pipe's share
 * includes the peer's record (about 400 B, one per peer however many
 * pipes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/rpc.h>

#include "bench.h"

#define SEC      1000000000ll
#define TMO      (120 * SEC)
#define MAX_NODE 512

struct fig {
	uint64_t fixed, mem, out, in;
};

static int echo(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	(void)arg, (void)ret, (void)cap, (void)rl;
	return (int)msg->len;
}

static void die_if(const char *what, int ret)
{
	if (ret)
		bench_die(what, ret);
}

static void report(const struct fig *f, uint32_t n, uint32_t servers)
{
	double per_out = 0, per_in = 0, fixed = (double)f[1].fixed;

	printf("member-mem: %u members (%u servers, %u clients), an rpc endpoint with the "
	       "defaults\n",
	       n, servers, n - servers);
	printf("%-6s %12s %12s %10s %10s\n", "node", "fixed B", "held B", "pipes out", "pipes in");
	for (uint32_t q = 1; q <= n; q++)
		printf("%-6u %12llu %12llu %10llu %10llu\n", q, (unsigned long long)f[q].fixed,
		       (unsigned long long)f[q].mem, (unsigned long long)f[q].out,
		       (unsigned long long)f[q].in);
	if (servers < n && f[n].out)
		per_out = (double)(f[n].mem - f[n].fixed) / (double)f[n].out;
	else if (f[1].out)
		per_out = (double)(f[1].mem - f[1].fixed) / (double)(f[1].out + f[1].in);
	if (f[1].in)
		per_in = ((double)(f[1].mem - f[1].fixed) - per_out * (double)f[1].out) /
		         (double)f[1].in;
	printf("fixed %.0f B; per pipe out %.0f B, per pipe in %.0f B (each with its peer's "
	       "record)\n",
	       fixed, per_out, per_in);
	for (int k = 0; k < 3; k++) {
		uint32_t members = k == 0 ? 8 : k == 1 ? 32 : 256;
		uint32_t s = servers < members ? servers : members;
		double srv = fixed + per_out * (s - 1) + per_in * (members - 1);
		double cli = fixed + per_out * s;

		printf("%3u members, %u servers: a server holds %.2f MiB, a client %.2f MiB%s\n",
		       members, s, srv / 1048576.0, cli / 1048576.0,
		       members == n ? " (as measured here)" : " (worked out)");
	}
}

int main(int argc, char **argv)
{
	uint32_t n, me, servers = 8;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *box;
	loco_barrier_t *bar;
	loco_rpc_ep_t *ep;
	loco_rpc_cfg_t cfg;
	loco_rpc_stats_t st;
	loco_ack_key_t *ack;
	struct fig mine, *all = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "s:")) != -1) {
		if (opt != 's') {
			fprintf(stderr, "usage: member-mem [-s SERVERS]\n");
			return 2;
		}
		servers = (uint32_t)atoi(optarg);
	}
	die_if("loco_init", loco_init(NULL, &m));
	me = loco_manager_node_id(m);
	n = (uint32_t)atoi(getenv("LOCO_NODES") ? getenv("LOCO_NODES") : "0");
	if (n < 2 || n > MAX_NODE || me == 0 || me > n)
		bench_die("run under loco-run -n N (2 <= N <= 512, ids 1..N)", -EINVAL);
	if (servers == 0 || servers > n)
		servers = n;
	die_if("channel", loco_channel_create(m, NULL, "mm", n, &ch));
	loco_rpc_cfg_default(&cfg, NULL, 0);
	cfg.threads = 1;
	die_if("rpc", loco_rpc_create(ch, "m", &cfg, &ep));
	die_if("register", loco_rpc_register(ep, "echo", echo, NULL, NULL));
	die_if("object", loco_object_create(ch, "box", NULL, NULL, &obj));
	die_if("region", loco_region_create(obj, "b", sizeof(mine), LOCO_ACCESS_READ, &box));
	die_if("barrier", loco_barrier_create(ch, "bar", &bar));
	die_if("ack key", loco_ack_key_create(m, &ack));
	die_if("join", loco_channel_join(ch, TMO));
	die_if("sync", loco_rpc_sync(ep, TMO));
	loco_rpc_stats(ep, &st);
	mine.fixed = st.mem_bytes;
	die_if("barrier made", loco_barrier_wait(bar, TMO));
	for (uint32_t s = 1; s <= servers; s++) {
		int ret;

		if (s == me)
			continue;
		ret = loco_rpc_call_return(ep, s, loco_rpc_id("echo"), &s, sizeof(s), NULL, 0, NULL,
		                           TMO);
		die_if("call", ret < 0 ? ret : 0);
	}
	die_if("barrier called", loco_barrier_wait(bar, TMO));
	loco_rpc_stats(ep, &st);
	mine.mem = st.mem_bytes;
	mine.out = st.pipes_out;
	mine.in = st.pipes_in;
	memcpy(loco_region_ptr(box), &mine, sizeof(mine));
	die_if("barrier counted", loco_barrier_wait(bar, TMO));
	if (me == 1) {
		all = calloc(n + 1, sizeof(*all));
		if (all == NULL)
			bench_die("calloc", -ENOMEM);
		all[1] = mine;
		for (uint32_t q = 2; q <= n; q++) {
			loco_rref_t r;

			die_if("remote", loco_region_remote(box, q, &r));
			die_if("read", loco_read(box, 0, &r, 0, sizeof(mine), ack));
			die_if("read wait", loco_ack_wait(ack, TMO));
			memcpy(&all[q], loco_region_ptr(box), sizeof(mine));
		}
		report(all, n, servers);
		free(all);
	}
	die_if("barrier read", loco_barrier_wait(bar, TMO));
	loco_ack_key_destroy(ack);
	loco_barrier_destroy(bar);
	loco_rpc_destroy(ep);
	loco_object_destroy(obj);
	die_if("channel destroy", loco_channel_destroy(ch));
	loco_fini(m);
	return 0;
}
