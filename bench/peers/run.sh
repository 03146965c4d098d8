#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# run.sh -- loco_reduce_run against Open MPI's MPI_Allreduce (sum, 8 B and 4 KiB, 4 processes
# on this host), RUNS times in turn, each on both links: MPI over tcp (--mca btl tcp,self) and
# over shared memory (--mca btl vader,self); LOCO on its tcp fabric and on its shm fabric, each
# with the default wait policy (adaptive), with LOCO_WAIT=spin (MPI polls too) and sleep. Prints every
# run's median and p99 (us per allreduce, timed on rank 0 / node 1) and the median of the
# medians. Unbound first (mpirun does not bind oversubscribed ranks by default, nor does
# loco-run; but LOCO's spinning nodes start spread over the CPUs, LOCO_SPREAD=1, the default:
# "-nospread" is LOCO with the kernel's placement alone); then bound the same way on both
# sides ("-bound": rank / node k on the k-th CPU, round robin: mpirun --bind-to
# core:overload-allowed, loco-run --bind), which takes out the scheduler's placement of 4
# spinning processes on 2 cores (3 on one core and 1 on the other in some runs), so the two
# are compared on the same placement.
#
#   bench/peers/run.sh [BUILD_DIR] [RUNS] [ITERS]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-5}
ITERS=${3:-5000}
MPIRUN=(mpirun -n 4 --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none # no CMA in containers
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

for _ in $(seq 1 "$RUNS"); do
	if [ -x "$BUILD/bench/peers/mpi-allreduce" ]; then
		"${MPIRUN[@]}" --mca btl tcp,self "$BUILD/bench/peers/mpi-allreduce" "$ITERS" |
			sed 's/^mpi/mpi-tcp/' >>"$OUT"
		"${MPIRUN[@]}" --mca btl vader,self "$BUILD/bench/peers/mpi-allreduce" "$ITERS" |
			sed 's/^mpi/mpi-shm/' >>"$OUT"
	fi
	for fabric in tcp shm; do
		for wait in adaptive spin sleep; do
			LOCO_WAIT=$wait LOCO_FABRIC=$fabric "$BUILD/tools/loco-run" -n 4 --no-prefix \
				--timeout 300 "$BUILD/bench/peers/loco-reduce" "$ITERS" |
				sed "s/^loco/loco-$fabric-$wait/" >>"$OUT"
		done
		# the kernel's placement alone, as MPI's unbound ranks have it
		LOCO_SPREAD=0 LOCO_WAIT=spin LOCO_FABRIC=$fabric "$BUILD/tools/loco-run" -n 4 \
			--no-prefix --timeout 300 "$BUILD/bench/peers/loco-reduce" "$ITERS" |
			sed "s/^loco/loco-$fabric-spin-nospread/" >>"$OUT"
	done
	if [ -x "$BUILD/bench/peers/mpi-allreduce" ]; then
		for btl in tcp vader; do
			link=$([ $btl = vader ] && echo shm || echo tcp)
			"${MPIRUN[@]}" --bind-to core:overload-allowed --mca btl "$btl,self" \
				"$BUILD/bench/peers/mpi-allreduce" "$ITERS" |
				sed "s/^mpi/mpi-$link-bound/" >>"$OUT"
		done
	fi
	for fabric in tcp shm; do
		LOCO_WAIT=spin LOCO_FABRIC=$fabric "$BUILD/tools/loco-run" -n 4 --no-prefix --bind \
			--timeout 300 "$BUILD/bench/peers/loco-reduce" "$ITERS" |
			sed "s/^loco/loco-$fabric-spin-bound/" >>"$OUT"
	done
done
echo "# who size median_us p99_us iters (one line per run)"
sort -k1,1 -k2,2n -s "$OUT"
echo "# median of the $RUNS runs' medians, us per allreduce"
awk '{ k = $1 " " $2; v[k] = v[k] " " $3 } END { for (k in v) print k, v[k] }' "$OUT" |
	while read -r who size rest; do
		med=$(tr ' ' '\n' <<<"$rest" | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		echo "$who $size $med"
	done | sort -k2,2n -k1,1
