/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sim-membership.c -- the membership state machine (liboco/membership/ms.h)
 * under a deterministic simulator (issue 30; docs/membership.md).
 *
 * One process, one thread, no clock, no sockets: 3 to 9 nodes, each a
 * machine plus a small driver that plays member.c's part (control
 * connections made by dials and checked by admission, heartbeats every
 * quarter bound, silent connections dropped, strays dropped). A seed
 * fixes everything: the node count, the network (delay, jitter, loss,
 * reordering: every message gets its own delay), and a schedule of
 * faults during the first FAULT_F failure bounds: partitions (a split in
 * two, or one node cut off), pauses of one node (SIGSTOP: its inputs wait,
 * its clock runs on), pauses of every node at once (a VM stopped), late
 * ticks (a busy host: inputs that come while the thread waits for a CPU
 * wait with it), clock jumps, crashes, restarts with the same id
 * (a new incarnation, joining through a live node), graceful leaves.
 * Then the network heals and the faults stop.
 *
 * Checked after every step:
 *   1. at most one view per view number (same members, same incarnations);
 *   2. a node that acts (NORMAL, lc_ms_partitioned() == ACT right after a
 *      tick) received a message, by the simulator's own record, from a
 *      majority of its view within the bound the machine claims for each,
 *      or installed a view with them since: no minority acts on old news,
 *      whatever its clock or its pauses;
 *   3. the protected node (one per seed that no fault touches, whose links
 *      lose nothing and are never slow) is never excluded;
 *   5. a node excluded within 4 bounds after a pause of a bound or more
 *      says in its log line that its own thread ran late (what a user sees
 *      when a busy host got a live node dropped);
 *   6. with --busy (no faults, no loss; every node's thread runs up to
 *      300-900 ms late from its start on, and its inputs wait for it), no
 *      node in a view stops acting (LC_MS_PART): nobody was cut off, so a
 *      partition would be the busy host's silence taken for the network's
 *      (five ASan nodes joining on two cores: a join failed with
 *      -LOCO_EPARTITION, every member in reach);
 * and at the end:
 *   4. within CONVERGE_F bounds after the faults stop, every live node is
 *      in one view made of exactly the live nodes, and acts.
 *
 * A failing seed prints the command that replays it exactly (add
 * --verbose for the machines' logs and the simulator's trace).
 *
 *   sim-membership [--seeds N] [--first S] [--seed S] [--busy] [--verbose]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loco/manager.h>

#include "membership/ms_impl.h" /* the failure report shows what the machine holds */

#define MAXN       9
#define F          ((uint64_t)1000000000) /* the failure bound's floor, 1 s of simulated time */
#define MS         ((uint64_t)1000000)
#define FAULT_F    30 /* failure bounds of faults */
#define CONVERGE_F 40 /* bounds after the faults, at most, for every live node to agree */
#define QMAX       65536
#define MAXVIEWS   4096

/* ---- random numbers: one stream per seed (splitmix64) ---- */

static uint64_t rng;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n == 0 ? 0 : rnd() % n;
}

static int chance(unsigned per_mille)
{
	return below(1000) < per_mille;
}

/* ---- the world ---- */

struct smsg { /* a message in flight, compact: the simulated views are small */
	uint64_t at, seq;
	uint32_t from, to;
	uint64_t from_inc, to_inc; /* the connection's two ends */
	int type;                  /* LC_MSG_VC, LC_MSG_LEAVE, or 0: the connection closes */
	uint32_t kind, node, n, flag;
	uint64_t view, ballot, abal, inc;
	struct lc_member_info m[MAXN];
};

struct conn { /* a control connection as one end sees it */
	int up;
	uint64_t peer_inc, last_rx;
	int joiner;
	uint64_t since;
};

struct snode {
	uint32_t id;
	int alive;    /* a process runs */
	uint64_t inc; /* its incarnation */
	struct lc_ms *ms;
	uint64_t skew;         /* its clock minus the simulator's (jumps only forward) */
	uint64_t paused_until; /* SIGSTOPped until then (simulated time) */
	uint64_t paused_len;   /* ... for this long */
	uint64_t late_until;   /* a busy host: its ticks come up to late_max late until then */
	uint64_t late_max;
	uint64_t next_tick, next_hb, wake;
	uint64_t stall_from; /* busy: its thread wanted to run from then, runs at next_tick */
	struct conn c[MAXN + 1];
	uint64_t dial_at[MAXN + 1]; /* a dial to that node completes then (0: none) */
	uint64_t join_dial_at;      /* a join dial completes then */
	uint32_t join_to;           /* ... to this node */
	uint64_t join_start;        /* when it began to join (0: not joining) */
	/* node time of the last message from each node, as it came, for its last 4 incarnations */
	uint64_t rx[MAXN + 1][4];
	uint64_t rx_inc[MAXN + 1][4];
	int leaving; /* loco_fini() under way */
	uint64_t leave_start;
	uint64_t restart_at; /* crashed or left: starts again then (0: never) */
	int excluded_events;
};

