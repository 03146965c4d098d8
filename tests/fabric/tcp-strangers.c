/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcp-strangers.c -- strangers cannot exhaust a tcp fab's links or fds
 * (loco-fabric-tcp(7), SECURITY: bounds).
 *
 * 1. 2,000 connections to the data port, each closed at once (half with a
 *    FIN, half with a RST), before any HELLO.
 * 2. 200 connections held open without a HELLO, from 20 loopback
 *    addresses (127.0.0.1-20): the fab never holds more than
 *    FAB_MAX_UNADMITTED of them, never more than FAB_MAX_UNADMITTED_HOST
 *    per address are kept past the first moment, and every one is closed
 *    by the provider within the HELLO bound (1 s) plus slack.
 * 3. Afterwards the fab's link table is empty again and the process has
 *    the fds it had before; a legitimate connect + admit still works and
 *    a WRITE moves bytes.
 * Before step 6 the links of connections that failed before their HELLO
 * were never freed: 1,100 of them filled the 1,024-slot table for good.
 */
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"
#include "tcp/tcp.h"

#define NCLOSE 2000
#define NHOLD  200
#define NHOSTS 20
#define TMO    10000

static struct fab *fab;
static struct fab_addr addr;

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	T_ASSERT(d != NULL);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own fd */
}

static unsigned nlinks(void)
{
	struct tcp_fab *f = to_tcp_fab(fab);
	unsigned n;

	pthread_mutex_lock(&f->lock);
	n = f->nlinks;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* stranger -- a socket from 127.0.0.@host connected to the fab's data port. */
static int stranger(int host)
{
	struct sockaddr_in src = {.sin_family = AF_INET,
	                          .sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)host)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	/*
	 * The port is chosen at connect(), by the whole 4-tuple: a bind() of
	 * port 0 searched the ports of 127.0.0.x alone, slowly past the
	 * TIME-WAIT sockets the suite's earlier tests left (2000 connects took
	 * 14 s in a fresh-clone run instead of 60 ms, and the caps were never
	 * reached within the hello timeout).
	 */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &(int){1}, sizeof(int));
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0)
		T_FAIL("bind to 127.0.0.%d: %s", host, strerror(errno));
	if (connect(fd, (struct sockaddr *)&addr.ss, addr.len) != 0)
		T_FAIL("connect: %s", strerror(errno));
	return fd;
}

/* wait_until -- poll @cond every 20 ms for up to @ms; whether it became true. */
#define WAIT_UNTIL(cond, ms)                               \
	({                                                 \
		int64_t t0_ = t_now_ms();                  \
		while (!(cond) && t_now_ms() - t0_ < (ms)) \
			t_sleep_ms(20);                    \
		(cond);                                    \
	})

static int held[NHOLD];
static bool gone[NHOLD];
static int64_t opened[NHOLD]; /* when each silent connection was made */

/*
 * reap -- note the silent connections (of the first @n) the provider
 * closed; returns how many it closed before the HELLO bound could pass
 * (refused by a cap), timed from each one's own connect.
 */
static int reap(int n, int *left)
{
	int early = 0;

	for (int i = 0; i < n; i++) {
		struct pollfd p = {.fd = held[i], .events = POLLIN};
		char c;

		if (gone[i] || poll(&p, 1, 0) != 1)
			continue;
		if (recv(held[i], &c, 1, MSG_DONTWAIT) > 0)
			T_FAIL("a stranger received a byte");
		gone[i] = true;
		(*left)--;
		/*
		 * Closed before the hello timeout could have run (its timer starts
		 * at the accept, after our connect): refused for a cap. (0.8 of it
		 * failed at load ~10, where refusals took longer to reach us.)
		 */
		early += t_now_ms() - opened[i] < TCP_HELLO_MS;
	}
	return early;
}

