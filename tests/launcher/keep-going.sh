#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# keep-going.sh -- live changes to a running launch: 4 nodes run barrier rounds (rounds-node)
# under `loco-run --keep-going --control`; the test adds a node and kills another through the
# control socket. After each change the survivors' rounds go on (read from their "round R"
# lines), the added node takes part, the killed node is reported with its signal, and the
# launch exits 0: a node ended by the kill command is no failure (loco-run(1), EXIT STATUS).
# Usage: keep-going.sh LOCO_RUN ROUNDS_NODE
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RN=${2:?usage: $0 LOCO_RUN ROUNDS_NODE}
CTL=$T/ctl
STEP=3 # rounds every survivor must pass after a change

# last_round -- the last round node ID printed (0 before its first).
last_round() {
	local r
	r=$(sed -nE "s/^\[$1\] round ([0-9]+) peers [0-9]+$/\1/p" "$T/out" | tail -1)
	echo "${r:-0}"
}

# last_peers -- the peer count on node ID's last round line (-1 before its first).
last_peers() {
	local p
	p=$(sed -nE "s/^\[$1\] round [0-9]+ peers ([0-9]+)$/\1/p" "$T/out" | tail -1)
	echo "${p:--1}"
}

# all_past -- true when every node in IDS... has passed round MIN_ID (from the array FROM).
all_past() {
	local id
	for id in "$@"; do
		(($(last_round "$id") >= FROM[id] + STEP)) || return 1
	done
}

# mark_rounds -- remember every node's round now (in FROM), and print it.
mark_rounds() {
	local id line="rounds at '$1':"
	FROM=()
	for id in 1 2 3 4 5; do
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

declare -a FROM
start_lr --keep-going --timeout 100 --control "$CTL" -n 4 \
	bash -c 'exec -a "$MARK-rounds-node" "$0" "$1"' "$RN" "$T"
for id in 1 2 3 4; do FROM[id]=0; done
check "4 nodes pass $STEP rounds" wait_until 40 all_past 1 2 3 4 || show

# --- add one node: it gets id 5, joins a live member, and takes part in the rounds
mark_rounds "add"
ctl add
check "add: answered 'ok added 5' (rc $CTL_RC)" grep -qx 'ok added 5' "$T/ctl.out"
check "add: the launcher says node 5 was added" grep -qE 'node 5 \(pid [0-9]+\) added' "$T/err"
check "add: node 5 joined the rounds (its own round $STEP)" wait_until 40 all_past 5
check "add: nodes 1-4 passed $STEP more rounds after it" wait_until 40 all_past 1 2 3 4
check "add: node 5 sees 4 peers ($(last_peers 5))" [ "$(last_peers 5)" -eq 4 ]

# --- kill node 2 with SIGKILL: reported with its signal, the others go on without it
mark_rounds "kill"
ctl kill 2 KILL
check "kill: answered 'ok sent SIGKILL to node 2' (rc $CTL_RC)" \
	grep -qE '^ok sent SIGKILL to node 2 \(pid [0-9]+\)$' "$T/ctl.out"
check "kill: reported 'node 2 (pid N) killed by SIGKILL (kill command)'" wait_until 20 \
	grep -qE 'loco-run [0-9.]+: node 2 \(pid [0-9]+\) killed by SIGKILL \(kill command\); the others go on$' "$T/err"
check "kill: nodes 1, 3, 4, 5 passed $STEP more rounds" wait_until 40 all_past 1 3 4 5
mark_rounds "after the kill"
check "kill: and $STEP more again (node 2 left their barrier)" wait_until 40 all_past 1 3 4 5
ctl list
check "list: node 2 killed by SIGKILL (kill command)" \
	grep -qE '^2 [0-9]+ killed by SIGKILL \(kill command\)$' "$T/ctl.out"
check "list: nodes 1, 3, 4, 5 running" \
	[ "$(grep -cE '^[1345] [0-9]+ running 127\.0\.0\.1:[0-9]+$' "$T/ctl.out")" -eq 4 ]

# --- stop: every survivor ends its rounds and exits 0
mark_rounds "stop"
touch "$T/stop"
wait_lr 60
check "launcher exits 0: the only dead node was killed by command (rc $RC)" [ "$RC" -eq 0 ]
check "node 2 was killed, not stopped: no 'done' line" eval '! grep -q "^\[2\] done" "$T/out"'
check "each survivor printed 'done' with no error" \
	[ "$(grep -cE '^\[[1345]\] done rounds [0-9]+ errors 0$' "$T/out")" -eq 4 ]
check "summary names node 2 and the status" grep -qE \
	'summary: node 2 \(pid [0-9]+\) killed by SIGKILL \(kill command\)$' "$T/err"
check "summary: 1 of 5 ended early, exit status 0" \
	grep -qE 'summary: 1 of 5 node\(s\) ended early; exit status 0$' "$T/err"
check "the control socket is removed" [ ! -e "$CTL" ]
check "no node survives ($(marked) left)" wait_until 10 marked_is 0
grep -E '^\[[1-5]\] done' "$T/out"
((FAILS == 0)) || show | tail -60

finish
