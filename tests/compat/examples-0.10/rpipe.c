/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe.c -- node 1 sends COUNT numbered lines to node 2 through a pipe:
 * even lines with the copying call, odd ones built in place (zero-copy
 * reserve/commit); node 2 reads them in place (peek/release), checks the
 * numbering and prints every 1000th line. Then node 2 answers "done"
 * through a second pipe, 2 -> 1.
 *
 *   loco-run -n 2 ./rpipe [COUNT]
 *
 * Exits 0 when every line arrived once, whole and in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco.h>
#include <loco/rpipe.h>

#define SEC  1000000000ll
#define RING (64 * 1024) /* bytes: a small ring, wrapped many times */

static int fail(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, loco_strerror(err));
	return 1;
}

/* sender -- node 1: COUNT lines, then wait for the answer. */
static int sender(loco_rpipe_t *out, loco_rpipe_t *back, unsigned long count)
{
	char line[64], ans[16];
	size_t len;
	int ret;

	for (unsigned long i = 0; i < count; i++) {
		if (i % 2 == 0) {
			len = (size_t)snprintf(line, sizeof(line), "line %lu", i);
			ret = loco_rpipe_write(out, line, len, 10 * SEC);
		} else {
			void *p; /* registered memory: the WRITE's source itself */

			ret = loco_rpipe_reserve(out, sizeof(line), &p, 10 * SEC);
			if (ret == 0)
				ret = loco_rpipe_commit(
				    out, (size_t)snprintf(p, sizeof(line), "line %lu", i));
		}
		if (ret)
			return fail("write", ret);
	}
	ret = loco_rpipe_read(back, ans, sizeof(ans) - 1, &len, 10 * SEC);
	if (ret)
		return fail("read the answer", ret);
	ans[len] = '\0';
	printf("node 1: sent %lu lines, node 2 says %s\n", count, ans);
	return strcmp(ans, "done") != 0;
}

/* receiver -- node 2: COUNT lines in place, then the answer. */
static int receiver(loco_rpipe_t *in, loco_rpipe_t *back, unsigned long count)
{
	char want[64];
	const void *p;
	size_t len;
	int ret;

	for (unsigned long i = 0; i < count; i++) {
		ret = loco_rpipe_peek(in, &p, &len, 10 * SEC);
		if (ret)
			return fail("peek", ret);
		snprintf(want, sizeof(want), "line %lu", i);
		if (len != strlen(want) || memcmp(p, want, len) != 0) {
			fprintf(stderr, "node 2: expected \"%s\", got %zu bytes\n", want, len);
			return 1;
		}
		if (i % 1000 == 0)
			printf("node 2: %.*s\n", (int)len, (const char *)p);
		loco_rpipe_release(in); /* the space goes back to node 1 in batches */
	}
	ret = loco_rpipe_write(back, "done", 4, 10 * SEC);
	return ret ? fail("answer", ret) : 0;
}

int main(int argc, char **argv)
{
	unsigned long count = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	loco_rpipe_t *fwd, *back;
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
	if ((ret = loco_channel_create(m, NULL, "example-rpipe", 2, &ch)) ||
	    (ret = loco_rpipe_create(ch, "fwd", 1, 2, RING, &fwd)) ||
	    (ret = loco_rpipe_create(ch, "back", 2, 1, 4096, &back)) ||
	    (ret = loco_channel_join(ch, 20 * SEC)))
		return fail("setup", ret);
	ret = me == 1 ? sender(fwd, back, count) : receiver(fwd, back, count);
	/* node 1 reads the answer only after node 2 read everything: both may go */
	loco_rpipe_destroy(back);
	loco_rpipe_destroy(fwd);
	loco_channel_destroy(ch);
	loco_fini(m);
	return ret;
}
