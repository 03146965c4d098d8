/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * powerconv.c -- a distributed power-converter controller on LOCO's stock
 * objects: N nodes each simulate a DC/DC buck converter (pc-model.c); the
 * converters' outputs are in series (input-parallel, output-series), so
 * the aggregate output is the SUM of the present converters' outputs, and
 * it must track a reference (60 V, a step to 80 V at period 2000).
 *
 * Each control period (1 ms of simulated time; the loop runs as fast as
 * the barrier allows, or paced with --period-us) every node:
 *   1. steps its converter with the duty cycle it chose last period;
 *   2. publishes {period, v_in, v_out, d, share} in its row of the sst
 *      "meas" (the row also keeps the previous period's values: a node
 *      that already passed the barrier may publish the next period while
 *      a slower one still reads this one);
 *   3. waits on the barrier "period", which closes the period;
 *   4. reads every present row for this period: the aggregate, the count
 *      of members (its share is 1 / that count);
 *   5. sets its next duty cycle with a PI law (pc_control()).
 * A node that dies leaves the barrier and the sst (docs/membership.md):
 * the others' share grows from 1/n to 1/(n-1) and they take up its part.
 * A node that joins learns the current period from its first barrier wait
 * and takes a share from its first published row on.
 *
 *   loco-run -n 3 build/demos/powerconv/powerconv --csv pc.csv --png pc.png
 *   loco-run -n 3 --keep-going --control /tmp/ctl build/demos/powerconv/powerconv \
 *       --periods 20000 --period-us 1000 &
 *   loco-run --ctl /tmp/ctl kill 3 KILL; loco-run --ctl /tmp/ctl add
 *
 * See demos/powerconv/README.md for the options and the figures.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loco.h>
#include <loco/barrier.h>
#include <loco/sst.h>

#include "pc.h"

#define SEC        1000000000ll
#define WAIT_NS    (5 * SEC) /* one barrier wait; retried */
#define STUCK_S    60.0      /* a period that cannot close in this long ends the run */
#define ACK_WAIT_S 2.0

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: powerconv [--periods N] [--ref V] [--step-to V] [--step-at P] [--seed S]\n"
	        "                 [--csv PATH] [--png PATH] [--writer ID] [--band F] [--hold H]\n"
	        "                 [--bound B] [--period-us U] [--progress N] [--check]\n");
}

