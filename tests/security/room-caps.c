/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * room-caps.c -- a tcp fab flooded with silent connections stays within
 * its caps and still admits a peer's link (Step 14, the flood point; the
 * fabric-level half of flood-join).
 *
 * A stranger thread keeps 16 silent connections from each of 12 loopback
 * addresses (127.0.0.2-13) and 20 from 127.0.0.1 open to fab a's data
 * port, reopening each one a closes. Meanwhile fab b, on 127.0.0.1 like
 * the stranger's last 20, connects to a ten times; a accepts each link,
 * admits it, and a WRITE crosses it. All along a sampler counts, under
 * a's lock, the links in a's table not admitted: never more than
 * FAB_MAX_UNADMITTED, plus the one link accepted and not admitted yet.
 *
 * Before the room-making fix b's connects were refused by the cap on
 * 127.0.0.1 and a had nothing to accept ("fab_accept returned -11
 * (-EAGAIN)"); with it, but before the closed links left the table at
 * once, the sampler saw up to 16 more links than the cap (closed, waiting
 * for the NIC's next sync: "a's table held 137 links not admitted", 3
 * runs of 3). Links that went down by themselves (the stranger's close,
 * no HELLO in time) close their socket at once and leave the table at the
 * NIC's next turn: the sampler counts them apart (a sanitizer run once
 * saw 138 with them counted, 2026-11-29), and they are no connection.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sec.h"
#include "tcp/tcp.h"

#define SRCS     12
#define PER_SRC  16
#define OWN      20
#define NSLOTS   (SRCS * PER_SRC + OWN)
#define ROUNDS   10
#define TMO      5000
#define FLOOD_MS 25000 /* the stranger's and the sampler's own bound */
#define LEN      4096

static struct sockaddr_in dst;
static int stop;           /* atomic */
static unsigned most;      /* atomic: the most links not admitted the sampler saw */
static unsigned most_dead; /* atomic: the most of them down, socket closed, not freed yet */
static uint64_t samples;   /* atomic */
static uint64_t reopened;  /* atomic: stranger connections a closed */
static int fds[NSLOTS];
static struct pollfd pfd[NSLOTS];

/* slot_open -- a silent connection for slot @i, or fd -1 (tried again next turn). */
static void slot_open(unsigned i)
{
	struct sockaddr_in from = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	from.sin_addr.s_addr = htonl(i < SRCS * PER_SRC ? 0x7f000002u + i / PER_SRC : 0x7f000001u);
	fds[i] = -1;
	pfd[i] = (struct pollfd){.fd = -1};
	if (fd < 0)
		return;
	/* the port is picked at connect(): the 4-tuple, not the address, must be unique */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0 ||
	    (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 && errno != EINPROGRESS)) {
		close(fd);
		return;
	}
	fds[i] = fd;
	pfd[i] = (struct pollfd){.fd = fd, .events = POLLIN | POLLRDHUP};
}

static void *stranger_main(void *arg)
{
	int64_t end = t_now_ms() + FLOOD_MS;
	uint8_t b[64];

	(void)arg;
	for (unsigned i = 0; i < NSLOTS; i++)
		slot_open(i);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) && t_now_ms() < end) {
		int n = poll(pfd, NSLOTS, 5);

		for (unsigned i = 0; i < NSLOTS; i++) {
			if (fds[i] >= 0 && (n <= 0 || pfd[i].revents == 0))
				continue;
			if (fds[i] >= 0) {
				if (recv(fds[i], b, sizeof(b), MSG_DONTWAIT) > 0)
					T_FAIL("a silent stranger received a byte");
				close(fds[i]);
				__atomic_add_fetch(&reopened, 1, __ATOMIC_RELAXED);
			}
			slot_open(i);
		}
	}
	for (unsigned i = 0; i < NSLOTS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return NULL;
}

