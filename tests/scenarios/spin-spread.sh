#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# spin-spread.sh -- the spin policy's start (LOCO_SPREAD, liboco/spread.c): 4 nodes on this
# host with LOCO_WAIT=spin each log, at their join, the CPU they start on: node k the
# ((k-1) mod C)-th of the C CPUs loco-run may use, so that spinning nodes share the CPUs
# evenly; each node's CPU mask is unchanged after the join (spin-spread.c). Nobody is moved
# with LOCO_SPREAD=0, under the default wait policy, or when each node may use one CPU
# (loco-run --bind). Skips with fewer than 2 CPUs.
#
#   bash spin-spread.sh PROGRAM LOCO_RUN
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
need_loco_run

# the CPUs this shell (and so loco-run and its nodes) may use, in order
cpus=()
while IFS= read -r part; do
	if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
		for ((c = BASH_REMATCH[1]; c <= BASH_REMATCH[2]; c++)); do cpus+=("$c"); done
	elif [[ $part =~ ^[0-9]+$ ]]; then
		cpus+=("$part")
	fi
done < <(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status | tr ',' '\n')
if ((${#cpus[@]} < 2)); then
	echo "SKIP: this process may use ${#cpus[@]} CPU(s); spreading needs 2"
	exit 77
fi

export LOCO_LOG=info
placed='info: wait: spin: node [0-9]+ \(index [0-9]+ of the [0-9]+ nodes on this host\) starts on CPU'

# run WAIT SPREAD [LOCO-RUN-ARGS...] -- one 4-node run; its output in $T/out
run() {
	local wait=$1 spread=$2
	shift 2
	LOCO_WAIT=$wait LOCO_SPREAD=$spread run_lr -n 4 --timeout 50 "$@" "$PROG"
	if [[ $RC -eq 0 ]]; then
		ok "LOCO_WAIT=$wait LOCO_SPREAD=$spread $*: every node exited 0"
	else
		fail "LOCO_WAIT=$wait LOCO_SPREAD=$spread $*: loco-run exited with status $RC"
		cat "$T/out"
	fi
	for n in 1 2 3 4; do
		if ! has "^\[$n\] spin-spread: node $n: on CPU [0-9]+ after the join, mask kept"; then
			fail "node $n did not report its mask kept after the join"
		fi
	done
}

run spin 1
for n in 1 2 3 4; do
	want=${cpus[$(((n - 1) % ${#cpus[@]}))]}
	line="^\[$n\] loco\[[0-9]+\]( [0-9.]+)? info: wait: spin: node $n \(index $((n - 1)) of the 4 nodes on this host\) starts on CPU $want \(of the ${#cpus[@]} it may use\)$"
	if has "$line"; then
		ok "spin: node $n starts on CPU $want"
	else
		fail "spin: node $n did not log its start on CPU $want:" \
			"$(grep -E "^\[$n\] .*wait: spin" "$T/out" || echo '(no line)')"
	fi
done
if [[ $(grep -cE "$placed" "$T/out") -eq 4 ]]; then
	ok "spin: one placement per node (the first join only)"
else
	fail "spin: $(grep -cE "$placed" "$T/out") placement lines for 4 nodes"
fi

for how in "spin 0" "sleep 1" "spin 1 --bind"; do
	# shellcheck disable=SC2086 # words on purpose
	run $how
	if has "$placed"; then
		fail "$how: a node was moved: $(grep -E "$placed" "$T/out" | head -1)"
	else
		ok "$how: nobody moved"
	fi
done
finish