int main(void)
{
	struct linger rst = {.l_onoff = 1, .l_linger = 0};
	unsigned most = 0, n;
	int fds0, left, early = 0;
	int64_t t0, t_open;

	t_init("tcp-strangers", 120);
	if (strcmp(t_provider(), "tcp") != 0)
		t_skip("tcp only");
	fab = t_fab_open(NULL);
	T_ASSERT_OK(fab_get_addr(fab, &addr));
	fds0 = count_fds();
	T_ASSERT_EQ(nlinks(), 0);

	/* 1. connect and close */
	t0 = t_now_ms();
	for (int i = 0; i < NCLOSE; i++) {
		int fd = stranger(1 + i % NHOSTS);

		if (i & 1)
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
		close(fd);
		if (i % 100 == 0 && (n = nlinks()) > most)
			most = n;
	}
	printf("%d connect-and-close in %lld ms; at most %u links seen\n", NCLOSE,
	       (long long)(t_now_ms() - t0), most);
	if (!WAIT_UNTIL(nlinks() == 0, 3000))
		T_FAIL("%u links left 3 s after %d connect-and-close", nlinks(), NCLOSE);
	if (!WAIT_UNTIL(count_fds() == fds0, 3000))
		T_FAIL("%d fds open, %d before", count_fds(), fds0);
	printf("connect-and-close: link table empty, fds back to %d: ok\n", fds0);

	/* 2. held open without a HELLO */
	t0 = t_now_ms();
	left = NHOLD;
	for (int i = 0; i < NHOLD; i++) {
		held[i] = stranger(1 + i % NHOSTS);
		opened[i] = t_now_ms();
		if ((n = nlinks()) > most)
			most = n;
		early += reap(i + 1, &left);
	}
	t_open = t_now_ms() - t0;
	while (left > 0 && t_now_ms() - t0 < 4000) {
		if ((n = nlinks()) > most)
			most = n;
		if (n > FAB_MAX_UNADMITTED)
			T_FAIL("%u links not admitted, the cap is %d", n, FAB_MAX_UNADMITTED);
		early += reap(NHOLD, &left);
		t_sleep_ms(10);
	}
	if (left > 0)
		T_FAIL("%d of %d silent connections still open after 4 s", left, NHOLD);
	/*
	 * 20 hosts x 16 would be 320: the total cap of 128 refuses the rest at
	 * once -- when the 200 connections came within the hello timeout.
	 * Where opening them took longer (in three fresh-clone runs the
	 * machine connected 2000 times in 14-15 s instead of 60 ms, for a
	 * reason not found), the first ones time out before the last arrive,
	 * the cap is never reached, and "at once" cannot be told from a
	 * timeout: said, not checked (the cap itself is checked above).
	 */
	if (t_open > TCP_HELLO_MS / 2)
		printf("opening %d connections took %lld ms (more than half the %d ms hello "
		       "timeout): the immediate refusals are not checked here\n",
		       NHOLD, (long long)t_open, TCP_HELLO_MS);
	else if (early < NHOLD - FAB_MAX_UNADMITTED)
		T_FAIL("only %d connections refused at once, expected >= %d", early,
		       NHOLD - FAB_MAX_UNADMITTED);
	printf("%d silent connections: %d refused at once (caps), all closed within %lld ms, "
	       "at most %u links: ok\n",
	       NHOLD, early, (long long)(t_now_ms() - t0), most);
	for (int i = 0; i < NHOLD; i++)
		close(held[i]);

	/* 3. back to the baseline; a real peer still links */
	if (!WAIT_UNTIL(nlinks() == 0, 3000))
		T_FAIL("%u links left after the silent connections", nlinks());
	if (!WAIT_UNTIL(count_fds() == fds0, 3000))
		T_FAIL("%d fds open, %d before", count_fds(), fds0);
	{
		struct fab *b = t_fab_open(NULL);
		struct fab_link *la, *lb;
		uint8_t *abuf = t_alloc(4096), *bbuf = t_alloc(4096);
		struct fab_mr *amr =
		    t_mr_reg(fab, abuf, 4096, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
		struct fab_mr *bmr = t_mr_reg(b, bbuf, 4096, FAB_ACCESS_LOCAL_WRITE);

		t_pair(b, fab, 1, 2, &lb, &la);
		t_fill(bbuf, 4096, 3);
		T_ASSERT_OK(t_run(lb, &(struct fab_wr){.wrid = 1,
		                                       .opcode = FAB_OP_WRITE,
		                                       .local = bbuf,
		                                       .len = 4096,
		                                       .lkey = bmr->lkey,
		                                       .remote_addr = (uintptr_t)abuf,
		                                       .rkey = amr->rkey}));
		T_ASSERT(t_mem_equal(abuf, bbuf, 4096, "WRITE after the strangers"));
		T_ASSERT_OK(fab_link_close(lb));
		T_ASSERT_OK(fab_link_close(la));
		T_ASSERT_OK(fab_mr_dereg(amr));
		T_ASSERT_OK(fab_mr_dereg(bmr));
		fab_close(b);
		t_free(abuf, 4096);
		t_free(bbuf, 4096);
	}
	printf("afterwards: fds back to %d, a legitimate connect + admit + WRITE works: ok\n",
	       fds0);
	fab_close(fab);
	printf("tcp-strangers: PASS\n");
	return T_EXIT_PASS;
}
