/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pmix_boot.h -- the PMIx bootstrap (pmix.c; "pmix.h" is libpmix's header): a process
 * started by a PMIx server (Open MPI's mpirun, Slurm's srun --mpi=pmix) takes its node id
 * (rank + 1), the job size, its control-plane address and the cluster secret from the
 * launcher, and finds the members to join through in the job's PMIx store (put, commit, fence,
 * get). Explicit LOCO_* settings (environment or loco_config_t) win over PMIx, one by one. Built
 * with libpmix when meson finds it (-Dpmix); without it, lc_pmix_start() never starts one and
 * loco_init() is unchanged.
 *
 * The sequence, in loco_init(): lc_config_read(), lc_pmix_start() (PMIx_Init, node id,
 * job size, the address to listen on, rank 0 makes the secret), the manager opens its
 * listener, lc_pmix_exchange() (publish that address and the secret, fence, read the
 * secret and the lower ranks' addresses, PMIx_Finalize), then found (rank 0) or join.
 * PMIx is finalized as soon as the exchange is done: the manager needs nothing more from
 * it, and a PMIx server that sees a client die before PMIx_Finalize ends the whole job
 * (Slurm's pmix plugin cancels the step), where LOCO wants the others to see a failed
 * member and go on. (PMIx counts initializations: an MPI_Init() before loco_init() keeps
 * its own; Open MPI 4.1's MPI_Init() after it fails, loco_init(3) says so.)
 *
 * Thread safety: called by loco_init() / loco_fini() only, one manager at a time.
 */
#ifndef LOCO_LC_PMIX_BOOT_H
#define LOCO_LC_PMIX_BOOT_H

#include <loco.h>

#include "config.h"

struct lc_pmix;

/*
 * lc_pmix_start -- when this process was started by a PMIx server (PMIX_RANK or
 * PMIX_NAMESPACE in the environment), LOCO_PMIX is not 0, and no node id is set (LOCO_NODE_ID
 * or @cfg: another launcher did the bootstrap; LOCO_PMIX=1 goes on all the same): PMIx_Init,
 * and set in @c what neither the environment nor @cfg set: node_id (rank + 1), nodes (job
 * size), addr (the loopback when the job is on one host, else an IPv4 address of this host:
 * what its name resolves to, else its first interface's), and on rank 0 a fresh random
 * secret. Sets *@out (NULL when PMIx is not used). Returns 0; -ENOTCONN (PMIx_Init or the
 * job's size failed), -ENOENT (LOCO_PMIX=1 but no PMIx server, or no PMIx in this build),
 * -ENOMEM.
 */
int lc_pmix_start(const loco_config_t *cfg, struct lc_config *c, struct lc_pmix **out);

/*
 * lc_pmix_exchange -- publish @ctrl_addr (and rank 0's secret), fence with data collection
 * (bounded by the join timeout), then set in @c the secret (from rank 0) and join (rank 0's
 * and up to three lower ranks' addresses; rank 0 founds: NULL) unless set explicitly.
 * Finalizes PMIx. The strings stay in @p until lc_pmix_free(). 0, -ETIMEDOUT (fence),
 * -ENOTCONN (PMIx failed), -EPROTO (rank 0 published no secret: LOCO_SECRET set on some
 * ranks only).
 */
int lc_pmix_exchange(struct lc_pmix *p, const char *ctrl_addr, struct lc_config *c);

/* lc_pmix_wipe_secret -- wipe the secret (once the manager derived its key from it). */
void lc_pmix_wipe_secret(struct lc_pmix *p);

/* lc_pmix_free -- finalize PMIx if still open, wipe the secret, free @p. NULL-safe. */
void lc_pmix_free(struct lc_pmix *p);

#endif /* LOCO_LC_PMIX_BOOT_H */
