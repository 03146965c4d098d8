/* SPDX-License-Identifier: BSD-2-Clause */
/* version.c -- loco_version(3): the version check of DESCRIPTION, in a function. */
#include <stdio.h>

#include <loco.h>

#include "docex.h"

static int version_check(struct dx *x)
{
	(void)x;
#include "version.inc"
	return dx_check("version",
	                (loco_version() >> 16) == LOCO_VERSION_MAJOR &&
	                    (loco_version() & 0xffff) == LOCO_VERSION_MINOR,
	                "loco_version() %#x, headers %s", loco_version(), LOCO_VERSION_STRING);
}

const struct dx_example dx_version[] = {
    {"version", version_check, NULL, NULL},
    {NULL, NULL, NULL, NULL},
};
