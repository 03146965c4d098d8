/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * registry.c -- the providers built in, and opening one by name. Providers
 * use common.c's helpers and never this file (auto opens its halves
 * through their ops tables), so the fabric's files call one way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"
#include "fabric.h"
#include "names.h"
#include "provider.h"

static const struct fab_ops *const providers[] = {
    &fab_tcp_ops,
    &fab_shm_ops,
#ifdef LOCO_HAVE_VERBS
    &fab_verbs_ops,
#endif
    &fab_auto_ops,
};

#define NPROVIDERS (sizeof(providers) / sizeof(providers[0]))

const char *const *fab_provider_names(void)
{
	return fab_names_built();
}

bool fab_uses_device(struct fab *fab)
{
	if (fab != NULL && strcmp(fab->ops->name, "auto") == 0)
		fab = fab_auto_remote(fab);
	return fab != NULL && strcmp(fab->ops->name, "verbs") == 0;
}

bool fab_block_drives(struct fab *fab)
{
	return fab != NULL && strcmp(fab->ops->name, "tcp") == 0;
}

int fab_open(const char *name, const struct fab_attr *attr, struct fab **out)
{
	struct fab_attr a = {0};
	char built[64];

	if (out == NULL)
		return -EINVAL;
	if (name == NULL || *name == '\0')
		name = getenv("LOCO_FABRIC");
	if (name == NULL || *name == '\0')
		name = "auto";
	if (attr != NULL)
		a = *attr;
	fab_attr_defaults(&a);

	for (size_t i = 0; i < NPROVIDERS; i++) {
		if (strcmp(providers[i]->name, name) != 0)
			continue;
		if (providers[i]->size != sizeof(struct fab_ops) || providers[i]->open == NULL) {
			lc_log_err("fabric %s: ops table of size %zu, expected %zu", name,
			           providers[i]->size, sizeof(struct fab_ops));
			return -EPROTO;
		}
		return providers[i]->open(&a, out);
	}
	lc_log_err("fabric %s: no such provider in this build, which has: %s", name,
	           fab_names_list(built, sizeof(built)));
	return -ENOENT;
}
