/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pc-model.c -- the power-converter demo's converter model, PI law, history,
 * figures, CSV and gnuplot PNG. No LOCO calls: see powerconv.c.
 *
 * The converter: an averaged buck model, one step per control period
 * (PC_DT_S of simulated time). Its input voltage is a nominal value
 * (48 V +- 3 %, by node), a slow sine drift (+- 1.5 V, a period of 2000 ..
 * 5000 periods) and gaussian noise (0.15 V), all seeded by the seed and the
 * node id. The output follows eta * d * v_in - V_DROP through a first-order
 * LC/RC lag of time constant PC_TAU_S: v_out += a * (target - v_out),
 * a = 1 - exp(-dt / tau). eta and V_DROP are unknown to the control law,
 * which must make up for them with its integral term.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc.h"

#define PC_DT_S   1e-3 /* simulated time per control period */
#define PC_TAU_S  4e-3 /* the output filter's time constant */
#define V_IN_NOM  48.0 /* V */
#define V_NOISE   0.15 /* V, sigma */
#define ETA       0.95 /* conversion efficiency (not known to the control law) */
#define V_DROP    0.4  /* V, conduction drop (not known to the control law) */
#define KP        0.3  /* proportional gain, V/V */
#define KI        0.08 /* integral gain, V/V per period */
#define KB        1.0  /* weight of the output-sharing error against the aggregate error */
#define INTEG_MAX 15.0 /* V, the integral term's clamp */

double pc_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double pc_reference(const struct pc_opts *o, uint64_t period)
{
	return period >= o->step_at ? o->ref2 : o->ref;
}

