#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# mpirun.sh -- LOCO programs started by Open MPI's mpirun, with no LOCO_* variable: the PMIx
# bootstrap gives each its node id (rank + 1), the job size, the secret and whom to join.
#   1. mpirun -n 4 hello: every node sees 3 peers and their ids;
#   2. mpirun -n 4 launch-node 200: 200 barrier rounds, 4 members, node id = rank + 1;
#   3. explicit settings win: -x LOCO_NODE_ID=7 makes rank 0 node 7 without PMIx, and
#      with LOCO_PMIX=1 too, PMIx giving the rest; loco-run under mpirun runs its nodes
#      (they have LOCO_NODE_ID); the secret made for the job never shows in the output,
#      even at LOCO_LOG=debug;
#   4. a rank that SIGKILLs itself (mpirun --enable-recovery, so that the job goes on) is a
#      failed member for the others: dropped from the view, their rounds go on; without
#      --enable-recovery a rank that leaves (loco_fini, exit 0) is a leave and the job goes
#      on (what a SIGKILL does there is only printed: mpirun ends the job, its own rule);
#   5. a node started outside mpirun (LOCO_JOIN, a free LOCO_NODE_ID, the job's LOCO_SECRET)
#      joins the running job and runs the rounds with it.
# Usage: mpirun.sh HELLO LAUNCH_NODE pmix|no-pmix [LOCO_RUN]
source "$(dirname "$0")/common.sh"

need_packages openmpi-bin:mpirun >"$T/pkg.txt" || skip "mpirun: $(cat "$T/pkg.txt")"
MPI=(mpirun --oversubscribe --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo
	--bind-to none)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
echo "$(mpirun --version 2>&1 | head -1); PMIx $(pkg-config --modversion pmix 2>/dev/null)"

# 1. hello
run_bounded 120 "$T/hello.out" "${MPI[@]}" -n 4 "$HELLO"
echo "figure: mpirun -n 4 hello: ${MS} ms, exit $RC"
check "hello: mpirun exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "hello: 4 nodes saw 3 peers and their ids" \
	[ "$(count '^node [1-4]: 3 peer\(s\), all ids ok$' "$T/hello.out")" -eq 4 ]
[[ $RC -eq 0 ]] || show "$T/hello.out"

# 2. barrier rounds
run_bounded 120 "$T/rounds.out" "${MPI[@]}" -n 4 "$NODE" 200
echo "figure: mpirun -n 4 launch-node 200 (200 barrier rounds): ${MS} ms, exit $RC"
check "rounds: mpirun exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for r in 0 1 2 3; do
	check "rounds: rank $r is node $((r + 1))" grep -q "^node $((r + 1)) rank $r size 4 " "$T/rounds.out"
done
check "rounds: 4 nodes did 200 rounds with 4 members" \
	[ "$(count '^node [1-4]: done 200 rounds, 4 members$' "$T/rounds.out")" -eq 4 ]
[[ $RC -eq 0 ]] || show "$T/rounds.out"

# 3. explicit settings win; the job's secret is never printed
run_bounded 60 "$T/explicit.out" "${MPI[@]}" -n 1 -x LOCO_LOG=info -x LOCO_NODE_ID=7 \
	-x LOCO_NODES=1 "$NODE" 3
check "explicit: LOCO_NODE_ID=7 is node 7 (rc $RC)" grep -q '^node 7 rank 0 size 1 ' "$T/explicit.out"
check "explicit: ... and no PMIx bootstrap then" grep -q 'LOCO_NODE_ID is set: no PMIx' "$T/explicit.out"
run_bounded 60 "$T/explicit1.out" "${MPI[@]}" -n 1 -x LOCO_LOG=info -x LOCO_PMIX=1 \
	-x LOCO_NODE_ID=7 "$NODE" 3
check "explicit: LOCO_PMIX=1 LOCO_NODE_ID=7: node 7, the job size from PMIx (rc $RC)" \
	grep -q '^node 7 rank 0 size 1 ' "$T/explicit1.out"
check "explicit: ... through PMIx" grep -q 'pmix: rank 0 of 1 .*node id 7' "$T/explicit1.out"
if [[ -n $LOCO_RUN ]]; then
	# loco-run under mpirun: its nodes have LOCO_NODE_ID and ignore the PMIx they inherit
	run_bounded 120 "$T/lr.out" "${MPI[@]}" -n 1 "$LOCO_RUN" -n 3 "$HELLO"
	echo "figure: mpirun -n 1 loco-run -n 3 hello: ${MS} ms, exit $RC"
	check "loco-run under mpirun: exits 0 (rc $RC)" [ "$RC" -eq 0 ]
	check "loco-run under mpirun: 3 nodes saw 2 peers" \
		[ "$(count '^\[[1-3]\] node [1-3]: 2 peer\(s\), all ids ok$' "$T/lr.out")" -eq 3 ]
	[[ $RC -eq 0 ]] || show "$T/lr.out"
