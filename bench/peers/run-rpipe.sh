#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# run-rpipe.sh -- loco_rpipe (bench/rpipe-bench, 2 nodes, tcp fabric) against Open MPI
# point-to-point (bench/peers/mpi-pingpong, 2 ranks, --mca btl tcp,self: the same loopback
# link), back to back, RUNS times in turn. Prints every run's figures, the median of each over
# the runs, and the ratios: rate LOCO / MPI (64 B; target >= 1.0) and one-way latency
# LOCO / MPI (8 and 64 B; lower is better). Both sides busy-poll: LOCO_WAIT=spin unless
# LOCO_WAIT is set (MPI polls its sockets).
#
#   bench/peers/run-rpipe.sh [BUILD_DIR] [RUNS] [MSGS] [ITERS]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-3}
MSGS=${3:-1000000}
ITERS=${4:-20000}
MPIRUN=(mpirun -n 2 --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none # no CMA in containers
export LOCO_WAIT=${LOCO_WAIT:-spin}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

for _ in $(seq 1 "$RUNS"); do
	if [ -x "$BUILD/bench/peers/mpi-pingpong" ]; then
		"${MPIRUN[@]}" --mca btl tcp,self "$BUILD/bench/peers/mpi-pingpong" "$ITERS" \
			$((MSGS / 64)) >>"$OUT"
	fi
	LOCO_FABRIC=tcp "$BUILD/tools/loco-run" -n 2 --no-prefix --timeout 300 \
		"$BUILD/bench/rpipe-bench" --msgs "$MSGS" --iters "$ITERS" | grep '^loco ' >>"$OUT"
done
echo "# every run: who what size [mode] value(s) (rate: msgs/s; lat: one-way median_us p99_us)"
sort -k1,1 -k2,2 -k3,3n -s "$OUT"
# median over the runs of the field @2 of lines starting with @1
med() { grep "^$1 " "$OUT" | awk -v f="$2" '{ print $f }' | sort -g |
	awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "nan" }'; }
echo "# median of $RUNS runs (LOCO_WAIT=$LOCO_WAIT)"
mr=$(med "mpi rate 64" 4)
lc=$(med "loco rate 64 copy" 5)
lz=$(med "loco rate 64 zc" 5)
printf "64 B rate     mpi %10.0f  loco copy %10.0f (x%.2f)  loco zero-copy %10.0f (x%.2f)\n" \
	"$mr" "$lc" "$(echo "$lc / $mr" | bc -l)" "$lz" "$(echo "$lz / $mr" | bc -l)"
for sz in 8 64; do
	ml=$(med "mpi lat $sz" 4)
	ll=$(med "loco lat $sz" 4)
	printf "%2d B one-way  mpi %8.2f us  loco %8.2f us (x%.2f)\n" "$sz" "$ml" "$ll" \
		"$(echo "$ll / $ml" | bc -l)"
done
