/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-run-ctl.c -- the control socket of a running launcher (--control PATH) and its client
 * (loco-run --ctl PATH CMD...). The protocol is one command line from the client, then the
 * answer: a first line "ok ..." or "error: ...", maybe more lines, and the launcher closes.
 */
#include "loco-run.h"

/* ctl_addr -- @path as a unix socket address; -ENAMETOOLONG when it does not fit. */
static int ctl_addr(const char *path, struct sockaddr_un *sa)
{
	*sa = (struct sockaddr_un){.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

/*
 * stale -- true when @path is a socket nobody listens on (a launcher killed with SIGKILL left
 * it): it may be removed. A live launcher's socket, or any other file, is left alone.
 */
static bool stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	bool ret;
	int fd;

	if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 && errno == ECONNREFUSED;
	close(fd);
	return ret;
}

/* lr_ctl_listen -- a listening unix socket at @path (mode 0600); the fd or -errno. */
int lr_ctl_listen(const char *path)
{
	struct sockaddr_un sa;
	mode_t old;
	int fd, ret;

	ret = ctl_addr(path, &sa);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* whoever can connect can start and kill processes as us: the owner only */
	old = umask(0077);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (ret < 0 && errno == EADDRINUSE && stale(path, &sa) && unlink(path) == 0)
		ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (ret < 0)
		ret = -errno;
	umask(old);
	if (ret == 0 && listen(fd, LR_CTL_MAX) < 0) {
		ret = -errno;
		unlink(path);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* wait_fd -- poll @fd for @events for up to LR_CTL_WAIT_MS; 0 when ready, else -ETIMEDOUT. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	do
		r = poll(&p, 1, LR_CTL_WAIT_MS);
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -ETIMEDOUT;
}

/*
 * lr_ctl_client -- send "@argv[0] @argv[1]...\n" to the launcher listening at @path and copy
 * its answer to stdout. Exit status: 0 when the answer starts with "ok", 1 for an error
 * answer, 69 (EX_UNAVAILABLE) when no launcher answers, 2 for a bad command line.
 */
int lr_ctl_client(const char *path, int argc, char **argv)
{
	char line[LR_CTL_LINE], buf[4096];
	struct sockaddr_un sa;
	size_t len = 0, off = 0;
	bool first = true, ok = false;
	int fd;

	if (argc < 1 || ctl_addr(path, &sa)) {
		lr_msg(
		    "--ctl: expected PATH and a command: add [K], restart ID, kill ID [SIG], list");
		return LR_EXIT_USAGE;
	}
	for (int i = 0; i < argc; i++) {
		size_t k = strlen(argv[i]);

		if (len + k + 2 > sizeof(line) || strchr(argv[i], '\n') != NULL) {
			lr_msg("--ctl: the command is too long");
			return LR_EXIT_USAGE;
		}
		if (i > 0)
			line[len++] = ' ';
		memcpy(line + len, argv[i], k);
		len += k;
	}
	line[len++] = '\n';
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		lr_msg("--ctl: cannot connect to %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 69;
	}
	signal(SIGPIPE, SIG_IGN);
	while (off < len) {
		ssize_t w = write(fd, line + off, len - off);

		if (w < 0 && errno != EINTR) {
			lr_msg("--ctl: write to %s: %s", path, strerror(errno));
			close(fd);
			return 69;
		}
		if (w > 0)
			off += (size_t)w;
	}
	/* the launcher answers within a loop pass; each read is bounded, the answer ends at EOF */
	for (int reads = 0; reads < 100000; reads++) {
		ssize_t r;

		if (wait_fd(fd, POLLIN)) {
			lr_msg("--ctl: no answer from %s", path);
			close(fd);
			return 69;
		}
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (first)
			ok = r >= 2 && memcmp(buf, "ok", 2) == 0;
		first = false;
		fwrite(buf, 1, (size_t)r, stdout);
	}
	close(fd);
	fflush(stdout);
	if (first) {
		lr_msg("--ctl: %s closed without an answer", path);
		return 69;
	}
	return ok ? 0 : 1;
}
