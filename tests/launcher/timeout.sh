#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# timeout.sh -- --timeout SEC ends every node (and what it forked) and exits 124 with a message;
# fractions are accepted; a launch that ends in time is not affected.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SLEEPER='echo "$(cut -d" " -f5 /proc/$$/stat)" >"$T/pgid.$LOCO_NODE_ID"
(exec -a "$MARK-grandchild" sleep 100) &
exec -a "$MARK-node" sleep 100'

# --- 3 sleeping nodes, --timeout 1.5
run_lr --timeout 1.5 -n 3 bash -c "$SLEEPER"
check "timeout: launcher exits 124 (rc $RC)" [ "$RC" -eq 124 ]
# the launcher's messages carry the seconds since it started (LOCO_LOG_TIME=mono, the default)
check "timeout: message 'loco-run <s>: timeout after 1.5 s'" \
	grep -qxE 'loco-run [0-9]+\.[0-9]{6}: timeout after 1\.5 s' "$T/err"
t=$(sed -nE 's/^loco-run ([0-9]+\.[0-9]+): timeout after.*/\1/p' "$T/err")
echo "timeout message at $t s"
check "timeout: its time is the launcher's, 1.5 s or more ($t)" awk -v t="$t" 'BEGIN { exit !(t >= 1.5 && t < 60) }'
check "timeout: ended after 1.5 s, not before (${ELAPSED} ms)" [ "$ELAPSED" -ge 1450 -a "$ELAPSED" -lt 10000 ]
pgids=("$T"/pgid.*)
check "timeout: all 3 nodes had started (${#pgids[@]})" [ "${#pgids[@]}" -eq 3 ]
check "timeout: no sleeper or grandchild survives ($(marked) left)" marked_is 0
check "timeout: no process of any node's group survives" groups_gone
rm -f "$T"/pgid.*

# --- nodes deaf to SIGTERM: SIGKILL after the 2 s grace period; still 124
LOCO_LOG_TIME=none run_lr --timeout 0.5 -n 2 bash -c 'trap "" TERM; '"$SLEEPER"
check "timeout, deaf nodes: launcher exits 124 (rc $RC)" [ "$RC" -eq 124 ]
check "timeout, deaf nodes: message with the fraction, no time (LOCO_LOG_TIME=none)" \
	grep -qx 'loco-run: timeout after 0.5 s' "$T/err"
check "timeout, deaf nodes: 0.5 s + 2 s grace (${ELAPSED} ms)" [ "$ELAPSED" -ge 2400 -a "$ELAPSED" -lt 10000 ]
check "timeout, deaf nodes: nothing survives ($(marked) left)" marked_is 0
check "timeout, deaf nodes: no process of any node's group survives" groups_gone
rm -f "$T"/pgid.*

# --- LOCO_LOG_TIME=wall: the UTC date and time
LOCO_LOG_TIME=wall run_lr --timeout 0.2 -n 1 bash -c 'exec -a "$MARK-node" sleep 100'
check "wall: launcher exits 124 (rc $RC)" [ "$RC" -eq 124 ]
check "wall: message 'loco-run <UTC>: timeout after 0.2 s'" grep -qxE \
	'loco-run [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z: timeout after 0\.2 s' "$T/err"
check "wall: today's date ($(date -u +%F))" grep -q "^loco-run $(date -u +%F)T" "$T/err"

# --- a launch that finishes in time keeps its own status
run_lr --timeout 30 -n 2 bash -c 'sleep 0.2; exit 0'
check "in time: launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "in time: no timeout message" eval '! grep -q timeout "$T/err"'
check "in time: did not wait for the timeout (${ELAPSED} ms)" [ "$ELAPSED" -lt 10000 ]
run_lr --timeout 0 -n 1 bash -c 'sleep 0.3; exit 6'
check "--timeout 0 means none: launcher exits 6 (rc $RC)" [ "$RC" -eq 6 ]

finish
