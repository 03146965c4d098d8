/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kv-ycsb.c -- the YCSB-style load generator (ycsb.h) against a store:
 *
 *   kv-ycsb --store memcached:127.0.0.1:11211 --workload B --dist zipfian \
 *           --records 100000 --value-size 100 --duration 10 --threads 4 \
 *           [--json out.json] [--plot out.png] [--progress] [--verify]
 *
 * Prints a table (throughput and p50/p99/p999 latency per operation
 * type), writes JSON and a PNG of throughput over time when asked
 * (gnuplot). Exit 0; 1 on an error, a failed operation in the load, a
 * lost or corrupt acknowledged write (--verify), or a server --join-at
 * added that did not join (it ended, say refusing its id, or did not join
 * within 30 s of the run's end); 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ycsb.h"

#ifdef KV_HAVE_MEMCACHED
#include <libmemcached/memcached.h>

/* ---- memcached (libmemcached, binary protocol) ---------------------------------- */

struct mc_arg {
	char host[64];
	unsigned port;
};

static int mc_open(void *arg, unsigned thread, void **h)
{
	struct mc_arg *a = arg;
	memcached_st *mc = memcached_create(NULL);

	(void)thread;
	if (mc == NULL)
		return -ENOMEM;
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
	if (memcached_server_add(mc, a->host, (in_port_t)a->port) != MEMCACHED_SUCCESS) {
		memcached_free(mc);
		return -EINVAL;
	}
	*h = mc;
	return 0;
}

static int mc_get(void *h, const char *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	memcached_return_t rc;
	uint32_t flags;
	size_t len = 0;
	char *v = memcached_get(h, key, klen, &len, &flags, &rc);

	if (v == NULL)
		return rc == MEMCACHED_NOTFOUND ? -ENOENT : -EIO;
	memcpy(val, v, len < cap ? len : cap);
	*vlen = len;
	free(v);
	return 0;
}

static int mc_put(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	return memcached_set(h, key, klen, val, vlen, 0, 0) == MEMCACHED_SUCCESS ? 0 : -EIO;
}

static void mc_close(void *h)
{
	memcached_free(h);
}
#endif

#ifdef KV_HAVE_LOCO
#include <pthread.h>

#include "kv.h"

/* ---- the LOCO KV store (kv-server): this process joins it as one client node -------- */

struct lo_arg {
	const char *path;
	pthread_mutex_t mu;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_map_t *map;
	struct kv_conf conf;
	char fabric[64]; /* "shm", "tcp", "shm+tcp": kv_fabrics() */
	int ret;
};

static int lo_open(void *arg, unsigned thread, void **h)
{
	struct lo_arg *a = arg;
	int ret;

	(void)thread;
	pthread_mutex_lock(&a->mu);
	if (a->map == NULL && a->ret == 0) {
		a->ret = kv_client_open(a->path, &a->conf, &a->m, &a->ch, &a->map);
		if (a->ret == 0) { /* which fabric carries this client's links, and why */
			char detail[256];

			kv_fabrics(a->m, a->conf.holders, a->fabric, sizeof(a->fabric), detail,
			           sizeof(detail));
			printf("kv-ycsb: client node %u; fabric: %s (%s)\n",
			       loco_manager_node_id(a->m), detail, kv_fabric_why());
			fflush(stdout);
		}
	}
	ret = a->ret;
	pthread_mutex_unlock(&a->mu);
	*h = a->map; /* one map for every thread: loco_map is MT-safe */
	return ret;
}

static int lo_get(void *h, const char *key, size_t klen, void *val, size_t cap, size_t *vlen)
{
	return loco_map_get(h, key, klen, val, cap, vlen, NULL, 10 * KV_SEC);
}

static int lo_put(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	return loco_map_put(h, key, klen, val, vlen, NULL, 10 * KV_SEC);
}

static void lo_close(void *h)
{
	(void)h; /* the client leaves once, at the end (main) */
}
#endif

/* ---- a server killed or added during the run (loco-run --ctl PATH) ------------------- */

struct events {
	const char *launcher, *ctl;
	uint32_t kill_at, join_at, kill_node;
	uint32_t killed_s, joined_s; /* when it was done (0: not) */
	uint32_t added;              /* the id the add command gave (0: none) */
	int add_failed;              /* the add command itself was refused */
};

#define JOIN_WAIT_S 30 /* how long after the run an added server may take to join */

/*
 * ctl -- run `LAUNCHER --ctl PATH CMD`; its answer (stdout and stderr) into @ans (@len bytes,
 * cut); true when it exited 0 (the launcher said "ok").
 */
static int ctl(struct events *e, const char *cmd, char *ans, size_t len)
{
	char line[1024];
	size_t got = 0;
	FILE *p;
	int st;

	ans[0] = '\0';
	snprintf(line, sizeof(line), "'%s' --ctl '%s' %s 2>&1", e->launcher, e->ctl, cmd);
	p = popen(line, "r");
	if (p == NULL)
		return 0;
	while (got + 1 < len && fgets(ans + got, (int)(len - got), p) != NULL)
		got += strlen(ans + got);
	while (fgets(line, sizeof(line), p) != NULL) {
		/* the rest is not kept: read to the end so the launcher's answer is whole */
	}
	st = pclose(p);
	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void tick(void *arg, uint32_t s)
{
	struct events *e = arg;
	char cmd[64], ans[256];

	if (e->kill_at != 0 && s == e->kill_at) {
		snprintf(cmd, sizeof(cmd), "kill %u KILL", e->kill_node);
		fprintf(stderr, "kv-ycsb: %s: %s\n", cmd,
		        ctl(e, cmd, ans, sizeof(ans)) ? "done" : "FAILED");
		e->killed_s = s;
	}
	if (e->join_at != 0 && s == e->join_at) {
		/* "ok added ID": the server was started; whether it joined is known later */
		if (ctl(e, "add 1", ans, sizeof(ans)) &&
		    sscanf(ans, "ok added %" SCNu32, &e->added) == 1 && e->added != 0) {
			fprintf(stderr, "kv-ycsb: add 1: started node %u\n", e->added);
		} else {
			ans[strcspn(ans, "\n")] = '\0';
			fprintf(stderr, "kv-ycsb: add 1: FAILED: %s\n", ans);
			e->add_failed = 1;
		}
		e->joined_s = s;
	}
}

/*
 * node_state -- the state the launcher lists for the latest start of node @id ("running ...",
 * "exited with status 1", "killed by SIGKILL", "not started") into @buf; 0, or -1 when the
 * launcher did not answer or does not list it.
 */
static int node_state(struct events *e, uint32_t id, char *buf, size_t len)
{
	static char ans[64 * 1024];
	int found = -1;

	if (!ctl(e, "list", ans, sizeof(ans)))
		return -1;
	for (char *save = NULL, *l = strtok_r(ans, "\n", &save); l != NULL;
	     l = strtok_r(NULL, "\n", &save)) {
		unsigned long lid;
		char *rest;

		if (l[0] < '0' || l[0] > '9')
			continue;
		lid = strtoul(l, &rest, 10);
		if (lid != id || *rest != ' ')
			continue;
		rest = strchr(rest + 1, ' ');
		snprintf(buf, len, "%s", rest != NULL ? rest + 1 : "");
		found = 0; /* the last line of the id is its latest start */
	}
	return found;
}

/*
 * join_verdict -- after the run: did the server the add command started join? It did when the
 * launcher lists it running and, with a loco store, it is a member of the cluster (@m); it
 * failed when it ended (e.g. "exited with status 2": a server that refused its id) or did not
 * join within JOIN_WAIT_S. Reported on stderr; 0 or -1 (failed). @m: the loco manager, or NULL.
 */
static int join_verdict(struct events *e, void *m)
{
	char state[128] = "";

	if (e->add_failed)
		return -1;
	if (e->added == 0)
		return 0; /* the run ended before its second join_at */
	for (int i = 0; i < JOIN_WAIT_S * 5; i++) {
		int known = node_state(e, e->added, state, sizeof(state)) == 0;
		int member = m == NULL;

		if (known && strncmp(state, "running", 7) != 0) {
			fprintf(stderr, "kv-ycsb: add 1: FAILED: node %u %s\n", e->added, state);
			return -1;
		}
#ifdef KV_HAVE_LOCO
		if (m != NULL) {
			uint32_t ids[256];
			int n = loco_manager_members(m, ids, 256);

			for (int k = 0; k < n && k < 256; k++)
				member |= ids[k] == e->added;
		}
#endif
		if (known && member) {
			fprintf(stderr, "kv-ycsb: add 1: node %u joined\n", e->added);
			return 0;
		}
		usleep(200000);
	}
	fprintf(stderr, "kv-ycsb: add 1: FAILED: node %u did not join within %d s (%s)\n", e->added,
	        JOIN_WAIT_S, state[0] ? state : "not listed");
	return -1;
}

static int usage(FILE *f, int code)
{
	fprintf(f,
	        "usage: kv-ycsb --store STORE [options]\n"
	        "  --store STORE      memcached:HOST:PORT%s, or loco:CLUSTER-FILE%s\n"
	        "  --workload W       A (50/50), B (95/5, default), C (reads), W (updates)\n"
	        "  --dist D           zipfian (theta 0.99, default) or uniform\n"
	        "  --records N        keys (default 10000)\n"
	        "  --value-size B     bytes per value, >= 16 (default 100)\n"
	        "  --duration S       run phase in seconds (default 10)\n"
	        "  --threads T        client threads (default 1)\n"
	        "  --clients N --client I   I of N client processes (key ownership)\n"
	        "  --no-load          skip the load phase (the store holds the records)\n"
	        "  --verify           read every acknowledged write back at the end\n"
	        "  --progress         a line per second on stderr\n"
	        "  --json FILE        the results as JSON\n"
	        "  --plot FILE.png    throughput over time (gnuplot)\n"
	        "  --ctl PATH         the servers' loco-run control socket, for:\n"
	        "  --kill-at S --kill-node ID   SIGKILL server ID S seconds into the run\n"
	        "  --join-at S        add a server S seconds into the run (it must join)\n"
	        "  --launcher PATH    loco-run (default: loco-run beside this program's build)\n",
#ifdef KV_HAVE_MEMCACHED
	        "",
#else
	        " (not built: libmemcached-dev missing)",
#endif
#ifdef KV_HAVE_LOCO
	        ""
#else
	        " (not built)"
#endif
	);
	return code;
}

/* plot -- throughput per second as a PNG, through gnuplot. 0 or -1. */
static int plot(const char *png, const struct ycsb_cfg *cfg, const struct ycsb_result *res,
                const char *store, const struct events *ev)
{
	char dat[] = "/tmp/kv-ycsb-XXXXXX";
	int fd = mkstemp(dat);
	FILE *f, *gp;
	int ret;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		return -1;
	for (uint32_t s = 0; s < res->nsec; s++)
		fprintf(f, "%u %" PRIu64 "\n", s + 1, res->per_sec[s]);
	fclose(f);
	gp = popen("gnuplot", "w");
	if (gp == NULL) {
		unlink(dat);
		return -1;
	}
	fprintf(gp,
	        "set terminal pngcairo size 900,420\nset output '%s'\n"
	        "set title 'kv-ycsb: %s, workload %c, %u thread(s)'\n"
	        "set xlabel 'second'\nset ylabel 'operations/s'\nset yrange [0:*]\nset grid\n",
	        png, store, cfg->workload, cfg->threads);
	if (ev->killed_s)
		fprintf(
		    gp,
		    "set arrow from %u, graph 0 to %u, graph 1 nohead lc rgb 'red' dt 2\n"
		    "set label 'node %u killed' at %u, graph 0.95 left offset 0.5,0 tc rgb 'red'\n",
		    ev->killed_s, ev->killed_s, ev->kill_node, ev->killed_s);
	if (ev->joined_s)
		fprintf(
		    gp,
		    "set arrow from %u, graph 0 to %u, graph 1 nohead lc rgb 'blue' dt 2\n"
		    "set label 'node added' at %u, graph 0.88 left offset 0.5,0 tc rgb 'blue'\n",
		    ev->joined_s, ev->joined_s, ev->joined_s);
	fprintf(gp, "plot '%s' using 1:2 with linespoints title 'throughput'\n", dat);
	ret = pclose(gp);
	unlink(dat);
	return ret == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"store", required_argument, NULL, 's'},
	    {"workload", required_argument, NULL, 'w'},
	    {"dist", required_argument, NULL, 'd'},
	    {"records", required_argument, NULL, 'r'},
	    {"value-size", required_argument, NULL, 'v'},
	    {"duration", required_argument, NULL, 't'},
	    {"threads", required_argument, NULL, 'T'},
	    {"clients", required_argument, NULL, 'C'},
	    {"client", required_argument, NULL, 'I'},
	    {"no-load", no_argument, NULL, 'L'},
	    {"verify", no_argument, NULL, 'V'},
	    {"progress", no_argument, NULL, 'p'},
	    {"json", required_argument, NULL, 'j'},
	    {"plot", required_argument, NULL, 'P'},
	    {"ctl", required_argument, NULL, 'c'},
	    {"kill-at", required_argument, NULL, 'K'},
	    {"kill-node", required_argument, NULL, 'N'},
	    {"join-at", required_argument, NULL, 'J'},
	    {"launcher", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct events ev = {.launcher = NULL};
	struct ycsb_cfg cfg;
	struct ycsb_backend be = {0};
	struct ycsb_result res;
	const char *store = NULL, *json = NULL, *png = NULL, *fabric = NULL;
	int c, ret, status = 0;

	ycsb_cfg_default(&cfg);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			store = optarg;
			break;
		case 'w':
			cfg.workload = optarg[0] != '\0' && optarg[1] == '\0' ? optarg[0] : '?';
			break;
		case 'd':
			if (strcmp(optarg, "zipfian") == 0)
				cfg.dist = YCSB_ZIPFIAN;
			else if (strcmp(optarg, "uniform") == 0)
				cfg.dist = YCSB_UNIFORM;
			else
				return usage(stderr, 2);
			break;
		case 'r':
			cfg.records = strtoull(optarg, NULL, 10);
			break;
		case 'v':
			cfg.value_size = strtoull(optarg, NULL, 10);
			break;
		case 't':
			cfg.duration_s = strtod(optarg, NULL);
			break;
		case 'T':
			cfg.threads = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'C':
			cfg.clients = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'I':
			cfg.client = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'L':
			cfg.load = 0;
			break;
		case 'V':
			cfg.verify = 1;
			break;
		case 'p':
			cfg.progress = 1;
			break;
		case 'j':
			json = optarg;
			break;
		case 'P':
			png = optarg;
			break;
		case 'c':
			ev.ctl = optarg;
			break;
		case 'K':
			ev.kill_at = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'N':
			ev.kill_node = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'J':
			ev.join_at = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'l':
			ev.launcher = optarg;
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	if (store == NULL || cfg.clients == 0 || cfg.client >= cfg.clients ||
	    ((ev.kill_at || ev.join_at) && ev.ctl == NULL) || (ev.kill_at && ev.kill_node == 0))
		return usage(stderr, 2);
	if (ev.kill_at || ev.join_at) {
		static char def[4200];

		if (ev.launcher == NULL) { /* build/tools/loco-run beside build/demos/kvstore/ */
			char self[4000];
			ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

			self[n > 0 ? n : 0] = '\0';
			if (strrchr(self, '/') != NULL)
				*strrchr(self, '/') = '\0';
			snprintf(def, sizeof(def), "%s/../../tools/loco-run", self);
			ev.launcher = access(def, X_OK) == 0 ? def : "loco-run";
		}
		cfg.tick = tick;
		cfg.tick_arg = &ev;
	}
#ifdef KV_HAVE_MEMCACHED
	static struct mc_arg mca;
	if (strncmp(store, "memcached:", 10) == 0) {
		const char *hp = store + 10, *colon = strrchr(hp, ':');

		if (colon == NULL || (size_t)(colon - hp) >= sizeof(mca.host))
			return usage(stderr, 2);
		memcpy(mca.host, hp, (size_t)(colon - hp));
		mca.port = (unsigned)strtoul(colon + 1, NULL, 10);
		fabric = "tcp"; /* libmemcached: TCP to HOST:PORT */
		be = (struct ycsb_backend){.name = "memcached",
		                           .open = mc_open,
		                           .get = mc_get,
		                           .put = mc_put,
		                           .close = mc_close,
		                           .arg = &mca};
	}
#endif
#ifdef KV_HAVE_LOCO
	static struct lo_arg loa = {.mu = PTHREAD_MUTEX_INITIALIZER};
	if (strncmp(store, "loco:", 5) == 0) {
		loa.path = store + 5;
		fabric = loa.fabric; /* filled once the client joined */
		be = (struct ycsb_backend){.name = "loco",
		                           .open = lo_open,
		                           .get = lo_get,
		                           .put = lo_put,
		                           .close = lo_close,
		                           .arg = &loa};
	}
#endif
	if (be.name == NULL) {
		fprintf(stderr, "kv-ycsb: no such store in this build: %s\n", store);
		return usage(stderr, 2);
	}
	ret = ycsb_run(&cfg, &be, &res);
	if (ret) {
		fprintf(stderr, "kv-ycsb: %s: %s\n", be.name, strerror(-ret));
		ycsb_result_free(&res);
		return 1;
	}
	if (cfg.verify && (ret = ycsb_verify(&cfg, &be, &res)) != 0) {
		fprintf(stderr, "kv-ycsb: verify: %s\n", strerror(-ret));
		status = 1;
	}
	ycsb_print(stdout, &cfg, &res, be.name);
	if (cfg.verify && (res.lost != 0 || res.corrupt != 0))
		status = 1;
	/* a write whose owner dies under it fails (it may have happened or not): expected there */
	if (res.errs[YCSB_READ] + res.errs[YCSB_UPDATE] > 0 && cfg.tick == NULL)
		status = 1;
	if (json != NULL) {
		FILE *f = fopen(json, "w");

		if (f == NULL) {
			fprintf(stderr, "kv-ycsb: %s: %s\n", json, strerror(errno));
			status = 1;
		} else {
			ycsb_json(f, &cfg, &res, be.name, fabric);
			fclose(f);
			printf("kv-ycsb: JSON in %s\n", json);
		}
	}
	if (png != NULL) {
		if (plot(png, &cfg, &res, be.name, &ev) == 0) {
			printf("kv-ycsb: plot in %s\n", png);
		} else {
			fprintf(stderr, "kv-ycsb: gnuplot failed (is gnuplot-nox installed?)\n");
			status = 1;
		}
	}
	if (ev.join_at != 0) {
		void *lm = NULL;

#ifdef KV_HAVE_LOCO
		lm = loa.m;
#endif
		if (join_verdict(&ev, lm) != 0)
			status = 1;
	}
	ycsb_result_free(&res);
#ifdef KV_HAVE_LOCO
	if (loa.map != NULL)
		kv_client_close(loa.path, loa.m, loa.ch, loa.map);
#endif
	return status;
}