static struct snode nodes[MAXN + 1];
static uint32_t nn, protected_node;
static uint64_t now_sim, seq, seed_cur;
static int verbose, busy_mode;
static unsigned loss_pm, jitter_ms, base_us;
static unsigned hinted;             /* exclusions after a pause that named it (check 5) */
static int cut[MAXN + 1][MAXN + 1]; /* partitioned pair */
static struct smsg *q;
static uint32_t nq;
static char failure[512];

static struct {
	uint64_t id;
	uint32_t n;
	uint32_t node[MAXN];
	uint64_t inc[MAXN];
	uint64_t at; /* simulated time it was first installed */
} views[MAXVIEWS];
static uint32_t nviews;

static void rx_note(struct snode *s, uint32_t node, uint64_t inc);
static void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	printf("[%9.3f] ", (double)now_sim / 1e9);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	if (failure[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(failure, sizeof(failure), fmt, ap);
	va_end(ap);
}

static uint64_t node_now(const struct snode *s)
{
	return now_sim + s->skew;
}

static int paused(const struct snode *s)
{
	return s->paused_until > now_sim;
}

/* ---- the network ---- */

static void push(struct smsg *m)
{
	if (nq >= QMAX) {
		fail("simulator: message queue full");
		return;
	}
	m->seq = seq++;
	q[nq++] = *m;
}

/* deliver_time -- when a message sent now from @a to @b arrives (0: lost) */
static uint64_t deliver_time(uint32_t a, uint32_t b, int reliable)
{
	uint64_t d = base_us * 1000ull + below(1000);

	if (a == protected_node || b == protected_node)
		return now_sim + d + below(jitter_ms < 20 ? jitter_ms * MS + 1 : 20 * MS);
	if (!reliable && chance(loss_pm))
		return 0;
	d += below(jitter_ms * MS + 1);
	if (chance(5))
		d += below(300 * MS); /* a spike */
	return now_sim + d;
}

static void send_raw(struct snode *s, uint32_t to, int type, const struct lc_msg *msg)
{
	struct smsg m = {
	    .from = s->id, .to = to, .from_inc = s->inc, .to_inc = s->c[to].peer_inc, .type = type};
	uint64_t at = deliver_time(s->id, to, type == 0);

	if (at == 0 || cut[s->id][to])
		return;
	m.at = at;
	if (msg != NULL) {
		m.kind = msg->u.vc.kind;
		m.view = msg->u.vc.view;
		m.ballot = msg->u.vc.ballot;
		m.abal = msg->u.vc.abal;
		m.node = msg->u.vc.node;
		m.inc = msg->u.vc.inc;
		m.flag = msg->u.vc.flag;
		m.n = msg->u.vc.n;
		if (m.n > MAXN) {
			fail("node %u sent a VC message with %u members", s->id, m.n);
			return;
		}
		memcpy(m.m, msg->u.vc.m, m.n * sizeof(m.m[0]));
	}
	push(&m);
}

/* ---- a node's driver: the machine's effects ---- */

static void conn_close(struct snode *s, uint32_t peer, int tell)
{
	if (!s->c[peer].up)
		return;
	if (tell)
		send_raw(s, peer, 0, NULL); /* the other end sees it close (unless cut off) */
	s->c[peer] = (struct conn){0};
}

static void op_send(void *ctx, uint32_t node, struct lc_msg *msg)
{
	struct snode *s = ctx;

	if (node == 0 || node > nn || !s->c[node].up)
		return;
	send_raw(s, node, LC_MSG_VC, msg);
}

static uint32_t addr_node(const char *addr)
{
	unsigned id = 0;

	return sscanf(addr, "sim:%u", &id) == 1 ? id : 0;
}

static void op_dial(void *ctx, const struct lc_member_info *mi, int join)
{
	struct snode *s = ctx;
	uint32_t to = join ? addr_node(mi->ctrl_addr) : mi->node;

	if (to == 0 || to > nn || to == s->id)
		return;
	if (join) {
		s->join_to = to;
		s->join_dial_at = now_sim + 2 * MS + below(5 * MS);
	} else if (s->dial_at[to] == 0) {
		s->dial_at[to] = now_sim + 2 * MS + below(5 * MS);
	}
}

static void op_drop(void *ctx, const struct lc_member_info *mi, int left)
{
	struct snode *s = ctx;

	(void)left;
	if (mi->node <= nn && s->c[mi->node].peer_inc == mi->inc)
		conn_close(s, mi->node, 1);
}

static void view_record(struct snode *s, uint64_t id)
{
	struct lc_member_info list[MAXN + 2];
	uint32_t n = lc_ms_members(s->ms, list, MAXN + 2), k;

	for (k = 0; k < nviews; k++)
		if (views[k].id == id)
			break;
	if (k == nviews) {
		if (nviews >= MAXVIEWS) {
			fail("simulator: too many views");
			return;
		}
		views[k].id = id;
		views[k].n = n;
		views[k].at = now_sim;
		for (uint32_t i = 0; i < n && i < MAXN; i++) {
			views[k].node[i] = list[i].node;
			views[k].inc[i] = list[i].inc;
		}
		nviews++;
		/* 3. the protected node is in every view after the first one that had it */
		for (uint32_t v = 0; v < nviews; v++) {
			int had = 0, has = 0;

			for (uint32_t i = 0; i < views[v].n; i++)
				had |= views[v].node[i] == protected_node;
			for (uint32_t i = 0; i < n; i++)
				has |= list[i].node == protected_node;
			if (had && views[v].id < id && !has && nodes[protected_node].alive)
				fail("view %" PRIu64
				     " (installed by node %u) left out the protected node "
				     "%u",
				     id, s->id, protected_node);
		}
		trace("node %u installs view %" PRIu64 " (%u members)", s->id, id, n);
		return;
	}
	/* 1. one view per number */
	if (views[k].n != n) {
		fail("view %" PRIu64 ": node %u installed %u members, another %u", id, s->id, n,
		     views[k].n);
		return;
	}
	for (uint32_t i = 0; i < n && i < MAXN; i++)
		if (views[k].node[i] != list[i].node || views[k].inc[i] != list[i].inc)
			fail("view %" PRIu64 ": node %u installed another member list", id, s->id);
}

static void op_installed(void *ctx, uint64_t id, uint32_t n, int was)
{
	struct snode *s = ctx;

	struct lc_member_info list[MAXN + 2];
	uint32_t k = lc_ms_members(s->ms, list, MAXN + 2);

	(void)n;
	(void)was;
	s->join_start = 0;
	view_record(s, id);
	/* a view a majority just committed is news from all its members (so says the machine) */
	for (uint32_t i = 0; i < k; i++)
		if (list[i].node <= nn)
			rx_note(s, list[i].node, list[i].inc);
}

static void op_excluded(void *ctx, uint64_t id, uint64_t inc)
{
	struct snode *s = ctx;

	trace("node %u excluded by view %" PRIu64 "; incarnation %" PRIx64, s->id, id, inc);
	s->excluded_events++;
	if (s->id == protected_node)
		fail("the protected node %u was excluded (view %" PRIu64 ")", s->id, id);
	for (uint32_t j = 1; j <= nn; j++)
		conn_close(s, j, 1);
	s->inc = inc;
	s->join_start = now_sim;
}

static void op_event(void *ctx, int type, uint64_t view, uint32_t n)
{
	(void)ctx;
	(void)type;
	(void)view;
	(void)n;
}

static void op_join_done(void *ctx, int ret)
{
	struct snode *s = ctx;

	trace("node %u: join through node %u failed (%d)", s->id, s->join_to, ret);
}

static void op_mark_joiner(void *ctx, uint32_t node)
{
	struct snode *s = ctx;

	if (node <= nn && s->c[node].up) {
		s->c[node].joiner = 1;
		s->c[node].since = node_now(s);
	}
}

static void op_part(void *ctx, int part)
{
	struct snode *s = ctx;

	/*
	 * 6. (--busy) every node runs, every link holds, nothing is lost: a
	 * node that stops acting in its view blames a silence nobody made
	 */
	if (busy_mode && part == LC_MS_PART && lc_ms_state(s->ms) == LC_VS_NORMAL)
		fail("node %u partitioned in view %" PRIu64
		     " on a busy host with every node up and every message delivered",
		     s->id, lc_ms_view(s->ms));
}

static void op_log(void *ctx, int level, const char *line)
{
	struct snode *s = ctx;

	(void)level;
	if (verbose)
		printf("[%9.3f] node %u: %s\n", (double)now_sim / 1e9, s->id, line);
	/* check 5: a node paused a bound or more, excluded soon after, says why */
	if (strstr(line, "manager: excluded:") != NULL && s->paused_len >= F &&
	    now_sim >= s->paused_until && now_sim - s->paused_until < 4 * F) {
		if (strstr(line, "ran up to") == NULL)
			fail(
			    "node %u, excluded %.3f s after a pause of %.3f s, does not say it ran "
			    "late: %s",
			    s->id, (double)(now_sim - s->paused_until) / 1e9,
			    (double)s->paused_len / 1e9, line);
		hinted++;
	}
}

static int op_connected(void *ctx, uint32_t node)
{
	struct snode *s = ctx;

	return node <= nn && s->c[node].up;
}

static int op_up(void *ctx, uint32_t node)
{
	return op_connected(ctx, node);
}

static int op_dialing(void *ctx, uint32_t node)
{
	struct snode *s = ctx;

	if (node == 0)
		return s->join_dial_at != 0;
	return node <= nn && s->dial_at[node] != 0;
}

static const struct lc_ms_ops ops = {
    .send = op_send,
    .dial = op_dial,
    .drop = op_drop,
    .installed = op_installed,
    .excluded = op_excluded,
    .event = op_event,
    .join_done = op_join_done,
    .mark_joiner = op_mark_joiner,
    .part = op_part,
    .log = op_log,
    .connected = op_connected,
    .up = op_up,
    .dialing = op_dialing,
};

/* ---- node life ---- */

/* rx_note -- @s received from (@node, @inc) now */
static void rx_note(struct snode *s, uint32_t node, uint64_t inc)
{
	unsigned k, old = 0;

	for (k = 0; k < 4; k++) {
		if (s->rx_inc[node][k] == inc)
			break;
		if (s->rx[node][k] < s->rx[node][old])
			old = k;
	}
	if (k == 4)
		k = old;
	s->rx_inc[node][k] = inc;
	s->rx[node][k] = node_now(s);
}

/* rx_of -- when @s last received from (@node, @inc), 0: never */
static uint64_t rx_of(const struct snode *s, uint32_t node, uint64_t inc)
{
	for (unsigned k = 0; k < 4; k++)
		if (s->rx_inc[node][k] == inc)
			return s->rx[node][k];
	return 0;
}

static void self_info(const struct snode *s, struct lc_member_info *mi)
{
	memset(mi, 0, sizeof(*mi));
	mi->node = s->id;
	mi->inc = s->inc;
	snprintf(mi->ctrl_addr, sizeof(mi->ctrl_addr), "sim:%u", s->id);
	snprintf(mi->fab_addr, sizeof(mi->fab_addr), "simfab:%u", s->id);
}

static uint32_t live_contact(uint32_t not )
{
	uint32_t pick[MAXN], k = 0;

	for (uint32_t j = 1; j <= nn; j++)
		if (j != not &&nodes[j].alive && lc_ms_state(nodes[j].ms) == LC_VS_NORMAL)
			pick[k++] = j;
	return k ? pick[below(k)] : 0;
}

static int node_start(struct snode *s, int alone)
{
	/* check 5 reads the WARN lines */
	struct lc_ms_cfg cfg = {.log_level = verbose ? LC_LOG_INFO : LC_LOG_WARN,
	                        .fail_ns = F,
	                        .join_ns = 30 * F,
	                        .rejoin = 1,
	                        .seed = rnd()};
	struct lc_member_info self;

	lc_ms_destroy(s->ms);
	memset(s->c, 0, sizeof(s->c));
	memset(s->dial_at, 0, sizeof(s->dial_at));
	memset(s->rx, 0, sizeof(s->rx));
	memset(s->rx_inc, 0, sizeof(s->rx_inc));
	s->inc = s->inc == 0 ? 1000 + s->id : s->inc + 100000; /* a restart: a larger one */
	self_info(s, &self);
	s->ms = lc_ms_create(&cfg, &self, &ops, s);
	if (s->ms == NULL)
		return -ENOMEM;
	s->alive = 1;
	s->leaving = 0;
	s->restart_at = 0;
	s->join_dial_at = 0;
	s->next_tick = s->next_hb = now_sim;
	s->stall_from = UINT64_MAX;
	if (alone) {
		lc_ms_start_alone(s->ms, node_now(s));
	} else {
		s->join_start = now_sim;
		s->join_to = 0;
	}
	trace("node %u starts%s, incarnation %" PRIx64, s->id, alone ? " alone" : "", s->inc);
	return 0;
}

static void node_crash(struct snode *s, uint64_t restart_in)
{
	trace("node %u crashes", s->id);
	for (uint32_t j = 1; j <= nn; j++)
		conn_close(s, j, 1); /* the kernel closes its sockets */
	s->alive = 0;
	s->paused_until = s->paused_len = 0;
	s->restart_at = restart_in ? now_sim + restart_in : 0;
}

/* conn_lost -- member_conn.c's conn_reap(): a member of the view is suspected, others dropped */
static void conn_lost(struct snode *s, uint32_t peer)
{
	uint64_t inc = s->c[peer].peer_inc;

	s->c[peer] = (struct conn){0};
	lc_ms_join_lost(s->ms, node_now(s), peer);
	if (lc_ms_in(s->ms, peer, inc) && lc_ms_state(s->ms) == LC_VS_NORMAL && !s->leaving)
		lc_ms_suspect(s->ms, node_now(s), peer);
}

/* connect -- a dial from @a reached @b: admission at @b, then both ends are up */
static void connect(struct snode *a, uint32_t b_id, int join)
{
	struct snode *b = &nodes[b_id];
	const char *why = NULL;
	int ret;

	if (!b->alive || cut[a->id][b_id] || paused(b)) {
		if (join) /* refused or unreachable: a later join tries another contact */
			a->join_start = a->join_start ? a->join_start : now_sim;
		return;
	}
	if (b->c[a->id].up && b->c[a->id].peer_inc == a->inc && a->c[b_id].up)
		return; /* already */
	ret = lc_ms_admit_check(b->ms, node_now(b), a->id, a->inc, &why);
	if (ret != 0) {
		trace("node %u refuses node %u: %s", b_id, a->id, why);
		return;
	}
	if (b->c[a->id].up)
		conn_lost(b, a->id); /* its older connection */
	b->c[a->id] = (struct conn){.up = 1, .peer_inc = a->inc, .last_rx = node_now(b)};
	a->c[b_id] = (struct conn){.up = 1, .peer_inc = b->inc, .last_rx = node_now(a)};
	lc_ms_admitted(b->ms, node_now(b), a->id, a->inc);
	if (join)
		lc_ms_joining(a->ms, node_now(a), b_id);
	lc_ms_admitted(a->ms, node_now(a), b_id, b->inc);
}

/* ---- the steps ---- */

/* 2. a node that acts heard a majority of its view within the bounds it claims */
static void check_acting(struct snode *s)
{
	struct lc_member_info list[MAXN + 2];
	uint32_t n, heard = 1;

	if (!s->alive || paused(s) || lc_ms_state(s->ms) != LC_VS_NORMAL ||
	    lc_ms_partitioned(s->ms) != LC_MS_ACT)
		return;
	n = lc_ms_members(s->ms, list, MAXN + 2);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = list[i].node;

		if (j == s->id || j > nn)
			continue;
		if (rx_of(s, j, list[i].inc) != 0 &&
		    node_now(s) - rx_of(s, j, list[i].inc) <= lc_ms_bound(s->ms, j))
			heard++;
	}
	/*
	 * ... and no newer view that leaves it out was installed long before:
	 * a node cut off stops acting within its members' bounds of its last
	 * news; one that was paused must not act on the old news waiting in
	 * its sockets when it resumes (lock leases count on this).
	 */
	for (uint32_t k = 0; k < nviews; k++) {
		uint64_t slack = F;
		int has = 0;

		if (views[k].id <= lc_ms_view(s->ms))
			continue;
		for (uint32_t i = 0; i < views[k].n; i++)
			has |= views[k].node[i] == s->id && views[k].inc[i] == s->inc;
		for (uint32_t i = 0; i < n; i++)
			if (list[i].node != s->id && lc_ms_bound(s->ms, list[i].node) > slack)
				slack = lc_ms_bound(s->ms, list[i].node);
		if (!has && now_sim - views[k].at > slack + F)
			fail("node %u acts in view %" PRIu64 " %.3f s after view %" PRIu64
			     " left it out",
			     s->id, lc_ms_view(s->ms), (double)(now_sim - views[k].at) / 1e9,
			     views[k].id);
	}
	if (heard < n / 2 + 1 && n > 1 && verbose)
		for (uint32_t i = 0; i < s->ms->n; i++)
			printf("  machine %u: member %u rx %.3f heard %.3f bound %.3f; simulator "
			       "rx %.3f\n",
			       s->id, s->ms->v[i].info.node, (double)s->ms->v[i].rx_ns / 1e9,
			       (double)s->ms->v[i].heard_ns / 1e9,
			       (double)lc_ms_bound(s->ms, s->ms->v[i].info.node) / 1e9,
			       (double)rx_of(s, s->ms->v[i].info.node, s->ms->v[i].info.inc) / 1e9);
	if (heard < n / 2 + 1 && n > 1)
		fail("node %u acts in view %" PRIu64 " having heard %u of %u members within their "
		     "bounds",
		     s->id, lc_ms_view(s->ms), heard, n);
}

