/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * host_path.c -- the cached path to a word on a host node (host_path.h).
 * Public API only.
 */
#include <errno.h>

#include "host_path.h"

void host_path_init(struct host_path *p)
{
	p->kind = HOST_PATH_NONE;
	p->lost = 0;
	pthread_mutex_init(&p->lock, NULL);
}

void host_path_fini(struct host_path *p)
{
	pthread_mutex_destroy(&p->lock);
}

/* host_path_get -- the cached path, or look it up once under the lock. */
int host_path_get(struct host_path *p, const loco_region_t *word, uint32_t host, uint32_t me)
{
	int kind = __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE); /* pairs with the store below */
	loco_rref_t rr;

	if (__atomic_load_n(&p->lost, __ATOMIC_ACQUIRE)) /* pairs with host_path_lose() */
		return -ECONNRESET;
	if (kind != HOST_PATH_NONE)
		return kind;
	pthread_mutex_lock(&p->lock);
	kind = p->kind;
	if (kind == HOST_PATH_NONE) {
		int ret = loco_region_remote(word, host, &rr);

		if (ret == 0)
			ret = loco_rhandle_bind(word, &rr, &p->h);
		if (ret == 0) {
			kind = HOST_PATH_FABRIC;
		} else {
			/* -ENOENT: look again next time; not joined, a mismatch: the error */
			kind = host == me && ret == -ENOENT ? HOST_PATH_LOCAL : ret;
		}
		if (kind > 0)
			__atomic_store_n(&p->kind, kind, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&p->lock);
	return kind;
}
