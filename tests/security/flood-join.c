/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flood-join.c -- strangers cannot starve members (Step 14, the flood
 * point; DESIGN §4: links that prove membership are admitted however many
 * strangers hold connections).
 *
 * Three nodes (2, 3 and 4, in this process) run barrier rounds. A
 * stranger (a thread) keeps, against each member's tcp data port and
 * control port, 16 silent connections from each of 12 loopback addresses
 * (127.0.0.2-13) and 20 from the members' own address, and reopens every
 * one a node closes: every cap on connections not admitted yet (128 in
 * all, 16 per address, on both planes) is met all the time. Meanwhile
 * node 1 joins through node 2; as the lowest id it opens the control
 * connection and the data link to every member, so each flooded port
 * must let a member in. Expected, with the flood going on: node 1 joins
 * within its join timeout (15 s); every pair of the four nodes has its
 * data link within 10 s (lc_links_has()); a channel of the four joins and
 * runs 5 barrier rounds (each pair's link carries a WRITE); the three
 * nodes' rounds go on all along. And the bounds hold: the stranger never
 * reads a byte, the descriptors the nodes hold for it stay within the
 * caps, and they all come back when it stops.
 *
 * flood-join-hello (LOCO_TEST_FLOOD_HELLO=1): the same, but every
 * connection of the stranger sends a HELLO as soon as it is connected (a
 * data HELLO whose random proof claims one of 50 made-up nodes, a control
 * HELLO from one), so that its connections are not silent ones, the
 * first to give way; then it waits. The control ports may answer it (a
 * CHALLENGE or a refusal), the data ports nothing. (This one passed
 * before the fix too, node 1 joining in 3.7 s: the core refuses a link
 * whose HELLO it can check at once, which freed the caps now and then.)
 *
 * Before the fix (commit 2cbc0d0 on the code of b15b5b3), node 1 "joined"
 * only when its 15 s join timeout ran out, its data links to nodes 3 and
 * 4 refused again and again ("too many connections not admitted yet").
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <loco/barrier.h>

#include "ctrl_wire.h"
#include "manager.h"
#include "provider.h"
#include "sec.h"
#include "tcp/wire.h"

#define SECRET   "flood-join secret"
#define MEMBERS  3
#define SRCS     12 /* 127.0.0.2 .. 127.0.0.13 */
#define PER_SRC  16
#define OWN      20 /* from the members' own address */
#define PER_PORT (SRCS * PER_SRC + OWN)
#define PORTS    (2 * MEMBERS) /* each member's data and control port */
#define NSLOTS   (PORTS * PER_PORT)
/* per node: links the fabric holds, links waiting for a session, control connections */
#define HOLD_CAPS (FAB_MAX_UNADMITTED + LC_PENDING_MAX + LC_CTRL_UNAUTH_MAX)
#define FD_MARGIN 64 /* the nodes' own descriptors that come and go */
#define WAIT_NS   5000000000ll
#define FLOOD_MS  45000 /* the stranger's own bound */

struct node {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	pthread_t t;
	uint64_t rounds; /* atomic */
	int err;         /* atomic: the first failed wait or join */
};

static int stop_rounds; /* atomic */

/* ---- the stranger ---------------------------------------------------- */

struct stranger {
	struct sockaddr_in dst[PORTS];
	uint32_t own; /* the members' address, network order */
	int fd[NSLOTS];
	struct pollfd pfd[NSLOTS];
	pthread_t t;
	int speak;          /* each connection sends a HELLO (flood-join-hello) */
	int stop;           /* atomic */
	int open;           /* atomic: connections open now */
	uint64_t opened;    /* atomic: connections made */
	uint64_t closed;    /* atomic: connections a node closed */
	uint64_t bytes;     /* atomic: bytes a data port sent it (must stay 0) */
	uint64_t ctrl;      /* atomic: bytes a control port sent it (0 unless it speaks) */
	uint64_t open_fail; /* atomic: socket/bind/connect failures */
};

/* data_hello -- a tcp HELLO frame whose random proof claims made-up node @node. */
static size_t data_hello(uint8_t *buf, uint32_t node)
{
	struct tcp_hello h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .sq_depth = 16};
	struct tcp_frame f = {.type = TCP_F_HELLO, .len = TCP_HELLO_LEN};

	h.read_window = 1u << 20;
	h.priv_len = 40;
	sec_random(h.priv, sizeof(h.priv));
	h.priv[0] = 1;
	h.priv[1] = h.priv[2] = h.priv[3] = 0;
	memcpy(h.priv + 4, &node, 4);
	tcp_wire_encode(&f, buf);
	tcp_hello_encode(&h, buf + TCP_HDR_LEN);
	return TCP_HDR_LEN + TCP_HELLO_LEN;
}

