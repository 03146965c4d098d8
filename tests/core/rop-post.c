/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rop-post.c -- loco_rop_post() through a bound handle (loco_rhandle_bind(),
 * loco_write(3)) does what loco_write(), loco_write_inline(), loco_read(),
 * loco_cas() and loco_faa() do, on each fabric; bad operations get -EINVAL
 * and post nothing; a handle whose kept link is wrong (as after the node's
 * link was replaced) still reaches the node; a handle to a node without a
 * link gets -ENOTCONN. A post with LOCO_ROP_MORE is sent with the next
 * one (tcp) or at once (shm, verbs), and one that no post follows still
 * runs. A WRITE posted with LOCO_ROP_LAZY lands, with or without a key,
 * and its key's wait ends (tcp: the ACK held back comes within its delay).
 *
 * Run by loco-run -n 2. Node 1, through one handle to node 2's region:
 * WRITEs LINES lines (every other one inline, its source overwritten at
 * once), READs them back (once whole, once in two halves posted with
 * LOCO_ROP_MORE on the first), adds 1 FAA_N times to a counter with both ack
 * slots used, CASes a word twice (one hit, one miss), WRITEs two words
 * with LOCO_ROP_LAZY (inline and keyless, then with a key), tries the bad
 * operations (each aimed at a word that must stay 0), then WRITEs a done
 * word. Node 2 checks its memory: every line, the counter, the CAS word,
 * the lazy words, the untouched words.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>

#include "../fail.h"

#define LINES     256
#define LINE      64
#define LEN       (LINES * LINE + 4096)
#define CNT       (LINES * LINE) /* the FAA counter */
#define CASW      (CNT + 8)      /* the CAS word */
#define LAZYW     (CNT + 16)     /* LOCO_ROP_LAZY WRITEs: one without a key, one with */
#define UNTOUCHED (CNT + 64)     /* 64 words bad operations aimed at */
#define DONE      (LEN - 8)
#define FAA_N     1000
#define NS        1000000000ll

static uint64_t word(unsigned line, unsigned w)
{
	return 0x2200000000ull + (uint64_t)line * 16 + w;
}

/* post_wait -- post @op through @h, draining @ack once on -EAGAIN; then wait for it. */
static void post_wait(loco_rhandle_t *h, const loco_rop_t *op, loco_ack_key_t *ack,
                      const char *what)
{
	int ret = loco_rop_post(h, op);

	if (ret == -EAGAIN) {
		if ((ret = loco_ack_wait(ack, 10 * NS)) == 0)
			ret = loco_rop_post(h, op);
	}
	if (ret == 0)
		ret = loco_ack_wait(ack, 10 * NS);
	if (ret)
		FAIL("node 1: %s: %s", what, loco_strerror(ret));
}

static void expect_einval(loco_rhandle_t *h, const loco_rop_t *op, const char *what)
{
	int ret = loco_rop_post(h, op);

	if (ret != -EINVAL)
		FAIL("node 1: %s: %s, expected -EINVAL", what, loco_strerror(ret));
}

