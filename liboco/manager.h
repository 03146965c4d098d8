/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * manager.h -- the manager: one per process. struct loco_manager holds the
 * node's identity and one part per module; each module's part is a struct
 * declared in its own header, and only the module's own file touches its
 * fields (tools/check-owners, run by the unit suite, checks it). Other
 * files pass the part whole to the module's functions (&m->wait), or call
 * the module:
 *
 *   manager.c   loco_init()/loco_fini(), identity, accessors
 *   config.c    the settings table (LOCO_* variables, loco-info -c)
 *   progress.c  the progress thread: reaping, control I/O, timers, pollers  m->prog
 *   member.c    the member table, connection list, data links (member.h)    m->members
 *   member_conn.c  drives it: control connections, messages, timers, link    m->members
 *               failures (calls member.c, never the reverse)
 *   view.c      drives the membership state machine (view.h)                m->view
 *   membership/ the state machine itself (ms.h, opaque)                     m->ms
 *   dial.c      the dialer thread, control dials, the join's answer         m->dial
 *   auth.c      authentication of control connections (auth.h)
 *   conn.c      control connections and their send queues (conn.h)
 *   links.c     the node -> data link table (links.h)                       m->links
 *   linkin.c    data links others open to us, the self link (linkin.h)      m->linkin
 *   channel.c   channels and pairing; object callbacks (chan.h, chans.h)    m->chans
 *   chan_announce.c  a channel's region announcements, sent and received (chan.h)
 *   chan_peer.c / chan_object.c  a channel's peer table; its objects (chan.h)
 *   region.c    objects, registered regions, their graves (region.h)        m->graves
 *   rop.c       remote operations and fences
 *   wait.c      wait policies (LOCO_WAIT), object waiters (wait.h)          m->wait
 *   ack.c       ack keys and WRIDs (ack.h)                                  m->acks
 *   mem.c       registered-memory arenas (mem.h)                            m->mem
 *   poller.c    the progress thread's pollers (opaque)                      m->pollers
 *   spread.c    where the joining thread runs                               m->spread_done
 *   ctrl_wire.c the control-plane messages
 *
 * Threads: application threads post, reap and wait. The progress thread
 * owns membership, all control-plane I/O (handshakes included), object
 * callbacks and pollers. The dialer thread opens outgoing data links
 * (fab_connect() blocks, bounded) and hands them to the progress thread.
 *
 * Locking: m->lock (plain, never recursive) guards members, connections,
 * channels, objects and regions, whichever module owns them; it is never
 * held across a blocking call, and remote operations never take it. The
 * progress module's poll lock (m->prog) serializes fab_poll(); mem.c's
 * arena lock (m->mem), conn.h's tx_lock and the ack table's lock are
 * leaves.
 */
#ifndef LOCO_LC_MANAGER_H
#define LOCO_LC_MANAGER_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <loco.h>

#include "ack.h"
#include "chans.h"
#include "clock.h"
#include "config.h"
#include "ctrl_wire.h"
#include "dial.h"
#include "fabric/fabric.h"
#include "linkin.h"
#include "links.h"
#include "mem.h"
#include "member.h"
#include "poller.h"
#include "progress.h"
#include "region.h"
#include "util.h"
#include "view.h"
#include "wait.h"

struct loco_manager {
	/* identity and what every module shares (manager.c sets them up) */
	pthread_mutex_t lock; /* see above */
	pthread_cond_t cond;  /* with lock: a callback returned */
	uint32_t node_id;
	uint64_t inc;
	char fabric[LC_FABRIC_MAX + 1];
	char ctrl_addr[LC_ADDR_MAX + 1];
	char fab_addr[LC_ADDR_MAX + 1];
	uint8_t key[32]; /* derived from the cluster secret; the secret is not kept */
	struct lc_config cfg;
	struct lc_pmix *pmix; /* the PMIx bootstrap's strings (pmix_boot.h); NULL without it */
	struct fab *fab;
	int lfd, epfd,
	    evfd;           /* the control listener, the progress thread's epoll set, its wake fd */
	pthread_t progress; /* the progress thread */

	/* the modules: each one's fields are touched only by its own file (tools/check-owners) */
	struct lc_member_table members; /* member.c (members.h): members, connections */
	struct lc_ms *ms;               /* membership/ (ms.h, opaque), driven by view.c */
	struct lc_view_part view;       /* view.c (view.h): the installed view, app events */
	struct lc_dial_state dial;      /* dial.c (dial.h): dialer, control dials, join answer */
	struct lc_links links;          /* links.c (links.h): node -> data link */
	struct lc_linkin linkin;        /* linkin.c (linkin.h): data links others open to us */
	struct lc_chans chans;          /* channel.c (chans.h): channels, queued callbacks */
	struct lc_graves graves;        /* region.c (region.h): destroyed objects' regions */
	struct lc_prog prog;            /* progress.c (progress.h): the progress loop's state */
	struct lc_ack_table acks;       /* ack.c (ack.h): ack keys and WRIDs */
	struct lc_wait wait;            /* wait.c (wait.h): LOCO_WAIT, block-policy wake-ups */
	struct lc_mem mem;              /* mem.c (mem.h): registered-memory arenas */
	struct lc_pollers *pollers;     /* poller.c (opaque) */
	int spread_done;                /* spread.c: a join placed the joining thread (m->lock) */
};

#endif /* LOCO_LC_MANAGER_H */