fi
run_bounded 120 "$T/debug.out" "${MPI[@]}" -n 4 -x LOCO_LOG=debug "$HELLO"
check "debug log: hello passes (rc $RC)" [ "$RC" -eq 0 ]
check "debug log: the bootstrap is logged" grep -q 'pmix: rank 3 of 4' "$T/debug.out"
check "debug log: no 64-hex-digit secret in it" bash -c '! grep -qE "[0-9a-f]{64}" "$1"' _ "$T/debug.out"

# 4. a rank kills itself: the others see a failed member and go on
run_bounded 150 "$T/die.out" "${MPI[@]}" --enable-recovery -n 4 -x LOCO_LOG=info \
	-x LOCO_FAIL_TIMEOUT_MS=$FAIL_MS "$NODE" --die 3 100
echo "figure: mpirun --enable-recovery -n 4 launch-node --die 3 100: ${MS} ms, exit $RC"
grep -E '^node [0-9]+: member 3 gone' "$T/die.out" | sed 's/^/figure: /'
check "die: node 3 killed itself" grep -q '^node 3: killing myself' "$T/die.out"
check "die: 3 survivors did 100 rounds, 3 members at the end" \
	[ "$(count '^node [124]: done 100 rounds, 3 members$' "$T/die.out")" -eq 3 ]
check "die: node 3 is logged as failed, not as left" \
	grep -q 'node 3 failed: removed from the view' "$T/die.out"
check "die: no survivor failed" bash -c '! grep -q "^FAIL" "$1"' _ "$T/die.out"
[[ $(count '^node [124]: done 100 rounds, 3 members$' "$T/die.out") -eq 3 ]] || show "$T/die.out"

# 4b. without --enable-recovery: a rank that leaves (loco_fini, exit 0) is a graceful leave
# and the job goes on; a rank killed by a signal makes mpirun end the job (its own rule)
run_bounded 150 "$T/leave.out" "${MPI[@]}" -n 4 -x LOCO_LOG=info -x LOCO_FAIL_TIMEOUT_MS=$FAIL_MS \
	"$NODE" --leave 3 100
echo "figure: mpirun -n 4 launch-node --leave 3 100: ${MS} ms, exit $RC"
check "leave: mpirun exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "leave: 3 others did 100 rounds, 3 members at the end" \
	[ "$(count '^node [124]: done 100 rounds, 3 members$' "$T/leave.out")" -eq 3 ]
check "leave: node 3 is logged as left" grep -q 'node 3 left' "$T/leave.out"
[[ $RC -eq 0 ]] || show "$T/leave.out"
run_bounded 150 "$T/abort.out" "${MPI[@]}" -n 4 -x LOCO_FAIL_TIMEOUT_MS=$FAIL_MS "$NODE" \
	--die 3 100
echo "note: without --enable-recovery, a rank's SIGKILL: mpirun exit $RC," \
	"$(count '^node [124]: done 100 rounds' "$T/abort.out") of 3 others finished" \
	"($(grep -c 'job has been aborted' "$T/abort.out") 'job has been aborted' message)"

# 5. a node from outside the launcher joins the running job
SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$T/addr"
LOCO_SECRET=$SECRET "${MPI[@]}" -n 3 -x LOCO_SECRET -x LOCO_FAIL_TIMEOUT_MS=$FAIL_MS \
	"$NODE" --dir "$T/addr" --extra 1 100 \
	>"$T/outside-job.out" 2>&1 &
JOB=$!
PIDS+=("$JOB")
for ((i = 0; i < 300; i++)); do
	[[ -s $T/addr/addr.1 && -s $T/addr/addr.2 ]] && break
	sleep 0.1
done
check "outside: the job's nodes published their addresses" [ -s "$T/addr/addr.1" ]
JOIN="$(cat "$T/addr/addr.2" 2>/dev/null),$(cat "$T/addr/addr.1" 2>/dev/null)"
run_bounded 120 "$T/outside.out" env LOCO_JOIN="$JOIN" LOCO_NODE_ID=4 LOCO_NODES=4 \
	LOCO_SECRET="$SECRET" LOCO_FAIL_TIMEOUT_MS=$FAIL_MS "$NODE" 100
check "outside: node 4 (LOCO_JOIN=$JOIN) did 100 rounds with 4 members (rc $RC)" \
	grep -q '^node 4: done 100 rounds, 4 members$' "$T/outside.out"
[[ $RC -eq 0 ]] || show "$T/outside.out"
for ((i = 0; i < 600; i++)); do
	kill -0 "$JOB" 2>/dev/null || break
	sleep 0.1
done
kill -KILL "$JOB" 2>/dev/null # still there after 60 s: fail below
wait "$JOB"
RC=$?
check "outside: the mpirun job exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "outside: its 3 nodes did 100 rounds with 4 members" \
	[ "$(count '^node [1-3]: done 100 rounds, 4 members$' "$T/outside-job.out")" -eq 3 ]
[[ $RC -eq 0 ]] || show "$T/outside-job.out"

echo "$FAILS check(s) failed"
[[ $FAILS -eq 0 ]]
