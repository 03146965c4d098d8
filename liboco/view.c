/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * view.c -- the membership state machine's driver (view.h): what the
 * machine (membership/ms.h) decides, carried out on the member table, the
 * dialer and the channels; the partition flag, the view id and the
 * application's events published for other threads.
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "conn.h"
#include "dial.h"
#include "handle.h"
#include "log.h"
#include "manager.h"

#define EVENTS 16 /* application events queued */

struct lc_view {
	loco_event_fn *fn;
	void *fn_arg;
	loco_event_t evq[EVENTS];
	unsigned evh, evt;
};

/* failure bounds a caller waits for the progress thread's word (loco_manager_partitioned()) */
#define LC_PART_WAIT 3

static uint64_t fail_ns(const loco_manager_t *m)
{
	return (uint64_t)m->cfg.fail_timeout_ms * 1000000ull;
}

/* ------------------------------------------------------------------ */
/* the machine's effects (progress thread, m->lock held)              */

static void op_send(void *ctx, uint32_t node, struct lc_msg *msg)
{
	loco_manager_t *m = ctx;
	struct lc_member *mb = lc_member_find(m, node);

	if (mb != NULL && mb->conn != NULL && mb->conn->state == LC_CONN_UP &&
	    !lc_conn_is_dead(mb->conn))
		lc_conn_send(mb->conn, msg);
}

static void op_dial(void *ctx, const struct lc_member_info *mi, int join)
{
	lc_dial_ctrl(ctx, mi, join);
}

static void op_drop(void *ctx, const struct lc_member_info *mi, int left)
{
	loco_manager_t *m = ctx;
	struct lc_member *mb = lc_member_find(m, mi->node);

	if (mb != NULL && mb->info.inc == mi->inc)
		lc_member_remove(m, mb, left, "removed from the view");
}

static void op_installed(void *ctx, uint64_t id, uint32_t n, int was)
{
	loco_manager_t *m = ctx;

	(void)n;
	m->view.id = id;
	if (was == LC_VS_REJOINING)
		lc_members_rejoined(m); /* channels wait for their old peers again */
	for (struct lc_member *mb = lc_members_first(&m->members); mb != NULL; mb = mb->next)
		if (lc_ms_in(m->ms, mb->info.node, mb->info.inc))
			lc_member_check_up(m, mb);
	if (was == LC_VS_JOINING)
		lc_dial_join_answer(m, 0);
}

static void op_excluded(void *ctx, uint64_t id, uint64_t inc)
{
	loco_manager_t *m = ctx;
	struct lc_member *mb;

	/* before the members go: an object that sees its peers vanish knows why */
	__atomic_store_n(&m->view.part, LC_MS_PART, __ATOMIC_SEQ_CST);
	m->view.id = id; /* our objects' peer_leave callbacks carry the view that left us out */
	lc_members_excluded(m); /* after a rejoin, channels wait for these peers again */
	while ((mb = lc_members_first(&m->members)) != NULL)
		lc_member_remove(m, mb, 0, "we were excluded from the view");
	lc_members_kill_conns(m, "excluded");
	m->view.id = 0;
	__atomic_store_n(&m->inc, inc, __ATOMIC_RELEASE);
}

static void op_event(void *ctx, int type, uint64_t view, uint32_t n)
{
	loco_manager_t *m = ctx;
	struct lc_view *vw = m->view.vw;

	if (vw->fn == NULL || vw->evt - vw->evh >= EVENTS)
		return;
	vw->evq[vw->evt++ % EVENTS] = (loco_event_t){
	    .type = (loco_event_type_t)type, .view = view, .nmembers = n, .incarnation = m->inc};
}

static void op_join_done(void *ctx, int ret)
{
	loco_manager_t *m = ctx;

	lc_dial_join_answer_first(m, ret);
}

static void op_mark_joiner(void *ctx, uint32_t node)
{
	loco_manager_t *m = ctx;
	struct lc_member *mb = lc_member_find(m, node);

	if (mb != NULL) {
		mb->joiner = 1;
		mb->since_ns = lc_now_ns();
	}
}

static void op_part(void *ctx, int part)
{
	loco_manager_t *m = ctx;

	__atomic_store_n(&m->view.part, part, __ATOMIC_RELEASE);
}

static void op_log(void *ctx, int level, const char *line)
{
	(void)ctx;
	lc_log((enum lc_log_level)level, "%s", line);
}

static int op_connected(void *ctx, uint32_t node)
{
	struct lc_member *mb = lc_member_find(ctx, node);

	return mb != NULL && mb->conn != NULL && !lc_conn_is_dead(mb->conn);
}

static int op_up(void *ctx, uint32_t node)
{
	struct lc_member *mb = lc_member_find(ctx, node);

	return mb != NULL && mb->up;
}

static int op_dialing(void *ctx, uint32_t node)
{
	loco_manager_t *m = ctx;

	return lc_cdial_pending(m, node);
}

