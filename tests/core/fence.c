/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fence.c -- loco_channel_fence() orders a WRITE after an earlier READ
 * whose result it sends on: node 2 READs node 1's value into its buffer,
 * fences, and WRITEs that buffer back to another slot of node 1, all
 * without waiting in between. Node 1 must find the value in that slot.
 * Without the fence the WRITE may send the buffer before the READ's data
 * landed (the tcp provider reads a WRITE's source when it issues it).
 * Run by loco-run -n 2; ROUNDS rounds with a fresh value each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>

#include "../fail.h"

#define ROUNDS 200

int main(void)
{
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *mem, *buf;
	loco_ack_key_t *ack;
	loco_rref_t peer;
	volatile uint64_t *v;
	int ret;

	alarm(60);
	if ((ret = loco_init(NULL, &m)))
		FAIL("loco_init: %s", loco_strerror(ret));
	if ((ret = loco_channel_create(m, NULL, "fence", 2, &ch)) ||
	    (ret = loco_object_create(ch, "t", NULL, NULL, &obj)) ||
	    (ret = loco_region_create(obj, "mem", 4096, LOCO_ACCESS_READ | LOCO_ACCESS_WRITE,
	                              &mem)) ||
	    (ret = loco_region_create(obj, "buf", 4096, 0, &buf)) ||
	    (ret = loco_ack_key_create(m, &ack)) || (ret = loco_channel_join(ch, 20000000000ll)))
		FAIL("setup: %s", loco_strerror(ret));
	v = loco_region_ptr(mem);

	if (loco_manager_node_id(m) == 2) {
		if ((ret = loco_region_remote(mem, 1, &peer)))
			FAIL("node 2: %s", loco_strerror(ret));
		for (uint64_t r = 1; r <= ROUNDS; r++) {
			/* node 1 publishes round r's value (4 KiB) at offset 0 and asks via word 511 */
			while (v[0] != r)
				usleep(50);
			if ((ret = loco_read(buf, 0, &peer, 0, 2048, ack)) ||
			    (ret = loco_channel_fence(ch)) ||
			    (ret = loco_write(buf, 0, &peer, 2048, 2048, ack)) ||
			    (ret = loco_ack_wait(ack, 10000000000ll)))
				FAIL("node 2, round %llu: %s", (unsigned long long)r,
				     loco_strerror(ret));
		}
		printf("node 2: %d fenced READ->WRITE rounds\n", ROUNDS);
	} else {
		uint64_t *src;

		if ((ret = loco_region_remote(mem, 2, &peer)))
			FAIL("node 1: %s", loco_strerror(ret));
		src = loco_region_ptr(buf);
		for (uint64_t r = 1; r <= ROUNDS; r++) {
			volatile uint64_t *back = v + 256;
			time_t end = time(NULL) + 20;

			for (int i = 1; i < 256; i++)
				v[i] = r * 1000 + (uint64_t)i;
			/* tell node 2: write r into its word 0 */
			src[0] = r;
			if ((ret = loco_write(buf, 0, &peer, 0, 8, ack)) ||
			    (ret = loco_ack_wait(ack, 10000000000ll)))
				FAIL("node 1: %s", loco_strerror(ret));
			v[0] = r;
			while (back[255] != r * 1000 + 255 && time(NULL) < end)
				usleep(50);
			for (int i = 1; i < 256; i++)
				if (back[i] != r * 1000 + (uint64_t)i)
					FAIL("node 1, round %llu: word %d came back as %llu, "
					     "expected "
					     "%llu: the WRITE overtook the READ",
					     (unsigned long long)r, i, (unsigned long long)back[i],
					     (unsigned long long)(r * 1000 + (uint64_t)i));
		}
		printf("node 1: %d rounds ordered\n", ROUNDS);
	}
	sleep(1);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	loco_channel_destroy(ch);
	loco_fini(m);
	return 0;
}
