/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run.c -- the local launcher: start N copies of a program as LOCO nodes on this host,
 * prefix their output with the node id, and end them all together (DESIGN §1, loco-run(1)).
 *
 * One process, no threads: the nodes' stdout/stderr pipes and a signalfd (SIGCHLD and the
 * signals that end the launch) are multiplexed with poll(). Every node is the leader of its own
 * process group, and the launcher is a child subreaper, so whatever a node forks and orphans in
 * its group is reaped here and the launcher can tell when a group is empty. Only libc is used.
 * With --control, a unix socket in the same poll() takes commands that add and kill nodes.
 */
#include "loco-run.h"

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

/* What a pollfd (after the signalfd's) belongs to: a node's stream, else a control socket. */
struct lr_slot {
	struct lr_node *node;
	struct lr_stream *s;
	int conn; /* with node == NULL: index into lr_run.conns, or -1 for the listening socket */
};

/* A control connection: the command line read so far. */
struct lr_conn {
	int fd; /* -1: free */
	size_t len;
	char buf[LR_CTL_LINE];
};

/* An answer to a control command, built whole and written before the connection closes. */
struct lr_reply {
	char *buf;
	size_t len, cap;
	bool ok; /* the first line said "ok" */
};

/* The launcher's own stdout and stderr, written whole lines at a time. */
struct lr_out {
	int fd;
	bool dead; /* a write failed (EPIPE...): output is dropped from then on */
	size_t len;
	char buf[LR_OUT_CAP];
};

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

static struct lr_out lr_outs[2] = {{.fd = STDOUT_FILENO}, {.fd = STDERR_FILENO}};

/* lr_msg -- a "loco-run TIME: " message on stderr, written directly (never interleaved). */
void lr_msg(const char *fmt, ...)
{
	char line[512], t[40];
	va_list ap;
	int k;

	lr_time_str(t, sizeof(t));
	k = snprintf(line, sizeof(line), "loco-run%s: ", t);
	va_start(ap, fmt);
	vsnprintf(line + k, sizeof(line) - (size_t)k - 1, fmt, ap);
	va_end(ap);
	k = (int)strlen(line);
	line[k++] = '\n';
	/* the nodes' stderr lines never wait in lr_outs[1] here: stream_lines() flushes them */
	if (!lr_outs[1].dead && write(STDERR_FILENO, line, (size_t)k) < 0)
		lr_outs[1].dead = true;
}

/* now_ms -- CLOCK_MONOTONIC in milliseconds. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* make_secret -- 32 hex chars from getrandom() into @hex (33 bytes); 0 or -errno. */
static int make_secret(char hex[33])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char raw[16];
	size_t got = 0;

	for (int tries = 0; got < sizeof(raw) && tries < 100; tries++) {
		ssize_t r = getrandom(raw + got, sizeof(raw) - got, 0);

		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			got += (size_t)r;
	}
	if (got < sizeof(raw))
		return -EIO;
	for (size_t i = 0; i < sizeof(raw); i++) {
		hex[2 * i] = digits[raw[i] >> 4];
		hex[2 * i + 1] = digits[raw[i] & 15];
	}
	hex[32] = '\0';
	return 0;
}

/*
 * free_port -- a TCP port on @host that was free a moment ago; 0 or -errno. With @keep, the
 * socket stays bound and its fd is put there, so that the next call gets another port.
 */
static int free_port(const char *host, unsigned *port, int *keep)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
	socklen_t salen = sizeof(sa);
	int fd, ret = 0;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen) < 0) {
		ret = -errno;
		goto out_close;
	}
	*port = ntohs(sa.sin_port);
	if (keep != NULL) {
		*keep = fd;
		return 0;
	}
out_close:
	close(fd);
	return ret;
}

/* out_flush -- write what lr_outs[@k] holds; a failed write drops this and later output. */
static void out_flush(int k)
{
	struct lr_out *o = &lr_outs[k];
	size_t off = 0;

	for (int tries = 0; off < o->len && !o->dead && tries < 100000; tries++) {
		ssize_t w = write(o->fd, o->buf + off, o->len - off);

		if (w > 0) {
			off += (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			/* the caller gave us a non-blocking stdout: wait until it drains */
			struct pollfd p = {.fd = o->fd, .events = POLLOUT};

			poll(&p, 1, 1000);
		} else if (w < 0 && errno != EINTR) {
			o->dead = true; /* EPIPE etc.: the reader is gone */
		}
	}
	o->len = 0;
}

/* out_line -- queue @prefix + @line[0..@len) + '\n' for lr_outs[@k]. */
static void out_line(int k, const char *prefix, size_t plen, const char *line, size_t len)
{
	struct lr_out *o = &lr_outs[k];

	if (o->dead)
		return;
	if (o->len + plen + len + 1 > sizeof(o->buf))
		out_flush(k);
	memcpy(o->buf + o->len, prefix, plen);
	memcpy(o->buf + o->len + plen, line, len);
	o->len += plen + len;
	o->buf[o->len++] = '\n';
}

/* stream_lines -- pass the complete lines in @s on, keep the partial one; @eof flushes it. */
static void stream_lines(struct lr_node *node, struct lr_stream *s, bool eof)
{
	size_t start = 0;
	char *nl;

	while (start < s->len && (nl = memchr(s->buf + start, '\n', s->len - start)) != NULL) {
		size_t end = (size_t)(nl - s->buf);

		out_line(s->out, node->prefix, node->prefix_len, s->buf + start, end - start);
		start = end + 1;
	}
	if (start < s->len && (eof || (start == 0 && s->len == LR_LINE_MAX))) {
		/* a last line without '\n', or one longer than the buffer: end it here */
		out_line(s->out, node->prefix, node->prefix_len, s->buf + start, s->len - start);
		start = s->len;
	}
	memmove(s->buf, s->buf + start, s->len - start);
	s->len -= start;
	out_flush(s->out);
}

/* stream_close -- flush the partial line of @s and close its pipe. */
static void stream_close(struct lr_node *node, struct lr_stream *s)
{
	stream_lines(node, s, true);
	close(s->fd);
	s->fd = -1;
}

/* stream_read -- read what the pipe of @s holds now; at EOF (or error) close it. */
static void stream_read(struct lr_node *node, struct lr_stream *s)
{
	ssize_t r = read(s->fd, s->buf + s->len, LR_LINE_MAX - s->len);

	if (r > 0) {
		s->len += (size_t)r;
		stream_lines(node, s, false);
	} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
		stream_close(node, s);
	}
}

