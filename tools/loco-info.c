/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco-info.c -- what LOCO can use on this host (DESIGN §2, loco-info(1)):
 * the fabric providers built in and whether the selected one opens, the
 * RDMA devices with their ports, GIDs and atomic capability, the
 * RLIMIT_MEMLOCK limit, and hugepages. It exits 1, with advice, only when
 * the selected fabric (--fabric, else LOCO_FABRIC, else auto) is unusable.
 *
 *   loco-info [--fabric NAME] [--device DEV] [--addr IP[:PORT]] [--quiet]
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef LOCO_HAVE_VERBS
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#endif

#include "config.h"
#include "fabric.h"
#include "memlock.h" /* the verdict the manager's warning uses */

#define LI_MAX_GIDS 256 /* GID entries shown per port */

struct li_opts {
	const char *fabric;
	const char *device;
	const char *addr;
	bool quiet;
};

/* ---- small helpers ------------------------------------------------------- */

static void section(const char *title)
{
	printf("\n%s\n", title);
	for (size_t i = 0; i < strlen(title); i++)
		putchar('-');
	putchar('\n');
}

/* read_line -- the first line of file @path without its newline; -errno. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ret = 0;

	if (f == NULL)
		return -errno;
	if (fgets(buf, (int)len, f) == NULL)
		ret = -EIO;
	else
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return ret;
}

static void human_bytes(unsigned long long v, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	unsigned u = 0;

	while (v >= 1024 && v % 1024 == 0 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%llu %s", v, unit[u]);
}

/* ---- fabrics --------------------------------------------------------------- */

/*
 * try_fabric -- open provider @name the way the runtime would. Returns 0,
 * or its error (logged by the provider).
 */
static int try_fabric(const char *name, const struct li_opts *o)
{
	struct fab_attr attr = {.listen_addr = o->addr, .device = o->device};
	struct fab *fab = NULL;
	int ret = fab_open(name, &attr, &fab);

	if (ret == 0)
		fab_close(fab);
	return ret;
}

static void list_fabrics(const struct li_opts *o, const char *selected, int *sel_ret)
{
	const char *const *names = fab_provider_names();
	int verbs_ret = -ENOENT; /* auto follows it: listed before auto */

	section("Fabrics (built in; LOCO_FABRIC selects one)");
	printf("%-8s %-9s %-9s %s\n", "name", "selected", "opens", "notes");
	for (size_t i = 0; names[i] != NULL; i++) {
		bool sel = strcmp(names[i], selected) == 0;
		int ret = try_fabric(names[i], o);
		const char *note = "";

		if (strcmp(names[i], "tcp") == 0)
			note = "software RDMA over TCP: any Linux host";
		else if (strcmp(names[i], "shm") == 0)
			note = "shared memory: peers on this host, same user";
		else if (strcmp(names[i], "verbs") == 0)
			note = ret == -ENODEV ? "no RDMA device with an active port"
			                      : "libibverbs + librdmacm (RoCE, InfiniBand, rxe)";
		else if (strcmp(names[i], "auto") == 0)
			note = verbs_ret == 0 ? "per peer: shm on this host, verbs to other hosts"
			                      : "per peer: shm on this host, tcp to other hosts";
		if (strcmp(names[i], "verbs") == 0)
			verbs_ret = ret;
		printf("%-8s %-9s %-9s %s\n", names[i], sel ? "yes" : "", ret == 0 ? "yes" : "NO",
		       note);
		if (ret != 0 && !o->quiet)
			printf("%-8s %-9s %-9s fab_open: %s\n", "", "", "", strerror(-ret));
		if (sel)
			*sel_ret = ret;
	}
	if (*sel_ret == -ENOENT)
		printf("%-8s %-9s %-9s not built into this liboco\n", selected, "yes", "NO");
}

/* ---- RDMA devices ------------------------------------------------------------ */

#ifdef LOCO_HAVE_VERBS
static const char *atomic_str(enum ibv_atomic_cap c)
{
	switch (c) {
	case IBV_ATOMIC_NONE:
		return "none";
	case IBV_ATOMIC_HCA:
		return "yes (HCA)";
	case IBV_ATOMIC_GLOB:
		return "yes (global)";
	}
	return "?";
}

static const char *gid_type_str(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCE v2";
	}
	return "?";
}

