/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * keytab.c -- keytab_init/add/remove/check: keys, generations, rights and
 * overflow-safe bounds; keytab_init_foreign/add_foreign: keys the caller
 * brings, probing past removed slots
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "fabric.h"
#include "keytab.h"

#define NELEM(a)         (sizeof(a) / sizeof((a)[0]))
#define ACC_ALL          15u
#define ACC_REMOTE       (FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC)
#define SLOT(kt, k)      ((k) & ((1u << (kt)->idx_bits) - 1))
#define GEN(kt, k)       ((k) >> (kt)->idx_bits)
#define KEY(kt, g, slot) (((uint32_t)(g) << (kt)->idx_bits) | (slot))
#define BOGUS_PTR        ((void *)(uintptr_t)0x5a5a5a5a)
#define BOGUS_KEY        0x5a5a5a5au

static uint8_t buf_a[4096] __attribute__((aligned(64)));
static uint8_t buf_b[512] __attribute__((aligned(64)));

struct fixture {
	struct keytab kt;
	uint32_t key_a; /* buf_a, all rights */
	uint64_t base;  /* (uint64_t)buf_a */
};

static int setup(void **state)
{
	static struct fixture fx;

	memset(&fx, 0, sizeof(fx));
	if (keytab_init(&fx.kt, 8) != 0)
		return -1;
	if (keytab_add(&fx.kt, buf_a, sizeof(buf_a), ACC_ALL, &fx.key_a) != 0)
		return -1;
	fx.base = (uint64_t)(uintptr_t)buf_a;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	keytab_fini(&fx->kt);
	return 0;
}

/*
 * expect_refused -- keytab_check() gives -EACCES and leaves *ptr alone;
 * so does keytab_check_last(), with nothing remembered and then after it
 * looked up the same key for the widest grant it has (the remembered
 * entry must answer as the table does).
 */
static void expect_refused(const struct keytab *kt, uint32_t key, uint64_t addr, uint64_t len,
                           unsigned access)
{
	struct keytab_last last = {0};
	void *ptr = BOGUS_PTR;

	assert_int_equal(keytab_check(kt, key, addr, len, access, &ptr), -EACCES);
	assert_ptr_equal(ptr, BOGUS_PTR);
	assert_int_equal(keytab_check_last(kt, &last, key, addr, len, access, &ptr), -EACCES);
	assert_ptr_equal(ptr, BOGUS_PTR);
	(void)keytab_check_last(kt, &last, key, addr, 0, 0, &ptr); /* remembers it if it is there */
	ptr = BOGUS_PTR;
	assert_int_equal(keytab_check_last(kt, &last, key, addr, len, access, &ptr), -EACCES);
	assert_ptr_equal(ptr, BOGUS_PTR);
}

/* expect_granted -- keytab_check() gives 0 and *ptr == addr; keytab_check_last() twice too. */
static void expect_granted(const struct keytab *kt, uint32_t key, uint64_t addr, uint64_t len,
                           unsigned access)
{
	struct keytab_last last = {0};
	void *ptr = BOGUS_PTR;

	assert_int_equal(keytab_check(kt, key, addr, len, access, &ptr), 0);
	assert_ptr_equal(ptr, (void *)(uintptr_t)addr);
	for (int i = 0; i < 2; i++) { /* read, then remembered */
		ptr = BOGUS_PTR;
		assert_int_equal(keytab_check_last(kt, &last, key, addr, len, access, &ptr), 0);
		assert_ptr_equal(ptr, (void *)(uintptr_t)addr);
		assert_non_null(last.e);
	}
}

static void init__bad_cap_is_einval(void **state)
{
	const uint32_t caps[] = {0, KEYTAB_MAX + 1, UINT32_MAX};
	struct keytab kt;

	(void)state;
	for (size_t i = 0; i < NELEM(caps); i++) {
		/* configure */
		memset(&kt, 0x5a, sizeof(kt));

		/* run + verify */
		assert_int_equal(keytab_init(&kt, caps[i]), -EINVAL);
	}
	assert_int_equal(keytab_init(NULL, 4), -EINVAL);
}

