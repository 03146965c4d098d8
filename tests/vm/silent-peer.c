/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * silent-peer.c -- a peer that stops answering fails the link's outstanding
 * and later requests with -ETIMEDOUT within fab_attr.timeout_ms, and the
 * peer's end goes down too (DESIGN §3, fabric.h). The dead-peer test
 * silences a peer with SIGSTOP, which only silences tcp; on verbs the NIC
 * (here rdma_rxe in the kernel) keeps answering for a stopped process. So
 * this test drops every packet side B sends (tc netem loss 100% on veth1).
 *
 * Runs only inside the VM of tests/vm/run-in-rxe-vm.sh (RXE_VM=1, root),
 * side A on rxe0 and side B on rxe1; elsewhere it exits 77.
 *
 * 1. A (timeout_ms 800) READs, WRITEs, CASes and FAAs to B, signaled and
 *    not, while B's packets are dropped: every request completes, the
 *    first with -ETIMEDOUT, no sooner than timeout_ms / 2 after posting
 *    and no later than timeout_ms + 3 s; the others -ETIMEDOUT or
 *    -ECANCELED; fab_link_state() is -ETIMEDOUT; later requests fail too.
 * 2. A's end disconnects: B's link goes down (-ECONNRESET) within 5 s.
 * 3. Once the packets flow again, a new link between the same fabs works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#define TIMEOUT 800 /* ms: A's fab_attr.timeout_ms */
#define NREQ    7
#define BUF     65536u
#define CUT     "tc qdisc add dev veth1 root netem loss 100%"
#define UNCUT   "tc qdisc del dev veth1 root"

/*
 * guard -- a child that restores the link when this process ends, however
 * it ends (t_fail_at() exits at once): it waits for EOF on a pipe whose
 * write end only this process holds, runs UNCUT and exits by itself.
 */