/* ctrl_hello -- a control-plane HELLO from made-up node @node (@msg: scratch). */
static size_t ctrl_hello(uint8_t *buf, size_t cap, uint32_t node, struct lc_msg *msg)
{
	long n;

	memset(msg, 0, sizeof(*msg));
	msg->type = LC_MSG_HELLO;
	msg->src_node = node;
	msg->src_inc = 1;
	sec_random(msg->u.hello.nonce, LC_NONCE_LEN);
	snprintf(msg->u.hello.fabric, sizeof(msg->u.hello.fabric), "%s", t_provider());
	msg->u.hello.self.node = node;
	msg->u.hello.self.inc = 1;
	n = lc_ctrl_encode(msg, buf, cap);
	T_ASSERT(n > 0);
	return (size_t)n;
}

/* slot_speak -- slot @i is connected: send its HELLO, then only watch it. */
static void slot_speak(struct stranger *s, unsigned i, struct lc_msg *msg)
{
	uint8_t buf[1024];
	uint32_t node = 100 + i % 50;
	size_t n =
	    i / PER_PORT % 2 == 0 ? data_hello(buf, node) : ctrl_hello(buf, sizeof(buf), node, msg);

	if (send(s->fd[i], buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* closed meanwhile: the next poll says so */
	}
	s->pfd[i].events = POLLIN | POLLRDHUP;
}

/* slot_src -- the source address of slot @i (network order). */
static uint32_t slot_src(const struct stranger *s, unsigned i)
{
	unsigned k = i % PER_PORT;

	return k < SRCS * PER_SRC ? htonl(0x7f000002u + k / PER_SRC) : s->own;
}

/* slot_open -- a silent non-blocking connection for slot @i; 0 or -1. */
static int slot_open(struct stranger *s, unsigned i)
{
	struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr.s_addr = slot_src(s, i)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		goto err;
	/* the port is picked at connect(): the 4-tuple, not the address, must be unique */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0)
		goto err_close;
	if (connect(fd, (struct sockaddr *)&s->dst[i / PER_PORT], sizeof(s->dst[0])) != 0 &&
	    errno != EINPROGRESS)
		goto err_close;
	s->fd[i] = fd;
	/* one that speaks waits until it is connected (POLLOUT), then sends its HELLO */
	s->pfd[i] = (struct pollfd){.fd = fd, .events = s->speak ? POLLOUT : POLLIN | POLLRDHUP};
	__atomic_add_fetch(&s->opened, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->open, 1, __ATOMIC_RELAXED);
	return 0;

err_close:
	close(fd);
err:
	s->fd[i] = -1;
	s->pfd[i] = (struct pollfd){.fd = -1};
	__atomic_add_fetch(&s->open_fail, 1, __ATOMIC_RELAXED);
	return -1;
}

static void slot_close(struct stranger *s, unsigned i)
{
	close(s->fd[i]);
	s->fd[i] = -1;
	s->pfd[i].fd = -1;
	__atomic_sub_fetch(&s->open, 1, __ATOMIC_RELAXED);
}