static void init__cap_limits_ok(void **state)
{
	const uint32_t caps[] = {1, KEYTAB_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(caps); i++) {
		/* configure */
		struct keytab kt;
		uint32_t key;

		/* run */
		assert_int_equal(keytab_init(&kt, caps[i]), 0);

		/* verify: usable, then cleaned up twice safely */
		assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), ACC_ALL, &key), 0);
		expect_granted(&kt, key, (uintptr_t)buf_b, sizeof(buf_b), ACC_ALL);
		keytab_fini(&kt);
		keytab_fini(&kt);
	}
}

static void add__key_is_nonzero_and_maps_region(void **state)
{
	struct fixture *fx = *state;
	void *ptr = NULL;

	/* run */
	assert_int_equal(
	    keytab_check(&fx->kt, fx->key_a, fx->base + 100, 28, FAB_ACCESS_REMOTE_WRITE, &ptr), 0);

	/* verify */
	assert_int_not_equal(fx->key_a, 0);
	assert_int_not_equal(GEN(&fx->kt, fx->key_a), 0);
	assert_ptr_equal(ptr, buf_a + 100);
}

static void add__bad_args_are_einval(void **state)
{
	struct fixture *fx = *state;
	uint32_t key = BOGUS_KEY;

	/* run + verify: key untouched each time */
	assert_int_equal(keytab_add(&fx->kt, NULL, 16, ACC_ALL, &key), -EINVAL);
	assert_int_equal(keytab_add(&fx->kt, buf_b, 0, ACC_ALL, &key), -EINVAL);
	assert_int_equal(keytab_add(&fx->kt, buf_b, 16, ACC_ALL, NULL), -EINVAL);
	/* [base, base + len) wraps around the address space */
	assert_int_equal(keytab_add(&fx->kt, (void *)(UINTPTR_MAX - 15), 17, ACC_ALL, &key),
	                 -EINVAL);
	assert_int_equal(keytab_add(&fx->kt, buf_b, SIZE_MAX, ACC_ALL, &key), -EINVAL);
	assert_int_equal(key, BOGUS_KEY);
}

static void add__keys_are_distinct(void **state)
{
	struct fixture *fx = *state;
	uint32_t keys[8];

	/* configure: fill the table (slot of key_a is already taken) */
	keys[0] = fx->key_a;
	for (int i = 1; i < 8; i++)
		assert_int_equal(keytab_add(&fx->kt, buf_b, sizeof(buf_b), ACC_ALL, &keys[i]), 0);

	/* verify: distinct keys and distinct slots */
	for (int i = 0; i < 8; i++) {
		assert_int_not_equal(keys[i], 0);
		for (int j = 0; j < i; j++) {
			assert_int_not_equal(keys[i], keys[j]);
			assert_int_not_equal(SLOT(&fx->kt, keys[i]), SLOT(&fx->kt, keys[j]));
		}
	}
}

static void add__table_full_is_enospc(void **state)
{
	struct keytab kt;
	uint32_t k[3], key = BOGUS_KEY;

	(void)state;
	/* configure */
	assert_int_equal(keytab_init(&kt, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), ACC_ALL, &k[i]), 0);

	/* run + verify */
	assert_int_equal(keytab_add(&kt, buf_a, sizeof(buf_a), ACC_ALL, &key), -ENOSPC);
	assert_int_equal(key, BOGUS_KEY);

	/* a freed slot is usable again, and only that one */
	assert_int_equal(keytab_remove(&kt, k[1]), 0);
	assert_int_equal(keytab_add(&kt, buf_a, sizeof(buf_a), ACC_ALL, &key), 0);
	assert_int_equal(SLOT(&kt, key), SLOT(&kt, k[1]));
	assert_int_equal(keytab_add(&kt, buf_a, sizeof(buf_a), ACC_ALL, &key), -ENOSPC);
	keytab_fini(&kt);
}

static void remove__then_check_is_eacces(void **state)
{
	struct fixture *fx = *state;

	/* run */
	assert_int_equal(keytab_remove(&fx->kt, fx->key_a), 0);

	/* verify */
	expect_refused(&fx->kt, fx->key_a, fx->base, 8, 0);
	assert_int_equal(keytab_remove(&fx->kt, fx->key_a), -ENOENT);
}

