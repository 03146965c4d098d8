/* SPDX-License-Identifier: BSD-2-Clause */
/* fabric-common.c -- fab_addr_parse/format, fab_opcode_str, fab_attr_defaults, fab_ops_fill */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <string.h>

#include "fabric.h"
#include "provider.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define POISON   0xa5

static const struct sockaddr_in *sin_of(const struct fab_addr *a)
{
	return (const struct sockaddr_in *)&a->ss;
}

/* expect_parse_rejected -- parse of @str gives -EINVAL. */
static void expect_parse_rejected(const char *str)
{
	struct fab_addr a;
	int ret = fab_addr_parse(str, 4000, &a);

	if (ret != -EINVAL)
		fail_msg("fab_addr_parse(\"%s\") returned %d, expected -EINVAL", str, ret);
}

static void addr_parse__ip_and_port(void **state)
{
	struct fab_addr a;

	(void)state;
	/* configure */
	memset(&a, POISON, sizeof(a));

	/* run */
	assert_int_equal(fab_addr_parse("127.0.0.1:5000", 1, &a), 0);

	/* verify */
	assert_int_equal(a.len, sizeof(struct sockaddr_in));
	assert_int_equal(sin_of(&a)->sin_family, AF_INET);
	assert_int_equal(ntohs(sin_of(&a)->sin_port), 5000);
	assert_int_equal(ntohl(sin_of(&a)->sin_addr.s_addr), 0x7f000001u);
}

static void addr_parse__no_port_takes_default(void **state)
{
	struct fab_addr a;

	(void)state;
	/* run */
	assert_int_equal(fab_addr_parse("10.1.2.3", 7000, &a), 0);

	/* verify */
	assert_int_equal(ntohs(sin_of(&a)->sin_port), 7000);
	assert_int_equal(ntohl(sin_of(&a)->sin_addr.s_addr), 0x0a010203u);
	assert_int_equal(a.len, sizeof(struct sockaddr_in));
}

static void addr_parse__port_limits_ok(void **state)
{
	const struct {
		const char *str;
		unsigned port;
	} cases[] = {
	    {"0.0.0.0:0", 0},
	    {"255.255.255.255:65535", 65535},
	    {"192.168.1.1:1", 1},
	    {"192.168.1.1:00080", 80},
	};

	(void)state;
	for (size_t i = 0; i < NELEM(cases); i++) {
		struct fab_addr a;

		/* run */
		assert_int_equal(fab_addr_parse(cases[i].str, 9, &a), 0);

		/* verify */
		assert_int_equal(ntohs(sin_of(&a)->sin_port), cases[i].port);
	}
}

static void addr_parse__bad_port_is_einval(void **state)
{
	const char *const bad[] = {
	    "127.0.0.1:",      "127.0.0.1:65536",  "127.0.0.1:100000",
	    "127.0.0.1:abc",   "127.0.0.1:80x",    "127.0.0.1:0x50",
	    "127.0.0.1:-1",    "127.0.0.1:-65535", "127.0.0.1:99999999999999999999999",
	    "127.0.0.1:80:81", "127.0.0.1:8 0",    "127.0.0.1:80 ",
	};

	(void)state;
	for (size_t i = 0; i < NELEM(bad); i++)
		expect_parse_rejected(bad[i]);
}

static void addr_parse__port_with_sign_or_space_is_einval(void **state)
{
	/* strtoul() skips blanks and takes a sign: the port must be digits only */
	const char *const bad[] = {"127.0.0.1:+80", "127.0.0.1: 80", "127.0.0.1:-0",
	                           "127.0.0.1:\t80"};

	(void)state;
	for (size_t i = 0; i < NELEM(bad); i++)
		expect_parse_rejected(bad[i]);
}

static void addr_parse__empty_host_is_einval(void **state)
{
	(void)state;
	expect_parse_rejected("");
	expect_parse_rejected(":5000");
	expect_parse_rejected(":");
}

