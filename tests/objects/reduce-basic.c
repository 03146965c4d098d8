/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * reduce-basic.c -- the reduce object over many rounds, results exact.
 *
 * loco-run -n 4. Channel "red" holds five reduce objects: "sum" (two u64
 * sums), "min" (i64 min), "max" (double max), "user" (a 20-byte value, an
 * order-dependent user function: acc[i] = acc[i] * 31 + in[i]) and "big"
 * (4096 bytes: 512 u64 sums, rows checksummed across several lines).
 * Node n's value at round r is a known function of (n, r), so every node
 * computes the exact result a round must give from the contributor set
 * the round reports, and checks it. The nodes pair before their first
 * call, so every object's first round is 1 on every node and the k-th
 * call runs round k. Every node runs END rounds, hashes (round,
 * contributors, results) of every round and compares the hash with every
 * other node's through sc-sync mailboxes: every node got the same results
 * and contributor sets. Every round must have all 4 contributors.
 *
 * "reduce-basic skew": every node sleeps a random 0 .. 1 ms before each
 * round, and node 2 also sleeps in the middle of each round: it calls
 * loco_reduce_run() with a timeout of 0 (which enters the round and
 * returns -ETIMEDOUT), sleeps a random 0 .. 2 ms, then calls again to
 * finish the round. Only "sum" runs (objects run in turn keep the nodes in
 * step: none can enter an object's next round before all finished this
 * one's). Meanwhile the others complete the round with node 2's value
 * and enter the next: a fast node's next round must not
 * overwrite what node 2 still reads (a reduce with one value slot per row
 * hangs here: node 2 never sees the round it waits for).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loco/reduce.h>

#include "scenario.h"

#define NODES    4
#define FIRST_OK 1
#define USER_SZ  20
#define BIG_N    512

static uint64_t v_u64(uint32_t n, uint64_t r, size_t i)
{
	return n * 1000003ull + r * 7 + i;
}

static int64_t v_i64(uint32_t n, uint64_t r)
{
	return (r & 1 ? -1 : 1) * (int64_t)(n * 13 + r % 1000);
}

static double v_dbl(uint32_t n, uint64_t r)
{
	return (double)((n * r) % 17) + 0.25 * n;
}

static void v_user(uint32_t n, uint64_t r, uint8_t *v)
{
	for (size_t i = 0; i < USER_SZ; i++)
		v[i] = (uint8_t)(n * 37 + r + i);
}

static void user_fn(void *acc, const void *in, size_t size, void *arg)
{
	uint8_t *a = acc;
	const uint8_t *b = in;

	(void)arg;
	for (size_t i = 0; i < size; i++)
		a[i] = (uint8_t)(a[i] * 31 + b[i]);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static void sleep_us(long us)
{
	struct timespec ts = {.tv_nsec = us * 1000};

	nanosleep(&ts, NULL);
}

/* run -- one round; @pause: enter it, sleep, then finish it (the skew's slow reader). */
static int run(loco_reduce_t *r, const void *in, void *out, struct loco_reduce_info *info,
               int pause)
{
	if (pause) {
		int ret = loco_reduce_run(r, in, out, info, 0);

		if (ret != -ETIMEDOUT)
			return ret;
		sleep_us(rand() % 2000);
	}
	return loco_reduce_run(r, in, out, info, 30 * SC_NS);
}

struct objs {
	loco_reduce_t *sum, *min, *max, *user, *big;
};

/* same_info -- the round and contributors of @a and @b agree. */
static void same_info(const struct loco_reduce_info *a, const struct loco_reduce_info *b,
                      const char *what)
{
	if (a->round != b->round || a->count != b->count ||
	    memcmp(a->members, b->members, sizeof(a->members)) != 0)
		SC_FAIL("%s: round %llu count %u differs from sum's round %llu count %u", what,
		        (unsigned long long)b->round, b->count, (unsigned long long)a->round,
		        a->count);
}

int main(int argc, char **argv)
{
	int skew = argc > 1 && strcmp(argv[1], "skew") == 0;
	uint32_t me, end = sc_scaled(skew ? 1500 : 3000), partial = 0;
	uint64_t hash = 0, rounds = 0;
	loco_manager_t *m;
	loco_channel_t *ch;
	struct sc_sync sync;
	struct objs o;
	uint64_t *big_in, *big_out;
	int64_t t0, t1;

	sc_init(skew ? "reduce-skew" : "reduce-basic", argc, argv, 250);
	if (sc_nodes() != NODES)
		SC_FAIL("run with loco-run -n %d", NODES);
	m = sc_start();
	me = loco_manager_node_id(m);
	srand(me * 7919u);
	big_in = calloc(BIG_N, 8);
	big_out = calloc(BIG_N, 8);
	SC_ASSERT(big_in != NULL && big_out != NULL);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "red", NODES, &ch));

	/* argument errors */
	SC_ASSERT_EQ(loco_reduce_create(ch, "x", 0, LOCO_REDUCE_SUM_U64, NULL, NULL, &o.sum),
	             -EINVAL);
	SC_ASSERT_EQ(loco_reduce_create(ch, "x", 12, LOCO_REDUCE_SUM_U64, NULL, NULL, &o.sum),
	             -EINVAL);
	SC_ASSERT_EQ(loco_reduce_create(ch, "x", LOCO_REDUCE_MAX_SIZE + 8, LOCO_REDUCE_SUM_U64,
	                                NULL, NULL, &o.sum),
	             -EINVAL);
	SC_ASSERT_EQ(loco_reduce_create(ch, "x", 8, LOCO_REDUCE_USER, NULL, NULL, &o.sum), -EINVAL);
	SC_ASSERT_EQ(loco_reduce_create(ch, "x", 8, 999, NULL, NULL, &o.sum), -EINVAL);
	SC_ASSERT_EQ(loco_reduce_run(NULL, big_in, big_out, NULL, 0), -EINVAL);
	SC_ASSERT_EQ(loco_reduce_round(NULL), 0);

	SC_ASSERT_OK(loco_reduce_create(ch, "sum", 16, LOCO_REDUCE_SUM_U64, NULL, NULL, &o.sum));
	SC_ASSERT_OK(loco_reduce_create(ch, "min", 8, LOCO_REDUCE_MIN_I64, NULL, NULL, &o.min));
	SC_ASSERT_OK(loco_reduce_create(ch, "max", 8, LOCO_REDUCE_MAX_DOUBLE, NULL, NULL, &o.max));
	SC_ASSERT_OK(
	    loco_reduce_create(ch, "user", USER_SZ, LOCO_REDUCE_USER, user_fn, NULL, &o.user));
	SC_ASSERT_OK(
	    loco_reduce_create(ch, "big", BIG_N * 8, LOCO_REDUCE_SUM_U64, NULL, NULL, &o.big));
	SC_ASSERT_EQ(loco_reduce_create(ch, "sum", 8, LOCO_REDUCE_SUM_U64, NULL, NULL, &o.sum),
	             -EEXIST);
	SC_ASSERT_OK(loco_channel_join(ch, (int64_t)SC_WAIT_MS * 1000000));
	sc_sync_open(&sync, m, NODES);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	t0 = sc_now_ns();
	while (loco_reduce_round(o.sum) < end) {
		struct loco_reduce_info is, in, ix, iu, ib;
		uint64_t s_in[2], s_out[2], s_want[2] = {0, 0}, r;
		int64_t mi_in, mi_out, mi_want = INT64_MAX;
		double mx_in, mx_out, mx_want = -1e300;
		uint8_t u_in[USER_SZ], u_out[USER_SZ], u_want[USER_SZ], u_v[USER_SZ];
		int have = 0;

		if (skew)
			sleep_us(rand() % 1000);
		/* nodes that all pair before their first call all start at round 1 */
		r = loco_reduce_round(o.sum) + 1;
		rounds++;
		s_in[0] = v_u64(me, r, 0);
		s_in[1] = v_u64(me, r, 1);
		mi_in = v_i64(me, r);
		mx_in = v_dbl(me, r);
		v_user(me, r, u_in);
		for (size_t i = 0; i < BIG_N; i++)
			big_in[i] = v_u64(me, r, i);
		SC_ASSERT_OK(run(o.sum, s_in, s_out, &is, skew && me == 2));
		if (skew) { /* one object: rounds of several objects in turn keep nodes in step */
			in = ix = iu = ib = is;
		} else {
			SC_ASSERT_OK(run(o.min, &mi_in, &mi_out, &in, 0));
			SC_ASSERT_OK(run(o.max, &mx_in, &mx_out, &ix, 0));
			SC_ASSERT_OK(run(o.user, u_in, u_out, &iu, 0));
			SC_ASSERT_OK(run(o.big, big_in, big_out, &ib, 0));
		}
		SC_ASSERT(is.count >= 1 && loco_reduce_contributed(&is, me));
		SC_ASSERT_EQ(is.round, r);
		SC_ASSERT_EQ(loco_reduce_round(o.sum), r);
		same_info(&is, &in, "min");
		same_info(&is, &ix, "max");
		same_info(&is, &iu, "user");
		same_info(&is, &ib, "big");
		if (is.count != NODES)
			partial++;
		/* the exact results, from the contributor set */
		for (uint32_t n = 1; n <= LOCO_REDUCE_MAX_NODE; n++) {
			if (!loco_reduce_contributed(&is, n))
				continue;
			SC_ASSERT(n <= NODES);
			s_want[0] += v_u64(n, is.round, 0);
			s_want[1] += v_u64(n, is.round, 1);
			if (v_i64(n, is.round) < mi_want)
				mi_want = v_i64(n, is.round);
			if (v_dbl(n, is.round) > mx_want)
				mx_want = v_dbl(n, is.round);
			v_user(n, is.round, u_v);
			if (!have)
				memcpy(u_want, u_v, USER_SZ);
			else
				user_fn(u_want, u_v, USER_SZ, NULL);
			have = 1;
		}
		if (s_out[0] != s_want[0] || s_out[1] != s_want[1])
			SC_FAIL("round %llu: sum %llu %llu, want %llu %llu",
			        (unsigned long long)is.round, (unsigned long long)s_out[0],
			        (unsigned long long)s_out[1], (unsigned long long)s_want[0],
			        (unsigned long long)s_want[1]);
		if (skew)
			goto hash; /* only the sum ran */
		if (mi_out != mi_want || mx_out != mx_want)
			SC_FAIL("round %llu: min %lld max %g, want %lld %g",
			        (unsigned long long)is.round, (long long)mi_out, mx_out,
			        (long long)mi_want, mx_want);
		if (memcmp(u_out, u_want, USER_SZ) != 0)
			SC_FAIL("round %llu: user fn result differs", (unsigned long long)is.round);
		for (size_t i = 0; i < BIG_N; i++) {
			uint64_t w = 0;

			for (uint32_t n = 1; n <= NODES; n++)
				w += loco_reduce_contributed(&is, n) ? v_u64(n, is.round, i) : 0;
			if (big_out[i] != w)
				SC_FAIL("round %llu: big[%zu] %llu, want %llu",
				        (unsigned long long)is.round, i,
				        (unsigned long long)big_out[i], (unsigned long long)w);
		}
	hash:
		hash = mix(hash, is.round);
		hash = mix(hash, is.members[0]);
		hash = mix(hash, s_out[0] ^ s_out[1]);
		if (skew)
			continue;
		hash = mix(hash, (uint64_t)mi_out ^ big_out[BIG_N - 1]);
		hash = mix(hash, (uint64_t)(mx_out * 4));
		for (size_t i = 0; i < USER_SZ; i++)
			hash = mix(hash, u_out[i]);
	}
	t1 = sc_now_ns();
	printf("node %u: %llu calls of %d reduces, rounds %d .. %u, %u of them with < %d "
	       "contributors, %.1f us per round\n",
	       me, (unsigned long long)rounds, skew ? 1 : 5, FIRST_OK, end, partial, NODES,
	       (double)(t1 - t0) / 1000.0 / (double)rounds);
	if (partial != 0)
		SC_FAIL("%u rounds from %d on had fewer than %d contributors", partial, FIRST_OK,
		        NODES);
	sc_sync_put(&sync, me, hash);
	sc_sync_wait(&sync, "hashes", SC_WAIT_MS);
	for (uint32_t n = 1; n <= NODES; n++)
		if (sc_sync_get(&sync, n) != hash)
			SC_FAIL("node %u's hash of rounds %d .. %u is %#llx, mine %#llx", n,
			        FIRST_OK, end, (unsigned long long)sc_sync_get(&sync, n),
			        (unsigned long long)hash);
	printf("node %u: every node got the same results and contributors in rounds %d .. %u\n", me,
	       FIRST_OK, end);
	loco_reduce_destroy(o.sum);
	loco_reduce_destroy(o.min);
	loco_reduce_destroy(o.max);
	loco_reduce_destroy(o.user);
	loco_reduce_destroy(o.big);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	free(big_in);
	free(big_out);
	return SC_EXIT_PASS;
}
