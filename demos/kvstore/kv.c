/* SPDX-License-Identifier: BSD-2-Clause */
/* kv.c -- the KV store's cluster file and map configuration (kv.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "kv.h"

#define LINE_MAX_ 256
#define LINES_MAX (KV_IDS_MAX + 16) /* a cluster file: a line per server, and 6 more */

void kv_map_cfg(const struct kv_conf *c, loco_map_cfg_t *cfg, uint32_t ids[KV_IDS_MAX])
{
	for (uint32_t i = 0; i < KV_IDS_MAX; i++)
		ids[i] = i + 1;
	loco_map_cfg_default(cfg, ids, c->holders);
	cfg->clients = ids + c->holders;
	cfg->nclients = KV_IDS_MAX - c->holders;
	cfg->key_max = 64;
	cfg->value_max = c->value_max;
	cfg->capacity = c->capacity;
	cfg->replicas = c->replicas;
}

/* locked -- open @path's lock file and flock it. The fd, or -errno. */
static int locked(const char *path)
{
	char lock[4096];
	int fd;

	snprintf(lock, sizeof(lock), "%s.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* read_lines -- @path's lines (up to LINES_MAX), or 0 when it does not exist. */
static int read_lines(const char *path, char lines[LINES_MAX][LINE_MAX_])
{
	FILE *f = fopen(path, "r");
	int n = 0;

	if (f == NULL)
		return errno == ENOENT ? 0 : -errno;
	while (n < LINES_MAX && fgets(lines[n], LINE_MAX_, f) != NULL)
		n++;
	fclose(f);
	return n;
}

/* write_lines -- replace @path by @lines, atomically (rename), mode 0600. */
static int write_lines(const char *path, char lines[LINES_MAX][LINE_MAX_], int n)
{
	char tmp[4096];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	for (int i = 0; i < n; i++)
		fputs(lines[i], f);
	if (fclose(f) != 0 || rename(tmp, path) < 0)
		return -errno;
	return 0;
}

int kv_conf_read(const char *path, struct kv_conf *c)
{
	static char lines[LINES_MAX][LINE_MAX_];
	struct kv_conf r = {0};
	int n = read_lines(path, lines);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		char addr[128];
		unsigned long v;
		uint32_t id;

		if (sscanf(lines[i], "secret %128s", r.secret) == 1)
			continue;
		if (sscanf(lines[i], "holders %lu", &v) == 1)
			r.holders = (uint32_t)v;
		else if (sscanf(lines[i], "replicas %lu", &v) == 1)
			r.replicas = (uint32_t)v;
		else if (sscanf(lines[i], "value_max %lu", &v) == 1)
			r.value_max = v;
		else if (sscanf(lines[i], "capacity %lu", &v) == 1)
			r.capacity = (uint32_t)v;
		else if (sscanf(lines[i], "server %" SCNu32 " %127s", &id, addr) == 2 &&
		         strlen(r.join) + strlen(addr) + 2 < sizeof(r.join)) {
			if (r.join[0] != '\0')
				strcat(r.join, ",");
			strcat(r.join, addr);
			r.nservers++;
		}
	}
	if (r.holders == 0 || r.holders >= KV_IDS_MAX || r.replicas == 0 || r.value_max == 0 ||
	    r.capacity == 0 || r.nservers == 0)
		return -EINVAL;
	*c = r;
	return 0;
}

int kv_conf_add_server(const char *path, const struct kv_conf *c, uint32_t id, const char *addr)
{
	static char lines[LINES_MAX][LINE_MAX_];
	int lk = locked(path), n, k = 0, ret;

	if (lk < 0)
		return lk;
	n = read_lines(path, lines);
	if (n < 0) {
		close(lk);
		return n;
	}
	/* keep the other servers' lines; settings written afresh */
	for (int i = 0; i < n; i++) {
		uint32_t other;

		if ((sscanf(lines[i], "server %" SCNu32, &other) == 1 && other != id) ||
		    strncmp(lines[i], "counted ", 8) == 0) /* the clients' counts: kept */
			memmove(lines[k++], lines[i], LINE_MAX_);
	}
	if (k + 6 > LINES_MAX) {
		close(lk);
		return -ENOSPC;
	}
	snprintf(lines[k++], LINE_MAX_, "secret %s\n", c->secret);
	snprintf(lines[k++], LINE_MAX_, "holders %u\n", c->holders);
	snprintf(lines[k++], LINE_MAX_, "replicas %u\n", c->replicas);
	snprintf(lines[k++], LINE_MAX_, "value_max %zu\n", c->value_max);
	snprintf(lines[k++], LINE_MAX_, "capacity %u\n", c->capacity);
	snprintf(lines[k++], LINE_MAX_, "server %u %s\n", id, addr);
	ret = write_lines(path, lines, k);
	close(lk);
	return ret;
}

int kv_client_open(const char *path, struct kv_conf *c, loco_manager_t **m, loco_channel_t **ch,
                   loco_map_t **map)
{
	uint32_t ids[KV_IDS_MAX], members[KV_IDS_MAX * 4], holders = 0;
	loco_map_cfg_t cfg;
	int ret = kv_conf_read(path, c), n;

	*ch = NULL;
	*map = NULL;
	if (ret)
		return ret;
	setenv("LOCO_JOIN", c->join, 1);
	setenv("LOCO_SECRET", c->secret, 1);
	unsetenv("LOCO_ADDR"); /* ours: any port */
	/*
	 * the client ids in turn: a live client's is refused at once
	 * (-EEXIST); one that left is free again (a new incarnation: the map's
	 * rpc serves it anew); one whose client died is free once the view
	 * dropped it (loco_init() retries meanwhile); a client that started
	 * at the same moment with the same id may win it (-ESTALE: ours is
	 * the stale incarnation): the next id then
	 */
	ret = -EADDRINUSE;
	for (uint32_t id = c->holders + 1; id <= KV_IDS_MAX; id++) {
		char idstr[16];

		snprintf(idstr, sizeof(idstr), "%u", id);
		setenv("LOCO_NODE_ID", idstr, 1);
		ret = loco_init(NULL, m);
		if (ret != -EEXIST && ret != -ESTALE)
			break;
		ret = -EADDRINUSE;
	}
	if (ret)
		return ret;
	/* the key holders alive now are the peers to pair with */
	n = loco_manager_members(*m, members, sizeof(members) / sizeof(members[0]));
	for (int i = 0; i < n && i < (int)(sizeof(members) / sizeof(members[0])); i++)
		holders += members[i] <= c->holders;
	kv_map_cfg(c, &cfg, ids);
	ret = loco_channel_create(*m, NULL, "kv", holders + 1, ch);
	if (ret == 0)
		ret = loco_map_create(*ch, "kv", &cfg, map);
	if (ret == 0)
		ret = loco_channel_join(*ch, 20 * KV_SEC);
	if (ret == 0) /* the servers' maps paired and serving (on tcp this takes a moment) */
		ret = loco_map_sync(*map, 20 * KV_SEC);
	if (ret) {
		if (*map != NULL)
			loco_map_destroy(*map);
		if (*ch != NULL)
			loco_channel_destroy(*ch);
		loco_fini(*m);
		return ret;
	}
	return 0;
}

void kv_admin_path(const char *path, uint32_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s.s%u", path, id);
}

int kv_server_ids(const char *path, uint32_t *ids, int max)
{
	static char lines[LINES_MAX][LINE_MAX_];
	int n = read_lines(path, lines), k = 0;

	for (int i = 0; i < n && k < max; i++)
		if (sscanf(lines[i], "server %" SCNu32, &ids[k]) == 1)
			k++;
	return n < 0 ? n : k;
}

/* counts_parse -- the "counted" line among @lines[0 .. @n): its index, or -1 (all 0). */
static int counts_parse(char lines[LINES_MAX][LINE_MAX_], int n, uint64_t v[3])
{
	v[0] = v[1] = v[2] = 0;
	for (int i = 0; i < n; i++)
		if (sscanf(lines[i], "counted gets %" SCNu64 " writes %" SCNu64 " clients %" SCNu64,
		           &v[0], &v[1], &v[2]) == 3)
			return i;
	return -1;
}

int kv_counts_add(const char *path, uint64_t gets, uint64_t writes)
{
	static char lines[LINES_MAX][LINE_MAX_];
	int lk = locked(path), n, i, ret;
	uint64_t v[3];

	if (lk < 0)
		return lk;
	n = read_lines(path, lines);
	if (n <= 0) { /* no cluster file (any more): nothing to add to */
		close(lk);
		return n < 0 ? n : -ENOENT;
	}
	i = counts_parse(lines, n, v);
	if (i < 0) {
		if (n == LINES_MAX) {
			close(lk);
			return -ENOSPC;
		}
		i = n++;
	}
	snprintf(lines[i], LINE_MAX_,
	         "counted gets %" PRIu64 " writes %" PRIu64 " clients %" PRIu64 "\n", v[0] + gets,
	         v[1] + writes, v[2] + 1);
	ret = write_lines(path, lines, n);
	close(lk);
	return ret;
}

int kv_counts_read(const char *path, uint64_t *gets, uint64_t *writes, uint64_t *clients)
{
	static char lines[LINES_MAX][LINE_MAX_];
	int n = read_lines(path, lines);
	uint64_t v[3];

	if (n < 0)
		return n;
	counts_parse(lines, n, v);
	*gets = v[0];
	*writes = v[1];
	*clients = v[2];
	return 0;
}

int kv_fabrics(loco_manager_t *m, uint32_t holders, char *names, size_t nlen, char *detail,
               size_t dlen)
{
	const char *fab[KV_IDS_MAX + 1] = {NULL}, *seen[KV_IDS_MAX];
	size_t no = 0, dn = 0;
	int nseen = 0, links = 0;

	names[0] = detail[0] = '\0';
	for (uint32_t id = 1; id <= holders && id <= KV_IDS_MAX; id++)
		if (loco_manager_member_fabric(m, id, &fab[id]) == 0) {
			int k = 0;

			while (k < nseen && strcmp(seen[k], fab[id]) != 0)
				k++;
			if (k == nseen)
				seen[nseen++] = fab[id];
			links++;
		}
	for (int k = 0; k < nseen; k++) {
		const char *sep = " to node ";
		int count = 0;

		for (uint32_t id = 1; id <= holders && id <= KV_IDS_MAX; id++)
			count += fab[id] != NULL && strcmp(fab[id], seen[k]) == 0;
		if (count > 1)
			sep = " to nodes ";

		no += (size_t)snprintf(names + no, no < nlen ? nlen - no : 0, "%s%s", k ? "+" : "",
		                       seen[k]);
		dn += (size_t)snprintf(detail + dn, dn < dlen ? dlen - dn : 0, "%s%s",
		                       k ? ", " : "", seen[k]);
		for (uint32_t id = 1; id <= holders && id <= KV_IDS_MAX; id++) {
			if (fab[id] == NULL || strcmp(fab[id], seen[k]) != 0)
				continue;
			dn += (size_t)snprintf(detail + dn, dn < dlen ? dlen - dn : 0, "%s%u", sep,
			                       id);
			sep = ",";
		}
	}
	if (links == 0) {
		snprintf(names, nlen, "none");
		snprintf(detail, dlen, "no link to a key holder");
	}
	return links;
}

const char *kv_fabric_why(void)
{
	static char buf[256];
	const char *f = getenv("LOCO_FABRIC");

	if (f == NULL || f[0] == '\0' || strcmp(f, "auto") == 0)
		snprintf(
		    buf, sizeof(buf),
		    "LOCO_FABRIC=%s: shm to the peers on this host, verbs or tcp to other hosts",
		    f == NULL || f[0] == '\0' ? "auto, the default" : "auto");
	else
		snprintf(buf, sizeof(buf), "LOCO_FABRIC=%s: every link on it", f);
	return buf;
}

void kv_client_close(const char *path, loco_manager_t *m, loco_channel_t *ch, loco_map_t *map)
{
	loco_map_stats_t st;

	loco_map_stats(map, &st);
	if (kv_counts_add(path, st.gets, st.writes) != 0)
		(void)0; /* the cluster file is gone: the count with it */
	loco_map_destroy(map);
	loco_channel_destroy(ch);
	loco_fini(m);
}