static void remove__unknown_key_is_enoent(void **state)
{
	struct fixture *fx = *state;
	const uint32_t keys[] = {
	    0,
	    fx->key_a + (1u << fx->kt.idx_bits),          /* right slot, wrong generation */
	    KEY(&fx->kt, GEN(&fx->kt, fx->key_a), 7),     /* free slot */
	    KEY(&fx->kt, 1, (1u << fx->kt.idx_bits) - 1), /* the last slot, free */
	    UINT32_MAX,
	};

	for (size_t i = 0; i < NELEM(keys); i++)
		assert_int_equal(keytab_remove(&fx->kt, keys[i]), -ENOENT);

	/* verify: the live key survived every wrong remove */
	expect_granted(&fx->kt, fx->key_a, fx->base, sizeof(buf_a), ACC_ALL);
}

static void check__stale_key_after_slot_reuse_is_eacces(void **state)
{
	struct keytab kt;
	uint32_t k1, k2;

	(void)state;
	/* configure: one slot, so the re-add must reuse it */
	assert_int_equal(keytab_init(&kt, 1), 0);
	assert_int_equal(keytab_add(&kt, buf_a, sizeof(buf_a), ACC_ALL, &k1), 0);
	assert_int_equal(keytab_remove(&kt, k1), 0);

	/* run */
	assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), ACC_ALL, &k2), 0);

	/* verify: same slot, new generation; the old key reaches nothing */
	assert_int_equal(SLOT(&kt, k1), SLOT(&kt, k2));
	assert_int_not_equal(k1, k2);
	expect_refused(&kt, k1, (uintptr_t)buf_b, 1, 0);
	expect_refused(&kt, k1, (uintptr_t)buf_a, 1, 0);
	assert_int_equal(keytab_remove(&kt, k1), -ENOENT);
	expect_granted(&kt, k2, (uintptr_t)buf_b, sizeof(buf_b), ACC_ALL);
	keytab_fini(&kt);
}

/*
 * keytab_check_last() keeps what it read only while the slot does: after
 * the region is removed, and after its slot holds another region, the
 * remembered key is refused, and the new one is granted through the same
 * memory; switching between two keys reads each again.
 */
static void check_last__forgets_a_removed_or_reused_slot(void **state)
{
	struct keytab_last last = {0};
	struct keytab kt;
	uint32_t k1, k2, k3;
	void *ptr;

	(void)state;
	/* configure: one slot for k1/k2 (the re-add must reuse it), one more for k3 */
	assert_int_equal(keytab_init(&kt, 2), 0);
	assert_int_equal(keytab_add(&kt, buf_a, sizeof(buf_a), ACC_ALL, &k1), 0);
	assert_int_equal(keytab_check_last(&kt, &last, k1, (uintptr_t)buf_a, 8, ACC_ALL, &ptr), 0);

	/* run, verify: removed */
	assert_int_equal(keytab_remove(&kt, k1), 0);
	ptr = BOGUS_PTR;
	assert_int_equal(keytab_check_last(&kt, &last, k1, (uintptr_t)buf_a, 8, 0, &ptr), -EACCES);
	assert_ptr_equal(ptr, BOGUS_PTR);

	/* the other slot first (round robin), then k1's slot again, another region */
	assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), FAB_ACCESS_REMOTE_READ, &k3), 0);
	assert_int_equal(keytab_remove(&kt, k3), 0);
	assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), FAB_ACCESS_REMOTE_READ, &k2), 0);
	assert_int_equal(SLOT(&kt, k1), SLOT(&kt, k2));
	assert_int_equal(keytab_check_last(&kt, &last, k1, (uintptr_t)buf_b, 8, 0, &ptr), -EACCES);
	assert_int_equal(
	    keytab_check_last(&kt, &last, k2, (uintptr_t)buf_b, 8, FAB_ACCESS_REMOTE_READ, &ptr),
	    0);
	/* remembered: still the new region's bounds and rights */
	assert_int_equal(keytab_check_last(&kt, &last, k2, (uintptr_t)buf_a, 8, 0, &ptr), -EACCES);
	assert_int_equal(
	    keytab_check_last(&kt, &last, k2, (uintptr_t)buf_b, 8, FAB_ACCESS_REMOTE_WRITE, &ptr),
	    -EACCES);
	assert_int_equal(
	    keytab_check_last(&kt, &last, k2, (uintptr_t)buf_b, sizeof(buf_b) + 1, 0, &ptr),
	    -EACCES);

	/* two live keys in turn */
	assert_int_equal(keytab_add(&kt, buf_a, sizeof(buf_a), ACC_ALL, &k3), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    keytab_check_last(&kt, &last, k3, (uintptr_t)buf_a + 64, 64, ACC_ALL, &ptr), 0);
		assert_ptr_equal(ptr, buf_a + 64);
		assert_int_equal(
		    keytab_check_last(&kt, &last, k2, (uintptr_t)buf_a + 64, 64, 0, &ptr), -EACCES);
	}
	keytab_fini(&kt);
}

