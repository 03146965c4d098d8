#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# demo.sh -- the README's first command: install what is missing, build, start the KV store
# (4 kv-servers, 2 replicas of each key) and memcached on this host, run the same YCSB
# workload against both with kv-ycsb, print both tables and the ratios, and say where the
# JSON and the plots are. Everything it starts is ended by PID.
#
#   demos/kvstore/demo.sh [--workload B] [--duration 10] [--threads 2] [--records 10000]
#                         [--servers 4] [--out DIR] [--no-build]
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
workload=B duration=10 threads=2 records=10000 servers=4 build=1 out=
while [[ $# -gt 0 ]]; do
	case $1 in
	--workload) workload=$2; shift ;;
	--duration) duration=$2; shift ;;
	--threads) threads=$2; shift ;;
	--records) records=$2; shift ;;
	--servers) servers=$2; shift ;;
	--out) out=$2; shift ;;
	--no-build) build=0 ;;
	-h | --help) sed -n '3,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
cd "$src"
if [[ $build == 1 ]]; then
	tools/test --build-only >&2
fi
b=$src/build
for p in tools/loco-run demos/kvstore/kv-server demos/kvstore/kv-ycsb; do
	[[ -x $b/$p ]] || { echo "demo.sh: $b/$p is missing: build first" >&2; exit 1; }
done
[[ -n $out ]] || out=$(mktemp -d /tmp/loco-kv-demo.XXXXXX)
mkdir -p "$out"

lr= mc=
cleanup() {
	for p in $lr $mc; do
		kill "$p" 2>/dev/null || continue
		for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap cleanup EXIT

echo "== the LOCO KV store: $servers servers, 2 replicas (loco-run; logs in $out/servers.log)"
rm -f "$out/kv.cluster"
"$b/tools/loco-run" --keep-going --control "$out/ctl" -n "$servers" "$b/demos/kvstore/kv-server" \
	--replicas 2 --capacity $(((records * 2 / servers + 4095) / 4096 * 4096 + 4096)) \
	--cluster "$out/kv.cluster" >"$out/servers.log" 2>&1 &
lr=$!
for _ in $(seq 1 300); do
	[[ $(grep -c '^server ' "$out/kv.cluster" 2>/dev/null) == "$servers" ]] && break
	kill -0 "$lr" 2>/dev/null || { tail "$out/servers.log"; exit 1; }
	sleep 0.1
done
args=(--workload "$workload" --records "$records" --duration "$duration" --threads "$threads")
"$b/demos/kvstore/kv-ycsb" --store "loco:$out/kv.cluster" "${args[@]}" --verify \
	--json "$out/loco.json" --plot "$out/loco.png" 2>&1 | grep -v MEMLOCK

echo
echo "== memcached (Debian's, $threads server threads, libmemcached binary protocol)"
if command -v memcached >/dev/null 2>&1; then
	port=$((10000 + RANDOM % 20000))
	memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -t "$threads" -m 1024 >"$out/mc.log" 2>&1 &
	mc=$!
	for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
	"$b/demos/kvstore/kv-ycsb" --store "memcached:127.0.0.1:$port" "${args[@]}" --verify \
		--json "$out/memcached.json" --plot "$out/memcached.png"
	echo
	python3 - "$out/loco.json" "$out/memcached.json" <<'EOF'
import json, sys
lo, mc = (json.load(open(p)) for p in sys.argv[1:3])
print("== LOCO / memcached, same workload, same client threads")
print("%-8s %12s %12s %8s   %s" % ("op", "LOCO ops/s", "mc ops/s", "ratio", "p50 us LOCO / mc"))
tot = [0, 0]
for op in ("read", "update"):
    if op in lo["ops"] and op in mc["ops"]:
        a, b = lo["ops"][op], mc["ops"][op]
        tot[0] += a["ops_per_s"]; tot[1] += b["ops_per_s"]
        print("%-8s %12.0f %12.0f %7.2fx   %.1f / %.1f" % (op, a["ops_per_s"], b["ops_per_s"],
              a["ops_per_s"] / b["ops_per_s"], a["p50_us"], b["p50_us"]))
print("%-8s %12.0f %12.0f %7.2fx" % ("total", tot[0], tot[1], tot[0] / tot[1]))
EOF
else
	echo "memcached is not installed (apt-get install memcached): no comparison"
fi
echo
echo "JSON and plots of throughput over time: $out/{loco,memcached}.{json,png}"
