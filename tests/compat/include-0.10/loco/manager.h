/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/manager.h -- the per-process manager: fabric, node identity,
 * membership, registered memory, the progress thread. See loco_init(3).
 *
 * Thread safety: MT-safe.
 */
#ifndef LOCO_MANAGER_H
#define LOCO_MANAGER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_manager loco_manager_t;

/*
 * How a waiting thread waits (LOCO_WAIT; see loco_init(3)): spin (never
 * sleeps), sleep (spin a few us, then sleep 50 us growing to 1 ms; the
 * default), block (as sleep, but sleeping on an event the completion path
 * and the progress thread signal). Appeared in loco 0.4.
 */
enum loco_wait_policy {
	LOCO_WAIT_DEFAULT = 0, /* sleep */
	LOCO_WAIT_SPIN = 1,
	LOCO_WAIT_SLEEP = 2,
	LOCO_WAIT_BLOCK = 3,
};

/*
 * Manager configuration. Zero/NULL fields take defaults; the environment
 * variable named beside each field overrides it when set.
 */
typedef struct loco_config {
	const char *fabric;       /* LOCO_FABRIC: "auto" (default), "tcp", "shm", "verbs" */
	const char *device;       /* LOCO_DEVICE: fabric device; NULL = first usable */
	const char *addr;         /* LOCO_ADDR: control-plane "ip[:port]" (127.0.0.1:0) */
	const char *join;         /* LOCO_JOIN: "ip:port" of any live member; NULL = start alone */
	uint32_t node_id;         /* LOCO_NODE_ID: unique, >= 1 (1 when alone and unset) */
	const char *secret;       /* LOCO_SECRET: cluster secret (default: "loco") */
	uint32_t fail_timeout_ms; /* LOCO_FAIL_TIMEOUT_MS: failure detection bound (1000) */
	uint32_t join_timeout_ms; /* LOCO_JOIN_TIMEOUT_MS: how long to retry joining (10000) */
	uint32_t no_rejoin;       /* LOCO_REJOIN=0: an excluded node does not rejoin by itself */
	uint32_t wait;            /* LOCO_WAIT: enum loco_wait_policy (0: sleep); loco 0.4 */
} loco_config_t;

/*
 * loco_init -- create the process's manager: open the fabric, listen for
 * peers, and start alone or join the cluster through @cfg->join.
 * @cfg may be NULL (all defaults + environment). Started by a PMIx server
 * (mpirun, srun --mpi=pmix) in a build with libpmix, it takes the node id
 * (rank + 1), the job size, the secret and the members to join from PMIx,
 * where no LOCO_* variable or @cfg field sets them (loco_init(3)).
 * Returns 0 and sets *@out; -EINVAL (bad configuration), -ENOENT (no such
 * fabric), -ETIMEDOUT (no member answered in join_timeout_ms),
 * -LOCO_EAUTH (the cluster refused our secret), -EADDRINUSE, -ENOMEM,
 * -ENOTCONN (PMIx failed).
 */
int loco_init(const loco_config_t *cfg, loco_manager_t **out);

/*
 * loco_fini -- leave the cluster gracefully (peers see a leave, not a
 * failure) and free the manager. Channels must be destroyed first. NULL-safe.
 */
void loco_fini(loco_manager_t *m);

/* loco_node_id -- this node's id. */
uint32_t loco_node_id(const loco_manager_t *m);

/* loco_addr -- the control-plane "ip:port" through which other nodes join this one. */
const char *loco_addr(const loco_manager_t *m);

/*
 * loco_job_size -- how many nodes the launcher started this job with: the
 * PMIx job size under mpirun or srun (loco_init(3)), else LOCO_NODES (which
 * loco-run sets); 0 when neither says. Nodes added later do not count.
 * 0 for NULL. Since loco 0.6.
 */
uint32_t loco_job_size(const loco_manager_t *m);

/* loco_incarnation -- this node's incarnation (differs on every start). */
uint64_t loco_incarnation(const loco_manager_t *m);

/*
 * loco_members -- the node ids of the live members this node sees, itself
 * included, ascending. Writes up to @max ids to @ids and returns the
 * number of members (which may exceed @max).
 */
int loco_members(loco_manager_t *m, uint32_t *ids, size_t max);

/*
 * loco_member_fabric -- the fabric that carries this node's data link to
 * member @node: "tcp", "shm" or "verbs" (with LOCO_FABRIC=auto, chosen per
 * peer: shm on this host, verbs or tcp to other hosts). Sets *@name to a
 * string that lives as long as the library. 0; -EINVAL; -ENOENT (@node is
 * this node, or not a member that is up).
 */
int loco_member_fabric(loco_manager_t *m, uint32_t node, const char **name);

/*
 * loco_member_incarnation -- the incarnation of member @node in the view
 * this node installed last (this node's own for its id): a node restarted
 * with the same id, or excluded and taken back, is a new incarnation.
 * Sets *@inc. 0; -EINVAL; -ENOENT (not in the view). Since loco 0.6.
 */
int loco_member_incarnation(loco_manager_t *m, uint32_t node, uint64_t *inc);

/*
 * loco_view -- the id of the membership view this node installed last
 * (views are numbered from 1; 0 while joining). See loco_init(3).
 */
uint64_t loco_view(loco_manager_t *m);

/*
 * loco_manager_partitioned -- 1 when this node cannot reach a majority of
 * its last view (or was excluded and has not rejoined yet): it stops
 * acting, and waits return -LOCO_EPARTITION; 0 otherwise (and for NULL).
 * For object authors; lock-free, any thread. See loco_init(3).
 */
int loco_manager_partitioned(loco_manager_t *m);

/* Membership events (loco_manager_set_event_fn()). */
typedef enum loco_event_type {
	LOCO_EVENT_VIEW = 1,    /* a new view was installed (this node is in it) */
	LOCO_EVENT_PARTITIONED, /* a majority of the view is out of reach: stopped acting */
	LOCO_EVENT_EXCLUDED,    /* a newer view without this node was installed */
	LOCO_EVENT_REJOINED,    /* back in a view (after EXCLUDED, as a new incarnation) */
} loco_event_type_t;

typedef struct loco_event {
	loco_event_type_t type;
	uint64_t view;        /* the installed (VIEW, REJOINED) or newer (EXCLUDED) view's id */
	uint32_t nmembers;    /* its member count */
	uint64_t incarnation; /* this node's incarnation now */
} loco_event_t;

typedef void loco_event_fn(loco_manager_t *m, const loco_event_t *ev, void *arg);

/*
 * loco_manager_set_event_fn -- call @fn(m, ev, @arg) on the progress
 * thread for every membership event from now on (NULL: none). @fn must
 * not block; it may call the functions of this header. Returns 0; -EINVAL.
 */
int loco_manager_set_event_fn(loco_manager_t *m, loco_event_fn *fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_MANAGER_H */
