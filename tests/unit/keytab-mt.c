/* SPDX-License-Identifier: BSD-2-Clause */
/* keytab-mt.c -- keytab_check() racing keytab_add[_foreign]()/keytab_remove() from other threads */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fabric.h"
#include "keytab.h"

/*
 * Regions live in one arena, STRIDE bytes apart, alternately large and
 * small, with unregistered gaps between them. Each writer owns four
 * regions (two of each size) and cycles them through add, hold, remove;
 * the table has one slot per writer, so every add reuses a slot that
 * another region just left. Each writer publishes its current (key,
 * region) pair; readers check the published keys, live or stale, against
 * addresses in any region and count every grant that is not inside the
 * region the key was issued for; the first such grant ends the run early.
 * The keytab contract (keytab.h) allows a racing lookup to return the
 * region of a key being removed, but never another region's memory, and
 * never memory outside every region.
 *
 * The same runs on a foreign table (keys the caller brings, as a verbs
 * device's lkeys): each writer registers all its regions under one key of
 * its own, so a key value comes back at once with another region, and the
 * two writers' keys share their home slot, so lookups probe past the
 * other's entry and removed slots. There a grant may be any region the key
 * was given, but still never memory outside a single one of them (a base
 * of one with the length of another).
 */
#define NREG       8
#define STRIDE     8192
#define BIG        4096
#define SMALL      64
#define NWRITERS   2
#define NREADERS   2
#define WRITER_OPS 20000000     /* bound on add + remove cycles per writer */
#define RUN_NS     1500000000ll /* and on the time they take */
#define READER_MAX 200000000ul  /* bound on checks per reader */

static uint8_t arena[NREG * STRIDE] __attribute__((aligned(4096)));

struct shared {
	struct keytab kt;
	uint64_t pub[NWRITERS]; /* key << 32 | region; 0 before the first add */
	int writers_left;
	int found; /* a violation was seen: everyone may stop early */
	unsigned long grants, refusals, outside_all, wrong_region;
	int writer_err;
	int foreign; /* keytab_init_foreign: writer i's key is foreign_key(i) */
};

struct targ {
	struct shared *sh;
	unsigned id;
};

static size_t reg_size(unsigned r)
{
	return r % 2 ? SMALL : BIG;
}

/* writer_region -- the @k-th of writer @w's regions: writer 0 owns 0, 1, 4, 5; 1 owns 2, 3, 6, 7 */
static unsigned writer_region(unsigned w, unsigned k)
{
	return 2 * w + (k & 1) + (k & 2 ? 4 : 0);
}

/* foreign_key -- writer @w's key on a foreign table of 4 slots: both start probing at one slot */
static uint32_t foreign_key(unsigned w)
{
	return 3 + 4 * w;
}

