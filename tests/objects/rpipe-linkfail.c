/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-linkfail.c -- a push pipe goes on over a data link that fails
 * while both ends stay members: no message is lost, none comes twice,
 * the writer's calls never fail, and a writer that goes quiet right after
 * the failure still gets its last messages read (the reader mends:
 * objects/rpipe_mend.c).
 *
 * Argument "pull": the same with a pull pipe (LOCO_RPIPE_PULL: the reader
 * READs the writer's ring; what a failed link loses is the writer's
 * publishes of its tail and the reader's READs in flight).
 *
 * loco-run -n 2 with LOCO_TCP_FAIL_READS=LF_ROUNDS@LF_PROBE_LEN (tcp, mixed):
 * the first LF_ROUNDS READs of LF_PROBE_LEN bytes a process issues take their
 * link down, as a reset would; the manager makes a new one and both nodes
 * stay members. Node 1 writes pipe "lf" (64 KiB ring) to node 2. Each
 * round: BURST messages (rpipe-pattern.h sizes and contents), then a READ
 * of LF_PROBE_LEN bytes from node 2's "probe" region (it fails the link: the
 * WRITEs queued behind it are flushed, later posts find no link), then
 * TAIL more messages, then the writer waits, posting nothing, until node 2
 * has read every message so far (mailbox BOX_READ). Then the rest of the
 * stream, COUNT messages in all, through wraps and full rings.
 *
 * Checks: every message arrives once, whole, in order (length and content
 * of message k); no write or read fails (before the mending, the writer
 * got -ECONNRESET at its next signaled WRITE, or the reader waited for
 * good for the flushed messages); each probe READ failed (the link really
 * went down LF_ROUNDS times).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpipe.h>

#include "rpipe-pattern.h"
#include "linkfail.h"
#include "scenario.h"

#define RING     (64u * 1024)
#define MAXMSG   (16u * 1024)
#define BURST    200u
#define TAIL     3u
#define COUNT    20000u
#define SEED     7u
#define TMO      (20 * SC_NS)
#define BOX_READ 1 /* node 2: messages read so far */

static struct sc_sync sync;

static void write_one(loco_rpipe_t *p, uint64_t k)
{
	static uint8_t buf[MAXMSG];
	size_t len = rp_size(SEED, k, MAXMSG);
	int ret;

	rp_fill(buf, len, SEED, k);
	ret = loco_rpipe_write(p, buf, len, TMO);
	if (ret)
		SC_FAIL("write of message %llu (%zu B): %s", (unsigned long long)k, len,
		        loco_strerror(ret));
}

static void writer(loco_manager_t *m, loco_rpipe_t *p, loco_region_t *probe)
{
	loco_ack_key_t *ack;
	loco_rref_t rr;
	uint64_t k = 0;

	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	lf_probe_remote(probe, &rr);
	for (unsigned r = 0; r < LF_ROUNDS; r++) {
		int ret;

		for (unsigned i = 0; i < BURST; i++)
			write_one(p, k++);
		/* the link goes down at this READ's issue: what is queued behind it is flushed */
		ret = lf_probe(probe, &rr, ack, r);
		for (unsigned i = 0; i < TAIL; i++)
			write_one(p, k++);
		/* quiet now: only the reader can find the last ones */
		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_READ) >= k, SC_WAIT_MS,
		              "node 2 read every message of the round");
		ret = lf_probe_failed(ack, ret, r);
		sc_log("round %u: %llu messages read; the probe READ failed (%s)", r,
		       (unsigned long long)k, loco_strerror(ret));
	}
	while (k < COUNT)
		write_one(p, k++);
	loco_ack_key_destroy(ack);
}

static void reader(loco_rpipe_t *p)
{
	static uint8_t buf[MAXMSG];
	uint64_t told = 0;

	for (uint64_t k = 0; k < COUNT; k++) {
		size_t want = rp_size(SEED, k, MAXMSG), len = 0;
		int ret = loco_rpipe_read(p, buf, sizeof(buf), &len, TMO);

		if (ret)
			SC_FAIL("read of message %llu: %s", (unsigned long long)k,
			        loco_strerror(ret));
		if (len != want)
			SC_FAIL("message %llu: %zu B, expected %zu", (unsigned long long)k, len,
			        want);
		if (!rp_check(buf, len, SEED, k))
			SC_FAIL("message %llu (%zu B): wrong content", (unsigned long long)k, len);
		/* the rounds wait for this: say it at once while they run */
		if (k < LF_ROUNDS * (BURST + TAIL) + 1 || k + 1 - told >= 1000) {
			sc_sync_put(&sync, BOX_READ, k + 1);
			told = k + 1;
		}
	}
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2};
	loco_region_t *probe;
	loco_object_t *pobj;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpipe_t *p;
	loco_rpipe_cfg_t cfg;
	loco_rpipe_stats_t st;
	uint32_t me;

	sc_init("rpipe-linkfail", argc, argv,
	        150); /* before loco-run's 170: a hang prints its stacks */
	if (argc > 2 || (argc == 2 && strcmp(argv[1], "pull") != 0))
		SC_FAIL("usage: rpipe-linkfail [pull]");
	if (sc_nodes() != 2)
		SC_FAIL("run with loco-run -n 2 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 2), SC_WAIT_MS, "members {1, 2}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rlf", 2, &ch));
	loco_rpipe_cfg_default(&cfg);
	cfg.ring_bytes = RING;
	cfg.mode = argc == 2 ? LOCO_RPIPE_PULL : LOCO_RPIPE_PUSH;
	SC_ASSERT_OK(loco_rpipe_create_cfg(ch, "lf", 1, 2, &cfg, &p));
	probe = lf_probe_create(ch, &pobj);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpipe_sync(p, 20 * SC_NS));
	sc_sync_open(&sync, m, 2);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (me == 1)
		writer(m, p, probe);
	else
		reader(p);
	loco_rpipe_stats(p, &st);
	sc_log("%s: %llu messages, wraps %llu, full %llu, asks %llu, returns %llu",
	       me == 1 ? "writer" : "reader", (unsigned long long)st.msgs,
	       (unsigned long long)st.wraps, (unsigned long long)st.full,
	       (unsigned long long)st.asks, (unsigned long long)st.returns);
	SC_ASSERT_EQ(st.msgs, COUNT);
	SC_ASSERT_EQ(st.resets, 0);
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	SC_ASSERT(sc_members_are(m, all, 2)); /* nobody was dropped: only the link failed */
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	loco_rpipe_destroy(p);
	loco_object_destroy(pobj);
	sc_sync_close(&sync);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
