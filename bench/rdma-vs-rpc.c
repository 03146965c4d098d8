/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rdma-vs-rpc.c -- the "RDMA vs RPC" study (Brock et al., BCL) redone on
 * LOCO's fabrics: what each one-sided operation costs against a WRITE,
 * and a hash table's insert and find done one-sided against the same
 * done by an rpc to the table's node.
 *
 * loco-run -n 2 build/bench/rdma-vs-rpc [--iters N] [--json FILE]
 *
 * Node 2 holds a table of SLOTS slots of 64 bytes and serves an rpc
 * endpoint (loco_rpc_progress() in a loop, as a server would); node 1
 * measures, each figure a median of N round trips:
 *   components  READ, WRITE, CAS and FAA of 8 bytes + loco_ack_wait(),
 *               and an rpc call_return of 8 bytes, each also as a ratio
 *               to the WRITE;
 *   find        one-sided: one READ of the key's slot, validated (even
 *               version, the key, a checksum of key and value; a torn or
 *               locked slot is read again); rpc: call_return "get",
 *               whose handler copies the value out;
 *   insert      one-sided, safe against other writers (BCL's CAS, PUT,
 *               publish): a CAS that locks the slot's version (even ->
 *               odd), then the WRITE of key, checksum and value and the
 *               WRITE of the next even version posted together (one link
 *               runs them in order) and waited for: two round trips;
 *               rpc: call_return "put", whose handler writes the slot.
 * A slot: [0] version (odd: being written) [8] key [16] checksum [24] 40
 * bytes of value. The components use a word past the slots. Keys are spread so that each has a slot of its own:
 * the study compares the ways to reach a slot, not hash functions.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/rpc.h>

#include "bench.h"

#define SEC     1000000000ll
#define TMO     (10 * SEC)
#define SLOTS   4096u
#define SLOT    64u
#define VAL     40u
#define WARMUP  500
#define SCRATCH ((size_t)SLOTS * SLOT) /* the components' word: past the table's slots */

enum {
	C_READ,
	C_WRITE,
	C_CAS,
	C_FAA,
	C_RPC,
	F_ONE,
	F_RPC,
	I_ONE,
	I_RPC,
	NFIG
};
static const char *fig_name[NFIG] = {"read",      "write",          "cas",      "faa",
                                     "rpc call",  "find one-sided", "find rpc", "insert one-sided",
                                     "insert rpc"};

static loco_region_t *table, *local;
static loco_rref_t peer_table;
static int fin;

static void die_if(const char *what, int ret)
{
	if (ret)
		bench_die(what, ret);
}

static uint64_t slot_sum(uint64_t key, const uint8_t *val)
{
	uint64_t h = 1469598103934665603ull ^ key;

	for (unsigned i = 0; i < VAL; i++)
		h = (h ^ val[i]) * 1099511628211ull;
	return h;
}

static uint8_t *slot_at(uint64_t key)
{
	return (uint8_t *)loco_region_ptr(table) + (key % SLOTS) * SLOT;
}

/* put: args key (8) + value (40): the server writes the slot as a one-sided insert would */
static int put(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t key, v, sum;
	uint8_t *s;

	(void)arg, (void)ret, (void)cap, (void)rl;
	if (msg->len != 8 + VAL)
		return -EINVAL;
	memcpy(&key, msg->data, 8);
	s = slot_at(key);
	v = __atomic_load_n((uint64_t *)(void *)s, __ATOMIC_RELAXED);
	__atomic_store_n((uint64_t *)(void *)s, v | 1, __ATOMIC_RELAXED);
	sum = slot_sum(key, (const uint8_t *)msg->data + 8);
	memcpy(s + 8, &key, 8);
	memcpy(s + 16, &sum, 8);
	memcpy(s + 24, (const uint8_t *)msg->data + 8, VAL);
	__atomic_store_n((uint64_t *)(void *)s, (v | 1) + 1, __ATOMIC_RELEASE);
	return 0;
}

/* get: args key (8); the value (40) back, or -ENOENT */
static int get(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t key, k;
	uint8_t *s;

	(void)arg;
	if (msg->len != 8 || cap < VAL)
		return -EINVAL;
	memcpy(&key, msg->data, 8);
	s = slot_at(key);
	memcpy(&k, s + 8, 8);
	if (k != key)
		return -ENOENT;
	memcpy(ret, s + 24, VAL);
	*rl = VAL;
	return 0;
}

static void fill_val(uint8_t *val, uint64_t key, long i)
{
	for (unsigned b = 0; b < VAL; b++)
		val[b] = (uint8_t)(key * 7 + (uint64_t)i + b);
}

