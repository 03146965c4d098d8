#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# restart.sh -- `loco-run --ctl PATH restart ID` brings a node back with its id: 4 nodes run
# barrier rounds (rounds-node) under `loco-run --control`; the test kills node 3 and restarts
# it, twice. Each time the new node 3 joins the live ones (a new incarnation of id 3), passes
# rounds with 3 peers, and the others go on with it. Restarting a running node or an id the
# launch never had is refused. The launch exits 0 (the ends were by the kill command); the
# list and the summary keep each start of node 3.
# Usage: restart.sh LOCO_RUN ROUNDS_NODE
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RN=${2:?usage: $0 LOCO_RUN ROUNDS_NODE}
CTL=$T/ctl
STEP=3 # rounds every node must pass after a change

# last_round -- the last round node ID printed since its latest start (0 before its first).
last_round() {
	local r
	r=$(awk -v id="[$1]" '$1 == id && $2 == "joined:" { r = 0 }
		$1 == id && $2 == "round" && $4 == "peers" { r = $3 } END { print r + 0 }' "$T/out")
	echo "${r:-0}"
}

# last_peers -- the peer count on node ID's last round line (-1 before its first).
last_peers() {
	local p
	p=$(sed -nE "s/^\[$1\] round [0-9]+ peers ([0-9]+)$/\1/p" "$T/out" | tail -1)
	echo "${p:--1}"
}

# all_past -- true when every node in IDS... passed STEP rounds more than at mark_rounds.
all_past() {
	local id
	for id in "$@"; do
		(($(last_round "$id") >= FROM[id] + STEP)) || return 1
	done
}

mark_rounds() {
	local id line="rounds at '$1':"
	FROM=()
	for id in 1 2 3 4; do
		FROM[id]=$(last_round "$id")
		line+=" [$id] ${FROM[id]}"
	done
	echo "$line"
}

ctl() {
	"$LR" --ctl "$CTL" "$@" >"$T/ctl.out" 2>&1
	CTL_RC=$?
	echo "ctl $* -> rc $CTL_RC: $(head -1 "$T/ctl.out")"
}

# node3_killed -- list shows a start of node 3 killed by the kill command, COUNT times.
node3_killed() {
	"$LR" --ctl "$CTL" list >"$T/list.out" 2>&1
	[ "$(grep -cE '^3 [0-9]+ killed by SIGKILL \(kill command\)$' "$T/list.out")" -eq "$1" ]
}

declare -a FROM
start_lr --timeout 110 --control "$CTL" -n 4 \
	bash -c 'exec -a "$MARK-rounds-node" "$0" "$1"' "$RN" "$T"
for id in 1 2 3 4; do FROM[id]=0; done
check "4 nodes pass $STEP rounds" wait_until 40 all_past 1 2 3 4 || show

# --- refused: a running node, an id the launch never had, no id
ctl restart 2
check "restart of running node 2 refused (rc $CTL_RC)" \
	grep -qx 'error: restart: node 2 is running (kill it first)' "$T/ctl.out"
[ "$CTL_RC" -eq 1 ] || fail "a refused restart exits 1, not $CTL_RC"
ctl restart 9
check "restart of id 9 (not of this launch) refused" \
	grep -q "^error: restart: expected the id of a node of this launch, got '9'" "$T/ctl.out"
ctl restart
check "restart without an id refused" grep -q '^error: unknown command' "$T/ctl.out"

for round in 1 2; do
	# --- kill node 3: the others go on without it
	ctl kill 3 KILL
	check "kill $round: answered 'ok sent SIGKILL to node 3'" \
		grep -qE '^ok sent SIGKILL to node 3 \(pid [0-9]+\)$' "$T/ctl.out"
	check "kill $round: list shows node 3 killed" wait_until 20 node3_killed "$round"
	mark_rounds "kill $round"
	check "kill $round: nodes 1, 2, 4 passed $STEP more rounds" wait_until 40 all_past 1 2 4

	# --- restart node 3 with its id: it joins the live ones and takes part again
	ctl restart 3
	check "restart $round: answered 'ok restarted 3 (pid N)' (rc $CTL_RC)" \
		grep -qE '^ok restarted 3 \(pid [0-9]+\)$' "$T/ctl.out"
	pid=$(sed -nE 's/^ok restarted 3 \(pid ([0-9]+)\)$/\1/p' "$T/ctl.out")
	check "restart $round: the launcher says node 3 (pid $pid) restarted" \
		grep -qE "node 3 \(pid $pid\) restarted \(control command\)" "$T/err"
	check "restart $round: node 3 joined again ($((round + 1)) starts)" wait_until 40 \
		eval '[ "$(grep -c "^\[3\] joined:" "$T/out")" -eq '$((round + 1))' ]'
	mark_rounds "restart $round"
	check "restart $round: node 3 passes $STEP rounds again" wait_until 40 all_past 3
	check "restart $round: node 3 sees 3 peers ($(last_peers 3))" [ "$(last_peers 3)" -eq 3 ]
	check "restart $round: nodes 1, 2, 4 passed $STEP more rounds with it" \
		wait_until 40 all_past 1 2 4
	ctl list
	check "restart $round: list shows node 3 (pid $pid) running" \
		grep -qE "^3 $pid running 127\.0\.0\.1:[0-9]+$" "$T/ctl.out"
done
check "list: each start of node 3 listed (2 killed, 1 running), 6 in all" \
	eval '[ "$(grep -c "^3 " "$T/ctl.out")" -eq 3 ] && grep -qx "ok 6 node(s)" "$T/ctl.out"'

# --- stop: every node ends its rounds and exits 0
touch "$T/stop"
wait_lr 60
check "launcher exits 0: the dead nodes were killed by command (rc $RC)" [ "$RC" -eq 0 ]
check "4 nodes printed 'done' with no error" \
	[ "$(grep -cE '^\[[1234]\] done rounds [0-9]+ errors 0$' "$T/out")" -eq 4 ]
check "summary: 2 of 6 ended early, exit status 0" \
	grep -qE 'summary: 2 of 6 node\(s\) ended early; exit status 0$' "$T/err"
check "no node survives ($(marked) left)" wait_until 10 marked_is 0
((FAILS == 0)) || show | tail -60

finish
