/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpipe-bad.c -- the errors of loco_rpipe(3): bad arguments, a node that
 * is neither end, the wrong end's calls, -EMSGSIZE, -EAGAIN with timeout
 * 0, -ETIMEDOUT, -EBUSY, an unjoined channel, disagreeing ring sizes; and
 * that a ring filled to the last byte loses nothing.
 *
 * loco-run -n 3. Channel "rpb": pipe "p" 1 -> 2 with a 4 KiB ring; node 3
 * is neither end. Pipe "mm" 1 -> 2 made after the join with 4 KiB on
 * node 1 and 8 KiB on node 2: both ends get -LOCO_EMISMATCH.
 *
 * Modes: unknown modes are -EINVAL; pipe "pp" 1 -> 2 is a pull pipe that
 * goes through the same full-ring, peek and largest-message checks as "p"
 * (ring_checks()); "pz" is made from a configuration zeroed but for ring
 * and watermark on node 1 and by loco_rpipe_create() on node 2, and
 * pairs (zero is push); "md" is push on node 1 and pull on node 2: both
 * ends get -LOCO_EMISMATCH.
 */
#include <errno.h>
#include <string.h>

#include <loco/rpipe.h>

#include "rpipe-pattern.h"
#include "scenario.h"

#define RING    4096u
#define MSG     100u /* a record of 128 B: 32 fill the ring exactly */
#define BOX_FIT 1

/*
 * ring_checks -- through @p (4 KiB ring, node 1 -> 2): a ring filled
 * without waiting takes exactly RING / 128 messages of MSG bytes, then
 * -EAGAIN and -ETIMEDOUT; the reader gets -EMSGSIZE, peeks one twice,
 * reads all back whole and in order, then -EAGAIN; a reservation's
 * errors; the largest message (the whole ring). @tmo: the reader's
 * timeout where push needs none (a pull reader READs first).
 */