static void node1(loco_region_t *mem, loco_region_t *buf, loco_ack_key_t *ack, loco_ack_key_t *ack2)
{
	uint64_t *src = loco_region_ptr(buf);
	loco_rhandle_t h, nolink;
	loco_rref_t peer, ghost;
	loco_rop_t op;
	int ret;

	if ((ret = loco_region_remote(mem, 2, &peer)) || (ret = loco_rhandle_bind(mem, &peer, &h)))
		FAIL("node 1: bind: %s", loco_strerror(ret));
	if (h.rref.node != 2 || h.rref.rkey != peer.rkey || h.rref.len != peer.len)
		FAIL("node 1: the handle's rref is not the one bound");
	if (loco_rhandle_bind(NULL, &peer, &h) != -EINVAL ||
	    loco_rhandle_bind(mem, NULL, &h) != -EINVAL ||
	    loco_rhandle_bind(mem, &peer, NULL) != -EINVAL)
		FAIL("node 1: loco_rhandle_bind() took a NULL");

	/* WRITE every line; the odd ones inline, their source overwritten at once */
	for (unsigned l = 0; l < LINES; l++) {
		for (unsigned w = 0; w < LINE / 8; w++)
			src[w] = word(l, w);
		op = (loco_rop_t){.opcode = LOCO_ROP_WRITE,
		                  .flags = l % 2 ? LOCO_ROP_INLINE : 0,
		                  .local = buf,
		                  .roff = (uint64_t)l * LINE,
		                  .len = LINE,
		                  .acks = {ack}};
		if (l % 2) {
			if ((ret = loco_rop_post(&h, &op)) == -EAGAIN &&
			    (ret = loco_ack_wait(ack, 10 * NS)) == 0)
				ret = loco_rop_post(&h, &op);
			if (ret)
				FAIL("node 1: inline line %u: %s", l, loco_strerror(ret));
			memset(src, 0xee, LINE);
		} else {
			post_wait(&h, &op, ack, "write");
		}
	}
	if ((ret = loco_ack_wait(ack, 10 * NS)))
		FAIL("node 1: writes: %s", loco_strerror(ret));

	/* READ them back, in one operation */
	op = (loco_rop_t){.opcode = LOCO_ROP_READ,
	                  .local = buf,
	                  .loff = 4096,
	                  .len = (uint64_t)LINES * LINE,
	                  .acks = {ack}};
	post_wait(&h, &op, ack, "read");
	for (unsigned l = 0; l < LINES; l++)
		for (unsigned w = 0; w < LINE / 8; w++)
			if (src[512 + l * LINE / 8 + w] != word(l, w))
				FAIL("node 1: read back line %u word %u wrong", l, w);

	/*
	 * READ them back again in two halves, the first with LOCO_ROP_MORE
	 * (held until the second's post on tcp, which sends both): both land
	 */
	memset(src + 512, 0, (size_t)LINES * LINE);
	for (unsigned half = 0; half < 2; half++) {
		op = (loco_rop_t){.opcode = LOCO_ROP_READ,
		                  .flags = half == 0 ? LOCO_ROP_MORE : 0,
		                  .local = buf,
		                  .loff = 4096 + (uint64_t)half * LINES / 2 * LINE,
		                  .roff = (uint64_t)half * LINES / 2 * LINE,
		                  .len = (uint64_t)LINES / 2 * LINE,
		                  .acks = {ack}};
		if ((ret = loco_rop_post(&h, &op)))
			FAIL("node 1: read half %u: %s", half, loco_strerror(ret));
	}
	if ((ret = loco_ack_wait(ack, 10 * NS)))
		FAIL("node 1: reads in halves: %s", loco_strerror(ret));
	for (unsigned l = 0; l < LINES; l++)
		for (unsigned w = 0; w < LINE / 8; w++)
			if (src[512 + l * LINE / 8 + w] != word(l, w))
				FAIL("node 1: read back in halves: line %u word %u wrong", l, w);

	/* FAA with both ack slots, and with only the second */
	for (unsigned i = 0; i < FAA_N; i++) {
		op = (loco_rop_t){.opcode = LOCO_ROP_FAA,
		                  .local = buf,
		                  .roff = CNT,
		                  .value = 1,
		                  .acks = {i % 2 ? NULL : ack, ack2}};
		if ((ret = loco_rop_post(&h, &op)) == -EAGAIN) {
			if ((ret = loco_ack_wait(ack2, 10 * NS)) == 0)
				ret = loco_rop_post(&h, &op);
		}
		if (ret)
			FAIL("node 1: faa %u: %s", i, loco_strerror(ret));
		if (i % 64 == 63 && (ret = loco_ack_wait(ack2, 10 * NS)))
			FAIL("node 1: faa wait: %s", loco_strerror(ret));
	}
	if ((ret = loco_ack_wait(ack2, 10 * NS)) || (ret = loco_ack_wait(ack, 10 * NS)))
		FAIL("node 1: faa: %s", loco_strerror(ret));

	/* a LOCO_ROP_MORE that no post follows still runs: the wait's turn (or the NIC's) sends it */
	op = (loco_rop_t){.opcode = LOCO_ROP_FAA,
	                  .flags = LOCO_ROP_MORE,
	                  .local = buf,
	                  .roff = CNT,
	                  .value = 1,
	                  .acks = {ack}};
	post_wait(&h, &op, ack, "faa with LOCO_ROP_MORE and no post after it");

	/* CAS: 0 -> 7 hits, 0 -> 9 misses and returns 7 */
	op = (loco_rop_t){.opcode = LOCO_ROP_CAS,
	                  .local = buf,
	                  .roff = CASW,
	                  .compare = 0,
	                  .value = 7,
	                  .acks = {ack}};
	post_wait(&h, &op, ack, "cas");
	if (src[0] != 0)
		FAIL("node 1: first cas returned %llu, expected 0", (unsigned long long)src[0]);
	op.value = 9;
	post_wait(&h, &op, ack, "cas");
	if (src[0] != 7)
		FAIL("node 1: second cas returned %llu, expected 7", (unsigned long long)src[0]);

	/* LOCO_ROP_LAZY: a keyless inline WRITE, then one with a key that is waited for */
	src[0] = 0x1a2e;
	op = (loco_rop_t){.opcode = LOCO_ROP_WRITE,
	                  .flags = LOCO_ROP_INLINE | LOCO_ROP_LAZY,
	                  .local = buf,
	                  .roff = LAZYW,
	                  .len = 8};
	if ((ret = loco_rop_post(&h, &op)))
		FAIL("node 1: keyless lazy write: %s", loco_strerror(ret));
	src[0] = 0; /* copied at post: the word lands as 0x1a2e */
	src[1] = 0x1a2f;
	op = (loco_rop_t){.opcode = LOCO_ROP_WRITE,
	                  .flags = LOCO_ROP_LAZY,
	                  .local = buf,
	                  .loff = 8,
	                  .roff = LAZYW + 8,
	                  .len = 8,
	                  .acks = {ack}};
	post_wait(&h, &op, ack, "lazy write with a key");

	/* a handle whose kept slot is wrong (another generation, or past the table) */
	h.private_[0] = 0xabcdull << 32 | 3;
	op = (loco_rop_t){
	    .opcode = LOCO_ROP_FAA, .local = buf, .roff = CNT, .value = 1, .acks = {ack}};
	post_wait(&h, &op, ack, "faa through a stale handle");
	h.private_[0] = ~0ull;
	post_wait(&h, &op, ack, "faa through a garbage handle");

	/* bad operations: each aimed at UNTOUCHED, none may post */
	op = (loco_rop_t){
	    .opcode = LOCO_ROP_WRITE, .local = buf, .roff = UNTOUCHED, .len = 8, .acks = {ack}};
	src[0] = 0x5a5a;
	expect_einval(NULL, &op, "NULL handle");
	expect_einval(&h, NULL, "NULL op");
	op.opcode = 0;
	expect_einval(&h, &op, "opcode 0");
	op.opcode = 99;
	expect_einval(&h, &op, "opcode 99");
	op.opcode = LOCO_ROP_WRITE;
	op.flags = 1u << 5;
	expect_einval(&h, &op, "unknown flag");
	op.flags = LOCO_ROP_INLINE;
	op.opcode = LOCO_ROP_READ;
	expect_einval(&h, &op, "inline READ");
	op.flags = LOCO_ROP_INLINE | LOCO_ROP_MORE;
	expect_einval(&h, &op, "inline READ with LOCO_ROP_MORE");
	op.flags = 0;
	op.opcode = LOCO_ROP_WRITE;
	op.reserved = 1;
	expect_einval(&h, &op, "reserved not 0");
	op.reserved = 0;
	op.local = NULL;
	expect_einval(&h, &op, "NULL local region");
	op.local = buf;
	op.len = LEN;
	expect_einval(&h, &op, "past the remote region");
	op.len = 8;
	op.loff = 2 * LEN;
	expect_einval(&h, &op, "past the local region");
	op.loff = 0;
	op.opcode = LOCO_ROP_CAS;
	op.roff = UNTOUCHED + 4;
	expect_einval(&h, &op, "misaligned remote CAS");
	op.opcode = LOCO_ROP_FAA;
	op.roff = UNTOUCHED;
	op.loff = 4;
	expect_einval(&h, &op, "misaligned local FAA");

	/* a node without a link */
	ghost = peer;
	ghost.node = 250;
	if ((ret = loco_rhandle_bind(buf, &ghost, &nolink)))
		FAIL("node 1: bind to an absent node: %s", loco_strerror(ret));
	op = (loco_rop_t){.opcode = LOCO_ROP_WRITE, .local = buf, .roff = UNTOUCHED, .len = 8};
	if ((ret = loco_rop_post(&nolink, &op)) != -ENOTCONN)
		FAIL("node 1: post to a node without a link: %s, expected -ENOTCONN",
		     loco_strerror(ret));

	src[0] = 1;
	op = (loco_rop_t){
	    .opcode = LOCO_ROP_WRITE, .local = buf, .roff = DONE, .len = 8, .acks = {ack}};
	post_wait(&h, &op, ack, "done");
	printf("node 1: %d writes, 3 reads (2 with one LOCO_ROP_MORE), %d faa, 2 cas through one "
	       "handle; bad ops refused\n",
	       LINES, FAA_N + 3);
}

