# shellcheck shell=bash
# SPDX-License-Identifier: BSD-2-Clause
# views-lib.sh -- shared by the membership-view drivers (partition-*.sh, stop-rejoin.sh,
# busy-host.sh, host-pause.sh, duplicate-id.sh, leave-unheard.sh), sourced after driver.sh. Nodes are view-node
# programs, each writing $T/state.ID (see view-node.c); either each in its own network
# namespace behind a bridge (vl_netns, 10.99.0.ID/24, like netns.sh) or all on loopback. Every
# node is started in the background and recorded in PIDS (the EXIT trap SIGKILLs it); vl_stop
# ends them by creating $T/stop and waiting for each PID, bounded.

VL_N=0
VL_NETNS=0
VL_PFX="loco-v$$"
VL_NS_BR="$VL_PFX-br"
VL_NS=()
VL_PID=("")
# control ports below the kernel's ephemeral range: an outgoing connection (ours or another
# test's) can take any port inside it, and then a node fails with "Address already in use"
# (seen: duplicate-id, stop-rejoin)
vl_eph_lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
VL_PORT=$((10000 + ($$ * 7 + RANDOM) % (vl_eph_lo - 10100)))

# vl_netns N -- N namespaces behind a bridge; skips (77) when namespaces cannot be made here.
vl_netns() {
	local n=$1 i err
	ns_add "$VL_NS_BR" # (deleted at exit, with their veths: driver.sh)
	VL_NS=("")
	for ((i = 1; i <= n; i++)); do
		VL_NS+=("$VL_PFX-$i")
		ns_add "${VL_NS[i]}"
	done
	if ! err=$(ip -n "$VL_NS_BR" link add br0 type bridge 2>&1); then
		echo "SKIP: cannot create a bridge in a namespace ($err)"
		exit 77
	fi
	ip -n "$VL_NS_BR" link set br0 up || { fail "bridge up"; finish; }
	for ((i = 1; i <= n; i++)); do
		if ! err=$({ ip -n "$VL_NS_BR" link add "v$i" type veth peer name eth0 netns "${VL_NS[i]}" &&
			ip -n "$VL_NS_BR" link set "v$i" master br0 up &&
			ip -n "${VL_NS[i]}" addr add "10.99.0.$i/24" dev eth0 &&
			ip -n "${VL_NS[i]}" link set eth0 up &&
			ip -n "${VL_NS[i]}" link set lo up; } 2>&1); then
			echo "SKIP: cannot build the veth/bridge topology ($err)"
			exit 77
		fi
	done
	VL_NETNS=1
	ok "namespaces behind bridge br0 in $VL_NS_BR"
}

# vl_addr ID -- node ID's control address.
vl_addr() {
	if ((VL_NETNS)); then
		echo "10.99.0.$1:7001"
	else
		echo "127.0.0.1:$((VL_PORT + $1))"
	fi
}

# vl_exec ID CMD... -- exec CMD as node ID is run (in its namespace); called in a background
# subshell, which it replaces: $! is then the program's PID (SIGSTOP reaches the node).
vl_exec() {
	local id=$1
	shift
	if ((VL_NETNS)); then
		exec ip netns exec "${VL_NS[id]}" "$@"
	else
		exec "$@"
	fi
}

