/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * write-inline.c -- loco_write_inline() (loco_write(3)) sends the bytes
 * the source held when the call returned, whatever the caller writes
 * there afterwards, and refuses a payload the link's fabric does not copy
 * at post with -EMSGSIZE, posting nothing.
 *
 * Run by loco-run -n 2. Node 1 WRITEs SLOTS lines of 64 bytes inline into
 * node 2's region, each from the same 64 bytes of its own buffer, which it
 * overwrites with garbage as soon as the call returns; then waits on the
 * ack key and WRITEs a "done" word (plainly: operations to one node land
 * in posting order). Node 2 then finds every line as it was posted. On
 * tcp 256 bytes go inline and 257 do not; a 64 KiB payload is refused on
 * tcp and verbs, and nothing of it lands. On shm a WRITE that runs at post
 * (nothing waits on the link, as here) is taken inline at any length: the
 * 257 bytes and the 64 KiB land as they were at the call, whatever node 1
 * writes into the source right after.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>

#include "../fail.h"

#define SLOTS 512
#define LINE  64
#define BIG   65536 /* the region: SLOTS lines, the big payload's target, the done word */
#define DONE  (BIG - 8)
#define NS    1000000000ll

static uint64_t word(unsigned slot, unsigned w)
{
	return 0x1100000000ull + (uint64_t)slot * 16 + w;
}

int main(void)
{
	const char *fabric = getenv("LOCO_FABRIC");
	int soft = fabric != NULL && (strcmp(fabric, "tcp") == 0 || strcmp(fabric, "shm") == 0);
	int at_post = fabric != NULL && strcmp(fabric, "shm") == 0; /* any length runs at post */
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *mem, *buf;
	loco_ack_key_t *ack;
	loco_rref_t peer;
	volatile uint64_t *v;
	int ret;

	alarm(60);
	ret = loco_init(NULL, &m);
	if ((ret == -ENODEV || ret == -ENOENT) && fabric != NULL && strcmp(fabric, "verbs") == 0) {
		printf("no RDMA device: skipped\n");
		return 77;
	}
	if (ret)
		FAIL("loco_init: %s", loco_strerror(ret));
	if ((ret = loco_channel_create(m, NULL, "inl", 2, &ch)) ||
	    (ret = loco_object_create(ch, "t", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "mem", 2 * BIG, LOCO_ACCESS_WRITE, &mem)) ||
	    (ret = loco_region_create(obj, "buf", 2 * BIG, 0, &buf)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_channel_join(ch, 20 * NS)))
		FAIL("setup: %s", loco_strerror(ret));
	v = loco_region_ptr(mem);

	if (loco_manager_node_id(m) == 1) {
		uint64_t *src = loco_region_ptr(buf);

		if ((ret = loco_region_remote(mem, 2, &peer)))
			FAIL("node 1: %s", loco_strerror(ret));
		for (unsigned s = 0; s < SLOTS; s++) {
			for (unsigned w = 0; w < LINE / 8; w++)
				src[w] = word(s, w);
			ret = loco_write_inline(buf, 0, &peer, (size_t)s * LINE, LINE, ack);
			if (ret ==
			    -EAGAIN) { /* the ack key or the send queue is full: drain, retry */
				if ((ret = loco_ack_wait(ack, 10 * NS)))
					FAIL("node 1: wait: %s", loco_strerror(ret));
				ret = loco_write_inline(buf, 0, &peer, (size_t)s * LINE, LINE, ack);
			}
			if (ret)
				FAIL("node 1: slot %u: %s", s, loco_strerror(ret));
			memset(src, 0xee, LINE); /* the WRITE must have taken the bytes already */
		}
		if ((ret = loco_ack_wait(ack, 10 * NS))) /* room in the send queue again */
			FAIL("node 1: wait: %s", loco_strerror(ret));
		if (soft) {
			memset(src, 0x5a, 257);
			if ((ret = loco_write_inline(buf, 0, &peer, SLOTS * LINE, 256, ack)))
				FAIL("node 1: 256 bytes inline on %s: %s", fabric,
				     loco_strerror(ret));
			ret = loco_write_inline(buf, 0, &peer, SLOTS * LINE + 256, 257, ack);
			if (ret != (at_post ? 0 : -EMSGSIZE))
				FAIL("node 1: 257 bytes inline on %s: %s, expected %s", fabric,
				     loco_strerror(ret), at_post ? "success" : "-EMSGSIZE");
		}
		memset(src, 0x6b, BIG);
		ret = loco_write_inline(buf, 0, &peer, BIG, BIG, ack);
		memset(src, 0xee, BIG); /* landed already where it was taken */
		if (ret != (at_post ? 0 : -EMSGSIZE))
			FAIL("node 1: 64 KiB inline: %s, expected %s", loco_strerror(ret),
			     at_post ? "success" : "-EMSGSIZE");
		if ((ret = loco_ack_wait(ack, 10 * NS)))
			FAIL("node 1: wait: %s", loco_strerror(ret));
		src[0] = 1;
		if ((ret = loco_write(buf, 0, &peer, DONE, 8, ack)) ||
		    (ret = loco_ack_wait(ack, 10 * NS)))
			FAIL("node 1: done: %s", loco_strerror(ret));
		printf("node 1: %d inline WRITEs of %d bytes posted, sources overwritten at once\n",
		       SLOTS, LINE);
	} else {
		time_t end = time(NULL) + 30;
		/* bytes of the 256- and 257-byte inline WRITEs that land after the lines */
		unsigned landed = at_post ? 256 + 257 : soft ? 256 : 0;

		while (v[DONE / 8] != 1) {
			if (time(NULL) > end)
				FAIL("node 2: node 1 never said done");
			usleep(1000);
		}
		for (unsigned s = 0; s < SLOTS; s++)
			for (unsigned w = 0; w < LINE / 8; w++)
				if (v[s * LINE / 8 + w] != word(s, w))
					FAIL("node 2: slot %u word %u is %#llx, posted %#llx", s, w,
					     (unsigned long long)v[s * LINE / 8 + w],
					     (unsigned long long)word(s, w));
		for (unsigned i = 0; i < landed; i++)
			if (((volatile uint8_t *)v)[SLOTS * LINE + i] != 0x5a)
				FAIL("node 2: byte %u after the lines is wrong", i);
		for (unsigned i = 0; at_post && i < BIG; i++)
			if (((volatile uint8_t *)v)[BIG + i] != 0x6b)
				FAIL("node 2: byte %u of the 64 KiB inline WRITE is wrong", i);
		/* nothing else: not a refused 257 bytes after the 256, nor a refused 64 KiB at BIG */
		for (unsigned i = (SLOTS * LINE + landed + 7) / 8;
		     i < (at_post ? BIG : 2 * BIG) / 8; i++)
			if (i != DONE / 8 && v[i] != 0)
				FAIL("node 2: a refused inline WRITE landed (byte %u)", i * 8);
		printf("node 2: every line as posted; %s\n",
		       at_post ? "the 257 B and 64 KiB inline WRITEs that ran at post landed whole"
		               : "refused payloads did not land");
	}
	sleep(1);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
