/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * access.c -- a bad remote key, an out-of-bounds or a wrongly permissioned
 * access completes with -EACCES at the initiator and never harms the
 * target; the link then enters the error state (DESIGN §3, fabric.h).
 *
 * Each bad request goes on a fresh link, between a valid unsignaled WRITE
 * (posted before it) and a valid signaled WRITE (after it), one post or
 * three. Expected: the bad request completes -EACCES, even when unsignaled;
 * the WRITE before it landed; the WRITE after it completes -ECANCELED and
 * did not land; requests posted later complete -ECANCELED too, signaled or
 * not; fab_link_state() reports -EACCES. At the end every byte of every
 * target region and of the canaries around them is as expected, the target
 * serves a new link normally and exits cleanly.
 *
 * A misaligned atomic is a bad request: fab_post() returns -EINVAL, queues
 * nothing (not even the valid requests of the same post) and the link
 * stays up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define BIG   (256u * 1024u) /* region 0: larger than a tcp segment */
#define SMALL 4096u
#define TMO   5000

enum {
	R_ALL,
	R_RO,
	R_WO,
	R_RW,
	R_AO,
	NREG
};
enum {
	K_VALID,
	K_GARBAGE,
	K_DEAD
};

struct bad {
	const char *name;
	int reg;
	int op;
	int64_t off;  /* from the region's start */
	uint64_t len; /* UINT64_MAX: the region's length + 1 - off */
	int key;
	uint64_t abs; /* when not 0: this remote address instead */
};

