/* SPDX-License-Identifier: BSD-2-Clause */
/* version.c -- loco_version() and loco_strerror(). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <loco.h>

unsigned loco_version(void)
{
	return ((unsigned)LOCO_VERSION_MAJOR << 16) | LOCO_VERSION_MINOR;
}

const char *loco_strerror(int err)
{
	/* a count (loco(7): the functions that return one), built in a per-thread buffer */
	static _Thread_local char count[48];

	if (err == INT_MIN)
		return "unknown loco error"; /* -INT_MIN does not exist */
	if (err > 0) {
		snprintf(count, sizeof(count), "not an error code (a count: %d)", err);
		return count;
	}
	err = -err;
	switch (err) {
	case 0:
		return "success";
	case LOCO_EAUTH:
		return "peer failed authentication";
	case LOCO_EFABRIC:
		return "fabric error (see the log)";
	case LOCO_ETORN:
		return "value unstable past the retry bound";
	case LOCO_EPARTITION:
		return "partitioned: no majority of the cluster's view is reachable";
	case LOCO_ENOTJOINED:
		return "channel not joined: call loco_channel_join() before using its objects";
	case LOCO_EMISMATCH:
		return "object parameters differ between nodes (see the log)";
	default:
		/* strerror() of glibc returns static strings for known codes */
		return err < LOCO_ERRNO_BASE ? strerror(err) : "unknown loco error";
	}
}
