/* SPDX-License-Identifier: BSD-2-Clause */
/* pmix.c -- the PMIx bootstrap (pmix_boot.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrl_wire.h"
#include "log.h"
#include "pmix_boot.h"

#ifdef LOCO_HAVE_PMIX
#include <pmix.h>

#define KEY_ADDR   "loco.addr"
#define KEY_SECRET "loco.secret"
#define JOIN_MAX   4 /* rank 0 and up to three lower ranks */

struct lc_pmix {
	pmix_proc_t me;
	uint32_t size;
	int open;        /* PMIx_Init done, PMIx_Finalize not yet */
	int made_secret; /* rank 0 made the secret (none was set) */
	int want_secret; /* the secret comes from rank 0 */
	int want_join;   /* the contacts come from the lower ranks */
	char addr[LC_ADDR_MAX + 1];
	char secret[65]; /* 32 random bytes in hex */
	char join[JOIN_MAX * (LC_ADDR_MAX + 1)];
};

/* set -- whether the setting @name is explicit: in the environment or in @cfg (@field). */
static int set(const char *name, int field)
{
	const char *v = getenv(name);

	return field || (v != NULL && *v != '\0');
}

/* get_u32 -- a job-level uint32 @key of our namespace (logged when @must); 0 or -ENOTCONN. */
static int get_u32(struct lc_pmix *p, const char *key, int must, uint32_t *out)
{
	pmix_proc_t job;
	pmix_value_t *val = NULL;
	pmix_status_t rc;

	PMIX_LOAD_PROCID(&job, p->me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&job, key, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || val == NULL) {
		if (must)
			lc_log_err("pmix: %s: %s", key, PMIx_Error_string(rc));
		return -ENOTCONN;
	}
	*out = val->type == PMIX_UINT32 ? val->data.uint32 : 0;
	PMIX_VALUE_RELEASE(val);
	return *out ? 0 : -ENOTCONN;
}

/* host_ip -- an IPv4 address of this host that other hosts reach: what its name resolves
 * to (not a loopback), else the first interface address that is up and not a loopback;
 * 0 or -ENOENT. */
static int host_ip(char *out, size_t len)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res, *r;
	struct ifaddrs *all, *a;
	char name[256];
	int ret = -ENOENT;

	name[sizeof(name) - 1] = '\0';
	if (gethostname(name, sizeof(name) - 1) == 0 &&
	    getaddrinfo(name, NULL, &hints, &res) == 0) {
		for (r = res; r != NULL && ret != 0; r = r->ai_next) {
			struct in_addr in = ((struct sockaddr_in *)(void *)r->ai_addr)->sin_addr;

			if ((ntohl(in.s_addr) >> 24) != 127 &&
			    inet_ntop(AF_INET, &in, out, (socklen_t)len) != NULL)
				ret = 0;
		}
		freeaddrinfo(res);
	}
	if (ret == 0 || getifaddrs(&all) < 0)
		return ret;
	for (a = all; a != NULL && ret != 0; a = a->ifa_next) {
		if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET ||
		    (a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr, out,
		              (socklen_t)len) != NULL)
			ret = 0;
	}
	freeifaddrs(all);
	return ret;
}

/* finalize -- PMIx_Finalize once. */
static void finalize(struct lc_pmix *p)
{
	if (p->open) {
		PMIx_Finalize(NULL, 0);
		p->open = 0;
	}
}

