/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kv-cli.c -- `kv`, the KV store's command line. get, put and del join
 * the running cluster as a client node (kv_client_open(): the first free
 * client id), run one map operation (a GET is this node's own one-sided
 * READ at the key's owner; a write an rpc to the owner) and leave, so
 * the id is free for the next client; it adds its gets and writes to the
 * cluster file's counts as it leaves. stat asks every server's admin
 * socket for its counters (on the servers' host) and prints the clients'
 * counts.
 *
 *   kv [--cluster kv.cluster] get KEY | put KEY VALUE | del KEY | stat [KEY]
 *
 * get prints the value (its version and the client node on stderr); put
 * prints the new version; del prints "deleted"; stat prints each
 * server's counters (and KEY's owner), then the gets and writes of the
 * clients that left (a GET is a client's one-sided READ: no server sees
 * it, so the clients count them). Exit 0; 1 on an error; 3 when get
 * or del found no key. The library logs only errors here unless LOCO_LOG
 * says otherwise.
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

/* op -- get, put or del as a client node: the exit code */
static int op(const char *path, const char *cmd, const char *key, const char *value)
{
	char val[LOCO_MAP_VALUE_MAX + 1];
	size_t klen = strlen(key), vlen = 0;
	uint64_t version = 0;
	struct kv_conf c;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	int ret;

	setenv("LOCO_LOG", "error", 0);
	ret = kv_client_open(path, &c, &m, &ch, &map);
	if (ret) {
		fprintf(stderr, "kv: cannot join the cluster of %s as a client: %s\n", path,
		        ret == -EADDRINUSE ? "every client id is held by a live client"
		                           : loco_strerror(ret));
		return 1;
	}
	if (strcmp(cmd, "get") == 0) {
		ret = loco_map_get(map, key, klen, val, sizeof(val) - 1, &vlen, &version,
		                   10 * KV_SEC);
		if (ret == 0) {
			val[vlen] = '\0';
			printf("%s\n", val);
			fprintf(stderr, "kv: version %llu (client node %u)\n",
			        (unsigned long long)version, loco_manager_node_id(m));
		}
	} else if (strcmp(cmd, "put") == 0) {
		ret = loco_map_put(map, key, klen, value, strlen(value), &version, 10 * KV_SEC);
		if (ret == 0)
			printf("version %llu\n", (unsigned long long)version);
	} else {
		ret = loco_map_del(map, key, klen, 10 * KV_SEC);
		if (ret == 0)
			printf("deleted\n");
	}
	kv_client_close(path, m, ch, map);
	if (ret == -ENOENT) {
		fprintf(stderr, "kv: no such key\n");
		return 3;
	}
	if (ret) {
		fprintf(stderr, "kv: %s: %s\n", cmd, loco_strerror(ret));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = "kv.cluster", *cmd;
	char req[LINE], out[LINE];
	uint64_t gets, writes, clients;
	uint32_t ids[16];
	int i = 1, n, answered = 0;

	if (argc > 2 && strcmp(argv[1], "--cluster") == 0) {
		path = argv[2];
		i = 3;
	}
	if (i >= argc)
		return usage();
	cmd = argv[i++];
	if (!((strcmp(cmd, "get") == 0 && argc - i == 1) ||
	      (strcmp(cmd, "del") == 0 && argc - i == 1) ||
	      (strcmp(cmd, "put") == 0 && argc - i == 2) ||
	      (strcmp(cmd, "stat") == 0 && argc - i <= 1)))
		return usage();
	if (i < argc && (argv[i][0] == '\0' || strpbrk(argv[i], " \n") != NULL)) {
		fprintf(stderr, "kv: a key is not empty and has no spaces or newlines\n");
		return 2;
	}
	if (i + 1 < argc && strchr(argv[i + 1], '\n') != NULL) {
		fprintf(stderr, "kv: a value has no newlines here\n");
		return 2;
	}
	if (strcmp(cmd, "stat") != 0)
		return op(path, cmd, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
	/* stat: every server's counters, through its admin socket */
	snprintf(req, sizeof(req), "stat%s%s\n", argc - i ? " " : "", argc - i ? argv[i] : "");
	n = kv_server_ids(path, ids, 16);
	if (n <= 0) {
		fprintf(stderr, "kv: no server in %s (%s)\n", path,
		        n < 0 ? strerror(-n) : "the servers write it once they serve");
		return 1;
	}
	for (int k = 0; k < n; k++) {
		int off = 0;

		if (ask(path, ids[k], req, out, sizeof(out)) != 0)
			continue; /* that server is gone (or on another host) */
		if (sscanf(out, "ok %*u %n", &off) != 0 || off == 0) {
			fprintf(stderr, "kv: bad reply from node %u\n", ids[k]);
			continue;
		}
		fputs(out + off, stdout);
		answered++;
	}
	if (answered == 0) {
		fprintf(stderr, "kv: no server of %s answered on this host\n", path);
		return 1;
	}
	if (kv_counts_read(path, &gets, &writes, &clients) == 0)
		printf("clients: %llu gets, %llu writes (counted by the %llu client%s that left: "
		       "a GET is a one-sided READ, which no server sees)\n",
		       (unsigned long long)gets, (unsigned long long)writes,
		       (unsigned long long)clients, clients == 1 ? "" : "s");
	return 0;
}