static void deliver(struct smsg *m)
{
	struct snode *s = &nodes[m->to];
	struct lc_member_info from = {0};
	static struct lc_msg msg;
	struct conn *c = &s->c[m->from];

	if (!s->alive || !c->up || c->peer_inc != m->from_inc || s->inc != m->to_inc)
		return; /* the connection it came on is gone */
	c->last_rx = node_now(s);
	if (m->type == 0) {
		conn_lost(s, m->from);
		return;
	}
	rx_note(s, m->from, m->from_inc);
	lc_ms_heard(s->ms, node_now(s), m->from, m->from_inc);
	if (m->type == LC_MSG_LEAVE) {
		if (lc_ms_in(s->ms, m->from, m->from_inc))
			lc_ms_leave_rx(s->ms, node_now(s), m->from, m->from_inc);
		else
			conn_close(s, m->from, 0);
		return;
	}
	memset(&msg, 0, offsetof(struct lc_msg, u) + offsetof(__typeof__(msg.u.vc), m));
	msg.type = LC_MSG_VC;
	msg.u.vc.kind = m->kind;
	msg.u.vc.view = m->view;
	msg.u.vc.ballot = m->ballot;
	msg.u.vc.abal = m->abal;
	msg.u.vc.node = m->node;
	msg.u.vc.inc = m->inc;
	msg.u.vc.flag = m->flag;
	msg.u.vc.n = m->n;
	memcpy(msg.u.vc.m, m->m, m->n * sizeof(m->m[0]));
	from.node = m->from;
	from.inc = m->from_inc;
	snprintf(from.ctrl_addr, sizeof(from.ctrl_addr), "sim:%u", m->from);
	snprintf(from.fab_addr, sizeof(from.fab_addr), "simfab:%u", m->from);
	lc_ms_msg(s->ms, node_now(s), &from, c->joiner, &msg);
}