static void list_gids(struct ibv_context *c, uint8_t port, int gid_tbl_len)
{
	struct ibv_gid_entry *e;
	ssize_t n;

	if (gid_tbl_len <= 0)
		return;
	if (gid_tbl_len > LI_MAX_GIDS)
		gid_tbl_len = LI_MAX_GIDS;
	e = calloc((size_t)gid_tbl_len, sizeof(*e));
	if (e == NULL)
		return;
	n = ibv_query_gid_table(c, e, (size_t)gid_tbl_len, 0);
	for (ssize_t i = 0; i < n; i++) {
		char gid[INET6_ADDRSTRLEN] = "?", ifname[IF_NAMESIZE] = "";

		if (e[i].port_num != port)
			continue;
		inet_ntop(AF_INET6, e[i].gid.raw, gid, sizeof(gid));
		if (e[i].ndev_ifindex)
			if_indextoname(e[i].ndev_ifindex, ifname);
		printf("    gid %-3u %-40s %-8s %s\n", e[i].gid_index, gid,
		       gid_type_str(e[i].gid_type), ifname);
	}
	if (n < 0)
		printf("    (GID table not readable: %s)\n", strerror((int)-n));
	free(e);
}

/* list_devices -- returns the number of devices with an active port. */
static int list_devices(void)
{
	struct ibv_device **list;
	int num = 0, active = 0;

	section("RDMA devices (libibverbs)");
	list = ibv_get_device_list(&num);
	if (list == NULL || num == 0) {
		printf("none%s\n", list == NULL
		                       ? (errno == ENOSYS ? " (no RDMA support in the kernel)" : "")
		                       : "");
		if (list != NULL)
			ibv_free_device_list(list);
		return 0;
	}
	printf("%-10s %-4s %-8s %-6s %-5s %-13s %-9s %-9s %s\n", "device", "port", "state", "mtu",
	       "link", "atomics", "max_qp_wr", "max_cqe", "max_mr_size");
	for (int i = 0; i < num; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_context *c = ibv_open_device(list[i]);
		struct ibv_device_attr da;
		char mr[32];

		if (c == NULL) {
			printf("%-10s cannot open: %s\n", name, strerror(errno));
			continue;
		}
		if (ibv_query_device(c, &da) != 0) {
			printf("%-10s cannot query: %s\n", name, strerror(errno));
			ibv_close_device(c);
			continue;
		}
		if (da.max_mr_size == UINT64_MAX)
			snprintf(mr, sizeof(mr), "any");
		else
			human_bytes((unsigned long long)da.max_mr_size, mr, sizeof(mr));
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;

			if (ibv_query_port(c, p, &pa) != 0) {
				printf("%-10s %-4u cannot query: %s\n", name, p, strerror(errno));
				continue;
			}
			active += pa.state == IBV_PORT_ACTIVE;
			printf("%-10s %-4u %-8s %-6d %-5s %-13s %-9d %-9d %s\n", name, p,
			       ibv_port_state_str(pa.state), 128 << pa.active_mtu,
			       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "eth" : "ib",
			       atomic_str(da.atomic_cap), da.max_qp_wr, da.max_cqe, mr);
			list_gids(c, p, pa.gid_tbl_len);
		}
		ibv_close_device(c);
	}
	ibv_free_device_list(list);
	return active;
}
#else
static int list_devices(void)
{
	section("RDMA devices");
	printf("not listed: this liboco was built without the verbs provider "
	       "(meson -Dverbs=enabled needs libibverbs-dev and librdmacm-dev)\n");
	return 0;
}
#endif

/* ---- memory ---------------------------------------------------------------- */

/* show_memlock -- returns whether the limit is comfortable for registration. */
static bool show_memlock(void)
{
	struct rlimit rl;
	char cur[32], max[32];
	bool ok;

	section("Locked memory (RLIMIT_MEMLOCK: registered regions count against it)");
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		printf("getrlimit: %s\n", strerror(errno));
		return false;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(cur, sizeof(cur), "unlimited");
	else
		human_bytes((unsigned long long)rl.rlim_cur, cur, sizeof(cur));
	if (rl.rlim_max == RLIM_INFINITY)
		snprintf(max, sizeof(max), "unlimited");
	else
		human_bytes((unsigned long long)rl.rlim_max, max, sizeof(max));
	ok = !lc_memlock_low(&rl, geteuid());
	printf("%-8s %-12s %s\n", "soft", cur, ok ? "ok" : "LOW");
	printf("%-8s %s\n", "hard", max);
	if (geteuid() == 0 && rl.rlim_cur != RLIM_INFINITY)
		printf("(root: CAP_IPC_LOCK lifts the limit for registration)\n");
	return ok;
}