/* one_find -- READ the key's slot into local[0..64) until it is whole; 0 or an error. */
static int one_find(uint64_t key, loco_ack_key_t *ack, uint8_t *val)
{
	const uint8_t *s = loco_region_ptr(local);

	for (int tries = 0; tries < 1000; tries++) {
		uint64_t v, k, sum;
		int ret = loco_read(local, 0, &peer_table, (key % SLOTS) * SLOT, SLOT, ack);

		if (ret == 0)
			ret = loco_ack_wait(ack, TMO);
		if (ret)
			return ret;
		memcpy(&v, s, 8);
		memcpy(&k, s + 8, 8);
		memcpy(&sum, s + 16, 8);
		if ((v & 1) == 0 && k == key && sum == slot_sum(key, s + 24)) {
			memcpy(val, s + 24, VAL);
			return 0;
		}
		if (v != 0 && (v & 1) == 0 && k != key)
			return -ENOENT;
	}
	return -EAGAIN;
}

/* one_insert -- CAS the version odd, then WRITE the slot's body and the next version. */
static int one_insert(uint64_t key, const uint8_t *val, loco_ack_key_t *ack)
{
	uint8_t *l = loco_region_ptr(local);
	size_t off = (key % SLOTS) * SLOT;
	uint64_t v = 0, old, sum = slot_sum(key, val);
	int ret;

	for (int tries = 0;; tries++) {
		if (tries == 1000)
			return -EAGAIN;
		ret = loco_cas(local, 0, &peer_table, off, v, v | 1, ack);
		if (ret == 0)
			ret = loco_ack_wait(ack, TMO);
		if (ret)
			return ret;
		memcpy(&old, l, 8);
		if (old == v)
			break;
		v = old & ~1ull; /* the version it has; (a writer's odd one: wait for it) */
	}
	memcpy(l + 64 + 8, &key, 8);
	memcpy(l + 64 + 16, &sum, 8);
	memcpy(l + 64 + 24, val, VAL);
	v = (v | 1) + 1;
	memcpy(l + 128, &v, 8);
	ret = loco_write(local, 64 + 8, &peer_table, off + 8, SLOT - 8, ack);
	if (ret == 0)
		ret =
		    loco_write(local, 128, &peer_table, off, 8, ack); /* after the body: one link */
	if (ret == 0)
		ret = loco_ack_wait(ack, TMO);
	return ret;
}

