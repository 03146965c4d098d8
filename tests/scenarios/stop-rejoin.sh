#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# stop-rejoin.sh -- 4 nodes on loopback run barrier rounds; node 4 is SIGSTOPped for 5 s, then
# SIGCONTed. Nodes 1-3 remove it and go on; node 4 wakes up partitioned (its barrier returns
# -LOCO_EPARTITION, never a round alone), learns it was excluded, rejoins as a new
# incarnation, and all 4 end in one view passing rounds together.
#
#   bash stop-rejoin.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

export VIEW_LOCK=1 # a lock loop beside the rounds: leases never overlap
vl_start 4
inc4=$(vl_get 4 inc)
r4=$(vl_get 4 rounds)
kill -STOP "${VL_PID[4]}"
ok "SIGSTOPped node 4"
if vl_wait 5 vl_one_view 1 2 3; then
	ok "nodes 1-3 in view $(vl_get 1 view) without node 4"
else
	fail "nodes 1-3 did not remove node 4 within 5 s"
fi
r1=$(vl_get 1 rounds)
sleep 5
kill -CONT "${VL_PID[4]}"
ok "SIGCONTed node 4"
((($(vl_get 1 rounds) > r1 + 5))) || fail "node 1's rounds stopped ($r1 -> $(vl_get 1 rounds))"
if vl_wait 30 vl_one_view 1 2 3 4; then
	ok "all 4 in view $(vl_get 1 view)"
else
	fail "the 4 nodes did not end in one view"
fi
[[ $(vl_get 4 excluded) -ge 1 && $(vl_get 4 rejoined) -ge 1 ]] || fail "node 4 was not excluded and rejoined"
[[ $(vl_get 4 inc) != "$inc4" ]] || fail "node 4 kept its incarnation"
[[ $(vl_get 4 solo) -eq 0 ]] || fail "node 4 passed $(vl_get 4 solo) round(s) alone"
echo "node 4: $(vl_get 4 epart) wait(s) returned -LOCO_EPARTITION; rounds before the stop $r4"
vl_wait 10 vl_gt 4 rounds_rejoin 3 || fail "node 4 passes no rounds after its rejoin"
vl_show
vl_stop
vl_check_leases
finish
