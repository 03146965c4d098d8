/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * proc.h -- child processes of a test program: exit statuses, bounded
 * waits, SIGKILL and reap. Shared by the t_ helpers (tests/helpers.c) and
 * the sc_ helpers (tests/scenarios/scenario.c), which keep their own
 * registries of children and their own way of failing and logging.
 *
 * Functions return a status or a negative PROC_* code and never fail the
 * test themselves. Thread safety: like waitpid(), whichever thread reaps.
 */
#ifndef LOCO_TESTS_PROC_H
#define LOCO_TESTS_PROC_H

#include <sys/types.h>

#define PROC_TIMEOUT (-1) /* proc_wait: the child did not exit in time */
#define PROC_EWAIT   (-2) /* waitpid() failed; errno says why */
#define PROC_EKILL   (-3) /* kill() failed; errno says why */

/*
 * proc_status -- what a waitpid() status @st says: the exit code, 128 +
 * the signal that ended the child, or -1 (stopped or continued).
 */
int proc_status(int st);

/*
 * proc_wait -- wait up to @timeout_ms for child @pid to exit, looking every
 * @poll_ms. Returns its proc_status(), PROC_TIMEOUT (it still runs, and is
 * still a child), or PROC_EWAIT.
 */
int proc_wait(pid_t pid, int timeout_ms, unsigned poll_ms);

/*
 * proc_kill -- SIGKILL child @pid and reap it. Returns its proc_status(),
 * PROC_EKILL or PROC_EWAIT.
 */
int proc_kill(pid_t pid);

/*
 * proc_kill_all -- SIGKILL and reap every child in @pids[0..@n) that is
 * > 0, and zero its slot. Async-signal-safe (for alarm handlers and exit
 * paths).
 */
void proc_kill_all(pid_t *pids, int n);

#endif /* LOCO_TESTS_PROC_H */