int lc_pmix_start(const loco_config_t *cfg, struct lc_config *c, struct lc_pmix **out)
{
	static const loco_config_t none;
	const char *mode = getenv("LOCO_PMIX");
	uint32_t local = 0;
	struct lc_pmix *p;
	pmix_status_t rc;
	char ip[INET_ADDRSTRLEN];

	*out = NULL;
	if (cfg == NULL)
		cfg = &none;
	if (mode != NULL && strcmp(mode, "0") == 0)
		return 0;
	if (mode != NULL && *mode != '\0' && strcmp(mode, "1") != 0 && strcmp(mode, "auto") != 0)
		lc_log_warn("manager: LOCO_PMIX=%s: say auto, 0 or 1; taken as auto", mode);
	if (getenv("PMIX_RANK") == NULL && getenv("PMIX_NAMESPACE") == NULL) {
		if (mode != NULL && strcmp(mode, "1") == 0) {
			lc_log_err("manager: LOCO_PMIX=1, but no PMIx server started this process");
			return -ENOENT;
		}
		return 0;
	}
	if (set("LOCO_NODE_ID", cfg->node_id != 0) && (mode == NULL || strcmp(mode, "1") != 0)) {
		/* another launcher (loco-run, a script) did the bootstrap, e.g. loco-run under mpirun */
		lc_log_info("pmix: LOCO_NODE_ID is set: no PMIx bootstrap (LOCO_PMIX=1 forces it)");
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	rc = PMIx_Init(&p->me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		lc_log_err("pmix: PMIx_Init: %s (LOCO_PMIX=0 starts without PMIx)",
		           PMIx_Error_string(rc));
		free(p);
		return -ENOTCONN;
	}
	p->open = 1;
	if (get_u32(p, PMIX_JOB_SIZE, 1, &p->size) != 0) {
		lc_pmix_free(p);
		return -ENOTCONN;
	}
	if (get_u32(p, PMIX_LOCAL_SIZE, 0, &local) != 0)
		local = 0;
	if (!set("LOCO_NODE_ID", cfg->node_id != 0))
		c->node_id = p->me.rank + 1;
	if (c->nodes == 0)
		c->nodes = p->size;
	if (!set("LOCO_ADDR", cfg->addr != NULL && *cfg->addr != '\0')) {
		/* a job on one host talks over the loopback; else over this host's address */
		if (local == p->size || host_ip(ip, sizeof(ip)) != 0)
			snprintf(ip, sizeof(ip), "127.0.0.1");
		snprintf(p->addr, sizeof(p->addr), "%s:0", ip);
		c->addr = p->addr;
	}
	p->want_secret = !set("LOCO_SECRET", cfg->secret != NULL && *cfg->secret != '\0');
	p->want_join = !set("LOCO_JOIN", cfg->join != NULL && *cfg->join != '\0');
	if (p->want_secret && p->me.rank == 0) {
		unsigned char raw[32];

		randombytes_buf(raw, sizeof(raw));
		sodium_bin2hex(p->secret, sizeof(p->secret), raw, sizeof(raw));
		sodium_memzero(raw, sizeof(raw));
		p->made_secret = 1;
		c->secret = p->secret;
	}
	if (p->want_join && p->me.rank == 0)
		c->join = NULL; /* rank 0 founds the cluster */
	lc_log_info("pmix: rank %u of %u in %s: node id %u, listening on %s", p->me.rank, p->size,
	            p->me.nspace, c->node_id, c->addr);
	*out = p;
	return 0;
}

/* put_str -- PMIx_Put(PMIX_GLOBAL, @key, @s); 0 or -ENOTCONN. */
static int put_str(const char *key, char *s)
{
	pmix_value_t v;
	pmix_status_t rc;

	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_STRING;
	v.data.string = s; /* PMIx copies it */
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	if (rc != PMIX_SUCCESS) {
		lc_log_err("pmix: put %s: %s", key, PMIx_Error_string(rc));
		return -ENOTCONN;
	}
	return 0;
}

/* get_str -- @key of @rank into @out (@len); 0, -ENOENT (not there) or -ENAMETOOLONG. */
static int get_str(struct lc_pmix *p, uint32_t rank, const char *key, char *out, size_t len)
{
	pmix_info_t info;
	pmix_proc_t who;
	pmix_value_t *val = NULL;
	pmix_status_t rc;
	int secs = 10, ret = 0;

	PMIX_LOAD_PROCID(&who, p->me.nspace, rank);
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &secs, PMIX_INT);
	rc = PMIx_Get(&who, key, &info, 1, &val);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS || val == NULL || val->type != PMIX_STRING ||
	    val->data.string == NULL)
		ret = -ENOENT;
	else if (strlen(val->data.string) >= len)
		ret = -ENAMETOOLONG;
	else
		snprintf(out, len, "%s", val->data.string);
	if (val != NULL) {
		if (val->type == PMIX_STRING && val->data.string != NULL)
			sodium_memzero(val->data.string, strlen(val->data.string));
		PMIX_VALUE_RELEASE(val);
	}
	return ret;
}