static const struct bad cases[] = {
    {"unknown rkey, WRITE", R_ALL, FAB_OP_WRITE, 0, 8, K_GARBAGE, 0},
    {"unknown rkey, READ", R_ALL, FAB_OP_READ, 0, 64, K_GARBAGE, 0},
    {"unknown rkey, FAA", R_ALL, FAB_OP_FAA, 0, 8, K_GARBAGE, 0},
    {"deregistered rkey, WRITE", 0, FAB_OP_WRITE, 0, 8, K_DEAD, 0},
    {"deregistered rkey, READ", 0, FAB_OP_READ, 0, 8, K_DEAD, 0},
    {"deregistered rkey, CAS", 0, FAB_OP_CAS, 0, 8, K_DEAD, 0},
    {"WRITE one byte past the end", R_ALL, FAB_OP_WRITE, BIG - 7, 8, K_VALID, 0},
    {"READ one byte past the end", R_ALL, FAB_OP_READ, 0, BIG + 1, K_VALID, 0},
    {"multi-segment WRITE one byte past the end", R_ALL, FAB_OP_WRITE, 8, UINT64_MAX, K_VALID, 0},
    {"CAS just past the end", R_ALL, FAB_OP_CAS, BIG, 8, K_VALID, 0},
    {"READ just past the end of a small region", R_RW, FAB_OP_READ, SMALL, 8, K_VALID, 0},
    {"FAA just past the end of a small region", R_AO, FAB_OP_FAA, SMALL, 8, K_VALID, 0},
    {"WRITE starting 8 bytes before the start", R_ALL, FAB_OP_WRITE, -8, 16, K_VALID, 0},
    {"READ wholly before the start", R_ALL, FAB_OP_READ, -64, 64, K_VALID, 0},
    {"WRITE whose range wraps past 2^64", R_ALL, FAB_OP_WRITE, 0, 16, K_VALID, UINT64_MAX - 7},
    {"READ whose range wraps past 2^64", R_ALL, FAB_OP_READ, 0, 128, K_VALID, UINT64_MAX - 63},
    {"FAA at the last word below 2^64", R_ALL, FAB_OP_FAA, 0, 8, K_VALID, UINT64_MAX - 7},
    {"WRITE without REMOTE_WRITE (read-only)", R_RO, FAB_OP_WRITE, 0, 8, K_VALID, 0},
    {"WRITE without REMOTE_WRITE (atomic-only)", R_AO, FAB_OP_WRITE, 0, 8, K_VALID, 0},
    {"READ without REMOTE_READ (write-only)", R_WO, FAB_OP_READ, 0, 8, K_VALID, 0},
    {"READ without REMOTE_READ (atomic-only)", R_AO, FAB_OP_READ, 0, 8, K_VALID, 0},
    {"FAA without REMOTE_ATOMIC (read-write)", R_RW, FAB_OP_FAA, 0, 8, K_VALID, 0},
    {"CAS without REMOTE_ATOMIC (read-write)", R_RW, FAB_OP_CAS, 8, 8, K_VALID, 0},
    {"CAS without REMOTE_ATOMIC (read-only)", R_RO, FAB_OP_CAS, 0, 8, K_VALID, 0},
    {"FAA without REMOTE_ATOMIC (write-only)", R_WO, FAB_OP_FAA, 0, 8, K_VALID, 0},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static struct t_target t;
static uint8_t *expect[NREG]; /* expected bytes of each region with its guards */
static uint64_t wrid = 1;

static size_t map_len(int r)
{
	return t.reg[r].len + 2 * t.guard;
}

static void check_target(const char *when)
{
	for (int r = 0; r < NREG; r++) {
		char what[128];

		snprintf(what, sizeof(what), "region %d (with guards) %s", r, when);
		if (!t_mem_equal(t.mem[r] - t.guard, expect[r], map_len(r), what))
			T_FAIL("target memory changed by a rejected request (%s)", when);
	}
}

static uint64_t marker(size_t i, int which)
{
	return 0x3a3a000000000000ull | (uint64_t)i << 8 | (uint64_t)which;
}

static void set_expect(size_t off, uint64_t v)
{
	memcpy(expect[R_ALL] + t.guard + off, &v, 8);
}

static bool landed(size_t off, uint64_t v)
{
	uint64_t got;

	memcpy(&got, t.mem[R_ALL] + off, 8);
	return got == v;
}

static void bad_case(struct fab *fab, size_t i, uint8_t *buf, struct fab_mr *mr, uint32_t garbage)
{
	const struct bad *b = &cases[i];
	const struct t_region *all = &t.reg[R_ALL];
	uint64_t raddr, len = b->len, *vals = (uint64_t *)buf;
	const size_t m_pre = 1024 + i * 32, m_post = m_pre + 8, m_late = m_pre + 16;
	uint32_t rkey;
	struct fab_link *link = t_connect(fab, &t.addr, 100 + i, NULL, 0);
	struct fab_wr wr[3], late[2];
	struct fab_wc wc;
	bool signaled = i % 3 == 0, batch = i % 2 == 0;
	char s[256];

	switch (b->key) {
	case K_GARBAGE:
		rkey = garbage;
		raddr = t.reg[b->reg].addr + (uint64_t)b->off;
		break;
	case K_DEAD:
		rkey = t.dead_rkey;
		raddr = t.dead_addr + (uint64_t)b->off;
		break;
	default:
		rkey = t.reg[b->reg].rkey;
		raddr = t.reg[b->reg].addr + (uint64_t)b->off;
		break;
	}
	if (b->abs != 0)
		raddr = b->abs;
	if (len == UINT64_MAX)
		len = t.reg[b->reg].len + 1 - (uint64_t)b->off;

	vals[0] = marker(i, 1);
	vals[1] = marker(i, 2);
	vals[2] = marker(i, 3);
	wr[0] =
	    t_wr_rdma(FAB_OP_WRITE, wrid++, 0, &vals[0], 8, mr->lkey, all->addr + m_pre, all->rkey);
	wr[1] = t_wr_rdma(b->op, wrid++, signaled ? FAB_WR_SIGNALED : 0, buf + 4096, (uint32_t)len,
	                  mr->lkey, raddr, rkey);
	if (b->op == FAB_OP_CAS) {
		wr[1].compare = 0;
		wr[1].swap = 0x6666666666666666ull;
	} else if (b->op == FAB_OP_FAA) {
		wr[1].swap = 0x100;
	}
	wr[2] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, &vals[1], 8, mr->lkey,
	                  all->addr + m_post, all->rkey);
	if (batch) {
		T_ASSERT_OK(fab_post(link, wr, 3));
	} else {
		for (int k = 0; k < 3; k++)
			T_ASSERT_OK(fab_post(link, &wr[k], 1));
	}

	/* the bad request fails; the one before it executed, in order, before it */
	if (t_poll_one(fab, &wc, TMO) != 0)
		T_FAIL("%s: no completion within %d ms (%s)", b->name, TMO,
		       signaled ? "signaled" : "unsignaled");
	if (wc.wrid != wr[1].wrid || wc.status != -EACCES)
		T_FAIL("%s: got completion %s, expected wrid 0x%llx with -EACCES", b->name,
		       t_wc_str(&wc, s, sizeof(s)), (unsigned long long)wr[1].wrid);
	T_ASSERT_EQX(wc.link_ctx, 100 + i);
	if (!landed(m_pre, marker(i, 1)))
		T_FAIL("%s: the WRITE posted before the bad request did not land", b->name);
	set_expect(m_pre, marker(i, 1));

	/* the one after it is cancelled, never executed */
	T_EXPECT_WC(fab, wr[2].wrid, 0, -ECANCELED, TMO, NULL);

	/* later requests, signaled or not, complete -ECANCELED and do nothing */
	late[0] = t_wr_rdma(FAB_OP_WRITE, wrid++, 0, &vals[2], 8, mr->lkey, all->addr + m_late,
	                    all->rkey);
	late[1] = t_wr_rdma(FAB_OP_READ, wrid++, FAB_WR_SIGNALED, buf + 64, 8, mr->lkey,
	                    all->addr + m_pre, all->rkey);
	T_ASSERT_OK(fab_post(link, late, 2));
	T_EXPECT_WC(fab, late[0].wrid, 0, -ECANCELED, TMO, NULL);
	T_EXPECT_WC(fab, late[1].wrid, 0, -ECANCELED, TMO, NULL);
	T_EXPECT_NONE(fab, 50);
	if (landed(m_post, marker(i, 2)) || landed(m_late, marker(i, 3)))
		T_FAIL("%s: a request after the bad one was executed", b->name);
	check_target(b->name);
	/* fabric.h: "0 while the link is up, else the error that took it down" */
	if (fab_link_state(link) != -EACCES)
		T_FAIL("%s: all completions right, but fab_link_state() is %s, expected -EACCES",
		       b->name, t_errname(fab_link_state(link)));
	T_ASSERT_OK(fab_link_close(link));
	printf("%-50s -EACCES (%s, %s), later requests -ECANCELED: ok\n", b->name,
	       signaled ? "signaled" : "unsignaled", batch ? "one post" : "three posts");
}