/* kill_groups -- send @sig to the process group of every node that may still have one. */
static void kill_groups(struct lr_run *run, int sig)
{
	for (unsigned i = 0; i < run->n; i++) {
		struct lr_node *node = &run->nodes[i];

		/*
		 * A group is signalled only while it is known to have a member that is not yet
		 * reaped by us (the node, or an orphan adopted as subreaper), so its id cannot
		 * have been reused.
		 */
		if (node->pid > 0 && node->group && kill(-node->pid, sig) < 0 && errno == ESRCH)
			node->group = false;
	}
}

/* begin_ending -- SIGTERM (and SIGCONT) to every node's group, SIGKILL after the grace period. */
static void begin_ending(struct lr_run *run)
{
	if (run->ending)
		return;
	run->ending = true;
	run->kill_at = now_ms() + LR_GRACE_MS;
	kill_groups(run, SIGTERM);
	kill_groups(run, SIGCONT); /* a stopped process acts on SIGTERM only once continued */
	run->need_reap = true;
}

/* kill_hard -- SIGKILL to every node's group that is still there. */
static void kill_hard(struct lr_run *run)
{
	run->hard = true;
	run->give_up_at = now_ms() + LR_GIVE_UP_MS;
	kill_groups(run, SIGKILL);
	run->need_reap = true;
}

/* fail -- end the launch for @reason with exit @status, unless a reason was already found. */
static void fail(struct lr_run *run, enum lr_reason reason, int status)
{
	if (run->reason == LR_RUNNING) {
		run->reason = reason;
		run->status = status;
	}
	begin_ending(run);
}

/* how_str -- "exited with status 3" or "killed by SIGKILL" for the wait status @st. */
static const char *how_str(int st, char *buf, size_t len)
{
	const char *abbrev;

	if (!WIFSIGNALED(st)) {
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
		return buf;
	}
	abbrev = sigabbrev_np(WTERMSIG(st));
	if (abbrev != NULL)
		snprintf(buf, len, "killed by SIG%s", abbrev);
	else
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
	return buf;
}

/*
 * node_exited -- record the wait status @st of @node. A node the kill command signalled is
 * no failure; with --keep-going a failure is reported and kept for the exit status; without
 * it, the first failure ends the others.
 */