static void add__key_never_zero_across_generation_wrap(void **state)
{
	/* start the slot's generation near its end, so that it wraps */
	const uint32_t rounds = 64;
	struct keytab kt;
	uint32_t key, prev = 0;

	(void)state;
	/* configure */
	assert_int_equal(keytab_init(&kt, 1), 0);
	kt.gen[0] = (1u << (32 - kt.idx_bits)) - 32;

	for (uint32_t i = 0; i < rounds; i++) {
		/* run */
		assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), ACC_ALL, &key), 0);

		/* verify: never 0, never generation 0, always a new key for the slot */
		assert_int_not_equal(key, 0);
		assert_int_not_equal(GEN(&kt, key), 0);
		assert_int_equal(SLOT(&kt, key), 0);
		assert_int_not_equal(key, prev);
		expect_refused(&kt, prev, (uintptr_t)buf_b, 1, 0);
		expect_granted(&kt, key, (uintptr_t)buf_b, 1, ACC_ALL);
		assert_int_equal(keytab_remove(&kt, key), 0);
		prev = key;
	}
	keytab_fini(&kt);
}

static void check__each_access_bit(void **state)
{
	const unsigned bits[] = {FAB_ACCESS_LOCAL_WRITE, FAB_ACCESS_REMOTE_READ,
	                         FAB_ACCESS_REMOTE_WRITE, FAB_ACCESS_REMOTE_ATOMIC};
	struct keytab kt;

	(void)state;
	assert_int_equal(keytab_init(&kt, 1), 0);
	for (unsigned granted = 0; granted <= ACC_ALL; granted++) {
		/* configure: a region with exactly @granted rights */
		uint32_t key;

		assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), granted, &key), 0);

		/* run + verify: each single right, then each requested combination */
		for (size_t b = 0; b < NELEM(bits); b++) {
			if (granted & bits[b])
				expect_granted(&kt, key, (uintptr_t)buf_b, 8, bits[b]);
			else
				expect_refused(&kt, key, (uintptr_t)buf_b, 8, bits[b]);
		}
		for (unsigned want = 0; want <= ACC_ALL; want++) {
			if ((granted & want) == want)
				expect_granted(&kt, key, (uintptr_t)buf_b, 8, want);
			else
				expect_refused(&kt, key, (uintptr_t)buf_b, 8, want);
		}
		assert_int_equal(keytab_remove(&kt, key), 0);
	}
	keytab_fini(&kt);
}

static void check__whole_region_and_exact_end_ok(void **state)
{
	struct fixture *fx = *state;
	const uint64_t n = sizeof(buf_a);

	/* run + verify */
	expect_granted(&fx->kt, fx->key_a, fx->base, n, ACC_REMOTE);
	expect_granted(&fx->kt, fx->key_a, fx->base + n - 8, 8, ACC_REMOTE);
	expect_granted(&fx->kt, fx->key_a, fx->base + n - 1, 1, ACC_REMOTE);
	expect_granted(&fx->kt, fx->key_a, fx->base, 1, ACC_REMOTE);
}

static void check__one_past_end_is_eacces(void **state)
{
	struct fixture *fx = *state;
	const uint64_t n = sizeof(buf_a);

	/* run + verify */
	expect_refused(&fx->kt, fx->key_a, fx->base, n + 1, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base + n - 7, 8, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base + n, 1, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base + n + 1, 0, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base + 2 * n, 8, 0);
}

