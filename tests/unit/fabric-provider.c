/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fabric-provider.c -- what the providers share (provider.h): the accept
 * queue, the argument checks, CQ credits and the small helpers
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "keytab.h"
#include "provider.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define ACC_ALL  15u

/* A provider's link as the accept queue sees it. */
struct test_link {
	struct fab_link base;
	struct fab_pending pending;
};

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fab_acceptq q;
	struct test_link links[3];
};

static void queue_init(struct queue *qu)
{
	memset(qu, 0, sizeof(*qu));
	pthread_mutex_init(&qu->lock, NULL);
	pthread_cond_init(&qu->cond, NULL);
	fab_acceptq_init(&qu->q, &qu->lock, &qu->cond);
	for (unsigned i = 0; i < NELEM(qu->links); i++) {
		struct fab_pending *p = &qu->links[i].pending;

		qu->links[i].base.id = 100 + i;
		/* i + 1 bytes of private data, each i */
		memset(p->priv, (int)i, i + 1);
		p->priv_len = i + 1;
	}
}

static void queue_push(struct queue *qu, unsigned i)
{
	pthread_mutex_lock(&qu->lock);
	fab_acceptq_push(&qu->q, &qu->links[i].pending, &qu->links[i].base);
	pthread_mutex_unlock(&qu->lock);
}

static void queue_fini(struct queue *qu)
{
	pthread_cond_destroy(&qu->cond);
	pthread_mutex_destroy(&qu->lock);
}

static void acceptq__empty_is_eagain(void **state)
{
	struct queue qu;
	struct fab_link *out = (struct fab_link *)&qu;
	size_t plen = 99;

	(void)state;
	/* configure */
	queue_init(&qu);

	/* run + verify: no wait, then a short one; outputs untouched */
	assert_false(fab_acceptq_ready(&qu.q));
	assert_int_equal(fab_acceptq_accept(&qu.q, 1, 0, &out, NULL, &plen), -EAGAIN);
	assert_int_equal(fab_acceptq_accept(&qu.q, 1, 20, &out, NULL, &plen), -EAGAIN);
	assert_ptr_equal(out, (struct fab_link *)&qu);
	assert_int_equal(plen, 99);
	queue_fini(&qu);
}

static void acceptq__null_out_is_einval(void **state)
{
	struct queue qu;

	(void)state;
	/* configure */
	queue_init(&qu);
	queue_push(&qu, 0);

	/* run + verify: the link stays queued */
	assert_int_equal(fab_acceptq_accept(&qu.q, 1, 0, NULL, NULL, NULL), -EINVAL);
	assert_true(fab_acceptq_ready(&qu.q));
	queue_fini(&qu);
}

static void acceptq__fifo_with_ctx_and_priv(void **state)
{
	struct queue qu;

	(void)state;
	/* configure */
	queue_init(&qu);
	for (unsigned i = 0; i < NELEM(qu.links); i++)
		queue_push(&qu, i);

	/* run + verify: in order, each with its ctx and private data */
	for (unsigned i = 0; i < NELEM(qu.links); i++) {
		uint8_t priv[FAB_PRIV_MAX], want[FAB_PRIV_MAX];
		struct fab_link *out = NULL;
		size_t plen = 0;

		assert_true(fab_acceptq_ready(&qu.q));
		memset(priv, 0xee, sizeof(priv));
		assert_int_equal(fab_acceptq_accept(&qu.q, 7 + i, 0, &out, priv, &plen), 0);
		assert_ptr_equal(out, &qu.links[i].base);
		assert_int_equal(out->ctx, 7 + i);
		assert_int_equal(plen, i + 1);
		memset(want, (int)i, i + 1);
		assert_memory_equal(priv, want, i + 1);
		assert_int_equal(priv[i + 1], 0xee);
	}
	assert_false(fab_acceptq_ready(&qu.q));

	/* the queue works again once emptied (its tail was reset) */
	queue_push(&qu, 1);
	{
		struct fab_link *out = NULL;

		assert_int_equal(fab_acceptq_accept(&qu.q, 0, 0, &out, NULL, NULL), 0);
		assert_ptr_equal(out, &qu.links[1].base);
	}
	queue_fini(&qu);
}

static void *push_later(void *arg)
{
	struct queue *qu = arg;

	usleep(20000);
	queue_push(qu, 2);
	return NULL;
}

