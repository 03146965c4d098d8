/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc-dead.c -- the memory of an allocator that dies comes back to
 * its host, and a host that dies fails later allocations on it with
 * -ECONNRESET (and frees of its blocks too), never silently.
 *
 * loco-run -n 3. Nodes 1..3 hold allocator "ra" in channel "ra-dead" (16
 * slices of 4 KiB, batches of 4; blocks of 256 B, 16 a slice); node 1's
 * heap is used first.
 *
 * 1. Dead allocator. Node 1 spawns node 9 (this program, role "alloc"):
 *    it allocates half of node 1's heap, writes it, reports how many
 *    slices it holds, and waits. Node 2 can then fill only the other half
 *    (-ENOMEM after exactly that), and node 1's table counts node 9's
 *    slices. Node 1 SIGKILLs node 9: once the view removes it, node 1's
 *    reclaim resets its slices (counted in loco_ralloc_stats().reclaimed,
 *    within the failure bound + 3 s of the kill), and node 2 then gets
 *    the whole heap.
 * 1b. Stopped allocator. Node 1 spawns node 11 (role "stopper"): it
 *    takes half the heap too, and node 1 SIGSTOPs it. The view removes
 *    it and node 1 reclaims its slices (node 1 then gets the whole heap
 *    itself); node 1 SIGCONTs it: node 11 learns it was excluded, rejoins
 *    as a new incarnation, finds its old blocks forgotten (free:
 *    -ECONNRESET) and allocates on node 1 again (it reports that); after
 *    its trim node 1's table is all free.
 * 2. Dead host. Node 1 spawns node 10 (role "host"): every base node
 *    allocates blocks on node 10's heap and writes them. Node 1 SIGKILLs
 *    node 10. Once the view removed it, every base node's allocation on
 *    node 10 fails with -ECONNRESET, and keeps failing so (small and run
 *    sizes), and the frees of its old blocks fail with -ECONNRESET too.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <unistd.h>

#include <loco/ralloc.h>

#include "scenario.h"

#define HOST     1
#define ALLOCR   9
#define HOST2    10
#define SLICE    4096u
#define NSLICE   16u
#define HEAP     (NSLICE * SLICE)
#define BLK      256u
#define NBLK     (HEAP / BLK)
#define ON10     20 /* blocks each base node takes on node 10 */
#define TMO      (10 * SC_NS)
#define SLACK_MS 3000
#define STOPPER  11
#define BOX_HELD 1
#define BOX_T    2
#define LONG_MS  60000 /* a stop, a removal, a rejoin and a re-pairing */

static const loco_ralloc_cfg_t cfg = {
    .heap_len = HEAP, .slice_len = SLICE, .batch = 4, .keep = 4, .numa_node = -1};

static loco_rptr_t blocks[NBLK + 1];

static loco_ralloc_stats_t stats(loco_ralloc_t *ra)
{
	loco_ralloc_stats_t st;

	SC_ASSERT_OK(loco_ralloc_stats(ra, &st));
	return st;
}

/* fill_up -- 256-byte blocks on @node until -ENOMEM; how many. */
static unsigned fill_up(loco_ralloc_t *ra, uint32_t node)
{
	unsigned n = 0;
	int ret;

	for (;;) {
		SC_ASSERT(n <= NBLK);
		ret = loco_ralloc_alloc(ra, node, BLK, &blocks[n], TMO);
		if (ret == -ENOMEM)
			return n;
		SC_ASSERT_OK(ret);
		n++;
	}
}

static void free_all(loco_ralloc_t *ra, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		SC_ASSERT_OK(loco_ralloc_free(ra, &blocks[i]));
	SC_ASSERT_OK(loco_ralloc_trim(ra, TMO));
}

static int rejoined; /* atomic: the stopper saw LOCO_EVENT_REJOINED */

static void on_event(loco_manager_t *m, const loco_event_t *ev, void *arg)
{
	(void)m;
	(void)arg;
	if (ev->type == LOCO_EVENT_REJOINED)
		__atomic_store_n(&rejoined, 1, __ATOMIC_RELEASE);
}

/*
 * extra_main -- node 9 (@role 1: takes half of node 1's heap), node 11
 * (@role 2: the same, then is stopped, excluded and rejoins) or node 10
 * (@role 0: a host); then waits for its SIGKILL.
 */
