#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# leave-unheard.sh -- 4 nodes, each in its own namespace, run barrier rounds; the routes between
# nodes 1 and 4 are blackholed both ways, then node 1 (the coordinator) leaves with loco_fini.
# Node 4 hears neither node 1's LEAVE nor the VIEW that drops it: it learns that view from node
# 2 or 3, which must tell it first that node 1 left (LEFT, docs/membership.md). Node 4 must log
# "node 1 left", never "node 1 failed", and nodes 2-4 go on in one view. (A member that skipped
# the view dropping a leaver took it for failed: seen in leave-together-shm under load, where
# node 4 read node 2's VIEW before node 1's LEAVE.)
#
#   bash leave-unheard.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

vl_netns 4
vl_start 4
view0=$(vl_get 2 view)
if ! ip -n "${VL_NS[1]}" route add blackhole 10.99.0.4/32 ||
	! ip -n "${VL_NS[4]}" route add blackhole 10.99.0.1/32; then
	fail "could not blackhole the routes between nodes 1 and 4"
	vl_stop
	finish
fi
ok "routes between nodes 1 and 4 blackholed"
touch "$T/leave.1"
wait_pid 30 "${VL_PID[1]}"
if [[ $RC -eq 0 ]]; then
	ok "node 1 left and exited 0"
else
	fail "node 1 exited with status $RC"
fi
VL_PID[1]=""
if vl_wait 10 vl_one_view 2 3 4; then
	ok "nodes 2-4 in view $(vl_get 2 view) (was $view0)"
else
	fail "nodes 2-4 did not install one view without node 1"
fi
for i in 2 3 4; do
	if grep -Eq "manager: node 1 failed" "$T/out.$i"; then
		fail "node $i took node 1 for failed: $(grep -E 'manager: node 1 failed' "$T/out.$i")"
	elif grep -Eq "info: manager: node 1 left$" "$T/out.$i"; then
		ok "node $i logged 'node 1 left'"
	else
		fail "node $i did not log 'node 1 left'"
	fi
done
r4=$(vl_get 4 rounds)
if vl_wait 5 vl_gt 4 rounds $((r4 + 5)); then
	ok "rounds go on at node 4 ($r4 -> $(vl_get 4 rounds))"
else
	fail "node 4's rounds stopped after node 1 left ($r4 -> $(vl_get 4 rounds))"
fi
sed "s/^/[1] /" "$T/out.1" | tail -n 20
vl_stop
finish
