/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * host_path.h -- objects/-private: how this node reaches a word kept on
 * one host node, for the objects built on such a word (atomic_var,
 * lock). Built on the public API only; not installed.
 *
 * Every node's object has a region holding the word; only the host's
 * copy is used. The first use looks the host's copy up and caches the
 * path: through the fabric (loco_region_remote(), bound to its link:
 * loco_rhandle_bind(); on the host itself, through its self link), or, on a host without a self link (its set-up
 * failed), locally. Once the host leaves, the path is lost for good
 * (-ECONNRESET), so that a host that restarts with a fresh word never
 * passes for the old one.
 *
 * Thread safety: MT-safe.
 */
#ifndef LOCO_OBJECTS_HOST_PATH_H
#define LOCO_OBJECTS_HOST_PATH_H

#include <pthread.h>
#include <stdint.h>

#include <loco.h>

enum host_path_kind {
	HOST_PATH_NONE = 0, /* not looked up yet */
	HOST_PATH_FABRIC,   /* rref: the host's word, through the fabric */
	HOST_PATH_LOCAL,    /* this node is the host, without a fabric path to itself */
};

struct host_path {
	pthread_mutex_t lock; /* serializes the look-up */
	int kind;             /* enum host_path_kind; published with release after h */
	int lost;             /* atomic: the host left (or its word is past knowing): sticky */
	loco_rhandle_t h;     /* HOST_PATH_FABRIC: the host's copy, bound (loco_rop_post()) */
};

/* host_path_init / _fini -- a path not looked up yet; its lock. */
void host_path_init(struct host_path *p);
void host_path_fini(struct host_path *p);

/*
 * host_path_get -- how to reach @host's copy of region @word from node
 * @me: HOST_PATH_FABRIC (p->h is valid from now on) or
 * HOST_PATH_LOCAL; -ENOENT (the host is not paired yet: try again later),
 * -ECONNRESET (host_path_lose() was called).
 */
int host_path_get(struct host_path *p, const loco_region_t *word, uint32_t host, uint32_t me);

/* host_path_lose -- make every later host_path_get() fail with -ECONNRESET. */
static inline void host_path_lose(struct host_path *p)
{
	__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE); /* pairs with host_path_get */
}

#endif /* LOCO_OBJECTS_HOST_PATH_H */