/* stranger_main -- hold every slot open; reopen what a node closed. Bounded by FLOOD_MS. */
static void *stranger_main(void *arg)
{
	struct stranger *s = arg;
	int64_t end = t_now_ms() + FLOOD_MS;
	struct lc_msg *msg = calloc(1, sizeof(*msg));
	uint8_t b[256];

	T_ASSERT(msg != NULL);

	for (unsigned i = 0; i < NSLOTS; i++)
		slot_open(s, i);
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) && t_now_ms() < end) {
		int n = poll(s->pfd, NSLOTS, 5);

		for (unsigned i = 0; i < NSLOTS && n > 0; i++) {
			ssize_t got;

			if (s->fd[i] < 0 || s->pfd[i].revents == 0)
				continue;
			n--;
			if ((s->pfd[i].events & POLLOUT) &&
			    !(s->pfd[i].revents & (POLLERR | POLLHUP))) {
				slot_speak(s, i, msg);
				continue;
			}
			got = recv(s->fd[i], b, sizeof(b), MSG_DONTWAIT);
			if (got > 0) {
				/*
				 * A data port owes a stranger nothing; a control port
				 * answers a HELLO (a CHALLENGE, a refusal) and nothing
				 * else: silent strangers get nothing at all.
				 */
				__atomic_add_fetch(i / PER_PORT % 2 == 0 ? &s->bytes : &s->ctrl,
				                   (uint64_t)got, __ATOMIC_RELAXED);
				continue;
			}
			if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				continue;
			slot_close(s, i);
			__atomic_add_fetch(&s->closed, 1, __ATOMIC_RELAXED);
			slot_open(s, i);
		}
		/* slots whose open failed (ports, backlog): try again each turn */
		for (unsigned i = 0; i < NSLOTS; i++)
			if (s->fd[i] < 0)
				slot_open(s, i);
	}
	for (unsigned i = 0; i < NSLOTS; i++)
		if (s->fd[i] >= 0)
			slot_close(s, i);
	free(msg);
	return NULL;
}

/* to_sin -- the "ip:port" @addr as a sockaddr. */
static struct sockaddr_in to_sin(const char *addr)
{
	struct sockaddr_in sin;
	struct fab_addr fa;

	T_ASSERT_OK(fab_addr_parse(addr, 0, &fa));
	T_ASSERT(fa.ss.ss_family == AF_INET);
	memcpy(&sin, &fa.ss, sizeof(sin));
	return sin;
}

/* ---- the nodes ------------------------------------------------------- */

/* node_start -- sec_node() with a join timeout the test can wait out. */
static loco_manager_t *node_start(uint32_t id, const char *join, uint32_t join_timeout_ms)
{
	loco_config_t cfg = {0};
	loco_manager_t *m;
	int ret;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	unsetenv("LOCO_SECRET");
	unsetenv("LOCO_ADDR");
	unsetenv("LOCO_JOIN_TIMEOUT_MS");
	setenv("LOCO_MANY_MANAGERS", "1", 1);
	cfg.addr = t_listen_addr(T_SIDE_A);
	cfg.node_id = id;
	cfg.join = join;
	cfg.secret = SECRET;
	cfg.join_timeout_ms = join_timeout_ms;
	ret = loco_init(&cfg, &m);
	if (ret)
		T_FAIL("node %u did not start: %s", id, loco_strerror(ret));
	return m;
}

