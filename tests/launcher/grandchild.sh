#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# grandchild.sh -- what a node forks is ended with it: a background child still running when
# every node has exited 0, one orphaned by a double fork, and one that ignores SIGTERM.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Each node records its group, then leaves a background sleeper behind and exits 0 once the test
# has seen them all.
NODE='echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.$LOCO_NODE_ID"
(exec -a "$MARK-bg" sleep 100) &
( (exec -a "$MARK-orphan" sleep 100) & ) 
for ((i = 0; i < 400; i++)); do [[ -e $T/go ]] && break; sleep 0.05; done
exit 0'

start_lr -n 3 bash -c "$NODE"
check "3 background and 3 orphaned grandchildren run" wait_until 20 marked_is 6
orphan=$(pgrep -f -- "$MARK-orphan" | head -n 1)
check "an orphaned grandchild was adopted by the launcher" \
	[ -n "$orphan" -a "$(cut -d' ' -f4 "/proc/$orphan/stat" 2>/dev/null)" = "$LR_PID" ]
touch "$T/go"
wait_lr 30
check "nodes exit 0, launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "the launcher did not wait 100 s for the grandchildren (${ELAPSED} ms)" [ "$ELAPSED" -lt 10000 ]
check "no grandchild survives ($(marked) left)" marked_is 0
check "no process of any node's group survives" groups_gone
rm -f "$T"/pgid.* "$T/go"

# A grandchild deaf to SIGTERM is killed after the grace period.
start_lr -n 1 bash -c 'echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.1"
(trap "" TERM; exec -a "$MARK-deaf" sleep 100) &
for ((i = 0; i < 400; i++)); do [[ -e $T/go ]] && break; sleep 0.05; done
exit 0'
check "a deaf grandchild runs" wait_until 20 marked_is 1
touch "$T/go"
wait_lr 30
check "deaf grandchild: launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "deaf grandchild: killed after the grace period (${ELAPSED} ms)" [ "$ELAPSED" -ge 1900 -a "$ELAPSED" -lt 10000 ]
check "deaf grandchild: gone ($(marked) left)" marked_is 0
check "deaf grandchild: its group is empty" groups_gone

rm -f "$T"/pgid.* "$T/go"

# A process that leaves its node's group (setsid) is not the launcher's to end (loco-run(1)), and
# it must not hold the launcher either, though it keeps the node's stdout open. The test ends it.
# The node exits only once the process has left its group (a fixed sleep lost that race under
# load: the launcher ended the group before setsid ran).
run_lr -n 1 bash -c 'setsid bash -c "touch \"\$T/escaped\"; exec -a \"\$MARK-escaped\" sleep 100" &
for ((i = 0; i < 400; i++)); do [[ -e $T/escaped ]] && break; sleep 0.05; done
echo done'
check "escaped process: launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "escaped process: the launcher does not wait for it (${ELAPSED} ms)" [ "$ELAPSED" -lt 10000 ]
check "escaped process: the node's output came through" grep -qx '\[1\] done' "$T/out"
check "escaped process: it is still alive (left alone)" wait_until 10 marked_is 1
for pid in $(pgrep -f -- "$MARK-escaped"); do
	kill -KILL "$pid"
done
check "escaped process: ended by the test" wait_until 10 marked_is 0

finish
