/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * capture.h -- catch what the library logs (it writes each line to fd 2)
 * in a file, so that a test can look for a line; the caught text is
 * copied to the real stderr when the capture ends. One capture per
 * process. Single-threaded use (the test's main thread).
 */
#ifndef LOCO_TESTS_CAPTURE_H
#define LOCO_TESTS_CAPTURE_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

struct capture {
	int saved; /* the real stderr */
	int fd;    /* the file fd 2 points at */
	char path[64];
};

static inline void capture_start(struct capture *c)
{
	snprintf(c->path, sizeof(c->path), "/tmp/loco-capture-XXXXXX");
	c->fd = mkstemp(c->path);
	if (c->fd < 0)
		SC_FAIL("mkstemp: cannot capture the log");
	sc_log("library log caught in %s (removed when the capture ends)", c->path);
	c->saved = dup(STDERR_FILENO);
	if (c->saved < 0 || dup2(c->fd, STDERR_FILENO) < 0)
		SC_FAIL("dup2: cannot capture the log");
}

/* capture_has -- whether a caught line holds @needle (the first 64 KiB are searched). */
static inline bool capture_has(struct capture *c, const char *needle)
{
	static char buf[65536];
	ssize_t n = pread(c->fd, buf, sizeof(buf) - 1, 0);

	if (n < 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* capture_end -- point fd 2 back at the real stderr and copy what was caught there. */
static inline void capture_end(struct capture *c)
{
	char buf[4096];
	off_t off = 0;
	ssize_t n;

	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	while ((n = pread(c->fd, buf, sizeof(buf), off)) > 0) {
		if (write(STDERR_FILENO, buf, (size_t)n) < 0)
			break;
		off += n;
	}
	close(c->fd);
	unlink(c->path);
}

#endif /* LOCO_TESTS_CAPTURE_H */
