/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * channel-late-join.c -- a node joins a channel that is already running,
 * exchanges data with a member both ways, and leaves again.
 *
 * Nodes 1..3 (loco-run -n 3) join channel "c", which holds an object
 * "obs" whose peer_join/peer_leave callbacks count events per node, and
 * an 8-byte-slot region "x" of that object. Node 1 then spawns node 4
 * (this program with argument "late"; LOCO_JOIN = node 1's address), which
 * joins "c" expecting 4 nodes. Checks:
 *   - nodes 1..3 see exactly one peer_join(4), and 4 among the peers;
 *   - node 4 sees peers {1, 2, 3} and one peer_join for each;
 *   - node 4 and node 2 write a value into each other's region
 *     (loco_write + ack key), and node 4 reads a third value from node
 *     2's region (loco_read);
 *   - node 4 leaves gracefully (destroys its channel, loco_fini): nodes
 *     1..3 see exactly one peer_leave(4), 4 leaves their peers and
 *     their member tables, and no other node left;
 *   - node 4 exits 0; node 1 reaps it by PID (killed on timeout).
 * Nodes coordinate by polling state (bounded) and through the sc-sync
 * barrier, never by sleeping.
 */
#include <stdio.h>
#include <string.h>

#include "scenario.h"

#define LATE 4

/* slots (8 bytes each) of region "x" */
enum {
	SLOT_FROM_2 = 2,   /* node 2 writes V_2 here on node 4 */
	SLOT_FROM_4 = 4,   /* node 4 writes V_4 here on node 2 */
	SLOT_READ_ME = 10, /* node 2 keeps V_READ here; node 4 reads it */
	SLOT_DONE = 11,    /* nodes 1..3 set it (locally) once they checked node 4 */
	SLOT_SCRATCH = 12, /* node 4 reads SLOT_DONE into here */
	SLOTS = 16,
};

#define V_2    0x2222000000000002ull
#define V_4    0x4444000000000004ull
#define V_READ 0x5eadbeef00000010ull

struct counts {
	uint32_t joins[SC_MAX_NODES];  /* atomic: written on the progress thread */
	uint32_t leaves[SC_MAX_NODES]; /* atomic */
};

static struct counts ev;

static void on_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	struct counts *c = arg;

	(void)view;

	(void)obj;
	if (node < SC_MAX_NODES)
		__atomic_fetch_add(&c->joins[node], 1, __ATOMIC_RELEASE);
}

static void on_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	struct counts *c = arg;

	(void)view;

	(void)obj;
	if (node < SC_MAX_NODES)
		__atomic_fetch_add(&c->leaves[node], 1, __ATOMIC_RELEASE);
}

static uint32_t joins(uint32_t node)
{
	return __atomic_load_n(&ev.joins[node], __ATOMIC_ACQUIRE);
}

static uint32_t leaves(uint32_t node)
{
	return __atomic_load_n(&ev.leaves[node], __ATOMIC_ACQUIRE);
}

static const struct loco_object_ops obs_ops = {.peer_join = on_join, .peer_leave = on_leave};

struct chan_c {
	loco_channel_t *ch;
	loco_object_t *obs;
	loco_region_t *x;
	loco_ack_key_t *ack;
};

static volatile uint64_t *slot(struct chan_c *c, unsigned i)
{
	return (volatile uint64_t *)loco_region_ptr(c->x) + i;
}

static uint64_t slot_get(struct chan_c *c, unsigned i)
{
	return __atomic_load_n(slot(c, i), __ATOMIC_ACQUIRE);
}

static void chan_c_open(struct chan_c *c, loco_manager_t *m, uint32_t nodes)
{
	SC_ASSERT_OK(loco_channel_create(m, NULL, "c", nodes, &c->ch));
	SC_ASSERT_OK(loco_object_create(c->ch, "obs", &obs_ops, &ev, &c->obs));
	SC_ASSERT_OK(loco_region_create(c->obs, "x", SLOTS * 8,
	                                LOCO_ACCESS_READ | LOCO_ACCESS_WRITE, &c->x));
	SC_ASSERT_OK(loco_ack_key_create(m, &c->ack));
	SC_ASSERT_OK(loco_channel_join(c->ch, (int64_t)SC_WAIT_MS * 1000000));
}

