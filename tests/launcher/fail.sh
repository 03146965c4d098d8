#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# fail.sh -- the first node to fail sets the exit status (code, or 128+signal), and the others
# are ended at once together with what they forked: nothing of the launch survives it.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Nodes 2..4 record their process group, start a marked background grandchild and become a
# marked sleeper; node 1 waits until the test has seen all of them ($T/<run>.go), then acts.
SLEEPER='echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.$RUN.$LOCO_NODE_ID"
(exec -a "$MARK-grandchild" sleep 100) &
exec -a "$MARK-node" sleep 100'
WAIT_GO='echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.$RUN.$LOCO_NODE_ID"
for ((i = 0; i < 400; i++)); do [[ -e $T/$RUN.go ]] && break; sleep 0.05; done'

# launch_and_go -- start the launcher with node 1 running ACTION after the go, the others
# sleeping; check that all 3 sleepers and 3 grandchildren exist first, then give the go.
launch_and_go() {
	local action=$1
	shift
	start_lr "$@" -n 4 bash -c "if ((LOCO_NODE_ID == 1)); then $WAIT_GO; $action; else $SLEEPER; fi"
	check "$RUN: 3 marked sleepers and 3 grandchildren run" wait_until 20 marked_is 6
	check "$RUN: the nodes' process groups exist" groups_alive
	touch "$T/$RUN.go"
}

# --- node 1 exits 3 while the others sleep 100 s
RUN=exit3 launch_and_go 'exit 3'
wait_lr 30
check "exit 3: launcher exits 3 (rc $RC)" [ "$RC" -eq 3 ]
check "exit 3: done in well under 100 s (${ELAPSED} ms)" [ "$ELAPSED" -lt 10000 ]
check "exit 3: no sleeper or grandchild survives ($(marked) left)" marked_is 0
check "exit 3: no process of any node's group survives" groups_gone
check "exit 3: says which node failed" grep -q 'node 1 exited with status 3' "$T/err"
rm -f "$T"/pgid.*

# --- node 1 kills itself with SIGKILL: 128 + 9
RUN=kill9 launch_and_go 'kill -KILL $$'
wait_lr 30
check "SIGKILL: launcher exits 137 (rc $RC)" [ "$RC" -eq 137 ]
check "SIGKILL: done quickly (${ELAPSED} ms)" [ "$ELAPSED" -lt 10000 ]
check "SIGKILL: nothing survives ($(marked) left)" marked_is 0
check "SIGKILL: no process of any node's group survives" groups_gone
rm -f "$T"/pgid.*

# --- the FIRST failure counts: node 2 exits 7; node 1 ignores the SIGTERM that follows and
# exits 3 a moment later, within the grace period. The status is 7, not 3 nor 143.
start_lr -n 2 bash -c 'if ((LOCO_NODE_ID == 1)); then
	trap "" TERM
	for ((i = 0; i < 400; i++)); do [[ -e $T/first.go ]] && break; sleep 0.05; done
	sleep 0.5
	exit 3
else
	for ((i = 0; i < 400; i++)); do [[ -e $T/first.go ]] && break; sleep 0.05; done
	exit 7
fi'
touch "$T/first.go"
wait_lr 30
check "first failure: launcher exits 7, the first node to fail (rc $RC)" [ "$RC" -eq 7 ]
check "first failure: names node 2 only" \
	[ "$(grep -c 'exited with status' "$T/err")" -eq 1 -a "$(grep -c 'node 2 exited with status 7' "$T/err")" -eq 1 ]

# --- a node ignoring SIGTERM is killed after the grace period (2 s), and so is its grandchild
rm -f "$T"/pgid.*
start_lr -n 3 bash -c 'echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.deaf.$LOCO_NODE_ID"
if ((LOCO_NODE_ID == 1)); then
	for ((i = 0; i < 400; i++)); do [[ -e $T/deaf.go ]] && break; sleep 0.05; done
	exit 5
fi
trap "" TERM
(trap "" TERM; exec -a "$MARK-deaf-grandchild" sleep 100) &
exec -a "$MARK-deaf-node" sleep 100'
check "deaf: 2 sleepers and 2 grandchildren run" wait_until 20 marked_is 4
touch "$T/deaf.go"
wait_lr 30
check "deaf: launcher exits 5 (rc $RC)" [ "$RC" -eq 5 ]
check "deaf: waited out the grace period, then SIGKILL (${ELAPSED} ms)" \
	[ "$ELAPSED" -ge 1900 -a "$ELAPSED" -lt 10000 ]
check "deaf: nothing survives ($(marked) left)" marked_is 0
check "deaf: no process of any node's group survives" groups_gone

# --- all nodes exit 0: status 0
run_lr -n 3 true
check "all exit 0: launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
run_lr -n 3 bash -c 'exit $((LOCO_NODE_ID == 3 ? 42 : 0))'
check "one of three exits 42: launcher exits 42 (rc $RC)" [ "$RC" -eq 42 ]

finish
