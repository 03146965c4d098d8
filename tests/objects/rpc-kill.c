/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-kill.c -- a callee is SIGKILLed mid-storm: its callers' calls fail
 * with -ECONNRESET within the failure bound (no hang), the other members
 * go on calling each other, and a call to a name nobody registered gets
 * an error reply (-ENOENT), not a crash.
 *
 * loco-run -n 3. Node 1 spawns node 9 (this program, role "victim");
 * members 1, 2, 3 and 9 share endpoint "k" in channel "rk". Node 9 serves
 * "echo" and calls node 2's "echo" one-way all the time (calls from a node
 * that dies must be dropped cleanly there). Node 2 calls node 9 with
 * call_return in a loop and checks every result; once it has passed MID
 * calls it says so and node 1 SIGKILLs node 9 and publishes the kill
 * time. Node 2's next failing call must fail with -ECONNRESET within 2
 * failure bounds + 1 s of the kill (as rpipe-kill: the view removes the
 * node after about one bound), and the calls after it at once. Node 3
 * meanwhile posts tickets to node 9 and waits for them: each ends in 0 or
 * -ECONNRESET. Then node 2 makes AFTER call_returns to node 3 (all
 * answered right), and calls "nosuch" on node 3: status -ENOENT.
 *
 * Then node 9 comes back: node 1 starts it again with the same id (a new
 * incarnation, role "again"). Node 2's calls to it fail with -ECONNRESET
 * until the endpoint saw it pair again, then AGAIN call_returns all
 * answer right, and node 9 makes AGAIN call_returns to node 2 (the pipes
 * both ways started again: loco_rpipe_reset()).
 *
 * Then node 9 is excluded and taken back: node 1 SIGSTOPs it until the
 * view drops it and resumes it; it rejoins as a new incarnation of the
 * same process (its endpoint saw every peer leave and come back), makes
 * AGAIN call_returns to node 2 once it is in again, and node 2 makes
 * AGAIN to it: calls fail (-ECONNRESET, -LOCO_EPARTITION) only until the
 * first one that works, and every result is right.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loco/rpc.h>

#include "scenario.h"

#define VICTIM       9
#define MID          2000u
#define AFTER        1000u
#define TMO          (30 * SC_NS)
#define SLACK_MS     1000
#define BOX_MID      1 /* node 2 passed MID calls */
#define BOX_T        2 /* node 1's kill time */
#define BOX_DONE     3 /* node 2 finished */
#define BOX_BACK     4 /* node 9 is back */
#define BOX_DONE2    5 /* node 2 made its calls to the new node 9 */
#define BOX_CALLED   6 /* the new node 9 made its calls to node 2 */
#define BOX_REJOINED 7 /* node 9, excluded and taken back, made its calls to node 2 */
#define BOX_DONE3    8 /* node 2 made its calls to node 9 after that */
#define AGAIN        500u

static const uint32_t members[] = {1, 2, 3, VICTIM};

static int echo(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl)
{
	uint64_t v = 0;

	(void)arg;
	if (msg->len == sizeof(v))
		memcpy(&v, msg->data, sizeof(v));
	v = v * 2 + 1;
	if (cap >= sizeof(v)) {
		memcpy(ret, &v, sizeof(v));
		*rl = sizeof(v);
	}
	return 0;
}

static loco_rpc_ep_t *make_ep(loco_manager_t *m, loco_channel_t **ch)
{
	loco_rpc_cfg_t cfg;
	loco_rpc_ep_t *ep;

	(void)m;
	loco_rpc_cfg_default(&cfg, members, 4);
	cfg.pull_bytes = 64u * 1024;
	SC_ASSERT_OK(loco_rpc_create(*ch, "k", &cfg, &ep));
	SC_ASSERT_OK(loco_rpc_register(ep, "echo", echo, NULL, NULL));
	return ep;
}

/* node9_start -- node 9 (either life): joins channel "rk" and endpoint "k" with the others */
static loco_rpc_ep_t *node9_start(loco_manager_t **m)
{
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;

	*m = sc_start();
	SC_ASSERT_OK(loco_channel_create(*m, NULL, "rk", 4, &ch));
	ep = make_ep(*m, &ch);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	return ep;
}

/* victim_main -- node 9: serves, and calls node 2 one-way, until SIGKILLed */
static noreturn void victim_main(void)
{
	loco_manager_t *m;
	loco_rpc_ep_t *ep = node9_start(&m);
	uint64_t k = 0;

	sc_log("node 9 serves (pid %d)", (int)getpid());
	sc_report("ready");
	for (;; k++) {
		int ret = loco_rpc_call(ep, 2, loco_rpc_id("echo"), &k, sizeof(k), TMO);

		if (ret)
			SC_FAIL("victim: call %llu: %s", (unsigned long long)k, loco_strerror(ret));
		(void)loco_rpc_progress(ep, 64);
	}
}

