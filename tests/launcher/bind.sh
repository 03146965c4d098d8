#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# bind.sh -- --bind (loco-run(1)): node k of the launch runs on the (k mod count)-th CPU of the
# launcher's own set, round robin, as mpirun --bind-to core places rank k; without it a node
# keeps the launcher's whole set. The launcher runs under taskset on a set of its own choosing
# (two CPUs when the machine has them), so the expected places are known.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mapfile -t cpus < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | while IFS=- read -r a b; do
	seq "$a" "${b:-$a}"
done)
if [[ ${#cpus[@]} -lt 1 ]] || ! command -v taskset >/dev/null; then
	echo "SKIP: taskset or this process's CPU set unavailable"
	exit 77
fi
set_=("${cpus[@]:0:2}")
list=$(IFS=,; echo "${set_[*]}")

# run_lr_under -- run_lr (common.sh) with the launcher under taskset -c LIST.
run_lr_under() {
	local list=$1
	shift
	timeout -k 5 50 taskset -c "$list" "$LR" "$@" >"$T/out" 2>"$T/err"
	RC=$?
}

DUMP='grep Cpus_allowed_list /proc/$$/status | cut -f2 >"$T/$RUN.$LOCO_NODE_ID"'

# --- bound: 5 nodes on the chosen set, node k on set[k mod count]
RUN=bound run_lr_under "$list" --bind -n 5 bash -c "$DUMP"
check "bound launch exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for k in 0 1 2 3 4; do
	want=${set_[$((k % ${#set_[@]}))]}
	got=$(cat "$T/bound.$((k + 1))" 2>/dev/null)
	check "node $((k + 1)) bound to CPU $want (got '$got')" [ "$got" = "$want" ]
done

# --- unbound: every node keeps the launcher's set
RUN=free run_lr_under "$list" -n 2 bash -c "$DUMP"
check "unbound launch exits 0 (rc $RC)" [ "$RC" -eq 0 ]
want=$(taskset -c "$list" bash -c 'grep Cpus_allowed_list /proc/$$/status | cut -f2')
for id in 1 2; do
	got=$(cat "$T/free.$id" 2>/dev/null)
	check "node $id keeps the launcher's set $want (got '$got')" [ "$got" = "$want" ]
done
finish
