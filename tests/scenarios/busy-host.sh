#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# busy-host.sh -- membership holds on a busy host (issue 30): 4 nodes on loopback run barrier
# rounds beside 16 CPU hogs (busy shell loops, ended by PID) on this machine's cores for 120 s
# with LOCO_TEST_FULL=1 (tools/test --full; issue 30's figure), 60 s in CI's run (its time: the
# detector's deadlines adapt within seconds), or LOCO_HOG_SECONDS, with the library's defaults (LOCO_FAIL_TIMEOUT_MS unset). Passes only
# when no node was excluded, no barrier wait returned -LOCO_EPARTITION, rounds went on, and
# the 4 are in one view at the end. It replaces cpu-hogs.sh (4 hogs, excluded nodes were
# allowed to rejoin): this is what a user on a shared machine needs.
#
#   bash busy-host.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

SECS=${LOCO_HOG_SECONDS:-$([[ ${LOCO_TEST_FULL:-0} == 1 ]] && echo 120 || echo 60)}
NHOGS=${LOCO_HOGS:-16}
HOGS=()
unset LOCO_FAIL_TIMEOUT_MS
export VIEW_ALARM_S=$((SECS + 120)) # the nodes' own time limit: the load, start and stop
vl_start 4
r0=$(vl_get 1 rounds)
for ((h = 0; h < NHOGS; h++)); do
	bash -c 'while :; do :; done' &
	PIDS+=("$!")
	HOGS+=("$!")
done
ok "$NHOGS CPU hogs started; load for $SECS s"
sleep "$SECS"
load=$(cut -d' ' -f1 /proc/loadavg)
for pid in "${HOGS[@]}"; do
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
done
ok "hogs ended (load average then: $load)"
r1=$(vl_get 1 rounds)
excl=0 epart=0
for i in 1 2 3 4; do
	excl=$((excl + $(vl_get "$i" excluded)))
	epart=$((epart + $(vl_get "$i" epart)))
done
echo "under load: $excl exclusion(s), $epart -LOCO_EPARTITION, $((r1 - r0)) round(s) at node 1"
[[ $excl -eq 0 ]] || fail "$excl exclusion(s) of live nodes under load"
[[ $epart -eq 0 ]] || fail "$epart barrier wait(s) returned -LOCO_EPARTITION under load"
[[ $((r1 - r0)) -gt 0 ]] || fail "no barrier round passed under load"
if vl_wait 30 vl_one_view 1 2 3 4; then
	ok "all 4 in one view: $(vl_get 1 view)"
else
	fail "the 4 nodes are not in one view"
fi
for i in 1 2 3 4; do
	[[ $(vl_get "$i" solo) -eq 0 ]] || fail "node $i passed $(vl_get "$i" solo) round(s) alone"
done
vl_show
vl_stop
finish
