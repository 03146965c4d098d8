/* SPDX-License-Identifier: BSD-2-Clause */
/* ack-attach.c -- lc_ack_attach/detach: WRID layout, distinct slots, full key, giving slots back */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ack.h"

#define NKEYS   4
#define KEY_IDX 2 /* the fixture's key: not index 0, so the key field is tested */
#define TYPE(w) ((unsigned)((w) >> 56))
#define IDX(w)  ((unsigned)((w) >> 40) & 0xffffu)
#define GEN(w)  ((unsigned)((w) >> 24) & 0xffffu)
#define SLOT(w) ((unsigned)(w)&0xffffffu)

struct fixture {
	struct lc_ack_table t;
	loco_ack_key_t *k[NKEYS];
	loco_ack_key_t *key; /* k[KEY_IDX] */
	uint8_t seen[LC_ACK_SLOTS];
};

static int setup(void **state)
{
	static struct fixture fx;
	unsigned i;

	memset(&fx, 0, sizeof(fx));
	if (lc_ack_table_init(&fx.t, NKEYS) != 0)
		return -1;
	for (i = 0; i < NKEYS; i++) {
		if (lc_ack_key_new(&fx.t, NULL, &fx.k[i]) != 0)
			return -1;
	}
	fx.key = fx.k[KEY_IDX];
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	lc_ack_table_fini(&fx->t);
	return 0;
}

/* fill -- attach every slot of @key; check each WRID's fields and that slots are distinct. */
static void fill(struct fixture *fx, loco_ack_key_t *key, uint64_t *wrids)
{
	unsigned i;

	memset(fx->seen, 0, sizeof(fx->seen));
	for (i = 0; i < LC_ACK_SLOTS; i++) {
		assert_int_equal(lc_ack_attach(key, &wrids[i]), 0);
		assert_int_equal(TYPE(wrids[i]), LC_WRID_ACK);
		assert_int_equal(lc_wrid_type(wrids[i]), LC_WRID_ACK);
		assert_int_equal(IDX(wrids[i]), key->idx);
		assert_int_equal(GEN(wrids[i]), key->gen & 0xffffu);
		assert_true(SLOT(wrids[i]) < LC_ACK_SLOTS);
		assert_int_equal(fx->seen[SLOT(wrids[i])], 0);
		fx->seen[SLOT(wrids[i])] = 1;
	}
}

static void attach__bad_args_are_einval(void **state)
{
	struct fixture *fx = *state;
	uint64_t wrid = 42;

	/* configure mocks: none */

	/* run test */
	assert_int_equal(lc_ack_attach(NULL, &wrid), -EINVAL);
	assert_int_equal(lc_ack_attach(fx->key, NULL), -EINVAL);

	/* verify the results */
	assert_int_equal(wrid, 42);
	assert_int_equal(lc_ack_outstanding(fx->key), 0);
}

static void attach__wrid_has_documented_layout(void **state)
{
	struct fixture *fx = *state;
	uint64_t wrid = 0;

	/* configure mocks: none */

	/* run test */
	assert_int_equal(lc_ack_attach(fx->key, &wrid), 0);

	/* verify the results: type 1, key 2, generation 1, slot 0 of an empty key */
	assert_int_equal(wrid, ((uint64_t)LC_WRID_ACK << 56) | ((uint64_t)KEY_IDX << 40) |
	                           ((uint64_t)1 << 24) | 0);
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_false(lc_ack_idle(fx->key));
	assert_true(lc_ack_idle(fx->k[0])); /* other keys untouched */
}

static void attach__wrids_are_distinct(void **state)
{
	struct fixture *fx = *state;
	uint64_t a, b, c;

	/* configure mocks: none */

	/* run test */
	assert_int_equal(lc_ack_attach(fx->key, &a), 0);
	assert_int_equal(lc_ack_attach(fx->key, &b), 0);
	assert_int_equal(lc_ack_attach(fx->k[0], &c), 0);

	/* verify the results */
	assert_true(a != b);
	assert_true(c != a && c != b);
	assert_int_equal(IDX(c), 0);
	assert_int_equal(lc_ack_outstanding(fx->key), 2);
	assert_int_equal(lc_ack_outstanding(fx->k[0]), 1);
}

