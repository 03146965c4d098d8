/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-kill.c -- one end of a pipe is SIGKILLed mid-stream: the other
 * end's calls fail with -ECONNRESET within the failure bound (no hang),
 * and a pipe between two other nodes streams on unaffected.
 *
 * loco-run -n 3, argument "reader" or "writer": the end that dies; a
 * second argument "pull" makes both pipes pull pipes (LOCO_RPIPE_PULL),
 * with the same errors and bounds asked of them. Node 1
 * spawns node 9 (this program, role "victim-reader" or "victim-writer",
 * with "-pull" in pull mode);
 * nodes 1, 2, 3 and 9 join channel "rpk". Pipe "v" joins node 2 and node
 * 9 (2 -> 9 when the reader dies, 9 -> 2 when the writer dies); pipe "o"
 * runs 3 -> 1 the whole time (node 1 reads it in a thread).
 *
 * Node 2 streams through "v" (checking every message it reads); once it
 * has passed MID messages it says so, and node 1 SIGKILLs node 9 and
 * publishes the kill time. Node 2 goes on until a call fails: it must be
 * -ECONNRESET within 2 failure bounds + 1 s of the kill, and stay so: a
 * WRITE to a dead reader fails at once, but a writer waiting for room or
 * a reader waiting for a message learns it from the view that removes
 * the node (about one bound, 1.0-1.05 s with 1 s here; lock-dead-holder
 * allows the same: a bound + 1 s for the link, as much for the view).
 * Messages read before were all whole and in order. Node 3 then writes
 * 1000 more messages through "o"; node 1 checks all.
 *
 * Then the restart: loco_rpipe_reset() of a live pipe is -EBUSY; node 2
 * resets "v", node 1 starts node 9 again with the same id (a new
 * incarnation, role "again-reader" or "again-writer"), and RESTREAM
 * messages of a new seed go through "v" from message 0, every one
 * checked: nothing of the old stream (still in the reader's ring, or in
 * the writer's shadow) may come through, and none may be missing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/rpipe.h>

#include "rpipe-pattern.h"
#include "scenario.h"

#define VICTIM    9
#define RING      (64u * 1024)
#define MAXMSG    4096u
#define MID       5000u
#define AFTER     1000u
#define TMO       (20 * SC_NS)
#define SLACK_MS  1000
#define BOX_MID   1 /* node 2 passed MID messages */
#define BOX_T     2 /* node 1's kill time */
#define BOX_DONE  3 /* node 2 saw the error */
#define BOX_OTOT  4 /* node 3: messages it writes through "o" in all, + 1 */
#define SEED_V    9
#define SEED_O    3
#define SEED_V2   19
#define RESTREAM  3000u
#define BOX_DONE2 5 /* node 2 streamed RESTREAM messages through the new "v" */

static uint8_t buf[MAXMSG];
static int pull;

/* make -- pipe @name from @writer to @reader, push or pull as the run says */
static int make(loco_channel_t *ch, const char *name, uint32_t writer, uint32_t reader,
                loco_rpipe_t **out)
{
	loco_rpipe_cfg_t cfg;

	loco_rpipe_cfg_default(&cfg);
	cfg.ring_bytes = RING;
	cfg.mode = pull ? LOCO_RPIPE_PULL : LOCO_RPIPE_PUSH;
	return loco_rpipe_create_cfg(ch, name, writer, reader, &cfg, out);
}

/* role -- the spawned node's role: @what, with "-pull" in pull mode */
static const char *role(const char *what)
{
	static char r[32];

	snprintf(r, sizeof(r), "%s%s", what, pull ? "-pull" : "");
	return r;
}

/* stream_write -- message k of @seed through @p: 0 or the error. */
static int stream_write(loco_rpipe_t *p, uint64_t seed, uint64_t k, int64_t tmo)
{
	size_t len = rp_size(seed, k, MAXMSG);

	rp_fill(buf, len, seed, k);
	return loco_rpipe_write(p, buf, len, tmo);
}

/* stream_read -- read message k of @seed from @p and check it: 0 or the error. */
static int stream_read(loco_rpipe_t *p, uint8_t *b, uint64_t seed, uint64_t k, int64_t tmo)
{
	size_t len = 0;
	int ret = loco_rpipe_read(p, b, MAXMSG, &len, tmo);

	if (ret)
		return ret;
	if (len != rp_size(seed, k, MAXMSG) || !rp_check(b, len, seed, k))
		SC_FAIL("message %llu of seed %llu (%zu B): wrong length or content",
		        (unsigned long long)k, (unsigned long long)seed, len);
	return 0;
}

/* victim_main -- node 9: the pipe's other end, streaming until SIGKILLed. */
static noreturn void victim_main(int reader)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_rpipe_t *v;
	uint64_t k = 0;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpk", 4, &ch));
	SC_ASSERT_OK(make(ch, "v", reader ? 2 : VICTIM, reader ? VICTIM : 2, &v));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_log("node %u is the %s of v (pid %d)", loco_manager_node_id(m),
	       reader ? "reader" : "writer", (int)getpid());
	sc_report("ready");
	for (;; k++) {
		int ret =
		    reader ? stream_read(v, buf, SEED_V, k, TMO) : stream_write(v, SEED_V, k, TMO);

		if (ret)
			SC_FAIL("victim: message %llu: %s", (unsigned long long)k,
			        loco_strerror(ret));
	}
}

