/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-stream.c -- two pipes into one reader through small rings: every
 * message arrives once, whole, in order, through wrap-arounds and full
 * rings, on the copying or the zero-copy interface.
 *
 * loco-run -n 3, arguments MODE [COUNT [PIPE]]: "copy" (loco_rpipe_write/read)
 * or "zc" (reserve/commit, peek/release); COUNT messages in all (default
 * 1 M, halved between the pipes; divided by LOCO_TEST_SCALE); PIPE "push"
 * (the default) or "pull" (LOCO_RPIPE_PULL: the ring is the writer's, the
 * reader READs it; both pipes, the rest as push). Channel
 * "rps": pipe "a" 1 -> 2 and pipe "b" 3 -> 2, 64 KiB rings. Node 2 reads
 * both pipes in two threads. Message k of a pipe has the size and content
 * of rpipe-pattern.h (seeded by the pipe): each read checks length and
 * content, so a lost, duplicated, reordered, torn or overwritten message
 * fails. The reader pauses every 1/16 of the stream, so that the writer
 * meets a full ring: the first time until the writer said it did, then
 * for 20 ms.
 *
 * Asserted besides content: both writers wrapped the ring and found it
 * full (and asked for space); the reader returned space in batches: at
 * most one WRITE per quarter ring consumed plus one per ask of the writer.
 * Sizes 1 B..16 KiB, most of them small (rpipe-pattern.h says which). With
 * LOCO_TCP_SLOW_WRITE set (the rpipe-torn rows), the count of polls that met a message not fully
 * landed is printed and must not be 0: the checksum is what kept them
 * from being read.
 *
 * Pull: the reader returns space at every batch and whenever it ran dry,
 * so the push bound does not hold; instead the writer's WRITEs of its
 * tail (its "returns") are bounded by their three causes: at most one per
 * return of the reader (it ran dry), one per quarter ring committed, and
 * one per ask (it waited for room), + 1. A writer whose ring is full asks
 * by publishing its tail only if the reader does not know it all yet, so
 * its asks may be 0. With slow writes only the 8-byte position words are
 * slowed, and the reader parses only ranges whose READ completed: a
 * message not fully there is never met, torn must be 0.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/rpipe.h>

#include "rpipe-pattern.h"
#include "scenario.h"

#define RING    (64u * 1024)
#define MAXMSG  (16u * 1024)
#define TMO     (20 * SC_NS)
#define BOX_OK  1  /* + reader thread index */
#define BOX_TRN 5  /* torn polls seen by node 2 */
#define BOX_ASK 6  /* + writer id: its asks + 1 */
#define BOX_FUL 10 /* + writer id: 1 once it found the ring full */
#define BOX_PUB 14 /* + writer id: its WRITEs of its tail (pull) + 1 */

static int zc, pull;
static struct sc_sync sync;

struct rd {
	loco_rpipe_t *p;
	uint64_t seed;
	uint64_t count;
	loco_rpipe_stats_t st;
};

/* tell_full -- once the writer found the ring full (a call gave up): say so in BOX_FUL. */
static void tell_full(loco_rpipe_t *p, uint64_t seed, int *told)
{
	loco_rpipe_stats_t st;

	loco_rpipe_stats(p, &st);
	if (!*told && st.full > 0) {
		sc_sync_put(&sync, BOX_FUL + (uint32_t)seed, 1);
		*told = 1;
	}
}

/*
 * write_all -- each message is first tried without waiting: when that finds
 * the ring full, the writer says so (BOX_FUL) before it waits, so that the
 * reader's first pause can last until the ring was full for sure (a fixed
 * pause did not: under the VM's emulated CPU a writer filled less than a
 * ring in it, and "full" was 0 in 1 run of 2).
 */
static void write_all(loco_rpipe_t *p, uint64_t seed, uint64_t count)
{
	static uint8_t buf[MAXMSG];
	int told = 0;

	for (uint64_t k = 0; k < count; k++) {
		size_t len = rp_size(seed, k, MAXMSG);
		int ret;

		if (zc) {
			size_t extra = len + 7 > MAXMSG ? MAXMSG : len + 7;
			void *ptr;

			ret = loco_rpipe_reserve(p, extra, &ptr, 0);
			if (ret == -EAGAIN) {
				tell_full(p, seed, &told);
				ret = loco_rpipe_reserve(p, extra, &ptr, TMO);
			}
			if (ret)
				SC_FAIL("reserve of message %llu: %s", (unsigned long long)k,
				        loco_strerror(ret));
			rp_fill(ptr, len, seed, k);
			ret = loco_rpipe_commit(p, len);
		} else {
			rp_fill(buf, len, seed, k);
			ret = loco_rpipe_write(p, buf, len, 0);
			if (ret == -EAGAIN) {
				tell_full(p, seed, &told);
				ret = loco_rpipe_write(p, buf, len, TMO);
			}
		}
		if (ret)
			SC_FAIL("write of message %llu (%zu B): %s", (unsigned long long)k, len,
			        loco_strerror(ret));
	}
}

