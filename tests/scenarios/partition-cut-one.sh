#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# partition-cut-one.sh -- 4 nodes, each in its own namespace, run barrier rounds; node 4's link
# is cut at the bridge for 3 s, then healed. Nodes 1-3 remove node 4 and their rounds go on;
# node 4 gets -LOCO_EPARTITION from its barrier within LOCO_FAIL_TIMEOUT_MS + 1000 ms of the
# cut and never passes a round alone; after the heal it learns it was excluded, rejoins as a
# new incarnation, and all 4 end in one view (same id, members 1-4) passing rounds together.
#
#   bash partition-cut-one.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

vl_netns 4
export VIEW_LOCK=1 # a lock loop beside the rounds: leases never overlap
vl_start 4
F=$LOCO_FAIL_TIMEOUT_MS
inc4=$(vl_get 4 inc)
view0=$(vl_get 1 view)
t_cut=$(vl_now)
ip -n "$VL_NS_BR" link set v4 down || fail "could not cut node 4's link"
ok "cut node 4's link (v4 down at the bridge)"
sleep 3
r1=$(vl_get 1 rounds)
if vl_wait 5 vl_one_view 1 2 3; then
	ok "nodes 1-3 in view $(vl_get 1 view) without node 4"
else
	fail "nodes 1-3 did not install a view without node 4"
fi
vl_wait 5 vl_gt 4 epart 0 || fail "node 4's barrier never returned -LOCO_EPARTITION"
ep=$(vl_get 4 epart_ns)
if [[ $ep -gt 0 ]]; then
	ms=$(vl_ms "$t_cut" "$ep")
	echo "node 4: -LOCO_EPARTITION ${ms} ms after the cut (fail timeout $F ms)"
	((ms <= F + 1000)) || fail "node 4 got -LOCO_EPARTITION $ms ms after the cut, more than $F + 1000"
fi
[[ $(vl_get 4 solo) -eq 0 ]] || fail "node 4 passed $(vl_get 4 solo) round(s) alone"
vl_wait 5 vl_gt 1 rounds $((r1 + 5)) && ok "rounds go on at node 1 ($r1 -> $(vl_get 1 rounds))" ||
	fail "node 1's rounds stopped after the removal ($r1 -> $(vl_get 1 rounds))"
ip -n "$VL_NS_BR" link set v4 up || fail "could not heal node 4's link"
ok "healed node 4's link"
if vl_wait 30 vl_one_view 1 2 3 4; then
	ok "all 4 in view $(vl_get 1 view) (was $view0)"
else
	fail "the 4 nodes did not end in one view"
fi
[[ $(vl_get 4 excluded) -ge 1 && $(vl_get 4 rejoined) -ge 1 ]] || fail "node 4 was not excluded and rejoined"
[[ $(vl_get 4 inc) != "$inc4" ]] || fail "node 4 kept its incarnation"
vl_wait 10 vl_gt 4 rounds_rejoin 3 || fail "node 4 passes no rounds after its rejoin"
[[ $(vl_get 4 solo) -eq 0 ]] || fail "node 4 passed $(vl_get 4 solo) round(s) alone"
vl_show
vl_stop
vl_check_leases
finish