static void attach__full_key_is_eagain(void **state)
{
	struct fixture *fx = *state;
	static uint64_t wrids[LC_ACK_SLOTS];
	uint64_t extra = 7;

	/* configure mocks */
	fill(fx, fx->key, wrids);

	/* run test */
	assert_int_equal(lc_ack_attach(fx->key, &extra), -EAGAIN);

	/* verify the results: every slot used once, *wrid not written */
	assert_int_equal(extra, 7);
	assert_int_equal(lc_ack_outstanding(fx->key), LC_ACK_SLOTS);
	assert_int_equal(lc_ack_attach(fx->key, &extra), -EAGAIN); /* still full */
	assert_int_equal(lc_ack_attach(fx->k[0], &extra), 0);      /* other keys are not */
}

static void detach__frees_slot_without_error(void **state)
{
	struct fixture *fx = *state;
	static uint64_t wrids[LC_ACK_SLOTS];
	uint64_t again;
	unsigned i;

	/* configure mocks */
	fill(fx, fx->key, wrids);

	/* run test: give back slot 777, reattach */
	lc_ack_detach(fx->key, wrids[777]);

	/* verify the results */
	assert_int_equal(lc_ack_outstanding(fx->key), LC_ACK_SLOTS - 1);
	assert_int_equal(lc_ack_attach(fx->key, &again), 0);
	assert_int_equal(again, wrids[777]); /* the only free slot */
	assert_int_equal(lc_ack_attach(fx->key, &again), -EAGAIN);
	for (i = 0; i < LC_ACK_SLOTS; i++)
		lc_ack_detach(fx->key, wrids[i]);
	assert_true(lc_ack_idle(fx->key));
	assert_int_equal(fx->key->first_err, 0);
	assert_int_equal(lc_ack_wait(fx->key, 0), 0); /* no error recorded */
}

static void detach__foreign_wrid_is_ignored(void **state)
{
	struct fixture *fx = *state;
	uint64_t mine, other;

	/* configure mocks */
	assert_int_equal(lc_ack_attach(fx->key, &mine), 0);
	assert_int_equal(lc_ack_attach(fx->k[0], &other), 0);

	/* run test: wrids of another key, another generation, another type, garbage */
	lc_ack_detach(fx->key, other);
	lc_ack_detach(fx->key, mine ^ (1ull << 24));
	lc_ack_detach(fx->key, mine ^ (3ull << 56));
	lc_ack_detach(fx->key, mine | 0xffffffull);
	lc_ack_detach(fx->key, UINT64_MAX);
	lc_ack_detach(fx->key, 0);
	lc_ack_detach(NULL, mine);

	/* verify the results */
	assert_int_equal(lc_ack_outstanding(fx->key), 1);
	assert_int_equal(lc_ack_outstanding(fx->k[0]), 1);
	lc_ack_detach(fx->key, mine);
	assert_true(lc_ack_idle(fx->key));
}

static void attach__new_generation_after_reuse(void **state)
{
	struct fixture *fx = *state;
	uint64_t wrid;

	/* configure mocks: free the key at KEY_IDX and take the index again */
	lc_ack_key_free(fx->key);
	assert_int_equal(lc_ack_key_new(&fx->t, NULL, &fx->key), 0);
	fx->k[KEY_IDX] = fx->key;

	/* run test */
	assert_int_equal(lc_ack_attach(fx->key, &wrid), 0);

	/* verify the results */
	assert_int_equal(IDX(wrid), KEY_IDX);
	assert_int_equal(GEN(wrid), 2);
}

static void attach__slots_wrap_around_words(void **state)
{
	struct fixture *fx = *state;
	static uint64_t wrids[LC_ACK_SLOTS];
	unsigned i, round;
	uint64_t w;

	/* configure mocks */
	fill(fx, fx->key, wrids);

	/* run test: free one slot in each word in turn (from the last), take it back */
	for (round = 0; round < 3; round++) {
		for (i = LC_ACK_SLOTS / 64; i-- > 0;) {
			lc_ack_detach(fx->key, wrids[i * 64 + 5]);
			assert_int_equal(lc_ack_attach(fx->key, &w), 0);

			/* verify the results */
			assert_int_equal(w, wrids[i * 64 + 5]);
			assert_int_equal(lc_ack_outstanding(fx->key), LC_ACK_SLOTS);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(attach__bad_args_are_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach__wrid_has_documented_layout, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach__wrids_are_distinct, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach__full_key_is_eagain, setup, teardown),
	    cmocka_unit_test_setup_teardown(detach__frees_slot_without_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(detach__foreign_wrid_is_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach__new_generation_after_reuse, setup, teardown),
	    cmocka_unit_test_setup_teardown(attach__slots_wrap_around_words, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