static void misaligned(struct fab *fab, uint8_t *buf, struct fab_mr *mr)
{
	const struct t_region *all = &t.reg[R_ALL];
	struct fab_link *link = t_connect(fab, &t.addr, 7, NULL, 0);
	uint64_t *res = (uint64_t *)(buf + 4096), *val = (uint64_t *)buf, old;
	static const unsigned offs[] = {1, 4, 12, 63};
	struct fab_wr wr[2];

	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		wr[0] = t_wr_faa(wrid++, FAB_WR_SIGNALED, res, mr->lkey, all->addr + 256 + offs[k],
		                 all->rkey, 1);
		T_ASSERT_ERR(fab_post(link, wr, 1), -EINVAL);
		wr[0] =
		    t_wr_cas(wrid++, 0, res, mr->lkey, all->addr + 256 + offs[k], all->rkey, 0, 1);
		T_ASSERT_ERR(fab_post(link, wr, 1), -EINVAL);
	}
	/* a valid WRITE followed by a misaligned CAS in one post: nothing is queued */
	*val = 0x7777777777777777ull;
	wr[0] = t_wr_rdma(FAB_OP_WRITE, wrid++, FAB_WR_SIGNALED, val, 8, mr->lkey, all->addr + 512,
	                  all->rkey);
	wr[1] = t_wr_cas(wrid++, FAB_WR_SIGNALED, res, mr->lkey, all->addr + 516, all->rkey, 0, 1);
	T_ASSERT_ERR(fab_post(link, wr, 2), -EINVAL);
	T_EXPECT_NONE(fab, 200);
	if (landed(512, *val))
		T_FAIL("a request of a rejected post was executed");
	check_target("after misaligned atomics");

	/* the link is still up and works */
	T_ASSERT_EQ(fab_link_state(link), 0);
	memcpy(&old, t.mem[R_ALL] + 256, 8);
	wr[0] = t_wr_faa(wrid++, 0, res, mr->lkey, all->addr + 256, all->rkey, 1);
	T_ASSERT_EQ(t_run(link, &wr[0]), 0);
	T_ASSERT_EQX(*res, old);
	set_expect(256, old + 1);
	check_target("after an aligned FAA");
	T_ASSERT_OK(fab_link_close(link));
	printf("misaligned atomics: fab_post -EINVAL, nothing queued, link up: ok\n");
}