static void addr_parse__overlong_is_einval(void **state)
{
	char s[4 * FAB_ADDR_STRLEN];

	(void)state;
	/* configure: a host of FAB_ADDR_STRLEN characters, with and without a port */
	memset(s, '1', FAB_ADDR_STRLEN);
	s[FAB_ADDR_STRLEN] = '\0';
	expect_parse_rejected(s);
	strcpy(s + FAB_ADDR_STRLEN, ":80");
	expect_parse_rejected(s);

	/* a dotted quad padded with leading zeros to just below the limit */
	memset(s, '0', sizeof(s));
	strcpy(s + FAB_ADDR_STRLEN - 1 - strlen("1.2.3.4"), "1.2.3.4");
	expect_parse_rejected(s);

	/* far longer than any buffer */
	memset(s, '7', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	expect_parse_rejected(s);
}

static void addr_parse__garbage_is_einval(void **state)
{
	const char *const bad[] = {
	    "localhost:80", "1.2.3:80", "256.1.1.1:80", "1.2.3.4.5",   "1.2.3.4.5:80", "abc",
	    "::1",          "[::1]:80", " 1.2.3.4:80",  "1.2.3.4 :80", "1.2.3.-4:80",
	};

	(void)state;
	for (size_t i = 0; i < NELEM(bad); i++)
		expect_parse_rejected(bad[i]);
}

static void addr_parse__error_leaves_out_untouched(void **state)
{
	/* one input per rejection path: empty host, bad port, not an IPv4 address */
	const char *const bad[] = {":80",          "1.2.3.4:x", "1.2.3.4:70000",
	                           "localhost:80", "256.0.0.1", "1.2.3.4.5:80"};

	(void)state;
	for (size_t i = 0; i < NELEM(bad); i++) {
		/* configure */
		struct fab_addr a, poison;

		memset(&a, POISON, sizeof(a));
		memset(&poison, POISON, sizeof(poison));

		/* run */
		assert_int_equal(fab_addr_parse(bad[i], 4000, &a), -EINVAL);

		/* verify: output parameters are written only on success (DESIGN §2) */
		if (memcmp(&a, &poison, sizeof(a)) != 0)
			fail_msg("fab_addr_parse(\"%s\") failed but wrote its output", bad[i]);
	}
}

static void addr_parse__null_args_are_einval(void **state)
{
	struct fab_addr a;

	(void)state;
	assert_int_equal(fab_addr_parse(NULL, 1, &a), -EINVAL);
	assert_int_equal(fab_addr_parse("127.0.0.1:1", 1, NULL), -EINVAL);
}

static void addr_format__round_trip(void **state)
{
	const char *const good[] = {"127.0.0.1:5000", "0.0.0.0:0", "255.255.255.255:65535",
	                            "10.20.30.40:1"};

	(void)state;
	for (size_t i = 0; i < NELEM(good); i++) {
		/* configure */
		struct fab_addr a;
		char buf[FAB_ADDR_STRLEN];

		assert_int_equal(fab_addr_parse(good[i], 1, &a), 0);

		/* run */
		assert_int_equal(fab_addr_format(&a, buf, sizeof(buf)), 0);

		/* verify */
		assert_string_equal(buf, good[i]);
	}
}

static void addr_format__default_port_is_printed(void **state)
{
	struct fab_addr a;
	char buf[FAB_ADDR_STRLEN];

	(void)state;
	/* configure */
	assert_int_equal(fab_addr_parse("192.168.0.7", 18515, &a), 0);

	/* run + verify */
	assert_int_equal(fab_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "192.168.0.7:18515");
}

static void addr_format__small_buffer_is_enospc(void **state)
{
	const char *s = "192.168.100.200:65000";
	struct fab_addr a;
	char buf[FAB_ADDR_STRLEN];

	(void)state;
	/* configure */
	assert_int_equal(fab_addr_parse(s, 1, &a), 0);

	/* run + verify: room for the terminator is needed, and enough */
	assert_int_equal(fab_addr_format(&a, buf, strlen(s)), -ENOSPC);
	assert_int_equal(fab_addr_format(&a, buf, 1), -ENOSPC);
	assert_int_equal(fab_addr_format(&a, NULL, 0), -ENOSPC);
	assert_int_equal(fab_addr_format(&a, buf, strlen(s) + 1), 0);
	assert_string_equal(buf, s);
}

static void addr_format__not_inet_is_einval(void **state)
{
	const sa_family_t fams[] = {AF_UNSPEC, AF_INET6, AF_UNIX};
	char buf[FAB_ADDR_STRLEN];

	(void)state;
	for (size_t i = 0; i < NELEM(fams); i++) {
		/* configure */
		struct fab_addr a;

		memset(&a, 0, sizeof(a));
		a.ss.ss_family = fams[i];

		/* run + verify */
		assert_int_equal(fab_addr_format(&a, buf, sizeof(buf)), -EINVAL);
	}
}

static void addr_tag__parse_and_format_round_trip(void **state)
{
	const char *const good[] = {"127.0.0.1:5000/00112233445566778899aabbccddeeff",
	                            "255.255.255.255:65535/ffffffffffffffffffffffffffffffff",
	                            "0.0.0.0:0/00000000000000000000000000000001"};

	(void)state;
	for (size_t i = 0; i < NELEM(good); i++) {
		/* configure */
		struct fab_addr a;
		char buf[FAB_ADDR_STRLEN];

		memset(&a, POISON, sizeof(a));

		/* run */
		assert_int_equal(fab_addr_parse(good[i], 1, &a), 0);
		assert_int_equal(fab_addr_format(&a, buf, sizeof(buf)), 0);

		/* verify: the longest fits the control plane's fab_addr (LC_ADDR_MAX, 64) too */
		assert_true(fab_addr_has_tag(&a));
		assert_string_equal(buf, good[i]);
		assert_true(strlen(buf) < 64);
	}
}

static void addr_tag__bytes_and_port(void **state)
{
	struct fab_addr a;

	(void)state;
	/* run */
	assert_int_equal(fab_addr_parse("10.0.0.9:77/00112233445566778899aabbccddeeff", 1, &a), 0);

	/* verify */
	assert_int_equal(ntohs(sin_of(&a)->sin_port), 77);
	assert_int_equal(ntohl(sin_of(&a)->sin_addr.s_addr), 0x0a000009u);
	for (unsigned i = 0; i < FAB_ADDR_TAG_LEN; i++)
		assert_int_equal(a.tag[i], i * 0x11);
	/* no port: the default one, the tag kept */
	assert_int_equal(fab_addr_parse("10.0.0.9/00112233445566778899aabbccddeeff", 1234, &a), 0);
	assert_int_equal(ntohs(sin_of(&a)->sin_port), 1234);
	assert_int_equal(a.tag[15], 0xff);
}

static void addr_tag__none_is_zero(void **state)
{
	struct fab_addr a;
	char buf[FAB_ADDR_STRLEN];

	(void)state;
	/* configure */
	memset(&a, POISON, sizeof(a));

	/* run */
	assert_int_equal(fab_addr_parse("10.0.0.9:77", 1, &a), 0);

	/* verify: a tag-less address has a zero tag, formatted without one */
	assert_false(fab_addr_has_tag(&a));
	assert_int_equal(fab_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "10.0.0.9:77");
}

static void addr_tag__bad_is_einval(void **state)
{
	const char *const bad[] = {
	    "1.2.3.4:80/",
	    "1.2.3.4:80/abc",
	    "1.2.3.4:80/00112233445566778899aabbccddeeff0", /* 33 digits */
	    "1.2.3.4:80/0112233445566778899aabbccddeeff",   /* 31 digits */
	    "1.2.3.4:80/00112233445566778899AABBCCDDEEFF",  /* upper case */
	    "1.2.3.4:80/00000000000000000000000000000000",  /* zero: none */
	    "1.2.3.4:80/00112233445566778899aabbccddeeff/",
	    "1.2.3.4:80/g0112233445566778899aabbccddeeff",
	    "1.2.3.4:80/ 0112233445566778899aabbccddeeff",
	    "1.2.3.4:/00112233445566778899aabbccddeeff",
	    ":80/00112233445566778899aabbccddeeff",
	    "/00112233445566778899aabbccddeeff",
	    "1.2.3.4:80x/00112233445566778899aabbccddeeff",
	};

	(void)state;
	for (size_t i = 0; i < NELEM(bad); i++)
		expect_parse_rejected(bad[i]);
}

static void opcode_str__every_opcode(void **state)
{
	const struct {
		int op;
		const char *name;
	} cases[] = {
	    {FAB_OP_WRITE, "WRITE"}, {FAB_OP_WRITE_IMM, "WRITE_IMM"},
	    {FAB_OP_READ, "READ"},   {FAB_OP_CAS, "CAS"},
	    {FAB_OP_FAA, "FAA"},     {FAB_OP_SEND, "SEND"},
	    {FAB_OP_RECV, "RECV"},   {FAB_OP_RECV_IMM, "RECV_IMM"},
	};

	(void)state;
	for (size_t i = 0; i < NELEM(cases); i++)
		assert_string_equal(fab_opcode_str(cases[i].op), cases[i].name);
}

static void opcode_str__unknown_is_question_mark(void **state)
{
	const int ops[] = {0, -1, FAB_OP_RECV_IMM + 1, 255, INT_MAX, INT_MIN};

	(void)state;
	for (size_t i = 0; i < NELEM(ops); i++)
		assert_string_equal(fab_opcode_str(ops[i]), "?");
}

static void attr_defaults__zero_fields_get_defaults(void **state)
{
	struct fab_attr a;

	(void)state;
	/* configure */
	memset(&a, 0, sizeof(a));

	/* run */
	fab_attr_defaults(&a);

	/* verify: the values documented in fabric.h; spin_us 0 means automatic, left to the provider */
	assert_int_equal(a.sq_depth, 256);
	assert_int_equal(a.rq_depth, 256);
	assert_int_equal(a.cq_depth, 4096);
	assert_int_equal(a.max_inline, 256);
	assert_int_equal(a.timeout_ms, 2000);
	assert_int_equal(a.spin_us, FAB_SPIN_AUTO);
	assert_null(a.listen_addr);
	assert_null(a.device);
}

static void attr_defaults__set_fields_are_kept(void **state)
{
	struct fab_attr a = {
	    .listen_addr = "1.2.3.4:5",
	    .device = "rxe0",
	    .sq_depth = 1,
	    .rq_depth = 2,
	    .cq_depth = 3,
	    .max_inline = 4,
	    .timeout_ms = 5,
	    .spin_us = 6,
	};

	(void)state;
	/* run */
	fab_attr_defaults(&a);

	/* verify */
	assert_string_equal(a.listen_addr, "1.2.3.4:5");
	assert_string_equal(a.device, "rxe0");
	assert_int_equal(a.sq_depth, 1);
	assert_int_equal(a.rq_depth, 2);
	assert_int_equal(a.cq_depth, 3);
	assert_int_equal(a.max_inline, 4);
	assert_int_equal(a.timeout_ms, 5);
	assert_int_equal(a.spin_us, 6);
}

static void attr_defaults__mixed_fields(void **state)
{
	struct fab_attr a = {.rq_depth = 17, .timeout_ms = 100};

	(void)state;
	/* run */
	fab_attr_defaults(&a);

	/* verify */
	assert_int_equal(a.sq_depth, 256);
	assert_int_equal(a.rq_depth, 17);
	assert_int_equal(a.cq_depth, 4096);
	assert_int_equal(a.timeout_ms, 100);
	assert_int_equal(a.spin_us, FAB_SPIN_AUTO);
}

static int my_wait_calls;

static int my_wait(struct fab *fab, int timeout_ms)
{
	(void)fab;
	my_wait_calls++;
	return timeout_ms;
}

static void ops_fill__unset_ops_return_eopnotsupp(void **state)
{
	const struct fab_ops src = {.size = 1, .name = "mock", .wait = my_wait};
	struct fab_ops ops;
	struct fab fab = {.ops = &ops};
	struct fab_link link = {.fab = &fab};
	struct fab_mr mr = {.fab = &fab};
	struct fab_addr addr;
	struct fab_wc wc;
	struct fab_wr wr = {0};
	struct fab_recv_wr rwr = {0};
	struct fab_link *out = NULL;
	struct fab_mr *mout = NULL;
	size_t plen = 0;

	(void)state;
	/* configure */
	memset(&ops, POISON, sizeof(ops));
	memset(&addr, 0, sizeof(addr));

	/* run */
	fab_ops_fill(&ops, &src);

	/* verify: size of this build, name kept, the set op kept, every other data op a stub */
	assert_int_equal(ops.size, sizeof(struct fab_ops));
	assert_string_equal(ops.name, "mock");
	assert_ptr_equal(ops.wait, my_wait);
	assert_int_equal(fab_wait(&fab, 123), 123);
	assert_int_equal(my_wait_calls, 1);
	assert_null(ops.open);
	assert_null(ops.close);
	assert_int_equal(fab_accept(&fab, 0, 0, &out, NULL, &plen), -EOPNOTSUPP);
	assert_int_equal(fab_connect(&fab, &addr, 0, NULL, 0, 0, &out), -EOPNOTSUPP);
	assert_int_equal(fab_get_addr(&fab, &addr), -EOPNOTSUPP);
	assert_int_equal(fab_link_close(&link), -EOPNOTSUPP);
	assert_int_equal(fab_link_state(&link), -EOPNOTSUPP);
	assert_int_equal(fab_mr_dereg(&mr), -EOPNOTSUPP);
	assert_int_equal(fab_mr_reg(&fab, &wc, sizeof(wc), 0, &mout), -EOPNOTSUPP);
	assert_int_equal(fab_poll(&fab, &wc, 1), -EOPNOTSUPP);
	assert_int_equal(fab_post(&link, &wr, 1), -EOPNOTSUPP);
	assert_int_equal(fab_post_recv(&link, &rwr, 1), -EOPNOTSUPP);
	assert_int_equal(fab_wait_fd(&fab), -EOPNOTSUPP);
	assert_int_equal(fab_arm(&fab), -EOPNOTSUPP);
	assert_null(out);
	assert_null(mout);
}

static void provider_names__has_tcp_and_ends_with_null(void **state)
{
	const char *const *names = fab_provider_names();
	int tcp = 0;
	size_t i;

	(void)state;
	assert_non_null(names);
	for (i = 0; i < 16 && names[i] != NULL; i++)
		tcp |= strcmp(names[i], "tcp") == 0;
	assert_true(i < 16);
	assert_true(tcp);
}

static void open__null_out_is_einval(void **state)
{
	(void)state;
	assert_int_equal(fab_open("tcp", NULL, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(addr_parse__ip_and_port),
	    cmocka_unit_test(addr_parse__no_port_takes_default),
	    cmocka_unit_test(addr_parse__port_limits_ok),
	    cmocka_unit_test(addr_parse__bad_port_is_einval),
	    cmocka_unit_test(addr_parse__port_with_sign_or_space_is_einval),
	    cmocka_unit_test(addr_parse__empty_host_is_einval),
	    cmocka_unit_test(addr_parse__overlong_is_einval),
	    cmocka_unit_test(addr_parse__garbage_is_einval),
	    cmocka_unit_test(addr_parse__error_leaves_out_untouched),
	    cmocka_unit_test(addr_parse__null_args_are_einval),
	    cmocka_unit_test(addr_format__round_trip),
	    cmocka_unit_test(addr_format__default_port_is_printed),
	    cmocka_unit_test(addr_format__small_buffer_is_enospc),
	    cmocka_unit_test(addr_format__not_inet_is_einval),
	    cmocka_unit_test(addr_tag__parse_and_format_round_trip),
	    cmocka_unit_test(addr_tag__bytes_and_port),
	    cmocka_unit_test(addr_tag__none_is_zero),
	    cmocka_unit_test(addr_tag__bad_is_einval),
	    cmocka_unit_test(opcode_str__every_opcode),
	    cmocka_unit_test(opcode_str__unknown_is_question_mark),
	    cmocka_unit_test(attr_defaults__zero_fields_get_defaults),
	    cmocka_unit_test(attr_defaults__set_fields_are_kept),
	    cmocka_unit_test(attr_defaults__mixed_fields),
	    cmocka_unit_test(ops_fill__unset_ops_return_eopnotsupp),
	    cmocka_unit_test(provider_names__has_tcp_and_ends_with_null),
	    cmocka_unit_test(open__null_out_is_einval),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
