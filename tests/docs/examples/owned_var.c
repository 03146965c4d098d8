/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * owned_var.c -- loco_owned_var(3): EXAMPLE's status record. Node 1 publishes it with
 * status_publish(); once it has, the others print it with status_print() and load it.
 */
#include <loco.h>
#include <loco/owned_var.h>

#include "docex.h"

#include "owned_var.inc"

static loco_channel_t *ch;
static loco_owned_var_t *ov;
static loco_ack_key_t *ack;

static int run(struct dx *x)
{
	struct status s = {.seq = 7, .temperature = 21.5, .load = {0.25, 0.5}};
	int ret;

	if ((ret = dx_channel(x, "owned_var", x->nodes, &ch)) || (ret = status_open(ch, &ov)) ||
	    (ret = loco_ack_key_create(x->m, &ack)) || (ret = dx_join(ch)))
		return dx_err("owned_var", "setup", ret);
	if (x->me == 1)
		return dx_err("owned_var", "status_publish", status_publish(ov, &s, ack));
	return 0;
}

/* node 1's push has landed: its wait returned before the driver's barrier */
static int check(struct dx *x)
{
	struct status s = {0};
	int ret = 0;

	if (x->me != 1 && ov != NULL) {
		status_print(ov);
		ret = dx_err("owned_var", "load", loco_owned_var_load(ov, &s));
		if (ret == 0)
			ret = dx_check("owned_var", s.seq == 7 && s.temperature == 21.5,
			               "loaded seq %llu, %.1f C", (unsigned long long)s.seq,
			               s.temperature);
	}
	return ret;
}

static int fini(struct dx *x)
{
	(void)x;
	loco_ack_key_destroy(ack);
	loco_owned_var_destroy(ov);
	loco_channel_destroy(ch);
	ack = NULL, ov = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_owned_var[] = {
    {"owned_var", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