static void *read_all(void *arg)
{
	static __thread uint8_t buf[MAXMSG];
	struct rd *r = arg;
	uint64_t pause_every = r->count / 16 ? r->count / 16 : 1;

	for (uint64_t k = 0; k < r->count; k++) {
		size_t want = rp_size(r->seed, k, MAXMSG), len = 0;
		const void *ptr = buf;
		int ret;

		if (zc)
			ret = loco_rpipe_peek(r->p, &ptr, &len, TMO);
		else
			ret = loco_rpipe_read(r->p, buf, sizeof(buf), &len, TMO);
		if (ret)
			SC_FAIL("read of message %llu: %s", (unsigned long long)k,
			        loco_strerror(ret));
		if (len != want)
			SC_FAIL("message %llu of seed %llu: %zu B, expected %zu",
			        (unsigned long long)k, (unsigned long long)r->seed, len, want);
		if (!rp_check(ptr, len, r->seed, k))
			SC_FAIL("message %llu of seed %llu (%zu B): wrong content",
			        (unsigned long long)k, (unsigned long long)r->seed, len);
		if (zc)
			SC_ASSERT_OK(loco_rpipe_release(r->p));
		/* let the writer fill the ring: the first pause until it did */
		if (k == pause_every - 1)
			SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_FUL + (uint32_t)r->seed) != 0,
			              SC_WAIT_MS, "the writer found the ring full");
		else if (k % pause_every == pause_every - 1)
			sc_sleep_ms(20);
	}
	loco_rpipe_stats(r->p, &r->st);
	return NULL;
}

