/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fail.h -- FAIL(): print a message and exit 1, for the standalone test
 * programs under loco-run (tests/core, tests/regress) that use no
 * helper library.
 */
#ifndef LOCO_TESTS_FAIL_H
#define LOCO_TESTS_FAIL_H

#include <stdio.h>
#include <stdlib.h>

#define FAIL(...)                             \
	do {                                  \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr);          \
		exit(1);                      \
	} while (0)

#endif /* LOCO_TESTS_FAIL_H */
