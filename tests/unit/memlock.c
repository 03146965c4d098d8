/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * memlock.c -- the RLIMIT_MEMLOCK verdict (liboco/memlock.h) that the manager's warning and
 * loco-info share, and when the manager warns: only for a fab that uses a verbs device
 * (fab_uses_device()), never for tcp, shm, or auto without a device.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fabric.h"
#include "manager.h"
#include "memlock.h"
#include "provider.h"

static struct rlimit soft(rlim_t cur)
{
	return (struct rlimit){.rlim_cur = cur, .rlim_max = RLIM_INFINITY};
}

/* low: below 64 MiB, not unlimited, not root; what loco-info prints as LOW */
static void verdict__low_below_64mib_unless_root_or_unlimited(void **state)
{
	struct rlimit r8 = soft(8ull << 20), r64 = soft(LC_MEMLOCK_LOW),
	              under = soft(LC_MEMLOCK_LOW - 1), inf = soft(RLIM_INFINITY), zero = soft(0);

	(void)state;
	assert_true(lc_memlock_low(&r8, 1000));
	assert_true(lc_memlock_low(&under, 1000));
	assert_true(lc_memlock_low(&zero, 1000));
	assert_false(lc_memlock_low(&r64, 1000));
	assert_false(lc_memlock_low(&inf, 1000));
	/* root: CAP_IPC_LOCK lifts the limit for registration */
	assert_false(lc_memlock_low(&r8, 0));
	assert_false(lc_memlock_low(&zero, 0));
}

/* the software fabrics use no device; NULL neither */
static void uses_device__software_fabrics_do_not(void **state)
{
	const char *names[] = {"tcp", "shm", "auto"};

	(void)state;
	assert_false(fab_uses_device(NULL));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct fab_attr a = {.listen_addr = "127.0.0.1:0"};
		struct fab *f = NULL;
		int ret;

		ret = fab_open(names[i], &a, &f);
		if (ret != 0)
			fail_msg("fab_open(%s): %d", names[i], ret);
		/* auto: verbs only where a device opened (there is none on a test host without
		 * RDMA; where there is one, the remote fab says verbs) */
		if (strcmp(names[i], "auto") == 0)
			assert_int_equal(fab_uses_device(f),
			                 strcmp(fab_auto_remote(f)->ops->name, "verbs") == 0);
		else
			assert_false(fab_uses_device(f));
		fab_close(f);
	}
}

/* the check warns and says -ENOMEM only with a device and a low limit: the same verdict */
static void check__only_with_a_device(void **state)
{
	struct rlimit rl;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	assert_int_equal(lc_memlock_check(false), 0);
	assert_int_equal(lc_memlock_check(true), lc_memlock_low(&rl, geteuid()) ? -ENOMEM : 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(verdict__low_below_64mib_unless_root_or_unlimited),
	    cmocka_unit_test(uses_device__software_fabrics_do_not),
	    cmocka_unit_test(check__only_with_a_device),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
