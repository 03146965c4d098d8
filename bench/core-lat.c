/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * core-lat.c -- latency of the runtime's remote operations: loco_write,
 * loco_read, loco_faa, loco_cas of 8 bytes to a peer node, each followed
 * by loco_ack_wait() on its ack key (what an object pays per synchronous
 * operation); then the same four through loco_rop_post() and a handle bound
 * at setup (h-write ...: no lookup of the node's link). Compare with
 * bench/fabric-lat (the raw fabric op, the floor).
 *
 *   loco-run -n 2 build/bench/core-lat [--iters N] [--json FILE]
 *
 * Node 1 measures; node 2 only hosts the memory (one-sided: it does no
 * work). Prints median, p99 and min per op and writes JSON.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>

#include "bench.h"

#define WARMUP 500
#define DONE   64 /* word index of the done flag */

/* done_seen -- a bench_poll() check: whether node 1 set the done word. */
static int done_seen(void *arg)
{
	volatile uint64_t *v = arg;

	return v[DONE] == 1;
}

#define OPS 8

/* one_op -- post operation @op of the benchmark (4..7: through @h) and wait for its ack. */
static int one_op(int op, loco_region_t *r, const loco_rref_t *peer, loco_rhandle_t *h,
                  loco_ack_key_t *ack)
{
	static const loco_rop_t hops[4] = {
	    {.opcode = LOCO_ROP_WRITE, .loff = 0, .roff = 0, .len = 8},
	    {.opcode = LOCO_ROP_READ, .loff = 8, .roff = 0, .len = 8},
	    {.opcode = LOCO_ROP_FAA, .loff = 16, .roff = 64, .value = 1},
	    {.opcode = LOCO_ROP_CAS, .loff = 24, .roff = 72},
	};
	loco_rop_t o;
	int ret;

	if (op >= 4) {
		o = hops[op - 4];
		o.local = r;
		o.acks[0] = ack;
		ret = loco_rop_post(h, &o);
		return ret ? ret : loco_ack_wait(ack, 10000000000ll);
	}
	switch (op) {
	case 0:
		ret = loco_write(r, 0, peer, 0, 8, ack);
		break;
	case 1:
		ret = loco_read(r, 8, peer, 0, 8, ack);
		break;
	case 2:
		ret = loco_faa(r, 16, peer, 64, 1, ack);
		break;
	default:
		ret = loco_cas(r, 24, peer, 72, 0, 0, ack);
	}
	return ret ? ret : loco_ack_wait(ack, 10000000000ll);
}

int main(int argc, char **argv)
{
	static const char *const names[OPS] = {"write",   "read",   "faa",   "cas",
	                                       "h-write", "h-read", "h-faa", "h-cas"};
	const char *json = NULL;
	char json_default[4096];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
	loco_ack_key_t *ack;
	loco_rref_t peer;
	loco_rhandle_t h;
	volatile uint64_t *v;
	long iters = 20000;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
			iters = atol(argv[++i]);
		} else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			json = argv[++i];
		} else {
			fprintf(stderr, "usage: loco-run -n 2 %s [--iters N] [--json FILE]\n",
			        argv[0]);
			return 2;
		}
	}
	if (iters < 100)
		iters = 100;
	if ((ret = loco_init(NULL, &m))) {
		fprintf(stderr, "loco_init: %s\n", loco_strerror(ret));
		return 1;
	}
	if ((ret = loco_channel_create(m, NULL, "core-lat", 2, &ch)) ||
	    (ret = loco_object_create(ch, "bench", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "mem", 4096,
	                              LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC,
	                              &r)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_channel_join(ch, 20000000000ll))) {
		fprintf(stderr, "setup: %s\n", loco_strerror(ret));
		return 1;
	}
	v = loco_region_ptr(r);
	if (loco_manager_node_id(m) == 1) {
		double *s = malloc((size_t)iters * sizeof(*s)), med[OPS], p99[OPS], min[OPS];
		FILE *f;

		if (s == NULL || (ret = loco_region_remote(r, 2, &peer)) ||
		    (ret = loco_rhandle_bind(r, &peer, &h))) {
			fprintf(stderr, "node 2's region: %s\n", loco_strerror(ret));
			return 1;
		}
		printf("core-lat: 8-byte operations + loco_ack_wait, %ld iterations after %d "
		       "warm-up\n",
		       iters, WARMUP);
		printf("op       median us      p99 us      min us\n");
		for (int op = 0; op < OPS; op++) {
			for (long i = 0; i < iters + WARMUP; i++) {
				double t0 = bench_now_us();

				if ((ret = one_op(op, r, &peer, &h, ack))) {
					fprintf(stderr, "%s: %s\n", names[op], loco_strerror(ret));
					return 1;
				}
				if (i >= WARMUP)
					s[i - WARMUP] = bench_now_us() - t0;
			}
			qsort(s, (size_t)iters, sizeof(*s), bench_cmp_double);
			med[op] = s[iters / 2];
			p99[op] = s[iters * 99 / 100];
			min[op] = s[0];
			printf("%-8s %9.3f %11.3f %11.3f\n", names[op], med[op], p99[op], min[op]);
		}
		if (json == NULL)
			json =
			    bench_result_path(json_default, sizeof(json_default), "core-lat.json");
		f = fopen(json, "w");
		if (f != NULL) {
			fprintf(f,
			        "{\"bench\": \"core-lat\", \"iters\": %ld, \"unit\": \"us\", "
			        "\"ops\": {",
			        iters);
			for (int op = 0; op < OPS; op++)
				fprintf(
				    f, "%s\"%s\": {\"median\": %.2f, \"p99\": %.2f, \"min\": %.2f}",
				    op ? ", " : "", names[op], med[op], p99[op], min[op]);
			fprintf(f, "}}\n");
			fclose(f);
			printf("results: %s\n", json);
		} else {
			fprintf(stderr, "cannot write %s (--json FILE names another)\n", json);
		}
		free(s);
		/* tell node 2 we are done: word DONE, apart from the measured words */
		v[DONE] = 1;
		if ((ret = loco_write(r, DONE * 8, &peer, DONE * 8, 8, ack)) == 0)
			loco_ack_wait(ack, 10000000000ll);
	} else {
		bench_poll(done_seen, NULL, (void *)v, 50000, 300000); /* bounded: 300 s */
	}
	sleep(1);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