/*
 * calls_to -- AGAIN checked call_returns to @node, after the calls that fail
 * until it paired here again (-ECONNRESET; -LOCO_EPARTITION while this node
 * rejoins), for SC_WAIT_MS at most. Returns how many failed first.
 */
static uint64_t calls_to(loco_rpc_ep_t *ep, uint32_t node)
{
	int64_t dl = sc_now_ms() + SC_WAIT_MS;
	uint64_t early = 0, r = 0;

	for (uint64_t k = 0; k < AGAIN;) {
		int ret = loco_rpc_call_return(ep, node, loco_rpc_id("echo"), &k, sizeof(k), &r,
		                               sizeof(r), NULL, TMO);

		if (ret == 0) {
			SC_ASSERT_EQ(r, k * 2 + 1);
			k++;
			continue;
		}
		if (k > 0 || (ret != -ECONNRESET && ret != -LOCO_EPARTITION) || sc_now_ms() > dl)
			SC_FAIL("call %llu to node %u: %s", (unsigned long long)k, node,
			        loco_strerror(ret));
		early++;
		(void)loco_rpc_progress(ep, 64);
		sc_sleep_ms(1);
	}
	return early;
}

/*
 * again_main -- node 9 restarted: AGAIN call_returns to node 2, then serve;
 * once excluded and taken back (a new incarnation), AGAIN more; serve until
 * SIGKILLed
 */
static noreturn void again_main(void)
{
	loco_manager_t *m;
	loco_rpc_ep_t *ep = node9_start(&m);
	uint64_t r = 0;

	sc_log("node 9 is back (incarnation %llx)",
	       (unsigned long long)loco_manager_incarnation(m));
	sc_report("ready");
	for (uint64_t k = 0; k < AGAIN; k++) {
		int ret = loco_rpc_call_return(ep, 2, loco_rpc_id("echo"), &k, sizeof(k), &r,
		                               sizeof(r), NULL, TMO);

		if (ret)
			SC_FAIL("again: call %llu to node 2: %s", (unsigned long long)k,
			        loco_strerror(ret));
		SC_ASSERT_EQ(r, k * 2 + 1);
	}
	sc_report("called");
	for (uint64_t inc = loco_manager_incarnation(m);;) {
		if (loco_rpc_progress(ep, 64) <= 0)
			sc_sleep_ms(1);
		if (inc != 0 && loco_manager_incarnation(m) != inc) {
			uint64_t early = calls_to(ep, 2);

			sc_log("node 9 rejoined (incarnation %llx): %u calls to node 2 answered, "
			       "%llu failed first",
			       (unsigned long long)loco_manager_incarnation(m), AGAIN,
			       (unsigned long long)early);
			sc_report("called again");
			inc = 0;
		}
	}
}

/* serve -- run calls until mailbox @box is set */
static void serve(loco_rpc_ep_t *ep, struct sc_sync *sync, unsigned box)
{
	int64_t dl = sc_now_ms() + 60000;

	while (sc_sync_get(sync, box) == 0) {
		if (sc_now_ms() > dl)
			SC_FAIL("mailbox %u not set in 60 s", box);
		if (loco_rpc_progress(ep, 64) <= 0)
			sc_sleep_ms(1);
	}
}

