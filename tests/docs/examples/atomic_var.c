/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * atomic_var.c -- loco_atomic_var(3): EXAMPLE's ticket dispenser and one-shot flag, both
 * hosted on node 1. Every node draws 4 tickets (increasing), and claims the flag: one wins.
 */
#include <loco.h>
#include <loco/atomic_var.h>

#include "docex.h"

#include "atomic_var.inc"

#define TICKETS 4

static loco_channel_t *ch;
static loco_atomic_var_t *tickets, *flag;
static loco_ack_key_t *ack;
static int won;

static int run(struct dx *x)
{
	uint64_t mine[TICKETS];
	int ret;

	if ((ret = dx_channel(x, "atomic_var", x->nodes, &ch)) ||
	    (ret = loco_atomic_var_create(ch, "tickets", 1, &tickets)) ||
	    (ret = loco_atomic_var_create(ch, "flag", 1, &flag)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("atomic_var", "setup", ret);
	if ((ret = draw_tickets(tickets, ack, mine, TICKETS)))
		return dx_err("atomic_var", "draw_tickets", ret);
	for (int i = 1; i < TICKETS; i++)
		if ((ret =
		         dx_check("atomic_var", mine[i] > mine[i - 1], "ticket %d: %llu after %llu",
		                  i, (unsigned long long)mine[i], (unsigned long long)mine[i - 1])))
			return ret;
	won = try_claim(flag, x->me);
	return won < 0 ? won : 0;
}

/* every node drew its tickets, and claimed the flag; the winner is the one it names */
static int check(struct dx *x)
{
	uint64_t drawn = 0, winner = 0;
	int ret;

	if ((ret = dx_err("atomic_var", "read", loco_atomic_var_read(tickets, &drawn, DX_SEC))) ||
	    (ret = dx_err("atomic_var", "read", loco_atomic_var_read(flag, &winner, DX_SEC))))
		return ret;
	return dx_check("atomic_var", drawn == TICKETS * x->nodes, "%llu tickets drawn",
	                (unsigned long long)drawn) ||
	       dx_check("atomic_var", (winner == x->me) == (won == 1),
	                "node %llu holds the flag, try_claim() here returned %d",
	                (unsigned long long)winner, won);
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	loco_atomic_var_destroy(flag);
	loco_atomic_var_destroy(tickets);
	loco_channel_destroy(ch);
	ack = NULL, flag = NULL, tickets = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_atomic_var[] = {
    {"atomic_var", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
