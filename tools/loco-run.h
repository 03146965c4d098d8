/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run.h -- the local launcher's parts: loco-run.c (spawning, output,
 * ending, control commands), loco-run-opts.c (the command line, message
 * times) and loco-run-ctl.c (the control socket and its client). See
 * loco-run(1). One thread: nothing here is thread-safe.
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
#include <sys/un.h>
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
#define LR_CTL_MAX       8    /* control connections served at once */
#define LR_CTL_LINE      256  /* a control command line */
#define LR_CTL_WAIT_MS   2000 /* the client waits this long for each part of the answer */
#define LR_JOIN_MAX      8    /* live members an added node is given to join through */
#define LR_HELD_MAX      (LR_MAX_NODES + 32) /* ports held while nodes are being started */

/* How times are written in front of messages (LOCO_LOG_TIME, as in liboco's log lines). */
enum lr_time {
	LR_TIME_MONO,
	LR_TIME_WALL,
	LR_TIME_NONE
};

struct lr_opts {
	unsigned long n;
	unsigned long first_id;
	double timeout;                            /* seconds; 0 = none */
	const char *fabric;                        /* NULL: inherit LOCO_FABRIC */
	const char *join;                          /* NULL: a fresh job */
	char hosts[LR_MAX_HOSTS][INET_ADDRSTRLEN]; /* node k gets hosts[k % nhosts] */
	int nhosts;
	bool no_prefix;
	bool keep_going;     /* a dead node does not end the others */
	const char *control; /* the control socket's path, or NULL */
	char **argv;         /* PROGRAM ARGS..., NULL-terminated */
};

/* lr_msg -- "loco-run: ..." on stderr. */
void lr_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* lr_usage -- the synopsis, to @f. */
void lr_usage(FILE *f);

/* lr_parse_opts -- fill @o from the command line; 0, 1 for --help, -EINVAL after a message. */
int lr_parse_opts(int argc, char **argv, struct lr_opts *o);

/* lr_time_init -- read LOCO_LOG_TIME and note the start time, once, before any message. */
void lr_time_init(void);

/* lr_time_str -- the time to write before a message ("" for none) into @buf. */
void lr_time_str(char *buf, size_t len);

/* lr_ctl_listen -- a listening unix socket at @path (mode 0600); the fd or -errno. */
int lr_ctl_listen(const char *path);

/* lr_ctl_client -- send the command @argv[0..@argc) to the launcher at @path; exit status. */
int lr_ctl_client(const char *path, int argc, char **argv);

/* lr_find_program -- 0 when execvp(@prog) can find something to run (loco-run-opts.c). */
int lr_find_program(const char *prog);

#endif /* LOCO_RUN_H */
