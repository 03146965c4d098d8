#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# run-rpc.sh -- loco_rpc (bench/rpc-bench, 2 nodes, tcp fabric) against Open MPI on the same
# loopback link (--mca btl tcp,self), back to back, RUNS times in turn, with LOCO_WAIT=spin and
# LOCO_WAIT=sleep (or only $LOCO_WAIT when set). The peers: mpi-pingpong (the 8 B ping-pong
# round trip) and mpi-rma (8 B MPI_Put/Get/Fetch_and_op/Compare_and_swap + MPI_Win_flush, and
# MPI_Barrier), with --mca osc pt2pt: Open MPI's other one-sided components take shared memory
# between ranks of one host, which is not the link LOCO uses here. Prints every run's figures,
# the medians over the runs, and the ratios against the targets of issue 12:
#   call_return 8 B round trip / MPI ping-pong round trip   (target <= 1.0)
#   trad 256 B MB/s / raw pipelined WRITE 256 B MB/s         (target >= 0.95)
# and LOCO's 8 B write/read/FAA/CAS + completion against MPI's RMA (lower is better).
#
#   bench/peers/run-rpc.sh [BUILD_DIR] [RUNS] [CALLS] [ITERS]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-1}
CALLS=${3:-200000}
ITERS=${4:-20000}
MPIRUN=(mpirun -n 2 --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none # no CMA in containers
WAITS=${LOCO_WAIT:-spin sleep}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

for _ in $(seq 1 "$RUNS"); do
	if [ -x "$BUILD/bench/peers/mpi-pingpong" ]; then
		"${MPIRUN[@]}" --mca btl tcp,self "$BUILD/bench/peers/mpi-pingpong" "$ITERS" 1000 |
			grep '^mpi lat' >>"$OUT"
		"${MPIRUN[@]}" --mca btl tcp,self --mca osc pt2pt "$BUILD/bench/peers/mpi-rma" \
			"$ITERS" >>"$OUT"
	fi
	for w in $WAITS; do
		LOCO_WAIT=$w LOCO_FABRIC=tcp "$BUILD/tools/loco-run" -n 2 --no-prefix --timeout 300 \
			"$BUILD/bench/rpc-bench" --calls "$CALLS" --iters "$ITERS" |
			grep '^loco ' | sed "s/^loco /loco-$w /" >>"$OUT"
	done
done
echo "# every run (rate: calls/s MB/s; lat, op, barrier: median_us p99_us)"
sort -s -k1,1 -k2,2 -k3,3 "$OUT"
# median over the runs of field @2 of the lines starting with @1
med() { grep "^$1 " "$OUT" | awk -v f="$2" '{ print $f }' | sort -g |
	awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "nan" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "nan"; else printf "%.2f", a / b }'; }
echo "# medians of $RUNS run(s)"
mrtt=$(awk -v h="$(med "mpi lat 8" 4)" 'BEGIN { printf "%.3f", 2 * h }')
for w in $WAITS; do
	cr=$(med "loco-$w lat call_return" 4)
	rr=$(med "loco-$w lat rawrtt" 4)
	printf "[LOCO_WAIT=%s] call_return 8 B %8.2f us; raw WRITE round trip %8.2f us; MPI ping-pong" \
		"$w" "$cr" "$rr"
	printf " round trip %6.2f us: call_return / MPI = x%s (target <= 1.0)\n" "$mrtt" \
		"$(ratio "$cr" "$mrtt")"
	for sz in 8 64 256; do
		raw=$(med "loco-$w rate $sz raw" 6)
		line="[LOCO_WAIT=$w] $sz B MB/s: raw WRITE $raw"
		for mode in none trad overflow; do
			v=$(med "loco-$w rate $sz $mode" 6)
			line="$line, $mode $v (x$(ratio "$v" "$raw"))"
		done
		echo "$line"
	done
	t=$(med "loco-$w rate 256 trad" 6)
	raw=$(med "loco-$w rate 256 raw" 6)
	echo "[LOCO_WAIT=$w] trad 256 B / raw WRITE 256 B = x$(ratio "$t" "$raw") (target >= 0.95)"
	for op in write:put read:get faa:faa cas:cas; do
		l=$(med "loco-$w op ${op%%:*}" 4)
		m=$(med "mpi op ${op##*:}" 4)
		printf "[LOCO_WAIT=%s] 8 B %-5s + completion: loco %8.2f us, MPI %-4s + flush %8.2f us (x%s)\n" \
			"$w" "${op%%:*}" "$l" "${op##*:}" "$m" "$(ratio "$l" "$m")"
	done
done
echo "MPI_Barrier (2 ranks): $(med "mpi barrier" 3) us median (LOCO's barrier: bench/wait-cpu)"
