#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# demo.sh -- the README's first command: install what is missing, build the programs it runs
# (loco-run, kv-server, kv-ycsb, kv: nothing else), and run the same YCSB workload with
# kv-ycsb against
#   - the LOCO KV store (4 kv-servers, 2 replicas of each key) with LOCO_FABRIC=auto, the
#     default: on one host it links the nodes over shared memory (shm), so a GET is a copy
#     out of the owner's table;
#   - the same store with LOCO_FABRIC=tcp (servers and client): loopback TCP, as memcached;
#   - Debian's memcached, over loopback TCP;
# --runs times each, in turn (LOCO auto, LOCO tcp, memcached, then again), each run on a
# fresh store and a fresh memcached. Prints a line per run, the fabric LOCO used and why,
# the median and range (min-max) of throughput and latencies per operation, the LOCO /
# memcached ratios, and writes one chart of it all (PNG). Everything it starts is ended by
# PID; all its traffic stays on this host (127.0.0.1 and shared memory).
#
#   demos/kvstore/demo.sh [--workload B] [--duration 10] [--runs 3] [--threads 2]
#                         [--records 10000] [--servers 4] [--fabrics "auto tcp"]
#                         [--out DIR] [--builddir DIR] [--no-build]
#
# --builddir DIR takes the programs from DIR (default: build/ of this checkout, configured
# and built by tools/test --build-only; another DIR is configured with meson setup if need
# be, and built with meson compile).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
workload=B duration=10 runs=3 threads=2 records=10000 servers=4 fabrics="auto tcp"
build=1 out= b=$src/build
while [[ $# -gt 0 ]]; do
	case $1 in
	--workload) workload=$2; shift ;;
	--duration) duration=$2; shift ;;
	--runs) runs=$2; shift ;;
	--threads) threads=$2; shift ;;
	--records) records=$2; shift ;;
	--servers) servers=$2; shift ;;
	--fabrics) fabrics=$2; shift ;;
	--out) out=$2; shift ;;
	--builddir) b=$(realpath -m "$2"); shift ;;
	--no-build) build=0 ;;
	-h | --help) awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print; next } NR > 3 { exit }' \
		"${BASH_SOURCE[0]}"; exit 0 ;;
	*) echo "demo.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "demo.sh: --runs takes a count" >&2; exit 2; }
cd "$src"
targets=(loco-run kv-server kv-ycsb kv)
if [[ $build == 1 ]]; then
	echo "== building ${targets[*]} in $b" >&2
	if [[ $b == "$src/build" ]]; then
		tools/test --build-only "${targets[@]}" >&2
	else
		[[ -f $b/build.ninja ]] || meson setup "$b" >&2
		meson compile -C "$b" "${targets[@]}" >&2
	fi
fi
for p in tools/loco-run demos/kvstore/kv-server demos/kvstore/kv-ycsb demos/kvstore/kv; do
	[[ -x $b/$p ]] || { echo "demo.sh: $b/$p is missing: build first" >&2; exit 1; }
done
mc_bin=$(command -v memcached || true)
[[ -n $mc_bin ]] || echo "demo.sh: memcached is not installed (apt-get install memcached):" \
	"no comparison" >&2
[[ -n $out ]] || out=$(mktemp -d /tmp/loco-kv-demo.XXXXXX)
mkdir -p "$out"
rm -f "$out"/loco-*-[0-9]*.json "$out"/memcached-[0-9]*.json # an earlier run's: the summary reads them all