int main(int argc, char **argv)
{
	static const uint32_t base[] = {1, 2, 3};
	uint32_t echo_id = loco_rpc_id("echo");
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_rpc_ep_t *ep;
	loco_rpc_stats_t st;
	struct sc_sync sync;
	char line[64];
	uint32_t me, ft;
	uint64_t k = 0, r = 0;
	int64_t t_kill, t_err;
	pid_t pid = 0;
	int report = -1, ret, status;
	double ms;

	sc_init("rpc-kill", argc, argv, 100);
	if (argc > 1 && strcmp(argv[1], "victim") == 0)
		victim_main();
	if (argc > 1 && strcmp(argv[1], "again") == 0)
		again_main();
	if (sc_nodes() != 3)
		SC_FAIL("run with loco-run -n 3 (LOCO_NODES=%u)", sc_nodes());
	m = sc_start();
	me = loco_manager_node_id(m);
	ft = sc_fail_timeout();
	SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "members {1, 2, 3}");
	sc_sync_open(&sync, m, 3);
	sc_sync_wait(&sync, "started", SC_WAIT_MS);

	SC_ASSERT_OK(loco_channel_create(m, NULL, "rk", 4, &ch));
	ep = make_ep(m, &ch);
	if (me == 1)
		pid = sc_spawn_node(m, "victim", VICTIM, &report);
	SC_ASSERT_OK(loco_channel_join(ch, 20 * SC_NS));
	if (me == 1) {
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		close(report);
	}
	SC_ASSERT_OK(loco_rpc_sync(ep, 20 * SC_NS));
	sc_sync_wait(&sync, "joined", SC_WAIT_MS);

	if (me == 1) {
		int64_t dl = sc_now_ms() + SC_WAIT_MS;

		while (sc_sync_get(&sync, BOX_MID) == 0) {
			if (sc_now_ms() > dl)
				SC_FAIL("node 2 did not reach mid-storm");
			if (loco_rpc_progress(ep, 64) <= 0)
				sc_sleep_ms(1);
		}
		t_kill = sc_now_ns();
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
		sc_sync_put(&sync, BOX_T, (uint64_t)t_kill);
		sc_log("killed node %u", VICTIM);
		serve(ep, &sync, BOX_DONE);
	} else if (me == 2) {
		for (;; k++) {
			ret = loco_rpc_call_return(ep, VICTIM, echo_id, &k, sizeof(k), &r,
			                           sizeof(r), NULL, TMO);
			if (ret)
				break;
			SC_ASSERT_EQ(r, k * 2 + 1);
			if (k == MID)
				sc_sync_put(&sync, BOX_MID, 1);
		}
		t_err = sc_now_ns();
		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_T) != 0, SC_WAIT_MS, "node 1's kill time");
		t_kill = (int64_t)sc_sync_get(&sync, BOX_T);
		if (t_err < t_kill)
			SC_FAIL("call %llu failed before the kill: %s", (unsigned long long)k,
			        loco_strerror(ret));
		ms = (double)(t_err - t_kill) / 1e6;
		sc_log("call_return %llu to node %u: %s, %.1f ms after the kill",
		       (unsigned long long)k, VICTIM, loco_strerror(ret), ms);
		SC_ASSERT_EQ(ret, -ECONNRESET);
		if (ms > 2.0 * ft + SLACK_MS)
			SC_FAIL("the error came %.1f ms after the kill: over %u ms", ms,
			        2 * ft + SLACK_MS);
		SC_ASSERT_EQ(loco_rpc_call(ep, VICTIM, echo_id, &k, sizeof(k), TMO), -ECONNRESET);
		SC_ASSERT_EQ(loco_rpc_call_return(ep, VICTIM, echo_id, &k, sizeof(k), &r, sizeof(r),
		                                  NULL, TMO),
		             -ECONNRESET);
		/* the others go on */
		for (uint64_t i = 0; i < AFTER; i++) {
			SC_ASSERT_OK(loco_rpc_call_return(ep, 3, echo_id, &i, sizeof(i), &r,
			                                  sizeof(r), NULL, TMO));
			SC_ASSERT_EQ(r, i * 2 + 1);
		}
		/* an unknown name: an error reply */
		{
			loco_rpc_ticket_t t;
			size_t rl = 99;

			SC_ASSERT_OK(loco_rpc_call_return(ep, 3, loco_rpc_id("nosuch"), &k,
			                                  sizeof(k), &r, sizeof(r), &t, TMO));
			SC_ASSERT_OK(loco_rpc_wait(ep, &t, &status, &rl, TMO));
			SC_ASSERT_EQ(status, -ENOENT);
			SC_ASSERT_EQ(rl, 0);
			SC_ASSERT_EQ(loco_rpc_call_return(ep, 3, loco_rpc_id("nosuch"), &k,
			                                  sizeof(k), &r, sizeof(r), NULL, TMO),
			             -ENOENT);
		}
		sc_log("after the kill: %u call_returns to node 3 answered, unknown name: -ENOENT",
		       AFTER);
		sc_sync_put(&sync, BOX_DONE, 1);
	} else {
		/* node 3: tickets to node 9 until node 2 is done; each ends in 0 or -ECONNRESET */
		uint64_t ok = 0, reset = 0;
		int64_t dl = sc_now_ms() + 60000;

		while (sc_sync_get(&sync, BOX_DONE) == 0) {
			loco_rpc_ticket_t t;

			if (sc_now_ms() > dl)
				SC_FAIL("node 2 not done in 60 s");
			ret = loco_rpc_call_return(ep, VICTIM, echo_id, &k, sizeof(k), &r,
			                           sizeof(r), &t, TMO);
			if (ret == 0)
				ret = loco_rpc_wait(ep, &t, &status, NULL, TMO);
			if (ret == 0) {
				SC_ASSERT_EQ(r, k * 2 + 1);
				ok++;
			} else if (ret == -ECONNRESET) {
				reset++;
				(void)loco_rpc_progress(ep, 64);
				sc_sleep_ms(1);
			} else {
				SC_FAIL("call to node 9: %s", loco_strerror(ret));
			}
			k++;
		}
		sc_log("node 3: %llu calls to node 9 answered, %llu failed with ECONNRESET",
		       (unsigned long long)ok, (unsigned long long)reset);
		SC_ASSERT(reset > 0);
	}
	loco_rpc_stats(ep, &st);
	sc_log("stats: sent %llu, ran %llu, unknown %llu, dropped %llu, replies %llu",
	       (unsigned long long)st.calls, (unsigned long long)st.handled,
	       (unsigned long long)st.unknown, (unsigned long long)st.dropped,
	       (unsigned long long)st.replies);
	if (me == 3)
		SC_ASSERT_EQ(st.unknown, 2);
	sc_sync_wait(&sync, "done", 60000);

	/* node 9 comes back with its id */
	if (me == 1) {
		pid = sc_spawn_node(m, "again", VICTIM, &report);
		sc_read_line(report, line, sizeof(line), SC_WAIT_MS);
		SC_ASSERT(strcmp(line, "ready") == 0);
		sc_sync_put(&sync, BOX_BACK, 1);
		sc_read_line(report, line, sizeof(line), 60000);
		SC_ASSERT(strcmp(line, "called") == 0);
		sc_sync_put(&sync, BOX_CALLED, 1);
		serve(ep, &sync, BOX_DONE2);
		/* excluded and taken back: stopped until the view drops it, then resumed */
		SC_ASSERT_EQ(kill(pid, SIGSTOP), 0);
		SC_WAIT_UNTIL(sc_members_are(m, base, 3), SC_WAIT_MS, "node 9 excluded");
		SC_ASSERT_EQ(kill(pid, SIGCONT), 0);
		sc_log("node 9 was excluded while stopped; resumed");
		sc_read_line(report, line, sizeof(line), 60000);
		SC_ASSERT(strcmp(line, "called again") == 0);
		close(report);
		sc_sync_put(&sync, BOX_REJOINED, 1);
		serve(ep, &sync, BOX_DONE3);
		SC_ASSERT_EQ(sc_kill(pid), 128 + 9);
	} else if (me == 2) {
		uint64_t early = 0;
		int64_t dl;

		SC_WAIT_UNTIL(sc_sync_get(&sync, BOX_BACK) != 0, SC_WAIT_MS, "node 9 back");
		/* node 9 paired with us, maybe not yet we with it: -ECONNRESET for a while */
		dl = sc_now_ms() + SC_WAIT_MS;
		while ((ret = loco_rpc_call_return(ep, VICTIM, echo_id, &k, sizeof(k), &r,
		                                   sizeof(r), NULL, TMO)) == -ECONNRESET) {
			if (sc_now_ms() > dl)
				SC_FAIL("calls to the new node 9 still fail after %d ms",
				        SC_WAIT_MS);
			early++;
			(void)loco_rpc_progress(ep, 64);
			sc_sleep_ms(1);
		}
		SC_ASSERT_OK(ret);
		SC_ASSERT_EQ(r, k * 2 + 1);
		for (uint64_t i = 0; i < AGAIN; i++) {
			SC_ASSERT_OK(loco_rpc_call_return(ep, VICTIM, echo_id, &i, sizeof(i), &r,
			                                  sizeof(r), NULL, TMO));
			SC_ASSERT_EQ(r, i * 2 + 1);
		}
		sc_log("the new node 9 answered %u call_returns (%llu calls before it paired "
		       "here failed)",
		       AGAIN + 1, (unsigned long long)early);
		sc_sync_put(&sync, BOX_DONE2, 1);
		serve(ep, &sync, BOX_CALLED);   /* node 9's calls to us */
		serve(ep, &sync, BOX_REJOINED); /* and those after its rejoin */
		early = calls_to(ep, VICTIM);
		sc_log("node 9, taken back, answered %u call_returns (%llu failed first)", AGAIN,
		       (unsigned long long)early);
		sc_sync_put(&sync, BOX_DONE3, 1);
	} else {
		serve(ep, &sync, BOX_DONE2);
		serve(ep, &sync, BOX_DONE3);
	}
	sc_sync_wait(&sync, "done again", 90000);
	loco_rpc_destroy(ep);
	SC_ASSERT_OK(loco_channel_destroy(ch));
	sc_sync_close(&sync);
	loco_fini(m);
	return SC_EXIT_PASS;
}
