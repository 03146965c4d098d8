/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-watermark.c -- the rpipe's deferred synchronisation as a parameter
 * (loco_rpipe_create_cfg(), return_div): the reader returns space once a
 * batch of ring / return_div bytes was consumed, not a quarter always.
 *
 * loco-run -n 2. Node 1 writes M messages of 100 .. 300 bytes into each
 * of three pipes to node 2, 16 KiB rings, return_div 1 (a full ring), 2
 * and 8, one pipe after the other; node 2 reads and checks every message
 * (its sequence number and pattern). Then, per pipe, node 2 checks its
 * returns against the watermark: at least consumed / (batch + a record)
 * - 1 of them (it returned every batch), and at most consumed / batch +
 * the writer's asks + 1 (never more often, unless the writer asked);
 * and more returns with 8 than with 1 (the bytes a wrap skips count as
 * consumed). Bad configurations: -EINVAL.
 */
#include <errno.h>
#include <string.h>

#include <loco/rpipe.h>

#include "scenario.h"

#define RING 16384u
#define M    3000u
#define MAXM 300u
#define REC  (MAXM + 24u + 8u) /* the largest record a message makes */

static const uint32_t divs[] = {1, 2, 8};

static size_t msg_len(uint32_t i)
{
	return 100u + (i * 37u) % (MAXM - 99u);
}

static void fill(uint8_t *b, uint32_t i, size_t len)
{
	memcpy(b, &i, 4);
	for (size_t k = 4; k < len; k++)
		b[k] = (uint8_t)(i * 13u + k);
}

int main(int argc, char **argv)
{
	loco_rpipe_t *p[3];
	loco_rpipe_cfg_t cfg;
	loco_manager_t *m;
	loco_channel_t *ch;
	struct sc_sync sync;
	uint8_t buf[MAXM], want[MAXM];
	uint64_t returns[3] = {0};
	uint32_t me;

	sc_init("rpipe-watermark", argc, argv, 120);
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2");
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpw", 2, &ch));
	loco_rpipe_cfg_default(&cfg);
	SC_ASSERT_EQ(cfg.return_div, LOCO_RPIPE_RETURN_DIV);
	cfg.ring_bytes = RING;
	cfg.return_div = 0;
	SC_ASSERT_EQ(loco_rpipe_create_cfg(ch, "bad", 1, 2, &cfg, &p[0]), -EINVAL);
	cfg.return_div = LOCO_RPIPE_RETURN_DIV_MAX + 1;
	SC_ASSERT_EQ(loco_rpipe_create_cfg(ch, "bad", 1, 2, &cfg, &p[0]), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create_cfg(ch, "bad", 1, 2, NULL, &p[0]), -EINVAL);
	for (int k = 0; k < 3; k++) {
		char name[8] = {'d', (char)('0' + divs[k]), 0};

		cfg.return_div = divs[k];
		SC_ASSERT_OK(loco_rpipe_create_cfg(ch, name, 1, 2, &cfg, &p[k]));
	}
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	for (int k = 0; k < 3; k++) {
		loco_rpipe_stats_t st;
		uint64_t consumed = 0, batch = RING / divs[k];

		for (uint32_t i = 0; i < M; i++) {
			size_t len = msg_len(i), got = 0;

			if (me == 1) {
				fill(buf, i, len);
				SC_ASSERT_OK(loco_rpipe_write(p[k], buf, len, 10 * SC_NS));
				continue;
			}
			SC_ASSERT_OK(loco_rpipe_read(p[k], buf, sizeof(buf), &got, 10 * SC_NS));
			fill(want, i, len);
			if (got != len || memcmp(buf, want, len) != 0)
				SC_FAIL("pipe d%u: message %u differs (%zu bytes, expected %zu)",
				        divs[k], i, got, len);
			consumed += (len + 24u + 7u) & ~7ull;
		}
		loco_rpipe_stats(p[k], &st);
		if (me == 1)
			sc_sync_put(&sync, 1, st.asks);
		sc_sync_wait(&sync, "pipe done", SC_WAIT_MS);
		if (me == 2) {
			uint64_t asks = sc_sync_get(&sync, 1);

			returns[k] = st.returns;
			sc_log(
			    "return_div %u: %llu returns for %llu bytes (batch %llu), writer asked "
			    "%llu times",
			    divs[k], (unsigned long long)st.returns, (unsigned long long)consumed,
			    (unsigned long long)batch, (unsigned long long)asks);
			if (st.returns + 1 < consumed / (batch + REC))
				SC_FAIL("return_div %u: %llu returns, fewer than a batch's worth",
				        divs[k], (unsigned long long)st.returns);
			/* (a wrap skips at most a record's worth of ring: counted as consumed) */
			if (st.returns > (consumed + st.wraps * REC) / batch + asks + 1)
				SC_FAIL("return_div %u: %llu returns, more than batches and asks",
				        divs[k], (unsigned long long)st.returns);
		}
		sc_sync_wait(&sync, "pipe checked", SC_WAIT_MS);
	}
	if (me == 2 && returns[2] <= returns[0])
		SC_FAIL("return_div 8 gave %llu returns, 1 gave %llu",
		        (unsigned long long)returns[2], (unsigned long long)returns[0]);
	for (int k = 0; k < 3; k++)
		loco_rpipe_destroy(p[k]);
	sc_sync_close(&sync);
	loco_channel_destroy(ch);
	loco_fini(m);
	sc_log("ok");
	return 0;
}
