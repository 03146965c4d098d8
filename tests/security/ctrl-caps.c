/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctrl-caps.c -- strangers cannot take every file descriptor of a node
 * through its control port (issue 10).
 *
 * A node (in this process) accepts at most 128 control connections that
 * have not authenticated yet, and 16 from one address; the rest are
 * closed at once. A stranger opens 300 silent connections from 20
 * loopback addresses (127.0.0.2-21), then 40 from one more (127.0.0.30).
 * The node's accepted sockets are this process's descriptors beyond the
 * stranger's own: their peak must stay within the caps (plus a small
 * margin for the node's other work). Afterwards every descriptor comes
 * back and a second node joins through the first.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sec.h"

#define SECRET   "ctrl-caps secret"
#define MARGIN   8   /* the node's own descriptors that may come and go */
#define CAP      128 /* LC_CTRL_UNAUTH_MAX */
#define CAP_SRC  16  /* LC_CTRL_UNAUTH_PER_SRC */
#define NSPREAD  300
#define NONE_SRC 40

static int fds[NSPREAD + NONE_SRC];

/* fds_back -- whether this process's descriptors came back to @fd0 (+2) within 5 s. */
static int fds_back(int fd0)
{
	for (int64_t t0 = t_now_ms(); t_now_ms() - t0 < 5000; t_sleep_ms(20))
		if (sec_fd_count() <= fd0 + 2)
			return 1;
	return 0;
}

/* silent -- a connection to @addr from 127.0.0.@host that never says a word. */
static int silent(const char *addr, unsigned host)
{
	struct sockaddr_in from = {.sin_family = AF_INET};
	struct fab_addr fa;
	int fd;

	T_ASSERT_OK(fab_addr_parse(addr, 0, &fa));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	from.sin_addr.s_addr = htonl(0x7f000000u + host);
	T_ASSERT(bind(fd, (struct sockaddr *)&from, sizeof(from)) == 0);
	T_ASSERT(connect(fd, (struct sockaddr *)&fa.ss, fa.len) == 0);
	return fd;
}

/* peak -- the most descriptors of this process seen within @ms. */
static int peak(int ms)
{
	int most = 0;

	for (int64_t t0 = t_now_ms(); t_now_ms() - t0 < ms;) {
		int n = sec_fd_count();

		if (n > most)
			most = n;
		t_sleep_ms(10);
	}
	return most;
}

int main(void)
{
	loco_manager_t *m, *m2;
	const char *addr;
	int fd0, top, n = 0;

	t_init("ctrl-caps", 60);
	m = sec_node(1, NULL, SECRET);
	addr = loco_manager_addr(m);
	fd0 = sec_fd_count();

	/* 300 from 20 addresses: the total cap is the one met */
	for (unsigned i = 0; i < NSPREAD; i++)
		fds[n++] = silent(addr, 2 + i % 20);
	top = peak(500) - fd0 - NSPREAD;
	printf("%d silent connections from 20 addresses: the node holds %d of them (cap %d)\n",
	       NSPREAD, top, CAP);
	if (top > CAP + MARGIN)
		T_FAIL("the node holds %d strangers' connections, the cap is %d", top, CAP);
	while (n > 0)
		close(fds[--n]);
	if (!fds_back(fd0))
		T_FAIL("%d fds after the first wave, %d before", sec_fd_count(), fd0);

	/* 40 from one address: the per-address cap */
	for (unsigned i = 0; i < NONE_SRC; i++)
		fds[n++] = silent(addr, 30);
	top = peak(500) - fd0 - NONE_SRC;
	printf("%d silent connections from one address: the node holds %d (cap %d)\n", NONE_SRC,
	       top, CAP_SRC);
	if (top > CAP_SRC + MARGIN)
		T_FAIL("the node holds %d connections of one address, the cap is %d", top, CAP_SRC);
	while (n > 0)
		close(fds[--n]);
	if (!fds_back(fd0))
		T_FAIL("%d fds after the second wave, %d before", sec_fd_count(), fd0);

	/* a member still joins */
	m2 = sec_node(2, addr, SECRET);
	printf("node 2 joined after the strangers: ok\n");
	loco_fini(m2);
	loco_fini(m);
	printf("PASS\n");
	return T_EXIT_PASS;
}