/* timers -- member_conn.c's lc_member_timers: heartbeats, silent connections, strays, the tick */
static void timers(struct snode *s)
{
	uint64_t now = node_now(s), t, late = lc_ms_late(s->ms);
	int unsure = lc_ms_partitioned(s->ms) == LC_MS_UNSURE;

	if (now_sim >= s->next_hb) {
		for (uint32_t j = 1; j <= nn; j++)
			if (s->c[j].up)
				send_raw(s, j, LC_MSG_VC, lc_ms_hb(s->ms));
		s->next_hb = now_sim + F / 4;
	}
	t = lc_ms_tick(s->ms, now);
	for (uint32_t j = 1; j <= nn; j++) {
		struct conn *c = &s->c[j];
		uint64_t bound = lc_ms_bound(s->ms, j);

		if (!c->up)
			continue;
		bound = (bound < F ? F : bound) + late;
		if (!unsure && now - c->last_rx > 2 * bound) {
			trace("node %u: connection to node %u silent", s->id, j);
			conn_close(s, j, 1);
			conn_lost(s, j);
			continue;
		}
		/* strays: a joiner waits up to the join timeout, others 2 bounds */
		if (lc_ms_state(s->ms) == LC_VS_NORMAL && !lc_ms_in(s->ms, j, c->peer_inc) &&
		    now - c->since > (c->joiner ? 30 * F : 2 * F) && c->since != 0) {
			conn_close(s, j, 1);
			continue;
		}
		if (c->since == 0)
			c->since = now;
	}
	/* joining: dial a live contact; a join that took too long tries another */
	if (s->join_start != 0 && lc_ms_state(s->ms) == LC_VS_JOINING && s->join_dial_at == 0 &&
	    (s->join_to == 0 || !s->c[s->join_to].up || now_sim - s->join_start > 5 * F)) {
		uint32_t to = live_contact(s->id);

		if (to != 0) {
			s->join_to = to;
			s->join_start = now_sim;
			s->join_dial_at = now_sim + 2 * MS + below(5 * MS);
		}
	}
	/* loco_fini() waits for a view without it, or gives up after LC_IO_TIMEOUT_MS */
	if (s->leaving && (lc_ms_left(s->ms) || now_sim - s->leave_start > 5 * F)) {
		trace("node %u left", s->id);
		node_crash(s, 0);
		s->restart_at = now_sim + F + below(3 * F);
		return;
	}
	s->wake = t - s->skew; /* simulated time */
	s->next_tick = s->wake < s->next_hb ? s->wake : s->next_hb;
	s->stall_from = UINT64_MAX;
	if (s->late_until > now_sim && s->late_max) {
		/* a busy host: the thread runs late, and inputs wait for it meanwhile */
		s->stall_from = s->next_tick;
		s->next_tick += below(s->late_max);
	}
}

