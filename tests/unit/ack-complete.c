/* SPDX-License-Identifier: BSD-2-Clause */
/* ack-complete.c -- lc_ack_complete: first error, stale generations, garbage wrids */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ack.h"

#define NKEYS    4
#define FREE_IDX 3 /* left free by the fixture */
#define MK(type, idx, gen, slot)                                                        \
	(((uint64_t)(type) << 56) | ((uint64_t)(idx) << 40) | ((uint64_t)(gen) << 24) | \
	 (uint64_t)(slot))

struct fixture {
	struct lc_ack_table t;
	loco_ack_key_t *k[NKEYS - 1]; /* indexes 0..2; index 3 stays free */
	loco_ack_key_t *key;          /* k[1] */
};

static int setup(void **state)
{
	static struct fixture fx;
	unsigned i;

	memset(&fx, 0, sizeof(fx));
	if (lc_ack_table_init(&fx.t, NKEYS) != 0)
		return -1;
	for (i = 0; i < NKEYS - 1; i++) {
		if (lc_ack_key_new(&fx.t, NULL, &fx.k[i]) != 0)
			return -1;
	}
	fx.key = fx.k[1];
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	lc_ack_table_fini(&fx->t);
	return 0;
}

static void complete__success_clears_slot(void **state)
{
	struct fixture *fx = *state;
	uint64_t a, b;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &a), 0);
	assert_int_equal(lc_ack_attach(fx->key, &b), 0);

	/* run test */
	assert_int_equal(lc_ack_complete(&fx->t, b, 0), 0);

	/* verify the results */
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_int_equal(lc_ack_complete(&fx->t, a, 0), 0);
	assert_true(lc_ack_idle(fx->key));
	assert_int_equal(fx->key->first_err, 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void complete__error_is_reported_once(void **state)
{
	struct fixture *fx = *state;
	uint64_t a;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &a), 0);

	/* run test */
	assert_int_equal(lc_ack_complete(&fx->t, a, -ECONNRESET), 0);

	/* verify the results */
	assert_true(lc_ack_idle(fx->key));
	assert_int_equal(lc_ack_wait(fx->key, 0), -ECONNRESET);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0); /* cleared by the first wait */
	assert_int_equal(lc_ack_wait(fx->key, -1), 0);
}

static void complete__only_first_error_is_kept(void **state)
{
	struct fixture *fx = *state;
	uint64_t w[4];
	unsigned i;

	/* configure mocks */
	for (i = 0; i < 4; i++)
		assert_int_equal(lc_ack_attach(fx->key, &w[i]), 0);

	/* run test: success, first error, second error, success */
	assert_int_equal(lc_ack_complete(&fx->t, w[2], 0), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w[0], -EIO), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w[3], -ETIMEDOUT), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w[1], 0), 0);

	/* verify the results */
	assert_int_equal(lc_ack_wait(fx->key, 0), -EIO);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void complete__errors_are_per_key(void **state)
{
	struct fixture *fx = *state;
	uint64_t a, b;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->k[0], &a), 0);
	assert_int_equal(lc_ack_attach(fx->k[2], &b), 0);

	/* run test */
	assert_int_equal(lc_ack_complete(&fx->t, a, -EPIPE), 0);
	assert_int_equal(lc_ack_complete(&fx->t, b, -EIO), 0);

	/* verify the results */
	assert_int_equal(lc_ack_wait(fx->k[2], 0), -EIO);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
	assert_int_equal(lc_ack_wait(fx->k[0], 0), -EPIPE);
}

static void complete__stale_generation_is_enoent(void **state)
{
	struct fixture *fx = *state;
	uint64_t old, fresh;

	/* configure mocks: an operation on the key, the key freed, its index reused */
	assert_int_equal(lc_ack_attach(fx->key, &old), 0);
	lc_ack_key_free(fx->key);
	assert_int_equal(lc_ack_key_new(&fx->t, NULL, &fx->key), 0);
	fx->k[1] = fx->key;
	assert_int_equal(fx->key->idx, 1);
	assert_int_equal(lc_ack_attach(fx->key, &fresh), 0);
	assert_true(old != fresh);
	assert_int_equal((uint32_t)old & 0xffffffu, (uint32_t)fresh & 0xffffffu); /* same slot */

	/* run test */
	assert_int_equal(lc_ack_complete(&fx->t, old, -EIO), -ENOENT);

	/* verify the results: the new key keeps its operation and has no error */
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_int_equal(fx->key->first_err, 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), LC_ACK_BUSY);
	assert_int_equal(lc_ack_complete(&fx->t, fresh, 0), 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void complete__freed_key_is_enoent(void **state)
{
	struct fixture *fx = *state;
	uint64_t w;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->k[2], &w), 0);
	lc_ack_key_free(fx->k[2]);
	fx->k[2] = NULL;

	/* run test, verify the results */
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), -ENOENT);
	assert_int_equal(lc_ack_complete(&fx->t, w, -EIO), -ENOENT);
}