/* sampler_main -- count a's links not admitted, under its lock, until stopped (bounded). */
static void *sampler_main(void *arg)
{
	struct tcp_fab *f = arg;
	int64_t end = t_now_ms() + FLOOD_MS;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) && t_now_ms() < end) {
		unsigned n = 0;

		unsigned dead = 0;

		pthread_mutex_lock(&f->lock);
		for (unsigned i = 0; i < f->nlinks; i++) {
			const struct tcp_link *l = f->links[i];

			if (!l->passive || l->admitted)
				continue;
			/*
			 * Down with its socket closed (the peer hung up, no HELLO
			 * in time): no connection any more, only the struct, which
			 * the NIC's next turn frees (nic_sync()). Counted apart.
			 */
			if (l->state == TCP_LINK_DOWN && l->fd < 0)
				dead++;
			else
				n++;
		}
		pthread_mutex_unlock(&f->lock);
		if (n > __atomic_load_n(&most, __ATOMIC_RELAXED))
			__atomic_store_n(&most, n, __ATOMIC_RELAXED);
		if (dead > __atomic_load_n(&most_dead, __ATOMIC_RELAXED))
			__atomic_store_n(&most_dead, dead, __ATOMIC_RELAXED);
		__atomic_add_fetch(&samples, 1, __ATOMIC_RELAXED);
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	struct fab *a, *b;
	struct fab_addr aaddr;
	struct fab_mr *amr, *bmr;
	uint8_t *abuf, *bbuf;
	pthread_t st, sa;
	int64_t t0;

	t_init("room-caps", 60);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("tcp only: silent connections are the tcp wire's");
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(LEN);
	bbuf = t_alloc(LEN);
	amr = t_mr_reg(a, abuf, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	bmr = t_mr_reg(b, bbuf, LEN, FAB_ACCESS_LOCAL_WRITE);
	T_ASSERT_OK(fab_get_addr(a, &aaddr));
	T_ASSERT(aaddr.ss.ss_family == AF_INET);
	memcpy(&dst, &aaddr.ss, sizeof(dst));

	T_ASSERT(pthread_create(&st, NULL, stranger_main, NULL) == 0);
	T_ASSERT(pthread_create(&sa, NULL, sampler_main, to_tcp_fab(a)) == 0);
	t_sleep_ms(1000); /* every cap met */

	t0 = t_now_ms();
	for (int r = 0; r < ROUNDS; r++) {
		struct t_connect_async c = {.fab = b, .addr = aaddr, .ctx = 1, .timeout_ms = TMO};
		struct fab_link *held;
		int ret;

		t_connect_start(&c);
		held = t_accept_held(a, 2, TMO, NULL, NULL);
		ret = fab_link_admit(held);
		if (ret != 0 || t_connect_join(&c) != 0)
			T_FAIL("round %d: admit %s, connect %s", r, t_errname(ret),
			       t_errname(c.ret));
		t_fill(bbuf, LEN, (uint64_t)r + 1);
		T_ASSERT_OK(t_run(c.link, &(struct fab_wr){.wrid = 1,
		                                           .opcode = FAB_OP_WRITE,
		                                           .local = bbuf,
		                                           .len = LEN,
		                                           .lkey = bmr->lkey,
		                                           .remote_addr = (uintptr_t)abuf,
		                                           .rkey = amr->rkey}));
		T_ASSERT(t_mem_equal(abuf, bbuf, LEN, "WRITE under the flood"));
		T_ASSERT_OK(fab_link_close(c.link));
		T_ASSERT_OK(fab_link_close(held));
	}
	printf("%d links admitted and used under the flood in %lld ms; %llu stranger connections "
	       "closed by the fab meanwhile\n",
	       ROUNDS, (long long)(t_now_ms() - t0),
	       (unsigned long long)__atomic_load_n(&reopened, __ATOMIC_RELAXED));
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(st, NULL);
	pthread_join(sa, NULL);
	printf("links not admitted in a's table: at most %u in %llu samples (cap %d, plus the one "
	       "accepted); down and closed, waiting for the NIC's next turn: at most %u\n",
	       most, (unsigned long long)samples, FAB_MAX_UNADMITTED, most_dead);
	T_ASSERT(reopened > 0);
	if (most > FAB_MAX_UNADMITTED + 1)
		T_FAIL("a's table held %u links not admitted, the cap is %d", most,
		       FAB_MAX_UNADMITTED);
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(b);
	fab_close(a);
	t_free(abuf, LEN);
	t_free(bbuf, LEN);
	printf("PASS\n");
	return T_EXIT_PASS;
}
