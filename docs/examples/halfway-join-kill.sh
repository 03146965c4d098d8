#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# halfway-join-kill.sh -- drive halfway by hand, as loco-run would with --keep-going: nodes 1..4
# start, node 5 joins 2 s later, node 3 is SIGKILLed 2 s after that. Nodes 1, 2, 4 and 5 must
# end with status 0 (converged), node 3 with 137. Every process is ended by PID; every wait is
# bounded (180 s per node).
#
#   docs/examples/halfway-join-kill.sh [BUILD_DIR] [ROUNDS]
set -u
B=${1:-build}/docs/examples/halfway
R=${2:-3000}
export LOCO_FABRIC=tcp LOCO_FAIL_TIMEOUT_MS=${LOCO_FAIL_TIMEOUT_MS:-1000} LOCO_NODES=4
P=$((20000 + RANDOM % 20000))
declare -a pids
LOCO_ADDR=127.0.0.1:$P "$B" "$R" &
pids[1]=$!
sleep 0.3
for i in 2 3 4; do
	LOCO_NODE_ID=$i LOCO_JOIN=127.0.0.1:$P "$B" "$R" &
	pids[i]=$!
done
sleep 2
LOCO_NODE_ID=5 LOCO_JOIN=127.0.0.1:$P "$B" "$R" &
pids[5]=$!
sleep 2
kill -KILL "${pids[3]}"
echo "halfway-join-kill: node 3 (pid ${pids[3]}) SIGKILLed"
bad=0
for i in 1 2 3 4 5; do
	for _ in $(seq 1 900); do
		kill -0 "${pids[i]}" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "${pids[i]}" 2>/dev/null
	wait "${pids[i]}"
	st=$?
	want=0
	[ "$i" = 3 ] && want=137
	echo "halfway-join-kill: node $i exit $st (want $want)"
	[ "$st" = "$want" ] || bad=1
done
exit $bad
