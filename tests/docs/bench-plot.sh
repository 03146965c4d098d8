#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# bench-plot.sh -- bench/plot draws a PNG for each figure group of a result
# file: an object of distributions (fabric-lat's latency_us) and a list of
# entries (rpipe-bench's rate), from a fixture written here. Exit 0 pass,
# 1 fail, 77 skip (no gnuplot and none could be installed).
#
#   bench-plot.sh SOURCE_ROOT
set -u
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/fix.json" <<'JSON'
{"bench": "fixture", "provider": "tcp", "date": "2026-11-26T00:00:00Z",
 "latency_us": {"WRITE": {"median": 20.5, "p99": 40, "min": 14, "max": 9000},
                "READ": {"median": 21, "p99": 41, "min": 15, "max": 8000}},
 "rate": [{"size": 64, "mode": "copy", "msgs_per_s": 1000000, "mb_per_s": 64},
          {"size": 4096, "mode": "zero-copy", "msgs_per_s": 300000, "mb_per_s": 1228}]}
JSON
echo '{"not json' >"$tmp/bad.json"

python3 "$src/bench/plot" --out "$tmp/out" "$tmp/fix.json" >"$tmp/list"
rc=$?
[ $rc -eq 77 ] && { echo "SKIP: gnuplot missing"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: bench/plot exited $rc"; exit 1; }
for png in fix-latency_us fix-rate-msgs_per_s fix-rate-mb_per_s; do
	f="$tmp/out/$png.png"
	grep -qx "$f" "$tmp/list" || { echo "FAIL: $f not listed"; cat "$tmp/list"; exit 1; }
	# a PNG: the 8-byte signature, and more than a header
	sig=$(od -An -tx1 -N8 "$f" | tr -d ' \n')
	[ "$sig" = 89504e470d0a1a0a ] || { echo "FAIL: $f is not a PNG ($sig)"; exit 1; }
	[ "$(wc -c <"$f")" -gt 2000 ] || { echo "FAIL: $f is too small to hold a chart"; exit 1; }
done
echo "bench/plot: 3 charts from the fixture: ok"
python3 "$src/bench/plot" --no-install --out "$tmp/out2" "$tmp/bad.json" >/dev/null 2>&1
[ $? -eq 1 ] || { echo "FAIL: a file that is not JSON must exit 1"; exit 1; }
echo "bench/plot: a file that is not JSON: exit 1: ok"
exit 0
