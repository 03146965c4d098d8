/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * linkfail.h -- the probe of the linkfail tests (rpipe-linkfail.c,
 * rpc-linkfail.c): a READ of LF_PROBE_LEN bytes from node 2's "probe"
 * region, which takes the data link down when the test runs with
 * LOCO_TCP_FAIL_READS=LF_ROUNDS@LF_PROBE_LEN (the tcp fabric's test knob).
 */
#ifndef LINKFAIL_H
#define LINKFAIL_H

#include <errno.h>

#include <loco.h>

#include "scenario.h"

#define LF_PROBE_LEN 100000u /* longer than any ring: no mending READ is this long */
#define LF_ROUNDS    3u

/* lf_probe_create -- object "probe" in @ch (before its join), with region "p" to READ */
static inline loco_region_t *lf_probe_create(loco_channel_t *ch, loco_object_t **obj)
{
	loco_region_t *probe;

	SC_ASSERT_OK(loco_object_create(ch, "probe", NULL, NULL, obj));
	SC_ASSERT_OK(loco_region_create(*obj, "p", LF_PROBE_LEN, LOCO_ACCESS_READ, &probe));
	return probe;
}

/* lf_probe_remote -- node 2's probe region into *@rr (it may come after the join) */
static inline void lf_probe_remote(loco_region_t *probe, loco_rref_t *rr)
{
	SC_WAIT_UNTIL(loco_region_remote(probe, 2, rr) == 0, SC_WAIT_MS, "node 2's probe");
}

/* lf_probe -- round @r's probe READ: 0 (posted: it fails later) or -ENOTCONN (no link now). */
static inline int lf_probe(loco_region_t *probe, const loco_rref_t *rr, loco_ack_key_t *ack,
                           unsigned r)
{
	int ret = loco_read(probe, 0, rr, 0, LF_PROBE_LEN, ack);

	if (ret != 0 && ret != -ENOTCONN)
		SC_FAIL("round %u: the probe READ: %s", r, loco_strerror(ret));
	return ret;
}

/* lf_probe_failed -- the probe READ of round @r (lf_probe() said @ret) failed: its error. */
static inline int lf_probe_failed(loco_ack_key_t *ack, int ret, unsigned r)
{
	if (ret == 0 && (ret = loco_ack_wait(ack, 20 * SC_NS)) == 0)
		SC_FAIL("round %u: the probe READ succeeded: the link did not fail "
		        "(LOCO_TCP_FAIL_READS=%u@%u set?)",
		        r, LF_ROUNDS, LF_PROBE_LEN);
	return ret;
}

#endif /* LINKFAIL_H */
