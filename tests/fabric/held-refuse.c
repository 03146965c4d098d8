/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * held-refuse.c -- a held link that is not admitted is refused, and its
 * connector learns it (fab_accept() in fabric.h).
 *
 * 1. fab_link_close() of a held link: the connector's fab_connect() fails
 *    with -ECONNREFUSED, well within its own bound; the acceptor's region
 *    is untouched.
 * 2. A held link neither admitted nor closed: the provider refuses it
 *    after its bound (max(2 s, timeout_ms)): fab_connect() fails with
 *    -ECONNREFUSED, fab_link_state() and fab_link_admit() report
 *    -ETIMEDOUT, and fab_link_close() still frees it.
 * 3. A link nobody accepts: refused after the same bound and dropped from
 *    the accept queue (fab_accept() then finds nothing).
 */
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define LEN  4096
#define HOLD 2000 /* ms: the providers' bound for the default timeout_ms */
#define TMO  10000

static struct fab *a, *b;
static uint8_t *abuf;

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void start(struct t_connect_async *c)
{
	static const char hello[] = "held-refuse";

	*c = (struct t_connect_async){
	    .fab = b, .ctx = 5, .priv = hello, .priv_len = sizeof(hello), .timeout_ms = TMO};
	T_ASSERT_OK(fab_get_addr(a, &c->addr));
	t_connect_start(c);
}

static void close_refuses(void)
{
	struct t_connect_async c;
	struct fab_link *held;
	int64_t t0;

	start(&c);
	held = t_accept_held(a, 1, TMO, NULL, NULL);
	t_sleep_ms(100);
	T_ASSERT(!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE));
	t0 = t_now_ms();
	T_ASSERT_OK(fab_link_close(held));
	T_ASSERT_ERR(t_connect_join(&c), -ECONNREFUSED);
	T_ASSERT(c.link == NULL);
	T_ASSERT(t_now_ms() - t0 < HOLD);
	T_ASSERT(all_zero(abuf, LEN));
	printf("close of a held link: fab_connect -ECONNREFUSED after %lld ms, memory "
	       "untouched: ok\n",
	       (long long)(t_now_ms() - t0));
}

static void bound_refuses(void)
{
	struct t_connect_async c;
	struct fab_link *held;
	int64_t t0 = t_now_ms(), dt;

	start(&c);
	held = t_accept_held(a, 2, TMO, NULL, NULL);
	T_ASSERT_ERR(t_connect_join(&c), -ECONNREFUSED);
	dt = t_now_ms() - t0;
	if (dt < HOLD - 100 || dt > HOLD + 5000)
		T_FAIL("the held link was refused after %lld ms, expected ~%d", (long long)dt,
		       HOLD);
	for (int i = 0; i < 100 && fab_link_state(held) == 0; i++)
		t_sleep_ms(20);
	T_ASSERT_ERR(fab_link_state(held), -ETIMEDOUT);
	T_ASSERT_ERR(fab_link_admit(held), -ETIMEDOUT);
	T_ASSERT_OK(fab_link_close(held));
	T_ASSERT(all_zero(abuf, LEN));
	printf("held link not admitted: refused after %lld ms, state -ETIMEDOUT: ok\n",
	       (long long)dt);
}

static void unaccepted_refused(void)
{
	struct t_connect_async c;
	struct fab_link *l = NULL;
	uint8_t priv[FAB_PRIV_MAX];
	size_t plen;
	int64_t t0 = t_now_ms(), dt;

	start(&c);
	T_ASSERT_ERR(t_connect_join(&c), -ECONNREFUSED);
	dt = t_now_ms() - t0;
	if (dt < HOLD - 100 || dt > HOLD + 5000)
		T_FAIL("the unaccepted link was refused after %lld ms, expected ~%d", (long long)dt,
		       HOLD);
	t_sleep_ms(100);
	plen = sizeof(priv);
	T_ASSERT_ERR(fab_accept(a, 0, 0, &l, priv, &plen), -EAGAIN);
	printf("link nobody accepted: refused after %lld ms, gone from the accept queue: ok\n",
	       (long long)dt);
}

int main(void)
{
	struct fab_mr *amr;

	t_init("held-refuse", 90);
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(LEN);
	memset(abuf, 0, LEN);
	amr = t_mr_reg(a, abuf, LEN,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_READ);

	close_refuses();
	bound_refuses();
	unaccepted_refused();

	T_ASSERT_OK(fab_mr_dereg(amr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, LEN);
	printf("held-refuse: PASS\n");
	return T_EXIT_PASS;
}
