#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# partition-split.sh -- 4 nodes in namespaces run barrier rounds; they are split 2/2 ({1, 2}
# and {3, 4}, blackhole routes across) for 3 s. Neither half has a majority of the view: no
# node installs a new view, no node passes a barrier round after the split is seen (at most
# the one in flight), and every node's barrier returns -LOCO_EPARTITION within
# LOCO_FAIL_TIMEOUT_MS + 1000 ms. After the heal all 4 go on in one view.
#
#   bash partition-split.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

vl_netns 4
export VIEW_LOCK=1 # a lock loop beside the rounds: leases never overlap
vl_start 4
F=$LOCO_FAIL_TIMEOUT_MS
view0=$(vl_get 1 view)
t_cut=$(vl_now)
for a in 1 2; do
	for b in 3 4; do
		ip -n "${VL_NS[a]}" route add blackhole "10.99.0.$b/32" &&
			ip -n "${VL_NS[b]}" route add blackhole "10.99.0.$a/32" || fail "could not cut $a<->$b"
	done
done
ok "split {1, 2} | {3, 4}"
sleep 0.3 # let the rounds in flight at the cut finish
declare -A r0
for i in 1 2 3 4; do
	r0[$i]=$(vl_get "$i" rounds)
done
sleep 2.7
vl_show
for i in 1 2 3 4; do
	[[ $(vl_get "$i" view) == "$view0" ]] || fail "node $i installed view $(vl_get "$i" view) during the split"
	d=$(($(vl_get "$i" rounds) - r0[$i]))
	((d <= 1)) || fail "node $i passed $d barrier round(s) during the split"
	ep=$(vl_get "$i" epart_ns)
	if [[ $ep -gt 0 ]]; then
		ms=$(vl_ms "$t_cut" "$ep")
		echo "node $i: -LOCO_EPARTITION ${ms} ms after the split"
		((ms <= F + 1000)) || fail "node $i: -LOCO_EPARTITION after $ms ms, more than $F + 1000"
	else
		fail "node $i's barrier never returned -LOCO_EPARTITION"
	fi
done
for a in 1 2; do
	for b in 3 4; do
		ip -n "${VL_NS[a]}" route del blackhole "10.99.0.$b/32"
		ip -n "${VL_NS[b]}" route del blackhole "10.99.0.$a/32"
	done
done
ok "healed"
if vl_wait 30 vl_one_view 1 2 3 4; then
	ok "all 4 in one view: $(vl_get 1 view) (was $view0)"
else
	fail "no single view with members 1-4 within 30 s of the heal"
fi
r=$(vl_get 4 rounds)
vl_wait 10 vl_gt 4 rounds $((r + 5)) || fail "node 4 passes no rounds after the heal"
vl_show
vl_stop
vl_check_leases
finish
