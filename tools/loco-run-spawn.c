/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run-spawn.c -- starting a node of the local launcher: its place (lr_node_init), the
 * environment of the job and of each node (LOCO_NODES, LOCO_SECRET, LOCO_ADDR, LOCO_JOIN...),
 * the ports it listens on, and the fork and exec into its own process group. See loco-run.c.
 */
#include "loco-run.h"

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
 * ephemeral_range -- the ports the kernel hands out itself (ip_local_port_range): to bind(0),
 * as another node's listener gets one, and to connect(). The kernel's default when unreadable.
 */
static void ephemeral_range(unsigned *lo, unsigned *hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	unsigned a, b;

	*lo = 32768;
	*hi = 60999;
	if (f == NULL)
		return;
	if (fscanf(f, "%u %u", &a, &b) == 2 && a <= b && b <= 65535) {
		*lo = a;
		*hi = b;
	}
	fclose(f);
}

/* bind_port -- a TCP socket bound to @sa with port @port (0: the kernel's pick) into @fd. */
static int bind_port(struct sockaddr_in *sa, unsigned port, int *fd)
{
	socklen_t salen = sizeof(*sa);

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return -errno;
	sa->sin_port = htons((uint16_t)port);
	if (bind(*fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 ||
	    getsockname(*fd, (struct sockaddr *)sa, &salen) < 0) {
		int ret = -errno;

		close(*fd);
		*fd = -1;
		return ret;
	}
	return 0;
}

/*
 * free_port -- a TCP port on @host that was free a moment ago; 0 or -errno. With @keep, the
 * socket stays bound and its fd is put there, so that the next call gets another port.
 *
 * The port is drawn from outside the kernel's ephemeral range (from LR_PORT_MIN up): the node
 * binds it only after it started, and until then the kernel may give a port inside the range
 * to anybody — seen: node 2's listener (LOCO_ADDR port 0) took node 1's port before node 1
 * bound it, node 2 joined itself and node 1 could not listen. Only when no port outside the
 * range can be bound does the kernel pick one.
 */
static int free_port(const char *host, unsigned *port, int *keep)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	unsigned lo, hi, below, above, start = 0;
	int fd, ret = -EADDRINUSE;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	ephemeral_range(&lo, &hi);
	below = lo > LR_PORT_MIN ? lo - LR_PORT_MIN : 0;
	above = hi < 65535 ? 65535 - hi : 0;
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
		start = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
	for (unsigned k = 0; k < LR_PORT_TRIES && below + above > 0; k++) {
		unsigned i = (start + k * 7919u) % (below + above);

		ret = bind_port(&sa, i < below ? LR_PORT_MIN + i : hi + 1 + (i - below), &fd);
		if (ret == 0 || (ret != -EADDRINUSE && ret != -EACCES))
			break;
	}
	if (ret == -EADDRINUSE || ret == -EACCES)
		ret = bind_port(&sa, 0, &fd);
	if (ret)
		return ret;
	*port = ntohs(sa.sin_port);
	if (keep != NULL)
		*keep = fd;
	else
		close(fd);
	return 0;
}

/*
 * bind_cpu -- --bind: pin the calling process to the (@k mod count)-th CPU it may run on now
 * (the launcher's set, inherited), as mpirun --bind-to core places rank k. 0 or -errno.
 */
static int bind_cpu(unsigned long k)
{
	cpu_set_t have, one;
	int count, seen = 0;

	if (sched_getaffinity(0, sizeof(have), &have) < 0)
		return -errno;
	count = CPU_COUNT(&have);
	if (count <= 0)
		return -EINVAL;
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &have))
			continue;
		if ((unsigned long)seen++ == k % (unsigned long)count) {
			CPU_SET(c, &one);
			break;
		}
	}
	return sched_setaffinity(0, sizeof(one), &one) < 0 ? -errno : 0;
}

/*
 * child_exec -- in the forked child of @node: own process group, pipes as stdout/stderr,
 * /dev/null as stdin, the launcher's original signal state; then exec. Never returns.
 */
static void child_exec(struct lr_node *node, int wfd[2], const struct lr_saved *saved,
                       pid_t launcher, const struct lr_opts *o)
{
	int null;
	char **argv = o->argv;

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
	if (o->bind) {
		int ret = bind_cpu(node->k);

		if (ret) {
			dprintf(STDERR_FILENO, "loco-run: node %" PRIu32 ": cannot bind: %s\n",
			        node->id, strerror(-ret));
			_exit(LR_EXIT_INTERNAL);
		}
	}
	execvp(argv[0], argv);
	dprintf(STDERR_FILENO, "loco-run: node %" PRIu32 ": cannot execute %s: %s\n", node->id,
	        argv[0], strerror(errno));
	_exit(errno == ENOENT ? LR_EXIT_NOEXEC : 126);
}

/* lr_node_spawn -- fork and exec @node, its stdout and stderr into two new pipes; 0 or -errno. */
int lr_node_spawn(struct lr_node *node, const struct lr_opts *o, const struct lr_saved *saved)
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
		child_exec(node, wfd, saved, launcher, o);
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
 * lr_job_env -- the environment every node of this launch shares: LOCO_NODES, LOCO_SECRET,
 * LOCO_FABRIC; and the first node's port in *@port (0 with --join). 0 or -errno.
 */
int lr_job_env(const struct lr_opts *o, unsigned *port)
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
 * lr_assign_ports -- the port of each node from @from on: the job's port for the first node of a
 * fresh launch, with --control a free port picked for each of the others, else 0 (any). The
 * picked ports are distinct, and free again when this returns; 0 or -errno.
 */
int lr_assign_ports(struct lr_run *run, unsigned from)
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
 * lr_node_env -- the per-node part: LOCO_NODE_ID, LOCO_NODES, LOCO_ADDR, LOCO_JOIN. The node
 * listens on hosts[k % nhosts]. The first node of a fresh launch starts the job; the others
 * of the launch join it, or the --join address. With --control every node listens on a port
 * picked here, so that a node added later (@nodes > 0: the job's live nodes, it included)
 * can be given live members to join through. 0 or -errno.
 */
int lr_node_env(struct lr_run *run, struct lr_node *node, unsigned long nodes)
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

/* lr_node_init -- set up run->nodes[run->n] as the next node, id @id; 0 or -ENOMEM. */
int lr_node_init(struct lr_run *run, uint32_t id)
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
