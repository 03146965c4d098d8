/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kv-server.c -- a node of the replicated KV store: holds its share of the
 * keys of map "kv" (loco_map(3)) and serves GETs (one-sided READs of its
 * table) and writes (rpc) until SIGTERM or SIGINT, then hands its keys
 * over (loco_map_leave) and leaves.
 *
 *   loco-run -n 4 build/demos/kvstore/kv-server [--replicas 2]
 *       [--capacity 65536] [--value-max 1024] [--spare 1] [--cluster kv.cluster]
 *
 * The servers started first are the nodes 1 .. LOCO_NODES; --spare more
 * ids are key holders too, for servers added later (loco-run --ctl PATH
 * add 1: such a node joins the map in use and serves once it has its
 * keys). A server restarted with its id (loco-run --ctl PATH restart ID),
 * which the cluster file of the launch lists already, joins the map in use
 * the same way. Each server adds its address to the cluster file, which the
 * clients (kv, kv-ycsb --store loco:FILE) read. Every server must be
 * given the same settings.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kv.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/*
 * The admin socket: "kv stat" reads this server's counters there (kv.h;
 * get, put and del join the cluster as client nodes). One request a
 * connection, one line: "stat [KEY]"; one reply line: "ok 0 COUNTERS" or
 * "err ERRNO TEXT".
 */
#define ADMIN_LINE (LOCO_MAP_KEY_MAX + LOCO_MAP_VALUE_MAX + 64)

struct admin {
	loco_map_t *map;
	int fd;
	uint32_t me;
	const struct kv_conf *c;
};

static void admin_serve(struct admin *a, int fd)
{
	char req[ADMIN_LINE + 1], out[ADMIN_LINE + 64];
	char *key, *arg, *sp;
	size_t got = 0;
	int ret = -EINVAL;

	/* bounded: a peer that sends nothing for 2 s is dropped */
	while (got < ADMIN_LINE) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 2000) <= 0)
			return;
		n = read(fd, req + got, ADMIN_LINE - got);
		if (n <= 0)
			return;
		got += (size_t)n;
		if (memchr(req, '\n', got) != NULL)
			break;
	}
	req[got] = '\0';
	if ((sp = strchr(req, '\n')) != NULL)
		*sp = '\0';
	key = strchr(req, ' ');
	if (key != NULL)
		*key++ = '\0';
	arg = key != NULL ? strchr(key, ' ') : NULL;
	if (arg != NULL)
		*arg++ = '\0';
	if (strcmp(req, "stat") == 0 && arg == NULL) {
		loco_map_stats_t st;

		loco_map_stats(a->map, &st);
		snprintf(
		    out, sizeof(out),
		    "ok 0 node %u: %llu owned, %llu replicas, %llu slots used of %u; %llu writes "
		    "applied (as owner or replica); key holders 1..%u, %u replica(s)%s",
		    a->me, (unsigned long long)st.owned, (unsigned long long)st.replicas,
		    (unsigned long long)st.used, a->c->capacity, (unsigned long long)st.applied,
		    a->c->holders, a->c->replicas, key != NULL ? "" : "\n");
		if (key != NULL)
			snprintf(out + strlen(out), sizeof(out) - strlen(out),
			         "; owner of %s: node %u\n", key,
			         loco_map_owner(a->map, key, strlen(key)));
		ret = 0;
	}
	if (ret)
		snprintf(out, sizeof(out), "err %d %s\n", -ret, loco_strerror(ret));
	if (write(fd, out, strlen(out)) < 0)
		(void)0;
}

static void *admin_main(void *arg)
{
	struct admin *a = arg;

	while (!stop) {
		struct pollfd p = {.fd = a->fd, .events = POLLIN};
		int fd;

		if (poll(&p, 1, 200) <= 0)
			continue;
		fd = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		admin_serve(a, fd);
		close(fd);
	}
	return NULL;
}

