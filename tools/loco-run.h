/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run.h -- the local launcher's parts: loco-run.c (spawning, output,
 * ending) and loco-run-opts.c (the command line). See loco-run(1).
 */
#ifndef LOCO_RUN_H
#define LOCO_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define LR_MAX_NODES     1024  /* each node costs two pipes and two line buffers */
#define LR_LINE_MAX      65536 /* a longer line is split, each piece ending in '\n' */
#define LR_PREFIX_MAX    16    /* "[4294967295] " */
#define LR_OUT_CAP       (2 * (LR_LINE_MAX + LR_PREFIX_MAX + 1))
#define LR_GRACE_MS      2000            /* SIGTERM -> SIGKILL */
#define LR_GIVE_UP_MS    10000           /* SIGKILL -> report what would not die */
#define LR_RECHECK_MS    100             /* while ending, look at the groups at least this often */
#define LR_REAP_MAX      4096            /* waitpid() calls per group per pass */
#define LR_DRAIN_MAX     1024            /* reads per stream after the last process is gone */
#define LR_TIMEOUT_MAX   (86400.0 * 365) /* --timeout above a year is a typo */
#define LR_EXIT_USAGE    2
#define LR_EXIT_INTERNAL 125
#define LR_EXIT_TIMEOUT  124
#define LR_EXIT_NOEXEC   127
#define LR_LOCALHOST     "127.0.0.1"
#define LR_MAX_HOSTS     16

struct lr_opts {
	unsigned long n;
	unsigned long first_id;
	double timeout;                            /* seconds; 0 = none */
	const char *fabric;                        /* NULL: inherit LOCO_FABRIC */
	const char *join;                          /* NULL: a fresh job */
	char hosts[LR_MAX_HOSTS][INET_ADDRSTRLEN]; /* node k gets hosts[k % nhosts] */
	int nhosts;
	bool no_prefix;
	char **argv; /* PROGRAM ARGS..., NULL-terminated */
};

/* lr_msg -- "loco-run: ..." on stderr. */
void lr_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* lr_usage -- the synopsis, to @f. */
void lr_usage(FILE *f);

/* lr_parse_opts -- fill @o from the command line; 0, 1 for --help, -EINVAL after a message. */
int lr_parse_opts(int argc, char **argv, struct lr_opts *o);

/* lr_find_program -- 0 when execvp(@prog) can find something to run (loco-run-opts.c). */
int lr_find_program(const char *prog);

#endif /* LOCO_RUN_H */
