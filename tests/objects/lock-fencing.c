/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * lock-fencing.c -- fencing tokens grow with every grant, and no two
 * holds overlap, through releases, renewals and lease takeovers.
 *
 * loco-run -n 3. Channel "lk-fence" holds lock "F" hosted on node 1, with
 * a 300 ms lease and a 450 ms takeover time. Each node, K times: acquire;
 * note the time it returned (CLOCK_MONOTONIC: one clock for every process
 * of the host), the token, the lease's end; hold for a moment; release,
 * noting the time first. Every 50th round it holds longer, renewing every
 * 60 ms for 4 renewals (over the lease); once, in the middle, it holds for
 * T + 200 ms without renewing, so that a waiter takes the lock over.
 *
 * Each node writes its grants {token, node, start, end, how it ended} to a
 * file; node 1 reads all three and checks: every token distinct; in token
 * order every hold starts no sooner than the previous one ended (its
 * release, or its lease's end when the lease ran out first): tokens are
 * strictly increasing in grant order and no two [grant, end] intervals
 * overlap; a grant that took over a lease (loco_lock_recovered() = 1)
 * follows exactly a hold whose release said -ESTALE, and every -ESTALE is
 * followed by a takeover.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <loco/lock.h>

#include "scenario.h"

#define K         300
#define LOCK_HOST 1
#define LEASE_MS  300
#define TAKE_MS   450
#define TMO       (10 * SC_NS)
#define BOX_PID   1 /* node 1's pid: names the record files */
#define MS        1000000ll

struct grant {
	uint64_t token;
	uint32_t node;
	int32_t rel;       /* what the release returned */
	int64_t start;     /* acquire returned */
	int64_t end;       /* release called, or the lease ended first */
	int32_t recovered; /* a takeover */
	int32_t renewed;   /* renewals that succeeded */
};

static const loco_lock_cfg_t lcfg = {LEASE_MS * MS, TAKE_MS *MS};

static void path_of(char *buf, size_t len, uint64_t pid, uint32_t node)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/loco-lock-fencing.%llu.%u", dir != NULL ? dir : "/tmp",
	         (unsigned long long)pid, node);
}

static int by_token(const void *a, const void *b)
{
	const struct grant *x = a, *y = b;

	return x->token < y->token ? -1 : x->token > y->token;
}

/* one_hold -- acquire, hold as @kind says (0 short, 1 renewing, 2 stalled), release. */
static void one_hold(loco_lock_t *lk, int kind, struct grant *g)
{
	int64_t lease_end;
	int ret;

	SC_ASSERT_OK(loco_lock_acquire(lk, TMO));
	g->start = sc_now_ns();
	lease_end = g->start + loco_lock_lease_left(lk);
	SC_ASSERT(lease_end > g->start);
	SC_ASSERT_EQ(loco_lock_held(lk), 1);
	SC_ASSERT_OK(loco_lock_token(lk, &g->token));
	g->recovered = loco_lock_recovered(lk);
	if (kind == 1) {
		for (int r = 0; r < 4; r++) {
			sc_sleep_ms(60);
			ret = loco_lock_renew(lk);
			if (ret == 0) {
				lease_end = sc_now_ns() + loco_lock_lease_left(lk);
				g->renewed++;
				continue;
			}
			if (ret != -ETIMEDOUT && ret != -ESTALE) /* a stall past the lease */
				SC_FAIL("renew: %s", loco_strerror(ret));
			sc_log("renewal %d of token %llu: %s", r, (unsigned long long)g->token,
			       loco_strerror(ret));
			break;
		}
	} else if (kind == 2) {
		sc_sleep_ms(TAKE_MS + 200);
		SC_ASSERT_EQ(loco_lock_held(lk), 0); /* expired: it knows */
		SC_ASSERT_EQ(loco_lock_lease_left(lk), 0);
	}
	g->end = sc_now_ns();
	if (g->end > lease_end)
		g->end = lease_end;
	g->rel = loco_lock_release(lk);
	if (g->rel != 0 && g->rel != -ETIMEDOUT && g->rel != -ESTALE)
		SC_FAIL("release: %s", loco_strerror(g->rel));
	if (kind == 0 && g->rel != 0)
		sc_log("a short hold of token %llu ended %s", (unsigned long long)g->token,
		       loco_strerror(g->rel));
}

