/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ms_impl.h -- the machine's state, shared by its files, which call each
 * other one way only, from the top:
 *
 *   ms_input.c  the inputs and the tick
 *   ms_paxos.c  the rounds that agree on the next view
 *   ms_probe.c  suspicion confirmed by probes
 *   ms_view.c   installing a view, exclusion, the partition check
 *   ms_detect.c the adaptive bound and our own lateness
 *   ms_base.c   making it, messages and sending, questions
 */
#ifndef LOCO_LC_MS_IMPL_H
#define LOCO_LC_MS_IMPL_H

#include <stdint.h>

#include "ms.h"

#define PROBES     8  /* suspects probed at once (coordinator), probes answered at once */
#define PROBERS    3  /* members asked to probe one suspect */
#define GONE       32 /* leavers remembered for members that skip the view dropping them */
#define GONE_VIEWS 8  /* a commit retells the leavers of this many views before it */
#define NO_INDEX   (-1)

struct detect {                   /* the gaps between the messages of one member (ms_detect.c) */
	uint64_t mean, dev;       /* weighted mean of the gaps, and of their deviation (ns) */
	uint64_t max_gap, max_at; /* the longest gap lately, and when it ended */
	uint32_t samples;
	uint64_t since; /* when it entered the view */
};

struct vmember {
	struct lc_member_info info;
	uint64_t heard_ns;  /* last message from it (install time at first), plus our lateness */
	uint64_t rx_ns;     /* last message from it, as it came (install time at first) */
	uint64_t susp_ns;   /* since when we suspect it; 0: not */
	uint64_t report_ns; /* when we last told the coordinator */
	uint64_t redial_ns; /* when we may redial it next */
	uint64_t quiet_ns;  /* a probe found it alive: not suspected again before */
	int left;           /* it said LEAVE */
	uint64_t echo;      /* the last of our echo requests (ms->nonce) it answered */
	struct detect det;
};

struct probe { /* coordinator: a suspect being probed */
	uint32_t node;
	uint64_t inc, start, deadline;
	int asked, answers, alive;
};

struct preq { /* prober: a probe to answer */
	uint32_t node, coord;
	uint64_t inc, start;
};

struct gone { /* a member that said LEAVE, and the view that dropped it */
	uint32_t node;
	uint64_t inc, view;
};

struct change { /* a pending removal (dead or left) or join */
	struct lc_member_info info;
	uint64_t since, fwd;
	int left;
};

struct lc_ms {
	struct lc_ms_cfg cfg;
	const struct lc_ms_ops *ops;
	void *ctx;
	struct lc_member_info self;
	uint64_t now; /* the time of the input being handled */
	uint64_t rng; /* xorshift64* state */
	int leaving;  /* lc_ms_leave() */

	int state;
	uint64_t id;
	uint32_t n;
	struct vmember *v; /* sorted by node id */
	int part;          /* enum lc_ms_part */
	int part_logged;   /* we said so in the log */
	int left;          /* loco_fini() may go */

	/* our own lateness (ms_detect.c) */
	uint64_t last_input; /* the time of the last input (0: none yet) */
	uint64_t wake;       /* when the driver was told to tick next */
	uint64_t resumed;    /* late, and waiting for echoes since (0: not) */
	uint64_t nonce;      /* the echo we asked for after being late (0: none) */
	uint64_t echo_asked; /* when we last asked */
	uint64_t late_max;   /* the longest lateness since we were last on time 16 floors */
	uint64_t late_at;    /* when we were last late */

	/* acceptor, for view id + 1 */
	uint64_t pb, ab;
	uint32_t an;
	struct lc_member_info *av;

	/* proposer */
	int phase; /* 0 idle, 1 PREPARE sent, 2 ACCEPT sent */
	uint64_t target, ballot, round, seen_round, deadline, backoff;
	uint8_t got[LC_MAX_MEMBERS];
	uint32_t ngot, pn;
	uint64_t best_ab;
	struct lc_member_info *prop;

