#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# host-pause.sh -- a pause of the whole host (a VM stopped, a laptop's lid, every process
# SIGSTOPped at once) is nobody's failure (issue 30). 4 nodes on loopback run barrier rounds and
# a lock loop; all 4 are SIGSTOPped together for 0.6, 1.5, 3 and 5 s (up to 5 failure bounds),
# then SIGCONTed together. Every node's own progress thread comes back late and must not hold
# the silence it slept through against the others: no exclusion, no barrier wait that returns
# -LOCO_EPARTITION, rounds go on after each pause, the 4 stay in one view, the lock's leases
# never overlap, and no data link goes down: the tcp fabric's dead-peer clock does not count the
# pause either (it failed every link with a request in flight, at the first turn after the pause).
#
#   bash host-pause.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

export VIEW_LOCK=1 # a lock loop beside the rounds: leases never overlap
vl_start 4
view0=$(vl_get 1 view)
for secs in 0.6 1.5 3 5; do
	r=$(vl_get 1 rounds)
	kill -STOP "${VL_PID[1]}" "${VL_PID[2]}" "${VL_PID[3]}" "${VL_PID[4]}"
	sleep "$secs"
	kill -CONT "${VL_PID[1]}" "${VL_PID[2]}" "${VL_PID[3]}" "${VL_PID[4]}"
	ok "all 4 nodes paused for $secs s together"
	if vl_wait 10 vl_gt 1 rounds $((r + 5)); then
		ok "rounds go on after the pause ($r -> $(vl_get 1 rounds))"
	else
		fail "no rounds after a $secs s pause ($r -> $(vl_get 1 rounds))"
	fi
done
excl=0 epart=0
for i in 1 2 3 4; do
	excl=$((excl + $(vl_get "$i" excluded)))
	epart=$((epart + $(vl_get "$i" epart)))
	[[ $(vl_get "$i" solo) -eq 0 ]] || fail "node $i passed $(vl_get "$i" solo) round(s) alone"
done
echo "after the pauses: $excl exclusion(s), $epart -LOCO_EPARTITION"
[[ $excl -eq 0 ]] || fail "$excl exclusion(s) after whole-host pauses"
[[ $epart -eq 0 ]] || fail "$epart barrier wait(s) returned -LOCO_EPARTITION after whole-host pauses"
if vl_one_view 1 2 3 4 && [[ $(vl_get 1 view) == "$view0" ]]; then
	ok "all 4 still in view $view0"
else
	fail "the view changed ($view0 -> $(vl_get 1 view)) or the 4 are not in one view"
fi
vl_show
vl_stop
downs=$(cat "$T"/out.* | grep -c -e 'data link to node [0-9]* down' -e 'no answer from the peer' || true)
if [[ $downs -eq 0 ]]; then
	ok "no data link went down"
else
	cat "$T"/out.* | grep -e 'data link to node [0-9]* down' -e 'no answer from the peer' | head -5
	fail "$downs data link failure(s) after whole-host pauses"
fi
vl_check_leases
finish
