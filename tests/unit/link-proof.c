/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * link-proof.c -- the data-link proof of liboco/auth.c (auth.h): the
 * session key both sides derive, the private data's codec, and the check
 * that refuses a wrong key, a forged identity, a link meant for another
 * node, a tampered counter and a replay.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth.h"

static const uint8_t cluster[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const uint8_t nonce_c[LC_NONCE_LEN] = {0xc0, 0xc1};
static const uint8_t nonce_s[LC_NONCE_LEN] = {0x50, 0x51};

/* proof -- a link from node 3 (inc 0x33) to node 7 (inc 0x77) on the session above. */
static void proof(struct lc_link_proof *p)
{
	memset(p, 0, sizeof(*p));
	lc_auth_link_key(cluster, nonce_c, nonce_s, 3, 0x33, 7, 0x77, p->key);
	p->from_node = 3;
	p->from_inc = 0x33;
	p->to_node = 7;
	p->to_inc = 0x77;
}

static void link_key__depends_on_every_input(void **state)
{
	uint8_t k[LC_LINK_KEY_LEN], again[LC_LINK_KEY_LEN], other[LC_LINK_KEY_LEN];
	uint8_t key2[32] = {1, 2, 3, 4, 5, 6, 7, 8, 10}, n2[LC_NONCE_LEN] = {0xc0, 0xc2};

	(void)state;
	/* run */
	lc_auth_link_key(cluster, nonce_c, nonce_s, 3, 0x33, 7, 0x77, k);
	lc_auth_link_key(cluster, nonce_c, nonce_s, 3, 0x33, 7, 0x77, again);
	/* verify: deterministic (both sides agree); any change gives another key */
	assert_memory_equal(k, again, sizeof(k));
	lc_auth_link_key(key2, nonce_c, nonce_s, 3, 0x33, 7, 0x77, other);
	assert_memory_not_equal(k, other, sizeof(k));
	lc_auth_link_key(cluster, n2, nonce_s, 3, 0x33, 7, 0x77, other);
	assert_memory_not_equal(k, other, sizeof(k));
	lc_auth_link_key(cluster, nonce_s, nonce_c, 3, 0x33, 7, 0x77, other);
	assert_memory_not_equal(k, other, sizeof(k));
	lc_auth_link_key(cluster, nonce_c, nonce_s, 3, 0x34, 7, 0x77, other);
	assert_memory_not_equal(k, other, sizeof(k));
	lc_auth_link_key(cluster, nonce_c, nonce_s, 7, 0x77, 3, 0x33, other);
	assert_memory_not_equal(k, other, sizeof(k));
}

static void priv_decode__checks_every_length_and_field(void **state)
{
	struct lc_link_proof p;
	struct lc_link_priv d = {.node = 0xdead}, x;
	uint8_t buf[LC_LINK_PRIV_LEN + 1];

	(void)state;
	/* configure */
	proof(&p);
	lc_link_priv_make(&p, 42, buf);
	/* run + verify: the fields come back */
	assert_int_equal(lc_link_priv_decode(buf, LC_LINK_PRIV_LEN, &x), 0);
	assert_int_equal(x.node, 3);
	assert_int_equal(x.inc, 0x33);
	assert_int_equal(x.counter, 42);
	/* wrong lengths, version, padding, NULL: -EPROTO, output untouched */
	for (size_t len = 0; len <= LC_LINK_PRIV_LEN + 1; len++)
		if (len != LC_LINK_PRIV_LEN)
			assert_int_equal(lc_link_priv_decode(buf, len, &d), -EPROTO);
	assert_int_equal(lc_link_priv_decode(NULL, LC_LINK_PRIV_LEN, &d), -EPROTO);
	for (int i = 0; i < 4; i++) {
		buf[i] ^= 0x80;
		assert_int_equal(lc_link_priv_decode(buf, LC_LINK_PRIV_LEN, &d), -EPROTO);
		buf[i] ^= 0x80;
	}
	assert_int_equal(d.node, 0xdead);
	/* the old format (node, inc: 12 bytes) is refused */
	assert_int_equal(lc_link_priv_decode(buf, 12, &d), -EPROTO);
}

static void priv_check__accepts_the_proof_once(void **state)
{
	struct lc_link_proof p;
	struct lc_link_priv x;
	uint8_t buf[LC_LINK_PRIV_LEN];

	(void)state;
	/* configure */
	proof(&p);
	lc_link_priv_make(&p, 5, buf);
	assert_int_equal(lc_link_priv_decode(buf, sizeof(buf), &x), 0);
	/* run + verify: valid above the highest seen; a replay is -ESTALE */
	assert_int_equal(lc_link_priv_check(&p, &x, 0), 0);
	assert_int_equal(lc_link_priv_check(&p, &x, 4), 0);
	assert_int_equal(lc_link_priv_check(&p, &x, 5), -ESTALE);
	assert_int_equal(lc_link_priv_check(&p, &x, 6), -ESTALE);
}

static void priv_check__refuses_forgeries(void **state)
{
	struct lc_link_proof p, q;
	struct lc_link_priv x, y;
	uint8_t buf[LC_LINK_PRIV_LEN];

	(void)state;
	/* configure */
	proof(&p);
	lc_link_priv_make(&p, 9, buf);
	assert_int_equal(lc_link_priv_decode(buf, sizeof(buf), &x), 0);

	/* a stranger's random tag */
	y = x;
	memset(y.tag, 0x5a, sizeof(y.tag));
	assert_int_equal(lc_link_priv_check(&p, &y, 0), -EACCES);
	/* each tag bit matters */
	for (int bit = 0; bit < LC_LINK_TAG_LEN * 8; bit++) {
		y = x;
		y.tag[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_equal(lc_link_priv_check(&p, &y, 0), -EACCES);
	}
	/* a raised counter (to dodge the replay check) breaks the tag */
	y = x;
	y.counter = 1000;
	assert_int_equal(lc_link_priv_check(&p, &y, 9), -EACCES);
	/* claiming another member, or another incarnation */
	y = x;
	y.node = 4;
	assert_int_equal(lc_link_priv_check(&p, &y, 0), -EACCES);
	y = x;
	y.inc = 0x34;
	assert_int_equal(lc_link_priv_check(&p, &y, 0), -EACCES);
	/* the same private data shown to another node, or on another session */
	q = p;
	q.to_node = 8;
	assert_int_equal(lc_link_priv_check(&q, &x, 0), -EACCES);
	q = p;
	q.to_inc = 0x78;
	assert_int_equal(lc_link_priv_check(&q, &x, 0), -EACCES);
	q = p;
	lc_auth_link_key(cluster, nonce_s, nonce_c, 3, 0x33, 7, 0x77, q.key);
	assert_int_equal(lc_link_priv_check(&q, &x, 0), -EACCES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(link_key__depends_on_every_input),
	    cmocka_unit_test(priv_decode__checks_every_length_and_field),
	    cmocka_unit_test(priv_check__accepts_the_proof_once),
	    cmocka_unit_test(priv_check__refuses_forgeries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
