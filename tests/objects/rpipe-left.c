/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-left.c -- the writer of a push pipe writes, destroys its end and
 * leaves the cluster before the reader ever looked at the pipe: the
 * reader still reads every message that landed, whole and in order, and
 * only then gets -ECONNRESET (loco_rpipe(3): "what landed before the
 * other end left is still read").
 *
 * loco-run -n 2. Both nodes make pipe "p" (2 -> 1) and join. Node 2
 * writes N messages once both joined (loco_rpipe_destroy() returns once
 * they landed: a signaled ctl WRITE goes behind them), destroys the pipe
 * and the channel and calls loco_fini(). Node 1 waits until node 2 is out of
 * the view, without a call on the pipe, then reads.
 *
 * The regression: the reader worked its session out (both incarnations,
 * from the view) at its first call; with the writer gone by then it
 * never had one, and its first read said -ECONNRESET with the messages
 * in its ring (docs/examples/rpipe failed so once in CI: node 2 wrote
 * "done" and left before node 1 had finished writing its own lines).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco/rpipe.h>

#include "scenario.h"

#define RING 4096u
#define N    5u

int main(int argc, char **argv)
{
	loco_rpipe_t *p;
	loco_manager_t *m;
	loco_channel_t *ch;
	struct sc_sync sync;
	char buf[64], want[64];
	size_t got;
	int64_t dl;
	uint32_t me;
	int ret;

	sc_init("rpipe-left", argc, argv, 60);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpl", 2, &ch));
	SC_ASSERT_OK(loco_rpipe_create(ch, "p", 2, 1, RING, &p));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS); /* a node left alone could not finish its join */

	if (me == 2) {
		for (unsigned i = 0; i < N; i++) {
			int len = snprintf(buf, sizeof(buf), "message %u", i);

			SC_ASSERT_OK(loco_rpipe_write(p, buf, (size_t)len, 10 * SC_NS));
		}
		loco_rpipe_destroy(p);
		sc_sync_close(&sync);
		loco_channel_destroy(ch);
		loco_fini(m);
		sc_log("wrote %u messages and left", N);
		return 0;
	}

	/* node 1: not a call on the pipe until node 2 is out of the view */
	dl = sc_now_ms() + 20000;
	while (sc_is_member(m, 2)) {
		if (sc_now_ms() > dl)
			SC_FAIL("node 2 still in the view after 20 s");
		sc_sleep_ms(10);
	}
	for (unsigned i = 0; i < N; i++) {
		snprintf(want, sizeof(want), "message %u", i);
		ret = loco_rpipe_read(p, buf, sizeof(buf), &got, 10 * SC_NS);
		if (ret != 0)
			SC_FAIL("message %u of %u: loco_rpipe_read() returned %d (%s), the writer "
			        "having "
			        "left",
			        i, N, ret, loco_strerror(ret));
		if (got != strlen(want) || memcmp(buf, want, got) != 0)
			SC_FAIL("message %u: %zu bytes \"%.*s\", expected \"%s\"", i, got, (int)got,
			        buf, want);
	}
	/* then the pipe says it is lost, at once */
	SC_ASSERT_EQ(loco_rpipe_read(p, buf, sizeof(buf), &got, 10 * SC_NS), -ECONNRESET);
	SC_ASSERT_EQ(loco_rpipe_read(p, buf, sizeof(buf), &got, 0), -ECONNRESET);
	sc_log("read %u messages after the writer left, then -ECONNRESET", N);
	loco_rpipe_destroy(p);
	sc_sync_close(&sync);
	loco_channel_destroy(ch);
	loco_fini(m);
	sc_log("ok");
	return 0;
}
