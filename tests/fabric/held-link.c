/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * held-link.c -- a link is held until the acceptor admits it (fab_accept()
 * in fabric.h): the connector's fab_connect() does not return before
 * fab_link_admit(), and once it returned, requests work both ways.
 *
 * 1. b's connect to a runs on a thread; a takes the link with fab_accept()
 *    (the connector's private data arrives) and waits 500 ms: the connect
 *    has not returned.
 * 2. fab_link_peer() on the held link names the connector's IP address.
 * 3. fab_link_admit(): the connect returns 0 within its bound.
 * 4. WRITE and READ from the connector to the acceptor's region, and a
 *    WRITE back the other way, complete and move the bytes.
 * 5. fab_link_admit() again is harmless (0).
 */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define LEN 4096
#define TMO 10000

int main(void)
{
	static const char hello[] = "held-link";
	struct t_connect_async c = {
	    .ctx = 7, .priv = hello, .priv_len = sizeof(hello), .timeout_ms = TMO};
	struct fab *a, *b;
	struct fab_mr *amr, *bmr;
	struct fab_link *held;
	struct fab_addr peer, baddr;
	uint8_t *abuf, *bbuf, priv[FAB_PRIV_MAX];
	size_t plen = 0;
	int64_t t0;

	t_init("held-link", 60);
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(LEN);
	bbuf = t_alloc(LEN);
	amr = t_mr_reg(a, abuf, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);
	bmr = t_mr_reg(b, bbuf, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);

	/* 1. the connect waits while the link is held */
	c.fab = b;
	T_ASSERT_OK(fab_get_addr(a, &c.addr));
	t_connect_start(&c);
	held = t_accept_held(a, 9, TMO, priv, &plen);
	T_ASSERT_EQ(plen, sizeof(hello));
	T_ASSERT(memcmp(priv, hello, plen) == 0);
	t_sleep_ms(500);
	if (__atomic_load_n(&c.done, __ATOMIC_ACQUIRE))
		T_FAIL("fab_connect returned %d (%s) before the link was admitted", c.ret,
		       t_errname(c.ret));
	T_ASSERT_OK(fab_link_state(held));
	printf("held: fab_connect still waiting 500 ms after fab_accept: ok\n");

	/* 2. the peer's real address */
	T_ASSERT_OK(fab_link_peer(held, &peer));
	T_ASSERT_OK(fab_get_addr(b, &baddr));
	T_ASSERT_EQ(peer.ss.ss_family, AF_INET);
	T_ASSERT_EQX(((struct sockaddr_in *)&peer.ss)->sin_addr.s_addr,
	             ((struct sockaddr_in *)&baddr.ss)->sin_addr.s_addr);
	printf("fab_link_peer names the connector's address: ok\n");

	/* 3. admission lets the connect return */
	t0 = t_now_ms();
	T_ASSERT_OK(fab_link_admit(held));
	if (t_connect_join(&c) != 0)
		T_FAIL("fab_connect returned %d (%s) after admission", c.ret, t_errname(c.ret));
	T_ASSERT(t_now_ms() - t0 < TMO);
	T_ASSERT_EQX(c.link->ctx, 7);
	printf("admit: fab_connect returned 0 after %lld ms: ok\n", (long long)(t_now_ms() - t0));

	/* 4. requests work both ways */
	t_fill(bbuf, 256, 11);
	T_ASSERT_OK(t_run(c.link, &(struct fab_wr){.wrid = 1,
	                                           .opcode = FAB_OP_WRITE,
	                                           .local = bbuf,
	                                           .len = 256,
	                                           .lkey = bmr->lkey,
	                                           .remote_addr = (uintptr_t)abuf,
	                                           .rkey = amr->rkey}));
	T_ASSERT(t_mem_equal(abuf, bbuf, 256, "WRITE connector -> acceptor"));
	t_fill(abuf + 1024, 512, 12);
	T_ASSERT_OK(t_run(c.link, &(struct fab_wr){.wrid = 2,
	                                           .opcode = FAB_OP_READ,
	                                           .local = bbuf + 1024,
	                                           .len = 512,
	                                           .lkey = bmr->lkey,
	                                           .remote_addr = (uintptr_t)(abuf + 1024),
	                                           .rkey = amr->rkey}));
	T_ASSERT(t_mem_equal(bbuf + 1024, abuf + 1024, 512, "READ by the connector"));
	t_fill(abuf + 2048, 128, 13);
	T_ASSERT_OK(t_run(held, &(struct fab_wr){.wrid = 3,
	                                         .opcode = FAB_OP_WRITE,
	                                         .local = abuf + 2048,
	                                         .len = 128,
	                                         .lkey = amr->lkey,
	                                         .remote_addr = (uintptr_t)(bbuf + 2048),
	                                         .rkey = bmr->rkey}));
	T_ASSERT(t_mem_equal(bbuf + 2048, abuf + 2048, 128, "WRITE acceptor -> connector"));
	printf("admitted link: WRITE and READ both ways: ok\n");

	/* 5. admitting twice is harmless */
	T_ASSERT_OK(fab_link_admit(held));

	T_ASSERT_OK(fab_link_close(c.link));
	T_ASSERT_OK(fab_link_close(held));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, LEN);
	t_free(bbuf, LEN);
	printf("held-link: PASS\n");
	return T_EXIT_PASS;
}
