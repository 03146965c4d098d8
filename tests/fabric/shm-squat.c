/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-squat.c -- another local user cannot stop a node from starting or
 * joining on shm by binding, first, the names it would listen on
 * (loco-fabric-shm(7), "Addresses and connections").
 *
 * Until Step 14 a fab listened on the abstract unix name
 * "loco-shm-<uid>-<ip>:<port>": anyone on the host could bind it first,
 * and the fab then did not open ("cannot listen on @loco-shm-0-...:
 * Address already in use"). Squatters -- children that become nobody
 * (65534), as many as RLIMIT_NOFILE needs -- bind and listen on every
 * name of that scheme they can predict for our uid on 127.0.0.1: one per
 * port of the host's ephemeral range (ip_local_port_range, where a port 0
 * lands) and the fixed port of part 1. Then, with every one of them held:
 *
 * 1. fabric: a fab opens on 127.0.0.1:P (P squatted, and a fixed port: the
 *    worst case), a second fab (port 0) connects to it, and WRITE and READ
 *    move data both ways over shm;
 * 2. nodes: node 1 starts (loco_init on 127.0.0.1:0), node 2 joins it,
 *    the data link between them is shm (loco_manager_member_fabric), and node 2
 *    writes into node 1's region and reads it back.
 *
 * Runs on shm and on auto (there the squatted shm half used to be left out:
 * every link tcp). Skipped unless root (it cannot become another user).
 * The squatters are ended by PID (their pipe, then t_reap; t_fail_at kills them).
 * The test runs in a network namespace of its own where it can (abstract
 * names belong to one): the squatters must not stop the fabs of other
 * tests that run on this host meanwhile, nor may theirs hold names here.
 */
#include <errno.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <loco.h>

#include "helpers.h"

#define SQUAT_UID  65534
#define SQUAT_MAX  65536u /* names a squatter binds at most */
#define SQUATTERS  16     /* processes that share the names (RLIMIT_NOFILE each) */
#define SQUAT_S    30     /* seconds the squatter may take to bind them */
#define LEN        4096
#define NS         1000000000ll
#define SECRET     "shm-squat secret"
#define RANGE_PROC "/proc/sys/net/ipv4/ip_local_port_range"
#define OLD_NAME   "loco-shm-%u-127.0.0.1:%u" /* uid, port: the name before Step 14 */

struct squat {
	unsigned lo, hi; /* this squatter's slice of the ephemeral range */
	unsigned port;   /* part 1's fixed port, or 0: another squatter holds it */
	uid_t owner;     /* whose names: ours */
};

/* squat_one -- bind and listen on the old name of @port; 0 or -errno. */
static int squat_one(const struct squat *s, unsigned port)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, OLD_NAME, (unsigned)s->owner,
	                 port);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, len) < 0 || listen(fd, 1) < 0) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	return 0; /* held until the squatter exits */
}

/*
 * squatter_main -- become nobody, bind every predictable name, report how
 * many, and hold them until the parent says so. Its exit closes them.
 */
static int squatter_main(struct t_chan *ch, void *arg)
{
	const struct squat *s = arg;
	struct rlimit rl;
	uint64_t bound = 0, end = t_now_ns() + SQUAT_S * 1000000000ull;

	/* a descriptor per name: the parent sized the slices by the hard limit */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		fprintf(stderr, "squatter: cannot raise RLIMIT_NOFILE: %s\n", strerror(errno));
		return 2;
	}
	if (setgroups(0, NULL) != 0 || setresgid(SQUAT_UID, SQUAT_UID, SQUAT_UID) != 0 ||
	    setresuid(SQUAT_UID, SQUAT_UID, SQUAT_UID) != 0 || geteuid() != SQUAT_UID) {
		fprintf(stderr, "squatter: cannot become uid %d: %s\n", SQUAT_UID, strerror(errno));
		return 2;
	}
	for (unsigned p = s->lo; p <= s->hi && bound < SQUAT_MAX; p++) {
		if (squat_one(s, p) == 0)
			bound++;
		if (t_now_ns() > end) {
			fprintf(stderr, "squatter: %llu names in %d s, not done\n",
			        (unsigned long long)bound, SQUAT_S);
			return 3;
		}
	}
	if (s->port != 0)
		bound += squat_one(s, s->port) == 0;
	t_send_u64(ch, bound);
	(void)t_recv_u64(ch, -1); /* the parent is done (or died: its alarm ends us) */
	return 0;
}