/* the target, after all that, serves a new link */
static void new_link(struct fab *fab, uint8_t *buf, struct fab_mr *mr)
{
	const struct t_region *all = &t.reg[R_ALL];
	struct fab_link *link = t_connect(fab, &t.addr, 8, NULL, 0);
	uint64_t *res = (uint64_t *)(buf + 16384), old;

	t_fill(buf, 8192, 4242);
	T_ASSERT_EQ(t_run(link, &(struct fab_wr){.wrid = wrid++,
	                                         .opcode = FAB_OP_WRITE,
	                                         .local = buf,
	                                         .len = 8192,
	                                         .lkey = mr->lkey,
	                                         .remote_addr = all->addr + 16384,
	                                         .rkey = all->rkey}),
	            0);
	memcpy(expect[R_ALL] + t.guard + 16384, buf, 8192);
	memset(buf + 8192, 0, 8192);
	T_ASSERT_EQ(t_run(link, &(struct fab_wr){.wrid = wrid++,
	                                         .opcode = FAB_OP_READ,
	                                         .local = buf + 8192,
	                                         .len = 8192,
	                                         .lkey = mr->lkey,
	                                         .remote_addr = all->addr + 16384,
	                                         .rkey = all->rkey}),
	            0);
	T_ASSERT(t_mem_equal(buf + 8192, buf, 8192, "READ on a new link"));
	memcpy(&old, t.mem[R_ALL] + 16384, 8);
	T_ASSERT_EQ(t_run(link, &(struct fab_wr){.wrid = wrid++,
	                                         .opcode = FAB_OP_CAS,
	                                         .local = res,
	                                         .len = 8,
	                                         .lkey = mr->lkey,
	                                         .remote_addr = all->addr + 16384,
	                                         .rkey = all->rkey,
	                                         .compare = old,
	                                         .swap = 99}),
	            0);
	T_ASSERT_EQX(*res, old);
	set_expect(16384, 99);
	T_ASSERT_EQ(fab_link_state(link), 0);
	T_ASSERT_OK(fab_link_close(link));
	check_target("after a new link");
	printf("new link after the errors: WRITE, READ, CAS ok\n");
}

int main(void)
{
	const unsigned rw = FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE;
	struct t_target_opts o = {
	    .nreg = NREG,
	    .reg = {[R_ALL] = {BIG, rw | FAB_ACCESS_REMOTE_ATOMIC},
	            [R_RO] = {SMALL, FAB_ACCESS_REMOTE_READ},
	            [R_WO] = {SMALL, FAB_ACCESS_REMOTE_WRITE},
	            [R_RW] = {SMALL, rw},
	            [R_AO] = {SMALL, FAB_ACCESS_REMOTE_ATOMIC}},
	    .guard = 4096,
	};
	const size_t blen = BIG + 8192;
	uint32_t garbage = 0x5a5a5a5a;
	struct fab_mr *mr;
	struct fab *fab;
	uint8_t *buf;

	t_init("access", 100);
	t_target_spawn(&o, &t);
	for (int r = 0; r < NREG; r++) {
		t_fill(t.mem[r], t.reg[r].len, 100 + (uint64_t)r);
		expect[r] = malloc(map_len(r));
		T_ASSERT(expect[r] != NULL);
		memcpy(expect[r], t.mem[r] - t.guard, map_len(r));
	}
	for (bool again = true; again;) {
		again = garbage == t.dead_rkey;
		for (int r = 0; r < NREG; r++)
			again |= garbage == t.reg[r].rkey;
		garbage += again ? 0x10001 : 0;
	}

	fab = t_fab_open(NULL);
	buf = t_alloc(blen);
	mr = t_mr_reg(fab, buf, blen, FAB_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < NCASES; i++)
		bad_case(fab, i, buf, mr, garbage);
	misaligned(fab, buf, mr);
	new_link(fab, buf, mr);
	for (int r = 0; r < NREG; r++)
		T_ASSERT(t_guard_intact(&t, r));

	T_ASSERT_OK(fab_mr_dereg(mr));
	fab_close(fab);
	t_target_quit(&t, NULL); /* the target exits 0: it did not crash */
	t_target_free(&t);
	for (int r = 0; r < NREG; r++)
		free(expect[r]);
	t_free(buf, blen);
	printf("access: PASS\n");
	return T_EXIT_PASS;
}
