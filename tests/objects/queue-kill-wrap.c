/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * queue-kill-wrap.c -- linked into queue-mpsc with -Wl,--wrap=loco_write:
 * once the test sets queue_test_die, the next loco_write() (the queue's
 * WRITE of an item, right after its claim) ends the process instead: a
 * producer that dies between its claim and its WRITE.
 */
#include <unistd.h>

#include <loco/channel.h>

extern int queue_test_die;

int __real_loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                      size_t len, loco_ack_key_t *ack);
int __wrap_loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                      size_t len, loco_ack_key_t *ack);

int __wrap_loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                      size_t len, loco_ack_key_t *ack)
{
	if (queue_test_die)
		_exit(0);
	return __real_loco_write(local, loff, remote, roff, len, ack);
}