static void show_hugepages(void)
{
	DIR *d = opendir("/sys/kernel/mm/hugepages");
	struct dirent *e;
	char buf[256];
	bool any = false;

	section("Hugepages (registered arenas use them when available)");
	if (d == NULL) {
		printf("no hugepage support (/sys/kernel/mm/hugepages: %s)\n", strerror(errno));
	} else {
		printf("%-10s %-8s %s\n", "size", "total", "free");
		while ((e = readdir(d)) != NULL) {
			char path[512], total[32] = "?", fr[32] = "?";
			unsigned long kb;

			if (sscanf(e->d_name, "hugepages-%lukB", &kb) != 1)
				continue;
			snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/nr_hugepages",
			         e->d_name);
			read_line(path, total, sizeof(total));
			snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/free_hugepages",
			         e->d_name);
			read_line(path, fr, sizeof(fr));
			human_bytes((unsigned long long)kb * 1024, buf, sizeof(buf));
			printf("%-10s %-8s %s\n", buf, total, fr);
			any = true;
		}
		closedir(d);
		if (!any)
			printf("no hugepage sizes listed\n");
	}
	if (read_line("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) == 0)
		printf("transparent hugepages: %s\n", buf);
	else
		printf("transparent hugepages: not available\n");
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: loco-info [--fabric NAME] [--device DEV] [--addr IP[:PORT]] [--quiet]\n"
	        "       loco-info -c | --config\n"
	        "  -c, --config    print every LOCO_* setting: its value here, default, meaning\n"
	        "  --fabric NAME   the fabric to check (default: LOCO_FABRIC, else auto)\n"
	        "  --device DEV    verbs device (default: LOCO_DEVICE, else the first "
	        "active)\n"
	        "  --addr IP       listen address to try (default: the provider's)\n"
	        "  --quiet         no provider log lines, no per-provider errors\n");
}

/* show_config -- the settings table: name, value in this environment, default, doc. */
static int show_config(void)
{
	for (const struct lc_config_entry *e = lc_config_table; e->name != NULL; e++) {
		const char *v = getenv(e->name);

		if (v != NULL && *v && strcmp(e->name, "LOCO_SECRET") == 0)
			v = "(set)"; /* never print the cluster secret */
		printf("%-22s %-14s default %-12s %s\n", e->name, v != NULL && *v ? v : "(unset)",
		       e->def != NULL ? e->def : "-", e->doc);
	}
	return 0;
}

static void advise(const char *fabric, int ret, int active)
{
	printf("\nThe selected fabric %s is not usable here: %s.\n", fabric, strerror(-ret));
	if (ret == -ENOENT) {
		printf("This liboco has no provider of that name: LOCO_FABRIC must be one of the "
		       "fabrics listed above.\n");
		return;
	}
	if (strcmp(fabric, "verbs") == 0) {
		if (active == 0)
			printf("No RDMA device has an active port. On a host without an RDMA NIC, "
			       "Soft-RoCE gives one:\n"
			       "  modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0\n"
			       "or run on tcp (LOCO_FABRIC=tcp), which needs no device.\n");
		else
			printf(
			    "A device is active but the provider did not open: check "
			    "LOCO_DEVICE, that the listen address (LOCO_ADDR) is on that device's "
			    "interface, /dev/infiniband access, and RLIMIT_MEMLOCK (ulimit -l).\n");
		return;
	}
	printf("Check the listen address (LOCO_ADDR) and the log above (LOCO_LOG=info).\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"fabric", required_argument, NULL, 'f'},
	    {"device", required_argument, NULL, 'd'},
	    {"addr", required_argument, NULL, 'a'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"config", no_argument, NULL, 'c'},
	    {NULL, 0, NULL, 0},
	};
	struct li_opts o = {0};
	const char *selected;
	int c, sel_ret = -ENOENT, active;
	bool memlock_ok;

	while ((c = getopt_long(argc, argv, "f:d:a:qhc", lopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o.fabric = optarg;
			break;
		case 'd':
			o.device = optarg;
			break;
		case 'a':
			o.addr = optarg;
			break;
		case 'q':
			o.quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'c':
			return show_config();
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	selected = o.fabric ? o.fabric : getenv("LOCO_FABRIC");
	if (selected == NULL || *selected == '\0')
		selected = "auto";
	/* the table says what failed; LOCO_LOG=info shows the providers' reasons */
	if (getenv("LOCO_LOG") == NULL)
		setenv("LOCO_LOG", "error", 1);

	printf("loco-info: fabric %s selected (%s)\n", selected,
	       o.fabric                ? "--fabric"
	       : getenv("LOCO_FABRIC") ? "LOCO_FABRIC"
	                               : "default");
	list_fabrics(&o, selected, &sel_ret);
	active = list_devices();
	memlock_ok = show_memlock();
	show_hugepages();

	if (!memlock_ok)
		printf(
		    "\nRLIMIT_MEMLOCK is low: registering large regions on verbs will fail. Raise "
		    "it: ulimit -l unlimited (shell), LimitMEMLOCK=infinity (systemd), or "
		    "'* - memlock unlimited' in /etc/security/limits.conf.\n");
	if (sel_ret != 0) {
		advise(selected, sel_ret, active);
		return 1;
	}
	printf("\nThe selected fabric %s opens: ok.\n", selected);
	return 0;
}