static uintptr_t reg_base(unsigned r)
{
	return (uintptr_t)arena + (uintptr_t)r * STRIDE;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* inside -- whether [addr, addr + len) lies within region @r. */
static int inside(unsigned r, uint64_t addr, uint64_t len)
{
	return addr >= reg_base(r) && addr - reg_base(r) <= reg_size(r) &&
	       len <= reg_size(r) - (addr - reg_base(r));
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void *writer(void *p)
{
	struct targ *t = p;
	struct shared *sh = t->sh;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (t->id + 1);
	long long end = now_ns() + RUN_NS;

	for (unsigned i = 0; i < WRITER_OPS; i++) {
		unsigned r = writer_region(t->id, i % 4);
		uint32_t key = foreign_key(t->id);
		int ret;

		if ((i & 1023) == 0 &&
		    (__atomic_load_n(&sh->found, __ATOMIC_RELAXED) || now_ns() > end))
			break;

		if (sh->foreign)
			ret = keytab_add_foreign(&sh->kt, key, (void *)reg_base(r), reg_size(r),
			                         FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE);
		else
			ret = keytab_add(&sh->kt, (void *)reg_base(r), reg_size(r),
			                 FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE, &key);
		if (ret != 0) {
			__atomic_store_n(&sh->writer_err, ret, __ATOMIC_RELAXED);
			break;
		}
		__atomic_store_n(&sh->pub[t->id], (uint64_t)key << 32 | r, __ATOMIC_RELAXED);
		/* hold the region for a short, random while */
		for (uint64_t n = xorshift(&rng) % 32; n > 0; n--)
			(void)__atomic_load_n(&sh->writers_left, __ATOMIC_RELAXED);
		ret = keytab_remove(&sh->kt, key);
		if (ret != 0) {
			__atomic_store_n(&sh->writer_err, ret, __ATOMIC_RELAXED);
			break;
		}
	}
	__atomic_fetch_sub(&sh->writers_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *reader(void *p)
{
	struct targ *t = p;
	struct shared *sh = t->sh;
	uint64_t rng = 0xd1b54a32d192ed03ull * (t->id + 1);
	unsigned long grants = 0, refusals = 0, outside_all = 0, wrong_region = 0;

	for (unsigned long i = 0; i < READER_MAX; i++) {
		uint64_t x = xorshift(&rng);
		unsigned w = (unsigned)(x % NWRITERS);
		uint64_t v = __atomic_load_n(&sh->pub[w], __ATOMIC_RELAXED);
		uint32_t key = (uint32_t)(v >> 32);
		unsigned r = (unsigned)(v & 0xff);
		/* half of the time the key's own region, else any region */
		unsigned target = (x >> 8) & 1 ? r : (unsigned)((x >> 9) % NREG);
		uint64_t off = (x >> 16) & 1 ? (x >> 20) % SMALL : (x >> 20) % (BIG + SMALL);
		uint64_t len = (x >> 40) % (SMALL + 1);
		uint64_t addr = reg_base(target) + off;
		void *ptr = NULL;
		int in_any = 0, in_own = 0;

		if ((i & 1023) == 0 && __atomic_load_n(&sh->writers_left, __ATOMIC_ACQUIRE) == 0)
			break;
		if (keytab_check(&sh->kt, key, addr, len, FAB_ACCESS_REMOTE_READ, &ptr) != 0) {
			refusals++;
			continue;
		}
		grants++;
		for (unsigned j = 0; j < NREG; j++)
			in_any |= inside(j, addr, len);
		if ((uintptr_t)ptr != addr || !in_any)
			outside_all++;
		if (sh->foreign) {
			for (unsigned k = 0; k < 4; k++)
				in_own |= inside(writer_region(w, k), addr, len);
		} else {
			in_own = inside(r, addr, len);
		}
		if ((uintptr_t)ptr != addr || !in_own) {
			wrong_region++;
			__atomic_store_n(&sh->found, 1, __ATOMIC_RELAXED);
		}
	}
	__atomic_fetch_add(&sh->grants, grants, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->refusals, refusals, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->outside_all, outside_all, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->wrong_region, wrong_region, __ATOMIC_RELAXED);
	return NULL;
}

/* race -- run the writers and readers on @sh->kt, then check what the readers saw. */
static void race(struct shared *sh)
{
	pthread_t w[NWRITERS], r[NREADERS];
	struct targ wa[NWRITERS], ra[NREADERS];

	sh->writers_left = NWRITERS;

	/* run */
	for (unsigned i = 0; i < NREADERS; i++) {
		ra[i] = (struct targ){.sh = sh, .id = i};
		assert_int_equal(pthread_create(&r[i], NULL, reader, &ra[i]), 0);
	}
	for (unsigned i = 0; i < NWRITERS; i++) {
		wa[i] = (struct targ){.sh = sh, .id = i};
		assert_int_equal(pthread_create(&w[i], NULL, writer, &wa[i]), 0);
	}
	for (unsigned i = 0; i < NWRITERS; i++)
		assert_int_equal(pthread_join(w[i], NULL), 0);
	for (unsigned i = 0; i < NREADERS; i++)
		assert_int_equal(pthread_join(r[i], NULL), 0);

	/* verify */
	printf("# grants %lu refusals %lu outside every region %lu outside the key's region %lu\n",
	       sh->grants, sh->refusals, sh->outside_all, sh->wrong_region);
	assert_int_equal(sh->writer_err, 0);
	assert_true(sh->grants > 0); /* the race was really exercised both ways */
	assert_true(sh->refusals > 0);
	assert_int_equal(sh->outside_all, 0);
	assert_int_equal(sh->wrong_region, 0);

	/* every region is gone: the last published keys reach nothing */
	for (unsigned i = 0; i < NWRITERS; i++) {
		void *ptr = NULL;
		unsigned reg = (unsigned)(sh->pub[i] & 0xff);

		assert_int_equal(keytab_check(&sh->kt, (uint32_t)(sh->pub[i] >> 32), reg_base(reg),
		                              1, FAB_ACCESS_REMOTE_READ, &ptr),
		                 -EACCES);
	}
	keytab_fini(&sh->kt);
}

static void check__concurrent_add_remove_grants_only_own_region(void **state)
{
	static struct shared sh;

	(void)state;
	/* configure: one slot per writer, so slots are reused all the time */
	memset(&sh, 0, sizeof(sh));
	assert_int_equal(keytab_init(&sh.kt, NWRITERS), 0);

	/* run + verify */
	race(&sh);
}

static void check_foreign__concurrent_add_remove_grants_only_given_regions(void **state)
{
	static struct shared sh;

	(void)state;
	/* configure: 4 slots, room for the 2 writers' keys, which collide */
	memset(&sh, 0, sizeof(sh));
	assert_int_equal(keytab_init_foreign(&sh.kt, 2 * NWRITERS), 0);
	sh.foreign = 1;

	/* run + verify */
	race(&sh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(check__concurrent_add_remove_grants_only_own_region),
	    cmocka_unit_test(check_foreign__concurrent_add_remove_grants_only_given_regions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
