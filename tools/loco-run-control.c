/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run-control.c -- the commands a running launcher takes on its control socket
 * (--control PATH): add [K], restart ID, kill ID [SIG], list. loco-run.c polls the socket and its
 * connections and calls lr_ctl_accept() and lr_ctl_read(); the socket itself and the client
 * are in loco-run-ctl.c.
 */
#include "loco-run.h"

/* An answer to a control command, built whole and written before the connection closes. */
struct lr_reply {
	char *buf;
	size_t len, cap;
	bool ok; /* the first line said "ok" */
};

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
		if (lr_node_init(run, run->max_id + 1))
			break;
	}
	if (lr_assign_ports(run, first))
		goto out;
	for (unsigned i = first; i < run->n; i++) {
		struct lr_node *node = &run->nodes[i];

		/* a node that was not started is listed as such (pid 0) */
		if (lr_node_env(run, node, live + want) || lr_node_spawn(node, run->o, run->saved))
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

/* find_node -- the latest start of node @id_s (a decimal id) in the launch, or NULL. */
static struct lr_node *find_node(struct lr_run *run, const char *id_s)
{
	struct lr_node *node = NULL;
	unsigned long id = 0;
	char *end = NULL;

	if (id_s != NULL && id_s[0] >= '0' && id_s[0] <= '9') {
		errno = 0;
		id = strtoul(id_s, &end, 10);
	}
	if (id == 0 || end == NULL || *end != '\0' || errno || id > UINT32_MAX)
		return NULL;
	/* a restarted id has one entry per start: the last one is the one that runs */
	for (unsigned i = 0; i < run->n; i++) {
		if (run->nodes[i].id == id)
			node = &run->nodes[i];
	}
	return node;
}

/*
 * cmd_restart -- "restart ID": start node ID again, with the same id, once it was killed or
 * ended (or could not be started), joining the live nodes as an added node does. Its earlier
 * start stays in the list and in the summary; the new one is a new incarnation to the others.
 */
static void cmd_restart(struct lr_run *run, const char *id_s, struct lr_reply *r)
{
	struct lr_node *old = find_node(run, id_s), *node;
	unsigned long live = 0;
	unsigned i;

	if (old == NULL) {
		reply(r, "error: restart: expected the id of a node of this launch, got '%s'\n",
		      id_s != NULL ? id_s : "");
		return;
	}
	if (old->alive) {
		reply(r, "error: restart: node %" PRIu32 " is running (kill it first)\n", old->id);
		return;
	}
	if (run->ending) {
		reply(r, "error: restart: the launch is ending\n");
		return;
	}
	if (run->n >= run->cap) {
		reply(r, "error: restart: no room for another start (%u nodes started)\n", run->n);
		return;
	}
	for (unsigned j = 0; j < run->n; j++)
		live += run->nodes[j].alive;
	i = run->n;
	if (lr_node_init(run, old->id)) {
		reply(r, "error: restart: out of memory\n");
		return;
	}
	node = &run->nodes[i];
	node->k = old->k; /* its place: the same host (and CPU with --bind) as before */
	/* a node that was not started is listed as such (pid 0) */
	if (lr_assign_ports(run, i) || lr_node_env(run, node, live + 1) ||
	    lr_node_spawn(node, run->o, run->saved)) {
		reply(r,
		      "error: restart: node %" PRIu32
		      " could not be started (see the launcher's messages)\n",
		      node->id);
		return;
	}
	lr_msg("node %" PRIu32 " (pid %d) restarted (control command)", node->id, (int)node->pid);
	reply(r, "ok restarted %" PRIu32 " (pid %d)\n", node->id, (int)node->pid);
	r->ok = true;
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
	struct lr_node *node = find_node(run, id_s);
	int sig = SIGTERM;
	char name[32];

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
			      lr_how_str(node->st, how, sizeof(how)),
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
	else if (cmd != NULL && strcmp(cmd, "restart") == 0 && a1 != NULL && a2 == NULL)
		cmd_restart(run, a1, &r);
	else if (cmd != NULL && strcmp(cmd, "kill") == 0 && extra == NULL)
		cmd_kill(run, a1, a2, &r);
	else if (cmd != NULL && strcmp(cmd, "list") == 0 && a1 == NULL)
		cmd_list(run, &r);
	else
		reply(&r, "error: unknown command; expected add [K], restart ID, kill ID [SIG] or "
		          "list\n");
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

/* lr_ctl_accept -- take a new control connection; refuse it when LR_CTL_MAX are open. */
void lr_ctl_accept(struct lr_run *run)
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

/* lr_ctl_read -- read from control connection @c; a whole line (or EOF) is carried out. */
void lr_ctl_read(struct lr_run *run, struct lr_conn *c)
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
