/* SPDX-License-Identifier: BSD-2-Clause */
/* channel-api.c -- argument checks and limits of channels, objects and regions (one node) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <loco.h>
#include <loco/lock.h>
#include <loco/ralloc.h>

static int setup(void **state)
{
	loco_manager_t *m;

	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_FABRIC", "tcp", 1);
	if (loco_init(NULL, &m) != 0)
		return -1;
	*state = m;
	return 0;
}

static int teardown(void **state)
{
	loco_fini(*state);
	return 0;
}

static void channel_create__bad_names_are_einval(void **state)
{
	char longname[LOCO_NAME_MAX + 2];
	loco_channel_t *ch = (loco_channel_t *)0x1;

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	/* run + verify: nothing written on failure */
	assert_int_equal(loco_channel_create(*state, NULL, "", 2, &ch), -EINVAL);
	assert_int_equal(loco_channel_create(*state, NULL, "a/b", 2, &ch), -EINVAL);
	assert_int_equal(loco_channel_create(*state, NULL, longname, 2, &ch), -EINVAL);
	assert_int_equal(loco_channel_create(*state, NULL, "ok", 0, &ch), -EINVAL);
	assert_int_equal(loco_channel_create(*state, NULL, NULL, 2, &ch), -EINVAL);
	assert_ptr_equal(ch, (loco_channel_t *)0x1);
}

/* the manager's getters (loco_manager_<noun>, loco 0.11) on one node */
static void manager_getters__one_node(void **state)
{
	loco_manager_t *m = *state;
	const char *fab = (const char *)0x1;
	uint32_t ids[4] = {0};
	uint64_t inc = 0;

	assert_true(loco_manager_node_id(m) >= 1);
	assert_non_null(strchr(loco_manager_addr(m), ':'));
	assert_true(loco_manager_incarnation(m) != 0);
	assert_int_equal(loco_manager_members(m, ids, 4), 1);
	assert_int_equal(ids[0], loco_manager_node_id(m));
	assert_int_equal(loco_manager_member_fabric(m, loco_manager_node_id(m), &fab), -ENOENT);
	assert_ptr_equal(fab, (const char *)0x1);
	assert_int_equal(loco_manager_member_incarnation(m, loco_manager_node_id(m), &inc), 0);
	assert_true(inc == loco_manager_incarnation(m));
	assert_true(loco_manager_view(m) >= 1);
	assert_int_equal(loco_manager_node_id(NULL), 0);
	assert_null(loco_manager_addr(NULL));
	assert_int_equal(loco_manager_job_size(NULL), 0);
	assert_true(loco_manager_members(NULL, ids, 4) < 0);
}

/* one configuration pattern (loco 0.11): *_cfg_t, *_cfg_default(), a create taking it */
static void cfg__defaults_and_creates(void **state)
{
	loco_manager_t *m = *state;
	loco_ack_key_cfg_t ac = {.flags = 99};
	loco_lock_cfg_t lc = {.lease_ns = -1, .takeover_ns = -1};
	loco_ack_key_t *k = NULL, *bad = (loco_ack_key_t *)0x1;
	loco_channel_t *ch;
	loco_lock_t *lk = NULL, *badlk = (loco_lock_t *)0x1;

	loco_ack_key_cfg_default(&ac);
	assert_int_equal(ac.flags, 0);
	loco_ack_key_cfg_default(NULL);
	assert_int_equal(loco_ack_key_create_cfg(m, &ac, &k), 0);
	loco_ack_key_destroy(k);
	assert_int_equal(loco_ack_key_create_cfg(m, NULL, &k), 0);
	loco_ack_key_destroy(k);
	ac.flags = LOCO_ACK_IGNORE_LEFT | LOCO_ACK_LAZY;
	assert_int_equal(loco_ack_key_create_cfg(m, &ac, &k), 0);
	loco_ack_key_destroy(k);
	ac.flags = 4;
	assert_int_equal(loco_ack_key_create_cfg(m, &ac, &bad), -EINVAL);
	assert_ptr_equal(bad, (loco_ack_key_t *)0x1);

	loco_lock_cfg_default(&lc);
	assert_true(lc.lease_ns == 2000000000ll && lc.takeover_ns == 3000000000ll);
	loco_lock_cfg_default(NULL);
	assert_int_equal(loco_channel_create(m, NULL, "cfg", 1, &ch), 0);
	assert_int_equal(loco_lock_create_cfg(ch, "a", loco_manager_node_id(m), &lc, &lk), 0);
	loco_lock_destroy(lk);
	lc.takeover_ns = lc.lease_ns; /* below lease * (1 + 1/500) + 10 ms */
	assert_int_equal(loco_lock_create_cfg(ch, "b", loco_manager_node_id(m), &lc, &badlk),
	                 -EINVAL);
	assert_ptr_equal(badlk, (loco_lock_t *)0x1);
	assert_int_equal(loco_lock_create_cfg(ch, "c", loco_manager_node_id(m), NULL, &lk), 0);
	loco_lock_destroy(lk);
	assert_int_equal(loco_channel_destroy(ch), 0);

	loco_ralloc_cfg_t rc = {.slice_len = 7, .batch = 7, .keep = 7, .numa_node = 7};
	loco_ralloc_cfg_default(&rc, 1u << 20);
	assert_true(rc.heap_len == 1u << 20 && rc.slice_len == 0 && rc.batch == 0 && rc.keep == 0);
	assert_int_equal(rc.numa_node, -1);
	loco_ralloc_cfg_default(NULL, 1);
}