static noreturn void extra_main(int role)
{
	loco_manager_t *m = sc_start();
	loco_channel_t *ch;
	loco_ralloc_t *ra;
	loco_object_t *bobj;
	loco_region_t *buf;
	loco_ack_key_t *ack;
	loco_ralloc_stats_t st;

	SC_ASSERT_OK(loco_manager_set_event_fn(m, on_event, NULL));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ra-dead", 4, &ch));
	SC_ASSERT_OK(loco_ralloc_create(ch, "ra", &cfg, &ra));
	SC_ASSERT_OK(loco_object_create(ch, "src", NULL, NULL, &bobj));
	SC_ASSERT_OK(loco_region_create(bobj, "buf", BLK, 0, &buf));
	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	if (role == 0) {
		sc_log("node %u hosts a heap (pid %d)", loco_manager_node_id(m), (int)getpid());
		sc_report("ready");
		for (;;)
			pause(); /* SIGKILL ends us; the alarm fails us if nobody sends it */
	}
	memset(loco_region_ptr(buf), 0x99, BLK);
	for (unsigned i = 0; i < NBLK / 2; i++) {
		SC_ASSERT_OK(loco_ralloc_alloc(ra, HOST, BLK, &blocks[i], TMO));
		SC_ASSERT_OK(loco_write(buf, 0, &blocks[i].rref, 0, BLK, ack));
	}
	SC_ASSERT_OK(loco_ack_wait(ack, TMO));
	st = stats(ra);
	sc_log("node %u holds %u blocks in %llu slices of node %u (pid %d)",
	       loco_manager_node_id(m), NBLK / 2, (unsigned long long)(st.claimed - st.returned),
	       HOST, (int)getpid());
	sc_report("held %llu", (unsigned long long)(st.claimed - st.returned));
	if (role == 2) {
		unsigned n = 0;
		int64_t dl;
		int ret;

		/* stopped here, excluded, continued: wait for the rejoin and the re-pairing */
		SC_WAIT_UNTIL(__atomic_load_n(&rejoined, __ATOMIC_ACQUIRE), LONG_MS, "the rejoin");
		SC_WAIT_UNTIL(sc_is_peer(ch, HOST) && !loco_channel_partitioned(ch), LONG_MS,
		              "node 1 paired again");
		for (unsigned i = 0; i < NBLK / 2; i++)
			SC_ASSERT_EQ(loco_ralloc_free(ra, &blocks[i]), -ECONNRESET);
		dl = sc_now_ms() + SC_WAIT_MS;
		while (n < 16) {
			ret = loco_ralloc_alloc(ra, HOST, BLK, &blocks[n], TMO);
			if (ret == 0) {
				n++;
				continue;
			}
			if (sc_now_ms() >= dl)
				SC_FAIL("allocation on node 1 after the rejoin: %s",
				        loco_strerror(ret));
			sc_sleep_ms(10);
		}
		free_all(ra, n);
		sc_log("node %u: rejoined; its old blocks forgotten, %u new ones on node %u",
		       loco_manager_node_id(m), n, HOST);
		sc_report("rejoined %u", n);
	}
	for (;;)
		pause(); /* SIGKILL ends us; the alarm fails us if nobody sends it */
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_ralloc_t *ra;
	struct sc_sync sync;
	loco_ralloc_stats_t st;
	loco_rptr_t mine[ON10], p;
	char line[64];
	unsigned long long held = 0;
	uint32_t me, ft;
	unsigned n;
	int report = -1, ret;
	int64_t t_kill;
	pid_t pid = 0;

	sc_init("ralloc-dead", argc, argv, 170);
	if (argc > 1 && strcmp(argv[1], "alloc") == 0)
		extra_main(1);
	if (argc > 1 && strcmp(argv[1], "host") == 0)
		extra_main(0);
	if (argc > 1 && strcmp(argv[1], "stopper") == 0)
		extra_main(2);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	ft = sc_fail_timeout();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ra-dead", 3, &ch));
	SC_ASSERT_OK(loco_ralloc_create(ch, "ra", &cfg, &ra));
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* 1. an allocator that dies holding half the heap */
	if (me == 1) {
		pid = sc_spawn_node(m, "alloc", ALLOCR, &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(sscanf(line, "held %llu", &held) == 1);
		close(report);
		sc_sync_put(&sync, BOX_HELD, held);
	}
	sc_sync_wait(&sync, "node 9 holds half", SC_WAIT_MS);
	held = sc_sync_get(&sync, BOX_HELD);
	SC_ASSERT(held >= NSLICE / 2 && held < NSLICE);
	if (me == 2) {
		n = fill_up(ra, HOST);
		sc_log("node 2 got %u blocks beside node 9's %llu slices", n, held);
		SC_ASSERT_EQ(n, (NSLICE - held) * (SLICE / BLK));
		free_all(ra, n);
	}
	sc_sync_wait(&sync, "node 2 filled the rest", SC_WAIT_MS);
	if (me == HOST) {
		SC_WAIT_UNTIL(stats(ra).host_used == held, SC_WAIT_MS, "node 2's give-backs");
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		SC_WAIT_UNTIL(stats(ra).reclaimed == held, (int)(ft + SLACK_MS),
		              "node 9's slices reclaimed");
		st = stats(ra);
		sc_log("node 9's %llu slices reclaimed %.0f ms after its kill; %llu of %llu used",
		       (unsigned long long)st.reclaimed, (double)(sc_now_ns() - t_kill) / 1e6,
		       (unsigned long long)st.host_used, (unsigned long long)st.host_slices);
		SC_ASSERT_EQ(st.host_used, 0);
		SC_ASSERT(!sc_is_member(m, ALLOCR));
	}
	sc_sync_wait(&sync, "reclaimed", SC_WAIT_MS + (int)ft);
	if (me == 2) {
		n = fill_up(ra, HOST);
		sc_log("after the reclaim node 2 got %u blocks: the whole heap", n);
		SC_ASSERT_EQ(n, NBLK);
		free_all(ra, n);
	}
	sc_sync_wait(&sync, "phase 1", SC_WAIT_MS);

	/* 1b. an allocator that is stopped, excluded, continued: it rejoins */
	if (me == 1) {
		uint64_t rec0 = stats(ra).reclaimed;
		unsigned got;

		pid = sc_spawn_node(m, "stopper", STOPPER, &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(sscanf(line, "held %llu", &held) == 1);
		t_kill = sc_now_ns();
		sc_stop(pid);
		SC_WAIT_UNTIL(stats(ra).reclaimed == rec0 + held, (int)(ft + SLACK_MS),
		              "node 11's slices reclaimed");
		sc_log("stopped node 11's %llu slices reclaimed %.0f ms after its stop", held,
		       (double)(sc_now_ns() - t_kill) / 1e6);
		n = fill_up(ra, HOST);
		SC_ASSERT_EQ(n, NBLK);
		free_all(ra, n);
		SC_ASSERT_OK(kill(pid, SIGCONT));
		sc_read_line(report, line, sizeof(line), LONG_MS);
		SC_ASSERT(sscanf(line, "rejoined %u", &got) == 1 && got == 16);
		close(report);
		SC_WAIT_UNTIL(stats(ra).host_used == 0, SC_WAIT_MS, "node 11's give-backs");
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_log("node 11 rejoined and allocated again; node 1's heap all free");
	}
	sc_sync_wait(&sync, "phase 1b", LONG_MS);

	/* 2. a host that dies */
	if (me == 1) {
		pid = sc_spawn_node(m, "host", HOST2, &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
	}
	sc_sync_wait(&sync, "node 10 up", SC_WAIT_MS);
	SC_WAIT_UNTIL(sc_is_peer(ch, HOST2), SC_WAIT_MS, "node 10 to pair");
	for (unsigned i = 0; i < ON10; i++) {
		int64_t dl = sc_now_ms() + SC_WAIT_MS;

		while ((ret = loco_ralloc_alloc(ra, HOST2, BLK, &mine[i], TMO)) == -ENOENT &&
		       sc_now_ms() < dl)
			sc_sleep_ms(1); /* its heap is announced with its channel: soon */
		SC_ASSERT_OK(ret);
	}
	sc_sync_wait(&sync, "blocks on node 10", SC_WAIT_MS);
	if (me == 1) {
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T, (uint64_t)t_kill);
	}
	SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T) != 0, SC_WAIT_MS, "node 1's kill time");
	t_kill = (int64_t)sc_sync_get(&sync, BOX_T);
	/* the shadow may serve a block until the view removes the host; never after */
	for (;;) {
		ret = loco_ralloc_alloc(ra, HOST2, BLK, &p, TMO);
		if (ret == -ECONNRESET)
			break;
		if (ret == 0)
			ret = loco_ralloc_free(ra, &p);
		if (ret != 0 && ret != -ECONNRESET && ret != -ENOMEM)
			SC_FAIL("allocation on the dying host: %s", loco_strerror(ret));
		if (sc_now_ns() - t_kill > (int64_t)(ft + SLACK_MS) * 1000000)
			SC_FAIL("node 10 still serves allocations %.0f ms after its kill",
			        (double)(sc_now_ns() - t_kill) / 1e6);
		sc_sleep_ms(5);
	}
	sc_log("allocations on node 10 fail with -ECONNRESET %.0f ms after its kill",
	       (double)(sc_now_ns() - t_kill) / 1e6);
	SC_WAIT_UNTIL(!sc_is_member(m, HOST2), (int)(ft + SLACK_MS), "node 10's removal");
	sc_sleep_ms(100); /* sticky */
	SC_ASSERT_EQ(loco_ralloc_alloc(ra, HOST2, BLK, &p, TMO), -ECONNRESET);
	SC_ASSERT_EQ(loco_ralloc_alloc(ra, HOST2, 3 * SLICE, &p, TMO), -ECONNRESET);
	for (unsigned i = 0; i < ON10; i++)
		SC_ASSERT_EQ(loco_ralloc_free(ra, &mine[i]), -ECONNRESET);
	/* node 1's heap still works */
	SC_ASSERT_OK(loco_ralloc_alloc(ra, HOST, BLK, &p, TMO));
	SC_ASSERT_OK(loco_ralloc_free(ra, &p));
	SC_ASSERT_OK(loco_ralloc_trim(ra, TMO));
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	if (me == HOST)
		SC_WAIT_UNTIL(stats(ra).host_used == 0, SC_WAIT_MS, "node 1's heap all free");
	sc_sync_wait(&sync, "end", SC_WAIT_MS);
	loco_ralloc_destroy(ra);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
