/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * chans.h -- the manager's channel registry and its queue of object
 * callbacks (channel.c). The manager holds a struct lc_chans (m->chans);
 * only channel.c touches its fields. The channel and object structs
 * themselves are in chan.h.
 */
#ifndef LOCO_LC_CHANS_H
#define LOCO_LC_CHANS_H

#include <stdint.h>

#include <loco.h>

struct lc_cb_event;

struct lc_chans {
	struct loco_channel *channels; /* m->lock */
	uint64_t seq;                  /* m->lock: orders object creation and queued callbacks */
	uint64_t next_chan_id;
	struct lc_cb_event *cb_head; /* callbacks queued for the progress thread */
	struct lc_cb_event **cb_tail;
	struct loco_object *cb_obj; /* the object whose callback runs now */
};

void lc_chans_init(loco_manager_t *m);
void lc_chan_subscribe(loco_manager_t *m);    /* to membership's events */
void lc_chan_dispatch(loco_manager_t *m);     /* progress thread, m->lock not held */
void lc_chan_events_free(loco_manager_t *m);  /* callbacks still queued at the end: dropped */
uint64_t lc_chan_seq_next(loco_manager_t *m); /* m->lock: the next creation number */
int lc_chan_any(loco_manager_t *m);           /* is a channel still open (a racy look) */
/*
 * lc_chan_open_objects -- how many objects the program left in @m's
 * channels, and the first one's names in *@obj, *@chan. m->lock.
 */
unsigned lc_chan_open_objects(loco_manager_t *m, const char **obj, const char **chan);

#endif /* LOCO_LC_CHANS_H */