static void chan_c_close(struct chan_c *c)
{
	loco_ack_key_destroy(c->ack);
	loco_object_destroy(c->obs);
	SC_ASSERT_OK(loco_channel_destroy(c->ch));
}

/* op -- post a write or read of slot @i to the same slot at @node, wait for its ack. */
static void op(struct chan_c *c, int write, uint32_t node, unsigned i, unsigned local_i)
{
	loco_rref_t r;
	int ret;

	SC_ASSERT_OK(loco_region_remote(c->x, node, &r));
	SC_ASSERT(r.node == node && r.len == SLOTS * 8);
	ret = write ? loco_write(c->x, local_i * 8, &r, i * 8, 8, c->ack)
	            : loco_read(c->x, local_i * 8, &r, i * 8, 8, c->ack);
	if (ret)
		SC_FAIL("%s slot %u at node %u: %s", write ? "write" : "read", i, node,
		        loco_strerror(ret));
	ret = loco_ack_wait(c->ack, 10 * SC_NS);
	if (ret)
		SC_FAIL("ack of the %s at node %u: %s", write ? "write" : "read", node,
		        loco_strerror(ret));
}

/* late_main -- node 4: join "c" late, trade values with node 2, leave gracefully. */
static int late_main(void)
{
	static const uint32_t want[] = {1, 2, 3};
	loco_manager_t *m = sc_start();
	struct chan_c c;
	int64_t t0;

	SC_ASSERT_EQ(loco_manager_node_id(m), LATE);
	t0 = sc_now_ms();
	chan_c_open(&c, m, 4);
	SC_ASSERT(sc_peers_are(c.ch, want, 3));
	for (uint32_t n = 1; n <= 3; n++)
		SC_WAIT_UNTIL(joins(n) == 1, SC_WAIT_MS, "peer_join of an early node");
	sc_log("late node paired with {1, 2, 3} in %lld ms", (long long)(sc_now_ms() - t0));

	/* node 4 -> node 2 */
	__atomic_store_n(slot(&c, SLOT_FROM_4), V_4, __ATOMIC_RELEASE);
	op(&c, 1, 2, SLOT_FROM_4, SLOT_FROM_4);
	/* node 2 -> node 4 */
	SC_WAIT_UNTIL(slot_get(&c, SLOT_FROM_2) == V_2, SC_WAIT_MS, "node 2's value");
	/* read node 2's region */
	op(&c, 0, 2, SLOT_READ_ME, SLOT_READ_ME);
	SC_ASSERT_EQ(slot_get(&c, SLOT_READ_ME), V_READ);
	/*
	 * Leave only once every early node has checked our arrival and has
	 * no operation in flight to us: each says so in its own memory, which
	 * we read (a read completes here, so nothing of ours is outstanding
	 * either).
	 */
	for (uint32_t n = 1; n <= 3; n++) {
		for (int64_t dl = sc_now_ms() + SC_WAIT_MS;; sc_sleep_ms(1)) {
			op(&c, 0, n, SLOT_DONE, SLOT_SCRATCH);
			if (slot_get(&c, SLOT_SCRATCH) == 1)
				break;
			if (sc_now_ms() >= dl)
				SC_FAIL("node %u did not finish its checks within %d ms", n,
				        SC_WAIT_MS);
		}
	}
	SC_ASSERT_EQ(leaves(1) + leaves(2) + leaves(3), 0);
	sc_log("late node traded values with node 2 both ways; leaving");
	chan_c_close(&c);
	loco_fini(m);
	return SC_EXIT_PASS;
}

