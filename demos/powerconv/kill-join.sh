#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# kill-join.sh -- powerconv under `loco-run --keep-going --control`: 3 nodes start (paced at
# 1 ms a period), node 3 is SIGKILLed through the control socket at about period 3000 (after
# the reference step at 2000), and a
# node (4) is added once the others have run 1500 periods without it. Checks, on the numbers
# the demo prints (simulated periods only, no wall-clock figure is asserted):
#   - the launch exits 0, nodes 1, 2 and 4 end with "result ok", node 3 prints no result;
#   - node 1 saw "leave 3" and "join 4" and was back in the error band (2 % of the reference,
#     held 50 periods) within BOUND periods after each;
#   - node 4 took its share: its output within 2 % of the mean output within BOUND periods;
#   - the tracking error after settling stayed within the band (part of "result ok");
#   - the CSV holds both events, and the PNG was drawn when gnuplot is installed.
# Every wait is bounded; the launcher is ended by its PID.
#
#   demos/powerconv/kill-join.sh LOCO_RUN POWERCONV [PERIODS] [BOUND]
#
# With PC_KEEP=DIR the run's output, CSV and PNG are copied into DIR.
set -u
LR=${1:?usage: $0 LOCO_RUN POWERCONV [PERIODS] [BOUND]}
PC=${2:?usage: $0 LOCO_RUN POWERCONV [PERIODS] [BOUND]}
# 7000 periods: the kill at 3000, the add at ~4500, node 4 in at ~4550, and ~2450 periods after
# it (12 times the bound) to settle and be checked; 16000 took 42 s of the suite (66 s in the
# sanitizer build) and checked nothing more
PERIODS=${3:-7000}
BOUND=${4:-200}
T=$(mktemp -d)
CTL=$T/ctl
FAILS=0
"$LR" -n 3 --keep-going --control "$CTL" --timeout 170 "$PC" --periods "$PERIODS" \
	--period-us 1000 --progress 500 --bound "$BOUND" --check --csv "$T/pc.csv" \
	--png "$T/pc.png" >"$T/out" 2>"$T/err" &
LRPID=$!
trap 'kill -KILL $LRPID 2>/dev/null; rm -rf "$T"' EXIT

check() { # check WHAT CMD...: run CMD, count a failure
	if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; FAILS=$((FAILS + 1)); fi
}
wait_for() { # wait_for ERE SECONDS: until a line of the output matches (bounded)
	for _ in $(seq 1 $(($2 * 10))); do
		grep -qE "$1" "$T/out" && return 0
		kill -0 $LRPID 2>/dev/null || break
		sleep 0.1
	done
	grep -qE "$1" "$T/out"
}
check "node 1 reached period 3000" wait_for '^\[1\] node 1: period 3000,' 90
"$LR" --ctl "$CTL" kill 3 KILL >"$T/kill" 2>&1
check "kill: $(head -1 "$T/kill")" grep -qE '^ok sent SIGKILL to node 3' "$T/kill"
check "node 1 saw node 3 leave" wait_for '^\[1\] node 1: period [0-9]+: leave 3' 30
L=$(sed -nE 's/^\[1\] node 1: period ([0-9]+): leave 3.*/\1/p' "$T/out" | head -1)
NEXT=$(((${L:-3000} / 500 + 3) * 500))
check "node 1 reached period $NEXT" wait_for "^\[1\] node 1: period $NEXT," 30
"$LR" --ctl "$CTL" add >"$T/add" 2>&1
check "add: $(head -1 "$T/add")" grep -qx 'ok added 4' "$T/add"
check "node 1 saw node 4 join" wait_for '^\[1\] node 1: period [0-9]+: join 4' 40
for _ in $(seq 1 1500); do kill -0 $LRPID 2>/dev/null || break; sleep 0.1; done
wait $LRPID
RC=$?
grep -E '^\[[0-9]+\] node [0-9]+: (period [0-9]+: |joined|periods|event|start|share|tracking|at the end|result)' "$T/out"
check "loco-run exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for id in 1 2 4; do
	check "node $id: result ok" grep -qx "\[$id\] node $id: result ok" "$T/out"
done
check "node 3 (killed) printed no result" eval "! grep -q '^\[3\] node 3: result' '$T/out'"
for ev in "leave 3" "join 4"; do
	N=$(sed -nE "s/^\[1\] node 1: event $ev at period [0-9]+: .*back in band after (-?[0-9]+) periods.*/\1/p" "$T/out")
	check "node 1: back in band ${N:-?} periods after $ev (bound $BOUND)" \
		eval "[ -n '$N' ] && [ '$N' -ge 0 ] && [ '$N' -le $BOUND ]"
done
N=$(sed -nE 's/^\[4\] node 4: share: output within .* after (-?[0-9]+) periods.*/\1/p' "$T/out")
check "node 4 took its share ${N:-?} periods after it joined (bound $BOUND)" \
	eval "[ -n '$N' ] && [ '$N' -ge 0 ] && [ '$N' -le $BOUND ]"
check "the CSV marks both events" eval "grep -q ',leave 3$' '$T/pc.csv' && grep -q ',join 4$' '$T/pc.csv'"
if command -v gnuplot >/dev/null; then
	check "the PNG was drawn" test -s "$T/pc.png"
fi
if [ -n "${PC_KEEP:-}" ]; then
	mkdir -p "$PC_KEEP" && cp "$T/out" "$T/err" "$T/pc.csv" "$PC_KEEP/" &&
		{ [ ! -f "$T/pc.png" ] || cp "$T/pc.png" "$PC_KEEP/"; } && echo "kept in $PC_KEEP"
fi
((FAILS == 0)) || tail -20 "$T/err"
exit $((FAILS != 0))
