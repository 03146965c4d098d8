/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench.h -- what the benchmark programs share (bench/ only): the clock,
 * sorting latencies, dying on an error, the bounded poll loop and where
 * result files go by default.
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef LOCO_BENCH_H
#define LOCO_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

#include <loco/rpc.h>

/* bench_now_ns / bench_now_us -- CLOCK_MONOTONIC. */
uint64_t bench_now_ns(void);
double bench_now_us(void);

/* bench_cmp_double -- qsort() order of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* bench_die -- "program: @what: loco_strerror(@err)" on stderr, then exit(1). */
noreturn void bench_die(const char *what, int err);

/*
 * bench_poll -- the poll loop of the benchmarks: call @poll(@arg) until it
 * returns nonzero (> 0 done, < 0 an error), for at most @timeout_ms from
 * the first call that found nothing (a first call that succeeds costs no
 * clock read). After each call that returned 0, wait: @idle(@arg) when
 * @idle is not NULL, else sleep @sleep_us (0: spin). Returns what @poll
 * returned, or 0 when the time ran out.
 */
int bench_poll(int (*poll)(void *arg), void (*idle)(void *arg), void *arg, unsigned sleep_us,
               int64_t timeout_ms);

/*
 * bench_result_path -- the default path of a result file: printf(@fmt, ...)
 * in the results directory, which is $LOCO_BENCH_OUT when set, else
 * results/ beside the running program (build/bench/results/ for a meson
 * build): never the source tree unasked. The directory is created (with
 * its parents) when missing. Writes at most @len bytes into @buf; returns
 * @buf, or dies (bench_die) when the path does not fit or the directory
 * cannot be made.
 */
char *bench_result_path(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* bench_rpc_echo -- an rpc handler that returns its arguments. */
int bench_rpc_echo(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);

/* bench_rpc_stop -- an rpc handler that sets the int at @arg to 1 (bench_rpc_serve()'s end). */
int bench_rpc_stop(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap, size_t *rl);

/*
 * bench_rpc_serve -- a server's loop: loco_rpc_progress() on @ep[0 .. @n) until *@fin,
 * pausing by @m's wait policy when nothing came. Dies on an error.
 */
void bench_rpc_serve(loco_rpc_ep_t *const *ep, int n, loco_manager_t *m, const int *fin);

#endif /* LOCO_BENCH_H */