/*
 * private_netns -- move this process (one thread yet) into a new network
 * namespace with its loopback up; its children and threads follow. 0 or
 * -errno from unshare (then we stay in the host's); a loopback that does
 * not come up fails the test.
 */
static int private_netns(void)
{
	struct ifreq ifr = {.ifr_name = "lo"};
	int fd;

	if (unshare(CLONE_NEWNET) != 0)
		return -errno;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_ASSERT(ioctl(fd, SIOCGIFFLAGS, &ifr) == 0);
	ifr.ifr_flags |= IFF_UP;
	T_ASSERT(ioctl(fd, SIOCSIFFLAGS, &ifr) == 0);
	close(fd);
	return 0;
}

/* ephemeral_range -- the host's ip_local_port_range (a port 0 lands there). */
static void ephemeral_range(unsigned *lo, unsigned *hi)
{
	FILE *f = fopen(RANGE_PROC, "r");

	*lo = 32768;
	*hi = 60999;
	if (f != NULL) {
		if (fscanf(f, "%u %u", lo, hi) != 2 || *lo == 0 || *hi > 65535 || *lo > *hi) {
			*lo = 32768;
			*hi = 60999;
		}
		fclose(f);
	}
}

/* free_port -- a TCP port of 127.0.0.1 that nobody holds now. */
static unsigned free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	T_ASSERT(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	T_ASSERT(getsockname(fd, (struct sockaddr *)&sin, &len) == 0);
	close(fd);
	return ntohs(sin.sin_port);
}

/* link_on_shm -- whether @link is carried by shm (auto stacks it: the link is its sub-fab's). */
static bool link_on_shm(const struct fab_link *link)
{
	return strcmp(link->fab->ops->name, "shm") == 0;
}

/* test_fabric -- part 1: a fab on the squatted 127.0.0.1:@port, one joining it, data both ways. */
static void test_fabric(unsigned port)
{
	char where[32];
	struct fab_attr attr = {.listen_addr = where};
	uint8_t *tgt = t_alloc(LEN), *loc = t_alloc(LEN), want[256];
	struct fab_mr *tmr, *lmr, *tmr2, *lmr2;
	struct fab_link *la, *lb;
	struct fab *node, *joiner;
	int ret;

	snprintf(where, sizeof(where), "127.0.0.1:%u", port);
	ret = fab_open(NULL, &attr, &node);
	if (ret)
		T_FAIL("fabric: a fab on squatted %s does not open: %s", where, strerror(-ret));
	joiner = t_fab_open(NULL);
	tmr = t_mr_reg(node, tgt, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE);
	lmr = t_mr_reg(joiner, loc, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE);
	t_pair(joiner, node, 1, 2, &lb, &la);
	if (!link_on_shm(lb) || !link_on_shm(la))
		T_FAIL("fabric: the link is on %s, not shm", lb->fab->ops->name);

	/* the joiner WRITEs into the node, then READs the node's other bytes */
	t_fill(want, sizeof(want), 0x5157);
	memcpy(loc, want, sizeof(want));
	T_ASSERT_OK(t_run(lb, &(struct fab_wr){.wrid = 1,
	                                       .opcode = FAB_OP_WRITE,
	                                       .local = loc,
	                                       .len = sizeof(want),
	                                       .lkey = lmr->lkey,
	                                       .remote_addr = (uintptr_t)tgt,
	                                       .rkey = tmr->rkey}));
	T_ASSERT(t_mem_equal(tgt, want, sizeof(want), "the node's bytes after the WRITE"));
	t_fill(tgt + 1024, sizeof(want), 0x5158);
	T_ASSERT_OK(t_run(lb, &(struct fab_wr){.wrid = 2,
	                                       .opcode = FAB_OP_READ,
	                                       .local = loc + 1024,
	                                       .len = sizeof(want),
	                                       .lkey = lmr->lkey,
	                                       .remote_addr = (uintptr_t)(tgt + 1024),
	                                       .rkey = tmr->rkey}));
	T_ASSERT(t_mem_equal(loc + 1024, tgt + 1024, sizeof(want), "the bytes READ"));
	/* and the other way, on the accepted end */
	t_fill(tgt + 2048, sizeof(want), 0x5159);
	tmr2 = t_mr_reg(node, tgt + 2048, 1024, FAB_ACCESS_LOCAL_WRITE);
	lmr2 = t_mr_reg(joiner, loc + 2048, 1024, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	T_ASSERT_OK(t_run(la, &(struct fab_wr){.wrid = 3,
	                                       .opcode = FAB_OP_WRITE,
	                                       .local = tgt + 2048,
	                                       .len = sizeof(want),
	                                       .lkey = tmr2->lkey,
	                                       .remote_addr = (uintptr_t)(loc + 2048),
	                                       .rkey = lmr2->rkey}));
	T_ASSERT(t_mem_equal(loc + 2048, tgt + 2048, sizeof(want), "the joiner's bytes"));
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(tmr));
	T_ASSERT_OK(fab_mr_dereg(tmr2));
	T_ASSERT_OK(fab_mr_dereg(lmr));
	T_ASSERT_OK(fab_mr_dereg(lmr2));
	fab_close(joiner);
	fab_close(node);
	t_free(tgt, LEN);
	t_free(loc, LEN);
	printf("fabric: a fab on squatted %s opened, a second joined it on shm, WRITE and READ "
	       "both ways: ok\n",
	       where);
}

