/* SPDX-License-Identifier: BSD-2-Clause */
/* proc.c -- child processes of a test program: see proc.h. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include "proc.h"

static int64_t proc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int proc_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

int proc_wait(pid_t pid, int timeout_ms, unsigned poll_ms)
{
	int64_t deadline = proc_now_ms() + timeout_ms;
	struct timespec pause = {.tv_sec = poll_ms / 1000,
	                         .tv_nsec = (long)(poll_ms % 1000) * 1000000};
	int st;

	for (;;) {
		struct timespec left = pause;
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return proc_status(st);
		if (r < 0 && errno != EINTR)
			return PROC_EWAIT;
		if (proc_now_ms() >= deadline)
			return PROC_TIMEOUT;
		while (nanosleep(&left, &left) < 0 && errno == EINTR)
			;
	}
}

int proc_kill(pid_t pid)
{
	int st;

	if (kill(pid, SIGKILL) < 0)
		return PROC_EKILL;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return PROC_EWAIT;
	return proc_status(st);
}

void proc_kill_all(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			pids[i] = 0;
		}
	}
}
