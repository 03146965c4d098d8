/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * driver.c -- runs the man pages' examples that are not whole programs (docex.h) in one job:
 *
 *   loco-run -n 3 docs-examples            mpirun --oversubscribe -n 3 docs-examples
 *
 * Every node runs every example's run(), check() and fini() (docex.h), with a barrier after
 * each; NAME... runs only those. Prints "node N: K examples ok" and exits 0 when
 * every example passed on this node.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <loco.h>
#include <loco/barrier.h>

#include "docex.h"

int dx_channel(struct dx *x, const char *name, uint32_t nodes, loco_channel_t **ch)
{
	char full[64];

	snprintf(full, sizeof(full), "docex-%s", name);
	return loco_channel_create(x->m, NULL, full, nodes, ch);
}

int dx_join(loco_channel_t *ch)
{
	return loco_channel_join(ch, 20 * DX_SEC);
}

int dx_err(const char *example, const char *what, int err)
{
	if (err != 0)
		fprintf(stderr, "%s: %s: %s\n", example, what, loco_strerror(err));
	return err;
}

int dx_check(const char *example, bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return 0;
	fprintf(stderr, "%s: FAILED: ", example);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int dx_check_slots(const char *example, const uint64_t *slot, uint32_t nodes)
{
	int ret = dx_check(example, slot != NULL, "no region memory");

	for (uint32_t i = 1; ret == 0 && i <= nodes; i++)
		ret = dx_check(example, slot[i] == i, "slot %u holds %llu", i,
		               (unsigned long long)slot[i]);
	return ret;
}

static const struct dx_example *const pages[] = {
    dx_version,    dx_strerror, dx_channel_ex, dx_shared_region, dx_ack,    dx_owned_var,
    dx_atomic_var, dx_lock,     dx_sst,        dx_barrier,       dx_reduce, dx_object,
    dx_rpipe,      dx_ralloc,   dx_rpc,        dx_map,           dx_queue,  dx_rop,
};

static bool wanted(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return true;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	struct dx x = {0};
	loco_channel_t *ch;
	loco_barrier_t *sync;
	int ret, ok = 0, bad = 0;

	ret = loco_init(NULL, &x.m);
	if (ret)
		return dx_err("driver", "loco_init", ret), 1;
	x.me = loco_manager_node_id(x.m);
	x.nodes = loco_manager_job_size(x.m);
	if (x.nodes < 3 || x.me < 1 || x.me > x.nodes) {
		fprintf(stderr, "driver: wants 3 or more nodes with ids 1..N (node %u of %u)\n",
		        x.me, x.nodes);
		loco_fini(x.m);
		return 1;
	}
	if ((ret = loco_channel_create(x.m, NULL, "docex", x.nodes, &ch)) ||
	    (ret = loco_barrier_create(ch, "sync", &sync)) || (ret = dx_join(ch)))
		return dx_err("driver", "setup", ret), 1;
	for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++) {
		for (const struct dx_example *e = pages[p]; e->name != NULL; e++) {
			int r;

			if (!wanted(e->name, argc, argv))
				continue;
			/* every node has run it before anyone checks, and checked before anyone
			 * tears it down */
			r = e->run(&x);
			if ((ret = loco_barrier_wait(sync, 60 * DX_SEC)))
				return dx_err("driver", e->name, ret), 1;
			if (e->check != NULL && r == 0)
				r = e->check(&x);
			if ((ret = loco_barrier_wait(sync, 60 * DX_SEC)))
				return dx_err("driver", e->name, ret), 1;
			if (e->fini != NULL && e->fini(&x) != 0 && r == 0)
				r = 1;
			if ((ret = loco_barrier_wait(sync, 60 * DX_SEC)))
				return dx_err("driver", e->name, ret), 1;
			if (r == 0)
				ok++;
			else
				bad++,
				    fprintf(stderr, "node %u: example %s FAILED\n", x.me, e->name);
		}
	}
	printf("node %u: %d examples ok, %d failed\n", x.me, ok, bad);
	loco_barrier_destroy(sync);
	loco_channel_destroy(ch);
	loco_fini(x.m);
	return bad != 0;
}
