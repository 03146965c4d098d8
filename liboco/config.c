/* SPDX-License-Identifier: BSD-2-Clause */
/* config.c -- the settings table and its reading (config.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "wait.h"

#define FAIL_TIMEOUT_MIN_MS 100
#define LC_MAX_INLINE_MAX   4096u /* (the tcp provider's segment bounds it too) */

const struct lc_config_entry lc_config_table[] = {
    {"LOCO_FABRIC", "auto",
     "fabric provider: auto (shm to this host's peers, tcp or verbs to others), tcp, shm or "
     "verbs"},
    {"LOCO_DEVICE", NULL, "fabric device (verbs: mlx5_0 or mlx5_0:2); unset: the first usable"},
    {"LOCO_ADDR", "127.0.0.1:0", "control-plane address ip[:port] of this node"},
    {"LOCO_JOIN", NULL, "ip:port[,ip:port...] of live members to join through; unset: start alone"},
    {"LOCO_NODE_ID", "1", "this node's id, >= 1, unique in the cluster (needed to join)"},
    {"LOCO_NODES", NULL,
     "how many nodes the job was started with (loco-run sets it; under PMIx: the job size)"},
    {"LOCO_PMIX", "auto",
     "PMIx bootstrap: auto (when started by a PMIx server: mpirun, srun --mpi=pmix), 0 never, "
     "1 required"},
    {"LOCO_SECRET", "loco", "cluster secret; members prove they know it"},
    {"LOCO_FAIL_TIMEOUT_MS", "1000",
     "failure bound: a member silent this long is suspected (then probed)"},
    {"LOCO_JOIN_TIMEOUT_MS", "10000", "how long joining and connecting to members is retried"},
    {"LOCO_REJOIN", "1", "1: a node excluded from the view while alive rejoins by itself; 0: not"},
    {"LOCO_LOG", "warn", "log level: error, warn, info, debug, none"},
    {"LOCO_LOG_TIME", "mono",
     "log line time: mono (s since start), wall (UTC date and time) or none"},
    {"LOCO_TCP_SLOW_WRITE", NULL, "tcp test knob: land WRITEs line-shuffled, <ns> per word"},
    {"LOCO_SHM_SLOW_WRITE", NULL,
     "shm test knob: peers land WRITEs here line-shuffled, <ns> per word"},
    {"LOCO_MAX_INLINE", "256",
     "largest payload a WRITE may carry inline (copied at post; verbs: at most what the device "
     "takes)"},
    {"LOCO_MANY_MANAGERS", NULL, "test knob: 1 lets one process run several managers at once"},
    {"LOCO_WAIT", "adaptive",
     "how waits wait: adaptive (spin a window learnt from recent waits, 20-100 us, yielding "
     "while the host is oversubscribed, then sleep), spin (never sleep), sleep (spin 5 us, then "
     "sleep 50 us growing to 1 ms, 4 ms after 20 ms of waiting), block (as sleep, woken by "
     "completions and the progress thread; on tcp sleeping in the fabric as sleep does)"},
    {"LOCO_WAIT_WINDOW_US", NULL,
     "adaptive: spin this fixed window (1-1000 us) instead of the one learnt from recent "
     "waits"},
    {"LOCO_TCP_SPIN_US", NULL,
     "tcp: how long the NIC thread keeps looking, yielding, after work before it blocks "
     "(default: 50 with LOCO_WAIT adaptive or spin while the host has CPUs to spare, else 0)"},
    {"LOCO_SPREAD", "1",
     "spin: the first join moves the joining thread to CPU (its index among this host's nodes) "
     "mod (CPUs it may use), mask unchanged; 0: leave placement to the scheduler"},
    {NULL, NULL, NULL},
};

/* entry -- the table's entry @name. */
static const struct lc_config_entry *entry(const char *name)
{
	for (const struct lc_config_entry *e = lc_config_table; e->name != NULL; e++)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* str -- a setting: the environment wins over the struct field, then the default. */
static const char *str(const char *name, const char *field)
{
	const char *v = getenv(name);

	if (v != NULL && *v != '\0')
		return v;
	return field != NULL && *field != '\0' ? field : entry(name)->def;
}

/* u32 -- a number; 0 (environment or field) means the default. */
static int u32(const char *name, uint32_t field, uint32_t *out)
{
	const char *v = getenv(name), *def = entry(name)->def;
	char *end;
	unsigned long x;

	if (v == NULL || *v == '\0') {
		*out = field ? field : (uint32_t)strtoul(def, NULL, 10);
		return 0;
	}
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end != '\0' || x > UINT32_MAX || *v == '-') {
		lc_log_err("manager: %s=%s is not a number", name, v);
		return -EINVAL;
	}
	*out = x ? (uint32_t)x : (uint32_t)strtoul(def, NULL, 10);
	return 0;
}

/*
 * wait_window -- LOCO_WAIT_WINDOW_US into *@ns: 0 when unset (the window
 * is learnt), else a whole number of microseconds from
 * LC_WAIT_WINDOW_FIXED_MIN_US to _MAX_US, for the adaptive policy only.
 */