static pid_t guard(int *wfd)
{
	int p[2];
	pid_t pid;

	T_ASSERT(pipe(p) == 0);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		char c;

		close(p[1]);
		while (read(p[0], &c, 1) > 0)
			;
		if (system(UNCUT " 2>/dev/null") < 0)
			_exit(1);
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

static void collect(struct fab *fab, uint64_t first, int n, int64_t t_post, bool strict,
                    const char *what)
{
	bool seen[NREQ] = {false};
	char s[256];

	for (int got = 0; got < n; got++) {
		int64_t left = t_post + TIMEOUT + 3000 - t_now_ms();
		struct fab_wc wc;

		if (left < 0 || t_poll_one(fab, &wc, (int)left) != 0)
			T_FAIL("%s: only %d of %d requests completed in time", what, got, n);
		if (wc.wrid < first || wc.wrid >= first + (uint64_t)n || seen[wc.wrid - first])
			T_FAIL("%s: unexpected completion %s", what, t_wc_str(&wc, s, sizeof(s)));
		seen[wc.wrid - first] = true;
		if (got == 0) {
			int64_t ms = t_now_ms() - t_post;

			printf("%s: first error %lld ms after posting (timeout_ms %d)\n", what,
			       (long long)ms, TIMEOUT);
			if (strict && wc.status != -ETIMEDOUT)
				T_FAIL("%s: first completion %s, expected -ETIMEDOUT", what,
				       t_wc_str(&wc, s, sizeof(s)));
			if (strict && ms < TIMEOUT / 2)
				T_FAIL("%s: timed out after %lld ms, well before %d ms", what,
				       (long long)ms, TIMEOUT);
		}
		if (wc.status != -ETIMEDOUT && wc.status != -ECANCELED)
			T_FAIL("%s: completion %s, expected -ETIMEDOUT or -ECANCELED", what,
			       t_wc_str(&wc, s, sizeof(s)));
	}
	T_EXPECT_NONE(fab, 50);
}

int main(void)
{
	struct fab_attr attr = {.timeout_ms = TIMEOUT};
	struct fab *a, *b;
	struct fab_link *la, *lb;
	struct fab_mr *ma, *mb;
	uint8_t *local = t_alloc(BUF), *remote = t_alloc(BUF);
	uint64_t *res = (uint64_t *)(local + BUF - 64), wrid = 1, first;
	struct fab_wr wr[NREQ];
	int64_t t_post, t0;
	pid_t gpid;
	int gfd, st, n = 0;

	t_init("silent-peer", 60);
	if (getenv("RXE_VM") == NULL || geteuid() != 0)
		t_skip("needs the Soft-RoCE VM of tests/vm (it drops a veth's packets)");
	if (system("modprobe sch_netem 2>/dev/null") != 0)
		printf("modprobe sch_netem failed; trying tc anyway\n");
	gpid = guard(&gfd);

	a = t_fab_open(&attr); /* side A: rxe0 */
	b = t_fab_open(NULL);  /* side B: rxe1 */
	t_pair(a, b, 1, 2, &la, &lb);
	ma = t_mr_reg(a, local, BUF, FAB_ACCESS_LOCAL_WRITE);
	mb = t_mr_reg(b, remote, BUF,
	              FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE |
	                  FAB_ACCESS_REMOTE_ATOMIC);
	wr[0] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, local, 4096, ma->lkey,
	                  (uintptr_t)remote, mb->rkey);
	T_ASSERT_EQ(t_run(la, &wr[0]), 0);

	/* 1. B goes silent */
	T_ASSERT_EQ(system(CUT), 0);
	first = wrid;
	for (int i = 0; i < 3; i++)
		wr[n++] =
		    t_wr_rdma(FAB_OP_READ, wrid++, i == 1 ? 0 : FAB_WR_SIGNALED, local + i * 4096,
		              4096, ma->lkey, (uintptr_t)remote + i * 4096, mb->rkey);
	wr[n++] = t_wr_rdma(FAB_OP_WRITE, wrid++, 0, local + 16384, 8192, ma->lkey,
	                    (uintptr_t)remote + 16384, mb->rkey);
	wr[n++] = t_wr_faa(wrid++, FAB_WR_SIGNALED, &res[0], ma->lkey, (uintptr_t)remote + 32768,
	                   mb->rkey, 1);
	wr[n++] = t_wr_cas(wrid++, 0, &res[1], ma->lkey, (uintptr_t)remote + 32776, mb->rkey, 0, 1);
	wr[n++] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, local + 24576, 64, ma->lkey,
	                    (uintptr_t)remote + 24576, mb->rkey);
	T_ASSERT_EQ(n, NREQ);
	t_post = t_now_ms();
	T_ASSERT_OK(fab_post(la, wr, 2));
	T_ASSERT_OK(fab_post(la, wr + 2, NREQ - 2));
	collect(a, first, NREQ, t_post, true, "silent peer");
	T_ASSERT_ERR(fab_link_state(la), -ETIMEDOUT);

	first = wrid;
	for (int i = 0; i < 2; i++) {
		wr[i] = t_wr_rdma(i ? FAB_OP_WRITE : FAB_OP_READ, wrid++, i ? 0 : FAB_WR_SIGNALED,
		                  local, 64, ma->lkey, (uintptr_t)remote, mb->rkey);
		T_ASSERT_OK(fab_post(la, &wr[i], 1));
	}
	collect(a, first, 2, t_now_ms(), false, "silent peer, later");

	/* 2. the silent side learns it too: A disconnected */
	t0 = t_now_ms();
	while (fab_link_state(lb) == 0 && t_now_ms() - t0 < 5000)
		t_sleep_ms(10);
	T_ASSERT_ERR(fab_link_state(lb), -ECONNRESET);
	printf("the silent side's link went down (-ECONNRESET) %lld ms after A's timeout\n",
	       (long long)(t_now_ms() - t0));

	/* 3. the packets flow again: a new link works */
	T_ASSERT_EQ(system(UNCUT), 0);
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	t_pair(a, b, 3, 4, &la, &lb);
	wr[0] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, local, 4096, ma->lkey,
	                  (uintptr_t)remote, mb->rkey);
	T_ASSERT_EQ(t_run(la, &wr[0]), 0);
	printf("a new link after the cut: ok\n");

	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	/* flushed completions of the closed links may still be polled: drain them */
	for (struct fab_wc wc; t_poll_one(a, &wc, 50) == 0;)
		;
	T_ASSERT_OK(fab_mr_dereg(ma));
	T_ASSERT_OK(fab_mr_dereg(mb));
	fab_close(a);
	fab_close(b);
	close(gfd);
	T_ASSERT_EQ(waitpid(gpid, &st, 0), gpid);
	t_free(local, BUF);
	t_free(remote, BUF);
	printf("silent-peer: PASS\n");
	return T_EXIT_PASS;
}