	struct change *joins, *rems;
	uint32_t nj, nr;
	struct gone gone[GONE]; /* a ring: the last leavers our views dropped */
	uint32_t ngone;         /* entries ever written; the next goes at ngone % GONE */
	struct probe probe[PROBES];
	struct preq preq[PROBES];

	/* joining and rejoining */
	uint32_t join_node; /* the contact we sent JOIN to */
	struct lc_member_info *contacts;
	uint32_t ncontacts, next_contact;
	uint64_t next_rejoin;
	uint64_t settle_start, settle_up; /* rejoined: partitioned until every member is up */

	struct lc_member_info *scratch;
	struct vmember *old; /* install: the view before */
	struct lc_msg *tx;   /* messages are built here */
};

static inline uint32_t ms_majority(uint32_t n)
{
	return n / 2 + 1;
}

static inline int ms_idx(const struct lc_ms *ms, uint32_t node)
{
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->v[i].info.node == node)
			return (int)i;
	return NO_INDEX;
}

static inline int ms_has(const struct lc_ms *ms, uint32_t node, uint64_t inc)
{
	int i = ms_idx(ms, node);

	return i != NO_INDEX && ms->v[i].info.inc == inc;
}

/* ms_base.c */
void ms_send_to(struct lc_ms *ms, uint32_t node, struct lc_msg *msg);
void ms_broadcast(struct lc_ms *ms, struct lc_msg *msg);
struct lc_msg *ms_msg(struct lc_ms *ms, uint32_t kind, uint64_t view);
void ms_tell_gone(struct lc_ms *ms, uint32_t to, uint64_t since);
void ms_send_view(struct lc_ms *ms, uint32_t node);
uint32_t ms_coordinator(const struct lc_ms *ms);
void ms_event(struct lc_ms *ms, int type, uint64_t view, uint32_t n);
void ms_set_part(struct lc_ms *ms, int part);
uint64_t ms_random(struct lc_ms *ms, uint64_t below);
void ms_log(struct lc_ms *ms, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ms_rem_has(const struct lc_ms *ms, uint32_t node, uint64_t inc);
void ms_rem_add(struct lc_ms *ms, const struct lc_member_info *mi, int left);

/* ms_view.c */
void ms_install(struct lc_ms *ms, uint64_t id, const struct lc_member_info *list, uint32_t n);
void ms_partition_check(struct lc_ms *ms);
void ms_pending_prune(struct lc_ms *ms);

/* ms_paxos.c: the proposer (coordinator) and the acceptor */
void ms_backoff(struct lc_ms *ms);
void ms_start_round(struct lc_ms *ms);
int ms_acc_prepare(struct lc_ms *ms, uint64_t t, uint64_t b);
int ms_acc_accept(struct lc_ms *ms, uint64_t t, uint64_t b, const struct lc_member_info *val,
                  uint32_t n);
void ms_on_promise(struct lc_ms *ms, uint32_t from, uint64_t t, uint64_t b, uint64_t abal,
                   const struct lc_member_info *val, uint32_t n);
void ms_on_accepted(struct lc_ms *ms, uint32_t from, uint64_t t, uint64_t b);

/* ms_probe.c: suspicion and probes */
void ms_suspect_idx(struct lc_ms *ms, int i);
void ms_coord_suspect(struct lc_ms *ms, int i);
void ms_probes_decide(struct lc_ms *ms);
void ms_probes_answer(struct lc_ms *ms);

/* ms_detect.c: the adaptive bound, our own lateness */
void ms_detect_clock(struct lc_ms *ms, uint64_t now);
void ms_detect_heard(struct lc_ms *ms, struct vmember *x);
void ms_detect_reset(struct lc_ms *ms, struct vmember *x);
uint64_t ms_detect_bound(const struct lc_ms *ms, const struct vmember *x);
uint64_t ms_detect_max(const struct lc_ms *ms);
uint64_t ms_echo_window(const struct lc_ms *ms);
int ms_detect_unsure(struct lc_ms *ms);
void ms_echo_ask(struct lc_ms *ms);

#endif /* LOCO_LC_MS_IMPL_H */
