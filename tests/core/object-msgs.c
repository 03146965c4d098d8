/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * object-msgs.c -- what an object author builds per-peer state with
 * (loco_channel(3), loco 0.8): a channel that announces far more than the
 * 64 entries of one CHAN message, object messages, and unlisted regions
 * handed over in a message.
 *
 * Run by loco-run -n 2, on each fabric. Both nodes:
 *  1. make object "big" with REGIONS listed regions and PARAMS agreed
 *     parameters (the announcement takes several CHAN pages), and object
 *     "talk" with a message function, a slow peer_join (so that the
 *     peer's first messages arrive while it runs or waits) and a
 *     peer_leave, all three logging into one event log, and an unlisted
 *     region "box";
 *  2. join, then resolve every region of the peer's "big" and READ the
 *     word its owner wrote in each: all REGIONS of them; then make object
 *     "late" with LATE regions, each announcing the channel again, and
 *     resolve the peer's;
 *  3. check loco_object_send's refusals: -EMSGSIZE, -ENOTCONN to itself
 *     and to a node that is not a member;
 *  4. send MSGS messages of lengths 0 .. LOCO_OBJECT_MSG_MAX to the peer,
 *     each carrying its number and a pattern, then wait for the peer's
 *     MSGS: in order, intact, and after the peer's peer_join in the log;
 *  5. node 2 gives node 1 the reference of its unlisted "box" in a
 *     message (loco_region_remote() on it gives -ENOENT on both nodes);
 *     node 1 WRITEs a pattern into it, READs it back, adds to one word
 *     (FAA) and swaps another (CAS), and says so in a message; node 2
 *     finds all of it in its memory;
 *  6. node 2 sends TAIL more messages and leaves the channel at once;
 *     node 1 must see all TAIL of them before node 2's peer_leave.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <loco.h>

#include "scenario.h"

#define REGIONS 200
#define LATE    70 /* regions of an object made after the join */
#define PARAMS  6
#define MSGS    300
#define TAIL    50
#define BOX     4096
#define SLOW_MS 200

enum ev_kind {
	EV_JOIN = 1,
	EV_MSG,
	EV_LEAVE,
};

struct ev {
	int kind;
	uint32_t node;
	uint32_t seq; /* EV_MSG: the message's number (first word) */
	uint32_t len;
	int intact; /* EV_MSG: the pattern checked out */
	uint32_t tag;
	loco_rref_t rref; /* a "box" message's reference */
};

#define LOG_MAX (2 * MSGS + 2 * TAIL + 16)

static struct ev evlog[LOG_MAX];
static unsigned nev; /* atomic: entries published (the progress thread appends) */

enum tag {
	TAG_DATA = 1, /* seq, len, pattern */
	TAG_BOX,      /* a reference to an unlisted region */
	TAG_DONE,     /* node 1 wrote and read back the box */
	TAG_TAIL,     /* a message sent just before leaving */
};

struct msg_head {
	uint32_t tag;
	uint32_t seq;
	loco_rref_t rref;
};

static uint8_t pat(uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 31 + i * 7 + 1);
}

/* pat_word -- the 8 bytes of pattern 77 at @off, as the word they make (little-endian). */
static uint64_t pat_word(size_t off)
{
	uint64_t w = 0;

	for (size_t i = 0; i < 8; i++)
		w |= (uint64_t)pat(77, off + i) << (8 * i);
	return w;
}

static void ev_add(const struct ev *e)
{
	unsigned n = __atomic_load_n(&nev, __ATOMIC_RELAXED);

	if (n == LOG_MAX)
		SC_FAIL("event log full");
	evlog[n] = *e;
	__atomic_store_n(&nev, n + 1, __ATOMIC_RELEASE); /* one writer: the progress thread */
}

static void on_join(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	struct timespec ts = {.tv_nsec = SLOW_MS * 1000000L};

	(void)obj;
	(void)view;
	(void)arg;
	nanosleep(&ts, NULL); /* the peer's first messages arrive meanwhile */
	ev_add(&(struct ev){.kind = EV_JOIN, .node = node});
}

static void on_leave(loco_object_t *obj, uint32_t node, uint64_t view, void *arg)
{
	(void)obj;
	(void)view;
	(void)arg;
	ev_add(&(struct ev){.kind = EV_LEAVE, .node = node});
}

static void on_msg(loco_object_t *obj, uint32_t node, const void *msg, size_t len, void *arg)
{
	struct ev e = {.kind = EV_MSG, .node = node, .len = (uint32_t)len, .intact = 1};
	const uint8_t *b = msg;
	struct msg_head h;

	(void)obj;
	if (arg != (void *)&evlog)
		SC_FAIL("message function called with another argument");
	if (len < 8) { /* a DATA message shorter than its head: seq in the length */
		e.tag = TAG_DATA;
		e.seq = (uint32_t)len;
		ev_add(&e);
		return;
	}
	memset(&h, 0, sizeof(h));
	memcpy(&h, b, len < sizeof(h) ? len : sizeof(h));
	e.tag = h.tag;
	e.seq = h.seq;
	e.rref = h.rref;
	if (h.tag == TAG_DATA)
		for (size_t i = 8; i < len; i++)
			if (b[i] != pat(h.seq, i))
				e.intact = 0;
	ev_add(&e);
}

