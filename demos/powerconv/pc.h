/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pc.h -- the power-converter demo's model, control law, history and
 * output (pc-model.c), shared with its LOCO loop (powerconv.c).
 *
 * Thread safety: single-threaded (each node's main thread only).
 */
#ifndef PC_H
#define PC_H

#include <stdint.h>
#include <stdio.h>

#define PC_MAX_NODE   32u /* node ids 1 .. this take part (the sst's max_rows) */
#define PC_MAX_EVENTS 64u

/* what a node publishes for one period */
struct pc_meas {
	double v_in;  /* its input voltage, V */
	double v_out; /* its output voltage, V */
	double d;     /* the duty cycle it applied, 0 .. 1 */
	double share; /* the share of the reference it was given (1 / members) */
};

/* a node's sst row: this period's values and the previous one's (double buffer) */
struct pc_row {
	uint64_t period;      /* the period of cur (0: nothing published yet) */
	uint64_t prev_period; /* the period of prev (0: none) */
	struct pc_meas cur, prev;
};

/* the options, the same on every node (added nodes get the same arguments) */
struct pc_opts {
	uint64_t periods; /* the last period */
	double ref, ref2; /* the reference (sum of outputs), V, before and after the step */
	uint64_t step_at; /* the period of the step */
	uint64_t seed;    /* the noise seed, mixed with the node id */
	uint32_t writer;  /* the node that writes the CSV and the PNG */
	const char *csv, *png;
	double band;        /* the error band, a fraction of the reference */
	uint64_t hold;      /* periods the error stays in the band to count as back */
	uint64_t bound;     /* the stated recovery bound, periods */
	uint64_t period_us; /* pace: at least this wall time per period (0: free running) */
	uint64_t progress;  /* print a line every this many periods (0: never) */
	int check;          /* exit 1 when a check fails */
};

/* one converter, simulated by its node */
struct pc_conv {
	uint64_t rng;
	double v_in_nom, drift_amp, drift_period, drift_phase;
	double v_in, v_out, d;
	double integ; /* the PI law's integral term, V */
};

enum pc_event_kind {
	PC_JOIN,
	PC_LEAVE,
	PC_STEP
};

struct pc_event {
	uint64_t period; /* the first period the change shows in */
	int kind;        /* enum pc_event_kind */
	uint32_t node;   /* 0 for PC_STEP */
	int64_t back;    /* periods until back in the band and held there; -1: never */
	double wall_ms;  /* wall time from the end of the period before to back in band */
	double peak;     /* the largest |aggregate - reference| / reference until then */
};

/* a node's record of the run, allocated before the loop */
struct pc_hist {
	uint64_t first, last; /* periods recorded: first .. last */
	uint64_t cap;         /* periods it has room for (from period 1) */
	double *ref, *agg;    /* by period */
	uint32_t *n;          /* members counted, by period */
	float *duty;          /* [period * PC_MAX_NODE + id - 1], NAN when absent */
	double *t_end;        /* wall time, s, at the end of each period's barrier */
	double *loop_us;      /* wall time of each period's loop turn (pace sleep excluded) */
	double *share_dev;    /* |this node's output - the mean output| / the mean, by period */
	uint32_t prev_set[PC_MAX_NODE + 1], max_id;
	struct pc_event ev[PC_MAX_EVENTS];
	unsigned nev;
};

double pc_now_s(void);
double pc_reference(const struct pc_opts *o, uint64_t period);
void pc_conv_init(struct pc_conv *c, uint32_t node, uint64_t seed);
/* pc_conv_step -- simulate @period with the duty cycle already in c->d: v_in, v_out */
void pc_conv_step(struct pc_conv *c, uint64_t period);
/*
 * pc_control -- the PI law: from the aggregate @agg of @n members, this
 * node's share and output, the duty cycle for the next period.
 */
void pc_control(struct pc_conv *c, double ref_now, double ref_next, double agg, uint32_t n);

int pc_hist_init(struct pc_hist *h, uint64_t periods);
void pc_hist_free(struct pc_hist *h);
/*
 * pc_hist_record -- the period's reference, aggregate and duty cycles
 * (@d[id] for each of the @nids ids in @ids), this node's output @own;
 * adds join/leave events
 * against the previous period's set. Returns the number of events added.
 */
unsigned pc_hist_record(struct pc_hist *h, const struct pc_opts *o, uint64_t period, double agg,
                        const uint32_t *ids, const double *d, uint32_t nids, double own,
                        double t_end, double loop_us);
/* pc_report -- the figures and checks, printed with prefix "node @me: ". Returns 0: all ok. */
int pc_report(struct pc_hist *h, const struct pc_opts *o, uint32_t me, const struct pc_conv *c);
int pc_write_csv(const struct pc_hist *h, const char *path);
int pc_write_png(const struct pc_hist *h, const char *csv, const char *png);

#endif /* PC_H */
