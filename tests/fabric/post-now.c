/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * post-now.c -- fab_post_now() (fabric.h): a request either executes in
 * the calling thread, complete when the call returns and with no
 * completion after it, or is refused with -EWOULDBLOCK and nothing
 * happened. shm must execute (the initiator does the work there); tcp and
 * verbs never do.
 *
 * 1. WRITE (signaled and not, inline and not), READ, CAS and FAA from A
 *    into B: on 0 the status is 0 and the target (or the READ's buffer,
 *    the atomic's old value) is right at return, and no completion comes;
 *    on -EWOULDBLOCK nothing changed and no completion comes either.
 * 2. Requests keep their order (shm): a SEND waits at A for a RECV at B;
 *    a WRITE behind it is refused (-EWOULDBLOCK) and leaves B alone; once
 *    B posts the RECV and the SEND completes, the next one executes.
 * 2b. An inline WRITE above max_inline runs here when the provider
 *    executes (nothing is left to copy), on a buffer overwritten at once;
 *    refused (-EWOULDBLOCK) it is -EMSGSIZE at fab_post(), as it is behind
 *    the waiting SEND of 2, and nothing lands.
 * 3. A request fab_post() refuses is refused here too (an inline READ:
 *    -EINVAL; -EWOULDBLOCK from a provider that never executes), with
 *    nothing done.
 * 4. An execution error (shm: an unknown rkey) returns 0 with the status
 *    a completion would carry (-EACCES); no completion follows, and the
 *    link is down (fab_link_state()) as after such a completion. A request
 *    on a link that is down is not executed (-EWOULDBLOCK: fab_post()
 *    completes it with the link's error).
 * 5. A key the target removes after an access is refused at the next one
 *    (shm keeps the key entry it found last and must notice it went):
 *    WRITE into a region, deregister it at the target, WRITE again with
 *    its rkey: -EACCES, nothing lands, the link is down.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define LEN 4096
#define TMO 5000

static struct fab *a, *b;
static struct fab_link *la, *lb;
static struct fab_mr *amr, *bmr;
static uint64_t *abuf, *bbuf;
static bool must; /* the provider must execute (shm) */
static unsigned ran, refused;

/* now -- fab_post_now(@wr) on la: 1 executed (status 0), 0 refused; fails otherwise. */
static int now(const struct fab_wr *wr)
{
	int status = 12345, ret = fab_post_now(la, wr, &status);

	if (ret == -EWOULDBLOCK) {
		if (must)
			T_FAIL("%s: fab_post_now refused a request on an idle link", t_provider());
		T_ASSERT_EQ(status, 12345); /* not written */
		refused++;
		return 0;
	}
	T_ASSERT_OK(ret);
	T_ASSERT_OK(status);
	ran++;
	return 1;
}

static void ops(void)
{
	uint64_t src[8], old;
	struct fab_wr wr;

	for (int i = 0; i < 8; i++)
		src[i] = 0x1000 + (uint64_t)i;
	memcpy(abuf, src, sizeof(src));
	memset(bbuf, 0, LEN);

	/* WRITE, signaled: executed means there now, and no completion */
	wr = t_wr_rdma(FAB_OP_WRITE, 1, FAB_WR_SIGNALED, abuf, 64, amr->lkey, (uintptr_t)bbuf,
	               bmr->rkey);
	if (now(&wr))
		T_ASSERT(memcmp(bbuf, src, 64) == 0);
	else
		T_ASSERT_EQ(bbuf[0], 0);
	/* inline, unsignaled, from a buffer overwritten at once */
	wr =
	    t_wr_rdma(FAB_OP_WRITE, 2, FAB_WR_INLINE, src, 16, 0, (uintptr_t)(bbuf + 8), bmr->rkey);
	if (now(&wr)) {
		src[0] = 0xdead;
		T_ASSERT_EQX(bbuf[8], 0x1000);
		T_ASSERT_EQX(bbuf[9], 0x1001);
	}
	/* READ back into A */
	bbuf[16] = 0xfeed;
	abuf[16] = 0;
	wr = t_wr_rdma(FAB_OP_READ, 3, FAB_WR_SIGNALED, abuf + 16, 8, amr->lkey,
	               (uintptr_t)(bbuf + 16), bmr->rkey);
	if (now(&wr))
		T_ASSERT_EQX(abuf[16], 0xfeed);
	else
		T_ASSERT_EQX(abuf[16], 0);
	/* CAS and FAA: the old value lands at A */
	bbuf[24] = 7;
	abuf[24] = 0;
	wr = t_wr_cas(4, FAB_WR_SIGNALED, abuf + 24, amr->lkey, (uintptr_t)(bbuf + 24), bmr->rkey,
	              7, 9);
	if (now(&wr)) {
		T_ASSERT_EQX(abuf[24], 7);
		T_ASSERT_EQX(bbuf[24], 9);
	} else {
		T_ASSERT_EQX(bbuf[24], 7);
	}
	old = bbuf[24];
	wr = t_wr_faa(5, 0, abuf + 25, amr->lkey, (uintptr_t)(bbuf + 24), bmr->rkey, 5);
	if (now(&wr)) {
		T_ASSERT_EQX(abuf[25], old);
		T_ASSERT_EQX(bbuf[24], old + 5);
	} else {
		T_ASSERT_EQX(bbuf[24], old);
	}
	T_EXPECT_NONE(a, 50); /* executed or refused: no completion either way */
	printf("post-now: %u requests executed at post, %u refused (%s): ok\n", ran, refused,
	       t_provider());
}

/*
 * big_inline -- an inline WRITE of 4 x max_inline bytes: executed now
 * (shm), or refused here and by fab_post(); @queued: a SEND waits ahead
 * of it, so it must not run now on any provider.
 */
static void big_inline(bool queued)
{
	uint32_t len = 4 * a->attr.max_inline;
	uint8_t *src = t_alloc(len), *dst = (uint8_t *)bbuf + LEN / 2;
	struct fab_wr wr =
	    t_wr_rdma(FAB_OP_WRITE, 85, FAB_WR_INLINE, src, len, 0, (uintptr_t)dst, bmr->rkey);
	int status = 12345, ret;

	T_ASSERT(len <= LEN / 2);
	memset(src, 0xa5, len);
	memset(dst, 0, len);
	ret = fab_post_now(la, &wr, &status);
	if (ret == 0) {
		T_ASSERT(ran > 0 && !queued); /* a provider that executes (ops()) */
		memset(src, 0x11, len);       /* landed already: the buffer is free */
		T_ASSERT_OK(status);
		T_ASSERT(dst[0] == 0xa5 && dst[len - 1] == 0xa5);
		T_ASSERT(memchr(dst, 0, len) == NULL);
	} else {
		T_ASSERT_ERR(ret, -EWOULDBLOCK);
		T_ASSERT(ran == 0 || queued);
		T_ASSERT_EQ(status, 12345);
		T_ASSERT_ERR(fab_post(la, &wr, 1), -EMSGSIZE);
		T_ASSERT_EQ(dst[0], 0);
	}
	T_EXPECT_NONE(a, 20);
	t_free(src, len);
	printf("post-now: an inline WRITE of %u bytes (max_inline %u)%s: %s: ok\n", len,
	       a->attr.max_inline, queued ? " behind a SEND" : "", ret == 0 ? "ran" : "refused");
}

/* order -- shm: a WRITE behind a SEND waiting for its RECV is refused, then runs. */
static void order(void)
{
	struct fab_recv_wr rw = {.wrid = 70, .local = bbuf + 64, .len = 64, .lkey = bmr->lkey};
	struct fab_wr send, wr;
	int status = 0;

	abuf[32] = 0x5e;
	send = t_wr_rdma(FAB_OP_SEND, 60, FAB_WR_SIGNALED, abuf + 32, 8, amr->lkey, 0, 0);
	T_ASSERT_OK(fab_post(la, &send, 1)); /* no RECV at B yet: it waits at A */
	bbuf[40] = 0;
	abuf[40] = 0x77;
	wr = t_wr_rdma(FAB_OP_WRITE, 61, 0, abuf + 40, 8, amr->lkey, (uintptr_t)(bbuf + 40),
	               bmr->rkey);
	T_ASSERT_ERR(fab_post_now(la, &wr, &status), -EWOULDBLOCK);
	T_ASSERT_EQ(bbuf[40], 0);
	big_inline(true);
	T_ASSERT_OK(fab_post_recv(lb, &rw, 1));
	T_EXPECT_WC(a, 60, FAB_OP_SEND, 0, TMO, NULL);
	T_EXPECT_WC(b, 70, FAB_OP_RECV, 0, TMO, NULL);
	T_ASSERT_OK(fab_post_now(la, &wr, &status));
	T_ASSERT_OK(status);
	T_ASSERT_EQX(bbuf[40], 0x77);
	printf("post-now: a WRITE behind a waiting SEND is refused, then runs: ok\n");
}

/* invalid -- an inline READ is refused as fab_post() refuses it. */
static void invalid(void)
{
	struct fab_wr wr =
	    t_wr_rdma(FAB_OP_READ, 80, FAB_WR_INLINE, abuf, 8, 0, (uintptr_t)bbuf, bmr->rkey);
	int status = 12345;

	T_ASSERT_ERR(fab_post_now(la, &wr, &status), ran > 0 ? -EINVAL : -EWOULDBLOCK);
	T_ASSERT_EQ(status, 12345);
	T_ASSERT_ERR(fab_post(la, &wr, 1), -EINVAL);
	T_EXPECT_NONE(a, 20);
	printf("post-now: an invalid request is refused, nothing done: ok\n");
}

/* failure -- shm: an unknown rkey: status -EACCES, no completion, the link down. */
static void failure(void)
{
	struct fab_wr wr = t_wr_rdma(FAB_OP_WRITE, 90, FAB_WR_SIGNALED, abuf, 8, amr->lkey,
	                             (uintptr_t)bbuf, bmr->rkey ^ 0x5a5a0000u);
	int status = 0;

	bbuf[0] = 0x0dd;
	T_ASSERT_OK(fab_post_now(la, &wr, &status));
	T_ASSERT_ERR(status, -EACCES);
	T_ASSERT_EQX(bbuf[0], 0x0dd);
	T_EXPECT_NONE(a, 20);
	T_ASSERT_ERR(fab_link_state(la), -EACCES);
	wr.rkey = bmr->rkey;
	T_ASSERT_ERR(fab_post_now(la, &wr, &status), -EWOULDBLOCK);
	T_ASSERT_OK(fab_post(la, &wr, 1));
	T_EXPECT_WC(a, 90, FAB_OP_WRITE, -ECANCELED, TMO, NULL);
	T_ASSERT_EQX(bbuf[0], 0x0dd);
	printf("post-now: a failed execution returns its status, takes the link down: ok\n");
}

/* stale -- shm: a WRITE with the rkey of a region deregistered after a WRITE into it is refused. */
static void stale(void)
{
	struct fab *c = t_fab_open(NULL), *d = t_fab_open(NULL);
	uint64_t *cbuf = t_alloc(LEN), *dbuf = t_alloc(LEN);
	struct fab_mr *cmr = t_mr_reg(c, cbuf, LEN, FAB_ACCESS_LOCAL_WRITE);
	struct fab_mr *dmr =
	    t_mr_reg(d, dbuf, LEN, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	struct fab_link *lc, *ld;
	struct fab_wr wr;
	int status = 12345;

	t_pair(c, d, 3, 4, &lc, &ld);
	cbuf[0] = 0x5eed;
	wr = t_wr_rdma(FAB_OP_WRITE, 95, 0, cbuf, 8, cmr->lkey, (uintptr_t)dbuf, dmr->rkey);
	T_ASSERT_OK(fab_post_now(lc, &wr, &status));
	T_ASSERT_OK(status);
	T_ASSERT_EQX(dbuf[0], 0x5eed);
	T_ASSERT_OK(fab_mr_dereg(dmr));
	cbuf[0] = 0xbad;
	T_ASSERT_OK(fab_post_now(lc, &wr, &status));
	T_ASSERT_ERR(status, -EACCES);
	T_ASSERT_EQX(dbuf[0], 0x5eed);
	T_ASSERT_ERR(fab_link_state(lc), -EACCES);
	T_EXPECT_NONE(c, 20);
	fab_link_close(lc);
	fab_link_close(ld);
	T_ASSERT_OK(fab_mr_dereg(cmr));
	fab_close(c);
	fab_close(d);
	t_free(cbuf, LEN);
	t_free(dbuf, LEN);
	printf("post-now: a key removed after an access is refused at the next one: ok\n");
}

int main(void)
{
	t_init("post-now", 60);
	must = strcmp(t_provider(), "shm") == 0;
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(LEN);
	bbuf = t_alloc(LEN);
	amr = t_mr_reg(a, abuf, LEN, FAB_ACCESS_LOCAL_WRITE);
	bmr = t_mr_reg(b, bbuf, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE |
	                   FAB_ACCESS_REMOTE_ATOMIC);
	t_pair(a, b, 1, 2, &la, &lb);

	ops();
	big_inline(false);
	invalid();
	if (ran > 0) {
		order();
		failure();
		stale();
	} else {
		printf("post-now: %s never executes at post: ordering and failures not "
		       "applicable\n",
		       t_provider());
	}
	fab_link_close(la);
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, LEN);
	t_free(bbuf, LEN);
	printf("post-now: PASS\n");
	return T_EXIT_PASS;
}
