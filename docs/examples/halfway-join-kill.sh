#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# halfway-join-kill.sh -- halfway under `loco-run --keep-going --control`: 4 nodes start, a
# fifth is added through the control socket while they run, then node 3 is SIGKILLed. The
# launch must exit 0 (a node ended by the kill command is no failure), nodes 1, 2, 4 and 5
# must print their final line (each exits 0 only when converged), node 3 none. Every wait is
# bounded; the launcher is ended by its PID. ROUNDS must outlast the add and the kill (~3 s):
# the suite runs 40000 (about 10 s at 0.25 ms a round on tcp, 2 cores).
#
#   docs/examples/halfway-join-kill.sh LOCO_RUN HALFWAY [ROUNDS]
set -u
LR=${1:?usage: $0 LOCO_RUN HALFWAY [ROUNDS]}
HW=${2:?usage: $0 LOCO_RUN HALFWAY [ROUNDS]}
ROUNDS=${3:-20000}
T=$(mktemp -d)
CTL=$T/ctl
FAILS=0
"$LR" -n 4 --keep-going --control "$CTL" --timeout 170 "$HW" "$ROUNDS" >"$T/out" 2>"$T/err" &
LRPID=$!
trap 'kill -KILL $LRPID 2>/dev/null; rm -rf "$T"' EXIT

check() { # check WHAT CMD...: run CMD, count a failure
	if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; FAILS=$((FAILS + 1)); fi
}
for _ in $(seq 1 200); do [ -S "$CTL" ] && break; sleep 0.1; done
sleep 1
"$LR" --ctl "$CTL" add >"$T/add" 2>&1
check "add: $(head -1 "$T/add")" grep -qx 'ok added 5' "$T/add"
sleep 1.5
"$LR" --ctl "$CTL" kill 3 KILL >"$T/kill" 2>&1
check "kill: $(head -1 "$T/kill")" grep -qE '^ok sent SIGKILL to node 3' "$T/kill"
for _ in $(seq 1 1500); do kill -0 $LRPID 2>/dev/null || break; sleep 0.1; done
wait $LRPID
RC=$?
grep -E '^\[[0-9]+\] node' "$T/out"
check "loco-run exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for id in 1 2 4 5; do
	check "node $id converged" grep -qE "^\[$id\] node $id: round $ROUNDS" "$T/out"
done
check "node 3 (killed) printed no final line" eval "! grep -q '^\[3\] node 3:' '$T/out'"
((FAILS == 0)) || tail -20 "$T/err"
exit $((FAILS != 0))