lr= mc=
# stop PID -- SIGTERM, wait up to 10 s, then SIGKILL (the servers hand their keys over first)
stop() {
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
cleanup() {
	for p in $lr $mc; do stop "$p"; done
}
trap cleanup EXIT

args=(--workload "$workload" --records "$records" --duration "$duration" --threads "$threads"
	--verify)
capacity=$(((records * 2 / servers + 4095) / 4096 * 4096 + 4096))
ycsb=$b/demos/kvstore/kv-ycsb
report=(python3 "$src/demos/kvstore/demo-report.py")

# loco_run FABRIC RUN -- a fresh store on FABRIC, one kv-ycsb run against it, the store ended
loco_run() {
	local fab=$1 i=$2 cl=$out/kv-$1.cluster log=$out/servers-$1-$2.log
	rm -f "$cl" "$cl".*
	LOCO_FABRIC=$fab "$b/tools/loco-run" --hosts 127.0.0.1 --keep-going --control "$out/ctl" \
		-n "$servers" "$b/demos/kvstore/kv-server" --replicas 2 --capacity "$capacity" \
		--cluster "$cl" >"$log" 2>&1 &
	lr=$!
	for _ in $(seq 1 300); do
		[[ $(grep -c '^server ' "$cl" 2>/dev/null) == "$servers" ]] && break
		kill -0 "$lr" 2>/dev/null || { grep -v MEMLOCK "$log" | tail; exit 1; }
		sleep 0.1
	done
	if ! LOCO_FABRIC=$fab "$ycsb" --store "loco:$cl" "${args[@]}" \
		--json "$out/loco-$fab-$i.json" >"$out/loco-$fab-$i.out" 2>&1; then
		grep -v MEMLOCK "$out/loco-$fab-$i.out" | tail
		echo "demo.sh: kv-ycsb against LOCO ($fab) failed: $out/loco-$fab-$i.out" >&2
		exit 1
	fi
	if [[ $i == 1 ]]; then # which fabric, and why; what the store counted
		echo "   $(grep -o 'fabric: .*' "$out/loco-$fab-$i.out")"
		{ "$b/demos/kvstore/kv" --cluster "$cl" stat 2>/dev/null || true; } |
			sed -n 's/^clients: /   kv stat: clients: /p'
	fi
	stop "$lr"
	lr=
}

# mc_run RUN -- a fresh memcached (this host only, 127.0.0.1), one kv-ycsb run, memcached ended
mc_run() {
	local i=$1 port=$((10000 + RANDOM % 20000))
	"$mc_bin" -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -t "$threads" -m 1024 \
		>"$out/mc.log" 2>&1 &
	mc=$!
	for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
	if ! "$ycsb" --store "memcached:127.0.0.1:$port" "${args[@]}" \
		--json "$out/memcached-$i.json" >"$out/memcached-$i.out" 2>&1; then
		tail "$out/memcached-$i.out"
		echo "demo.sh: kv-ycsb against memcached failed: $out/memcached-$i.out" >&2
		exit 1
	fi
	stop "$mc"
	mc=
}

echo "== YCSB workload $workload, $records records, $threads client threads, ${duration} s a run," \
	"$runs run(s) of each in turn"
echo "   LOCO: $servers kv-servers on this host, 2 replicas of each key; memcached: Debian's," \
	"$threads threads, libmemcached binary protocol"
for i in $(seq 1 "$runs"); do
	for fab in $fabrics; do
		loco_run "$fab" "$i"
		printf '%-28s %s\n' "run $i LOCO (LOCO_FABRIC=$fab)" \
			"$("${report[@]}" line "$out/loco-$fab-$i.json")"
	done
	if [[ -n $mc_bin ]]; then
		mc_run "$i"
		printf '%-28s %s\n' "run $i memcached (tcp)" "$("${report[@]}" line "$out/memcached-$i.json")"
	fi
done

echo
status=0
"${report[@]}" summary "$out" "$out/kv-demo.png" || status=1
cat <<EOF

Why the rows differ: with LOCO_FABRIC=auto (the default) LOCO links the nodes of one host
over shared memory (shm): a GET is the client's own one-sided READ of the owner's table, a
memory copy with no system call and no server thread. memcached is reached over loopback
TCP, a system call and the kernel's TCP stack each way. The tcp rows compare like with like:
LOCO with LOCO_FABRIC=tcp (servers and client) against memcached, both over loopback TCP;
there the owner's tcp NIC thread serves LOCO's READ (loco-fabric-tcp(7)). Between hosts,
auto takes verbs (RDMA) when a device opens, else tcp: this one-host demo measures neither.
An update is an rpc to the key's owner, which writes it to its replica before it answers
(2 copies; memcached keeps 1); an idle owner's threads spin a short window, then sleep,
and a wake-up costs tens to hundreds of microseconds (demos/kvstore/README.md, "Limits"). Each client
thread runs one operation at a time, so slow updates hold its reads back too: a row's read
and update ops/s keep the workload's mix.

JSON of every run (with the per-second timeline) and kv-ycsb's output: $out
EOF
exit $status