static int parse(int argc, char **argv, struct pc_opts *o)
{
	static const struct option lo[] = {
	    {"periods", 1, NULL, 'n'},  {"ref", 1, NULL, 'r'},    {"step-to", 1, NULL, 't'},
	    {"step-at", 1, NULL, 'a'},  {"seed", 1, NULL, 's'},   {"csv", 1, NULL, 'c'},
	    {"png", 1, NULL, 'p'},      {"writer", 1, NULL, 'w'}, {"band", 1, NULL, 'b'},
	    {"hold", 1, NULL, 'H'},     {"bound", 1, NULL, 'B'},  {"period-us", 1, NULL, 'u'},
	    {"progress", 1, NULL, 'P'}, {"check", 0, NULL, 'k'},  {"help", 0, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	int c;

	*o = (struct pc_opts){.periods = 6000,
	                      .ref = 60,
	                      .ref2 = 80,
	                      .step_at = 2000,
	                      .seed = 1,
	                      .writer = 1,
	                      .band = 0.02,
	                      .hold = 50,
	                      .bound = 200};
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->periods = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			o->ref = strtod(optarg, NULL);
			break;
		case 't':
			o->ref2 = strtod(optarg, NULL);
			break;
		case 'a':
			o->step_at = strtoull(optarg, NULL, 0);
			break;
		case 's':
			o->seed = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			o->csv = optarg;
			break;
		case 'p':
			o->png = optarg;
			break;
		case 'w':
			o->writer = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'b':
			o->band = strtod(optarg, NULL);
			break;
		case 'H':
			o->hold = strtoull(optarg, NULL, 0);
			break;
		case 'B':
			o->bound = strtoull(optarg, NULL, 0);
			break;
		case 'u':
			o->period_us = strtoull(optarg, NULL, 0);
			break;
		case 'P':
			o->progress = strtoull(optarg, NULL, 0);
			break;
		case 'k':
			o->check = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc || o->periods < 2 || o->periods > 100000000 || !(o->ref > 0) ||
	    !(o->ref2 > 0) || !(o->band > 0) || o->hold == 0) {
		usage(stderr);
		return -1;
	}
	return 0;
}

struct pc_node {
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *bar;
	loco_sst_t *sst;
	loco_ack_key_t *ack;
	uint32_t me;
	int warned;
};

/* publish -- store this node's row and push it to every present row's node */
static int publish(struct pc_node *n, const struct pc_row *row)
{
	int ret = loco_sst_store_mine(n->sst, row);

	if (ret)
		return ret;
	ret = loco_sst_push_broadcast(n->sst, n->ack);
	if (ret == -EAGAIN) { /* the staging ring is full: let the pushes in flight land */
		loco_ack_wait(n->ack, (int64_t)(ACK_WAIT_S * SEC));
		ret = loco_sst_push_broadcast(n->sst, n->ack);
	}
	if (ret < 0 && !n->warned++)
		fprintf(stderr, "node %u: push: %s (a peer coming or going; goes on)\n", n->me,
		        loco_strerror(ret));
	return 0;
}

/* close_period -- the barrier wait, again after a timeout or a partition, up to STUCK_S */
static int close_period(struct pc_node *n, uint64_t period)
{
	double start = pc_now_s();
	int ret, said = 0;

	for (;;) {
		ret = loco_barrier_wait(n->bar, WAIT_NS);
		if (ret == 0)
			return 0;
		if (!said++)
			fprintf(stderr, "node %u: period %llu: barrier: %s; waiting on\n", n->me,
			        (unsigned long long)period, loco_strerror(ret));
		if (pc_now_s() - start > STUCK_S)
			return ret;
		if (ret != -ETIMEDOUT && ret != -LOCO_EPARTITION) {
			struct timespec ts = {0, 10000000};

			nanosleep(&ts, NULL);
		}
	}
}

/*
 * gather -- every present row's values for @period: the aggregate, the
 * ids and duty cycles of the members counted. Rows that show neither this
 * period nor the next (a joiner that has not published yet) do not count.
 */
static double gather(struct pc_node *n, uint64_t period, uint32_t *ids, uint32_t *nids, double *d)
{
	uint32_t rows[PC_MAX_NODE];
	int nr = loco_sst_rows(n->sst, rows, PC_MAX_NODE);
	double agg = 0;

	*nids = 0;
	for (int i = 0; i < nr; i++) {
		struct pc_row r;
		const struct pc_meas *v;

		if (loco_sst_read(n->sst, rows[i], &r) != 0)
			continue; /* gone meanwhile */
		v = r.period == period ? &r.cur : r.prev_period == period ? &r.prev : NULL;
		if (v == NULL)
			continue;
		agg += v->v_out;
		d[rows[i]] = v->d;
		ids[(*nids)++] = rows[i];
	}
	return agg;
}

static void pace(double *next, uint64_t period_us)
{
	double now = pc_now_s(), left;
	struct timespec ts;

	if (period_us == 0)
		return;
	*next = *next == 0 || *next + 1e-6 * (double)period_us < now
	            ? now + 1e-6 * (double)period_us
	            : *next + 1e-6 * (double)period_us;
	left = *next - now;
	if (left <= 0)
		return;
	ts.tv_sec = (time_t)left;
	ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static int run(struct pc_node *n, const struct pc_opts *o, struct pc_hist *h, struct pc_conv *c)
{
	struct pc_row row = {0};
	uint32_t ids[PC_MAX_NODE];
	double d[PC_MAX_NODE + 1], next_tick = 0;
	uint64_t p;
	int ret;

	/* the first wait: a starting node passes episode 1 with the others; a
	 * joiner enters the episode the others are in, and passes it */
	ret = close_period(n, 0);
	if (ret)
		return ret;
	p = loco_barrier_episode(n->bar) + 1;
	if (p > 2)
		printf("node %u: joined at period %llu\n", n->me, (unsigned long long)p);
	for (; p <= o->periods; p++) {
		double t0, agg;
		uint32_t nids;

		pace(&next_tick, o->period_us);
		t0 = pc_now_s();
		pc_conv_step(c, p);
		row.prev = row.cur;
		row.prev_period = row.period;
		row.cur = (struct pc_meas){c->v_in, c->v_out, c->d, row.cur.share};
		row.period = p;
		if ((ret = publish(n, &row)) != 0 || (ret = close_period(n, p)) != 0)
			return ret;
		if (loco_barrier_episode(n->bar) != p) {
			/* after a partition the barrier fetched the others' episode */
			fprintf(stderr,
			        "node %u: period %llu: the barrier is at %llu; following it\n",
			        n->me, (unsigned long long)p,
			        (unsigned long long)loco_barrier_episode(n->bar));
			p = loco_barrier_episode(n->bar);
			continue;
		}
		agg = gather(n, p, ids, &nids, d);
		loco_ack_wait(n->ack, 0); /* clears a dead peer's push errors */
		pc_control(c, pc_reference(o, p), pc_reference(o, p + 1), agg, nids);
		row.cur.share = nids ? 1.0 / nids : 0;
		if (pc_hist_record(h, o, p, agg, ids, d, nids, row.cur.v_out, pc_now_s(),
		                   (pc_now_s() - t0) * 1e6)) {
			for (unsigned i = 0; i < h->nev; i++)
				if (h->ev[i].period == p)
					printf("node %u: period %llu: %s %u, %u members\n", n->me,
					       (unsigned long long)p,
					       h->ev[i].kind == PC_JOIN    ? "join"
					       : h->ev[i].kind == PC_LEAVE ? "leave"
					                                   : "step to",
					       h->ev[i].kind == PC_STEP ? (unsigned)o->ref2
					                                : h->ev[i].node,
					       nids);
			fflush(stdout);
		}
		if (o->progress && p % o->progress == 0) {
			printf("node %u: period %llu, %u members, aggregate %.3f V, reference %.1f "
			       "V\n",
			       n->me, (unsigned long long)p, nids, agg, pc_reference(o, p));
			fflush(stdout);
		}
	}
	/* one more episode: nobody leaves before every node has read the last period's rows */
	return close_period(n, p);
}

int main(int argc, char **argv)
{
	struct pc_node n = {0};
	struct pc_opts o;
	uint32_t size;
	struct pc_hist h;
	struct pc_conv c;
	int ret, bad;

	if (parse(argc, argv, &o))
		return 2;
	if ((ret = loco_init(NULL, &n.m)) != 0) {
		fprintf(stderr, "loco_init: %s\n", loco_strerror(ret));
		return 1;
	}
	n.me = loco_manager_node_id(n.m);
	if (n.me > PC_MAX_NODE) {
		fprintf(stderr, "node id %u above %u, the demo's largest\n", n.me, PC_MAX_NODE);
		return 1;
	}
	/* the nodes the launcher started (loco-run or mpirun / srun) */
	size = loco_manager_job_size(n.m);
	/* the barrier before the sst: the channel calls the newest object
	 * first, so a joiner's row is present before its barrier row */
	if ((ret = loco_channel_create(n.m, NULL, "powerconv", size ? size : 1, &n.ch)) ||
	    (ret = loco_barrier_create(n.ch, "period", &n.bar)) ||
	    (ret = loco_sst_create(n.ch, "meas", sizeof(struct pc_row), PC_MAX_NODE, &n.sst)) ||
	    (ret = loco_ack_key_create(n.m, &n.ack)) || (ret = loco_channel_join(n.ch, 20 * SEC))) {
		fprintf(stderr, "setup: %s\n", loco_strerror(ret));
		return 1;
	}
	if (pc_hist_init(&h, o.periods)) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	pc_conv_init(&c, n.me, o.seed);
	ret = run(&n, &o, &h, &c);
	if (ret) {
		fprintf(stderr, "node %u: %s\n", n.me, loco_strerror(ret));
		return 1;
	}
	bad = pc_report(&h, &o, n.me, &c);
	if (n.me == o.writer && o.csv) {
		if (pc_write_csv(&h, o.csv))
			fprintf(stderr, "node %u: cannot write %s\n", n.me, o.csv), bad = 1;
		else
			printf("node %u: wrote %s\n", n.me, o.csv);
		if (o.png && pc_write_png(&h, o.csv, o.png))
			fprintf(stderr,
			        "node %u: gnuplot failed (is gnuplot-nox installed?); no %s\n",
			        n.me, o.png);
		else if (o.png)
			printf("node %u: wrote %s\n", n.me, o.png);
	}
	fflush(stdout);
	loco_ack_key_destroy(n.ack);
	loco_sst_destroy(n.sst);
	loco_barrier_destroy(n.bar);
	loco_channel_destroy(n.ch);
	loco_fini(n.m);
	pc_hist_free(&h);
	return o.check && bad;
}