static void *rounds_main(void *arg)
{
	struct node *n = arg;

	while (!__atomic_load_n(&stop_rounds, __ATOMIC_ACQUIRE)) {
		int ret = loco_barrier_wait(n->b, WAIT_NS);

		if (ret) {
			__atomic_store_n(&n->err, ret, __ATOMIC_RELEASE);
			break;
		}
		__atomic_add_fetch(&n->rounds, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *join_main(void *arg)
{
	struct node *n = arg;

	__atomic_store_n(&n->err, loco_channel_join(n->ch, 15000000000ll), __ATOMIC_RELEASE);
	return NULL;
}

/* five_rounds -- the four-node channel's barrier, five times, each bounded. */
static void *five_rounds(void *arg)
{
	struct node *n = arg;

	for (int i = 0; i < 5; i++) {
		int ret = loco_barrier_wait(n->b, WAIT_NS);

		if (ret) {
			__atomic_store_n(&n->err, ret, __ATOMIC_RELEASE);
			break;
		}
		__atomic_add_fetch(&n->rounds, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* channel -- channel @name of @count nodes with barrier "b" on each of @n[0..count). */
static void channel(struct node *n, unsigned count, const char *name)
{
	for (unsigned i = 0; i < count; i++) {
		T_ASSERT_OK(loco_channel_create(n[i].m, NULL, name, count, &n[i].ch));
		T_ASSERT_OK(loco_barrier_create(n[i].ch, "b", &n[i].b));
	}
}

/* run_all -- run @fn on a thread per node and wait for them all; each is bounded. */
static void run_all(struct node *n, unsigned count, void *(*fn)(void *))
{
	for (unsigned i = 0; i < count; i++)
		T_ASSERT(pthread_create(&n[i].t, NULL, fn, &n[i]) == 0);
	for (unsigned i = 0; i < count; i++)
		pthread_join(n[i].t, NULL);
}

static uint64_t min_rounds(struct node *n)
{
	uint64_t r = UINT64_MAX;

	for (int i = 0; i < MEMBERS; i++) {
		uint64_t x = __atomic_load_n(&n[i].rounds, __ATOMIC_ACQUIRE);
		int err = __atomic_load_n(&n[i].err, __ATOMIC_ACQUIRE);

		if (err)
			T_FAIL("node %u: barrier round failed: %s", loco_manager_node_id(n[i].m),
			       loco_strerror(err));
		r = x < r ? x : r;
	}
	return r;
}

/* links_missing -- how many ordered pairs of @all lack a data link now; names them. */
static int links_missing(struct node *all, unsigned count, int say)
{
	int missing = 0;

	for (unsigned a = 0; a < count; a++)
		for (unsigned b = 0; b < count; b++) {
			uint32_t id = loco_manager_node_id(all[b].m);

			if (a == b || lc_links_has(&all[a].m->links, id))
				continue;
			missing++;
			if (say)
				printf("  node %u has no data link to node %u\n",
				       loco_manager_node_id(all[a].m), id);
		}
	return missing;
}

/* held -- the descriptors the nodes hold beyond @fd0 and the stranger's own. */
static int held(const struct stranger *s, int fd0)
{
	return sec_fd_count() - fd0 - __atomic_load_n(&s->open, __ATOMIC_RELAXED);
}

int main(void)
{
	static struct stranger s;
	struct node n[MEMBERS + 1], q[MEMBERS + 1];
	uint64_t r0, r1, r2;
	int fd0, most = 0, h;
	int64_t t0, t_join;

	s.speak = getenv("LOCO_TEST_FLOOD_HELLO") != NULL;
	t_init(s.speak ? "flood-join-hello" : "flood-join", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("the flood is against tcp data ports");
	memset(n, 0, sizeof(n));
	memset(q, 0, sizeof(q));
	n[0].m = node_start(2, NULL, 10000);
	n[1].m = node_start(3, loco_manager_addr(n[0].m), 10000);
	n[2].m = node_start(4, loco_manager_addr(n[0].m), 10000);
	channel(n, MEMBERS, "rounds");
	run_all(n, MEMBERS, join_main);
	for (int i = 0; i < MEMBERS; i++)
		T_ASSERT_OK(n[i].err);
	for (int i = 0; i < MEMBERS; i++)
		T_ASSERT(pthread_create(&n[i].t, NULL, rounds_main, &n[i]) == 0);
	t_sleep_ms(300);
	fd0 = sec_fd_count();

	/* the flood: every member's data and control port */
	s.own = to_sin(loco_manager_addr(n[0].m)).sin_addr.s_addr;
	for (int i = 0; i < MEMBERS; i++) {
		s.dst[2 * i] = to_sin(sec_fab_addr(n[i].m));
		s.dst[2 * i + 1] = to_sin(loco_manager_addr(n[i].m));
	}
	T_ASSERT(pthread_create(&s.t, NULL, stranger_main, &s) == 0);
	for (t0 = t_now_ms(); t_now_ms() - t0 < 1500; t_sleep_ms(50))
		most = (h = held(&s, fd0)) > most ? h : most;
	r0 = min_rounds(n);
	printf("flood: %d connections open, %llu made, %llu closed by the nodes, %llu failed "
	       "to open; the nodes hold %d descriptors for them; %llu rounds so far\n",
	       __atomic_load_n(&s.open, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s.opened, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s.closed, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s.open_fail, __ATOMIC_RELAXED), held(&s, fd0),
	       (unsigned long long)r0);
	/* more open than the nodes may hold (the caps on control connections and unproven links) */
	T_ASSERT(__atomic_load_n(&s.open, __ATOMIC_RELAXED) >
	         MEMBERS * (FAB_MAX_UNADMITTED + LC_CTRL_UNAUTH_MAX));

	/* node 1 joins through node 2 while the caps are full */
	t0 = t_now_ms();
	n[MEMBERS].m = node_start(1, loco_manager_addr(n[0].m), 15000);
	t_join = t_now_ms() - t0;
	printf("node 1 joined in %lld ms\n", (long long)t_join);
	for (int64_t end = t_now_ms() + 10000;; t_sleep_ms(50)) {
		most = (h = held(&s, fd0)) > most ? h : most;
		if (links_missing(n, MEMBERS + 1, 0) == 0)
			break;
		if (t_now_ms() > end) {
			printf("after 10 s:\n");
			links_missing(n, MEMBERS + 1, 1);
			T_FAIL("a pair of members has no data link under the flood");
		}
	}
	printf("every pair of the 4 nodes has its data link (%lld ms after the join)\n",
	       (long long)(t_now_ms() - t0 - t_join));

	/* the four run barrier rounds together: each pair's link carries WRITEs */
	for (int i = 0; i <= MEMBERS; i++)
		q[i].m = n[i].m;
	channel(q, MEMBERS + 1, "all");
	run_all(q, MEMBERS + 1, join_main);
	for (int i = 0; i <= MEMBERS; i++)
		if (q[i].err)
			T_FAIL("node %u: joining the 4-node channel: %s",
			       loco_manager_node_id(q[i].m), loco_strerror(q[i].err));
	run_all(q, MEMBERS + 1, five_rounds);
	for (int i = 0; i <= MEMBERS; i++) {
		if (q[i].err)
			T_FAIL("node %u: 4-node barrier: %s", loco_manager_node_id(q[i].m),
			       loco_strerror(q[i].err));
		T_ASSERT_EQ(q[i].rounds, 5);
	}
	r1 = min_rounds(n);
	most = (h = held(&s, fd0)) > most ? h : most;
	printf("5 rounds of the 4 nodes done; the 3 nodes' rounds: %llu during the join\n",
	       (unsigned long long)(r1 - r0));
	T_ASSERT(r1 > r0);

	/* the stranger stops: what it was owed, and what the nodes held for it */
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	pthread_join(s.t, NULL);
	printf("stranger: %llu connections made, %llu closed by the nodes, %llu bytes read "
	       "from data ports, %llu from control ports; "
	       "the nodes held at most %d descriptors for it (caps %d)\n",
	       (unsigned long long)s.opened, (unsigned long long)s.closed,
	       (unsigned long long)s.bytes, (unsigned long long)s.ctrl, most, MEMBERS * HOLD_CAPS);
	T_ASSERT_EQ(s.bytes, 0);
	if (!s.speak)
		T_ASSERT_EQ(s.ctrl, 0);
	if (most > MEMBERS * HOLD_CAPS + FD_MARGIN)
		T_FAIL("the nodes held %d descriptors for the stranger; the caps are %d", most,
		       MEMBERS * HOLD_CAPS);
	for (int64_t end = t_now_ms() + 5000; sec_fd_count() > fd0 + FD_MARGIN; t_sleep_ms(50))
		if (t_now_ms() > end)
			T_FAIL("%d descriptors 5 s after the flood, %d before", sec_fd_count(),
			       fd0);
	/* rounds go on after the flood */
	for (int64_t end = t_now_ms() + 5000; (r2 = min_rounds(n)) <= r1; t_sleep_ms(20))
		if (t_now_ms() > end)
			T_FAIL("no barrier round in 5 s after the flood");

	__atomic_store_n(&stop_rounds, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < MEMBERS; i++)
		pthread_join(n[i].t, NULL); /* each ends at its next round, or its bound */
	for (int i = 0; i <= MEMBERS; i++) {
		loco_barrier_destroy(q[i].b);
		loco_channel_destroy(q[i].ch);
	}
	for (int i = 0; i < MEMBERS; i++) {
		loco_barrier_destroy(n[i].b);
		loco_channel_destroy(n[i].ch);
	}
	loco_fini(n[MEMBERS].m);
	for (int i = MEMBERS - 1; i >= 0; i--)
		loco_fini(n[i].m);
	printf("PASS\n");
	return T_EXIT_PASS;
}
