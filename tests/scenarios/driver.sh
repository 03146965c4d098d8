# shellcheck shell=bash
# SPDX-License-Identifier: BSD-2-Clause
# driver.sh -- shared helpers of the scenario shell drivers, sourced by each driver.
#
# A driver is run as `bash tests/scenarios/<name>.sh PROGRAM [LOCO_RUN]` and exits 0 (pass),
# 1 (fail) or 77 (skip). Every process it starts is recorded by PID and ended by the EXIT trap
# (SIGKILL), also when a check fails; each wait is bounded.
set -uo pipefail

PROG=${1:?usage: $0 PROGRAM [LOCO_RUN]}
LR=${2:-}
if [[ ! -x $PROG ]]; then
	echo "FAIL: $PROG is not executable"
	exit 1
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/loco-scenario.XXXXXX")
PIDS=()
RC=0
export RC # set by wait_pid and run_lr, read by the drivers
FAILS=0
CLEANUPS=()

# cleanup -- SIGKILL every recorded process (by PID), run the registered cleanups, remove $T.
cleanup() {
	local pid c
	for pid in "${PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	for c in "${CLEANUPS[@]}"; do
		eval "$c"
	done
	# LOCO_SCENARIO_KEEP=DIR: a failed run's files (nodes' output, state, records) go to DIR
	if [[ -n ${LOCO_SCENARIO_KEEP:-} && $FAILS -gt 0 ]]; then
		mkdir -p "$LOCO_SCENARIO_KEEP" && cp -r "$T" "$LOCO_SCENARIO_KEEP/"
	fi
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP # meson's timeout or ^C: still clean up

fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

ok() {
	echo "ok: $*"
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

# need_loco_run -- skip when the launcher was not built.
need_loco_run() {
	if [[ -z $LR || ! -x $LR ]]; then
		echo "SKIP: loco-run was not built"
		exit 77
	fi
}

# wait_pid -- wait up to SECONDS for background PID to exit; sets RC (999: still running,
# then it is SIGKILLed). The process must be a child of this shell.
wait_pid() {
	local secs=$1 pid=$2 i st
	RC=999
	for ((i = 0; i < secs * 20; i++)); do
		st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) || break
		[[ -z $st || $st == Z ]] && break
		sleep 0.05
	done
	st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)
	if [[ -n $st && $st != Z ]]; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return
	fi
	wait "$pid"
	RC=$?
}

# run_lr -- run loco-run ARGS... in the background (recorded), wait up to $LR_WAIT seconds
# (default 110); output (stdout and stderr) in $T/out; sets RC.
run_lr() {
	"$LR" "$@" >"$T/out" 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	wait_pid "${LR_WAIT:-110}" "$pid"
}

# has -- true when $T/out has a line matching the extended regex RE.
has() {
	grep -Eq -- "$1" "$T/out"
}

# Network namespaces a driver makes (ns_add), deleted by the EXIT trap.
NS_MADE=()
# shellcheck disable=SC2317 # run by the EXIT trap, through CLEANUPS
ns_del_all() {
	local ns
	for ns in "${NS_MADE[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
}
CLEANUPS+=(ns_del_all)

# ns_add NAME -- make network namespace NAME (deleted at exit). The driver's first one skips the
# test (77) when this host cannot make namespaces (not root, or no iproute2); a later one that
# fails fails the test.
ns_add() {
	local err
	if ! command -v ip >/dev/null 2>&1; then
		echo "SKIP: the ip command (iproute2) is not installed"
		exit 77
	fi
	if ! err=$(ip netns add "$1" 2>&1); then
		if ((${#NS_MADE[@]} == 0)); then
			echo "SKIP: cannot create a network namespace (ip netns add: $err); run as root"
			exit 77
		fi
		fail "ip netns add $1: $err"
		finish
	fi
	NS_MADE+=("$1")
}
