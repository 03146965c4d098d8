/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc.c -- every node allocates blocks on every node's heap (its own
 * included), fills each with one WRITE, reads it back, checks it and
 * frees it; then prints how many allocations needed a round trip.
 *
 *   loco-run -n 3 ./ralloc [BLOCKS]           (or: mpirun --oversubscribe -n 3 ./ralloc)
 *
 * Exits 0 when every block read back what was written into it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/ralloc.h>

#define SEC    1000000000ll
#define MAXLEN 8192

static int fail(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, loco_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	unsigned blocks = argc > 1 ? (unsigned)atoi(argv[1]) : 200, bad = 0;
	loco_ralloc_cfg_t cfg;
	uint32_t n, me;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_ralloc_t *ra;
	loco_barrier_t *bar;
	loco_object_t *obj;
	loco_region_t *buf;
	loco_ack_key_t *ack;
	loco_ralloc_stats_t st;
	int ret;

	loco_ralloc_cfg_default(&cfg, 4u << 20); /* a 4 MiB heap on every node */
	if ((ret = loco_init(NULL, &m)))
		return fail("loco_init", ret);
	n = loco_manager_job_size(m) ? loco_manager_job_size(m) : 1; /* loco-run -n or mpirun -n */
	if ((ret = loco_channel_create(m, NULL, "ralloc", n, &ch)) ||
	    (ret = loco_ralloc_create(ch, "heap", &cfg, &ra)) ||
	    (ret = loco_barrier_create(ch, "done", &bar)) ||
	    (ret = loco_object_create(ch, "src", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "buf", 2 * MAXLEN, 0, &buf)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_channel_join(ch, 20 * SEC)))
		return fail("setup", ret);
	me = loco_manager_node_id(m);
	for (unsigned i = 0; i < blocks; i++) {
		uint8_t *out = loco_region_ptr(buf), *in = out + MAXLEN;
		size_t len = 1 + (i * 2654435761u) % MAXLEN;
		uint32_t host = 1 + i % n; /* node ids 1..n, as loco-run gives them */
		loco_rptr_t p;

		if ((ret = loco_ralloc_alloc(ra, host, len, &p, SEC)))
			return fail("alloc", ret);
		memset(out, (int)(me * 31 + i), len);
		memset(in, 0, len);
		/* requests to one node execute in order: the READ sees the WRITE */
		if ((ret = loco_write(buf, 0, &p.rref, 0, len, ack)) ||
		    (ret = loco_read(buf, MAXLEN, &p.rref, 0, len, ack)) ||
		    (ret = loco_ack_wait(ack, SEC)) || (ret = loco_ralloc_free(ra, &p)))
			return fail("use", ret);
		bad += memcmp(in, out, len) != 0;
	}
	loco_ralloc_stats(ra, &st);
	printf("node %u: %u blocks on %u heaps, %u bad; %llu of %llu allocations needed a "
	       "refill\n",
	       me, blocks, n, bad, (unsigned long long)st.slow, (unsigned long long)st.allocs);
	if ((ret = loco_barrier_wait(bar, 20 * SEC))) /* nobody frees its heap under the others */
		return fail("barrier", ret);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_barrier_destroy(bar);
	loco_ralloc_destroy(ra);
	loco_channel_destroy(ch);
	loco_fini(m);
	return bad != 0;
}
