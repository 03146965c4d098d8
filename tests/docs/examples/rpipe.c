/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe.c -- loco_rpipe(3): EXAMPLE's fragment on nodes 1 (writer) and 2 (reader): the writer
 * sends two messages, the reader takes both.
 */
#include <stdio.h>

#include <loco.h>
#include <loco/rpipe.h>

#include "docex.h"

#define SEC DX_SEC

static loco_channel_t *ch;
static loco_rpipe_t *pipe_;

static void fragment(loco_channel_t *ch, uint32_t me)
{
#include "rpipe.inc"
	pipe_ = p;
}

static int run(struct dx *x)
{
	int ret;

	if (x->me > 2)
		return 0;
	if ((ret = dx_channel(x, "rpipe", 2, &ch)))
		return dx_err("rpipe", "setup", ret);
	fragment(ch, x->me);
	return 0;
}

static int check(struct dx *x)
{
	loco_rpipe_stats_t st = {0};

	if (x->me > 2)
		return 0;
	loco_rpipe_stats(pipe_, &st);
	return dx_check("rpipe", pipe_ != NULL && st.msgs == 2, "node %u: %llu messages %s", x->me,
	                (unsigned long long)st.msgs, x->me == 1 ? "written" : "read");
}

static int fini(struct dx *x)
{
	(void)x;
	loco_rpipe_destroy(pipe_);
	loco_channel_destroy(ch);
	pipe_ = NULL, ch = NULL;
	return 0;
}

const struct dx_example dx_rpipe[] = {
    {"rpipe", run, check, fini},
    {NULL, NULL, NULL, NULL},
};