static const struct loco_object_ops talk_ops = {.peer_join = on_join, .peer_leave = on_leave};

/* msg_len -- the length of DATA message @seq: 0 .. LOCO_OBJECT_MSG_MAX, both ends included. */
static size_t msg_len(uint32_t seq)
{
	if (seq < 8)
		return seq; /* short ones: the receiver reads the number from the length */
	if (seq == MSGS - 1)
		return LOCO_OBJECT_MSG_MAX;
	return 8 + (seq * 37) % (LOCO_OBJECT_MSG_MAX - 8);
}

static void send_data(loco_object_t *talk, uint32_t peer, uint32_t seq)
{
	static uint8_t buf[LOCO_OBJECT_MSG_MAX];
	size_t len = msg_len(seq);
	struct msg_head h = {.tag = TAG_DATA, .seq = seq};
	int ret;

	for (size_t i = 0; i < len; i++)
		buf[i] = pat(seq, i);
	if (len >= 8)
		memcpy(buf, &h, 8);
	for (int tries = 0; (ret = loco_object_send(talk, peer, buf, len)) == -ENOBUFS; tries++) {
		if (tries == 5000)
			SC_FAIL("the control connection stays full");
		sc_sleep_ms(1);
	}
	SC_ASSERT_OK(ret);
}

static void send_head(loco_object_t *talk, uint32_t peer, uint32_t tag, uint32_t seq,
                      const loco_rref_t *rref)
{
	struct msg_head h = {.tag = tag, .seq = seq};

	if (rref != NULL)
		h.rref = *rref;
	SC_ASSERT_OK(loco_object_send(talk, peer, &h, sizeof(h)));
}

/* count -- events from @node of @kind (and @tag for messages) in the log. */
static unsigned count(uint32_t node, int kind, uint32_t tag)
{
	unsigned n = __atomic_load_n(&nev, __ATOMIC_ACQUIRE), c = 0;

	for (unsigned i = 0; i < n; i++)
		if (evlog[i].node == node && evlog[i].kind == kind &&
		    (kind != EV_MSG || evlog[i].tag == tag))
			c++;
	return c;
}

/* find -- the first event from @node of @kind (and @tag), or -1. */
static int find(uint32_t node, int kind, uint32_t tag)
{
	unsigned n = __atomic_load_n(&nev, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++)
		if (evlog[i].node == node && evlog[i].kind == kind &&
		    (kind != EV_MSG || evlog[i].tag == tag))
			return (int)i;
	return -1;
}

/* check_big -- resolve each of the peer's REGIONS regions and READ the word its owner put there. */
static void check_big(loco_manager_t *m, loco_object_t *big, loco_region_t **regs,
                      loco_region_t *scratch, uint32_t peer)
{
	volatile uint64_t *got = loco_region_ptr(scratch);
	loco_ack_key_t *ack;
	int ret;

	SC_ASSERT_OK(loco_ack_key_create(m, &ack));
	ret = loco_object_sync(big, 20 * SC_NS);
	SC_ASSERT_EQ(ret, 1);
	for (unsigned i = 0; i < REGIONS; i++) {
		loco_rref_t r;

		SC_ASSERT_OK(loco_region_remote(regs[i], peer, &r));
		SC_ASSERT_EQ(r.node, peer);
		SC_ASSERT_EQ(r.len, 64 + i);
		ret = loco_read(scratch, i * 8, &r, 0, 8, ack);
		if (ret == -EAGAIN) {
			SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
			ret = loco_read(scratch, i * 8, &r, 0, 8, ack);
		}
		SC_ASSERT_OK(ret);
	}
	SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
	for (unsigned i = 0; i < REGIONS; i++)
		if (got[i] != ((uint64_t)peer << 32 | i))
			SC_FAIL("region %u of node %u reads %#llx", i, peer,
			        (unsigned long long)got[i]);
	loco_ack_key_destroy(ack);
	sc_log("all %d regions of node %u's object resolved and read (and %d parameters agreed)",
	       REGIONS, peer, PARAMS);
}

/*
 * check_late -- LATE regions of an object made after the join: every one
 * re-announces the channel (now over CHAN pages) to the paired peer,
 * which replaces what it had only once the last page came.
 */
