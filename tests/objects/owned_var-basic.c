/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * owned_var-basic.c -- the owned_var calls, their errors, and a reader
 * that joins late and is killed.
 *
 * loco-run -n 3. Channel "ov-basic" holds three variables, one per size
 * class, each owned by another node: "w" (8 bytes, node 1), "l" (40
 * bytes, node 2), "h" (1000 bytes, node 3). Checks:
 *   - argument errors (-EINVAL), a second create (-EEXIST), -EPERM for a
 *     store or push by a non-owner, -EINVAL for a push to oneself,
 *     -ENOENT for a push to a node that holds no such variable;
 *   - every value loads as zeros before any store; the owner loads what
 *     it stored;
 *   - push_to reaches exactly one reader, push_broadcast all of them
 *     (and says how many);
 *   - node 1 spawns node 9 (LOCO_JOIN), which joins the channel late:
 *     its replicas are zeros until the owners push again, then every
 *     value is there; node 9 says so through a pipe and node 1 SIGKILLs
 *     it while the owners keep pushing with acks;
 *   - once node 9 is gone from the channel, every push_broadcast reaches
 *     the two other nodes and is acknowledged without error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <loco/owned_var.h>

#include "scenario.h"

#define LATE   9
#define NVARS  3
#define ROUNDS 4 /* value versions: 1 push_to, 2 broadcast, 3 for the late node, 4 after */

static const char *const var_name[NVARS] = {"w", "l", "h"};
static const size_t var_size[NVARS] = {8, 40, 1000};
static const uint32_t var_owner[NVARS] = {1, 2, 3};

struct vars {
	loco_channel_t *ch;
	loco_owned_var_t *v[NVARS];
	loco_ack_key_t *ack;
};

/* pattern -- the value of variable @i at version @ver (0: zeros). */
static void pattern(int i, unsigned ver, uint8_t *buf)
{
	for (size_t k = 0; k < var_size[i]; k++)
		buf[k] = ver ? (uint8_t)(i * 64 + ver * 16 + k * 7 + 1) : 0;
}

/* holds -- whether variable @i loads as version @ver here. */
static bool holds(struct vars *s, int i, unsigned ver)
{
	uint8_t got[1000], want[1000];

	SC_ASSERT_OK(loco_owned_var_load(s->v[i], got));
	pattern(i, ver, want);
	return memcmp(got, want, var_size[i]) == 0;
}

static void vars_open(struct vars *s, loco_manager_t *m, uint32_t nodes)
{
	SC_ASSERT_OK(loco_channel_create(m, NULL, "ov-basic", nodes, &s->ch));
	for (int i = 0; i < NVARS; i++)
		SC_ASSERT_OK(
		    loco_owned_var_create(s->ch, var_name[i], var_owner[i], var_size[i], &s->v[i]));
	SC_ASSERT_OK(loco_ack_key_create(m, &s->ack));
	for (int i = 0; i < NVARS; i++) {
		SC_ASSERT_EQ(loco_owned_var_size(s->v[i]), var_size[i]);
		SC_ASSERT_EQ(loco_owned_var_owner(s->v[i]), var_owner[i]);
		SC_ASSERT(holds(s, i, 0));
	}
	SC_ASSERT_OK(loco_channel_join(s->ch, (int64_t)SC_WAIT_MS * 1000000));
}

static void vars_close(struct vars *s)
{
	loco_ack_key_destroy(s->ack);
	for (int i = 0; i < NVARS; i++)
		loco_owned_var_destroy(s->v[i]);
	SC_ASSERT_OK(loco_channel_destroy(s->ch));
}

/* mine -- the variable this node owns (-1: none). */
static int mine(uint32_t me)
{
	for (int i = 0; i < NVARS; i++)
		if (var_owner[i] == me)
			return i;
	return -1;
}

/* store_ver -- owner: store version @ver of its variable @i. */
static void store_ver(struct vars *s, int i, unsigned ver)
{
	uint8_t buf[1000];

	pattern(i, ver, buf);
	SC_ASSERT_OK(loco_owned_var_store(s->v[i], buf));
	SC_ASSERT(holds(s, i, ver));
}