static void node2(volatile uint64_t *v)
{
	time_t end = time(NULL) + 40;

	while (v[DONE / 8] != 1) {
		if (time(NULL) > end)
			FAIL("node 2: node 1 never said done");
		usleep(1000);
	}
	for (unsigned l = 0; l < LINES; l++)
		for (unsigned w = 0; w < LINE / 8; w++)
			if (v[l * LINE / 8 + w] != word(l, w))
				FAIL("node 2: line %u word %u is %#llx, posted %#llx", l, w,
				     (unsigned long long)v[l * LINE / 8 + w],
				     (unsigned long long)word(l, w));
	if (v[CNT / 8] != FAA_N + 3)
		FAIL("node 2: counter %llu, expected %d", (unsigned long long)v[CNT / 8],
		     FAA_N + 3);
	if (v[CASW / 8] != 7)
		FAIL("node 2: cas word %llu, expected 7", (unsigned long long)v[CASW / 8]);
	if (v[LAZYW / 8] != 0x1a2e || v[LAZYW / 8 + 1] != 0x1a2f)
		FAIL("node 2: lazy words %#llx %#llx, expected 0x1a2e 0x1a2f",
		     (unsigned long long)v[LAZYW / 8], (unsigned long long)v[LAZYW / 8 + 1]);
	for (unsigned i = 0; i < 64; i++)
		if (v[UNTOUCHED / 8 + i] != 0)
			FAIL("node 2: a refused operation landed (word %u)", i);
	printf("node 2: every line, the counter, the cas word and the lazy words as posted\n");
}

int main(void)
{
	const char *fabric = getenv("LOCO_FABRIC");
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *mem, *buf;
	loco_ack_key_t *ack, *ack2;
	int ret;

	alarm(60);
	ret = loco_init(NULL, &m);
	if ((ret == -ENODEV || ret == -ENOENT) && fabric != NULL && strcmp(fabric, "verbs") == 0) {
		printf("no RDMA device: skipped\n");
		return 77;
	}
	if (ret)
		FAIL("loco_init: %s", loco_strerror(ret));
	if ((ret = loco_channel_create(m, NULL, "rop", 2, &ch)) ||
	    (ret = loco_object_create(ch, "t", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "mem", LEN,
	                              LOCO_ACCESS_READ | LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC,
	                              &mem)) ||
	    (ret = loco_region_create(obj, "buf", 2 * LEN, 0, &buf)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_ack_key_create(m, &ack2)) ||
	    (ret = loco_channel_join(ch, 20 * NS)))
		FAIL("setup: %s", loco_strerror(ret));
	if (loco_manager_node_id(m) == 1)
		node1(mem, buf, ack, ack2);
	else
		node2(loco_region_ptr(mem));
	sleep(1);
	loco_ack_key_destroy(ack2);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
