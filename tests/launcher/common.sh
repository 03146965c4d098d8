# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash disable=SC2034 # RC, ELAPSED... are set here for the sourcing test
# common.sh -- shared helpers of the launcher tests, sourced by each test script.
#
# A test is run as `bash tests/launcher/<name>.sh <path of loco-run>` and exits 0 (pass),
# 1 (fail) or 77 (skip). Every process a test starts is found again by a marker unique to this
# run ($MARK, put into argv[0] of the long sleepers with `exec -a`) or by a recorded PID, and
# the EXIT trap ends whatever is left by PID, so a failing test leaves nothing behind either.
set -uo pipefail

LR=${1:?usage: $0 PATH_OF_LOCO_RUN}
if [[ ! -x $LR ]]; then
	echo "SKIP: $LR is not executable"
	exit 77
fi
for tool in pgrep timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found"
		exit 77
	fi
done

T=$(mktemp -d "${TMPDIR:-/tmp}/loco-run-test.XXXXXX")
MARK="lrmark-$$-$RANDOM$RANDOM"
export MARK T
LR_PIDS=()
FAILS=0

# cleanup -- end what a failed test left (launchers first, then marked processes), by PID.
cleanup() {
	local pid
	for pid in "${LR_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null
	done
	for pid in $(pgrep -f -- "$MARK"); do
		kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

# fail -- record a failed check with its message; the test goes on, and exits 1 at the end.
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

# ok -- a passed check, for the log.
ok() {
	echo "ok: $*"
}

# check -- ok or fail for a condition given as a command: check MSG CMD ARGS...
check() {
	local msg=$1
	shift
	if "$@"; then
		ok "$msg"
	else
		fail "$msg"
	fi
}

# matches -- true when STRING matches the extended regex RE (a command, for check).
matches() {
	[[ $1 =~ $2 ]]
}

# finish -- exit 0 when no check failed, else 1.
finish() {
	if ((FAILS > 0)); then
		echo "$FAILS check(s) failed"
		exit 1
	fi
	echo "all checks passed"
	exit 0
}

# marked -- how many live processes carry $MARK in their command line.
marked() {
	pgrep -f -- "$MARK" | wc -l
}

# wait_until -- poll CMD ARGS... every 0.05 s for up to SECONDS; 0 when it became true.
wait_until() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 20; i++)); do
		if "$@"; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# marked_is -- true when exactly N marked processes are alive.
marked_is() {
	[[ $(marked) -eq $1 ]]
}

# groups_gone -- true when no process group recorded in $T/pgid.* has a member left.
groups_gone() {
	local f
	for f in "$T"/pgid.*; do
		[[ -e $f ]] || continue
		if kill -0 -- "-$(cat "$f")" 2>/dev/null; then
			echo "process group $(cat "$f") (${f##*/}) still has members"
			return 1
		fi
	done
	return 0
}

# groups_alive -- true when every group recorded in $T/pgid.* exists (the positive control).
groups_alive() {
	local f n=0
	for f in "$T"/pgid.*; do
		[[ -e $f ]] || continue
		kill -0 -- "-$(cat "$f")" 2>/dev/null || return 1
		n=$((n + 1))
	done
	((n > 0))
}

# run_lr -- run the launcher in the foreground with a safety timeout; sets RC and ELAPSED (ms).
# Its stdout and stderr go to $T/out and $T/err.
run_lr() {
	local t0 t1
	t0=$(date +%s%N)
	timeout -k 5 50 "$LR" "$@" >"$T/out" 2>"$T/err"
	RC=$?
	t1=$(date +%s%N)
	ELAPSED=$(((t1 - t0) / 1000000))
}

# start_lr -- start the launcher in the background (no timeout wrapper, so $LR_PID is the
# launcher itself); stdout and stderr go to $T/out and $T/err.
start_lr() {
	"$LR" "$@" >"$T/out" 2>"$T/err" &
	LR_PID=$!
	LR_PIDS+=("$LR_PID")
	LR_T0=$(date +%s%N)
}

# lr_exited -- true once the background launcher has exited (it is then a zombie until waited).
lr_exited() {
	local st
	st=$(cut -d' ' -f3 "/proc/$LR_PID/stat" 2>/dev/null) || return 0
	[[ -z $st || $st == Z ]]
}

# wait_lr -- wait for the background launcher for up to SECONDS; sets RC and ELAPSED (ms).
# A launcher still running then is killed and RC is set to 999.
wait_lr() {
	if wait_until "$1" lr_exited; then
		wait "$LR_PID"
		RC=$?
	else
		kill -KILL "$LR_PID" 2>/dev/null
		wait "$LR_PID" 2>/dev/null
		RC=999
	fi
	ELAPSED=$((($(date +%s%N) - LR_T0) / 1000000))
}

# show -- print the launcher's output, for the log of a failed check.
show() {
	echo "--- stdout:"
	cat "$T/out"
	echo "--- stderr:"
	cat "$T/err"
	echo "---"
}
