/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run.c -- the local launcher: start N copies of a program as LOCO nodes on this host,
 * prefix their output with the node id, and end them all together (DESIGN §1, loco-run(1)).
 *
 * One process, no threads: the nodes' stdout/stderr pipes and a signalfd (SIGCHLD and the
 * signals that end the launch) are multiplexed with poll(). Every node is the leader of its own
 * process group, and the launcher is a child subreaper, so whatever a node forks and orphans in
 * its group is reaped here and the launcher can tell when a group is empty. Only libc is used.
 * With --control, a unix socket in the same poll() takes commands that add and kill nodes
 * (loco-run-control.c). Starting a node, its environment and port: loco-run-spawn.c.
 */
#include "loco-run.h"

/* What a pollfd (after the signalfd's) belongs to: a node's stream, else a control socket. */
struct lr_slot {
	struct lr_node *node;
	struct lr_stream *s;
	int conn; /* with node == NULL: index into lr_run.conns, or -1 for the listening socket */
};

/* The launcher's own stdout and stderr, written whole lines at a time. */
struct lr_out {
	int fd;
	bool dead; /* a write failed (EPIPE...): output is dropped from then on */
	size_t len;
	char buf[LR_OUT_CAP];
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

/* lr_how_str -- "exited with status 3" or "killed by SIGKILL" for the wait status @st. */
const char *lr_how_str(int st, char *buf, size_t len)
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
	lr_how_str(st, how, sizeof(how));
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
			lr_ctl_accept(
			    run); /* a command may add nodes: the slots are rebuilt next pass */
		else
			lr_ctl_read(run, &run->conns[slots[j].conn]);
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
			       lr_how_str(node->st, how, sizeof(how)),
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
		if (lr_node_init(&run, (uint32_t)(o->first_id + i))) {
			ret = LR_EXIT_INTERNAL;
			goto out_free;
		}
	}
	if (lr_job_env(o, &run.port)) {
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
		/* now_ms() truncates: one more ms, so the timeout never fires before its time */
		run.timeout_at = now_ms() + (ms > 0 ? ms : 1) + 1;
	}
	if (lr_assign_ports(&run, 0))
		fail(&run, LR_INTERNAL, LR_EXIT_INTERNAL);
	for (unsigned i = 0; i < run.n && run.reason == LR_RUNNING; i++) {
		/* the first node first; the others join it and retry until it answers */
		ret = lr_node_env(&run, &run.nodes[i], 0);
		if (ret)
			lr_msg("node %" PRIu32 ": setenv: %s", run.nodes[i].id, strerror(-ret));
		if (ret || lr_node_spawn(&run.nodes[i], o, &saved))
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