static void check__len_zero_at_end_ok(void **state)
{
	struct fixture *fx = *state;

	/* run + verify: an empty range touching the end is inside */
	expect_granted(&fx->kt, fx->key_a, fx->base + sizeof(buf_a), 0, ACC_REMOTE);
	expect_granted(&fx->kt, fx->key_a, fx->base, 0, ACC_REMOTE);
}

static void check__addr_below_base_is_eacces(void **state)
{
	struct fixture *fx = *state;

	/* run + verify: also when the range would end inside the region */
	expect_refused(&fx->kt, fx->key_a, fx->base - 1, 1, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base - 1, 2, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base - 8, 0, 0);
	expect_refused(&fx->kt, fx->key_a, 0, fx->base + 8, 0);
	expect_refused(&fx->kt, fx->key_a, 0, 0, 0);
}

static void check__range_wraps_around_is_eacces(void **state)
{
	struct fixture *fx = *state;

	/* run + verify: addr + len overflows to a value inside the region */
	expect_refused(&fx->kt, fx->key_a, fx->base + 8, UINT64_MAX, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base + 8, UINT64_MAX - 7, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base + 8, (uint64_t)0 - fx->base, 0);
	expect_refused(&fx->kt, fx->key_a, UINT64_MAX, 1, 0);
	expect_refused(&fx->kt, fx->key_a, UINT64_MAX, fx->base + 2, 0);
	expect_refused(&fx->kt, fx->key_a, UINT64_MAX - 3, 0, 0);
	expect_refused(&fx->kt, fx->key_a, fx->base, UINT64_MAX, 0);
}

static void check__region_near_top_of_address_space(void **state)
{
	/* never dereferenced: keytab only does arithmetic on the base */
	const uintptr_t top = UINTPTR_MAX - 8191;
	struct keytab kt;
	uint32_t key;

	(void)state;
	/* configure */
	assert_int_equal(keytab_init(&kt, 2), 0);
	assert_int_equal(keytab_add(&kt, (void *)top, 4096, ACC_ALL, &key), 0);

	/* run + verify */
	expect_granted(&kt, key, top, 4096, ACC_ALL);
	expect_granted(&kt, key, top + 4096, 0, ACC_ALL);
	expect_refused(&kt, key, top + 4095, 2, 0);
	expect_refused(&kt, key, top + 4095, UINT64_MAX, 0);
	expect_refused(&kt, key, top + 1, UINT64_MAX - top, 0);
	expect_refused(&kt, key, UINT64_MAX, 1, 0);
	expect_refused(&kt, key, UINT64_MAX, 0, 0);
	expect_refused(&kt, key, top - 1, 1, 0);
	keytab_fini(&kt);
}

static void check__bad_key_is_eacces(void **state)
{
	struct fixture *fx = *state;

	/* run + verify: zero, a free slot, slot >= cap, wrong generation */
	expect_refused(&fx->kt, 0, fx->base, 1, 0);
	expect_refused(&fx->kt, KEY(&fx->kt, GEN(&fx->kt, fx->key_a), 3), fx->base, 1, 0);
	expect_refused(&fx->kt, KEY(&fx->kt, 1, (1u << fx->kt.idx_bits) - 1), fx->base, 1, 0);
	expect_refused(&fx->kt, fx->key_a + (1u << fx->kt.idx_bits), fx->base, 1, 0);
	expect_refused(&fx->kt, UINT32_MAX, fx->base, 1, 0);
}

static void check__regions_are_separate(void **state)
{
	struct fixture *fx = *state;
	uint32_t key_b;

	/* configure */
	assert_int_equal(keytab_add(&fx->kt, buf_b, sizeof(buf_b), FAB_ACCESS_REMOTE_READ, &key_b),
	                 0);

	/* run + verify: each key reaches its own region only, with its own rights */
	expect_granted(&fx->kt, key_b, (uintptr_t)buf_b, sizeof(buf_b), FAB_ACCESS_REMOTE_READ);
	expect_refused(&fx->kt, key_b, (uintptr_t)buf_b, 8, FAB_ACCESS_REMOTE_WRITE);
	expect_refused(&fx->kt, key_b, fx->base, 8, FAB_ACCESS_REMOTE_READ);
	expect_refused(&fx->kt, fx->key_a, (uintptr_t)buf_b, 8, FAB_ACCESS_REMOTE_READ);
	expect_granted(&fx->kt, fx->key_a, fx->base, 8, FAB_ACCESS_REMOTE_WRITE);

	/* removing one leaves the other */
	assert_int_equal(keytab_remove(&fx->kt, key_b), 0);
	expect_refused(&fx->kt, key_b, (uintptr_t)buf_b, 8, FAB_ACCESS_REMOTE_READ);
	expect_granted(&fx->kt, fx->key_a, fx->base, 8, FAB_ACCESS_REMOTE_WRITE);
}