static void acceptq__waiter_wakes_on_push(void **state)
{
	struct timespec t0, t1;
	struct fab_link *out = NULL;
	struct queue qu;
	pthread_t thr;

	(void)state;
	/* configure */
	queue_init(&qu);
	assert_int_equal(pthread_create(&thr, NULL, push_later, &qu), 0);

	/* run: wait forever, then with a bound far above the push's delay */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fab_acceptq_accept(&qu.q, 5, -1, &out, NULL, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(pthread_join(thr, NULL), 0);

	/* verify */
	assert_ptr_equal(out, &qu.links[2].base);
	assert_true(t1.tv_sec - t0.tv_sec < 10);
	assert_int_equal(pthread_create(&thr, NULL, push_later, &qu), 0);
	assert_int_equal(fab_acceptq_accept(&qu.q, 5, 10000, &out, NULL, NULL), 0);
	assert_int_equal(pthread_join(thr, NULL), 0);
	queue_fini(&qu);
}

static void mr_check__rules(void **state)
{
	static uint8_t buf[64];
	struct fab_mr *out;

	(void)state;
	/* run + verify */
	assert_int_equal(fab_mr_check(buf, sizeof(buf), ACC_ALL, &out), 0);
	assert_int_equal(fab_mr_check(buf, sizeof(buf), 0, &out), 0);
	assert_int_equal(fab_mr_check(buf, sizeof(buf), FAB_ACCESS_REMOTE_READ, &out), 0);
	assert_int_equal(fab_mr_check(NULL, sizeof(buf), ACC_ALL, &out), -EINVAL);
	assert_int_equal(fab_mr_check(buf, 0, ACC_ALL, &out), -EINVAL);
	assert_int_equal(fab_mr_check(buf, sizeof(buf), ACC_ALL, NULL), -EINVAL);
	assert_int_equal(fab_mr_check(buf, sizeof(buf), 16, &out), -EINVAL);
	/* the NIC writing into a region needs local write */
	assert_int_equal(fab_mr_check(buf, sizeof(buf), FAB_ACCESS_REMOTE_WRITE, &out), -EINVAL);
	assert_int_equal(fab_mr_check(buf, sizeof(buf), FAB_ACCESS_REMOTE_ATOMIC, &out), -EINVAL);
	assert_int_equal(
	    fab_mr_check(buf, sizeof(buf), FAB_ACCESS_REMOTE_ATOMIC | FAB_ACCESS_LOCAL_WRITE, &out),
	    0);
}

static void connect_check__rules(void **state)
{
	const uint8_t priv[FAB_PRIV_MAX + 1] = {0};
	struct fab_addr peer = {0};
	struct fab_link *out;

	(void)state;
	/* run + verify */
	assert_int_equal(fab_connect_check(&peer, NULL, 0, &out), 0);
	assert_int_equal(fab_connect_check(&peer, priv, FAB_PRIV_MAX, &out), 0);
	assert_int_equal(fab_connect_check(&peer, priv, FAB_PRIV_MAX + 1, &out), -EINVAL);
	assert_int_equal(fab_connect_check(&peer, NULL, 1, &out), -EINVAL);
	assert_int_equal(fab_connect_check(NULL, NULL, 0, &out), -EINVAL);
	assert_int_equal(fab_connect_check(&peer, NULL, 0, NULL), -EINVAL);
}

static void wr_check__rules(void **state)
{
	static uint64_t word;
	const struct {
		struct fab_wr wr;
		int want;
	} cases[] = {
	    {{.opcode = FAB_OP_WRITE, .local = &word, .len = 8}, 0},
	    {{.opcode = FAB_OP_WRITE, .len = 0}, 0},
	    {{.opcode = FAB_OP_WRITE, .len = 8}, -EINVAL}, /* no buffer */
	    {{.opcode = FAB_OP_READ, .local = &word, .len = 1000}, 0},
	    {{.opcode = FAB_OP_READ, .local = &word, .len = 1001}, -EINVAL}, /* > max_len */
	    {{.opcode = FAB_OP_SEND, .local = &word, .len = 100, .flags = FAB_WR_INLINE}, 0},
	    {{.opcode = FAB_OP_SEND, .local = &word, .len = 101, .flags = FAB_WR_INLINE},
	     -EMSGSIZE},
	    {{.opcode = FAB_OP_READ, .local = &word, .len = 8, .flags = FAB_WR_INLINE}, -EINVAL},
	    {{.opcode = FAB_OP_WRITE_IMM, .local = &word, .len = 8, .flags = 31}, 0},
	    {{.opcode = FAB_OP_WRITE_IMM, .local = &word, .len = 8, .flags = 32}, -EINVAL},
	    {{.opcode = FAB_OP_CAS, .local = &word, .len = 8, .remote_addr = 64}, 0},
	    {{.opcode = FAB_OP_FAA, .local = &word, .len = 8, .remote_addr = 65}, -EINVAL},
	    {{.opcode = FAB_OP_FAA, .local = &word, .len = 4, .remote_addr = 64}, -EINVAL},
	    {{.opcode = FAB_OP_CAS, .len = 8, .remote_addr = 64}, -EINVAL},
	    {{.opcode = FAB_OP_RECV, .local = &word, .len = 8}, -EINVAL},
	    {{.opcode = 0, .local = &word, .len = 8}, -EINVAL},
	    {{.opcode = 99, .local = &word, .len = 8}, -EINVAL},
	};

	(void)state;
	for (size_t i = 0; i < NELEM(cases); i++) {
		int ret = fab_wr_check(&cases[i].wr, 1000, 100);

		if (ret != cases[i].want)
			fail_msg("case %zu: fab_wr_check returned %d, expected %d", i, ret,
			         cases[i].want);
	}
}

static void recv_check__buffers_in_local_write_regions(void **state)
{
	static uint8_t rw[256], ro[256];
	struct fab_recv_wr wr[2];
	struct keytab kt;
	uint32_t krw, kro;

	(void)state;
	/* configure */
	assert_int_equal(keytab_init(&kt, 4), 0);
	assert_int_equal(keytab_add(&kt, rw, sizeof(rw), FAB_ACCESS_LOCAL_WRITE, &krw), 0);
	assert_int_equal(keytab_add(&kt, ro, sizeof(ro), FAB_ACCESS_REMOTE_READ, &kro), 0);
	wr[0] = (struct fab_recv_wr){.local = rw, .len = sizeof(rw), .lkey = krw};
	wr[1] = (struct fab_recv_wr){.local = NULL, .len = 0, .lkey = 0};

	/* run + verify */
	assert_int_equal(fab_recv_check(&kt, wr, 2), 0);
	assert_int_equal(fab_recv_check(&kt, NULL, 1), -EINVAL);
	assert_int_equal(fab_recv_check(&kt, wr, 0), -EINVAL);
	wr[1] = (struct fab_recv_wr){.local = rw + 1, .len = sizeof(rw), .lkey = krw};
	assert_int_equal(fab_recv_check(&kt, wr, 2), -EINVAL); /* one byte past the end */
	wr[1] = (struct fab_recv_wr){.local = ro, .len = 8, .lkey = kro};
	assert_int_equal(fab_recv_check(&kt, wr, 2), -EINVAL); /* no local write */
	wr[1] = (struct fab_recv_wr){.local = NULL, .len = 8, .lkey = krw};
	assert_int_equal(fab_recv_check(&kt, wr, 2), -EINVAL);
	keytab_fini(&kt);
}

static void credits__take_all_or_nothing(void **state)
{
	int64_t credits = 4;

	(void)state;
	/* run + verify */
	assert_true(fab_credits_take(&credits, 3));
	assert_false(fab_credits_take(&credits, 2));
	assert_int_equal(credits, 1);
	assert_true(fab_credits_take(&credits, 1));
	assert_false(fab_credits_take(&credits, 1));
	fab_credits_give(&credits, 0);
	fab_credits_give(&credits, 4);
	assert_int_equal(credits, 4);
}

static void pow2_at_least__values(void **state)
{
	(void)state;
	assert_int_equal(fab_pow2_at_least(0), 1);
	assert_int_equal(fab_pow2_at_least(1), 1);
	assert_int_equal(fab_pow2_at_least(2), 2);
	assert_int_equal(fab_pow2_at_least(3), 4);
	assert_int_equal(fab_pow2_at_least(256), 256);
	assert_int_equal(fab_pow2_at_least(257), 512);
	assert_int_equal(fab_pow2_at_least(1u << 31), 1u << 31);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(acceptq__empty_is_eagain),
	    cmocka_unit_test(acceptq__null_out_is_einval),
	    cmocka_unit_test(acceptq__fifo_with_ctx_and_priv),
	    cmocka_unit_test(acceptq__waiter_wakes_on_push),
	    cmocka_unit_test(mr_check__rules),
	    cmocka_unit_test(connect_check__rules),
	    cmocka_unit_test(wr_check__rules),
	    cmocka_unit_test(recv_check__buffers_in_local_write_regions),
	    cmocka_unit_test(credits__take_all_or_nothing),
	    cmocka_unit_test(pow2_at_least__values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