/* node_start -- a node of this process (id @id), joining @join (NULL: alone), on 127.0.0.1. */
static loco_manager_t *node_start(uint32_t id, const char *join)
{
	loco_config_t cfg = {.addr = "127.0.0.1:0", .node_id = id, .join = join, .secret = SECRET};
	loco_manager_t *m;
	int ret = loco_init(&cfg, &m);

	if (ret)
		T_FAIL("nodes: node %u does not %s: %s", id, join ? "join" : "start",
		       loco_strerror(ret));
	return m;
}

struct node_chan {
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
	int ret;
};

static void chan_make(loco_manager_t *m, struct node_chan *c)
{
	T_ASSERT_OK(loco_channel_create(m, NULL, "squat", 2, &c->ch));
	T_ASSERT_OK(loco_object_create(c->ch, "o", NULL, NULL, &c->obj));
	T_ASSERT_OK(
	    loco_region_create(c->obj, "v", LEN, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &c->r));
}

static void *join_main(void *arg)
{
	struct node_chan *c = arg;

	c->ret = loco_channel_join(c->ch, 20 * NS);
	return NULL;
}

/* test_nodes -- part 2: node 1 starts, node 2 joins, their link is shm, data moves. */
static void test_nodes(void)
{
	struct node_chan c1, c2;
	loco_manager_t *m1, *m2;
	loco_ack_key_t *ack;
	loco_rref_t rr;
	const char *fab1, *fab2;
	uint8_t want[256], *src, *dst;
	pthread_t t;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	unsetenv("LOCO_SECRET");
	unsetenv("LOCO_ADDR");
	setenv("LOCO_MANY_MANAGERS", "1", 1); /* both nodes in this process, on purpose */
	m1 = node_start(1, NULL);
	m2 = node_start(2, loco_manager_addr(m1));
	chan_make(m1, &c1);
	chan_make(m2, &c2);
	T_ASSERT(pthread_create(&t, NULL, join_main, &c2) == 0);
	c1.ret = loco_channel_join(c1.ch, 20 * NS);
	T_ASSERT(pthread_join(t, NULL) == 0);
	T_ASSERT_OK(c1.ret);
	T_ASSERT_OK(c2.ret);
	T_ASSERT_OK(loco_manager_member_fabric(m1, 2, &fab1));
	T_ASSERT_OK(loco_manager_member_fabric(m2, 1, &fab2));
	if (strcmp(fab1, "shm") != 0 || strcmp(fab2, "shm") != 0)
		T_FAIL("nodes: the data link is %s / %s, not shm", fab1, fab2);

	src = loco_region_ptr(c2.r);
	dst = loco_region_ptr(c1.r);
	T_ASSERT_OK(loco_ack_key_create(m2, &ack));
	T_ASSERT_OK(loco_region_remote(c2.r, 1, &rr));
	t_fill(want, sizeof(want), 0x515a);
	memcpy(src, want, sizeof(want));
	T_ASSERT_OK(loco_write(c2.r, 0, &rr, 512, sizeof(want), ack));
	T_ASSERT_OK(loco_ack_wait(ack, 5 * NS));
	T_ASSERT(t_mem_equal(dst + 512, want, sizeof(want), "node 1's bytes after the WRITE"));
	memset(src + 1024, 0, sizeof(want));
	T_ASSERT_OK(loco_read(c2.r, 1024, &rr, 512, sizeof(want), ack));
	T_ASSERT_OK(loco_ack_wait(ack, 5 * NS));
	T_ASSERT(t_mem_equal(src + 1024, want, sizeof(want), "the bytes node 2 READ back"));
	loco_ack_key_destroy(ack);
	loco_object_destroy(c2.obj);
	loco_object_destroy(c1.obj);
	T_ASSERT_OK(loco_channel_destroy(c2.ch));
	T_ASSERT_OK(loco_channel_destroy(c1.ch));
	loco_fini(m2);
	loco_fini(m1);
	printf("nodes: node 1 started, node 2 joined it, data link shm, WRITE and READ: ok\n");
}

