/* SPDX-License-Identifier: BSD-2-Clause */
/* strerror.c -- loco_strerror() for errno and LOCO_E* codes and counts, and loco_version() */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <loco.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char unknown_loco[] = "unknown loco error";

static void strerror__zero_is_success(void **state)
{
	(void)state;
	assert_string_equal(loco_strerror(0), "success");
}

static void strerror__errno_negated(void **state)
{
	const int errs[] = {ENOMEM, EINVAL, ETIMEDOUT, ECONNRESET, EPROTO, EACCES, 1};

	(void)state;
	for (size_t i = 0; i < NELEM(errs); i++) {
		/* configure: the libc text, copied before loco_strerror() may reuse a buffer */
		char want[256];

		snprintf(want, sizeof(want), "%s", strerror(errs[i]));

		/* run + verify */
		assert_string_equal(loco_strerror(-errs[i]), want);
	}
	assert_string_equal(loco_strerror(-ENOMEM), "Cannot allocate memory");
}

static void strerror__loco_codes_have_own_text(void **state)
{
	const int codes[] = {LOCO_EAUTH,      LOCO_EFABRIC,    LOCO_ETORN,
	                     LOCO_EPARTITION, LOCO_ENOTJOINED, LOCO_EMISMATCH};
	const char *s[NELEM(codes)];

	(void)state;
	for (size_t i = 0; i < NELEM(codes); i++) {
		/* run */
		s[i] = loco_strerror(-codes[i]);

		/* verify: named, distinct from each other */
		assert_non_null(s[i]);
		assert_true(strlen(s[i]) > 0);
		assert_string_not_equal(s[i], unknown_loco);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(s[i], s[j]);
	}
	assert_string_equal(loco_strerror(-LOCO_EAUTH), "peer failed authentication");
}

static void strerror__unknown_loco_code(void **state)
{
	const int codes[] = {LOCO_ERRNO_BASE, LOCO_ELAST_, LOCO_ELAST_ + 1, 100000, INT_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(codes); i++)
		assert_string_equal(loco_strerror(-codes[i]), unknown_loco);
}

/*
 * A positive value is no error code but a count (loco_channel_peers(),
 * loco_owned_var_push_broadcast()...): it says so, with the count, instead of
 * the text of the errno value of that number (3 is ESRCH, "No such process").
 */
static void strerror__positive_is_a_count(void **state)
{
	const int counts[] = {1, 3, ESRCH, 255, LOCO_EAUTH, LOCO_ELAST_ + 1, INT_MAX};

	(void)state;
	for (size_t i = 0; i < NELEM(counts); i++) {
		char want[64];

		snprintf(want, sizeof(want), "not an error code (a count: %d)", counts[i]);
		assert_string_equal(loco_strerror(counts[i]), want);
	}
	assert_string_equal(loco_strerror(3), "not an error code (a count: 3)");
	assert_string_not_equal(loco_strerror(3), strerror(3));
	/* 0 is still success, negative values still errors */
	assert_string_equal(loco_strerror(0), "success");
	assert_string_equal(loco_strerror(-ESRCH), strerror(ESRCH));
}

static void *count_text(void *arg)
{
	const char *s = loco_strerror(7);

	/* another thread's call left this thread's text alone */
	*(int *)arg = strcmp(s, "not an error code (a count: 7)") == 0;
	return NULL;
}

/* the count's text is per thread: another thread's call does not rewrite it */
static void strerror__count_text_is_per_thread(void **state)
{
	pthread_t t;
	int ok = 0;
	const char *mine = loco_strerror(42);

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, count_text, &ok), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(ok);
	assert_string_equal(mine, "not an error code (a count: 42)");
}

static void strerror__int_min_is_unknown_loco_code(void **state)
{
	(void)state;
	/* -INT_MIN does not exist: negating it is undefined behaviour */
	assert_string_equal(loco_strerror(INT_MIN), unknown_loco);
	assert_string_equal(loco_strerror(INT_MIN + 1), unknown_loco);
}

static void strerror__unnamed_errno_range_never_null(void **state)
{
	/* codes libc has no name for, below LOCO_ERRNO_BASE */
	const int codes[] = {999, 2000, LOCO_ERRNO_BASE - 1};

	(void)state;
	for (size_t i = 0; i < NELEM(codes); i++) {
		const char *s = loco_strerror(-codes[i]);

		assert_non_null(s);
		assert_true(strlen(s) > 0);
	}
}

static void version__matches_headers(void **state)
{
	unsigned v = loco_version();
	char str[32];

	(void)state;
	/* run + verify */
	assert_int_equal(v >> 16, LOCO_VERSION_MAJOR);
	assert_int_equal(v & 0xffff, LOCO_VERSION_MINOR);
	snprintf(str, sizeof(str), "%u.%u.", v >> 16, v & 0xffff);
	assert_int_equal(strncmp(LOCO_VERSION_STRING, str, strlen(str)), 0);
}

static void version__check_macro(void **state)
{
	(void)state;
	assert_true(LOCO_CHECK_VERSION(LOCO_VERSION_MAJOR, LOCO_VERSION_MINOR));
	assert_true(LOCO_CHECK_VERSION(LOCO_VERSION_MAJOR, 0));
	assert_false(LOCO_CHECK_VERSION(LOCO_VERSION_MAJOR, LOCO_VERSION_MINOR + 1));
	assert_false(LOCO_CHECK_VERSION(LOCO_VERSION_MAJOR + 1, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(strerror__zero_is_success),
	    cmocka_unit_test(strerror__errno_negated),
	    cmocka_unit_test(strerror__loco_codes_have_own_text),
	    cmocka_unit_test(strerror__unknown_loco_code),
	    cmocka_unit_test(strerror__positive_is_a_count),
	    cmocka_unit_test(strerror__count_text_is_per_thread),
	    cmocka_unit_test(strerror__int_min_is_unknown_loco_code),
	    cmocka_unit_test(strerror__unnamed_errno_range_never_null),
	    cmocka_unit_test(version__matches_headers),
	    cmocka_unit_test(version__check_macro),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
