/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sst.c -- loco_sst(3): its four examples on two tables of one channel. "round" holds one
 * uint64_t per row (node N stores 10 N): the predicate of "Predicates" waits until every row
 * has reached 10, then the fetch of "One-word rows" finds the largest of the others' rows.
 * "load" is EXAMPLE's table: every node publishes its row; once all have, the loop of
 * DESCRIPTION reads every row, and loads_print() prints them.
 */
#include <semaphore.h>
#include <stdio.h>

#include <loco.h>
#include <loco/sst.h>

#include "docex.h"

static sem_t done_sem; /* what the predicate's trigger posts */

#include "sst_loads.inc"
#include "sst_predicate_fns.inc"

static loco_channel_t *ch;
static loco_sst_t *loads, *round_tab;
static loco_ack_key_t *ack;
static int rows_used, rows_bad;

/* sst_predicate: wait until every present row of @sst has reached @k */
static int wait_round(loco_sst_t *sst, uint64_t k)
{
#include "sst_predicate.inc"
	return 0;
}

/* sst_fetch: the largest counter, read at the sources */
static uint64_t largest(loco_sst_t *sst, uint32_t me, loco_ack_key_t *ack)
{
#include "sst_fetch.inc"
	return max;
}

/* sst_rows: what the loop of DESCRIPTION hands each row to */
static void use(uint32_t node, const struct load *l)
{
	rows_used++;
	rows_bad += l->round != 10ull * node || l->cpu != node / 10.0;
}

static int loop_rows(loco_sst_t *sst)
{
	struct load row;
#include "sst_rows.inc"
	return n;
}

static int run(struct dx *x)
{
	uint64_t mine = 10ull * x->me, max;
	struct load l = {.round = 10ull * x->me, .cpu = x->me / 10.0, .mem = 0.5};
	int ret;

	sem_init(&done_sem, 0, 0);
	if ((ret = dx_channel(x, "sst", x->nodes, &ch)) || (ret = loads_open(ch, &loads)) ||
	    (ret = loco_sst_create(ch, "round", sizeof(uint64_t), 64, &round_tab)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("sst", "setup", ret);
	if ((ret = loco_sst_store_mine(round_tab, &mine)) ||
	    (ret = loco_sst_push_broadcast(round_tab, ack)) < 0 ||
	    (ret = loco_ack_wait(ack, 10 * DX_SEC)))
		return dx_err("sst", "push", ret);
	if ((ret = loads_publish(loads, &l, ack)))
		return dx_err("sst", "loads_publish", ret);
	if ((ret = wait_round(round_tab, 10)))
		return dx_err("sst", "wait_round", ret);
	/* the largest among the other rows: the fragment skips this node's */
	max = largest(round_tab, x->me, ack);
	return dx_check("sst", max == 10ull * (x->me == x->nodes ? x->nodes - 1 : x->nodes),
	                "largest round %llu", (unsigned long long)max);
}

/* every node's row of "load" has landed everywhere: its loads_publish() waited for it */
static int check(struct dx *x)
{
	int n = loop_rows(loads);

	loads_print(loads);
	return dx_check("sst", n == (int)x->nodes && rows_used == n && rows_bad == 0,
	                "%d rows, %d used, %d wrong", n, rows_used, rows_bad);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	loco_sst_destroy(round_tab);
	loco_sst_destroy(loads);
	loco_channel_destroy(ch);
	sem_destroy(&done_sem);
	ack = NULL, round_tab = NULL, loads = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_sst[] = {
    {"sst", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