static void channel_create__full_names_nest_and_are_unique(void **state)
{
	loco_channel_t *kv, *shard, *dup;

	/* run */
	assert_int_equal(loco_channel_create(*state, NULL, "kv", 1, &kv), 0);
	assert_int_equal(loco_channel_create(*state, kv, "shard", 1, &shard), 0);

	/* verify */
	assert_string_equal(loco_channel_name(shard), "kv/shard");
	assert_int_equal(loco_channel_create(*state, kv, "shard", 1, &dup), -EEXIST);
	assert_int_equal(loco_channel_destroy(kv), -EBUSY); /* a child remains */
	assert_int_equal(loco_channel_destroy(shard), 0);
	assert_int_equal(loco_channel_destroy(kv), 0);
}

static void region_create__limits_checked_before_allocating(void **state)
{
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r, *extra = NULL;
	char name[16];

	/* configure */
	assert_int_equal(loco_channel_create(*state, NULL, "lim", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), -EEXIST);

	/* run: a channel holds more than the 64 regions of one CHAN message */
	for (int i = 0; i < 65; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		assert_int_equal(loco_region_create(obj, name, 64, LOCO_ACCESS_READ, &r), 0);
		assert_non_null(loco_region_ptr(r));
		assert_int_equal(loco_region_len(r), 64);
	}

	/* verify */
	assert_int_equal(loco_region_create(obj, "r0", 64, 0, &extra), -EEXIST);
	assert_int_equal(loco_region_create(obj, "r64", 64, 0, &extra), -EEXIST);
	assert_int_equal(loco_region_create(obj, "bad", 64, 0x80, &extra), -EINVAL);
	assert_int_equal(loco_region_create(obj, "zero", 0, 0, &extra), -EINVAL);
	assert_null(extra);
	assert_int_equal(loco_channel_destroy(ch), -EBUSY); /* an object remains */
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

/*
 * region_create__announced_entries_bounded -- a channel announces up to
 * 16384 entries (listed regions and parameters; ctrl_wire.h's
 * LC_CHAN_ENTRIES_MAX): then loco_object_agree() and a listed region are
 * -ENOSPC, an unlisted region still fits, and destroying an object gives
 * its entries back.
 */
static void region_create__announced_entries_bounded(void **state)
{
	enum {
		NOBJ = 16384 / LOCO_AGREE_MAX
	};
	loco_object_t **objs = calloc(NOBJ + 1, sizeof(*objs));
	loco_channel_t *ch;
	loco_region_t *r = NULL;
	char name[32];

	/* configure: 2048 objects of 8 parameters each */
	assert_non_null(objs);
	assert_int_equal(loco_channel_create(*state, NULL, "bound", 1, &ch), 0);
	for (int i = 0; i < NOBJ; i++) {
		snprintf(name, sizeof(name), "o%d", i);
		assert_int_equal(loco_object_create(ch, name, NULL, NULL, &objs[i]), 0);
		for (int k = 0; k < LOCO_AGREE_MAX; k++) {
			snprintf(name, sizeof(name), "p%d", k);
			assert_int_equal(loco_object_agree(objs[i], name, (uint64_t)k), 0);
		}
	}
	assert_int_equal(loco_object_create(ch, "extra", NULL, NULL, &objs[NOBJ]), 0);

	/* run + verify */
	assert_int_equal(loco_object_agree(objs[NOBJ], "k", 1), -ENOSPC);
	assert_int_equal(loco_region_create(objs[NOBJ], "listed", 64, LOCO_ACCESS_READ, &r),
	                 -ENOSPC);
	assert_null(r);
	assert_int_equal(loco_region_create(objs[NOBJ], "unlisted", 64,
	                                    LOCO_ACCESS_UNLISTED | LOCO_ACCESS_READ, &r),
	                 0);
	loco_object_destroy(objs[0]);
	objs[0] = NULL;
	assert_int_equal(loco_region_create(objs[NOBJ], "listed", 64, LOCO_ACCESS_READ, &r), 0);
	assert_int_equal(loco_object_agree(objs[NOBJ], "k", 1), 0);
	for (int i = 0; i < LOCO_AGREE_MAX - 2; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		assert_int_equal(loco_object_agree(objs[NOBJ], name, 1), 0);
	}
	assert_int_equal(loco_object_agree(objs[NOBJ], "full", 1), -ENOSPC);
	for (int i = NOBJ; i >= 0; i--)
		loco_object_destroy(objs[i]);
	assert_int_equal(loco_channel_destroy(ch), 0);
	free(objs);
}

static void object_msg__arguments_checked(void **state)
{
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r, *u;
	loco_rref_t ref = {0}, mine;
	static char big[LOCO_OBJECT_MSG_MAX + 1];

	/* configure */
	assert_int_equal(loco_channel_create(*state, NULL, "msgs", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);
	assert_int_equal(loco_region_create(obj, "listed", 64, LOCO_ACCESS_READ, &r), 0);
	assert_int_equal(
	    loco_region_create(obj, "unlisted", 128, LOCO_ACCESS_WRITE | LOCO_ACCESS_UNLISTED, &u),
	    0);

	/* run, verify: arguments first, then the size, then the join */
	assert_int_equal(loco_object_on_msg(NULL, NULL, NULL), -EINVAL);
	assert_int_equal(loco_object_on_msg(obj, NULL, NULL), 0);
	assert_int_equal(loco_object_send(NULL, 2, "x", 1), -EINVAL);
	assert_int_equal(loco_object_send(obj, 2, NULL, 1), -EINVAL);
	assert_int_equal(loco_object_send(obj, 2, big, sizeof(big)), -EMSGSIZE);
	assert_int_equal(loco_object_send(obj, 2, big, LOCO_OBJECT_MSG_MAX), -LOCO_ENOTJOINED);
	assert_int_equal(loco_object_send(obj, 2, NULL, 0), -LOCO_ENOTJOINED);

	/* a region's own reference, listed or not */
	assert_int_equal(loco_region_rref(NULL, &mine), -EINVAL);
	assert_int_equal(loco_region_rref(u, NULL), -EINVAL);
	assert_int_equal(loco_region_rref(u, &mine), 0);
	assert_int_equal(mine.node, loco_manager_node_id(*state));
	assert_ptr_equal((void *)(uintptr_t)mine.addr, loco_region_ptr(u));
	assert_int_equal(mine.len, 128);
	assert_int_equal(loco_region_rref(r, &mine), 0);
	assert_int_equal(mine.len, 64);
	assert_int_equal(loco_region_remote(u, 2, &ref), -LOCO_ENOTJOINED);
	assert_int_equal(loco_region_create(obj, "unlisted", 8, LOCO_ACCESS_UNLISTED, &r), -EEXIST);
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void remote_ops__bad_ranges_are_einval(void **state)
{
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
	loco_rref_t far = {.node = 99, .rkey = 1, .addr = 0x1000, .len = 64};

	/* configure */
	assert_int_equal(loco_channel_create(*state, NULL, "ops", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);
	assert_int_equal(loco_region_create(obj, "r", 64, 0, &r), 0);
	assert_int_equal(loco_channel_join(ch, 0), 0); /* alone: at once */

	/* run + verify */
	assert_int_equal(loco_write(r, 60, &far, 0, 8, NULL), -EINVAL);
	assert_int_equal(loco_read(r, 0, &far, 60, 8, NULL), -EINVAL);
	assert_int_equal(loco_faa(r, 4, &far, 0, 1, NULL), -EINVAL);
	assert_int_equal(loco_cas(r, 0, &far, 4, 0, 1, NULL), -EINVAL);
	assert_int_equal(loco_write(r, 0, &far, 0, 8, NULL), -ENOTCONN); /* no node 99 */
	assert_int_equal(loco_region_remote(r, 99, &far), -ENOENT);
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void remote_ops__to_self_go_through_the_fabric(void **state)
{
	loco_manager_t *m = *state;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
	loco_ack_key_t *ack;
	loco_rref_t self;
	uint64_t *w;

	/* configure: a region of this node, reached as a remote one */
	assert_int_equal(loco_channel_create(m, NULL, "self", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);
	assert_int_equal(
	    loco_region_create(obj, "r", 64, LOCO_ACCESS_WRITE | LOCO_ACCESS_ATOMIC, &r), 0);
	assert_int_equal(loco_ack_key_create(m, &ack), 0);
	assert_int_equal(loco_channel_join(ch, 0), 0); /* alone: at once */
	assert_int_equal(loco_region_remote(r, loco_manager_node_id(m), &self), 0);
	w = loco_region_ptr(r);
	w[0] = 40;

	/* run */
	assert_int_equal(loco_faa(r, 8, &self, 0, 2, ack), 0);
	assert_int_equal(loco_ack_wait(ack, 5000000000ll), 0);
	assert_int_equal(loco_cas(r, 16, &self, 0, 42, 7, ack), 0);
	assert_int_equal(loco_ack_wait(ack, 5000000000ll), 0);
	w[3] = 99;
	assert_int_equal(loco_write(r, 24, &self, 32, 8, ack), 0);
	assert_int_equal(loco_ack_wait(ack, 5000000000ll), 0);

	/* verify: old values returned, memory changed by the NIC */
	assert_int_equal(w[1], 40);
	assert_int_equal(w[2], 42);
	assert_int_equal(w[0], 7);
	assert_int_equal(w[4], 99);
	loco_ack_key_destroy(ack);
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void object_status__not_joined_until_the_join(void **state)
{
	loco_manager_t *m = *state;
	loco_rref_t self = {.node = 77}, before;
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;

	/* configure: an object in a channel not joined yet */
	assert_int_equal(loco_channel_create(m, NULL, "unjoined", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);
	assert_int_equal(loco_region_create(obj, "r", 64, LOCO_ACCESS_WRITE, &r), 0);
	before = self;

	/* run + verify: no reference, not even to this node's own copy; nothing written */
	assert_int_equal(loco_object_status(obj), -LOCO_ENOTJOINED);
	assert_int_equal(loco_region_remote(r, loco_manager_node_id(m), &self), -LOCO_ENOTJOINED);
	assert_int_equal(loco_region_remote(r, 99, &self), -LOCO_ENOTJOINED);
	assert_memory_equal(&self, &before, sizeof(self));
	assert_int_equal(loco_object_status(NULL), -EINVAL);

	/* run + verify: once joined, usable */
	assert_int_equal(loco_channel_join(ch, 0), 0);
	assert_int_equal(loco_object_status(obj), 0);
	assert_int_equal(loco_region_remote(r, loco_manager_node_id(m), &self), 0);
	printf("# before the join: %s\n", loco_strerror(-LOCO_ENOTJOINED));
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void object_agree__arguments_and_limits(void **state)
{
	char key[LOCO_NAME_MAX + 2];
	loco_channel_t *ch;
	loco_object_t *obj;
	int ret;

	/* configure */
	assert_int_equal(loco_channel_create(*state, NULL, "agree", 1, &ch), 0);
	assert_int_equal(loco_object_create(ch, "o", NULL, NULL, &obj), 0);

	/* run + verify: bad arguments, the same value again, another value */
	assert_int_equal(loco_object_agree(NULL, "k", 1), -EINVAL);
	assert_int_equal(loco_object_agree(obj, NULL, 1), -EINVAL);
	assert_int_equal(loco_object_agree(obj, "", 1), -EINVAL);
	assert_int_equal(loco_object_agree(obj, "a/b", 1), -EINVAL);
	memset(key, 'k', LOCO_NAME_MAX - 1); /* "o/" + this is one byte too long */
	key[LOCO_NAME_MAX - 1] = '\0';
	assert_int_equal(loco_object_agree(obj, key, 1), -EINVAL);
	key[LOCO_NAME_MAX - 2] = '\0'; /* exactly LOCO_NAME_MAX */
	assert_int_equal(loco_object_agree(obj, key, 1), 0);
	assert_int_equal(loco_object_agree(obj, "size", 16), 0);
	assert_int_equal(loco_object_agree(obj, "size", 16), 0);
	assert_int_equal(loco_object_agree(obj, "size", 32), -EEXIST);

	/* run + verify: LOCO_AGREE_MAX per object */
	ret = 0;
	for (int i = 2; i < LOCO_AGREE_MAX; i++) {
		char k[8];

		snprintf(k, sizeof(k), "k%d", i);
		ret |= loco_object_agree(obj, k, (uint64_t)i);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(loco_object_agree(obj, "one-more", 1), -ENOSPC);
	printf("# %d parameters agreed, the next: %s\n", LOCO_AGREE_MAX, loco_strerror(-ENOSPC));

	/* a channel alone is never mismatched; sync returns its 0 peers */
	assert_int_equal(loco_object_sync(obj, 0), -LOCO_ENOTJOINED);
	assert_int_equal(loco_channel_join(ch, 0), 0);
	assert_int_equal(loco_object_sync(obj, 0), 0);
	assert_int_equal(loco_object_sync(NULL, 0), -EINVAL);
	loco_object_destroy(obj);
	assert_int_equal(loco_channel_destroy(ch), 0);
}

static void init__second_manager_is_ealready(void **state)
{
	loco_manager_t *m = (loco_manager_t *)0x1;

	/* run + verify: the group's manager is alive; nothing written */
	unsetenv("LOCO_MANY_MANAGERS");
	assert_int_equal(loco_init(NULL, &m), -EALREADY);
	assert_ptr_equal(m, (loco_manager_t *)0x1);
	printf("# a second loco_init: %s\n", loco_strerror(-EALREADY));
	(void)state;
}

static void init__zero_node_id_means_default(void **state)
{
	loco_manager_t *m = (loco_manager_t *)0x1, *alone;

	(void)state;
	setenv("LOCO_ADDR", "127.0.0.1:0", 1);
	/* alone, 0 is the default id 1 (as a zero struct field) */
	setenv("LOCO_NODE_ID", "0", 1);
	assert_int_equal(loco_init(NULL, &alone), 0);
	assert_int_equal(loco_manager_node_id(alone), 1);
	loco_fini(alone);
	/* a joiner has no default id; garbage is refused; nothing written */
	setenv("LOCO_JOIN", "127.0.0.1:9", 1);
	assert_int_equal(loco_init(NULL, &m), -EINVAL);
	unsetenv("LOCO_JOIN");
	setenv("LOCO_NODE_ID", "x1", 1);
	assert_int_equal(loco_init(NULL, &m), -EINVAL);
	unsetenv("LOCO_NODE_ID");
	assert_ptr_equal(m, (loco_manager_t *)0x1);
}

/* own_port -- a TCP port on 127.0.0.1 that was free a moment ago (0 when none was found) */
static unsigned own_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	unsigned port = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void init__join_through_itself_is_einval(void **state)
{
	loco_manager_t *m = (loco_manager_t *)0x1;
	char addr[32];
	unsigned port = own_port();

	/* configure: LOCO_JOIN is this node's own address (it met itself: -EEXIST, "id in use") */
	(void)state;
	assert_int_not_equal(port, 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	setenv("LOCO_ADDR", addr, 1);
	setenv("LOCO_JOIN", addr, 1);
	setenv("LOCO_NODE_ID", "2", 1);
	/* run + verify: refused at once (not after the join timeout); nothing written */
	assert_int_equal(loco_init(NULL, &m), -EINVAL);
	assert_ptr_equal(m, (loco_manager_t *)0x1);
	unsetenv("LOCO_JOIN");
	unsetenv("LOCO_NODE_ID");
	setenv("LOCO_ADDR", "127.0.0.1:0", 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(channel_create__bad_names_are_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(manager_getters__one_node, setup, teardown),
	    cmocka_unit_test_setup_teardown(cfg__defaults_and_creates, setup, teardown),
	    cmocka_unit_test_setup_teardown(channel_create__full_names_nest_and_are_unique, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(region_create__limits_checked_before_allocating, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(object_msg__arguments_checked, setup, teardown),
	    cmocka_unit_test_setup_teardown(region_create__announced_entries_bounded, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(remote_ops__bad_ranges_are_einval, setup, teardown),
	    cmocka_unit_test_setup_teardown(remote_ops__to_self_go_through_the_fabric, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(object_status__not_joined_until_the_join, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(object_agree__arguments_and_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(init__second_manager_is_ealready, setup, teardown),
	    cmocka_unit_test(init__zero_node_id_means_default),
	    cmocka_unit_test(init__join_through_itself_is_einval),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