/* foreign tables: keys the caller brings (a verbs device's lkeys) */

#define FCAP 8

/* colliding -- the @n-th key whose probe run starts in @key's home slot (the hash is odd * key). */
static uint32_t colliding(uint32_t key, uint32_t n)
{
	return key + n * FCAP;
}

static void init_foreign__bad_cap_is_einval(void **state)
{
	const uint32_t caps[] = {0, 1, 3, 6, 12, KEYTAB_MAX + 1, 2 * KEYTAB_MAX, UINT32_MAX};
	struct keytab kt;

	(void)state;
	for (size_t i = 0; i < NELEM(caps); i++) {
		/* configure */
		memset(&kt, 0x5a, sizeof(kt));

		/* run + verify */
		assert_int_equal(keytab_init_foreign(&kt, caps[i]), -EINVAL);
	}
	assert_int_equal(keytab_init_foreign(NULL, 8), -EINVAL);
}

static void add_foreign__any_key_maps_its_region(void **state)
{
	const uint32_t keys[] = {0, 1, 0x1234, UINT32_MAX};
	struct keytab kt;

	(void)state;
	/* configure: room for all of them (half the slots) */
	assert_int_equal(keytab_init_foreign(&kt, 2 * NELEM(keys)), 0);

	/* run */
	for (size_t i = 0; i < NELEM(keys); i++)
		assert_int_equal(
		    keytab_add_foreign(&kt, keys[i], buf_a + 16 * i, 16, FAB_ACCESS_LOCAL_WRITE),
		    0);

	/* verify: each key reaches its own 16 bytes, with its rights, and no further */
	for (size_t i = 0; i < NELEM(keys); i++) {
		uintptr_t base = (uintptr_t)buf_a + 16 * i;

		expect_granted(&kt, keys[i], base, 16, FAB_ACCESS_LOCAL_WRITE);
		expect_granted(&kt, keys[i], base + 15, 1, 0);
		expect_refused(&kt, keys[i], base, 17, 0);
		expect_refused(&kt, keys[i], base - 1, 1, 0);
		expect_refused(&kt, keys[i], base, 8, FAB_ACCESS_REMOTE_READ);
	}
	expect_refused(&kt, 2, (uintptr_t)buf_a, 1, 0);
	keytab_fini(&kt);
}

static void add_foreign__bad_args_are_einval(void **state)
{
	struct keytab kt, own;
	uint32_t key = BOGUS_KEY;

	(void)state;
	/* configure */
	assert_int_equal(keytab_init_foreign(&kt, FCAP), 0);
	assert_int_equal(keytab_init(&own, FCAP), 0);

	/* run + verify */
	assert_int_equal(keytab_add_foreign(&kt, 5, NULL, 16, ACC_ALL), -EINVAL);
	assert_int_equal(keytab_add_foreign(&kt, 5, buf_b, 0, ACC_ALL), -EINVAL);
	assert_int_equal(keytab_add_foreign(&kt, 5, (void *)(UINTPTR_MAX - 15), 17, ACC_ALL),
	                 -EINVAL);
	/* each kind of table takes only its own kind of add */
	assert_int_equal(keytab_add(&kt, buf_b, sizeof(buf_b), ACC_ALL, &key), -EINVAL);
	assert_int_equal(key, BOGUS_KEY);
	assert_int_equal(keytab_add_foreign(&own, 5, buf_b, sizeof(buf_b), ACC_ALL), -EINVAL);
	expect_refused(&kt, 5, (uintptr_t)buf_b, 1, 0);
	expect_refused(&own, 5, (uintptr_t)buf_b, 1, 0);
	keytab_fini(&kt);
	keytab_fini(&own);
}