/* late_main -- node 9: join late, wait for every value's version 3, tell node 1, wait. */
static int late_main(void)
{
	loco_manager_t *m = sc_start();
	struct vars s;

	vars_open(&s, m, 4);
	for (int i = 0; i < NVARS; i++) {
		char what[64];

		snprintf(what, sizeof(what), "version 3 of '%s'", var_name[i]);
		SC_WAIT_UNTIL(holds(&s, i, 3), SC_WAIT_MS, what);
	}
	sc_log("late node: every value arrived");
	sc_report("ok");
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; sc_now_ms() < dl;)
		sc_sleep_ms(100); /* node 1 SIGKILLs us */
	SC_FAIL("node 1 did not kill the late node");
}

static void errors(struct vars *s, uint32_t me)
{
	loco_owned_var_t *x;
	uint8_t buf[1000] = {0};
	int i = mine(me);

	SC_ASSERT_EQ(loco_owned_var_create(NULL, "x", 1, 8, &x), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_create(s->ch, NULL, 1, 8, &x), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_create(s->ch, "x", 0, 8, &x), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_create(s->ch, "x", 1, 0, &x), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_create(s->ch, "x", 1, (size_t)LOCO_OWNED_VAR_MAX_SIZE + 1, &x),
	             -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_create(s->ch, "x", 1, 8, NULL), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_create(s->ch, "w", 1, 8, &x), -EEXIST);
	SC_ASSERT_EQ(loco_owned_var_store(NULL, buf), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_load(s->v[0], NULL), -EINVAL);
	for (int k = 0; k < NVARS; k++) {
		if (k == i)
			continue;
		SC_ASSERT_EQ(loco_owned_var_store(s->v[k], buf), -EPERM);
		SC_ASSERT_EQ(loco_owned_var_push_to(s->v[k], var_owner[k], s->ack), -EPERM);
		SC_ASSERT_EQ(loco_owned_var_push_broadcast(s->v[k], s->ack), -EPERM);
	}
	SC_ASSERT_EQ(loco_owned_var_push_to(s->v[i], me, s->ack), -EINVAL);
	SC_ASSERT_EQ(loco_owned_var_push_to(s->v[i], 42, s->ack), -ENOENT);
	SC_ASSERT_EQ(loco_owned_var_size(NULL), 0);
	SC_ASSERT_EQ(loco_owned_var_owner(NULL), 0);
	SC_ASSERT_EQ(loco_ack_outstanding(s->ack), 0);
}

