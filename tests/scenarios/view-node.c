/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view-node.c -- one node of the membership-view scenarios (partition-*.sh,
 * stop-rejoin.sh, busy-host.sh, host-pause.sh, duplicate-id.sh, leave-unheard.sh start several, each with
 * LOCO_ADDR, LOCO_NODE_ID, LOCO_JOIN and LOCO_NODES set).
 *
 *   view-node DIR           run barrier rounds until DIR/stop or DIR/leave.ID exists
 *   view-node DIR --dup     join, and expect to be refused (-EEXIST)
 *   view-node --now         print CLOCK_MONOTONIC in ns (the drivers' clock)
 *
 * A node joins channel "v" (LOCO_NODES nodes), makes barrier "b", then
 * loops: loco_barrier_wait(b, 100 ms). Every 50 ms it rewrites DIR/state.ID
 * (atomically, by rename) with what the drivers check, one key=value a line:
 *   view, members (ids, comma-separated), inc, partitioned,
 *   rounds (barrier waits passed), solo (passed with no peer in "v": a
 *   singleton cluster), epart (waits that returned -LOCO_EPARTITION),
 *   epart_ns (CLOCK_MONOTONIC of the first), excluded, rejoined (events),
 *   rejoin_ns (the last REJOINED event), rounds_rejoin (passed after it),
 *   views (VIEW events).
 * Any other error of a wait fails the node, unless DIR/stop exists (a
 * peer that stopped first destroyed its barrier: -EACCES). It exits 0
 * when DIR/stop appears, or DIR/leave.ID for node ID alone (it leaves with
 * loco_fini() as on DIR/stop; the others go on); the alarm (120 s) bounds it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/barrier.h>

#include "scenario.h"
#include "view-lock.h"

static unsigned n_excluded, n_rejoined, n_views; /* atomic: written by the event function */
static int64_t rejoin_ns;                        /* atomic */

static void on_event(loco_manager_t *m, const loco_event_t *ev, void *arg)
{
	(void)arg;
	switch (ev->type) {
	case LOCO_EVENT_VIEW:
		__atomic_add_fetch(&n_views, 1, __ATOMIC_RELAXED);
		break;
	case LOCO_EVENT_EXCLUDED:
		__atomic_add_fetch(&n_excluded, 1, __ATOMIC_RELAXED);
		sc_log("excluded: view %" PRIu64 " has %u member(s) without us", ev->view,
		       ev->nmembers);
		break;
	case LOCO_EVENT_REJOINED:
		__atomic_store_n(&rejoin_ns, sc_now_ns(), __ATOMIC_RELAXED);
		__atomic_add_fetch(&n_rejoined, 1, __ATOMIC_RELAXED);
		sc_log("rejoined in view %" PRIu64 " as incarnation %" PRIx64, ev->view,
		       ev->incarnation);
		break;
	case LOCO_EVENT_PARTITIONED:
		sc_log("partitioned in view %" PRIu64, ev->view);
		break;
	}
	(void)m;
}

static int exists(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

struct stats {
	uint64_t rounds, solo, epart, rounds_rejoin;
	int64_t epart_ns;
};

static void write_state(const char *dir, loco_manager_t *m, const struct stats *st)
{
	char tmp[4096], path[4096], ids_s[512];
	uint32_t ids[SC_MAX_NODES];
	int n = sc_members(m, ids), off = 0;
	FILE *f;

	ids_s[0] = '\0';
	for (int i = 0; i < n && off < (int)sizeof(ids_s) - 12; i++)
		off += snprintf(ids_s + off, sizeof(ids_s) - (size_t)off, "%s%u", i ? "," : "",
		                ids[i]);
	snprintf(tmp, sizeof(tmp), "%s/.state.%u", dir, loco_manager_node_id(m));
	snprintf(path, sizeof(path), "%s/state.%u", dir, loco_manager_node_id(m));
	f = fopen(tmp, "w");
	if (f == NULL)
		SC_FAIL("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f,
	        "view=%" PRIu64 "\nmembers=%s\ninc=%" PRIx64 "\npartitioned=%d\nrounds=%" PRIu64
	        "\nsolo=%" PRIu64 "\nepart=%" PRIu64 "\nepart_ns=%" PRId64 "\nexcluded=%u\n"
	        "rejoined=%u\nrejoin_ns=%" PRId64 "\nrounds_rejoin=%" PRIu64 "\nviews=%u\n",
	        loco_manager_view(m), ids_s, loco_manager_incarnation(m),
	        loco_manager_partitioned(m), st->rounds, st->solo, st->epart, st->epart_ns,
	        __atomic_load_n(&n_excluded, __ATOMIC_RELAXED),
	        __atomic_load_n(&n_rejoined, __ATOMIC_RELAXED),
	        __atomic_load_n(&rejoin_ns, __ATOMIC_RELAXED), st->rounds_rejoin,
	        __atomic_load_n(&n_views, __ATOMIC_RELAXED));
	fclose(f);
	if (rename(tmp, path) != 0)
		SC_FAIL("cannot rename %s: %s", tmp, strerror(errno));
}

/* dup_main -- a second process with a live member's id: loco_init() must refuse it. */
static int dup_main(void)
{
	loco_manager_t *m;
	int ret = loco_init(NULL, &m);

	if (ret == -EEXIST) {
		sc_log("refused as expected: %s", loco_strerror(ret));
		return SC_EXIT_PASS;
	}
	if (ret == 0) {
		sc_log("FAIL: a second node %u was admitted (view %" PRIu64 ")",
		       loco_manager_node_id(m), loco_manager_view(m));
		loco_fini(m);
		return SC_EXIT_FAIL;
	}
	sc_log("FAIL: loco_init returned %d (%s), expected -EEXIST", ret, loco_strerror(ret));
	return SC_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	struct stats st = {0};
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	struct vlock vl = {0};
	const char *dir, *want_lock = getenv("VIEW_LOCK");
	int with_lock = want_lock != NULL && strcmp(want_lock, "1") == 0;
	int64_t next_write = 0;
	uint32_t me;
	char leave[32];
	unsigned seen_rejoin = 0;

	if (argc > 1 && strcmp(argv[1], "--now") == 0) {
		printf("%" PRId64 "\n", sc_now_ns());
		return 0;
	}
	/* busy-host.sh runs for longer than the usual 120 s (VIEW_ALARM_S) */
	sc_init("view-node", argc, argv,
	        getenv("VIEW_ALARM_S") ? (unsigned)atoi(getenv("VIEW_ALARM_S")) : 120);
	if (argc < 2)
		SC_FAIL("usage: view-node DIR [--dup] (run by a driver)");
	dir = argv[1];
	if (argc > 2 && strcmp(argv[2], "--dup") == 0)
		return dup_main();
	m = sc_start();
	me = loco_manager_node_id(m);
	SC_ASSERT_OK(loco_manager_set_event_fn(m, on_event, NULL));
	SC_ASSERT_OK(loco_channel_create(m, NULL, "v", sc_nodes(), &ch));
	SC_ASSERT_OK(loco_barrier_create(ch, "b", &b));
	if (with_lock)
		SC_ASSERT_OK(vlock_create(&vl, ch));
	SC_ASSERT_OK(loco_channel_join(ch, 30 * SC_NS));
	if (with_lock)
		SC_ASSERT_OK(vlock_start(&vl, dir, me));
	sc_log("node %u in view %" PRIu64 ", channel v paired", me, loco_manager_view(m));
	snprintf(leave, sizeof(leave), "leave.%u", me);
	while (!exists(dir, "stop") && !exists(dir, leave)) {
		/*
		 * Alone: no peer when the wait began nor when it ended. A round
		 * that began with peers passed with their rows, even if an
		 * exclusion took them right after it (seen under ASan).
		 */
		int peers_before = loco_channel_peers(ch, NULL, 0);
		int ret = loco_barrier_wait(b, 100000000);
		int64_t now = sc_now_ns();

		if (ret == 0) {
			st.rounds++;
			if (peers_before == 0 && loco_channel_peers(ch, NULL, 0) == 0 &&
			    sc_nodes() > 1)
				st.solo++;
			if (__atomic_load_n(&n_rejoined, __ATOMIC_RELAXED) > 0)
				st.rounds_rejoin++;
		} else if (ret == -LOCO_EPARTITION) {
			if (st.epart == 0) {
				st.epart_ns = now;
				sc_log("barrier: -LOCO_EPARTITION after %" PRIu64 " round(s)",
				       st.rounds);
			}
			st.epart++;
			sc_sleep_ms(10);
		} else if (ret != -ETIMEDOUT) {
			if (exists(dir, "stop"))
				break; /* peers that stopped first destroyed their rows: -EACCES */
			SC_FAIL("loco_barrier_wait: %d (%s)", ret, loco_strerror(ret));
		}
		if (__atomic_load_n(&n_rejoined, __ATOMIC_RELAXED) != seen_rejoin) {
			seen_rejoin = __atomic_load_n(&n_rejoined, __ATOMIC_RELAXED);
			st.rounds_rejoin = 0;
		}
		if (now >= next_write) {
			write_state(dir, m, &st);
			next_write = now + 50000000;
		}
	}
	write_state(dir, m, &st);
	sc_log("stopping: %" PRIu64 " round(s), %" PRIu64 " -LOCO_EPARTITION, %u exclusion(s)",
	       st.rounds, st.epart, __atomic_load_n(&n_excluded, __ATOMIC_RELAXED));
	if (with_lock) {
		vlock_stop(&vl);
		loco_lock_destroy(vl.lk);
	}
	loco_barrier_destroy(b);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	loco_fini(m);
	return SC_EXIT_PASS;
}