static void add_foreign__same_key_twice_is_eexist(void **state)
{
	struct keytab kt;

	(void)state;
	/* configure: the key behind another one of its probe run */
	assert_int_equal(keytab_init_foreign(&kt, FCAP), 0);
	assert_int_equal(keytab_add_foreign(&kt, colliding(3, 0), buf_a, 64, ACC_ALL), 0);
	assert_int_equal(keytab_add_foreign(&kt, colliding(3, 1), buf_a + 64, 64, ACC_ALL), 0);

	/* run + verify: the first region stays */
	assert_int_equal(keytab_add_foreign(&kt, colliding(3, 1), buf_b, 64, ACC_ALL), -EEXIST);
	assert_int_equal(keytab_add_foreign(&kt, colliding(3, 0), buf_b, 64, ACC_ALL), -EEXIST);
	expect_granted(&kt, colliding(3, 1), (uintptr_t)buf_a + 64, 64, ACC_ALL);
	expect_refused(&kt, colliding(3, 1), (uintptr_t)buf_b, 1, 0);
	keytab_fini(&kt);
}

static void add_foreign__half_full_is_enospc(void **state)
{
	struct keytab kt;

	(void)state;
	/* configure: FCAP / 2 regions */
	assert_int_equal(keytab_init_foreign(&kt, FCAP), 0);
	for (uint32_t k = 0; k < FCAP / 2; k++)
		assert_int_equal(keytab_add_foreign(&kt, 100 + k, buf_a, 64, ACC_ALL), 0);

	/* run + verify */
	assert_int_equal(keytab_add_foreign(&kt, 200, buf_b, 64, ACC_ALL), -ENOSPC);
	expect_refused(&kt, 200, (uintptr_t)buf_b, 1, 0);

	/* a removed region makes room for one more */
	assert_int_equal(keytab_remove(&kt, 101), 0);
	assert_int_equal(keytab_add_foreign(&kt, 200, buf_b, 64, ACC_ALL), 0);
	expect_granted(&kt, 200, (uintptr_t)buf_b, 64, ACC_ALL);
	assert_int_equal(keytab_add_foreign(&kt, 201, buf_b, 64, ACC_ALL), -ENOSPC);
	keytab_fini(&kt);
}

static void check_foreign__probe_goes_past_removed_slots(void **state)
{
	struct keytab kt;

	(void)state;
	/* configure: three keys with one home slot; the middle one removed */
	assert_int_equal(keytab_init_foreign(&kt, FCAP), 0);
	for (uint32_t n = 0; n < 3; n++)
		assert_int_equal(
		    keytab_add_foreign(&kt, colliding(5, n), buf_a + 64 * n, 64, ACC_ALL), 0);
	assert_int_equal(keytab_remove(&kt, colliding(5, 1)), 0);

	/* run + verify: the last key is still found behind the removed slot */
	expect_granted(&kt, colliding(5, 2), (uintptr_t)buf_a + 128, 64, ACC_ALL);
	expect_granted(&kt, colliding(5, 0), (uintptr_t)buf_a, 64, ACC_ALL);
	expect_refused(&kt, colliding(5, 1), (uintptr_t)buf_a + 64, 1, 0);
	expect_refused(&kt, colliding(5, 3), (uintptr_t)buf_a, 1, 0);
	assert_int_equal(keytab_remove(&kt, colliding(5, 1)), -ENOENT);

	/* the removed key comes back with another region, and all three hold */
	assert_int_equal(keytab_add_foreign(&kt, colliding(5, 1), buf_b, 64, ACC_ALL), 0);
	expect_granted(&kt, colliding(5, 1), (uintptr_t)buf_b, 64, ACC_ALL);
	expect_refused(&kt, colliding(5, 1), (uintptr_t)buf_a + 64, 1, 0);
	expect_granted(&kt, colliding(5, 2), (uintptr_t)buf_a + 128, 64, ACC_ALL);
	keytab_fini(&kt);
}

