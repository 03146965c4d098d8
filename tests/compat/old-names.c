/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * old-names.c -- a program written for loco 0.10: built against the 0.10
 * headers (tests/compat/include-0.10, as installed then), linked to and
 * run on this library. It calls every name loco 0.11 renamed (the
 * manager's getters, loco_lock_create_config(), loco_ack_key_create_flags())
 * and keeps a loco_waiter_t on its stack with the 0.10 layout, on one
 * node: they must still link, and give what their new names give.
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco.h>
#include <loco/lock.h>

#if LOCO_VERSION_MINOR != 10
#error "built against the 0.10 headers only"
#endif

#define CHECK(c)                                                                           \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "old-names: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			return 1;                                                          \
		}                                                                          \
	} while (0)

int main(void)
{
	loco_config_t cfg = {.fabric = "tcp"};
	loco_lock_config_t lc = {.lease_ns = 500000000ll, .takeover_ns = 800000000ll};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_ack_key_t *ack, *bad = NULL;
	loco_lock_t *lk;
	loco_waiter_t w;
	const char *fab = NULL;
	uint32_t ids[4];
	uint64_t inc = 0;

	CHECK(loco_init(&cfg, &m) == 0);
	CHECK(loco_node_id(m) >= 1);
	CHECK(loco_addr(m) != NULL && strchr(loco_addr(m), ':') != NULL);
	CHECK(loco_incarnation(m) != 0);
	(void)loco_job_size(m); /* 0 unless a launcher says */
	CHECK(loco_members(m, ids, 4) == 1 && ids[0] == loco_node_id(m));
	CHECK(loco_member_fabric(m, loco_node_id(m), &fab) == -ENOENT && fab == NULL);
	CHECK(loco_member_incarnation(m, loco_node_id(m), &inc) == 0 && inc == loco_incarnation(m));
	CHECK(loco_view(m) >= 1);
	CHECK(loco_members(NULL, ids, 4) < 0);

	CHECK(loco_ack_key_create_flags(m, LOCO_ACK_IGNORE_LEFT | LOCO_ACK_LAZY, &ack) == 0);
	CHECK(loco_ack_key_create_flags(m, 4, &bad) == -EINVAL && bad == NULL);

	CHECK(loco_channel_create(m, NULL, "compat", 1, &ch) == 0);
	lc.takeover_ns = 1; /* below the lease: refused */
	CHECK(loco_lock_create_config(ch, "bad", loco_node_id(m), &lc, &lk) == -EINVAL);
	lc.takeover_ns = 800000000ll;
	CHECK(loco_lock_create_config(ch, "lk", loco_node_id(m), &lc, &lk) == 0);
	CHECK(loco_channel_join(ch, 5000000000ll) == 0);
	CHECK(loco_lock_acquire(lk, 5000000000ll) == 0);
	CHECK(loco_lock_held(lk) == 1);
	CHECK(loco_lock_lease_left(lk) <= 500000000ll);
	CHECK(loco_lock_release(lk) == 0);

	/* the waiter as 0.10 laid it out: the library writes its 40 bytes, policy and pauses read */
	loco_waiter_init(&w, m);
	for (int i = 0; i < 3; i++)
		loco_waiter_pause(&w);
	CHECK(w.pauses == 3);
	CHECK(w.policy == loco_waiter_policy(&w) && w.policy > 0);
	loco_waiter_reset(&w);
	CHECK(w.pauses == 0);

	CHECK(loco_ack_wait(ack, 0) == 0);
	loco_ack_key_destroy(ack);
	loco_lock_destroy(lk);
	CHECK(loco_channel_destroy(ch) == 0);
	loco_fini(m);
	printf("old-names: loco %u.%u, built against the 0.10 headers: ok\n", loco_version() >> 16,
	       loco_version() & 0xffff);
	return 0;
}
