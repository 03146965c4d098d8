/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * queue-kill-wrap.c -- linked into queue-mpsc with -Wl,--wrap=loco_rop_post:
 * once the test sets queue_test_die, the next WRITE posted (the queue's
 * WRITE of an item, right after its claim, which is a CAS) ends the
 * process instead: a producer that dies between its claim and its WRITE.
 */
#include <unistd.h>

#include <loco/channel.h>

extern int queue_test_die;

int __real_loco_rop_post(loco_rhandle_t *h, const loco_rop_t *op);
int __wrap_loco_rop_post(loco_rhandle_t *h, const loco_rop_t *op);

int __wrap_loco_rop_post(loco_rhandle_t *h, const loco_rop_t *op)
{
	if (queue_test_die && op != NULL && op->opcode == LOCO_ROP_WRITE)
		_exit(0);
	return __real_loco_rop_post(h, op);
}