static const struct lc_ms_ops ms_ops = {
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

/* ------------------------------------------------------------------ */
/* the driver                                                         */

int lc_view_init(loco_manager_t *m)
{
	struct lc_ms_cfg cfg = {
	    .log_level = lc_log_enabled(LC_LOG_DEBUG)  ? LC_LOG_DEBUG
	                 : lc_log_enabled(LC_LOG_INFO) ? LC_LOG_INFO
	                 : lc_log_enabled(LC_LOG_WARN) ? LC_LOG_WARN
	                                               : LC_LOG_ERROR,
	    .fail_ns = fail_ns(m),
	    .join_ns = (uint64_t)m->cfg.join_timeout_ms * 1000000ull,
	    .rejoin = m->cfg.rejoin,
	    .seed = ((uint64_t)randombytes_random() << 32) | randombytes_random(),
	};
	struct lc_member_info self = {.node = m->node_id, .inc = m->inc};

	m->view.vw = calloc(1, sizeof(*m->view.vw));
	if (m->view.vw == NULL)
		return -ENOMEM;
	m->view.part = LC_MS_PART;
	m->ms = lc_ms_create(&cfg, &self, &ms_ops, m);
	if (m->ms == NULL) {
		free(m->view.vw);
		m->view.vw = NULL;
		return -ENOMEM;
	}
	return 0;
}

void lc_view_fini(loco_manager_t *m)
{
	lc_ms_destroy(m->ms);
	m->ms = NULL;
	free(m->view.vw);
	m->view.vw = NULL;
}

void lc_view_self(loco_manager_t *m)
{
	struct lc_member_info self;

	lc_self_info(m, &self);
	lc_ms_set_self(m->ms, &self);
}

void lc_view_start_alone(loco_manager_t *m)
{
	pthread_mutex_lock(&m->lock);
	lc_ms_start_alone(m->ms, lc_now_ns());
	pthread_mutex_unlock(&m->lock);
}

void lc_view_late_hint(loco_manager_t *m, const char *what)
{
	uint64_t late = lc_ms_late(m->ms);

	if (late < fail_ns(m) / 4)
		return;
	lc_log_warn("manager: %s: this node's own progress thread ran up to %llu ms late lately "
	            "(a busy host, or the process was paused): the peers may be fine; a longer "
	            "failure bound (LOCO_FAIL_TIMEOUT_MS, %u ms now) or join timeout "
	            "(LOCO_JOIN_TIMEOUT_MS, %u ms) rides it out",
	            what, (unsigned long long)(late / 1000000), m->cfg.fail_timeout_ms,
	            m->cfg.join_timeout_ms);
}

void lc_view_dispatch(loco_manager_t *m)
{
	struct lc_view *vw = m->view.vw;
	loco_event_t ev[EVENTS];
	loco_event_fn *fn;
	void *arg;
	unsigned n = 0;

	if (__atomic_load_n(&vw->evt, __ATOMIC_RELAXED) == vw->evh)
		return; /* only this thread queues, under m->lock */
	pthread_mutex_lock(&m->lock);
	while (vw->evh != vw->evt && n < EVENTS)
		ev[n++] = vw->evq[vw->evh++ % EVENTS];
	fn = vw->fn;
	arg = vw->fn_arg;
	pthread_mutex_unlock(&m->lock);
	for (unsigned i = 0; i < n && fn != NULL; i++)
		fn(m, &ev[i], arg);
}

int loco_manager_set_event_fn(loco_manager_t *m, loco_event_fn *fn, void *arg)
{
	int ret = lc_handle_ok(m);

	if (ret)
		return ret;
	pthread_mutex_lock(&m->lock);
	m->view.vw->fn = fn;
	m->view.vw->fn_arg = arg;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/*
 * loco_manager_partitioned -- whether this node must not act. Two cases
 * need the progress thread's fresh word: the machine is unsure (this
 * node's own thread came back late, and has not heard a majority since),
 * or the machine has not ticked for a failure bound (the process was
 * stopped and this caller ran first after it resumed). A caller other
 * than the progress thread then waits for it, up to LC_PART_WAIT failure
 * bounds, instead of failing with -LOCO_EPARTITION for a silence that
 * was its own; the progress thread itself (object callbacks) is told 1.
 * The wait is that long because on a busy host the progress thread can
 * be starved for more than a bound while this caller runs: one bound
 * (before) made live nodes of a healthy majority fail a barrier with
 * -LOCO_EPARTITION, and no view ever said they were partitioned. Waiting
 * longer never lets a node act alone: it acts only on the fresh word.
 */
int loco_manager_partitioned(loco_manager_t *m)
{
	uint64_t start = 0, f;

	if (lc_handle_ok(m))
		return 0; /* NULL or finished: no partition to report */
	f = fail_ns(m);
	for (;;) {
		int part = __atomic_load_n(&m->view.part, __ATOMIC_ACQUIRE);
		uint64_t t = lc_members_tick_ns(&m->members);
		uint64_t now = lc_coarse_ns(); /* a tick late at most, never early */
		int stale = t != 0 && now > t && now - t > f;

		if (part == LC_MS_PART)
			return 1;
		if (part == LC_MS_ACT && !stale)
			return 0;
		if (start == 0)
			start = now;
		if (pthread_equal(pthread_self(), m->progress))
			return 1;
		if (now - start > LC_PART_WAIT * f) {
			lc_log_warn("manager: the progress thread gave no fresh word on the "
			            "view for %llu ms: counted as partitioned",
			            (unsigned long long)((now - start) / 1000000));
			return 1;
		}
		usleep(1000);
	}
}

uint64_t loco_view(loco_manager_t *m)
{
	uint64_t id;

	if (lc_handle_ok(m))
		return 0;
	pthread_mutex_lock(&m->lock);
	id = m->view.id;
	pthread_mutex_unlock(&m->lock);
	return id;
}

uint64_t lc_view_id(loco_manager_t *m)
{
	return m->view.id;
}
