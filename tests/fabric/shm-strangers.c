/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-strangers.c -- what the shm provider refuses that the contract tests
 * do not reach (loco-fabric-shm(7)):
 *
 * 1. Another user: a child that setuid()s to nobody (65534) connects to the
 *    fab's unix name and sends a well-formed HELLO: the connection is
 *    closed at once (SO_PEERCRED) and nothing reaches fab_accept(). The
 *    same child without setuid() is held in the accept queue (so the check
 *    is what refuses the stranger). Skipped unless root.
 * 2. Forged keys: a WRITE, READ, CAS and FAA with the rkey of a live region
 *    but another generation (the key's slot bits kept), and with the key of
 *    another slot, complete -EACCES; the target region is untouched.
 * 3. The published key table cannot be made writable by anyone but its
 *    fab: a PROT_WRITE shared mapping of its memfd fails with EPERM, and
 *    mprotect() of a read-only mapping to writable fails (sealed).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../liboco/fabric/shm/shm.h"
#include "helpers.h"

#define LEN 4096

struct stranger {
	struct fab_addr addr;
	uid_t owner;
	int setuid_to; /* -1: keep our uid */
};

/* stranger_main -- connect and HELLO; exit 0 when the fab hung up on us, 1 when it did not. */
static int stranger_main(struct t_chan *ch, void *arg)
{
	const struct stranger *s = arg;
	struct shm_msg m = {.magic = SHM_MAGIC, .version = SHM_VERSION, .type = SHM_M_HELLO};
	struct sockaddr_un sun;
	socklen_t slen;
	struct pollfd p;
	char c;
	int fd;

	(void)ch;
	if (s->setuid_to >= 0 && setuid((uid_t)s->setuid_to) != 0)
		return 2;
	if (shm_abstract_name(&s->addr, s->owner, &sun, &slen) != 0)
		return 2;
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, slen) != 0)
		return 2;
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return 0; /* already closed */
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 1000) <= 0)
		return 1; /* held (within the 2 s hold bound): nobody hung up */
	return recv(fd, &c, 1, 0) <= 0 ? 0 : 1;
}

static void test_other_user(struct fab *b)
{
	struct stranger s = {.owner = geteuid(), .setuid_to = 65534};
	struct t_chan ch;
	struct fab_link *link;
	uint8_t priv[FAB_PRIV_MAX];
	size_t plen;
	int st;

	if (geteuid() != 0) {
		printf("other user: skipped (not root: cannot become another user)\n");
		return;
	}
	T_ASSERT_OK(fab_get_addr(b, &s.addr));
	st = t_reap(t_spawn(stranger_main, &s, &ch), 10000);
	t_chan_close(&ch);
	if (st != 0)
		T_FAIL("other user: the stranger's connection was not closed (child status %d)",
		       st);
	T_ASSERT_EQ(fab_accept(b, 0, 300, &link, priv, &plen), -EAGAIN);

	/* the control: the same child as our own user is held for fab_accept() */
	s.setuid_to = -1;
	{
		pid_t pid = t_spawn(stranger_main, &s, &ch);

		T_ASSERT_OK(fab_accept(b, 0, 5000, &link, priv, &plen));
		T_ASSERT_OK(fab_link_close(link));
		st = t_reap(pid, 10000);
		t_chan_close(&ch);
		T_ASSERT_EQ(st, 0); /* refused when we closed the held link */
	}
	printf("other user: refused at once, nothing to accept; our own user held: ok\n");
}

static void test_forged_keys(struct fab *a, struct fab *b)
{
	uint8_t *tgt = t_alloc(LEN), *loc = t_alloc(LEN), zero[LEN];
	struct fab_mr *tmr, *lmr;
	struct fab_link *la, *lb;
	uint32_t forged[2];
	int n = 0;

	tmr = t_mr_reg(b, tgt, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE |
	                   FAB_ACCESS_REMOTE_ATOMIC);
	lmr = t_mr_reg(a, loc, LEN, FAB_ACCESS_LOCAL_WRITE);
	memset(zero, 0, sizeof(zero));
	memset(loc, 0x77, LEN);
	forged[0] = tmr->rkey ^ (1u << 20); /* same slot, another generation */
	forged[1] = (tmr->rkey & ~0xfffu) | ((tmr->rkey + 1) & 0xfff); /* another slot */
	for (int k = 0; k < 2; k++) {
		for (int op = 0; op < 4; op++) {
			struct fab_wr wr;
			uint64_t wrid = 0x100 + (uint64_t)n++;

			t_pair(a, b, 1, 2, &la, &lb);
			if (op == 0)
				wr = t_wr_rdma(FAB_OP_WRITE, wrid, 0, loc, 64, lmr->lkey,
				               (uintptr_t)tgt, forged[k]);
			else if (op == 1)
				wr = t_wr_rdma(FAB_OP_READ, wrid, 0, loc, 64, lmr->lkey,
				               (uintptr_t)tgt, forged[k]);
			else if (op == 2)
				wr = t_wr_cas(wrid, 0, (uint64_t *)loc, lmr->lkey, (uintptr_t)tgt,
				              forged[k], 0, 0x1234);
			else
				wr = t_wr_faa(wrid, 0, (uint64_t *)loc, lmr->lkey, (uintptr_t)tgt,
				              forged[k], 5);
			T_ASSERT_EQ(t_run(la, &wr), -EACCES);
			T_ASSERT_OK(fab_link_close(la));
			T_ASSERT_OK(fab_link_close(lb));
			while (fab_poll(b, &(struct fab_wc){0}, 1) > 0)
				;
		}
	}
	if (!t_mem_equal(tgt, zero, LEN, "target region after forged keys"))
		T_FAIL("a request with a forged key changed the target");
	/* the real key works on a fresh link: the refusals were the keys' */
	t_pair(a, b, 1, 2, &la, &lb);
	T_ASSERT_OK(t_run(la, &(struct fab_wr){.wrid = 0x999,
	                                       .opcode = FAB_OP_WRITE,
	                                       .local = loc,
	                                       .len = 64,
	                                       .lkey = lmr->lkey,
	                                       .remote_addr = (uintptr_t)tgt,
	                                       .rkey = tmr->rkey}));
	T_ASSERT_EQ(tgt[0], 0x77);
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(tmr));
	T_ASSERT_OK(fab_mr_dereg(lmr));
	printf("forged keys: %d requests -EACCES, target untouched, the real key works: ok\n", n);
}

static void test_sealed_table(struct fab *b)
{
	struct shm_fab *f = to_shm_fab(b);
	size_t len = sizeof(struct shm_fpage);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fpage_fd, 0);

	if (p != MAP_FAILED)
		T_FAIL("the key table could be mapped writable");
	T_ASSERT_EQ(errno, EPERM);
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, f->fpage_fd, 0);
	T_ASSERT(p != MAP_FAILED);
	T_ASSERT(mprotect(p, len, PROT_READ | PROT_WRITE) != 0);
	munmap(p, len);
	printf("key table: no writable mapping (EPERM), no mprotect to writable: ok\n");
}

int main(void)
{
	struct fab *a, *b;

	t_init("shm-strangers", 60);
	if (strcmp(t_provider(), "shm") != 0)
		t_skip("shm only");
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	test_other_user(b);
	test_forged_keys(a, b);
	test_sealed_table(b);
	fab_close(a);
	fab_close(b);
	printf("shm-strangers: PASS\n");
	return T_EXIT_PASS;
}