static double median(double *t, long n)
{
	qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
	return t[n / 2];
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"iters", required_argument, NULL, 'i'},
	    {"json", required_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	static const uint32_t nodes[] = {1, 2};
	const char *json = NULL, *prov = getenv("LOCO_FABRIC");
	char json_default[4096];
	double fig[NFIG], *t;
	long iters = 20000;
	loco_rpc_cfg_t cfg;
	loco_rpc_ep_t *ep;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_ack_key_t *ack;
	uint32_t me;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'i') {
			iters = atol(optarg);
		} else if (c == 'j') {
			json = optarg;
		} else {
			fprintf(stderr,
			        "usage: loco-run -n 2 rdma-vs-rpc [--iters N] [--json FILE]\n");
			return 2;
		}
	}
	if (iters < 10)
		return 2;
	if (prov == NULL)
		prov = "auto";
	t = calloc((size_t)iters, sizeof(*t));
	if (t == NULL)
		return 1;
	die_if("init", loco_init(NULL, &m));
	me = loco_manager_node_id(m);
	if (me != 1 && me != 2) {
		fprintf(stderr, "rdma-vs-rpc: run with loco-run -n 2\n");
		return 2;
	}
	die_if("channel", loco_channel_create(m, NULL, "rdma-vs-rpc", 2, &ch));
	loco_rpc_cfg_default(&cfg, nodes, 2);
	die_if("rpc", loco_rpc_create(ch, "kv", &cfg, &ep));
	die_if("register", loco_rpc_register(ep, "put", put, NULL, NULL));
	die_if("register", loco_rpc_register(ep, "get", get, NULL, NULL));
	die_if("register", loco_rpc_register(ep, "echo", bench_rpc_echo, NULL, NULL));
	die_if("register", loco_rpc_register(ep, "fin", bench_rpc_stop, &fin, NULL));
	die_if("object", loco_object_create(ch, "table", NULL, NULL, &obj));
	die_if("table", loco_region_create(
	                    obj, "table", (size_t)(SLOTS + 1) * SLOT,
	                    LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC, &table));
	die_if("local", loco_region_create(obj, "local", 256, LOCO_ACCESS_UNLISTED, &local));
	die_if("ack", loco_ack_key_create(m, &ack));
	die_if("join", loco_channel_join(ch, 20 * SEC));
	die_if("sync", loco_rpc_sync(ep, 20 * SEC));
	die_if("object sync", loco_object_sync(obj, 20 * SEC) < 0 ? -ETIMEDOUT : 0);
	die_if("peer table", loco_region_remote(table, 3 - me, &peer_table));

	if (me == 2) {
		bench_rpc_serve(&ep, 1, m, &fin);
	} else {
		uint32_t get_id = loco_rpc_id("get"), put_id = loco_rpc_id("put"),
		         echo_id = loco_rpc_id("echo");
		uint8_t args[8 + VAL], val[VAL];
		FILE *f;

		for (int k = 0; k < NFIG; k++) {
			for (long i = 0; i < iters + WARMUP; i++) {
				uint64_t key = (uint64_t)i % SLOTS, x = (uint64_t)i;
				double t0 = bench_now_us();
				int ret = 0;

				switch (k) {
				case C_READ:
					ret = loco_read(local, 0, &peer_table, SCRATCH, 8, ack);
					break;
				case C_WRITE:
					ret = loco_write(local, 0, &peer_table, SCRATCH, 8, ack);
					break;
				case C_CAS:
					ret = loco_cas(local, 0, &peer_table, SCRATCH, x, x, ack);
					break;
				case C_FAA:
					ret = loco_faa(local, 0, &peer_table, SCRATCH, 0, ack);
					break;
				case C_RPC:
					ret = loco_rpc_call_return(ep, 2, echo_id, &x, 8, &x, 8,
					                           NULL, TMO);
					break;
				case I_ONE:
					fill_val(val, key, i);
					ret = one_insert(key, val, ack);
					break;
				case I_RPC:
					fill_val(val, key, i);
					memcpy(args, &key, 8);
					memcpy(args + 8, val, VAL);
					ret = loco_rpc_call_return(
					    ep, 2, put_id, args, sizeof(args), NULL, 0, NULL, TMO);
					break;
				case F_ONE:
					ret = one_find(key, ack, val);
					break;
				case F_RPC:
					ret = loco_rpc_call_return(ep, 2, get_id, &key, 8, val, VAL,
					                           NULL, TMO);
					break;
				}
				if (ret == 0 && k <= C_FAA)
					ret = loco_ack_wait(ack, TMO);
				if (ret)
					bench_die(fig_name[k], ret);
				if (i >= WARMUP)
					t[i - WARMUP] = bench_now_us() - t0;
			}
			fig[k] = median(t, iters);
			/* the finds run after both inserts, so every key they look for is there */
			if (k == C_RPC) {
				/* fill the table before the finds: each key once, one-sided */
				for (uint64_t key = 0; key < SLOTS; key++) {
					fill_val(val, key, 0);
					die_if("fill", one_insert(key, val, ack));
				}
			}
		}
		/* with a result: node 2 ran the handler before node 1 goes */
		die_if("fin", loco_rpc_call_return(ep, 2, loco_rpc_id("fin"), NULL, 0, NULL, 0,
		                                   NULL, TMO));

		printf("rdma-vs-rpc: provider %s, %ld round trips each, medians\n", prov, iters);
		printf("%-18s %10s %9s\n", "operation", "us", "x write");
		for (int k = 0; k < NFIG; k++)
			printf("%-18s %10.3f %9.2f\n", fig_name[k], fig[k], fig[k] / fig[C_WRITE]);
		printf("find:   one-sided %.2fx rpc's; insert: one-sided %.2fx rpc's\n",
		       fig[F_ONE] / fig[F_RPC], fig[I_ONE] / fig[I_RPC]);
		if (json == NULL)
			json = bench_result_path(json_default, sizeof(json_default),
			                         "rdma-vs-rpc-%s.json", prov);
		f = fopen(json, "w");
		if (f != NULL) {
			fprintf(
			    f,
			    "{\"bench\": \"rdma-vs-rpc\", \"provider\": \"%s\", \"iters\": %ld, "
			    "\"unit\": \"us\", \"median\": {",
			    prov, iters);
			for (int k = 0; k < NFIG; k++)
				fprintf(f, "%s\"%s\": %.4f", k ? ", " : "", fig_name[k], fig[k]);
			fprintf(f, "}}\n");
			fclose(f);
			printf("results: %s\n", json);
		}
	}
	loco_ack_key_destroy(ack);
	loco_rpc_destroy(ep);
	loco_object_destroy(obj);
	loco_channel_destroy(ch);
	loco_fini(m);
	free(t);
	return 0;
}