static void print_stats(const char *who, const loco_rpipe_stats_t *st, double s)
{
	sc_log("%s: %llu msgs, %llu B (%.1f MB/s, %.0f msg/s), wraps %llu, full %llu, asks %llu, "
	       "returns %llu, empty %llu, torn %llu",
	       who, (unsigned long long)st->msgs, (unsigned long long)st->bytes,
	       (double)st->bytes / s / 1e6, (double)st->msgs / s, (unsigned long long)st->wraps,
	       (unsigned long long)st->full, (unsigned long long)st->asks,
	       (unsigned long long)st->returns, (unsigned long long)st->empty,
	       (unsigned long long)st->torn);
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpipe_t *pa, *pb;
	loco_rpipe_cfg_t cfg;
	uint64_t count, per;
	uint32_t me;
	int64_t t0;
	double s;

	sc_init("rpipe-stream", argc, argv, 280);
	if (argc < 2 || (strcmp(argv[1], "copy") != 0 && strcmp(argv[1], "zc") != 0) ||
	    (argc > 3 && strcmp(argv[3], "push") != 0 && strcmp(argv[3], "pull") != 0))
		SC_FAIL("usage: rpipe-stream copy|zc [COUNT [push|pull]]");
	zc = strcmp(argv[1], "zc") == 0;
	pull = argc > 3 && strcmp(argv[3], "pull") == 0;
	loco_rpipe_cfg_default(&cfg);
	cfg.ring_bytes = RING;
	cfg.mode = pull ? LOCO_RPIPE_PULL : LOCO_RPIPE_PUSH;
	count = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	per = sc_scaled((uint32_t)(count / 2));
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rps", 3, &ch));
	pa = pb = NULL;
	if (me == 1 || me == 2)
		SC_ASSERT_OK(loco_rpipe_create_cfg(ch, "a", 1, 2, &cfg, &pa));
	if (me == 3 || me == 2)
		SC_ASSERT_OK(loco_rpipe_create_cfg(ch, "b", 3, 2, &cfg, &pb));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);
	sc_log("%s, %s: %llu messages per pipe, ring %u B, sizes 1..%u B",
	       zc ? "zero-copy" : "copy", pull ? "pull" : "push", (unsigned long long)per, RING,
	       MAXMSG);

	t0 = sc_now_ns();
	if (me == 2) {
		struct rd ra = {pa, 1, per, {0}}, rb = {pb, 3, per, {0}};
		pthread_t ta, tb;

		SC_ASSERT(pthread_create(&ta, NULL, read_all, &ra) == 0);
		SC_ASSERT(pthread_create(&tb, NULL, read_all, &rb) == 0);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		s = (double)(sc_now_ns() - t0) / 1e9;
		print_stats("reader of a", &ra.st, s);
		print_stats("reader of b", &rb.st, s);
		for (int i = 0; i < 2; i++) {
			loco_rpipe_stats_t *st = i ? &rb.st : &ra.st;

			SC_ASSERT_EQ(st->msgs, per);
			SC_ASSERT(st->wraps > 0);
		}
		sc_sync_put(&sync, BOX_TRN, ra.st.torn + rb.st.torn + 1);
		/* lines landing shuffled: the reader met half-landed messages, and skipped them */
		if (!pull && getenv("LOCO_TCP_SLOW_WRITE") != NULL && ra.st.torn + rb.st.torn == 0)
			SC_FAIL("slow writes on, but no poll met a message not fully landed");
		/* pull: only completed READs are parsed */
		if (pull && ra.st.torn + rb.st.torn != 0)
			SC_FAIL("pull: %llu polls met a message not fully copied",
			        (unsigned long long)(ra.st.torn + rb.st.torn));
		sc_sync_wait(&sync, "streamed", 120000);
		/*
		 * Batches: one return per quarter ring consumed, plus one per ask
		 * of the writer at most (records take payload + 24 B + pad to 8,
		 * and wraps skip at most one record's room each).
		 */
		for (int i = 0; i < 2; i++) {
			loco_rpipe_stats_t *st = i ? &rb.st : &ra.st;
			uint64_t asks = sc_sync_get(&sync, BOX_ASK + (i ? 3 : 1)) - 1;
			uint64_t ring = st->bytes + st->msgs * (LOCO_RPIPE_OVERHEAD + 7) +
			                st->wraps * (MAXMSG + LOCO_RPIPE_OVERHEAD);

			sc_log(
			    "pipe %c: %llu returns for %llu messages (%.1f per return), %llu asks",
			    i ? 'b' : 'a', (unsigned long long)st->returns,
			    (unsigned long long)st->msgs, (double)st->msgs / (double)st->returns,
			    (unsigned long long)asks);
			SC_ASSERT(st->returns > 0);
			if (pull) {
				uint64_t pubs = sc_sync_get(&sync, BOX_PUB + (i ? 3 : 1)) - 1;

				sc_log("pipe %c: %llu tail WRITEs (%.1f messages each)",
				       i ? 'b' : 'a', (unsigned long long)pubs,
				       (double)st->msgs / (double)pubs);
				SC_ASSERT(pubs > 0);
				SC_ASSERT(pubs <= st->returns + ring / (RING / 4) + asks + 1);
			} else {
				SC_ASSERT(st->returns <= ring / (RING / 4) + asks + 1);
			}
		}
	} else {
		loco_rpipe_stats_t st;

		write_all(me == 1 ? pa : pb, me, per);
		s = (double)(sc_now_ns() - t0) / 1e9;
		loco_rpipe_stats(me == 1 ? pa : pb, &st);
		print_stats(me == 1 ? "writer of a" : "writer of b", &st, s);
		SC_ASSERT_EQ(st.msgs, per);
		sc_sync_put(&sync, BOX_ASK + me, st.asks + 1);
		sc_sync_put(&sync, BOX_PUB + me, st.returns + 1);
		sc_sync_wait(&sync, "streamed", 120000);
		if (st.wraps == 0 || st.full == 0 || (!pull && st.asks == 0))
			SC_FAIL("paths not hit: wraps %llu, full %llu, asks %llu",
			        (unsigned long long)st.wraps, (unsigned long long)st.full,
			        (unsigned long long)st.asks);
	}
	sc_sync_wait(&sync, "checked", SC_WAIT_MS);
	sc_log("all %llu messages checked in %.1f s; torn polls at the reader: %llu",
	       (unsigned long long)(2 * per), (double)(sc_now_ns() - t0) / 1e9,
	       (unsigned long long)(sc_sync_get(&sync, BOX_TRN) - 1));
	loco_rpipe_destroy(pa);
	loco_rpipe_destroy(pb);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