/* again_main -- node 9 restarted: RESTREAM messages of SEED_V2 through "v", then wait to die. */
static noreturn void again_main(int reader)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_rpipe_t *v;

	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpk", 4, &ch));
	SC_ASSERT_OK(make(ch, "v", reader ? 2 : VICTIM, reader ? VICTIM : 2, &v));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_log("node %u is back (incarnation %llx) as the %s of v", loco_manager_node_id(m),
	       (unsigned long long)loco_manager_incarnation(m), reader ? "reader" : "writer");
	sc_report("ready");
	for (uint64_t k = 0; k < RESTREAM; k++) {
		int ret = reader ? stream_read(v, buf, SEED_V2, k, TMO)
		                 : stream_write(v, SEED_V2, k, TMO);

		if (ret)
			SC_FAIL("again: message %llu: %s", (unsigned long long)k,
			        loco_strerror(ret));
	}
	sc_report("streamed");
	for (;;)
		pause();
}

struct oread {
	loco_rpipe_t *p;
	struct sc_sync *sync;
	uint64_t n;
};

/* o_reader -- node 1: read "o" until node 3's total is known and reached. */
static void *o_reader(void *arg)
{
	static uint8_t b[MAXMSG];
	struct oread *o = arg;
	int64_t end = sc_now_ns() + 60 * SC_NS;

	for (;;) {
		uint64_t tot = sc_sync_get(o->sync, BOX_OTOT);
		int ret;

		if (tot != 0 && o->n == tot - 1)
			return NULL;
		ret = stream_read(o->p, b, SEED_O, o->n, 100000000);
		if (ret == 0)
			o->n++;
		else if (ret != -ETIMEDOUT)
			SC_FAIL("read of o, message %llu: %s", (unsigned long long)o->n,
			        loco_strerror(ret));
		if (sc_now_ns() > end)
			SC_FAIL("o: %llu messages in 60 s, node 3 wrote %llu",
			        (unsigned long long)o->n, (unsigned long long)(tot ? tot - 1 : 0));
	}
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpipe_t *v = NULL, *o = NULL;
	struct sc_sync sync;
	struct oread orr = {0};
	pthread_t ot;
	char line[64];
	uint32_t me, ft;
	uint64_t k = 0;
	int64_t t_kill, t_err;
	pid_t pid = 0;
	int report = -1, reader_dies, ret;
	double ms;

	sc_init("rpipe-kill", argc, argv, 100);
	if (argc > 1 && (strncmp(argv[1], "victim-", 7) == 0 || strncmp(argv[1], "again-", 6) == 0))
		pull = strstr(argv[1], "-pull") != NULL;
	if (argc > 1 && strncmp(argv[1], "victim-", 7) == 0)
		victim_main(strncmp(argv[1], "victim-reader", 13) == 0);
	if (argc > 1 && strncmp(argv[1], "again-", 6) == 0)
		again_main(strncmp(argv[1], "again-reader", 12) == 0);
	if (argc < 2 || (strcmp(argv[1], "reader") != 0 && strcmp(argv[1], "writer") != 0) ||
	    (argc > 2 && strcmp(argv[2], "pull") != 0))
		SC_FAIL("usage: rpipe-kill reader|writer [pull]");
	reader_dies = strcmp(argv[1], "reader") == 0;
	pull = argc > 2;
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	ft = sc_fail_timeout();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpk", 4, &ch));
	if (me == 2)
		SC_ASSERT_OK(make(ch, "v", reader_dies ? 2 : VICTIM, reader_dies ? VICTIM : 2, &v));
	if (me == 1 || me == 3)
		SC_ASSERT_OK(make(ch, "o", 3, 1, &o));
	if (me == 1)
		pid = sc_spawn_node(m, role(reader_dies ? "victim-reader" : "victim-writer"),
		                    VICTIM, &report);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	if (me == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
		orr.p = o;
		orr.sync = &sync;
		SC_ASSERT(pthread_create(&ot, NULL, o_reader, &orr) == 0);
	}
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (me == 1) {
		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_MID) != 0, SC_WAIT_MS, "node 2 mid-stream");
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T, (uint64_t)t_kill);
		sc_log("killed node %u (the %s)", VICTIM, reader_dies ? "reader" : "writer");
	} else if (me == 2) {
		for (;; k++) {
			ret = reader_dies ? stream_write(v, SEED_V, k, TMO)
			                  : stream_read(v, buf, SEED_V, k, TMO);
			if (ret)
				break;
			if (k == MID)
				sc_sync_put(&sync, BOX_MID, 1);
		}
		t_err = sc_now_ns();
		/* the error may come before node 1's mailbox write of the kill time */
		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T) != 0, SC_WAIT_MS, "node 1's kill time");
		t_kill = (int64_t)sc_sync_get(&sync, BOX_T);
		if (t_err < t_kill)
			SC_FAIL("message %llu failed before the kill: %s", (unsigned long long)k,
			        loco_strerror(ret));
		ms = (double)(t_err - t_kill) / 1e6;
		sc_log("%s message %llu: %s, %.1f ms after the kill",
		       reader_dies ? "wrote" : "read", (unsigned long long)k, loco_strerror(ret),
		       ms);
		SC_ASSERT_EQ(ret, -ECONNRESET);
		if (ms > 2.0 * ft + SLACK_MS)
			SC_FAIL("the error came %.1f ms after the kill: over %u ms", ms,
			        2 * ft + SLACK_MS);
		ret = reader_dies ? stream_write(v, SEED_V, k, 0)
		                  : loco_rpipe_read(v, buf, sizeof(buf), &(size_t){0}, 0);
		SC_ASSERT_EQ(ret, -ECONNRESET); /* for good */
		sc_sync_put(&sync, BOX_DONE, 1);
	} else {
		/* node 3: "o" streams on until after node 2's error, then AFTER more */
		for (; sc_sync_get(&sync, BOX_DONE) == 0; k++)
			SC_ASSERT_OK(stream_write(o, SEED_O, k, TMO));
		sc_sync_put(&sync, BOX_OTOT, k + AFTER + 1);
		for (uint64_t end = k + AFTER; k < end; k++)
			SC_ASSERT_OK(stream_write(o, SEED_O, k, TMO));
		sc_log("wrote %llu messages through o, %u after the failure", (unsigned long long)k,
		       AFTER);
	}
	if (me == 1) {
		pthread_join(ot, NULL);
		sc_log("read all %llu messages of o", (unsigned long long)orr.n);
	}
	sc_sync_wait(&sync, "done", 60000);

	/* the restart: node 9 comes back with its id, and "v" starts again */
	if (me == 3)
		SC_ASSERT_EQ(loco_rpipe_reset(o), -EBUSY); /* a live pipe */
	if (me == 2)
		SC_ASSERT_OK(loco_rpipe_reset(v));
	sc_sync_wait(&sync, "reset", SC_WAIT_MS);
	if (me == 1) {
		pid = sc_spawn_node(m, role(reader_dies ? "again-reader" : "again-writer"), VICTIM,
		                    &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		if (reader_dies) { /* node 9 read them all */
			sc_read_line(report, line, sizeof(line), 60000);
			SC_ASSERT(strcmp(line, "streamed") == 0);
		} else {
			SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_DONE2) != 0, 60000,
			              "node 2 read the new stream");
		}
		close(report);
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	} else if (me == 2) {
		loco_rpipe_stats_t st;

		for (k = 0; k < RESTREAM; k++) {
			ret = reader_dies ? stream_write(v, SEED_V2, k, TMO)
			                  : stream_read(v, buf, SEED_V2, k, TMO);
			if (ret)
				SC_FAIL("%s message %llu of the new stream: %s",
				        reader_dies ? "wrote" : "read", (unsigned long long)k,
				        loco_strerror(ret));
		}
		loco_rpipe_stats(v, &st);
		SC_ASSERT_EQ(st.resets, 1);
		sc_log("%s %u messages with node 9's new incarnation after the reset",
		       reader_dies ? "wrote" : "read", RESTREAM);
		sc_sync_put(&sync, BOX_DONE2, 1);
	}
	sc_sync_wait(&sync, "done again", 90000);
	loco_rpipe_destroy(o);
	loco_rpipe_destroy(v);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
