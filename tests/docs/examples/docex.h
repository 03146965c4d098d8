/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * docex.h -- what the files of tests/docs/examples/ share. Each file takes the
 * examples of one man page that are not whole programs (units: functions;
 * fragments: statements), #includes them as the docs show them (the build
 * extracts NAME.inc from the Markdown: tests/docs/examples.py), and runs them
 * on the nodes of one job: driver.c calls every example's run() on every
 * node, then its check(), then its fini(), with a barrier after each.
 */
#ifndef DOCEX_H
#define DOCEX_H

#include <stdbool.h>
#include <stdint.h>

#include <loco.h>

#define DX_SEC 1000000000ll

/* what an example is given */
struct dx {
	loco_manager_t *m;
	uint32_t me;    /* this node's id: 1 .. nodes */
	uint32_t nodes; /* loco_manager_job_size() */
};

/*
 * An example: run() on every node (a node an example does not use returns 0 at
 * once); once every node has returned from it, check() (may be NULL); once every
 * node has returned from that, fini() (may be NULL), which tears down what run()
 * made, also after a failure. Each returns 0, or a negative error code or 1 (a
 * check failed) after saying what on stderr.
 */
struct dx_example {
	const char *name;
	int (*run)(struct dx *x);
	int (*check)(struct dx *x);
	int (*fini)(struct dx *x);
};

/* dx_channel -- a channel of the examples' own, expecting @nodes nodes. */
int dx_channel(struct dx *x, const char *name, uint32_t nodes, loco_channel_t **ch);

/* dx_join -- loco_channel_join() with a 20 s bound. */
int dx_join(loco_channel_t *ch);

/* dx_err -- "example: what: loco_strerror(err)" on stderr when @err != 0; returns @err. */
int dx_err(const char *example, const char *what, int err);

/* dx_check -- when !@ok, "example: FAILED: message" on stderr and 1; else 0. */
int dx_check(const char *example, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* dx_check_slots -- dx_check() that @slot[i] == i for every node i in 1..@nodes (each node
 * wrote its id into its slot of every copy); 0 or 1. */
int dx_check_slots(const char *example, const uint64_t *slot, uint32_t nodes);

/* the examples, one array per page, each ended by {NULL} */
extern const struct dx_example dx_ack[], dx_atomic_var[], dx_barrier[], dx_channel_ex[], dx_lock[],
    dx_map[], dx_object[], dx_owned_var[], dx_queue[], dx_ralloc[], dx_rop[], dx_reduce[], dx_rpc[],
    dx_rpipe[], dx_shared_region[], dx_sst[], dx_strerror[], dx_version[];

#endif
