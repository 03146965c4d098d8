#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# results-dir.sh -- the benchmarks write their JSON where they are told and, by default, beside
# the program or into $LOCO_BENCH_OUT, never into the folder they are run from: fabric-lat and
# rpipe-bench (which failed when bench/results/ was missing) run from an empty folder with
# short counts; exit 0 pass, 1 fail.
#
#   results-dir.sh BUILD_ROOT LOCO_RUN
set -u
build=$1 lr=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp/cwd"
cd "$tmp/cwd" || exit 1
export LOCO_FABRIC=tcp
unset LOCO_BENCH_OUT

# 1. the default: results/ beside the program, made when missing
def=$build/bench/results
rm -f "$def/fabric-tcp.json"
"$build/bench/fabric-lat" --iters 200 --warmup 10 --rate-ops 2000 >"$tmp/fl.log" 2>&1 ||
	{ cat "$tmp/fl.log"; fail "fabric-lat exited $?"; }
[[ -s $def/fabric-tcp.json ]] || { cat "$tmp/fl.log"; fail "no $def/fabric-tcp.json"; }
grep -q "results: $def/fabric-tcp.json" "$tmp/fl.log" || fail "fabric-lat did not say where"
echo "fabric-lat: default $def/fabric-tcp.json: ok"

# 2. LOCO_BENCH_OUT, a folder that does not exist yet (rpipe-bench failed on that)
LOCO_BENCH_OUT=$tmp/out/deeper "$lr" -n 2 --timeout 60 "$build/bench/rpipe-bench" --msgs 2000 \
	--iters 200 >"$tmp/rp.log" 2>&1 || { cat "$tmp/rp.log"; fail "rpipe-bench exited"; }
[[ -s $tmp/out/deeper/rpipe-tcp.json ]] || { cat "$tmp/rp.log"; fail "no rpipe-tcp.json"; }
echo "rpipe-bench: LOCO_BENCH_OUT=$tmp/out/deeper: ok"

# 3. --json wins over both
LOCO_BENCH_OUT=$tmp/out "$build/bench/fabric-lat" --iters 200 --warmup 10 --rate-ops 2000 \
	--json "$tmp/named.json" >"$tmp/fl2.log" 2>&1 || { cat "$tmp/fl2.log"; fail "fabric-lat"; }
[[ -s $tmp/named.json && ! -e $tmp/out/fabric-tcp.json ]] || fail "--json not obeyed"
echo "fabric-lat: --json FILE: ok"

# nothing was written where the programs ran
if [[ -n $(ls -A "$tmp/cwd") ]]; then
	ls -lR "$tmp/cwd"
	fail "files written into the folder the benchmarks ran from"
fi
echo "nothing written into the current folder: ok"
