#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# duplicate-id.sh -- 3 nodes on loopback run barrier rounds; a fourth process starts with node
# 2's id (a new incarnation) and joins through node 1 while node 2 is alive. It must be
# refused (loco_init() returns -EEXIST; view-node --dup checks), nobody is evicted: for 3 s
# after, all 3 keep the same view id and members {1, 2, 3} and pass rounds. Before this was
# fixed, the newcomer replaced node 2 and the cluster split.
#
#   bash duplicate-id.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

vl_start 3
view0=$(vl_get 1 view)
inc2=$(vl_get 2 inc)
LOCO_NODE_ID=2 LOCO_ADDR=127.0.0.1:0 LOCO_JOIN=$(vl_addr 1) "$PROG" "$T" --dup >"$T/out.dup" 2>&1 &
dup=$!
PIDS+=("$dup")
wait_pid 30 "$dup"
sed 's/^/[dup] /' "$T/out.dup" | grep -v " tcp: "
if [[ $RC -eq 0 ]]; then
	ok "the second node 2 was refused with -EEXIST"
else
	fail "the second node 2 exited with status $RC (not refused with -EEXIST)"
fi
r=$(vl_get 2 rounds)
sleep 3
for i in 1 2 3; do
	[[ $(vl_get "$i" view) == "$view0" ]] || fail "node $i's view changed: $view0 -> $(vl_get "$i" view)"
done
vl_one_view 1 2 3 || fail "the members changed"
[[ $(vl_get 2 inc) == "$inc2" ]] || fail "node 2's incarnation changed"
(($(vl_get 2 rounds) > r + 5)) || fail "node 2 passes no rounds ($r -> $(vl_get 2 rounds))"
grep -q "in use by a live member" "$T/out.1" || fail "node 1 did not log the refusal"
vl_show
vl_stop
finish
