#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# signal.sh -- SIGTERM, SIGINT or SIGHUP to the launcher ends every node and what it forked, and
# the launcher exits 128+sig; a second signal skips the grace period; a launcher killed outright
# takes its nodes with it.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SLEEPER='echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.$LOCO_NODE_ID"
(exec -a "$MARK-grandchild" sleep 100) &
exec -a "$MARK-node" sleep 100'

# signal_case -- send SIG to a launcher of 4 sleeping nodes once they run; expect status WANT.
signal_case() {
	local sig=$1 want=$2
	start_lr -n 4 bash -c "$SLEEPER"
	check "$sig: 4 nodes and 4 grandchildren run" wait_until 20 marked_is 8
	check "$sig: the nodes' process groups exist" groups_alive
	kill "-$sig" "$LR_PID"
	wait_lr 30
	check "$sig: launcher exits $want (rc $RC)" [ "$RC" -eq "$want" ]
	check "$sig: done quickly (${ELAPSED} ms)" [ "$ELAPSED" -lt 10000 ]
	check "$sig: no node or grandchild survives ($(marked) left)" marked_is 0
	check "$sig: no process of any node's group survives" groups_gone
	rm -f "$T"/pgid.*
}

signal_case TERM 143
signal_case INT 130
signal_case HUP 129

# A second SIGTERM while the nodes (deaf to SIGTERM) are being ended: SIGKILL at once.
start_lr -n 2 bash -c 'trap "" TERM; '"$SLEEPER"
check "twice: 2 deaf nodes and 2 grandchildren run" wait_until 20 marked_is 4
kill -TERM "$LR_PID"
T1=$(date +%s%N) # the grace period runs from the first signal, not from the start
sleep 0.3
check "twice: the deaf nodes and grandchildren outlive the first SIGTERM" marked_is 4
kill -TERM "$LR_PID"
wait_lr 30
SINCE=$((($(date +%s%N) - T1) / 1000000))
check "twice: launcher exits 143 (rc $RC)" [ "$RC" -eq 143 ]
check "twice: did not wait out the 2 s grace period (${SINCE} ms after the first signal)" [ "$SINCE" -lt 1900 ]
check "twice: nothing survives ($(marked) left)" marked_is 0
check "twice: no process of any node's group survives" groups_gone
rm -f "$T"/pgid.*

# SIGKILL cannot be caught: the nodes still die with the launcher (PR_SET_PDEATHSIG). What they
# forked may outlive it; the EXIT trap ends those by PID.
start_lr -n 3 bash -c 'exec -a "$MARK-node" sleep 100'
check "SIGKILL to the launcher: 3 nodes run" wait_until 20 marked_is 3
kill -KILL "$LR_PID"
wait_lr 10
check "SIGKILL to the launcher: the nodes die with it" wait_until 10 marked_is 0

finish