static void check(uint64_t pid, int iters)
{
	int n = 3 * iters, got = 0, takeovers = 0, stale = 0, renewed = 0;
	struct grant *all = calloc((size_t)n, sizeof(*all));
	char path[256];
	int64_t gap_min = INT64_MAX;

	SC_ASSERT(all != NULL);
	for (uint32_t node = 1; node <= 3; node++) {
		FILE *f;

		path_of(path, sizeof(path), pid, node);
		f = fopen(path, "rb");
		if (f == NULL)
			SC_FAIL("open %s: %m", path);
		got += (int)fread(all + got, sizeof(*all), (size_t)(n - got), f);
		fclose(f);
	}
	SC_ASSERT_EQ(got, n);
	qsort(all, (size_t)n, sizeof(*all), by_token);
	for (int k = 0; k < n; k++) {
		const struct grant *g = &all[k], *p = k > 0 ? &all[k - 1] : NULL;

		if (g->end < g->start)
			SC_FAIL("token %llu: ended before it started",
			        (unsigned long long)g->token);
		takeovers += g->recovered;
		stale += g->rel == -ESTALE;
		renewed += g->renewed;
		if (p == NULL)
			continue;
		if (g->token == p->token)
			SC_FAIL("token %llu granted twice (nodes %u, %u)",
			        (unsigned long long)g->token, p->node, g->node);
		if (g->start < p->end)
			SC_FAIL(
			    "token %llu (node %u) began %.3f ms before token %llu (node %u) ended",
			    (unsigned long long)g->token, g->node,
			    (double)(p->end - g->start) / 1e6, (unsigned long long)p->token,
			    p->node);
		if (g->recovered != (p->rel == -ESTALE))
			SC_FAIL(
			    "token %llu (node %u) recovered %d, but token %llu's release said %s",
			    (unsigned long long)g->token, g->node, g->recovered,
			    (unsigned long long)p->token, loco_strerror(p->rel));
		if (g->start - p->end < gap_min)
			gap_min = g->start - p->end;
	}
	if (all[n - 1].rel == -ESTALE)
		SC_FAIL("the last grant's release said -ESTALE: nobody took it over");
	if (takeovers < 1)
		SC_FAIL("no takeover among %d grants: the stalled holds were not taken over", n);
	sc_log("%d grants, tokens %llu..%llu strictly increasing, no overlap (closest %.3f ms); "
	       "%d takeovers, %d stale releases, %d renewals",
	       n, (unsigned long long)all[0].token, (unsigned long long)all[n - 1].token,
	       (double)gap_min / 1e6, takeovers, stale, renewed);
	free(all);
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_lock_t *lk;
	struct sc_sync sync;
	struct grant *mine;
	uint32_t me;
	uint64_t pid;
	char path[256];
	FILE *f;
	int iters;

	sc_init("lock-fencing", argc, argv, 100);
	iters = (int)sc_scaled(K);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	mine = calloc((size_t)iters, sizeof(*mine));
	SC_ASSERT(mine != NULL);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "lk-fence", 3, &ch));
	SC_ASSERT_OK(loco_lock_create_cfg(ch, "F", LOCK_HOST, &lcfg, &lk));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	if (me == 1)
		sc_sync_put(&sync, BOX_PID, (uint64_t)getpid());
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	pid = sc_sync_get(&sync, BOX_PID);
	SC_ASSERT(pid != 0);

	for (int i = 0; i < iters; i++) {
		int kind = i == iters / 4 * (int)me ? 2 : i % 50 == 10 * (int)me ? 1 : 0;

		mine[i].node = me;
		one_hold(lk, kind, &mine[i]);
		if (i > 0 && mine[i].token <= mine[i - 1].token)
			SC_FAIL("round %d: token %llu after %llu", i,
			        (unsigned long long)mine[i].token,
			        (unsigned long long)mine[i - 1].token);
		if (kind == 2)
			sc_log("stalled hold of token %llu: release said %s",
			       (unsigned long long)mine[i].token, loco_strerror(mine[i].rel));
	}
	path_of(path, sizeof(path), pid, me);
	f = fopen(path, "wb");
	if (f == NULL)
		SC_FAIL("create %s: %m", path);
	SC_ASSERT_EQ(fwrite(mine, sizeof(*mine), (size_t)iters, f), (size_t)iters);
	SC_ASSERT_EQ(fclose(f), 0);
	sc_sync_wait(&sync, "grants written", SC_WAIT_MS);
	if (me == 1)
		check(pid, iters);
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	unlink(path);

	loco_lock_destroy(lk);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	free(mine);
	loco_fini(m);
	return SC_EXIT_PASS;
}
