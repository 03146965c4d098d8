#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# partition-pair.sh -- 4 nodes in namespaces run barrier rounds; only nodes 1 and 3 are cut
# from each other for 3 s (a blackhole route to the other in each of the two namespaces:
# both still reach 2 and 4), then healed. No permanent split: within 30 s of the heal every
# node shows the same view id with members 1-4, and passes rounds again (the barrier pushes
# its row again when a push was lost on the cut data link, which was rebuilt). Before this was
# fixed, node 3's report alone evicted node 1 (the join contact) and nodes joining through
# it formed a second cluster.
#
#   bash partition-pair.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

vl_netns 4
export VIEW_LOCK=1 # a lock loop beside the rounds: leases never overlap
vl_start 4
view0=$(vl_get 1 view)
ip -n "${VL_NS[1]}" route add blackhole 10.99.0.3/32 &&
	ip -n "${VL_NS[3]}" route add blackhole 10.99.0.1/32 || fail "could not cut 1<->3"
ok "cut nodes 1 and 3 from each other (blackhole routes)"
sleep 3
vl_show
ip -n "${VL_NS[1]}" route del blackhole 10.99.0.3/32
ip -n "${VL_NS[3]}" route del blackhole 10.99.0.1/32
ok "healed 1<->3"
if vl_wait 30 vl_one_view 1 2 3 4; then
	ok "all 4 in one view: $(vl_get 1 view) (was $view0), members $(vl_get 1 members)"
else
	fail "no single view with members 1-4 within 30 s of the heal"
fi
r=$(vl_get 3 rounds)
t0=$(vl_now)
if vl_wait 30 vl_gt 3 rounds $((r + 5)); then
	echo "node 3: rounds again $(vl_ms "$t0" "$(vl_now)") ms after the view check"
else
	fail "node 3 passes no rounds after the heal"
fi
for i in 1 2 3 4; do
	[[ $(vl_get "$i" solo) -eq 0 ]] || fail "node $i passed $(vl_get "$i" solo) round(s) alone"
	echo "node $i: excluded $(vl_get "$i" excluded) time(s), rejoined $(vl_get "$i" rejoined)"
done
vl_show
vl_stop
vl_check_leases
finish