/* ---- faults ---- */

/* settled -- every node runs, in a view: one more crash or leave keeps a majority alive */
static int settled(void)
{
	for (uint32_t j = 1; j <= nn; j++)
		if (!nodes[j].alive || nodes[j].leaving || lc_ms_state(nodes[j].ms) != LC_VS_NORMAL)
			return 0;
	return 1;
}

static void fault(void)
{
	uint32_t a = 1 + (uint32_t)below(nn), b;
	struct snode *s = &nodes[a];

	if (a == protected_node)
		return; /* no fault touches it */
	switch (below(9)) {
	case 0: /* cut one node off */
		trace("fault: node %u cut off", a);
		for (b = 1; b <= nn; b++)
			if (b != a && b != protected_node)
				cut[a][b] = cut[b][a] = 1;
		break;
	case 1: /* split in two (the protected node's side is never cut from it) */
		trace("fault: split");
		for (uint32_t x = 1; x <= nn; x++)
			for (uint32_t y = 1; y <= nn; y++)
				if (x != y && x != protected_node && y != protected_node &&
				    ((x + seed_cur) & 1) != ((y + seed_cur) & 1))
					cut[x][y] = 1;
		break;
	case 2: /* heal */
		trace("fault: heal");
		memset(cut, 0, sizeof(cut));
		break;
	case 3: /* SIGSTOP one node */
		if (s->alive) {
			s->paused_len = 300 * MS + below(6 * F);
			s->paused_until = now_sim + s->paused_len;
			trace("fault: node %u paused until %.3f", a, (double)s->paused_until / 1e9);
		}
		break;
	case 4: /* a clock jump */
		if (s->alive) {
			s->skew += 200 * MS + below(3 * F);
			trace("fault: node %u's clock jumps", a);
		}
		break;
	case 5: /* a busy host for this node */
		s->late_until = now_sim + 2 * F + below(8 * F);
		s->late_max = 50 * MS + below(600 * MS);
		trace("fault: node %u busy (ticks up to %" PRIu64 " ms late)", a,
		      (uint64_t)(s->late_max / MS));
		break;
	case 6: /* crash, restart later with the same id (one at a time: see settled()) */
		if (s->alive && settled())
			node_crash(s, 500 * MS + below(5 * F));
		break;
	case 7: /* graceful leave, back later */
		if (settled()) {
			trace("node %u leaves", a);
			s->leaving = 1;
			s->leave_start = now_sim;
			lc_ms_leave(s->ms, node_now(s));
			for (b = 1; b <= nn; b++)
				if (s->c[b].up)
					send_raw(s, b, LC_MSG_LEAVE, NULL);
		}
		break;
	case 8: /* the whole host pauses (every node but the protected one keeps time) */
		trace("fault: whole-host pause");
		for (b = 1; b <= nn; b++) {
			if (b != protected_node && nodes[b].alive) {
				nodes[b].paused_len = 300 * MS + below(4 * F);
				nodes[b].paused_until = now_sim + nodes[b].paused_len;
			}
		}
		break;
	}
}