# vl_start_node ID [ARGS...] -- start node ID (node 1 alone, the others join through it).
vl_start_node() {
	local id=$1 join
	shift
	join=$(vl_addr 1)
	if [[ $id -eq 1 && $# -eq 0 ]]; then
		vl_exec "$id" env -u LOCO_JOIN LOCO_NODE_ID=1 LOCO_ADDR="$(vl_addr 1)" \
			"$PROG" "$T" "$@" >>"$T/out.$id" 2>&1 &
	else
		vl_exec "$id" env LOCO_NODE_ID="$id" LOCO_ADDR="$(vl_addr "$id")" \
			LOCO_JOIN="$join" "$PROG" "$T" "$@" >>"$T/out.$id" 2>&1 &
	fi
	VL_PID[id]=$!
	PIDS+=("$!")
}

# vl_start N -- start nodes 1..N and wait (30 s) until each passed a barrier round.
vl_start() {
	local i k
	VL_N=$1
	export LOCO_NODES=$VL_N
	export LOCO_SECRET="views-$$-$RANDOM$RANDOM"
	export LOCO_LOG=${LOCO_LOG:-info}
	export LOCO_FAIL_TIMEOUT_MS=${LOCO_FAIL_TIMEOUT_MS:-1000}
	for ((i = 1; i <= VL_N; i++)); do
		vl_start_node "$i"
	done
	for ((k = 0; k < 600; k++)); do
		for ((i = 1; i <= VL_N; i++)); do
			[[ $(vl_get "$i" rounds) -gt 0 ]] || break
		done
		((i > VL_N)) && break
		sleep 0.05
	done
	if ((k == 600)); then
		fail "the nodes did not all pass a barrier round within 30 s"
		vl_stop
		finish
	fi
	ok "$VL_N nodes in view $(vl_get 1 view), passing barrier rounds"
}

# vl_get ID KEY -- KEY of node ID's last state (0 when there is none yet).
vl_get() {
	local v
	v=$(sed -n "s/^$2=//p" "$T/state.$1" 2>/dev/null)
	echo "${v:-0}"
}

# vl_now -- CLOCK_MONOTONIC in ns, the nodes' clock.
vl_now() {
	"$PROG" --now
}

# vl_one_view IDS... -- true when the nodes IDS all show the same view, with members IDS.
vl_one_view() {
	local want i v0
	want=$(
		IFS=,
		echo "$*"
	)
	v0=$(vl_get "$1" view)
	for i in "$@"; do
		[[ $(vl_get "$i" view) == "$v0" && $(vl_get "$i" members) == "$want" ]] || return 1
		[[ $(vl_get "$i" partitioned) == 0 ]] || return 1
	done
}

# vl_wait SECS CMD... -- poll CMD every 50 ms until it succeeds; false after SECS.
vl_wait() {
	local secs=$1 k
	shift
	for ((k = 0; k < secs * 20; k++)); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# vl_show -- every node's state, for the log.
vl_show() {
	local i
	for ((i = 1; i <= VL_N; i++)); do
		echo "  node $i: $(tr '\n' ' ' <"$T/state.$i" 2>/dev/null)"
	done
}

# vl_stop -- create $T/stop, wait (30 s) for every node; each must exit 0. Prints their output.
vl_stop() {
	local i
	touch "$T/stop"
	for ((i = 1; i <= VL_N; i++)); do
		[[ -n ${VL_PID[i]:-} ]] || continue
		wait_pid 30 "${VL_PID[i]}"
		sed "s/^/[$i] /" "$T/out.$i" | grep -v " tcp: " | tail -n 60
		if [[ $RC -eq 0 ]]; then
			ok "node $i exited 0"
		else
			fail "node $i exited with status $RC"
		fi
	done
}

# vl_ms NS0 NS1 -- (NS1 - NS0) in whole ms.
vl_ms() {
	echo $((($2 - $1) / 1000000))
}

# vl_gt ID KEY VALUE -- true when node ID's KEY is above VALUE (read anew at each call).
vl_gt() {
	(($(vl_get "$1" "$2") > $3))
}

# vl_check_leases -- the lock loops' grants (VIEW_LOCK=1, view-lock.c): sorted by token, tokens
# are unique and every hold ends before the next one starts (one CLOCK_MONOTONIC for all).
vl_check_leases() {
	local n out
	n=$(cat "$T"/lock.* 2>/dev/null | wc -l)
	if ((n == 0)); then
		fail "no lock grants recorded"
		return
	fi
	if out=$(cat "$T"/lock.* | sort -n -k1,1 | awk '
		$1 == 0 { next }
		k > 0 && $1 == pt { print "token " $1 " granted twice (nodes " pn " and " $2 ")"; bad = 1 }
		k > 0 && $1 != pt && $3 < pe {
			printf "hold %d (node %d) began %.3f ms before hold %d (node %d) ended\n",
				$1, $2, (pe - $3) / 1e6, pt, pn
			bad = 1
		}
		{ pt = $1; pn = $2; pe = $4; k++ }
		END { exit bad }'); then
		ok "$n lock grants: every token once, increasing, no two holds overlap"
	else
		fail "lock holds overlap: $out"
		echo "the grants, by token (TOKEN NODE START_NS END_NS RECOVERED), around the first fault:"
		cat "$T"/lock.* | sort -n -k1,1 | awk -v t="$(echo "$out" | awk 'NR == 1 { print $2 }')" \
			'$1 >= t - 4 && $1 <= t + 2'
	fi
}
