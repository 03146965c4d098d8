# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash disable=SC2034 # HELLO, NODE... are used by the sourcing test
# common.sh -- shared helpers of the launch tests (mpirun.sh, slurm.sh), sourced by each.
#
# A test is run as `bash tests/launch/<name>.sh HELLO LAUNCH_NODE pmix|no-pmix [LOCO_RUN]`
# and exits 0
# (pass), 1 (fail) or 77 (skip, the reason on stdout). Every process it starts carries
# LOCO_TEST_MARK (a value unique to this run) in its environment, the launchers' daemons and
# the nodes they start included; the EXIT trap ends each such process by PID, so a failing or
# timed-out test leaves nothing behind.
set -uo pipefail

HELLO=${1:?usage: $0 HELLO LAUNCH_NODE pmix|no-pmix}
NODE=${2:?usage: $0 HELLO LAUNCH_NODE pmix|no-pmix}
BOOT=${3:?usage: $0 HELLO LAUNCH_NODE pmix|no-pmix}
LOCO_RUN=${4:-}
FAILS=0
PIDS=()
# what the nodes read must come from the launcher: no LOCO_* setting from outside
for v in $(compgen -e | grep '^LOCO_' | grep -v -e '^LOCO_FABRIC$' -e '^LOCO_TEST_SCALE$'); do
	unset "$v"
done
# sanitizer builds: what libpmix itself leaks is not ours (lsan.supp)
LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lsan.supp"
export LSAN_OPTIONS
T=$(mktemp -d "${TMPDIR:-/tmp}/loco-launch-test.XXXXXX")
export LOCO_TEST_MARK="launchmark-$$-$RANDOM$RANDOM"

skip() {
	echo "SKIP: $*"
	exit 77
}

check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@"; then
		echo "ok: $what"
	else
		echo "FAIL: $what"
		FAILS=$((FAILS + 1))
	fi
}

# marked_pids -- the PIDs of the processes that carry this run's LOCO_TEST_MARK.
marked_pids() {
	local p
	for p in /proc/[0-9]*; do
		[[ ${p#/proc/} == "$$" ]] && continue
		if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "LOCO_TEST_MARK=$LOCO_TEST_MARK"; then
			echo "${p#/proc/}"
		fi
	done
}

# cleanup -- end what this run started: the recorded PIDs, then every marked process.
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	sleep 0.5
	for pid in "${PIDS[@]}" $(marked_pids); do
		kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

# need_packages PKG:CMD... -- install the missing ones with apt-get (as root or through
# sudo -n; tools/test's way); a package counts as present when its command is on PATH or
# dpkg says it is installed. Returns 1 (with a reason on stdout) when they cannot be had.
need_packages() {
	local missing=() entry pkg cmd sudo=()
	for entry in "$@"; do
		pkg=${entry%%:*}
		cmd=${entry#*:}
		[[ -n $cmd ]] && command -v "$cmd" >/dev/null 2>&1 && continue
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' && continue
		missing+=("$pkg")
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "missing packages (${missing[*]}) and no apt-get"
		return 1
	fi
	if [[ $(id -u) -ne 0 ]]; then
		if sudo -n true 2>/dev/null; then
			sudo=(sudo -n)
		else
			echo "missing packages (${missing[*]}); not root and no sudo -n"
			return 1
		fi
	fi
	echo "installing ${missing[*]}"
	"${sudo[@]}" apt-get update -q </dev/null >"$T/apt.log" 2>&1 &&
		DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
			--no-install-recommends "${missing[@]}" </dev/null >>"$T/apt.log" 2>&1 || {
		echo "apt-get install ${missing[*]} failed:"
		tail -5 "$T/apt.log"
		return 1
	}
}

# run_bounded SECS OUT CMD... -- run CMD (stdout and stderr to OUT) for at most SECS seconds,
# then TERM and KILL it; RC is its exit status (124 when it was ended), MS its run time.
run_bounded() {
	local secs=$1 out=$2 pid t0 i
	shift 2
	t0=$(date +%s%N)
	"$@" >"$out" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		sleep 2
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		RC=124
	else
		wait "$pid"
		RC=$?
	fi
	MS=$((($(date +%s%N) - t0) / 1000000))
}

# count PATTERN FILE -- how many lines of FILE match the extended regex PATTERN.
count() {
	grep -cE -- "$1" "$2"
}

# show FILE -- a failed run's output, for the log: its errors, then its end.
show() {
	echo "--- $1 (errors):"
	grep -E '^FAIL|set-up:|loco_init:|error' "$1" | head -n 20
	echo "--- $1 (end):"
	tail -n 30 "$1"
	echo "---"
}

# The runs where a node dies or leaves use a failure bound of 3 s instead of 1 s: they test
# what the survivors see, not how fast, and 4 nodes on a loaded 2-core machine otherwise
# suspect each other now and then (seen at load 19). The other runs set no LOCO_* variable.
FAIL_MS=3000

[[ $BOOT == pmix ]] ||
	skip "liboco was built without the PMIx bootstrap (libpmix-dev missing, or -Dpmix=disabled)"
[[ -x $HELLO && -x $NODE ]] || skip "$HELLO or $NODE is not built"
echo "fabric: ${LOCO_FABRIC:-tcp}"