/* ---- one seed ---- */

static int converged(void)
{
	uint64_t id = 0;
	uint32_t live = 0;

	for (uint32_t j = 1; j <= nn; j++) {
		struct snode *s = &nodes[j];

		if (!s->alive)
			continue;
		live++;
		if (lc_ms_state(s->ms) != LC_VS_NORMAL || lc_ms_partitioned(s->ms) != LC_MS_ACT)
			return 0;
		if (id == 0)
			id = lc_ms_view(s->ms);
		if (lc_ms_view(s->ms) != id)
			return 0;
	}
	for (uint32_t j = 1; j <= nn; j++) {
		struct lc_member_info list[MAXN + 2];
		uint32_t n;

		if (!nodes[j].alive)
			continue;
		n = lc_ms_members(nodes[j].ms, list, MAXN + 2);
		if (n != live)
			return 0;
		for (uint32_t i = 0; i < n; i++)
			if (list[i].node > nn || !nodes[list[i].node].alive ||
			    nodes[list[i].node].inc != list[i].inc)
				return 0;
	}
	return 1;
}

/*
 * majority_lives -- whether a majority of the newest view (the highest id
 * any live node holds) is alive as the same incarnations. When it is not
 * (a majority crashed, or restarted as new incarnations), no view can
 * follow it, by design: nothing may act without a majority. Such a seed
 * checks safety only.
 */