static void remove_foreign__then_check_is_eacces(void **state)
{
	struct keytab kt;

	(void)state;
	/* configure */
	assert_int_equal(keytab_init_foreign(&kt, FCAP), 0);
	assert_int_equal(keytab_add_foreign(&kt, 0, buf_b, sizeof(buf_b), ACC_ALL), 0);

	/* run + verify */
	assert_int_equal(keytab_remove(&kt, 7), -ENOENT);
	assert_int_equal(keytab_remove(&kt, 0), 0);
	expect_refused(&kt, 0, (uintptr_t)buf_b, 1, 0);
	assert_int_equal(keytab_remove(&kt, 0), -ENOENT);
	keytab_fini(&kt);
}

static void check_foreign__every_slot_reused_many_times(void **state)
{
	struct keytab kt;

	(void)state;
	/* configure: a full probe run of removed slots, then keys everywhere */
	assert_int_equal(keytab_init_foreign(&kt, FCAP), 0);
	for (uint32_t round = 0; round < 1000; round++) {
		uint32_t k = round * 7919u;

		/* run */
		assert_int_equal(keytab_add_foreign(&kt, k, buf_b, sizeof(buf_b), ACC_ALL), 0);
		assert_int_equal(keytab_add_foreign(&kt, k + 1, buf_a, sizeof(buf_a), ACC_ALL), 0);

		/* verify: each key reaches its own region only */
		expect_granted(&kt, k, (uintptr_t)buf_b, sizeof(buf_b), ACC_ALL);
		expect_granted(&kt, k + 1, (uintptr_t)buf_a, sizeof(buf_a), ACC_ALL);
		expect_refused(&kt, k, (uintptr_t)buf_a, 1, 0);
		assert_int_equal(keytab_remove(&kt, k), 0);
		assert_int_equal(keytab_remove(&kt, k + 1), 0);
		expect_refused(&kt, k + 1, (uintptr_t)buf_a, 1, 0);
	}
	keytab_fini(&kt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(init__bad_cap_is_einval),
	    cmocka_unit_test(init__cap_limits_ok),
	    cmocka_unit_test_setup_teardown(add__key_is_nonzero_and_maps_region, setup, teardown),
	    cmocka_unit_test_setup_teardown(add__bad_args_are_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(add__keys_are_distinct, setup, teardown),
	    cmocka_unit_test(add__table_full_is_enospc),
	    cmocka_unit_test(add__key_never_zero_across_generation_wrap),
	    cmocka_unit_test_setup_teardown(remove__then_check_is_eacces, setup, teardown),
	    cmocka_unit_test_setup_teardown(remove__unknown_key_is_enoent, setup, teardown),
	    cmocka_unit_test(check__stale_key_after_slot_reuse_is_eacces),
	    cmocka_unit_test(check_last__forgets_a_removed_or_reused_slot),
	    cmocka_unit_test(check__each_access_bit),
	    cmocka_unit_test_setup_teardown(check__whole_region_and_exact_end_ok, setup, teardown),
	    cmocka_unit_test_setup_teardown(check__one_past_end_is_eacces, setup, teardown),
	    cmocka_unit_test_setup_teardown(check__len_zero_at_end_ok, setup, teardown),
	    cmocka_unit_test_setup_teardown(check__addr_below_base_is_eacces, setup, teardown),
	    cmocka_unit_test_setup_teardown(check__range_wraps_around_is_eacces, setup, teardown),
	    cmocka_unit_test(check__region_near_top_of_address_space),
	    cmocka_unit_test_setup_teardown(check__bad_key_is_eacces, setup, teardown),
	    cmocka_unit_test_setup_teardown(check__regions_are_separate, setup, teardown),
	    cmocka_unit_test(init_foreign__bad_cap_is_einval),
	    cmocka_unit_test(add_foreign__any_key_maps_its_region),
	    cmocka_unit_test(add_foreign__bad_args_are_einval),
	    cmocka_unit_test(add_foreign__same_key_twice_is_eexist),
	    cmocka_unit_test(add_foreign__half_full_is_enospc),
	    cmocka_unit_test(check_foreign__probe_goes_past_removed_slots),
	    cmocka_unit_test(remove_foreign__then_check_is_eacces),
	    cmocka_unit_test(check_foreign__every_slot_reused_many_times),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