static int wait_window(int policy, int64_t *ns)
{
	const char *v = getenv("LOCO_WAIT_WINDOW_US");
	unsigned long x;
	char *end;

	*ns = 0;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end != '\0' || *v < '0' || *v > '9' || x < LC_WAIT_WINDOW_FIXED_MIN_US ||
	    x > LC_WAIT_WINDOW_FIXED_MAX_US) {
		lc_log_err("manager: LOCO_WAIT_WINDOW_US=%s: say a whole number of microseconds "
		           "from %d to %d (the adaptive policy's spin window; unset: learnt)",
		           v, LC_WAIT_WINDOW_FIXED_MIN_US, LC_WAIT_WINDOW_FIXED_MAX_US);
		return -EINVAL;
	}
	if (policy != LOCO_WAIT_ADAPTIVE) {
		lc_log_err("manager: LOCO_WAIT_WINDOW_US=%s is the adaptive policy's window: "
		           "unset it, or say LOCO_WAIT=adaptive",
		           v);
		return -EINVAL;
	}
	*ns = (int64_t)x * 1000;
	return 0;
}

/* node_id_set -- whether LOCO_NODE_ID names an id (0 means "the default"). */
static int node_id_set(void)
{
	const char *v = getenv("LOCO_NODE_ID");

	return v != NULL && *v != '\0' && strtoul(v, NULL, 10) != 0;
}

/* nodes -- LOCO_NODES: the job's node count; 0 when unset or malformed (warned: it is the
 * application's setting as much as ours). */
static int nodes(uint32_t *out)
{
	const char *v = getenv("LOCO_NODES");
	char *end;
	unsigned long x;

	*out = 0;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end != '\0' || x > UINT32_MAX || *v == '-') {
		lc_log_warn("manager: LOCO_NODES=%s is not a number: ignored", v);
		return 0;
	}
	*out = (uint32_t)x;
	return 0;
}

int lc_config_read(const loco_config_t *cfg, struct lc_config *out)
{
	static const loco_config_t none;
	struct lc_config c;
	const char *v;
	int ret;

	if (cfg == NULL)
		cfg = &none;
	c.fabric = str("LOCO_FABRIC", cfg->fabric);
	c.device = str("LOCO_DEVICE", cfg->device);
	c.addr = str("LOCO_ADDR", cfg->addr);
	c.join = str("LOCO_JOIN", cfg->join);
	c.secret = str("LOCO_SECRET", cfg->secret);
	ret = u32("LOCO_FAIL_TIMEOUT_MS", cfg->fail_timeout_ms, &c.fail_timeout_ms);
	if (ret == 0)
		ret = u32("LOCO_JOIN_TIMEOUT_MS", cfg->join_timeout_ms, &c.join_timeout_ms);
	if (ret == 0)
		ret = u32("LOCO_MAX_INLINE", 0, &c.max_inline);
	if (ret == 0 && c.max_inline > LC_MAX_INLINE_MAX) {
		lc_log_err("manager: LOCO_MAX_INLINE=%u: at most %u", (unsigned)c.max_inline,
		           (unsigned)LC_MAX_INLINE_MAX);
		ret = -EINVAL;
	}
	if (ret)
		return ret;
	v = getenv("LOCO_SPREAD");
	c.spread = v == NULL || *v == '\0' || strcmp(v, "1") == 0;
	if (v != NULL && *v != '\0' && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
		lc_log_err("manager: LOCO_SPREAD=%s: say 0 or 1", v);
		return -EINVAL;
	}
	c.rejoin = !cfg->no_rejoin;
	if (getenv("LOCO_REJOIN") != NULL && *getenv("LOCO_REJOIN") != '\0')
		c.rejoin = strcmp(getenv("LOCO_REJOIN"), "0") != 0;
	c.wait = cfg->wait <= LOCO_WAIT_ADAPTIVE ? (int)cfg->wait : -1;
	if (getenv("LOCO_WAIT") != NULL && *getenv("LOCO_WAIT") != '\0' &&
	    lc_wait_parse(getenv("LOCO_WAIT"), &c.wait) != 0)
		c.wait = -1;
	if (c.wait < 0) {
		if (getenv("LOCO_WAIT") != NULL && *getenv("LOCO_WAIT") != '\0')
			lc_log_err("manager: LOCO_WAIT=%s: say adaptive, spin, sleep or block",
			           getenv("LOCO_WAIT"));
		else
			lc_log_err("manager: cfg->wait %u: not an enum loco_wait_policy (0-%d)",
			           cfg->wait, LOCO_WAIT_ADAPTIVE);
		return -EINVAL;
	}
	if (c.wait == LOCO_WAIT_DEFAULT)
		c.wait = LOCO_WAIT_ADAPTIVE;
	ret = wait_window(c.wait, &c.wait_window_ns);
	if (ret)
		return ret;
	if (c.fail_timeout_ms < FAIL_TIMEOUT_MIN_MS)
		c.fail_timeout_ms = FAIL_TIMEOUT_MIN_MS;
	/* the node id defaults to 1 only for a node that starts alone */
	ret = u32("LOCO_NODE_ID", cfg->node_id, &c.node_id);
	if (ret == 0)
		ret = nodes(&c.nodes);
	if (ret)
		return ret;
	if (c.join != NULL && (cfg->node_id == 0 && !node_id_set())) {
		lc_log_err("manager: a joining node needs an id: set LOCO_NODE_ID (>= 1)");
		return -EINVAL;
	}
	*out = c;
	return 0;
}