static void complete__garbage_wrids_are_enoent(void **state)
{
	struct fixture *fx = *state;
	uint64_t w, bad[16];
	unsigned i, slot, gen;

	/* configure mocks: slot 0 of the key is attached, the rest are not */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);
	slot = (unsigned)w & 0xffffffu;
	gen = fx->key->gen;
	i = 0;
	bad[i++] = MK(0, 1, gen, slot);                   /* type 0 */
	bad[i++] = MK(2, 1, gen, slot);                   /* another liboco type */
	bad[i++] = MK(0xff, 1, gen, slot);                /* type 255 */
	bad[i++] = MK(LC_WRID_ACK, NKEYS, gen, slot);     /* index = max_keys */
	bad[i++] = MK(LC_WRID_ACK, 0xffff, gen, slot);    /* largest index */
	bad[i++] = MK(LC_WRID_ACK, FREE_IDX, 1, 0);       /* index never used */
	bad[i++] = MK(LC_WRID_ACK, 1, gen + 1, slot);     /* future generation */
	bad[i++] = MK(LC_WRID_ACK, 1, 0, slot);           /* generation 0 */
	bad[i++] = MK(LC_WRID_ACK, 1, gen, LC_ACK_SLOTS); /* slot = LC_ACK_SLOTS */
	bad[i++] = MK(LC_WRID_ACK, 1, gen, 0xffffff);     /* largest slot */
	bad[i++] = MK(LC_WRID_ACK, 1, gen, slot + 1);     /* never-attached slot */
	bad[i++] = MK(LC_WRID_ACK, 1, gen, LC_ACK_SLOTS - 1);
	bad[i++] = MK(LC_WRID_ACK, 0, 1, slot); /* a live key with nothing attached */
	bad[i++] = 0;
	bad[i++] = UINT64_MAX;
	bad[i++] = w | (1ull << 63);

	/* run test */
	for (i = 0; i < 16; i++) {
		assert_int_equal(lc_ack_complete(&fx->t, bad[i], -EIO), -ENOENT);
		assert_int_equal(lc_ack_complete(&fx->t, bad[i], 0), -ENOENT);
	}

	/* verify the results: no error recorded anywhere, the real operation still there */
	for (i = 0; i < NKEYS - 1; i++)
		assert_int_equal(fx->k[i]->first_err, 0);
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void complete__second_completion_is_enoent(void **state)
{
	struct fixture *fx = *state;
	uint64_t w;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);
	assert_int_equal(lc_ack_complete(&fx->t, w, 0), 0);

	/* run test */
	assert_int_equal(lc_ack_complete(&fx->t, w, -EIO), -ENOENT);

	/* verify the results: the duplicate recorded no error */
	assert_int_equal(lc_ack_wait(fx->key, 0), 0);
}

static void complete__null_table_is_enoent(void **state)
{
	struct fixture *fx = *state;
	uint64_t w;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &w), 0);

	/* run test, verify the results */
	assert_int_equal(lc_ack_complete(NULL, w, 0), -ENOENT);
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * complete__random_wrids_match_a_model -- random wrids and one-bit
 * mutations of live ones, checked against an independent model of which
 * wrids name a live, attached slot.
 */
static void complete__random_wrids_match_a_model(void **state)
{
	struct fixture *fx = *state;
	static uint8_t live[NKEYS - 1][LC_ACK_SLOTS];
	uint64_t seed = 0x9e3779b97f4a7c15ull, w, r;
	unsigned i, k, idx, gen, slot, expect_ok, ok = 0;
	size_t n[NKEYS - 1] = {0};

	/* configure mocks: 100 operations on each key */
	memset(live, 0, sizeof(live));
	for (k = 0; k < NKEYS - 1; k++) {
		for (i = 0; i < 100; i++) {
			assert_int_equal(lc_ack_attach(fx->k[k], &w), 0);
			live[k][w & 0xffffff] = 1;
		}
		n[k] = 100;
	}

	/* run test */
	for (i = 0; i < 200000; i++) {
		r = xorshift(&seed);
		if (i % 2) {
			/* a live-looking wrid with one random bit flipped */
			k = (unsigned)(r % (NKEYS - 1));
			w = MK(LC_WRID_ACK, k, fx->k[k]->gen, (r >> 8) % 128) ^ (1ull << (r >> 58));
		} else {
			w = r;
		}
		idx = (unsigned)(w >> 40) & 0xffff;
		gen = (unsigned)(w >> 24) & 0xffff;
		slot = (unsigned)w & 0xffffff;
		expect_ok = (w >> 56) == LC_WRID_ACK && idx < NKEYS - 1 && gen == fx->k[idx]->gen &&
		            slot < LC_ACK_SLOTS && live[idx][slot];

		/* verify the results */
		assert_int_equal(lc_ack_complete(&fx->t, w, 0), expect_ok ? 0 : -ENOENT);
		if (expect_ok) {
			live[idx][slot] = 0;
			n[idx]--;
			ok++;
		}
		assert_int_equal(lc_ack_outstanding(fx->k[idx < NKEYS - 1 ? idx : 0]),
		                 n[idx < NKEYS - 1 ? idx : 0]);
	}
	assert_true(ok > 0);
	for (k = 0; k < NKEYS - 1; k++)
		assert_int_equal(fx->k[k]->first_err, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(complete__success_clears_slot, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__error_is_reported_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__only_first_error_is_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__errors_are_per_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__stale_generation_is_enoent, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__freed_key_is_enoent, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__garbage_wrids_are_enoent, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__second_completion_is_enoent, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__null_table_is_enoent, setup, teardown),
	    cmocka_unit_test_setup_teardown(complete__random_wrids_match_a_model, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