static void node_exited(struct lr_run *run, struct lr_node *node, int st)
{
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	char how[64];

	node->alive = false;
	node->st = st;
	if (run->reason != LR_RUNNING)
		return; /* ended by us, or after the first failure */
	if (code == 0 && !node->by_cmd) {
		if (run->o->keep_going)
			lr_msg("node %" PRIu32 " (pid %d) exited with status 0", node->id,
			       (int)node->pid);
		return;
	}
	node->died = true;
	how_str(st, how, sizeof(how));
	if (node->by_cmd) {
		lr_msg("node %" PRIu32 " (pid %d) %s (kill command); the others go on", node->id,
		       (int)node->pid, how);
		return;
	}
	if (run->o->keep_going) {
		lr_msg("node %" PRIu32 " (pid %d) %s; the others go on (--keep-going)", node->id,
		       (int)node->pid, how);
		if (!run->failed) {
			run->failed = true;
			run->fail_status = code;
		}
		return;
	}
	if (WIFSIGNALED(st))
		lr_msg("node %" PRIu32 " killed by signal %d (%s); ending the others", node->id,
		       WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		lr_msg("node %" PRIu32 " exited with status %d; ending the others", node->id, code);
	fail(run, LR_FAILED, code);
}

/* reap -- collect exited nodes and orphans adopted into their groups; notice empty groups. */
static void reap(struct lr_run *run)
{
	run->need_reap = false;
	for (unsigned i = 0; i < run->n; i++) {
		struct lr_node *node = &run->nodes[i];
		int st;

		if (node->pid <= 0)
			continue;
		if (node->alive) {
			pid_t r = waitpid(node->pid, &st, WNOHANG);

			if (r == node->pid)
				node_exited(run, node, st);
			else if (r < 0 && errno == ECHILD)
				node->alive = false; /* cannot happen: it is our child */
		}
		for (int k = 0; node->group && k < LR_REAP_MAX; k++) {
			pid_t r = waitpid(-node->pid, &st, WNOHANG);

			if (r <= 0)
				break;
			if (r == node->pid)
				node_exited(run, node, st);
		}
		if (!node->alive && node->group && kill(-node->pid, 0) < 0 && errno == ESRCH)
			node->group = false;
	}
}

/* all_gone -- true when every node is reaped and every node's process group is empty. */
static bool all_gone(const struct lr_run *run)
{
	for (unsigned i = 0; i < run->n; i++) {
		if (run->nodes[i].alive || run->nodes[i].group)
			return false;
	}
	return true;
}

/* any_alive -- true while some node process is not yet reaped. */
static bool any_alive(const struct lr_run *run)
{
	for (unsigned i = 0; i < run->n; i++) {
		if (run->nodes[i].alive)
			return true;
	}
	return false;
}

/* on_signals -- read the signalfd: SIGCHLD asks for a reap, the others end the launch. */
static void on_signals(struct lr_run *run)
{
	struct signalfd_siginfo si;

	for (int k = 0; k < 64 && read(run->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si); k++) {
		int sig = (int)si.ssi_signo;

		if (sig == SIGCHLD) {
			run->need_reap = true;
		} else if (run->reason == LR_RUNNING) {
			/* also while only ending what finished nodes left behind */
			lr_msg("got %s; ending all nodes", strsignal(sig));
			fail(run, LR_SIGNALED, 128 + sig);
		} else if (!run->hard) {
			kill_hard(run); /* asked again while ending: do not wait for the grace */
		}
	}
}

/*
 * child_exec -- in the forked child of @node: own process group, pipes as stdout/stderr,
 * /dev/null as stdin, the launcher's original signal state; then exec. Never returns.
 */
static void child_exec(struct lr_node *node, int wfd[2], const struct lr_saved *saved,
                       pid_t launcher, char **argv)
{
	int null;

	setpgid(0, 0);
	/* if the launcher dies without ending us (SIGKILL), do not outlive it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != launcher)
		_exit(LR_EXIT_INTERNAL);
	null = open("/dev/null", O_RDONLY);
	if (null >= 0 && null != STDIN_FILENO) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	if ((wfd[0] >= 0 && dup2(wfd[0], STDOUT_FILENO) < 0) ||
	    (wfd[1] >= 0 && dup2(wfd[1], STDERR_FILENO) < 0))
		_exit(LR_EXIT_INTERNAL);
	if (saved->nofile_raised)
		setrlimit(RLIMIT_NOFILE, &saved->nofile);
	sigaction(SIGPIPE, &saved->pipe, NULL);
	sigprocmask(SIG_SETMASK, &saved->mask, NULL);
	execvp(argv[0], argv);
	dprintf(STDERR_FILENO, "loco-run: node %" PRIu32 ": cannot execute %s: %s\n", node->id,
	        argv[0], strerror(errno));
	_exit(errno == ENOENT ? LR_EXIT_NOEXEC : 126);
}

/* node_spawn -- fork and exec @node, its stdout and stderr into two new pipes; 0 or -errno. */
static int node_spawn(struct lr_node *node, const struct lr_opts *o, const struct lr_saved *saved)
{
	int fds[2][2] = {{-1, -1}, {-1, -1}};
	int wfd[2] = {-1, -1};
	pid_t launcher = getpid();
	int ret;

	for (int k = 0; k < 2; k++) {
		if (pipe2(fds[k], O_CLOEXEC) < 0) {
			ret = -errno;
			lr_msg("node %" PRIu32 ": pipe: %s", node->id, strerror(errno));
			goto err_close;
		}
		if (fcntl(fds[k][0], F_SETFL, O_NONBLOCK) < 0) {
			ret = -errno;
			lr_msg("node %" PRIu32 ": fcntl: %s", node->id, strerror(errno));
			goto err_close;
		}
		wfd[k] = fds[k][1];
	}
	fflush(NULL);
	node->pid = fork();
	if (node->pid < 0) {
		ret = -errno;
		node->pid = 0;
		lr_msg("node %" PRIu32 ": fork: %s", node->id, strerror(errno));
		goto err_close;
	}
	if (node->pid == 0)
		child_exec(node, wfd, saved, launcher, o->argv);
	/* also here, so the group exists before anyone signals it (EACCES: it has exec'd) */
	setpgid(node->pid, node->pid);
	node->alive = true;
	node->group = true;
	for (int k = 0; k < 2; k++) {
		close(fds[k][1]);
		node->s[k].fd = fds[k][0];
	}
	return 0;

err_close:
	for (int k = 1; k >= 0; k--) {
		if (fds[k][1] >= 0)
			close(fds[k][1]);
		if (fds[k][0] >= 0)
			close(fds[k][0]);
	}
	return ret;
}

/* setenv_fmt -- setenv(@name) to a printf-formatted value; 0 or -errno. */
static int setenv_fmt(const char *name, const char *fmt, ...)
{
	char val[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	return setenv(name, val, 1) < 0 ? -errno : 0;
}

/*
 * job_env -- the environment every node of this launch shares: LOCO_NODES, LOCO_SECRET,
 * LOCO_FABRIC; and the first node's port in *@port (0 with --join). 0 or -errno.
 */
static int job_env(const struct lr_opts *o, unsigned *port)
{
	const char *secret = getenv("LOCO_SECRET");
	char hex[33];
	int ret;

	*port = 0;
	ret = setenv_fmt("LOCO_NODES", "%lu", o->n);
	if (ret)
		return ret;
	if (secret == NULL || secret[0] == '\0') {
		ret = make_secret(hex);
		if (ret) {
			lr_msg("getrandom: %s", strerror(-ret));
			return ret;
		}
		if (setenv("LOCO_SECRET", hex, 1) < 0)
			return -errno;
	}
	if (o->fabric != NULL && setenv("LOCO_FABRIC", o->fabric, 1) < 0)
		return -errno;
	if (o->join != NULL)
		return setenv("LOCO_JOIN", o->join, 1) < 0 ? -errno : 0;
	ret = free_port(o->hosts[0], port, NULL);
	if (ret)
		lr_msg("cannot find a free port on %s: %s", o->hosts[0], strerror(-ret));
	return ret;
}

/*
 * pick_port -- a free port on @host that no node of this launch was given; 0 or -errno. The
 * sockets stay bound until release_ports(), so that two picks never give the same port.
 */
static int pick_port(struct lr_run *run, const char *host, unsigned *port)
{
	for (int tries = 0; tries < 20 && run->nheld < LR_HELD_MAX; tries++) {
		bool used = false;
		unsigned p;
		int ret = free_port(host, &p, &run->held[run->nheld]);

		if (ret)
			return ret;
		run->nheld++;
		for (unsigned i = 0; i < run->n && !used; i++)
			used = run->nodes[i].port == p;
		if (!used) {
			*port = p;
			return 0;
		}
	}
	return -EADDRINUSE;
}

/* release_ports -- close the sockets pick_port() holds: the nodes are about to bind them. */
static void release_ports(struct lr_run *run)
{
	while (run->nheld > 0)
		close(run->held[--run->nheld]);
}

/*
 * assign_ports -- the port of each node from @from on: the job's port for the first node of a
 * fresh launch, with --control a free port picked for each of the others, else 0 (any). The
 * picked ports are distinct, and free again when this returns; 0 or -errno.
 */
static int assign_ports(struct lr_run *run, unsigned from)
{
	int ret = 0;

	for (unsigned i = from; i < run->n && ret == 0; i++) {
		struct lr_node *node = &run->nodes[i];
		const char *host = run->o->hosts[node->k % (unsigned long)run->o->nhosts];

		node->port = 0;
		if (node->k == 0 && run->o->join == NULL)
			node->port = run->port;
		else if (run->o->control != NULL)
			ret = pick_port(run, host, &node->port);
		if (ret)
			lr_msg("node %" PRIu32 ": cannot find a free port on %s: %s", node->id,
			       host, strerror(-ret));
	}
	release_ports(run);
	return ret;
}

/* join_list -- "ip:port,..." of up to LR_JOIN_MAX live nodes that have a known port, in @buf. */
static size_t join_list(const struct lr_run *run, const struct lr_node *self, char *buf, size_t len)
{
	size_t off = 0;
	int count = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < run->n && count < LR_JOIN_MAX; i++) {
		const struct lr_node *m = &run->nodes[i];
		int k;

		if (m == self || !m->alive || m->port == 0)
			continue;
		k = snprintf(buf + off, len - off, "%s%s:%u", count ? "," : "",
		             run->o->hosts[m->k % (unsigned long)run->o->nhosts], m->port);
		if (k < 0 || (size_t)k >= len - off)
			break;
		off += (size_t)k;
		count++;
	}
	return off;
}

/*
 * node_env -- the per-node part: LOCO_NODE_ID, LOCO_NODES, LOCO_ADDR, LOCO_JOIN. The node
 * listens on hosts[k % nhosts]. The first node of a fresh launch starts the job; the others
 * of the launch join it, or the --join address. With --control every node listens on a port
 * picked here, so that a node added later (@nodes > 0: the job's live nodes, it included)
 * can be given live members to join through. 0 or -errno.
 */
static int node_env(struct lr_run *run, struct lr_node *node, unsigned long nodes)
{
	const struct lr_opts *o = run->o;
	const char *host = o->hosts[node->k % (unsigned long)o->nhosts];
	char list[LR_JOIN_MAX * (INET_ADDRSTRLEN + 7)];
	int ret = setenv_fmt("LOCO_NODE_ID", "%" PRIu32, node->id);

	if (ret == 0)
		ret = setenv_fmt("LOCO_NODES", "%lu", nodes > 0 ? nodes : o->n);
	if (ret)
		return ret;
	ret = setenv_fmt("LOCO_ADDR", "%s:%u", host, node->port);
	if (ret)
		return ret;
	if (nodes > 0 && join_list(run, node, list, sizeof(list)) > 0)
		return setenv("LOCO_JOIN", list, 1) < 0 ? -errno : 0;
	if (o->join != NULL)
		return setenv("LOCO_JOIN", o->join, 1) < 0 ? -errno : 0;
	if (nodes > 0) {
		lr_msg("node %" PRIu32 ": no live node to join through", node->id);
		return -ENOENT;
	}
	if (node->k == 0)
		return unsetenv("LOCO_JOIN") < 0 ? -errno : 0; /* it starts the job */
	return setenv_fmt("LOCO_JOIN", "%s:%u", o->hosts[0], run->port);
}

/* node_init -- set up run->nodes[run->n] as the next node, id @id; 0 or -ENOMEM. */
static int node_init(struct lr_run *run, uint32_t id)
{
	struct lr_node *node = &run->nodes[run->n];

	*node = (struct lr_node){.id = id, .k = run->n};
	node->prefix_len = run->o->no_prefix ? 0
	                                     : (size_t)snprintf(node->prefix, sizeof(node->prefix),
	                                                        "[%" PRIu32 "] ", node->id);
	for (int k = 0; k < 2; k++) {
		node->s[k] = (struct lr_stream){.fd = -1, .out = k};
		node->s[k].buf = malloc(LR_LINE_MAX);
	}
	if (node->s[0].buf == NULL || node->s[1].buf == NULL) {
		free(node->s[1].buf);
		free(node->s[0].buf);
		lr_msg("out of memory");
		return -ENOMEM;
	}
	run->n++;
	if (id > run->max_id)
		run->max_id = id;
	return 0;
}

/* reply -- append a printf-formatted piece to @r; what does not fit is cut. */
__attribute__((format(printf, 2, 3))) static void reply(struct lr_reply *r, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (r->buf == NULL || r->len + 1 >= r->cap)
		return;
	va_start(ap, fmt);
	k = vsnprintf(r->buf + r->len, r->cap - r->len, fmt, ap);
	va_end(ap);
	if (k > 0)
		r->len = (size_t)k < r->cap - r->len ? r->len + (size_t)k : r->cap - 1;
}

/* cmd_add -- "add [K]": start K (default 1) more nodes with fresh ids, joining live ones. */
static void cmd_add(struct lr_run *run, const char *arg, struct lr_reply *r)
{
	unsigned long want = 1, live = 0, nadded = 0;
	unsigned first;
	uint32_t added[LR_MAX_NODES];
	char *end;

	if (arg != NULL) {
		errno = 0;
		want = strtoul(arg, &end, 10);
		if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || errno || want == 0)
			want = 0;
	}
	if (want == 0 || want > run->cap - run->n || run->max_id > UINT32_MAX - want) {
		reply(r, "error: add: expected a count from 1 to %u, got '%s'\n", run->cap - run->n,
		      arg != NULL ? arg : "1");
		return;
	}
	if (run->ending) {
		reply(r, "error: add: the launch is ending\n");
		return;
	}
	for (unsigned i = 0; i < run->n; i++)
		live += run->nodes[i].alive;
	first = run->n;
	for (unsigned long j = 0; j < want; j++) {
		if (node_init(run, run->max_id + 1))
			break;
	}
	if (assign_ports(run, first))
		goto out;
	for (unsigned i = first; i < run->n; i++) {
		struct lr_node *node = &run->nodes[i];

		/* a node that was not started is listed as such (pid 0) */
		if (node_env(run, node, live + want) || node_spawn(node, run->o, run->saved))
			break;
		lr_msg("node %" PRIu32 " (pid %d) added (control command)", node->id,
		       (int)node->pid);
		added[nadded++] = node->id;
	}
out:
	if (nadded == 0) {
		reply(r, "error: add: no node could be started (see the launcher's messages)\n");
		return;
	}
	reply(r, "ok added");
	r->ok = true;
	for (unsigned long j = 0; j < nadded; j++)
		reply(r, " %" PRIu32, added[j]);
	reply(r, nadded < want ? "; the others could not be started\n" : "\n");
}

/* parse_sig -- "9", "KILL" or "SIGKILL"; the signal number or 0. */
static int parse_sig(const char *s)
{
	char *end;
	long v;

	if (s[0] >= '0' && s[0] <= '9') {
		v = strtol(s, &end, 10);
		return *end == '\0' && v > 0 && v < NSIG ? (int)v : 0;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int sig = 1; sig < NSIG; sig++) {
		const char *abbrev = sigabbrev_np(sig);

		if (abbrev != NULL && strcasecmp(abbrev, s) == 0)
			return sig;
	}
	return 0;
}

/* cmd_kill -- "kill ID [SIG]": send SIG (default SIGTERM) to the process group of node ID. */
static void cmd_kill(struct lr_run *run, const char *id_s, const char *sig_s, struct lr_reply *r)
{
	struct lr_node *node = NULL;
	unsigned long id = 0;
	int sig = SIGTERM;
	char name[32];
	char *end = NULL;

	if (id_s != NULL && id_s[0] >= '0' && id_s[0] <= '9')
		id = strtoul(id_s, &end, 10);
	for (unsigned i = 0; id > 0 && end != NULL && *end == '\0' && i < run->n; i++) {
		if (run->nodes[i].id == id)
			node = &run->nodes[i];
	}
	if (sig_s != NULL)
		sig = parse_sig(sig_s);
	if (node == NULL || sig == 0) {
		reply(r,
		      "error: kill: expected the id of a node of this launch and a signal, got "
		      "'%s %s'\n",
		      id_s != NULL ? id_s : "", sig_s != NULL ? sig_s : "");
		return;
	}
	if (!node->alive) {
		reply(r, "error: kill: node %" PRIu32 " is not running\n", node->id);
		return;
	}
	node->by_cmd = true;
	if (kill(-node->pid, sig) < 0) {
		reply(r, "error: kill: node %" PRIu32 ": %s\n", node->id, strerror(errno));
		return;
	}
	snprintf(name, sizeof(name), "SIG%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "");
	if (sigabbrev_np(sig) == NULL)
		snprintf(name, sizeof(name), "signal %d", sig); /* a real-time signal */
	lr_msg("sent %s to node %" PRIu32 " (pid %d) (control command)", name, node->id,
	       (int)node->pid);
	reply(r, "ok sent %s to node %" PRIu32 " (pid %d)\n", name, node->id, (int)node->pid);
	r->ok = true;
}

/* cmd_list -- "list": one line per node of the launch: id, pid, state. */
static void cmd_list(struct lr_run *run, struct lr_reply *r)
{
	char how[64];

	reply(r, "ok %u node(s)\n", run->n);
	r->ok = true;
	for (unsigned i = 0; i < run->n; i++) {
		const struct lr_node *node = &run->nodes[i];

		if (node->pid <= 0)
			reply(r, "%" PRIu32 " - not started\n", node->id);
		else if (node->alive && node->port > 0)
			reply(r, "%" PRIu32 " %d running %s:%u\n", node->id, (int)node->pid,
			      run->o->hosts[node->k % (unsigned long)run->o->nhosts], node->port);
		else if (node->alive)
			reply(r, "%" PRIu32 " %d running\n", node->id, (int)node->pid);
		else
			reply(r, "%" PRIu32 " %d %s%s\n", node->id, (int)node->pid,
			      how_str(node->st, how, sizeof(how)),
			      node->by_cmd ? " (kill command)" : "");
	}
}

/* ctl_command -- carry out the command line @line and answer on @fd; then close @fd. */
static void ctl_command(struct lr_run *run, char *line, int fd)
{
	struct lr_reply r = {.cap = 128 * 1024};
	char *save = NULL, *cmd = strtok_r(line, " \t\r\n", &save);
	char *a1 = strtok_r(NULL, " \t\r\n", &save), *a2 = strtok_r(NULL, " \t\r\n", &save);
	char *extra = strtok_r(NULL, " \t\r\n", &save);
	size_t off = 0;

	r.buf = malloc(r.cap);
	if (cmd != NULL && strcmp(cmd, "add") == 0 && a2 == NULL)
		cmd_add(run, a1, &r);
	else if (cmd != NULL && strcmp(cmd, "kill") == 0 && extra == NULL)
		cmd_kill(run, a1, a2, &r);
	else if (cmd != NULL && strcmp(cmd, "list") == 0 && a1 == NULL)
		cmd_list(run, &r);
	else
		reply(&r, "error: unknown command; expected add [K], kill ID [SIG] or list\n");
	if (r.buf == NULL) {
		static const char oom[] = "error: out of memory\n";

		r.buf = (char *)oom;
		r.len = sizeof(oom) - 1;
		r.cap = 0;
	}
	/* the client reads while we write; a client that does not is given up after a while */
	for (int tries = 0; off < r.len && tries < 1000; tries++) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		ssize_t w = write(fd, r.buf + off, r.len - off);

		if (w > 0)
			off += (size_t)w;
		else if (w < 0 && errno == EAGAIN && poll(&p, 1, LR_CTL_WAIT_MS) <= 0)
			break;
		else if (w < 0 && errno != EAGAIN && errno != EINTR)
			break;
	}
	if (r.cap > 0)
		free(r.buf);
	close(fd);
}

/* ctl_accept -- take a new control connection; refuse it when LR_CTL_MAX are open. */
static void ctl_accept(struct lr_run *run)
{
	int fd = accept4(run->cfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (int i = 0; i < LR_CTL_MAX; i++) {
		if (run->conns[i].fd < 0) {
			run->conns[i] = (struct lr_conn){.fd = fd};
			return;
		}
	}
	if (write(fd, "error: busy\n", 12) < 0) {
		/* the client is gone already */
	}
	close(fd);
}

/* ctl_read -- read from control connection @c; a whole line (or EOF) is carried out. */
static void ctl_read(struct lr_run *run, struct lr_conn *c)
{
	ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r > 0)
		c->len += (size_t)r;
	c->buf[c->len] = '\0';
	if (r > 0 && memchr(c->buf, '\n', c->len) == NULL && c->len < sizeof(c->buf) - 1)
		return;
	if (r < 0 || c->len == 0) {
		close(c->fd); /* closed without a command */
	} else {
		c->buf[strcspn(c->buf, "\n")] = '\0';
		ctl_command(run, c->buf, c->fd);
	}
	c->fd = -1;
	c->len = 0;
}

/* poll_wait_ms -- how long poll() may sleep before a deadline needs attention; -1 = forever. */
static int poll_wait_ms(const struct lr_run *run)
{
	int64_t now = now_ms(), until = -1;

	if (!run->ending && run->timeout_at > 0)
		until = run->timeout_at;
	else if (run->ending && !run->hard)
		until = run->kill_at;
	else if (run->hard)
		until = run->give_up_at;
	if (run->ending || !any_alive(run)) {
		/* groups empty without a SIGCHLD to us if the subreaper role was refused */
		if (until < 0 || until > now + LR_RECHECK_MS)
			until = now + LR_RECHECK_MS;
	}
	if (until < 0)
		return -1;
	return until <= now ? 0 : (int)(until - now);
}

/* loop_once -- one poll() over the signalfd and every open pipe, then handle what is ready. */
static void loop_once(struct lr_run *run, struct pollfd *pfds, struct lr_slot *slots)
{
	nfds_t nfds = 0;
	int r;

	pfds[nfds++] = (struct pollfd){.fd = run->sfd, .events = POLLIN};
	for (unsigned i = 0; i < run->n; i++) {
		for (int k = 0; k < 2; k++) {
			struct lr_stream *s = &run->nodes[i].s[k];

			if (s->fd >= 0 && lr_outs[k].dead) {
				/* nobody reads our stdout (stderr): the node's writes fail as well */
				close(s->fd);
				s->fd = -1;
				s->len = 0;
			}
			if (s->fd < 0)
				continue;
			slots[nfds] = (struct lr_slot){.node = &run->nodes[i], .s = s};
			pfds[nfds++] = (struct pollfd){.fd = s->fd, .events = POLLIN};
		}
	}
	if (run->cfd >= 0) {
		slots[nfds] = (struct lr_slot){.conn = -1};
		pfds[nfds++] = (struct pollfd){.fd = run->cfd, .events = POLLIN};
	}
	for (int i = 0; i < LR_CTL_MAX; i++) {
		if (run->conns[i].fd < 0)
			continue;
		slots[nfds] = (struct lr_slot){.conn = i};
		pfds[nfds++] = (struct pollfd){.fd = run->conns[i].fd, .events = POLLIN};
	}
	r = poll(pfds, nfds, poll_wait_ms(run));
	if (r < 0 && errno != EINTR) {
		lr_msg("poll: %s", strerror(errno));
		fail(run, LR_INTERNAL, LR_EXIT_INTERNAL);
		return;
	}
	if (r <= 0)
		return;
	if (pfds[0].revents & POLLIN)
		on_signals(run);
	for (nfds_t j = 1; j < nfds; j++) {
		if (pfds[j].revents == 0)
			continue;
		if (slots[j].node != NULL)
			stream_read(slots[j].node, slots[j].s);
		else if (slots[j].conn < 0)
			ctl_accept(
			    run); /* a command may add nodes: the slots are rebuilt next pass */
		else
			ctl_read(run, &run->conns[slots[j].conn]);
	}
}

/* run_loop -- until every node and every node's group is gone: I/O, reaping, deadlines. */
static void run_loop(struct lr_run *run)
{
	size_t max = 2 * (size_t)run->cap + 2 + LR_CTL_MAX;
	struct pollfd *pfds = calloc(max, sizeof(*pfds));
	struct lr_slot *slots = calloc(max, sizeof(*slots));

	if (pfds == NULL || slots == NULL) {
		lr_msg("out of memory");
		fail(run, LR_INTERNAL, LR_EXIT_INTERNAL);
		/* without poll(), still end and reap the nodes: sleep between passes */
	}
	run->need_reap = true;
	/* each pass sleeps in poll() until an event or a deadline; the give-up deadline ends it */
	for (;;) {
		int64_t now;

		if (run->need_reap || run->ending || !any_alive(run))
			reap(run);
		if (all_gone(run))
			break;
		if (!run->ending && !any_alive(run))
			begin_ending(run); /* all nodes are done; end what they left behind */
		now = now_ms();
		if (!run->ending && run->timeout_at > 0 && now >= run->timeout_at) {
			lr_msg("timeout after %.10g s", run->timeout_s);
			fail(run, LR_TIMEDOUT, LR_EXIT_TIMEOUT);
		}
		if (run->ending && !run->hard && now >= run->kill_at)
			kill_hard(run);
		if (run->hard && now >= run->give_up_at) {
			for (unsigned i = 0; i < run->n; i++) {
				if (run->nodes[i].alive || run->nodes[i].group)
					lr_msg("node %" PRIu32 ": process group %d would not die",
					       run->nodes[i].id, (int)run->nodes[i].pid);
			}
			fail(run, LR_INTERNAL, LR_EXIT_INTERNAL);
			break;
		}
		if (pfds == NULL || slots == NULL)
			poll(NULL, 0, LR_RECHECK_MS);
		else
			loop_once(run, pfds, slots);
	}
	free(slots);
	free(pfds);
}

/* drain -- after the last process: read what the pipes still hold, flush partial lines, close. */
static void drain(struct lr_run *run)
{
	for (unsigned i = 0; i < run->n; i++) {
		for (int k = 0; k < 2; k++) {
			struct lr_stream *s = &run->nodes[i].s[k];

			for (int j = 0; s->fd >= 0 && j < LR_DRAIN_MAX; j++)
				stream_read(&run->nodes[i], s);
			/* still open: held by a process that left its node's group */
			if (s->fd >= 0)
				stream_close(&run->nodes[i], s);
		}
	}
}

/* summary -- with --keep-going or --control: one line per node that ended early, and the status. */
static void summary(const struct lr_run *run, int status)
{
	unsigned died = 0;
	char how[64];

	for (unsigned i = 0; i < run->n; i++)
		died += run->nodes[i].died;
	if (died == 0 || (!run->o->keep_going && run->o->control == NULL))
		return; /* without them, the one failure was reported as it happened */
	for (unsigned i = 0; i < run->n; i++) {
		const struct lr_node *node = &run->nodes[i];

		if (node->died)
			lr_msg("summary: node %" PRIu32 " (pid %d) %s%s", node->id, (int)node->pid,
			       how_str(node->st, how, sizeof(how)),
			       node->by_cmd ? " (kill command)" : "");
	}
	lr_msg("summary: %u of %u node(s) ended early; exit status %d", died, run->n, status);
}

/* launch -- set up and start every node, then run the loop; returns the exit status. */
static int launch(const struct lr_opts *o)
{
	struct lr_saved saved = {.nofile_raised = false};
	struct lr_run run = {.o = o, .saved = &saved, .sfd = -1, .cfd = -1};
	struct sigaction ign = {.sa_handler = SIG_IGN};
	rlim_t need;
	sigset_t set;
	int ret;

	run.cap = o->control != NULL ? LR_MAX_NODES : (unsigned)o->n;
	need = 2 * (rlim_t)run.cap + 16 + LR_CTL_MAX;
	for (int i = 0; i < LR_CTL_MAX; i++)
		run.conns[i].fd = -1;
	run.nodes = calloc(run.cap, sizeof(*run.nodes));
	if (run.nodes == NULL) {
		lr_msg("out of memory");
		return LR_EXIT_INTERNAL;
	}
	for (unsigned i = 0; i < o->n; i++) {
		if (node_init(&run, (uint32_t)(o->first_id + i))) {
			ret = LR_EXIT_INTERNAL;
			goto out_free;
		}
	}
	if (job_env(o, &run.port)) {
		ret = LR_EXIT_INTERNAL;
		goto out_free;
	}
	if (o->control != NULL) {
		run.cfd = lr_ctl_listen(o->control);
		if (run.cfd < 0) {
			lr_msg("--control: cannot listen on %s: %s", o->control,
			       strerror(-run.cfd));
			ret = LR_EXIT_INTERNAL;
			goto out_free;
		}
	}

	/* two pipes per node: raise the soft fd limit as far as needed (and allowed) */
	if (getrlimit(RLIMIT_NOFILE, &saved.nofile) == 0 &&
	    saved.nofile.rlim_cur != RLIM_INFINITY && saved.nofile.rlim_cur < need) {
		struct rlimit raised = saved.nofile;

		raised.rlim_cur = raised.rlim_max == RLIM_INFINITY || raised.rlim_max > need
		                      ? need
		                      : raised.rlim_max;
		saved.nofile_raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
	}

	/* before the first fork, so no SIGCHLD is missed; the children get the old mask back */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, &saved.mask) < 0) {
		lr_msg("sigprocmask: %s", strerror(errno));
		ret = LR_EXIT_INTERNAL;
		goto out_free;
	}
	run.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (run.sfd < 0) {
		lr_msg("signalfd: %s", strerror(errno));
		ret = LR_EXIT_INTERNAL;
		goto out_restore_mask;
	}
	/* a closed stdout must not kill the launcher and orphan the nodes */
	sigaction(SIGPIPE, &ign, &saved.pipe);
	/* orphans of a node's group become our children: reaped here, group emptiness is known */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	if (o->timeout > 0) {
		int64_t ms = (int64_t)(o->timeout * 1000 + 0.999); /* rounded up */

		run.timeout_s = o->timeout;
		run.timeout_at = now_ms() + (ms > 0 ? ms : 1);
	}
	if (assign_ports(&run, 0))
		fail(&run, LR_INTERNAL, LR_EXIT_INTERNAL);
	for (unsigned i = 0; i < run.n && run.reason == LR_RUNNING; i++) {
		/* the first node first; the others join it and retry until it answers */
		ret = node_env(&run, &run.nodes[i], 0);
		if (ret)
			lr_msg("node %" PRIu32 ": setenv: %s", run.nodes[i].id, strerror(-ret));
		if (ret || node_spawn(&run.nodes[i], o, &saved))
			fail(&run, LR_INTERNAL, LR_EXIT_INTERNAL);
	}
	run_loop(&run);
	drain(&run);
	out_flush(0);
	out_flush(1);
	if (run.reason != LR_RUNNING)
		ret = run.status;
	else
		ret = run.failed ? run.fail_status : 0;
	summary(&run, ret);

	close(run.sfd);
	sigaction(SIGPIPE, &saved.pipe, NULL);