static void ring_checks(loco_rpipe_t *p, struct sc_sync *s, uint32_t me, size_t max, int64_t tmo)
{
	static uint8_t buf[2 * RING];
	const void *ptr;
	void *wptr;
	size_t len;
	int ret, fit = 0;

	/* fill the ring without waiting: exactly RING / 128 messages, then -EAGAIN */
	if (me == 1) {
		for (;;) {
			rp_fill(buf, MSG, 7, (uint64_t)fit);
			ret = loco_rpipe_write(p, buf, MSG, 0);
			if (ret == -EAGAIN)
				break;
			SC_ASSERT_OK(ret);
			SC_ASSERT(++fit <= (int)(RING / 128));
		}
		SC_ASSERT_EQ(fit, RING / 128);
		SC_ASSERT_EQ(loco_rpipe_reserve(p, MSG, &wptr, 0), -EAGAIN);
		SC_ASSERT_EQ(loco_rpipe_write(p, buf, MSG, 50000000), -ETIMEDOUT);
		sc_sync_put(s, BOX_FIT, (uint64_t)fit);
		sc_log("the %u B ring took %d messages of %u B, then -EAGAIN and -ETIMEDOUT", RING,
		       fit, MSG);
	}
	sc_sync_wait(s, "filled", SC_WAIT_MS);
	if (me == 2) {
		fit = (int)sc_sync_get(s, BOX_FIT);
		SC_ASSERT_EQ(loco_rpipe_read(p, buf, MSG - 1, &len, tmo), -EMSGSIZE);
		SC_ASSERT_OK(loco_rpipe_peek(p, &ptr, &len, 0));
		SC_ASSERT_EQ(len, MSG);
		SC_ASSERT(((uintptr_t)ptr & 7) == 0);
		SC_ASSERT(rp_check(ptr, len, 7, 0));
		SC_ASSERT_OK(loco_rpipe_peek(p, &ptr, &len, 0)); /* the same one again */
		SC_ASSERT(rp_check(ptr, len, 7, 0));
		SC_ASSERT_OK(loco_rpipe_release(p));
		SC_ASSERT_EQ(loco_rpipe_release(p), -EINVAL);
		for (int k = 1; k < fit; k++) {
			SC_ASSERT_OK(loco_rpipe_read(p, buf, sizeof(buf), &len, 0));
			SC_ASSERT_EQ(len, MSG);
			if (!rp_check(buf, len, 7, (uint64_t)k))
				SC_FAIL("message %d of the full ring: wrong content", k);
		}
		SC_ASSERT_EQ(loco_rpipe_read(p, buf, sizeof(buf), &len, 0), -EAGAIN);
	}
	sc_sync_wait(s, "drained", SC_WAIT_MS);

	/* a reservation; then the largest message (it needs the whole ring) */
	if (me == 1) {
		SC_ASSERT_OK(loco_rpipe_reserve(p, 200, &wptr, 10 * SC_NS));
		SC_ASSERT(((uintptr_t)wptr & 7) == 0);
		SC_ASSERT_EQ(loco_rpipe_write(p, buf, 1, 0), -EBUSY);
		SC_ASSERT_EQ(loco_rpipe_reserve(p, 1, &wptr, 0), -EBUSY);
		SC_ASSERT_EQ(loco_rpipe_commit(p, 201), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_commit(p, 0), -EINVAL);
		rp_fill(wptr, 150, 8, 0);
		SC_ASSERT_OK(loco_rpipe_commit(p, 150));
		SC_ASSERT_EQ(loco_rpipe_commit(p, 150), -EINVAL);
		rp_fill(buf, max, 8, 1);
		SC_ASSERT_OK(loco_rpipe_write(p, buf, max, 10 * SC_NS));
	} else if (me == 2) {
		SC_ASSERT_OK(loco_rpipe_read(p, buf, sizeof(buf), &len, 10 * SC_NS));
		SC_ASSERT_EQ(len, 150);
		SC_ASSERT(rp_check(buf, len, 8, 0));
		SC_ASSERT_OK(loco_rpipe_read(p, buf, sizeof(buf), &len, 10 * SC_NS));
		SC_ASSERT_EQ(len, max);
		SC_ASSERT(rp_check(buf, len, 8, 1));
		sc_log("a %zu B message through the %u B ring", len, RING);
	}
	sc_sync_wait(s, "largest", SC_WAIT_MS);
}