int main(void)
{
	struct squat s[SQUATTERS];
	struct t_chan ch[SQUATTERS];
	pid_t pid[SQUATTERS];
	struct rlimit rl;
	unsigned lo, hi, port, per, n;
	uint64_t bound = 0;
	int ret;

	t_init("shm-squat", 110);
	if (strcmp(t_provider(), "shm") != 0 && strcmp(t_provider(), "auto") != 0)
		t_skip("shm and auto only");
	if (geteuid() != 0)
		t_skip("not root: cannot run the squatter as another user");
	unsetenv("LOCO_SHM_HOST"); /* it would change the names */
	ret = private_netns();
	printf("network namespace: %s%s\n", ret ? "the host's, none of our own: " : "our own",
	       ret ? strerror(-ret) : "");
	ephemeral_range(&lo, &hi); /* the namespace's */
	port = free_port();
	/* without CAP_SYS_RESOURCE a process holds at most the hard limit: slices of the range */
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	per = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : (unsigned)rl.rlim_max;
	T_ASSERT(per > 1024);
	per -= 64; /* for stdio, the pipes, the library */
	n = (hi - lo + 1 + per - 1) / per;
	if (n > SQUATTERS)
		t_skip("RLIMIT_NOFILE %u: %u squatters needed for %u names", per + 64, n,
		       hi - lo + 1);
	for (unsigned i = 0; i < n; i++) {
		s[i] = (struct squat){.lo = lo + i * per,
		                      .hi = i + 1 == n ? hi : lo + (i + 1) * per - 1,
		                      .port = i == 0 && (port < lo || port > hi) ? port : 0,
		                      .owner = geteuid()};
		pid[i] = t_spawn(squatter_main, &s[i], &ch[i]);
	}
	for (unsigned i = 0; i < n; i++)
		bound += t_recv_u64(&ch[i], SQUAT_S * 1000 + 5000);
	printf("%u squatter(s) (uid %d) hold %llu names " OLD_NAME " .. :%u (and :%u)\n", n,
	       SQUAT_UID, (unsigned long long)bound, (unsigned)geteuid(), lo, hi, port);
	/* in the host's namespace, a name no squatter could take is one a fab of another test
	 * holds: still a test */
	T_ASSERT(bound > (hi - lo) / 2);

	test_fabric(port);
	test_nodes();

	for (unsigned i = 0; i < n; i++) {
		int st;

		t_send_u64(&ch[i], 1);
		st = t_reap(pid[i], 10000);
		t_chan_close(&ch[i]);
		T_ASSERT_EQ(st, 0);
	}
	printf("shm-squat: PASS\n");
	return T_EXIT_PASS;
}
