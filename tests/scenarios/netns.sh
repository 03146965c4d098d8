#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# netns.sh -- three LOCO nodes as three hosts: each in its own network namespace, linked by a
# veth pair to a bridge in a fourth namespace (10.99.0.ID/24). No launcher: each node is
# started with `ip netns exec NS env LOCO_ADDR=... LOCO_NODE_ID=... LOCO_JOIN=... PROGRAM DIR`.
# Once all three are paired (each creates DIR/ready.ID), node 3's link is cut at the bridge
# (ip link set down): nodes 1 and 2 must detect node 3 as failed, and node 3 that it is partitioned,
# within LOCO_FAIL_TIMEOUT_MS + slack (the program checks and prints the times; the cut time
# is written to DIR/cut). Skips (77) when network namespaces cannot be made here. The EXIT
# trap kills every node by PID and deletes the namespaces.
#
#   bash netns.sh PROGRAM [LOCO_RUN (unused)]
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"

PFX="loco-t$$"
NS_BR="$PFX-br"
NS=("" "$PFX-1" "$PFX-2" "$PFX-3")

# (the namespaces' veths go with them at exit: driver.sh, ns_add)
for ns in "$NS_BR" "${NS[@]:1}"; do
	ns_add "$ns"
done

# topology: a bridge in NS_BR, one veth pair per node (vI on the bridge, eth0 in the node)
if ! err=$(ip -n "$NS_BR" link add br0 type bridge 2>&1); then
	echo "SKIP: cannot create a bridge in a namespace ($err)"
	exit 77
fi
setup() {
	ip -n "$NS_BR" link set br0 up || return 1
	for i in 1 2 3; do
		ip -n "$NS_BR" link add "v$i" type veth peer name eth0 netns "${NS[i]}" || return 1
		ip -n "$NS_BR" link set "v$i" master br0 up || return 1
		ip -n "${NS[i]}" addr add "10.99.0.$i/24" dev eth0 || return 1
		ip -n "${NS[i]}" link set eth0 up || return 1
		ip -n "${NS[i]}" link set lo up || return 1
	done
}
if ! err=$(setup 2>&1); then
	echo "SKIP: cannot build the veth/bridge topology ($err)"
	exit 77
fi
ok "namespaces ${NS[*]:1} behind bridge br0 in $NS_BR"

export LOCO_NODES=3
export LOCO_FAIL_TIMEOUT_MS=${LOCO_FAIL_TIMEOUT_MS:-1000}
export LOCO_SECRET="netns-$$-$RANDOM$RANDOM"
export LOCO_LOG=${LOCO_LOG:-info}
NODE_PID=("")
for i in 1 2 3; do
	if [[ $i -eq 1 ]]; then
		ip netns exec "${NS[i]}" env -u LOCO_JOIN LOCO_NODE_ID=1 LOCO_ADDR=10.99.0.1:7001 \
			"$PROG" "$T" >"$T/out.$i" 2>&1 &
	else
		ip netns exec "${NS[i]}" env LOCO_NODE_ID="$i" LOCO_ADDR="10.99.0.$i:0" \
			LOCO_JOIN=10.99.0.1:7001 "$PROG" "$T" >"$T/out.$i" 2>&1 &
	fi
	NODE_PID+=("$!")
	PIDS+=("$!")
done

# all_ready -- true when every node created its ready file (or one already exited)
all_ready() {
	local i
	for i in 1 2 3; do
		[[ -e $T/ready.$i ]] || return 1
	done
}
exited() {
	local st
	st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 0
	[[ -z $st || $st == Z ]]
}
ready=0
for ((k = 0; k < 600; k++)); do # 30 s
	if all_ready; then
		ready=1
		break
	fi
	for i in 1 2 3; do
		exited "${NODE_PID[i]}" && break 2
	done
	sleep 0.05
done

if [[ $ready -eq 1 ]]; then
	ok "all three nodes paired"
	t_cut=$("$PROG" --now)
	if ip -n "$NS_BR" link set v3 down; then
		echo "$t_cut" >"$T/cut.tmp" && mv "$T/cut.tmp" "$T/cut"
		ok "cut node 3's link (v3 down at the bridge)"
	else
		fail "could not cut node 3's link"
	fi
else
	fail "the nodes did not all pair within 30 s"
fi

for i in 1 2 3; do
	wait_pid 60 "${NODE_PID[i]}"
	sed "s/^/[$i] /" "$T/out.$i"
	if [[ $RC -eq 0 ]]; then
		ok "node $i exited 0"
	else
		fail "node $i exited with status $RC"
	fi
done
finish
