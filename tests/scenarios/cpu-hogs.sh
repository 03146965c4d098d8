#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# cpu-hogs.sh -- 4 nodes on loopback run barrier rounds beside 4 CPU hogs (busy shell loops,
# ended by PID) for 20 s (60 s with LOCO_TEST_FULL=1, as tools/test --full sets it), with the
# library's default failure bound (LOCO_FAIL_TIMEOUT_MS unset). Passes when no live node was excluded, or when every excluded one rejoined: at the
# end all 4 are in one view. Prints how many exclusions there were (the figure behind the
# default bound, docs/membership.md).
#
#   bash cpu-hogs.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

# 20 s holds 20 default failure bounds (1 s) of load, which is what the check needs; the
# 60 s long form is the one behind docs/membership.md's figure
SECS=${LOCO_HOG_SECONDS:-20}
[[ ${LOCO_TEST_FULL:-0} == 1 ]] && SECS=${LOCO_HOG_SECONDS:-60}
HOGS=()
unset LOCO_FAIL_TIMEOUT_MS
vl_start 4
for h in 1 2 3 4; do
	bash -c 'while :; do :; done' &
	PIDS+=("$!")
	HOGS+=("$!")
done
ok "4 CPU hogs started; load for $SECS s"
sleep "$SECS"
for pid in "${HOGS[@]}"; do
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
done
ok "hogs ended"
excl=0
for i in 1 2 3 4; do
	excl=$((excl + $(vl_get "$i" excluded)))
done
echo "exclusions under load: $excl (rounds at node 1: $(vl_get 1 rounds))"
if vl_wait 30 vl_one_view 1 2 3 4; then
	ok "all 4 in one view: $(vl_get 1 view)"
else
	fail "the 4 nodes are not in one view (excluded nodes did not rejoin)"
fi
for i in 1 2 3 4; do
	[[ $(vl_get "$i" solo) -eq 0 ]] || fail "node $i passed $(vl_get "$i" solo) round(s) alone"
	[[ $(vl_get "$i" excluded) -eq $(vl_get "$i" rejoined) ]] || fail "node $i: excluded $(vl_get "$i" excluded), rejoined $(vl_get "$i" rejoined)"
done
vl_show
vl_stop
finish