int main(int argc, char **argv)
{
	static const uint32_t all[] = {1, 2, 3};
	static uint8_t buf[2 * RING];
	loco_manager_t *m;
	loco_channel_t *ch, *lone;
	loco_rpipe_t *p = NULL, *mm = NULL, *md = NULL, *pp = NULL, *pz = NULL, *q;
	loco_rpipe_cfg_t cfg, zero = {0};
	struct sc_sync sync;
	const void *ptr;
	void *wptr;
	size_t len, max;
	uint32_t me;

	sc_init("rpipe-bad", argc, argv, 100);
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_WAIT_UNTIL(sc_members_are(m, all, 3), SC_WAIT_MS, "members {1, 2, 3}");
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpb", 3, &ch));

	/* create: arguments checked before anything is made */
	SC_ASSERT_EQ(loco_rpipe_create(NULL, "p", 1, 2, RING, &q), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, NULL, 1, 2, RING, &q), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 2, RING, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 0, 2, RING, &q), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 1, RING, &q), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 2, RING + 8, &q), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 2, LOCO_RPIPE_RING_MIN - 64, &q), -EINVAL);
	SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 2, (size_t)LOCO_RPIPE_RING_MAX + 64, &q),
	             -EINVAL);
	if (me == 3) {
		SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 2, RING, &q), -EINVAL);
	} else {
		SC_ASSERT_OK(loco_rpipe_create(ch, "p", 1, 2, RING, &p));
		SC_ASSERT_EQ(loco_rpipe_create(ch, "p", 1, 2, RING, &q), -EEXIST);
		max = loco_rpipe_max_msg(p);
		SC_ASSERT_EQ(max, RING - LOCO_RPIPE_OVERHEAD);
	}
	SC_ASSERT_EQ(loco_rpipe_max_msg(NULL), 0);

	/* modes: unknown ones refused on any node; a pull pipe; a zeroed configuration is push */
	loco_rpipe_cfg_default(&cfg);
	SC_ASSERT_EQ(cfg.mode, LOCO_RPIPE_PUSH);
	cfg.ring_bytes = RING;
	cfg.mode = 2;
	SC_ASSERT_EQ(loco_rpipe_create_cfg(ch, "pp", 1, 2, &cfg, &q), -EINVAL);
	cfg.mode = UINT32_MAX;
	SC_ASSERT_EQ(loco_rpipe_create_cfg(ch, "pp", 1, 2, &cfg, &q), -EINVAL);
	cfg.mode = LOCO_RPIPE_PULL;
	zero.ring_bytes = RING;
	zero.return_div = LOCO_RPIPE_RETURN_DIV;
	if (me != 3) {
		SC_ASSERT_OK(loco_rpipe_create_cfg(ch, "pp", 1, 2, &cfg, &pp));
		SC_ASSERT_EQ(loco_rpipe_max_msg(pp), RING - LOCO_RPIPE_OVERHEAD);
		if (me == 1)
			SC_ASSERT_OK(loco_rpipe_create_cfg(ch, "pz", 1, 2, &zero, &pz));
		else
			SC_ASSERT_OK(loco_rpipe_create(ch, "pz", 1, 2, RING, &pz));
	}

	/* a channel never joined */
	SC_ASSERT_OK(loco_channel_create(m, NULL, "rpb-lone", 2, &lone));
	if (me != 3) {
		SC_ASSERT_OK(loco_rpipe_create(lone, "p", 1, 2, RING, &q));
		if (me == 1)
			SC_ASSERT_EQ(loco_rpipe_write(q, buf, 1, 0), -LOCO_ENOTJOINED);
		else
			SC_ASSERT_EQ(loco_rpipe_read(q, buf, sizeof(buf), &len, 0),
			             -LOCO_ENOTJOINED);
		loco_rpipe_destroy(q);
		SC_ASSERT_OK(loco_rpipe_create_cfg(lone, "pp", 1, 2, &cfg, &q));
		if (me == 1)
			SC_ASSERT_EQ(loco_rpipe_write(q, buf, 1, 0), -LOCO_ENOTJOINED);
		else
			SC_ASSERT_EQ(loco_rpipe_read(q, buf, sizeof(buf), &len, 0),
			             -LOCO_ENOTJOINED);
		loco_rpipe_destroy(q);
	}
	SC_ASSERT_OK(loco_channel_destroy(lone));

	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	sc_sync_open(&sync, m, 3);
	if (p != NULL) {
		SC_ASSERT_OK(loco_rpipe_sync(p, 20 * SC_NS));
		SC_ASSERT_OK(loco_rpipe_sync(pp, 20 * SC_NS));
	}
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	/* the wrong end, bad lengths, nothing to wait for */
	if (me == 1) {
		SC_ASSERT_EQ(loco_rpipe_read(p, buf, sizeof(buf), &len, 0), -EPERM);
		SC_ASSERT_EQ(loco_rpipe_peek(p, &ptr, &len, 0), -EPERM);
		SC_ASSERT_EQ(loco_rpipe_release(p), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_write(p, buf, 0, 0), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_write(p, NULL, 1, 0), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_write(p, buf, max + 1, -1), -EMSGSIZE);
		SC_ASSERT_EQ(loco_rpipe_reserve(p, max + 1, &wptr, -1), -EMSGSIZE);
		SC_ASSERT_EQ(loco_rpipe_commit(p, 1), -EINVAL);
	} else if (me == 2) {
		SC_ASSERT_EQ(loco_rpipe_write(p, buf, 1, 0), -EPERM);
		SC_ASSERT_EQ(loco_rpipe_reserve(p, 1, &wptr, 0), -EPERM);
		SC_ASSERT_EQ(loco_rpipe_commit(p, 1), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_release(p), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_read(p, NULL, 1, &len, 0), -EINVAL);
		SC_ASSERT_EQ(loco_rpipe_read(p, buf, sizeof(buf), &len, 0), -EAGAIN);
		SC_ASSERT_EQ(loco_rpipe_peek(p, &ptr, &len, 0), -EAGAIN);
		SC_ASSERT_EQ(loco_rpipe_read(p, buf, sizeof(buf), &len, 50000000), -ETIMEDOUT);
		SC_ASSERT_EQ(loco_rpipe_write(pp, buf, 1, 0), -EPERM);
		SC_ASSERT_EQ(loco_rpipe_read(pp, buf, sizeof(buf), &len, 0), -EAGAIN);
		SC_ASSERT_EQ(loco_rpipe_read(pp, buf, sizeof(buf), &len, 50000000), -ETIMEDOUT);
	}
	if (me == 1) {
		SC_ASSERT_EQ(loco_rpipe_read(pp, buf, sizeof(buf), &len, 0), -EPERM);
		SC_ASSERT_EQ(loco_rpipe_write(pp, buf, max + 1, -1), -EMSGSIZE);
	}
	sc_sync_wait(&sync, "errors", SC_WAIT_MS);

	ring_checks(p, &sync, me, max, 0);
	/* the same through a pull pipe: the reader's calls wait for its READs (10 s) */
	ring_checks(pp, &sync, me, max, 10 * SC_NS);
	/* a configuration zeroed but for ring and watermark is a push pipe: it pairs with one */
	if (me == 1) {
		SC_ASSERT_OK(loco_rpipe_write(pz, "z", 1, 10 * SC_NS));
	} else if (me == 2) {
		SC_ASSERT_OK(loco_rpipe_read(pz, buf, sizeof(buf), &len, 10 * SC_NS));
		SC_ASSERT(len == 1 && buf[0] == 'z');
	}
	sc_sync_wait(&sync, "zeroed", SC_WAIT_MS);

	/* rings of another size: the pairing fails, both ends say so */
	if (me != 3) {
		SC_ASSERT_OK(loco_rpipe_create(ch, "mm", 1, 2, me == 1 ? RING : 2 * RING, &mm));
		if (me == 1)
			SC_WAIT_UNTIL(loco_rpipe_write(mm, buf, 1, 0) == -LOCO_EMISMATCH,
			              SC_WAIT_MS, "-LOCO_EMISMATCH from the writer");
		else
			SC_WAIT_UNTIL(loco_rpipe_read(mm, buf, sizeof(buf), &len, 0) ==
			                  -LOCO_EMISMATCH,
			              SC_WAIT_MS, "-LOCO_EMISMATCH from the reader");
		sc_log("rings of %u and %u B: -LOCO_EMISMATCH", RING, 2 * RING);
	}
	/* a push end and a pull end: the same */
	if (me != 3) {
		cfg.mode = me == 1 ? LOCO_RPIPE_PUSH : LOCO_RPIPE_PULL;
		SC_ASSERT_OK(loco_rpipe_create_cfg(ch, "md", 1, 2, &cfg, &md));
		if (me == 1)
			SC_WAIT_UNTIL(loco_rpipe_write(md, buf, 1, 0) == -LOCO_EMISMATCH,
			              SC_WAIT_MS, "-LOCO_EMISMATCH from the push writer");
		else
			SC_WAIT_UNTIL(loco_rpipe_read(md, buf, sizeof(buf), &len, 0) ==
			                  -LOCO_EMISMATCH,
			              SC_WAIT_MS, "-LOCO_EMISMATCH from the pull reader");
		SC_ASSERT_EQ(loco_rpipe_sync(md, 0), -LOCO_EMISMATCH);
		sc_log("a push end and a pull end: -LOCO_EMISMATCH");
	}
	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	loco_rpipe_destroy(md);
	loco_rpipe_destroy(mm);
	loco_rpipe_destroy(pz);
	loco_rpipe_destroy(pp);
	loco_rpipe_destroy(p);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
