#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# run-kv.sh -- the LOCO KV store (demos/kvstore: 4 kv-servers, 2 replicas) against Debian's
# memcached on this host, through demos/kvstore/demo.sh: for each workload (default C, B and
# A) and each wait policy (default sleep and spin, or only $LOCO_WAIT), the same kv-ycsb run
# against both, then one table of throughput ratios LOCO / memcached (issue 13's target: C
# and B >= 1.0 with the same client count). JSON and plots under
# ${LOCO_BENCH_OUT:-build/bench/results}/kv/.
#
#   bench/peers/run-kv.sh [DURATION_S] [THREADS] [WORKLOADS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
DUR=${1:-10}
THREADS=${2:-2}
WORKLOADS=${3:-C B A}
WAITS=${LOCO_WAIT:-sleep spin}
out=${LOCO_BENCH_OUT:-build/bench/results}/kv
mkdir -p "$out"
rows=()
for w in $WORKLOADS; do
	for p in $WAITS; do
		d=$out/$w-$p
		# one run on the default fabric (auto: shm on this host): loco-auto-1.json, memcached-1.json
		LOCO_WAIT=$p demos/kvstore/demo.sh --no-build --workload "$w" --duration "$DUR" \
			--threads "$THREADS" --fabrics auto --runs 1 --out "$d" >"$d.log" 2>&1 ||
			{ cat "$d.log"; exit 1; }
		rows+=("$(python3 - "$d/loco-auto-1.json" "$d/memcached-1.json" "$w" "$p" <<'PY'
import json, sys
lo, mc = (json.load(open(p)) for p in sys.argv[1:3])
t = lambda d: sum(v["ops_per_s"] for v in d["ops"].values())
p50 = lambda d, op: d["ops"][op]["p50_us"] if op in d["ops"] else float("nan")
print("%-3s %-6s %11.0f %11.0f %7.2fx %8.1f %8.1f %8.1f %8.1f" % (sys.argv[3], sys.argv[4],
      t(lo), t(mc), t(lo) / t(mc), p50(lo, "read"), p50(mc, "read"), p50(lo, "update"),
      p50(mc, "update")))
PY
)")
	done
done
echo "kv-ycsb, ${DUR} s, ${THREADS} client thread(s), 10,000 records of 100 B, zipfian; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-3s %-6s %11s %11s %8s %8s %8s %8s %8s\n' wl wait "LOCO op/s" "mc op/s" ratio \
	"rd p50" "mc rd" "upd p50" "mc upd"
printf '%s\n' "${rows[@]}"
echo "(p50 in microseconds; each run's tables, JSON and plots in $out/)"
