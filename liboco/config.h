/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config.h -- the manager's settings: one table of {name, default, doc}
 * (lc_config_table) that loco_init() reads and `loco-info -c` prints. An
 * environment variable wins over the loco_config_t field, which wins over
 * the default.
 *
 * Thread safety: MT-safe (reads the environment and @cfg only).
 */
#ifndef LOCO_LC_CONFIG_H
#define LOCO_LC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <loco.h>

struct lc_config_entry {
	const char *name; /* the environment variable */
	const char *def;  /* the default, as text; NULL: none */
	const char *doc;
};

/* The table, NULL-terminated: every LOCO_* setting the library reads. */
extern const struct lc_config_entry lc_config_table[];

/* The resolved settings of one manager. */
struct lc_config {
	const char *fabric; /* these point into the environment, @cfg or the table */
	const char *addr;
	const char *join;
	const char *secret;
	const char *device;
	uint32_t node_id;
	uint32_t nodes; /* LOCO_NODES (or the PMIx job size): the job's node count; 0 unknown */
	uint32_t fail_timeout_ms;
	uint32_t join_timeout_ms;
	uint32_t max_inline;    /* LOCO_MAX_INLINE: inline payloads asked of the fabric */
	int rejoin;             /* LOCO_REJOIN: an excluded node rejoins by itself (default 1) */
	int wait;               /* LOCO_WAIT: enum loco_wait_policy, never LOCO_WAIT_DEFAULT */
	int spread;             /* LOCO_SPREAD: spinning nodes of a host start on different CPUs */
	int64_t wait_window_ns; /* LOCO_WAIT_WINDOW_US: adaptive's window, fixed (0: learnt) */
};

/*
 * lc_config_read -- resolve every setting from the environment, @cfg (may
 * be NULL) and the defaults. Returns 0; -EINVAL for a malformed number or
 * a missing or zero node id (logged, naming the variable).
 */
int lc_config_read(const loco_config_t *cfg, struct lc_config *out);

#endif /* LOCO_LC_CONFIG_H */
