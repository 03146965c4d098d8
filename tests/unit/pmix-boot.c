/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pmix-boot.c -- the PMIx bootstrap's decisions that need no PMIx server (liboco/pmix.c,
 * config.c; the launch tests run it under real launchers): without PMIX_RANK and
 * PMIX_NAMESPACE nothing changes; LOCO_PMIX=0 turns it off, and so does a LOCO_NODE_ID
 * (another launcher's bootstrap); LOCO_PMIX=1 requires it; a
 * PMIx environment with no server behind it fails loco_init() with -ENOTCONN and leaves
 * nothing behind (a build without PMIx ignores it); LOCO_NODES is the job size that
 * loco_manager_job_size() returns (a malformed one is ignored).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "pmix_boot.h"

/* sanitizer builds: libpmix keeps a few bytes of a failed PMIx_Init (libpmix2 4.2.2) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libpmix.so\n";
}

static void clear_env(void)
{
	unsetenv("PMIX_RANK");
	unsetenv("PMIX_NAMESPACE");
	unsetenv("LOCO_PMIX");
	unsetenv("LOCO_NODES");
	unsetenv("LOCO_NODE_ID");
	unsetenv("LOCO_JOIN");
}

static void start__nothing_without_pmix(void **state)
{
	struct lc_config c, before;
	struct lc_pmix *p = (struct lc_pmix *)&c; /* not NULL: must be set to NULL */

	(void)state;
	clear_env();
	assert_int_equal(lc_config_read(NULL, &c), 0);
	before = c;
	assert_int_equal(lc_pmix_start(NULL, &c, &p), 0);
	assert_null(p);
	assert_int_equal(c.node_id, before.node_id);
	assert_int_equal(c.nodes, 0);
	assert_ptr_equal(c.addr, before.addr);
	assert_ptr_equal(c.secret, before.secret);
	assert_null(c.join);
}

static void start__loco_pmix_off_and_required(void **state)
{
	struct lc_config c;
	struct lc_pmix *p;

	(void)state;
	clear_env();
	setenv("PMIX_RANK", "2", 1);
	setenv("LOCO_PMIX", "0", 1); /* off: a PMIx environment is ignored */
	assert_int_equal(lc_config_read(NULL, &c), 0);
	assert_int_equal(lc_pmix_start(NULL, &c, &p), 0);
	assert_null(p);
	assert_int_equal(c.node_id, 1);
	clear_env();
	setenv("PMIX_RANK", "2", 1);
	setenv("LOCO_NODE_ID", "5", 1); /* another launcher did the bootstrap: no PMIx_Init */
	assert_int_equal(lc_config_read(NULL, &c), 0);
	assert_int_equal(lc_pmix_start(NULL, &c, &p), 0);
	assert_null(p);
	assert_int_equal(c.node_id, 5);
	clear_env();
	setenv("LOCO_PMIX", "1", 1); /* required, and no PMIx server started us */
	assert_int_equal(lc_config_read(NULL, &c), 0);
	assert_int_equal(lc_pmix_start(NULL, &c, &p), -ENOENT);
	clear_env();
}

static void init__pmix_env_without_server(void **state)
{
	loco_manager_t *m = NULL;
	int ret;

	(void)state;
	clear_env();
	setenv("PMIX_RANK", "0", 1);
	setenv("PMIX_NAMESPACE", "loco-unit-none", 1);
	ret = loco_init(NULL, &m);
	printf("loco_init with PMIX_RANK and no server: %d (%s)\n", ret, loco_strerror(ret));
#ifdef LOCO_HAVE_PMIX
	assert_int_equal(ret, -ENOTCONN); /* PMIx_Init fails: no guessing a node id */
	assert_null(m);
#else
	assert_int_equal(ret, 0); /* no PMIx in this build: nothing changes */
	loco_fini(m);
	m = NULL;
#endif
	clear_env();
	/* nothing was left behind: a manager can be made now */
	assert_int_equal(loco_init(NULL, &m), 0);
	loco_fini(m);
}

static void nodes__job_size(void **state)
{
	struct lc_config c;
	loco_manager_t *m = NULL;

	(void)state;
	clear_env();
	setenv("LOCO_NODES", "5", 1);
	assert_int_equal(lc_config_read(NULL, &c), 0);
	assert_int_equal(c.nodes, 5);
	setenv("LOCO_NODES", "5x", 1); /* the application's too: ignored, not an error */
	assert_int_equal(lc_config_read(NULL, &c), 0);
	assert_int_equal(c.nodes, 0);
	setenv("LOCO_NODES", "3", 1);
	assert_int_equal(loco_init(NULL, &m), 0);
	assert_int_equal(loco_manager_job_size(m), 3);
	loco_fini(m);
	assert_int_equal(loco_manager_job_size(NULL), 0);
	clear_env();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(start__nothing_without_pmix),
	    cmocka_unit_test(start__loco_pmix_off_and_required),
	    cmocka_unit_test(init__pmix_env_without_server),
	    cmocka_unit_test(nodes__job_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
