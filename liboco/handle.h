/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * handle.h -- live and dead handles (loco_handle_alloc(), channel.h): what
 * liboco's own handles (manager, channel, object, ack key, poller) use.
 */
#ifndef LC_HANDLE_H
#define LC_HANDLE_H

#include <stddef.h>

#include <loco/channel.h>

/* lc_handle_alloc -- zeroed handle memory tied to @m (NULL: to none); NULL on ENOMEM. */
void *lc_handle_alloc(loco_manager_t *m, size_t size);

/* lc_handle_kill -- mark @h dead (checks give -EBADF from now on); it stays allocated. */
void lc_handle_kill(void *h);

/* lc_handle_bury -- kill @h and give its memory to the graveyard. NULL-safe. */
void lc_handle_bury(void *h);

/*
 * lc_handle_bury_fn -- lc_handle_bury(), and the graveyard calls @fini(@h)
 * before it frees the memory: what a dead handle's late calls may still
 * read lives as long as the handle does.
 */
void lc_handle_bury_fn(void *h, void (*fini)(void *h));

/*
 * lc_handle_fini_manager -- at loco_fini(): every handle of @m still alive
 * is killed, and buried unless @keep (then its memory is never freed:
 * loco_fini() keeps what objects left open may still run on).
 */
void lc_handle_fini_manager(loco_manager_t *m, int keep);

/* lc_handle_ok -- loco_handle_check() for liboco: 0, -EINVAL (NULL), -EBADF. */
#define lc_handle_ok(h) loco_handle_check(h)

#endif /* LC_HANDLE_H */
