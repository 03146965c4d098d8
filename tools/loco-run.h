/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run.h -- the local launcher's parts: loco-run.c (the loop: output,
 * reaping, ending), loco-run-spawn.c (starting a node: environment, ports,
 * fork and exec), loco-run-control.c (the control commands),
 * loco-run-opts.c (the command line, message times) and loco-run-ctl.c (the
 * control socket and its client). See loco-run(1). One thread: nothing here
 * is thread-safe.
 */
#ifndef LOCO_RUN_H
#define LOCO_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
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
#define LR_PORT_MIN      10000 /* picked ports: from here up, outside the ephemeral range */
#define LR_PORT_TRIES    64    /* ports tried before the kernel picks one */

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
	bool bind;           /* node k runs on the k-th CPU of the launcher's set, round robin */
	const char *control; /* the control socket's path, or NULL */
	char **argv;         /* PROGRAM ARGS..., NULL-terminated */
};

/* Why the launch is ending, if it is. */
enum lr_reason {
	LR_RUNNING,  /* no node has failed; nothing is being ended yet */
	LR_FAILED,   /* a node failed; exit with its status */
	LR_TIMEDOUT, /* --timeout expired */
	LR_SIGNALED, /* the launcher got SIGINT/SIGTERM/SIGHUP */
	LR_INTERNAL, /* the launcher itself failed (pipe, fork...) */
};

/* One of a node's two output pipes. */
struct lr_stream {
	int fd;  /* read end, -1 once closed */
	int out; /* index into lr_outs: 0 = stdout, 1 = stderr */
	size_t len;
	char *buf; /* LR_LINE_MAX bytes: the partial line so far */
};

/* A node of the launch: its process (group), place, port and output streams. */
struct lr_node {
	uint32_t id;
	pid_t pid;       /* also the process group id */
	bool alive;      /* pid not yet reaped */
	bool group;      /* the process group may still have members */
	bool by_cmd;     /* the kill command signalled it: its end is no failure */
	bool died;       /* it ended while the launch ran (not 0, or by the kill command) */
	int st;          /* its wait status, once reaped */
	unsigned long k; /* its place in the launch: LOCO_ADDR on hosts[k % nhosts] */
	unsigned port;   /* the port of its LOCO_ADDR; 0 = any (it cannot be joined through) */
	char prefix[LR_PREFIX_MAX];
	size_t prefix_len;
	struct lr_stream s[2];
};

/* What the launcher changes in itself and gives back to each node before exec. */
struct lr_saved {
	sigset_t mask;         /* SIGCHLD, SIGINT, SIGTERM, SIGHUP are blocked for the signalfd */
	struct sigaction pipe; /* SIGPIPE is ignored */
	struct rlimit nofile;  /* the soft limit is raised for two pipes per node... */
	bool nofile_raised;    /* ...when it was too low */
};

/* A control connection: the command line read so far. */
struct lr_conn {
	int fd; /* -1: free */
	size_t len;
	char buf[LR_CTL_LINE];
};

/* The state of one launch, shared by loco-run.c, loco-run-spawn.c and loco-run-control.c. */
struct lr_run {
	const struct lr_opts *o;
	const struct lr_saved *saved;
	struct lr_node *nodes;
	unsigned n;            /* nodes started (or being set up) so far */
	unsigned cap;          /* room in nodes[]: N of -n, or LR_MAX_NODES with --control */
	uint32_t max_id;       /* the highest id given so far: added nodes get the next ones */
	unsigned port;         /* the first node's port; 0 with --join */
	int sfd;               /* signalfd */
	int cfd;               /* the listening control socket, or -1 */
	int held[LR_HELD_MAX]; /* sockets that keep picked ports from being picked again */
	int nheld;
	struct lr_conn conns[LR_CTL_MAX];
	bool failed;     /* --keep-going: a node failed; the others went on */
	int fail_status; /* ...and the first one's status */
	enum lr_reason reason;
	int status; /* the exit status once reason != LR_RUNNING */
	bool ending;
	bool hard; /* SIGKILL sent */
	bool need_reap;
	double timeout_s;
	int64_t timeout_at; /* 0 = none */
	int64_t kill_at;
	int64_t give_up_at;
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

/* lr_how_str -- "exited with status 3" or "killed by SIGKILL" for wait status @st, in @buf. */
const char *lr_how_str(int st, char *buf, size_t len);

/* lr_node_init -- set up run->nodes[run->n] as the next node, id @id; 0 or -ENOMEM. */
int lr_node_init(struct lr_run *run, uint32_t id);

/* lr_job_env -- the environment all nodes share, the first node's port in *@port; 0 or -errno. */
int lr_job_env(const struct lr_opts *o, unsigned *port);

/* lr_assign_ports -- the port of each node from @from on (distinct, free again); 0 or -errno. */
int lr_assign_ports(struct lr_run *run, unsigned from);

/* lr_node_env -- @node's LOCO_NODE_ID, LOCO_NODES, LOCO_ADDR, LOCO_JOIN (@nodes > 0: added). */
int lr_node_env(struct lr_run *run, struct lr_node *node, unsigned long nodes);

/* lr_node_spawn -- fork and exec @node, its stdout and stderr into two new pipes; 0 or -errno. */
int lr_node_spawn(struct lr_node *node, const struct lr_opts *o, const struct lr_saved *saved);

/* lr_ctl_accept -- take a new control connection; refuse it when LR_CTL_MAX are open. */
void lr_ctl_accept(struct lr_run *run);

/* lr_ctl_read -- read from control connection @c; a whole line (or EOF) is carried out. */
void lr_ctl_read(struct lr_run *run, struct lr_conn *c);

#endif /* LOCO_RUN_H */
