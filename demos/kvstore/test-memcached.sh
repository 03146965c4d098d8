#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# test-memcached.sh KV_YCSB -- kv-ycsb against a memcached this test starts
# on loopback (and ends by PID):
#   1. workload A, 2 threads, 2 s, --verify: exit 0, both op types ran,
#      "0 lost, 0 corrupt", JSON written;
#   2. the check can fail: a 2 MiB memcached evicts most of 2,000 values of
#      8 KiB, and kv-ycsb --verify must report lost writes and exit 1.
# Skips (77) when memcached is not installed (tools/test installs it).
set -uo pipefail

ycsb=$1
command -v memcached >/dev/null 2>&1 || { echo "SKIP: memcached not installed"; exit 77; }
tmp=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# start_mc MB -- memcached on a free loopback port, in the foreground of a child: sets pid, port
start_mc() {
	for _ in $(seq 1 20); do
		port=$((10000 + RANDOM % 20000)) # below the ephemeral range (32768 on Linux)
		memcached -u root -l 127.0.0.1 -p "$port" -U 0 -t 2 -m "$1" >"$tmp/mc.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 50); do
			if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
	done
	echo "FAIL: memcached did not start"; cat "$tmp/mc.log"; exit 1
}

start_mc 64
out=$("$ycsb" --store "memcached:127.0.0.1:$port" --workload A --dist zipfian --records 5000 \
	--duration 2 --threads 2 --verify --json "$tmp/r.json")
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: kv-ycsb exited $rc"; exit 1; }
grep -q '^read ' <<<"$out" && grep -q '^update ' <<<"$out" || { echo "FAIL: an op type is missing"; exit 1; }
grep -q ' 0 lost, 0 corrupt' <<<"$out" || { echo "FAIL: the check found lost writes"; exit 1; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ops"]["read"]["ops_per_s"] > 0 and d["check"]["lost"] == 0' "$tmp/r.json" ||
	{ echo "FAIL: bad JSON"; exit 1; }
kill "$pid"; wait "$pid" 2>/dev/null; pid=

start_mc 2
out=$("$ycsb" --store "memcached:127.0.0.1:$port" --workload W --dist uniform --records 2000 \
	--value-size 8192 --duration 1 --threads 1 --verify)
rc=$?
echo "$out"
lost=$(sed -n 's/.* read back, \([0-9]*\) lost.*/\1/p' <<<"$out")
[[ $rc -eq 1 && -n $lost && $lost -gt 0 ]] || { echo "FAIL: evictions not reported as lost (rc $rc, lost '$lost')"; exit 1; }
echo "PASS: 0 lost against a roomy memcached; $lost lost reported against a 2 MiB one"
