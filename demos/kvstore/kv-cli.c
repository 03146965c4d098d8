/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kv-cli.c -- `kv`, the KV store's command line: one command through the
 * admin socket of a running server (kv.h: the first one of the cluster
 * file that answers), which runs it on the map.
 *
 *   kv [--cluster kv.cluster] get KEY | put KEY VALUE | del KEY | stat [KEY]
 *
 * get prints the value (its version on stderr); put prints the new
 * version; del prints "deleted"; stat prints each server's counters (and
 * KEY's owner). Exit 0; 1 on an error; 3 when get or del found no key.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kv.h"

#define LINE (LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX + 256)

static int usage(void)
{
	fprintf(stderr,
	        "usage: kv [--cluster FILE] get KEY | put KEY VALUE | del KEY | stat [KEY]\n");
	return 2;
}

/* ask -- send @req to server @id's admin socket, its reply line into @out. 0 or -errno. */
static int ask(const char *path, uint32_t id, const char *req, char *out, size_t len)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t got = 0;
	int fd, ret = 0;

	kv_admin_path(path, id, sun.sun_path, sizeof(sun.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while (got < len - 1) { /* the server answers within its operations' 10 s bound */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 15000) <= 0) {
			ret = -ETIMEDOUT;
			break;
		}
		n = read(fd, out + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	out[got] = '\0';
	if (ret == 0 && (got == 0 || out[got - 1] != '\n'))
		ret = -EPROTO;
	return ret;
}

int main(int argc, char **argv)
{
	const char *path = "kv.cluster", *cmd;
	char req[LINE], out[LINE];
	uint32_t ids[16];
	int i = 1, n, rc = 1;

	if (argc > 2 && strcmp(argv[1], "--cluster") == 0) {
		path = argv[2];
		i = 3;
	}
	if (i >= argc)
		return usage();
	cmd = argv[i++];
	if (strcmp(cmd, "get") == 0 && argc - i == 1)
		snprintf(req, sizeof(req), "get %s\n", argv[i]);
	else if (strcmp(cmd, "del") == 0 && argc - i == 1)
		snprintf(req, sizeof(req), "del %s\n", argv[i]);
	else if (strcmp(cmd, "put") == 0 && argc - i == 2)
		snprintf(req, sizeof(req), "put %s %s\n", argv[i], argv[i + 1]);
	else if (strcmp(cmd, "stat") == 0 && argc - i <= 1)
		snprintf(req, sizeof(req), "stat%s%s\n", argc - i ? " " : "",
		         argc - i ? argv[i] : "");
	else
		return usage();
	if (i < argc && (argv[i][0] == '\0' || strpbrk(argv[i], " \n") != NULL)) {
		fprintf(stderr, "kv: a key is not empty and has no spaces or newlines\n");
		return 2;
	}
	if (i + 1 < argc && strchr(argv[i + 1], '\n') != NULL) {
		fprintf(stderr, "kv: a value has no newlines here\n");
		return 2;
	}
	n = kv_server_ids(path, ids, 16);
	if (n <= 0) {
		fprintf(stderr, "kv: no server in %s (%s)\n", path,
		        n < 0 ? strerror(-n) : "the servers write it once they serve");
		return 1;
	}
	for (int k = 0; k < n; k++) {
		int ret = ask(path, ids[k], req, out, sizeof(out)), err = 0;
		unsigned long long version = 0;
		int off = 0;

		if (ret)
			continue; /* that server is gone: the next one */
		if (strncmp(out, "err ", 4) == 0 && sscanf(out, "err %d %n", &err, &off) == 1) {
			if (err == ENOENT && strcmp(cmd, "stat") != 0) {
				fprintf(stderr, "kv: no such key\n");
				return 3;
			}
			fprintf(stderr, "kv: %s: %s", cmd, out + off);
			return 1;
		}
		if (sscanf(out, "ok %llu %n", &version, &off) != 1) {
			fprintf(stderr, "kv: bad reply from node %u\n", ids[k]);
			continue;
		}
		if (strcmp(cmd, "get") == 0) {
			fputs(out + off, stdout);
			fprintf(stderr, "kv: version %llu (node %u)\n", version, ids[k]);
		} else if (strcmp(cmd, "put") == 0) {
			printf("version %llu\n", version);
		} else if (strcmp(cmd, "del") == 0) {
			printf("deleted\n");
		} else {
			fputs(out + off, stdout);
			continue; /* stat: every server */
		}
		return 0;
	}
	if (strcmp(cmd, "stat") == 0)
		rc = 0;
	else
		fprintf(stderr, "kv: no server of %s answered\n", path);
	return rc;
}
