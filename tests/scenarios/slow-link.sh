#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# slow-link.sh -- two LOCO nodes as two hosts on a slow link: each in its own network namespace,
# joined by a veth pair (10.98.0.1 and 10.98.0.2) whose two ends each send at most RATE (a tbf
# qdisc, queueing at most 100 ms). PROGRAM (slow-link.c) pushes values that take several
# failure bounds to cross: the link, and the membership, must hold. No launcher: each node is
# started with `ip netns exec NS env LOCO_ADDR=... LOCO_NODE_ID=... LOCO_JOIN=... PROGRAM`.
# Skips (77) when namespaces or the tbf qdisc cannot be made here. The EXIT trap kills both
# nodes by PID and deletes the namespaces (their veth goes with them).
#
#   bash slow-link.sh PROGRAM [LOCO_RUN (unused)]
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"

RATE=2mbit
if ! command -v tc >/dev/null 2>&1; then
	echo "SKIP: the tc command (iproute2) is not installed"
	exit 77
fi

NS=("" "loco-s$$-1" "loco-s$$-2")
ns_add "${NS[1]}"
ns_add "${NS[2]}"
setup() {
	ip -n "${NS[1]}" link add e0 type veth peer name e0 netns "${NS[2]}" || return 1
	for i in 1 2; do
		ip -n "${NS[i]}" addr add "10.98.0.$i/24" dev e0 || return 1
		ip -n "${NS[i]}" link set e0 up || return 1
		ip -n "${NS[i]}" link set lo up || return 1
	done
}
if ! err=$(setup 2>&1); then
	echo "SKIP: cannot build the veth link ($err)"
	exit 77
fi
for i in 1 2; do
	if ! err=$(ip netns exec "${NS[i]}" tc qdisc add dev e0 root tbf rate $RATE burst 32kb \
		latency 100ms 2>&1); then
		echo "SKIP: cannot limit the link's rate (tc qdisc add ... tbf: $err)"
		exit 77
	fi
done
ok "namespaces ${NS[*]:1}, a veth link sending at most $RATE each way"

export LOCO_NODES=2
export LOCO_FAIL_TIMEOUT_MS=${LOCO_FAIL_TIMEOUT_MS:-1000}
export LOCO_SECRET="slow-link-$$-$RANDOM$RANDOM"
NODE_PID=("")
for i in 1 2; do
	if [[ $i -eq 1 ]]; then
		ip netns exec "${NS[i]}" env -u LOCO_JOIN LOCO_NODE_ID=1 LOCO_ADDR=10.98.0.1:7001 \
			"$PROG" >"$T/out.$i" 2>&1 &
	else
		ip netns exec "${NS[i]}" env LOCO_NODE_ID=2 LOCO_ADDR=10.98.0.2:0 \
			LOCO_JOIN=10.98.0.1:7001 "$PROG" >"$T/out.$i" 2>&1 &
	fi
	NODE_PID+=("$!")
	PIDS+=("$!")
done
for i in 1 2; do
	wait_pid 100 "${NODE_PID[i]}"
	sed "s/^/[$i] /" "$T/out.$i"
	if [[ $RC -eq 0 ]]; then
		ok "node $i exited 0"
	else
		fail "node $i exited with status $RC"
	fi
done
finish
