/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shared_region.c -- a raw region per node, written only on the public
 * object-author API: the proof that objects compose from outside liboco.
 */
#include <errno.h>
#include <stdlib.h>

#include <loco.h>
#include <loco/shared_region.h>

#include "obj_util.h"

struct loco_shared_region {
	loco_object_t *obj;
	loco_region_t *mem;
};

int loco_shared_region_create(loco_channel_t *ch, const char *name, size_t len, unsigned access,
                              loco_shared_region_t **out)
{
	loco_shared_region_t *sr;
	int ret;

	if (ch == NULL || name == NULL || len == 0 || out == NULL)
		return -EINVAL;
	ret = loco_handle_alloc(ch, sizeof(*sr), (void **)&sr);
	if (ret)
		return ret;
	ret = loco_object_create(ch, name, NULL, NULL, &sr->obj);
	if (ret)
		goto err_free;
	ret = loco_region_create(sr->obj, "mem", len, access, &sr->mem);
	if (ret)
		goto err_destroy_obj;
	*out = sr;
	return 0;

err_destroy_obj:
	loco_object_destroy(sr->obj);
err_free:
	loco_handle_free(sr);
	return ret;
}

void loco_shared_region_destroy(loco_shared_region_t *sr)
{
	OBJ_DESTROY_CHECK(sr);
	loco_object_destroy(sr->obj); /* frees its regions too */
	loco_handle_free(sr);
}

void *loco_shared_region_ptr(const loco_shared_region_t *sr)
{
	OBJ_CHECK_OR(sr, NULL);
	return loco_region_ptr(sr->mem);
}

size_t loco_shared_region_len(const loco_shared_region_t *sr)
{
	OBJ_CHECK_OR(sr, 0);
	return loco_region_len(sr->mem);
}

int loco_shared_region_write(loco_shared_region_t *sr, uint32_t node, size_t off, size_t len,
                             loco_ack_key_t *ack)
{
	loco_rref_t peer;
	int ret;

	OBJ_CHECK(sr);
	ret = loco_region_remote(sr->mem, node, &peer);
	return ret ? ret : loco_write(sr->mem, off, &peer, off, len, ack);
}

int loco_shared_region_read(loco_shared_region_t *sr, uint32_t node, size_t off, size_t len,
                            loco_ack_key_t *ack)
{
	loco_rref_t peer;
	int ret;

	OBJ_CHECK(sr);
	ret = loco_region_remote(sr->mem, node, &peer);
	return ret ? ret : loco_read(sr->mem, off, &peer, off, len, ack);
}