int main(int argc, char **argv)
{
	loco_manager_t *m;
	struct sc_sync sync;
	struct vars s;
	loco_value_stats_t st;
	uint32_t me, to, others[2];
	pid_t late = 0;
	int i, fd = -1, n, errs = 0, pushes = 0;
	char line[64];

	sc_init("owned_var-basic", argc, argv, 100);
	if (argc > 1 && strcmp(argv[1], "late") == 0)
		return late_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	i = mine(me);
	for (uint32_t k = 1, o = 0; k <= 3; k++)
		if (k != me)
			others[o++] = k;
	vars_open(&s, m, 3);
	sc_sync_open(&sync, m, 3);
	errors(&s, me);
	sc_sync_wait(&sync, "errors checked", SC_WAIT_MS);

	/* 1. push_to one reader: the next node after the owner */
	to = me % 3 + 1;
	store_ver(&s, i, 1);
	SC_ASSERT_OK(loco_owned_var_push_to(s.v[i], to, s.ack));
	SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));
	sc_sync_wait(&sync, "version 1 pushed to one", SC_WAIT_MS);
	for (int k = 0; k < NVARS; k++) {
		if (k == i)
			continue;
		/* variable k went from its owner to the node after it only */
		if (!holds(&s, k, var_owner[k] % 3 + 1 == me ? 1 : 0))
			SC_FAIL("'%s' is not at version %d", var_name[k],
			        var_owner[k] % 3 + 1 == me ? 1 : 0);
	}
	sc_sync_wait(&sync, "version 1 checked", SC_WAIT_MS);

	/* 2. push_broadcast: both readers */
	store_ver(&s, i, 2);
	SC_ASSERT_EQ(loco_owned_var_push_broadcast(s.v[i], s.ack), 2);
	SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));
	sc_sync_wait(&sync, "version 2 broadcast", SC_WAIT_MS);
	for (int k = 0; k < NVARS; k++)
		SC_ASSERT(holds(&s, k, 2));
	sc_sync_wait(&sync, "version 2 checked", SC_WAIT_MS);

	/* 3. a late reader: zeros until the owners push again */
	if (me == 1) {
		char join[96];
		const char *env[] = {join, "LOCO_NODE_ID=9", "LOCO_ADDR=127.0.0.1:0", NULL};

		snprintf(join, sizeof(join), "LOCO_JOIN=%s", loco_manager_addr(m));
		late = sc_spawn("late", env, &fd);
	}
	SC_WAIT_UNTIL(sc_is_peer(s.ch, LATE), SC_WAIT_MS, "node 9 to pair in ov-basic");
	store_ver(&s, i, 3);
	/* its variables may not be announced yet: push until it holds one */
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS;
	     (n = loco_owned_var_push_broadcast(s.v[i], s.ack)) < 3; sc_sleep_ms(5)) {
		SC_ASSERT(n >= 2);
		SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));
		if (sc_now_ms() > dl)
			SC_FAIL("push_broadcast reached %d peers, not 3", n);
	}
	SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));

	/* 4. node 9 has everything: node 1 kills it while all owners push */
	if (me == 1) {
		sc_read_line(fd, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ok") == 0);
		sc_sync_put(&sync, 1, 1);
	} else {
		SC_WAIT_UNTIL(sc_sync_get(&sync, 1) == 1, SC_WAIT_MS, "node 9's ok");
	}
	if (me == 1)
		SC_ASSERT_EQ(sc_kill(late), 128 + 9);
	/*
	 * Pushes to a dying reader may fail; nothing else may. Besides the
	 * flushes and timeouts, a WRITE that reaches the dying process after
	 * its memory was deregistered (its exit tears down MRs before QPs, as
	 * Soft-RoCE shows) completes with -EACCES: a push now reports its own
	 * WRITE's error (loco_write_acks), not a trailer's flush.
	 */
	for (int64_t dl = sc_now_ms() + SC_WAIT_MS; sc_is_peer(s.ch, LATE); pushes++) {
		int ret;

		store_ver(&s, i, 3);
		n = loco_owned_var_push_broadcast(s.v[i], s.ack);
		SC_ASSERT(n >= 2 || n == -EAGAIN);
		ret = loco_ack_wait(s.ack, 10 * SC_NS);
		errs += ret != 0;
		if (ret != 0 && ret != -ECONNRESET && ret != -ECANCELED && ret != -ETIMEDOUT &&
		    ret != -EACCES)
			SC_FAIL("push during the kill: %s", loco_strerror(ret));
		if (sc_now_ms() > dl)
			SC_FAIL("node 9 still a peer %d ms after its kill", SC_WAIT_MS);
	}
	SC_ASSERT(sc_peers_are(s.ch, others, 2));
	store_ver(&s, i, 4);
	SC_ASSERT_EQ(loco_owned_var_push_broadcast(s.v[i], s.ack), 2);
	SC_ASSERT_OK(loco_ack_wait(s.ack, 10 * SC_NS));
	sc_sync_wait(&sync, "version 4 broadcast", SC_WAIT_MS);
	for (int k = 0; k < NVARS; k++)
		SC_ASSERT(holds(&s, k, 4));
	loco_owned_var_stats(s.v[i], &st);
	sc_log("owner of '%s': %llu pushes, %llu push errors; %d pushes while node 9 died, %d "
	       "acks failed",
	       var_name[i], (unsigned long long)st.pushes, (unsigned long long)st.push_errors,
	       pushes, errs);

	sc_sync_wait(&sync, "done", SC_WAIT_MS);
	vars_close(&s);
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
