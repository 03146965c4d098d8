/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * names.c -- the manager's getters under their names since loco 0.11,
 * loco_manager_<noun> (loco/manager.h). Their bodies are still in
 * manager.c and view.c under the names before 0.11, which programs built
 * against loco 0.1-0.10 call and which stay exported (LOCO_0.1, LOCO_0.6
 * nodes of liboco.map); each new name calls its old one (a tail call).
 * When the manager is split by module, the bodies move under the new
 * names and these turn around.
 */
#define LOCO_ALLOW_DEPRECATED /* the old names are called here on purpose */

#include <loco/manager.h>

uint32_t loco_manager_node_id(const loco_manager_t *m)
{
	return loco_node_id(m);
}

const char *loco_manager_addr(const loco_manager_t *m)
{
	return loco_addr(m);
}

uint32_t loco_manager_job_size(const loco_manager_t *m)
{
	return loco_job_size(m);
}

uint64_t loco_manager_incarnation(const loco_manager_t *m)
{
	return loco_incarnation(m);
}

int loco_manager_members(loco_manager_t *m, uint32_t *ids, size_t max)
{
	return loco_members(m, ids, max);
}

int loco_manager_member_fabric(loco_manager_t *m, uint32_t node, const char **name)
{
	return loco_member_fabric(m, node, name);
}

int loco_manager_member_incarnation(loco_manager_t *m, uint32_t node, uint64_t *inc)
{
	return loco_member_incarnation(m, node, inc);
}

uint64_t loco_manager_view(loco_manager_t *m)
{
	return loco_view(m);
}