int lc_pmix_exchange(struct lc_pmix *p, const char *ctrl_addr, struct lc_config *c)
{
	pmix_info_t info[2];
	pmix_proc_t job;
	pmix_status_t rc;
	bool collect = true;
	int secs = (int)(c->join_timeout_ms / 1000) + 1, ret;
	char a[LC_ADDR_MAX + 1];

	snprintf(a, sizeof(a), "%s", ctrl_addr);
	ret = put_str(KEY_ADDR, a);
	if (ret == 0 && p->made_secret)
		ret = put_str(KEY_SECRET, p->secret);
	if (ret == 0 && (rc = PMIx_Commit()) != PMIX_SUCCESS) {
		lc_log_err("pmix: commit: %s", PMIx_Error_string(rc));
		ret = -ENOTCONN;
	}
	if (ret)
		return ret;
	/* every rank has its listener open and its address published after this */
	PMIX_LOAD_PROCID(&job, p->me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
	rc = PMIx_Fence(&job, 1, info, 2);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	if (rc != PMIX_SUCCESS) {
		lc_log_err("pmix: fence of %u ranks: %s", p->size, PMIx_Error_string(rc));
		return rc == PMIX_ERR_TIMEOUT ? -ETIMEDOUT : -ENOTCONN;
	}
	if (p->want_secret && p->me.rank != 0) {
		if (get_str(p, 0, KEY_SECRET, p->secret, sizeof(p->secret)) != 0) {
			lc_log_err("pmix: rank 0 published no cluster secret: set LOCO_SECRET for "
			           "every rank or for none");
			return -EPROTO;
		}
		c->secret = p->secret;
	}
	if (p->want_join && p->me.rank != 0) {
		/* rank 0 first, then the ranks just below ours: any live member admits us */
		uint32_t ranks[JOIN_MAX], nr = 0, n = 0;
		size_t off = 0;

		ranks[nr++] = 0;
		for (uint32_t r = p->me.rank - 1; r >= 1 && nr < JOIN_MAX; r--)
			ranks[nr++] = r;
		for (uint32_t i = 0; i < nr; i++) {
			if (get_str(p, ranks[i], KEY_ADDR, a, sizeof(a)) != 0)
				continue;
			off += (size_t)snprintf(p->join + off, sizeof(p->join) - off, "%s%s",
			                        n ? "," : "", a);
			n++;
		}
		if (n == 0) {
			lc_log_err("pmix: no lower rank published its address");
			return -EPROTO;
		}
		c->join = p->join;
	}
	lc_log_info("pmix: rank %u: %s", p->me.rank,
	            c->join != NULL ? "joining through the lower ranks" : "founding the cluster");
	finalize(p);
	return 0;
}

void lc_pmix_wipe_secret(struct lc_pmix *p)
{
	if (p != NULL)
		sodium_memzero(p->secret, sizeof(p->secret));
}

void lc_pmix_free(struct lc_pmix *p)
{
	if (p == NULL)
		return;
	finalize(p);
	sodium_memzero(p, sizeof(*p));
	free(p);
}

#else /* !LOCO_HAVE_PMIX */

int lc_pmix_start(const loco_config_t *cfg, struct lc_config *c, struct lc_pmix **out)
{
	const char *mode = getenv("LOCO_PMIX");

	(void)cfg;
	(void)c;
	*out = NULL;
	if (mode != NULL && strcmp(mode, "1") == 0) {
		lc_log_err("manager: LOCO_PMIX=1, but this liboco was built without PMIx");
		return -ENOENT;
	}
	return 0;
}

int lc_pmix_exchange(struct lc_pmix *p, const char *ctrl_addr, struct lc_config *c)
{
	(void)p;
	(void)ctrl_addr;
	(void)c;
	return -ENOSYS;
}

void lc_pmix_wipe_secret(struct lc_pmix *p)
{
	(void)p;
}

void lc_pmix_free(struct lc_pmix *p)
{
	(void)p;
}

#endif /* LOCO_HAVE_PMIX */