/* xorshift64*, then a uniform in (0, 1) */
static double uniform(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return ((double)((x * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(uint64_t *s)
{
	double u = uniform(s), v = uniform(s);

	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

void pc_conv_init(struct pc_conv *c, uint32_t node, uint64_t seed)
{
	memset(c, 0, sizeof(*c));
	c->rng = (seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)node * 0xbf58476d1ce4e5b9ull);
	if (c->rng == 0)
		c->rng = 1;
	for (int i = 0; i < 8; i++)
		uniform(&c->rng);
	c->v_in_nom = V_IN_NOM * (1.0 + 0.06 * (uniform(&c->rng) - 0.5));
	c->drift_amp = 1.5 * uniform(&c->rng);
	c->drift_period = 2000.0 + 3000.0 * uniform(&c->rng);
	c->drift_phase = 2.0 * M_PI * uniform(&c->rng);
}

void pc_conv_step(struct pc_conv *c, uint64_t period)
{
	double a = 1.0 - exp(-PC_DT_S / PC_TAU_S), target;

	c->v_in =
	    c->v_in_nom +
	    c->drift_amp * sin(2.0 * M_PI * (double)period / c->drift_period + c->drift_phase) +
	    V_NOISE * gauss(&c->rng);
	target = ETA * c->d * c->v_in - V_DROP;
	if (target < 0)
		target = 0; /* a buck's output does not go negative (diode) */
	c->v_out += a * (target - c->v_out);
}

/*
 * pc_control -- the PI law. With n members, this node's share is 1/n;
 * its error is its share of the aggregate error plus the output-sharing
 * error (the mean output minus its own), so the errors of all nodes sum
 * to the aggregate error and are all zero only when the aggregate tracks
 * the reference and the nodes share equally. Command: feed-forward
 * share * reference + KP * error + integral; duty cycle = command / the
 * measured input voltage, clamped to [0, 1]; the integral stops while
 * the duty cycle is clamped in the error's direction (anti-windup).
 */
void pc_control(struct pc_conv *c, double ref_now, double ref_next, double agg, uint32_t n)
{
	double share = n ? 1.0 / n : 1.0;
	double e = share * (ref_now - agg) + KB * (agg * share - c->v_out);
	double integ = c->integ + KI * e, cmd, d;

	if (integ > INTEG_MAX)
		integ = INTEG_MAX;
	if (integ < -INTEG_MAX)
		integ = -INTEG_MAX;
	cmd = share * ref_next + KP * e + integ;
	d = c->v_in > 1.0 ? cmd / c->v_in : 0;
	if ((d >= 1.0 && e > 0) || (d <= 0 && e < 0))
		integ = c->integ; /* anti-windup */
	c->integ = integ;
	c->d = d < 0 ? 0 : d > 1.0 ? 1.0 : d;
}

int pc_hist_init(struct pc_hist *h, uint64_t periods)
{
	memset(h, 0, sizeof(*h));
	h->cap = periods + 2;
	h->ref = calloc(h->cap, sizeof(*h->ref));
	h->agg = calloc(h->cap, sizeof(*h->agg));
	h->n = calloc(h->cap, sizeof(*h->n));
	h->duty = malloc(h->cap * PC_MAX_NODE * sizeof(*h->duty));
	h->t_end = calloc(h->cap, sizeof(*h->t_end));
	h->loop_us = calloc(h->cap, sizeof(*h->loop_us));
	h->share_dev = calloc(h->cap, sizeof(*h->share_dev));
	if (!h->ref || !h->agg || !h->n || !h->duty || !h->t_end || !h->loop_us || !h->share_dev)
		return -1;
	for (uint64_t i = 0; i < h->cap * PC_MAX_NODE; i++)
		h->duty[i] = NAN;
	return 0;
}

void pc_hist_free(struct pc_hist *h)
{
	free(h->ref);
	free(h->agg);
	free(h->n);
	free(h->duty);
	free(h->t_end);
	free(h->loop_us);
	free(h->share_dev);
}

static void add_event(struct pc_hist *h, uint64_t period, int kind, uint32_t node)
{
	if (h->nev < PC_MAX_EVENTS)
		h->ev[h->nev++] =
		    (struct pc_event){.period = period, .kind = kind, .node = node, .back = -1};
}

unsigned pc_hist_record(struct pc_hist *h, const struct pc_opts *o, uint64_t period, double agg,
                        const uint32_t *ids, const double *d, uint32_t nids, double own,
                        double t_end, double loop_us)
{
	uint32_t set[PC_MAX_NODE + 1] = {0};
	unsigned before = h->nev;

	if (period >= h->cap)
		return 0;
	if (h->first == 0)
		h->first = period;
	h->last = period;
	h->ref[period] = pc_reference(o, period);
	h->agg[period] = agg;
	h->n[period] = nids;
	h->t_end[period] = t_end;
	h->loop_us[period] = loop_us;
	h->share_dev[period] = nids && agg > 0 ? fabs(own - agg / nids) / (agg / nids) : 1.0;
	for (uint32_t i = 0; i < nids; i++) {
		set[ids[i]] = 1;
		h->duty[period * PC_MAX_NODE + ids[i] - 1] = (float)d[ids[i]];
		if (ids[i] > h->max_id)
			h->max_id = ids[i];
	}
	if (period == o->step_at && period > h->first)
		add_event(h, period, PC_STEP, 0);
	if (period > h->first)
		for (uint32_t id = 1; id <= PC_MAX_NODE; id++)
			if (set[id] != h->prev_set[id])
				add_event(h, period, set[id] ? PC_JOIN : PC_LEAVE, id);
	memcpy(h->prev_set, set, sizeof(set));
	return h->nev - before;
}

static int in_band(const struct pc_hist *h, const struct pc_opts *o, uint64_t p)
{
	return fabs(h->agg[p] - h->ref[p]) <= o->band * h->ref[p];
}

/*
 * recovery -- periods from @from until the error is in the band and stays
 * there @hold periods: the aggregate's error, or with @share this node's
 * output against the mean output.
 */
static int64_t recovery(const struct pc_hist *h, const struct pc_opts *o, uint64_t from, int share)
{
	uint64_t run = 0;

	for (uint64_t p = from; p <= h->last; p++) {
		int ok;

		if (h->n[p] == 0)
			continue; /* not recorded (the barrier jumped after a partition) */
		ok = share ? h->share_dev[p] <= o->band : in_band(h, o, p);

		run = ok ? run + 1 : 0;
		if (run >= o->hold)
			return (int64_t)(p + 1 - run - from);
	}
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static const char *kind_name(int kind)
{
	return kind == PC_JOIN ? "join" : kind == PC_LEAVE ? "leave" : "step";
}

/* event_name -- "leave 3", "join 5", "step" */
static const char *event_name(const struct pc_event *e, char *buf, size_t len)
{
	if (e->kind == PC_STEP)
		snprintf(buf, len, "step");
	else
		snprintf(buf, len, "%s %u", kind_name(e->kind), e->node);
	return buf;
}

int pc_report(struct pc_hist *h, const struct pc_opts *o, uint32_t me, const struct pc_conv *c)
{
	uint64_t np = h->last >= h->first && h->first ? h->last - h->first + 1 : 0, settled = 0;
	uint64_t nrec = 0;
	double *lat, sq = 0, emax = 0, mean;
	int bad = 0;
	int64_t back0, back_share;
	char name[32];

	if (np == 0) {
		printf("node %u: no period recorded\n", me);
		return 1;
	}
	/* the loop period: every recorded period's loop turn */
	lat = malloc(np * sizeof(*lat));
	if (lat == NULL)
		return 1;
	for (uint64_t p = h->first; p <= h->last; p++)
		if (h->n[p])
			lat[nrec++] = h->loop_us[p];
	np = nrec; /* >= 1: the last period is recorded */
	qsort(lat, np, sizeof(*lat), cmp_double);
	printf("node %u: periods %llu..%llu, loop period median %.1f us, p99 %.1f us, max %.1f us"
	       "%s\n",
	       me, (unsigned long long)h->first, (unsigned long long)h->last, lat[np / 2],
	       lat[np * 99 / 100], lat[np - 1], o->period_us ? " (pace sleep excluded)" : "");
	free(lat);
	/* the start, the step and every join or leave: back in the band within o->bound */
	back0 = recovery(h, o, h->first, 0);
	printf("node %u: start at %llu: back in band (%.1f %%) after %lld periods\n", me,
	       (unsigned long long)h->first, o->band * 100, (long long)back0);
	for (unsigned i = 0; i < h->nev; i++) {
		struct pc_event *e = &h->ev[i];

		e->back = recovery(h, o, e->period, 0);
		if (e->back >= 0 && e->period >= 1 && h->t_end[e->period - 1] > 0)
			e->wall_ms =
			    (h->t_end[e->period + e->back] - h->t_end[e->period - 1]) * 1e3;
		e->peak = 0;
		for (uint64_t p = e->period; p <= h->last && p <= e->period + o->bound; p++)
			if (h->n[p] && fabs(h->agg[p] - h->ref[p]) / h->ref[p] > e->peak)
				e->peak = fabs(h->agg[p] - h->ref[p]) / h->ref[p];
		printf("node %u: event %s at period %llu: peak error %.2f %%, back in band after "
		       "%lld periods (%.1f ms wall)%s\n",
		       me, event_name(e, name, sizeof(name)), (unsigned long long)e->period,
		       e->peak * 100, (long long)e->back, e->wall_ms,
		       e->back < 0 || (uint64_t)e->back > o->bound ? " OVER THE BOUND" : "");
		if (e->back < 0 || (uint64_t)e->back > o->bound)
			bad = 1;
	}
	/* this node's share: its output within the band of the mean output */
	back_share = recovery(h, o, h->first, 1);
	printf("node %u: share: output within %.1f %% of the mean output after %lld periods from "
	       "its first period %llu\n",
	       me, o->band * 100, (long long)back_share, (unsigned long long)h->first);
	/* the tracking error after settling: skip o->bound periods after each event */
	for (uint64_t p = h->first; p <= h->last; p++) {
		int skip = p < h->first + o->bound || h->n[p] == 0;
		double err;

		for (unsigned i = 0; i < h->nev && !skip; i++)
			skip = p >= h->ev[i].period && p < h->ev[i].period + o->bound;
		if (skip)
			continue;
		err = fabs(h->agg[p] - h->ref[p]) / h->ref[p];
		sq += err * err;
		if (err > emax)
			emax = err;
		settled++;
	}
	mean = h->n[h->last] ? h->agg[h->last] / h->n[h->last] : 0;
	printf("node %u: tracking error after settling: rms %.3f %%, max %.3f %% over %llu "
	       "periods (band %.1f %%)\n",
	       me, settled ? sqrt(sq / (double)settled) * 100 : 0, emax * 100,
	       (unsigned long long)settled, o->band * 100);
	printf("node %u: at the end: %u members, aggregate %.3f V (reference %.1f V), this node "
	       "%.3f V (mean %.3f V, off by %.2f %%), duty %.4f, v_in %.2f V\n",
	       me, h->n[h->last], h->agg[h->last], h->ref[h->last], c->v_out, mean,
	       mean > 0 ? fabs(c->v_out - mean) / mean * 100 : 0, c->d, c->v_in);
	if (back0 < 0 || (uint64_t)back0 > o->bound || back_share < 0 ||
	    (uint64_t)back_share > o->bound || emax > o->band || settled == 0 ||
	    (mean > 0 && fabs(c->v_out - mean) > o->band * mean))
		bad = 1;
	printf("node %u: result %s\n", me, bad ? "FAIL" : "ok");
	return bad;
}

int pc_write_csv(const struct pc_hist *h, const char *path)
{
	FILE *f = fopen(path, "w");
	char name[32];

	if (f == NULL)
		return -1;
	fprintf(f, "period,time_ms,reference,aggregate,members");
	for (uint32_t id = 1; id <= h->max_id; id++)
		fprintf(f, ",d%u", id);
	fprintf(f, ",event\n");
	for (uint64_t p = h->first; p && p <= h->last; p++) {
		if (h->n[p] == 0)
			continue; /* not recorded */
		fprintf(f, "%llu,%.3f,%.3f,%.5f,%u", (unsigned long long)p, (double)p * 1.0,
		        h->ref[p], h->agg[p], h->n[p]);
		for (uint32_t id = 1; id <= h->max_id; id++) {
			float d = h->duty[p * PC_MAX_NODE + id - 1];

			if (isnan(d))
				fprintf(f, ",");
			else
				fprintf(f, ",%.5f", d);
		}
		fprintf(f, ",");
		for (unsigned i = 0, n = 0; i < h->nev; i++)
			if (h->ev[i].period == p)
				fprintf(f, "%s%s", n++ ? ";" : "",
				        event_name(&h->ev[i], name, sizeof(name)));
		fprintf(f, "\n");
	}
	return fclose(f) ? -1 : 0;
}

/* pc_write_png -- two panels with gnuplot: reference and aggregate; each node's duty cycle */
int pc_write_png(const struct pc_hist *h, const char *csv, const char *png)
{
	FILE *g = popen("gnuplot 2>&1", "w");
	char name[32];
	int ret;

	if (g == NULL)
		return -1;
	fprintf(g,
	        "set terminal pngcairo size 1100,800 noenhanced\n"
	        "set output '%s'\nset datafile separator ','\nset key outside right\n"
	        "set grid\nset lmargin at screen 0.08\nset rmargin at screen 0.82\n"
	        "set multiplot layout 2,1\n",
	        png);
	for (unsigned i = 0; i < h->nev; i++) {
		const struct pc_event *e = &h->ev[i];

		fprintf(g,
		        "set arrow from %llu, graph 0 to %llu, graph 1 nohead dt 2 lc rgb '%s'\n"
		        "set label '%s' at %llu, graph 0.95 offset 0.5,0 tc rgb '%s'\n",
		        (unsigned long long)e->period, (unsigned long long)e->period,
		        e->kind == PC_LEAVE  ? "red"
		        : e->kind == PC_JOIN ? "dark-green"
		                             : "gray40",
		        event_name(e, name, sizeof(name)), (unsigned long long)e->period,
		        e->kind == PC_LEAVE  ? "red"
		        : e->kind == PC_JOIN ? "dark-green"
		                             : "gray40");
	}
	fprintf(g,
	        "set title 'aggregate output (sum of the converters) and reference'\n"
	        "set ylabel 'V'\n"
	        "plot '%s' skip 1 using 2:3 with lines lw 2 title 'reference', "
	        "'' skip 1 using 2:4 with lines title 'aggregate'\n"
	        "set title 'duty cycle of each node'\nset ylabel 'd'\nset xlabel 'simulated time, "
	        "ms (1 period = 1 ms)'\nset yrange [0:1]\nplot ",
	        csv);
	for (uint32_t id = 1; id <= h->max_id; id++)
		fprintf(g, "%s'%s' skip 1 using 2:%u with lines title 'node %u'",
		        id > 1 ? ", " : "", csv, 5 + id, id);
	fprintf(g, "\nunset multiplot\n");
	ret = pclose(g);
	return ret == 0 ? 0 : -1;
}