int main(int argc, char **argv)
{
	uint32_t me, others[2], with4[3], all4[4] = {1, 2, 3, LATE}, ids[SC_MAX_NODES];
	char buf[128];
	loco_manager_t *m;
	struct sc_sync sync;
	struct chan_c c;
	pid_t late = 0;
	int64_t t_spawn = 0, t_join, t_leave;
	int no = 0, n;

	sc_init("channel-late-join", argc, argv, 90);
	if (argc > 1 && strcmp(argv[1], "late") == 0)
		return late_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());

	m = sc_start();
	me = loco_manager_node_id(m);
	for (uint32_t i = 1; i <= 3; i++)
		if (i != me)
			others[no++] = i;
	memcpy(with4, others, sizeof(others));
	with4[2] = LATE;

	sc_sync_open(&sync, m, 3);
	chan_c_open(&c, m, 3);
	SC_ASSERT(sc_peers_are(c.ch, others, 2));
	if (me == 2)
		__atomic_store_n(slot(&c, SLOT_READ_ME), V_READ, __ATOMIC_RELEASE);
	sc_sync_wait(&sync, "channel c paired", SC_WAIT_MS);

	if (me == 1) {
		char join[96];
		const char *env[] = {join, "LOCO_NODE_ID=4", "LOCO_ADDR=127.0.0.1:0", NULL};

		snprintf(join, sizeof(join), "LOCO_JOIN=%s", loco_manager_addr(m));
		t_spawn = sc_now_ms();
		late = sc_spawn("late", env, NULL);
		sc_log("spawned late node 4 (pid %d) joining through %s", (int)late,
		       loco_manager_addr(m));
	}

	/* every early node sees node 4 arrive: one peer_join, a peer, a member */
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; !(joins(LATE) >= 1 && sc_is_peer(c.ch, LATE));
	     sc_sleep_ms(1))
		if (sc_now_ms() >= dl)
			SC_FAIL("no peer_join(4) in channel c within %d ms: %u join(s), %u "
			        "leave(s), %s a peer, %s a member",
			        SC_WAIT_MS, joins(LATE), leaves(LATE),
			        sc_is_peer(c.ch, LATE) ? "is" : "not",
			        sc_is_member(m, LATE) ? "is" : "not");
	t_join = sc_now_ms();
	SC_ASSERT_EQ(joins(LATE), 1);
	n = loco_channel_peers(c.ch, ids, SC_MAX_NODES);
	if (!sc_peers_are(c.ch, with4, 3))
		SC_FAIL("channel c: peers %s after node 4 joined",
		        sc_ids_str(ids, n, buf, sizeof(buf)));
	SC_ASSERT(sc_members_are(m, all4, 4));

	if (me == 2) {
		/* node 2 -> node 4, then wait for node 4's value */
		__atomic_store_n(slot(&c, SLOT_FROM_2), V_2, __ATOMIC_RELEASE);
		op(&c, 1, LATE, SLOT_FROM_2, SLOT_FROM_2);
		SC_WAIT_UNTIL(slot_get(&c, SLOT_FROM_4) == V_4, SC_WAIT_MS, "node 4's value");
		sc_log("node 4 and node 2 traded values both ways");
	}
	/* node 4 may leave now (it reads this) */
	__atomic_store_n(slot(&c, SLOT_DONE), 1, __ATOMIC_RELEASE);

	/* node 4 leaves gracefully: one peer_leave(4), gone from peers and members */
	SC_WAIT_UNTIL(leaves(LATE) >= 1 && !sc_is_peer(c.ch, LATE) && !sc_is_member(m, LATE),
	              SC_WAIT_MS, "node 4 to leave channel c and the members");
	t_leave = sc_now_ms();
	if (me == 1) {
		int st = sc_reap(late, 10000);

		if (st != 0)
			SC_FAIL("late node 4 exited with status %d", st);
	}
	SC_ASSERT(sc_peers_are(c.ch, others, 2));
	SC_ASSERT_EQ(joins(LATE), 1);
	SC_ASSERT_EQ(leaves(LATE), 1);
	for (uint32_t i = 1; i <= 3; i++) {
		SC_ASSERT_EQ(leaves(i), 0);
		SC_ASSERT_EQ(joins(i), i == me ? 0 : 1);
	}

	sc_sync_wait(&sync, "all checked", SC_WAIT_MS);
	/* a stray late event would show here */
	SC_ASSERT_EQ(joins(LATE), 1);
	SC_ASSERT_EQ(leaves(LATE), 1);
	if (me == 1)
		sc_log("node 4 paired %lld ms after its spawn; it left %lld ms later",
		       (long long)(t_join - t_spawn), (long long)(t_leave - t_join));
	else
		sc_log("saw node 4 join and leave");
	chan_c_close(&c);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