/* admin_listen -- the unix socket at @path, mode 0600 (the user's own). The fd, or -errno. */
static int admin_listen(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chmod(path, 0600) < 0 || listen(fd, 16) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* holders_up -- the key holders among the members now, this node included. */
static uint32_t holders_up(loco_manager_t *m, uint32_t holders)
{
	uint32_t ids[64], n = 0;
	int k = loco_manager_members(m, ids, 64);

	for (int i = 0; i < k && i < 64; i++)
		n += ids[i] <= holders;
	return n;
}

/*
 * served_before -- whether node @me served in this store already: a server that loco-run
 * --ctl restart started again with its id. The cluster file @path of this launch (its
 * secret is @secret) lists it then, and holds the store's settings (*@file): LOCO_NODES,
 * the live nodes at the restart, says nothing of them.
 */
static int served_before(const char *path, const char *secret, uint32_t me, struct kv_conf *file)
{
	uint32_t ids[64];
	int n;

	if (kv_conf_read(path, file) != 0 || strcmp(file->secret, secret) != 0)
		return 0; /* no store yet, or another launch's file */
	n = kv_server_ids(path, ids, 64);
	for (int i = 0; i < n && i < 64; i++)
		if (ids[i] == me)
			return 1;
	return 0;
}

static int usage(FILE *f, int code)
{
	fprintf(f, "usage: kv-server [--replicas R] [--capacity N] [--value-max B] [--spare K]\n"
	           "                 [--cluster FILE] [--stats S]\n"
	           "  started by loco-run (LOCO_NODES servers); see demos/kvstore/README.md\n");
	return code;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "kv-server: %s: %s\n", what, loco_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"replicas", required_argument, NULL, 'r'},
	    {"capacity", required_argument, NULL, 'c'},
	    {"value-max", required_argument, NULL, 'v'},
	    {"spare", required_argument, NULL, 's'},
	    {"cluster", required_argument, NULL, 'f'},
	    {"stats", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct kv_conf c = {.replicas = 2, .value_max = 1024, .capacity = 65536};
	const char *path = "kv.cluster", *secret;
	uint32_t ids[KV_IDS_MAX], me, first, spare = 1, stats_s = 0;
	struct sigaction sa = {.sa_handler = on_signal};
	struct admin adm;
	pthread_t admin_thread;
	char sock[4200], fnames[64], fdetail[256];
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_cfg_t cfg;
	loco_map_stats_t st;
	loco_map_t *map;
	struct kv_conf file;
	int opt, ret, back;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			c.replicas = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'c':
			c.capacity = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'v':
			c.value_max = strtoul(optarg, NULL, 10);
			break;
		case 's':
			spare = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'f':
			path = optarg;
			break;
		case 'S':
			stats_s = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	secret = getenv("LOCO_SECRET");
	if (secret == NULL || strlen(secret) >= sizeof(c.secret)) {
		fprintf(stderr, "kv-server: run it under loco-run (LOCO_SECRET is not set)\n");
		return 2;
	}
	snprintf(c.secret, sizeof(c.secret), "%s", secret);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	ret = loco_init(NULL, &m);
	if (ret)
		return fail("loco_init", ret);
	first = loco_manager_job_size(m); /* the servers loco-run started */
	me = loco_manager_node_id(m);
	back = served_before(path, c.secret, me, &file);
	/* restarted: the store's key holders, as its other servers have them */
	c.holders = back ? file.holders : first + spare;
	if (first == 0 || c.holders >= KV_IDS_MAX) {
		fprintf(stderr,
		        "kv-server: the job's size (%u, loco_manager_job_size) + --spare (%u) must "
		        "be below "
		        "%u, leaving an id for a client\n",
		        first, spare, KV_IDS_MAX);
		loco_fini(m);
		return 2;
	}
	if (me > c.holders) {
		fprintf(stderr, "kv-server: node %u is not a key holder (1..%u)\n", me, c.holders);
		loco_fini(m);
		return 2;
	}
	kv_map_cfg(&c, &cfg, ids);
	/* added to a running store, or restarted in it: serve once it has its keys */
	cfg.join = me > first || back;
	ret = loco_channel_create(m, NULL, "kv", cfg.join ? holders_up(m, c.holders) : first, &ch);
	if (ret == 0)
		ret = loco_map_create(ch, "kv", &cfg, &map);
	if (ret)
		return fail("map", ret);
	ret = loco_channel_join(ch, 30 * KV_SEC);
	if (ret == 0 && cfg.join)
		ret = loco_map_sync(map, 60 * KV_SEC);
	if (ret)
		return fail(cfg.join ? "joining the store" : "loco_channel_join", ret);
	kv_admin_path(path, me, sock, sizeof(sock));
	adm = (struct admin){.map = map, .fd = admin_listen(sock), .me = me, .c = &c};
	if (adm.fd < 0)
		return fail(sock, adm.fd);
	ret = -pthread_create(&admin_thread, NULL, admin_main, &adm);
	if (ret == 0)
		ret = kv_conf_add_server(path, &c, me, loco_manager_addr(m));
	if (ret)
		return fail(path, ret);
	kv_fabrics(m, c.holders, fnames, sizeof(fnames), fdetail, sizeof(fdetail));
	printf(
	    "kv-server: node %u serving (%s; key holders 1..%u, %u replica(s), %u slots of up to "
	    "%zu B); fabric: %s (%s)\n",
	    me,
	    back       ? "joined a running store again"
	    : cfg.join ? "joined a running store"
	               : "started",
	    c.holders, c.replicas, c.capacity, c.value_max, fdetail, kv_fabric_why());
	fflush(stdout);
	for (uint32_t t = 0; !stop; t++) {
		struct timespec ts = {.tv_nsec = 100000000};

		nanosleep(&ts, NULL);
		if (stats_s > 0 && t > 0 && t % (stats_s * 10) == 0) {
			loco_map_stats(map, &st);
			printf(
			    "kv-server: node %u: %llu owned, %llu replicas, %llu writes applied\n",
			    me, (unsigned long long)st.owned, (unsigned long long)st.replicas,
			    (unsigned long long)st.applied);
			fflush(stdout);
		}
	}
	pthread_join(admin_thread, NULL);
	close(adm.fd);
	unlink(sock);
	loco_map_stats(map, &st);
	ret = loco_map_leave(map, 5 * KV_SEC); /* the last ones have nobody to hand to */
	printf("kv-server: node %u leaving: %llu owned, %llu replicas, %llu writes applied; keys "
	       "handed over: %s\n",
	       me, (unsigned long long)st.owned, (unsigned long long)st.replicas,
	       (unsigned long long)st.applied, ret == 0 ? "yes" : loco_strerror(ret));
	loco_map_destroy(map);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
