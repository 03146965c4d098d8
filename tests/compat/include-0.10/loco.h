/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco.h -- LOCO: channel objects for RDMA networks. The umbrella header.
 *
 * Conventions (see loco(7)): functions return 0 (or, for the few that
 * loco(7) lists, a count >= 0) or a negative errno, and write output
 * parameters only on success; library-specific codes are
 * LOCO_E* (above LOCO_ERRNO_BASE) and loco_strerror() names every code.
 *
 * Thread safety: MT-safe (the functions declared here keep no state).
 */
#ifndef LOCO_H
#define LOCO_H

#include <loco/version.h>
#include <loco/manager.h>
#include <loco/ack.h>
#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Library-specific error codes, returned negated like errno values. */
#define LOCO_ERRNO_BASE 4096
enum loco_errno {
	LOCO_EAUTH = LOCO_ERRNO_BASE + 1, /* the peer failed authentication */
	LOCO_EFABRIC,                     /* the fabric reported an error; see the log */
	LOCO_ETORN,                       /* a value stayed unstable past the retry bound */
	LOCO_EPARTITION, /* this node cannot reach a majority of its view: it stopped acting */
	LOCO_ENOTJOINED, /* the object's channel was never joined (loco_channel_join()) */
	LOCO_EMISMATCH,  /* a peer holds the object with other parameters (see the log) */
	LOCO_ELAST_,
};

/*
 * loco_version -- the run-time version, (major << 16) | minor.
 * Compare with LOCO_VERSION_MAJOR/MINOR from <loco/version.h>.
 */
unsigned loco_version(void);

/*
 * loco_strerror -- a string describing @err: 0, a negative errno or
 * -LOCO_E*. A positive @err is no error code but a count ("not an error
 * code (a count: 3)", in a per-thread buffer that the thread's next call
 * may overwrite). Never NULL.
 */
const char *loco_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_H */