out_restore_mask:
	sigprocmask(SIG_SETMASK, &saved.mask, NULL);
out_free:
	for (int i = 0; i < LR_CTL_MAX; i++) {
		if (run.conns[i].fd >= 0)
			close(run.conns[i].fd);
	}
	if (run.cfd >= 0) {
		close(run.cfd);
		unlink(o->control);
	}
	for (unsigned i = run.n; i > 0; i--) {
		free(run.nodes[i - 1].s[1].buf);
		free(run.nodes[i - 1].s[0].buf);
	}
	free(run.nodes);
	return ret;
}

/* std_fds -- open /dev/null on any of fds 0-2 that is closed, so no pipe lands there. */
static void std_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int null = open("/dev/null", O_RDWR);

			if (null >= 0 && null != fd) {
				dup2(null, fd);
				close(null);
			}
		}
	}
}

int main(int argc, char **argv)
{
	struct lr_opts o;
	int ret, err;

	std_fds();
	lr_time_init();
	if (argc >= 2 && strcmp(argv[1], "--ctl") == 0)
		return lr_ctl_client(argc > 2 ? argv[2] : "", argc > 3 ? argc - 3 : 0, argv + 3);
	ret = lr_parse_opts(argc, argv, &o);
	if (ret == 1) {
		lr_usage(stdout);
		return 0;
	}
	if (ret) {
		lr_usage(stderr);
		return LR_EXIT_USAGE;
	}
	err = lr_find_program(o.argv[0]);
	if (err) {
		if (err == ENOENT && strchr(o.argv[0], '/') == NULL)
			lr_msg("%s: command not found", o.argv[0]);
		else
			lr_msg("%s: cannot execute: %s", o.argv[0], strerror(err));
		return LR_EXIT_NOEXEC;
	}
	return launch(&o);
}