static int majority_lives(void)
{
	struct lc_member_info list[MAXN + 2];
	uint32_t best = 0, n, alive = 0;
	uint64_t id = 0;

	for (uint32_t j = 1; j <= nn; j++)
		if (nodes[j].alive && lc_ms_view(nodes[j].ms) > id) {
			id = lc_ms_view(nodes[j].ms);
			best = j;
		}
	if (best == 0)
		return 0;
	n = lc_ms_members(nodes[best].ms, list, MAXN + 2);
	for (uint32_t i = 0; i < n; i++)
		if (list[i].node <= nn && nodes[list[i].node].alive &&
		    nodes[list[i].node].inc == list[i].inc)
			alive++;
	return alive >= n / 2 + 1;
}

static unsigned majority_lost;

static int run_seed(uint64_t seed)
{
	uint64_t fault_end, end, next_fault, stuck = 0;

	rng = seed * 0x9e3779b97f4a7c15ull + 1;
	seed_cur = seed;
	nn = 3 + (uint32_t)below(7);
	protected_node = 1 + (uint32_t)below(nn);
	loss_pm = (unsigned)below(4) * 10;   /* 0-3 % */
	jitter_ms = (unsigned)below(4) * 40; /* 0-120 ms */
	base_us = 50 + (unsigned)below(2000);
	if (busy_mode)
		loss_pm = 0;
	now_sim = 0;
	seq = 0;
	nq = 0;
	nviews = 0;
	failure[0] = '\0';
	memset(cut, 0, sizeof(cut));
	for (uint32_t j = 1; j <= nn; j++) {
		lc_ms_destroy(nodes[j].ms);
		memset(&nodes[j], 0, sizeof(nodes[j]));
		nodes[j].id = j;
	}
	/* node 1 alone, the others join through a live node, a few ms apart */
	if (node_start(&nodes[1], 1))
		return -1;
	for (uint32_t j = 2; j <= nn; j++) {
		nodes[j].restart_at = (j - 1) * 20 * MS + below(20 * MS);
		nodes[j].alive = 0;
	}
	fault_end = 3 * F + FAULT_F * F;
	end = fault_end + CONVERGE_F * F;
	next_fault = busy_mode ? fault_end : 3 * F + below(2 * F);
	if (busy_mode) {
		/*
		 * --busy: no fault but a host that is busy from the start: every
		 * node's thread runs up to 300-900 ms late (inputs wait for it too)
		 * while the nodes start, join and run
		 */
		uint64_t late = 300 * MS + below(600 * MS);

		for (uint32_t j = 1; j <= nn; j++) {
			nodes[j].late_until = fault_end;
			nodes[j].late_max = late;
		}
	}
	if (verbose)
		printf("seed %" PRIu64 ": %u nodes, protected %u, loss %u/1000, jitter %u ms\n",
		       seed, nn, protected_node, loss_pm, jitter_ms);
	while (failure[0] == '\0') {
		uint64_t t = end;
		int kind = -1;
		uint32_t who = 0, qi = 0;

		/* the next event: a message, a node's timer, a dial, a restart, a fault */
		for (uint32_t i = 0; i < nq; i++)
			if (q[i].at < t || (q[i].at == t && kind == 0 && q[i].seq < q[qi].seq)) {
				t = q[i].at;
				kind = 0;
				qi = i;
			}
		for (uint32_t j = 1; j <= nn; j++) {
			struct snode *s = &nodes[j];
			uint64_t nt;

			if (!s->alive) {
				if (s->restart_at != 0 && s->restart_at < t) {
					t = s->restart_at;
					kind = 2;
					who = j;
				}
				continue;
			}
			nt = s->next_tick;
			if (s->join_dial_at != 0 && s->join_dial_at < nt)
				nt = s->join_dial_at;
			for (uint32_t k = 1; k <= nn; k++)
				if (s->dial_at[k] != 0 && s->dial_at[k] < nt)
					nt = s->dial_at[k];
			if (paused(s) && nt < s->paused_until)
				nt = s->paused_until;
			if (nt < now_sim)
				nt = now_sim; /* due while it was paused: now */
			if (nt < t) {
				t = nt;
				kind = 1;
				who = j;
			}
		}
		if (next_fault < t && next_fault < fault_end) {
			t = next_fault;
			kind = 3;
		}
		if (kind == 0 && nodes[q[qi].to].paused_until > t) {
			/* to a paused node: it waits in the socket until the node runs */
			q[qi].at = nodes[q[qi].to].paused_until;
			continue;
		}
		if (kind == 0 && nodes[q[qi].to].stall_from <= t && nodes[q[qi].to].next_tick > t) {
			/* to a busy node whose thread waits for a CPU: until it runs */
			q[qi].at = nodes[q[qi].to].next_tick;
			continue;
		}
		if (t >= end || kind < 0)
			break;
		if (t == now_sim && ++stuck > 1000000) {
			fail("simulator: no progress at %.3f s (event kind %d, node %u)",
			     (double)t / 1e9, kind, kind == 0 ? q[qi].to : who);
			break;
		}
		if (t != now_sim)
			stuck = 0;
		now_sim = t;
		if (kind == 0) {
			struct smsg m = q[qi];

			q[qi] = q[--nq];
			deliver(&m);
		} else if (kind == 1) {
			struct snode *s = &nodes[who];

			if (s->join_dial_at != 0 && s->join_dial_at <= now_sim) {
				s->join_dial_at = 0;
				connect(s, s->join_to, 1);
			}
			for (uint32_t k = 1; k <= nn; k++)
				if (s->dial_at[k] != 0 && s->dial_at[k] <= now_sim) {
					s->dial_at[k] = 0;
					connect(s, k, 0);
				}
			if (s->alive && s->next_tick <= now_sim) {
				timers(s);
				check_acting(s); /* what it says right after a tick */
			}
		} else if (kind == 2) {
			if (node_start(&nodes[who], 0))
				return -1;
		} else {
			fault();
			next_fault = now_sim + 200 * MS + below(3 * F);
		}
		if (now_sim >= fault_end) {
			/* the faults stop: heal, and every node runs on time */
			memset(cut, 0, sizeof(cut));
			for (uint32_t j = 1; j <= nn; j++)
				nodes[j].late_until = 0;
			if (converged())
				break;
		}
	}
	if (failure[0] == '\0' && !converged() && !majority_lives())
		majority_lost++;
	else if (failure[0] == '\0' && !converged())
		fail("no convergence within %u bounds after the faults: live nodes are not in one "
		     "view of exactly them that acts",
		     CONVERGE_F);
	if (failure[0] != '\0') {
		printf("FAIL seed %" PRIu64 " at %.3f s: %s\n", seed, (double)now_sim / 1e9,
		       failure);
		for (uint32_t j = 1; j <= nn; j++) {
			struct lc_member_info list[MAXN + 2];
			uint32_t n =
			    nodes[j].alive ? lc_ms_members(nodes[j].ms, list, MAXN + 2) : 0;

			printf("  node %u: %s, state %d, view %" PRIu64 ", part %d, inc %" PRIx64
			       ", members",
			       j, nodes[j].alive ? "alive" : "down",
			       nodes[j].alive ? lc_ms_state(nodes[j].ms) : 0,
			       nodes[j].alive ? lc_ms_view(nodes[j].ms) : 0,
			       nodes[j].alive ? lc_ms_partitioned(nodes[j].ms) : 0, nodes[j].inc);
			for (uint32_t i = 0; i < n; i++)
				printf(" %u/%" PRIx64, list[i].node, list[i].inc);
			printf("\n");
		}
		printf("  replay: sim-membership%s --seed %" PRIu64 " --verbose\n",
		       busy_mode ? " --busy" : "", seed);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t first = 1, nseeds = 1000;
	unsigned failed = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
			nseeds = strtoull(argv[++i], NULL, 0);
		} else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
			first = strtoull(argv[++i], NULL, 0);
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			first = strtoull(argv[++i], NULL, 0);
			nseeds = 1;
		} else if (strcmp(argv[i], "--verbose") == 0) {
			verbose = 1;
		} else if (strcmp(argv[i], "--busy") == 0) {
			busy_mode = 1;
		} else {
			fprintf(stderr, "usage: sim-membership [--seeds N] [--first S] [--seed S] "
			                "[--busy] [--verbose]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	q = calloc(QMAX, sizeof(*q));
	if (q == NULL)
		return 1;
	for (uint64_t s = first; s < first + nseeds; s++) {
		int ret = run_seed(s);

		if (ret < 0) {
			fprintf(stderr, "sim-membership: out of memory\n");
			return 1;
		}
		failed += (unsigned)ret;
		if (failed >= 5)
			break;
	}
	printf("%" PRIu64 " seed(s) from %" PRIu64 ": %u failed (%u lost a majority of their "
	       "view for good: checked for safety only; %u exclusion(s) after a pause named "
	       "it)\n",
	       nseeds, first, failed, majority_lost, hinted);
	for (uint32_t j = 1; j <= MAXN; j++)
		lc_ms_destroy(nodes[j].ms);
	free(q);
	return failed ? 1 : 0;
}
