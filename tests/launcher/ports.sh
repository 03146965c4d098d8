#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# ports.sh -- the ports loco-run hands out lie outside the kernel's ephemeral range.
#
# A port loco-run found free is bound by the node only once it started; a port inside the
# ephemeral range can be given to another socket first. Seen (demo-hello-4): node 2's listener,
# on port 0, got node 1's port; node 2 joined itself ("refused a node claiming id 2") and node 1
# could not listen. Here, in a network namespace of its own whose ephemeral range is 32 ports
# (40000-40031), so that such a collision is likely, and that keeps no TIME_WAIT sockets (they
# would hold the range's few ports from one launch to the next): every port loco-run gives (the job's, and
# each node's with --control) must lie outside the range, and 8 launches of 4 nodes that pair
# (HELLO, the hello demo) must all exit 0. Skips (77) when namespaces cannot be made here.
# Usage: ports.sh LOCO_RUN HELLO
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HELLO=${2:?usage: $0 LOCO_RUN HELLO}
NS="loco-p$$"
LO=40000
HI=40031

if ! command -v ip >/dev/null 2>&1; then
	echo "SKIP: the ip command (iproute2) is not installed"
	exit 77
fi
if ! err=$(ip netns add "$NS" 2>&1); then
	echo "SKIP: cannot create a network namespace (ip netns add: $err); run as root"
	exit 77
fi
del_ns() {
	ip netns del "$NS" 2>/dev/null
	cleanup
}
trap del_ns EXIT
if ! ip -n "$NS" link set lo up ||
	! ip netns exec "$NS" sysctl -qw net.ipv4.ip_local_port_range="$LO $HI" \
		net.ipv4.tcp_max_tw_buckets=0; then
	echo "SKIP: cannot set up the namespace's loopback and port range"
	exit 77
fi
check "the namespace's ephemeral range is $LO-$HI" \
	[ "$(ip netns exec "$NS" cat /proc/sys/net/ipv4/ip_local_port_range | tr -s '\t ' ' ')" = "$LO $HI" ]

# nsrun -- run_lr's job inside the namespace: loco-run ARGS..., its status in RC
nsrun() {
	timeout -k 5 60 ip netns exec "$NS" "$LR" --timeout 45 "$@" >"$T/out" 2>&1
	RC=$?
}

# outside -- true when PORT is a real port outside [LO, HI]
outside() {
	[[ $1 =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65536 && ($1 < LO || $1 > HI)))
}

DUMP='echo "$LOCO_NODE_ID ${LOCO_ADDR##*:}" >"$T/port.$LOCO_NODE_ID"'
for k in 1 2 3; do
	rm -f "$T"/port.*
	nsrun -n 4 --control "$T/ctl" bash -c "$DUMP"
	check "--control launch $k exits 0 (rc $RC)" [ "$RC" -eq 0 ]
	for i in 1 2 3 4; do
		read -r _ port <"$T/port.$i" 2>/dev/null || port=none
		check "launch $k: node $i's port ${port} is outside $LO-$HI" outside "$port"
	done
done

# the hello demo pairs 4 nodes: a port collision fails it (node 1 cannot listen)
for k in 1 2 3 4 5 6 7 8; do
	nsrun -n 4 env LOCO_FABRIC=tcp "$HELLO"
	if [[ $RC -ne 0 ]]; then
		sed 's/^/  | /' "$T/out" | head -20
	fi
	check "hello launch $k of 4 nodes exits 0 (rc $RC)" [ "$RC" -eq 0 ]
done
finish