static loco_object_t *check_late(loco_channel_t *ch, uint32_t peer)
{
	loco_region_t *late[LATE];
	loco_object_t *obj;
	char name[32];
	int ret;

	SC_ASSERT_OK(loco_object_create(ch, "late", NULL, NULL, &obj));
	for (unsigned i = 0; i < LATE; i++) {
		snprintf(name, sizeof(name), "l%u", i);
		SC_ASSERT_OK(loco_region_create(obj, name, 128, LOCO_ACCESS_WRITE, &late[i]));
	}
	ret = loco_object_sync(obj, 20 * SC_NS);
	SC_ASSERT_EQ(ret, 1);
	for (unsigned i = 0; i < LATE; i++) {
		loco_rref_t r;

		/* the peer's last region may come a little after the sync saw the first */
		SC_WAIT_UNTIL(loco_region_remote(late[i], peer, &r) == 0, SC_WAIT_MS,
		              "a late region of the peer");
		SC_ASSERT_EQ(r.len, 128);
	}
	sc_log("all %d regions of an object made after the join resolved", LATE);
	return obj; /* kept to the end: the peer may still resolve ours */
}

/* check_data -- the peer's MSGS DATA messages: all there, in order, intact, after its join. */
static void check_data(uint32_t peer)
{
	unsigned n, next = 0;
	int join;

	SC_WAIT_UNTIL(count(peer, EV_MSG, TAG_DATA) == MSGS, SC_WAIT_MS, "the peer's messages");
	join = find(peer, EV_JOIN, 0);
	SC_ASSERT(join >= 0);
	n = __atomic_load_n(&nev, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++) {
		const struct ev *e = &evlog[i];

		if (e->node != peer || e->kind != EV_MSG || e->tag != TAG_DATA)
			continue;
		if ((int)i < join)
			SC_FAIL("message %u of node %u came before its peer_join", e->seq, peer);
		if (e->seq != next || e->len != msg_len(next) || !e->intact)
			SC_FAIL("message %u of node %u: number %u, %u bytes (want %zu), %s", next,
			        peer, e->seq, e->len, msg_len(next),
			        e->intact ? "intact" : "damaged");
		next++;
	}
	sc_log("%u messages of node %u in order and intact, after its peer_join", next, peer);
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *big, *talk, *late;
	loco_region_t *regs[REGIONS], *scratch, *box;
	static uint8_t over[LOCO_OBJECT_MSG_MAX + 1];
	struct sc_sync sync;
	loco_rref_t r;
	uint32_t me, peer;
	char name[32];

	sc_init("object-msgs", argc, argv, 80);
	if (sc_nodes() != 2)
		SC_FAIL("run with 2 nodes");
	m = sc_start();
	me = loco_manager_node_id(m);
	peer = me == 1 ? 2 : 1;
	sc_sync_open(&sync, m, 2);

	/* 1 */
	SC_ASSERT_OK(loco_channel_create(m, NULL, "om", 2, &ch));
	SC_ASSERT_OK(loco_object_create(ch, "big", NULL, NULL, &big));
	for (unsigned i = 0; i < REGIONS; i++) {
		snprintf(name, sizeof(name), "r%u", i);
		SC_ASSERT_OK(loco_region_create(big, name, 64 + i, LOCO_ACCESS_READ, &regs[i]));
		*(uint64_t *)loco_region_ptr(regs[i]) = (uint64_t)me << 32 | i;
	}
	for (unsigned i = 0; i < PARAMS; i++) {
		snprintf(name, sizeof(name), "p%u", i);
		SC_ASSERT_OK(loco_object_agree(big, name, 1000 + i));
	}
	SC_ASSERT_OK(loco_region_create(big, "scratch", REGIONS * 8 + BOX + 16, 0, &scratch));
	SC_ASSERT_OK(loco_object_create(ch, "talk", &talk_ops, NULL, &talk));
	SC_ASSERT_OK(loco_object_on_msg(talk, on_msg, &evlog));
	SC_ASSERT_OK(loco_region_create(talk, "box", BOX,
	                                LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC |
	                                    LOCO_ACCESS_UNLISTED,
	                                &box));

	/* 2 */
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	check_big(m, big, regs, scratch, peer);

	/* 2b: an object made after the join: each of its regions announces the channel again */
	late = check_late(ch, peer);

	/* 3 */
	SC_ASSERT_EQ(loco_object_send(talk, peer, over, sizeof(over)), -EMSGSIZE);
	SC_ASSERT_EQ(loco_object_send(talk, me, over, 8), -ENOTCONN);
	SC_ASSERT_EQ(loco_object_send(talk, 40, over, 8), -ENOTCONN);
	SC_ASSERT_EQ(loco_region_remote(box, peer, &r), -ENOENT);
	SC_ASSERT_EQ(loco_region_remote(box, me, &r), -ENOENT);

	/* 4: the peer may still be in its slow peer_join for us: the messages queue behind it */
	for (uint32_t s = 0; s < MSGS; s++)
		send_data(talk, peer, s);
	check_data(peer);
	sc_sync_wait(&sync, "messages", SC_WAIT_MS);

	/* 5 */
	if (me == 2) {
		volatile uint8_t *mem = loco_region_ptr(box);

		SC_ASSERT_OK(loco_region_rref(box, &r));
		SC_ASSERT_EQ(r.node, 2);
		send_head(talk, peer, TAG_BOX, 0, &r);
		SC_WAIT_UNTIL(count(peer, EV_MSG, TAG_DONE) == 1, SC_WAIT_MS, "node 1's done");
		for (unsigned i = 0; i < BOX - 16; i++)
			if (mem[i] != pat(77, i))
				SC_FAIL("byte %u of the unlisted region is %#x, not %#x", i, mem[i],
				        pat(77, i));
		SC_ASSERT(pat_word(BOX - 16) + 5 == *(volatile uint64_t *)(mem + BOX - 16));
		SC_ASSERT(*(volatile uint64_t *)(mem + BOX - 8) == 0x1234);
		sc_log("node 1 wrote all %d bytes of the unlisted region it was handed, and added "
		       "to and swapped a word of it",
		       BOX);
	} else {
		uint8_t *src = loco_region_ptr(scratch);
		loco_ack_key_t *ack;
		const struct ev *e;

		SC_WAIT_UNTIL(count(peer, EV_MSG, TAG_BOX) == 1, SC_WAIT_MS, "node 2's box");
		e = &evlog[find(peer, EV_MSG, TAG_BOX)];
		SC_ASSERT_EQ(e->rref.node, 2);
		SC_ASSERT_EQ(e->rref.len, BOX);
		SC_ASSERT_OK(loco_ack_key_create(m, &ack));
		for (unsigned i = 0; i < BOX; i++)
			src[REGIONS * 8 + i] = pat(77, i);
		SC_ASSERT_OK(loco_write(scratch, REGIONS * 8, &e->rref, 0, BOX, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
		memset(src + REGIONS * 8, 0, BOX);
		SC_ASSERT_OK(loco_read(scratch, REGIONS * 8, &e->rref, 0, BOX, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
		for (unsigned i = 0; i < BOX; i++)
			if (src[REGIONS * 8 + i] != pat(77, i))
				SC_FAIL("byte %u read back from node 2's unlisted region is %#x", i,
				        src[REGIONS * 8 + i]);
		/* atomics: add 5 to the word at BOX - 16, swap the one at BOX - 8 */
		SC_ASSERT_OK(loco_faa(scratch, REGIONS * 8 + BOX, &e->rref, BOX - 16, 5, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
		SC_ASSERT(*(uint64_t *)(src + REGIONS * 8 + BOX) == pat_word(BOX - 16));
		SC_ASSERT_OK(loco_cas(scratch, REGIONS * 8 + BOX + 8, &e->rref, BOX - 8,
		                      pat_word(BOX - 8), 0x1234, ack));
		SC_ASSERT_OK(loco_ack_wait(ack, 10 * SC_NS));
		SC_ASSERT(*(uint64_t *)(src + REGIONS * 8 + BOX + 8) == pat_word(BOX - 8));
		loco_ack_key_destroy(ack);
		send_head(talk, peer, TAG_DONE, 0, NULL);
		sc_log(
		    "WRITE, READ, FAA and CAS through the reference of node 2's unlisted region");
	}
	sc_sync_wait(&sync, "box", SC_WAIT_MS);

	/* 6 */
	if (me == 2) {
		for (uint32_t s = 0; s < TAIL; s++)
			send_head(talk, peer, TAG_TAIL, s, NULL);
		loco_object_destroy(talk);
		loco_object_destroy(late);
		loco_object_destroy(big);
		SC_ASSERT_OK(loco_channel_destroy(ch));
	} else {
		int leave;

		SC_WAIT_UNTIL(count(peer, EV_LEAVE, 0) == 1, SC_WAIT_MS, "node 2's peer_leave");
		leave = find(peer, EV_LEAVE, 0);
		SC_ASSERT_EQ(count(peer, EV_MSG, TAG_TAIL), TAIL);
		for (unsigned i = 0; i < nev; i++)
			if (evlog[i].kind == EV_MSG && (int)i > leave)
				SC_FAIL("a message of node %u after its peer_leave", evlog[i].node);
		SC_ASSERT_EQ(loco_object_send(talk, peer, over, 8), -ENOTCONN);
		sc_log("all %d last messages of node 2 came before its peer_leave", TAIL);
	}
	sc_sync_wait(&sync, "left", SC_WAIT_MS);
	if (me == 1) {
		loco_object_destroy(talk);
		loco_object_destroy(late);
		loco_object_destroy(big);
		SC_ASSERT_OK(loco_channel_destroy(ch));
	}
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
