#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# slurm.sh -- LOCO programs started by Slurm's srun --mpi=pmix, with no LOCO_* variable, on a
# single-node Slurm that this test starts itself: munged, slurmctld and slurmd on localhost
# with a slurm.conf generated in a temporary directory (free ports, state, spool and logs
# there), all ended by PID at the end.
#   1. srun --mpi=pmix -n 4 hello: every node sees 3 peers and their ids;
#   2. srun --mpi=pmix -n 4 launch-node 200: 200 barrier rounds, node id = rank + 1;
#   3. a rank that SIGKILLs itself is a failed member for the others, who go on (srun then
#      exits non-zero for that task; the step is not cancelled, since LOCO finalized PMIx
#      after its bootstrap).
# Skips (77, with the reason) when it is not root (slurmd runs as root here), when the
# packages cannot be installed, or when this Slurm has no pmix plugin.
# Usage: slurm.sh HELLO LAUNCH_NODE pmix|no-pmix [LOCO_RUN (unused)]
source "$(dirname "$0")/common.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root: this single-node Slurm runs slurmd as root"
need_packages slurmd:slurmd slurmctld:slurmctld slurm-client:srun munge:munged \
	>"$T/pkg.txt" || skip "slurm: $(cat "$T/pkg.txt")"
command -v python3 >/dev/null 2>&1 || skip "python3 (to pick free ports) not found"
MUNGED=$(command -v munged || echo /usr/sbin/munged)
SLURMCTLD=$(command -v slurmctld || echo /usr/sbin/slurmctld)
SLURMD=$(command -v slurmd || echo /usr/sbin/slurmd)

# the configuration: everything in $T, ports picked free on the loopback
read -r PCTL PD < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
HOST=$(hostname -s)
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log"
chmod 700 "$T/munge"
head -c 1024 /dev/urandom >"$T/munge/key"
chmod 600 "$T/munge/key"
cat >"$T/slurm.conf" <<CONF
ClusterName=locotest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PCTL
SlurmdPort=$PD
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=$T/plugstack.conf
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
: >"$T/plugstack.conf"
export SLURM_CONF=$T/slurm.conf
srun --version

srun --mpi=list >"$T/mpi.txt" 2>&1
grep -qw pmix "$T/mpi.txt" || skip "this Slurm has no mpi/pmix plugin: $(tr '\n' ' ' <"$T/mpi.txt")"

# the daemons, in the foreground of background jobs: their PIDs are ours to end
"$MUNGED" -F --force --key-file="$T/munge/key" --socket="$T/munge/sock" \
	--pid-file="$T/munge/pid" --log-file="$T/munge/log" --seed-file="$T/munge/seed" &
PIDS+=("$!")
for ((i = 0; i < 100; i++)); do
	[[ -S $T/munge/sock ]] && break
	sleep 0.1
done
[[ -S $T/munge/sock ]] || skip "munged did not start: $(tail -3 "$T/munge/log" 2>/dev/null)"
T0=$(date +%s%N)
"$SLURMCTLD" -D -i -f "$T/slurm.conf" >"$T/log/slurmctld.out" 2>&1 &
PIDS+=("$!")
"$SLURMD" -D -f "$T/slurm.conf" >"$T/log/slurmd.out" 2>&1 &
PIDS+=("$!")
STATE=
for ((i = 0; i < 300; i++)); do
	STATE=$(sinfo -h -o %T 2>/dev/null | head -1)
	[[ $STATE == idle ]] && break
	sleep 0.1
done
if [[ $STATE != idle ]]; then
	tail -n 5 "$T/log/"*.log "$T/log/"*.out
	skip "the single-node Slurm did not come up (node state '$STATE')"
fi
echo "figure: single-node Slurm up (node idle) after $((($(date +%s%N) - T0) / 1000000)) ms"

# 1. hello
run_bounded 120 "$T/hello.out" srun --mpi=pmix -n 4 "$HELLO"
echo "figure: srun --mpi=pmix -n 4 hello: ${MS} ms, exit $RC"
check "hello: srun exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "hello: 4 nodes saw 3 peers and their ids" \
	[ "$(count '^node [1-4]: 3 peer\(s\), all ids ok$' "$T/hello.out")" -eq 4 ]
[[ $RC -eq 0 ]] || show "$T/hello.out"

# 2. barrier rounds
run_bounded 120 "$T/rounds.out" srun --mpi=pmix -n 4 "$NODE" 200
echo "figure: srun --mpi=pmix -n 4 launch-node 200 (200 barrier rounds): ${MS} ms, exit $RC"
check "rounds: srun exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for r in 0 1 2 3; do
	check "rounds: rank $r is node $((r + 1))" grep -q "^node $((r + 1)) rank $r size 4 " "$T/rounds.out"
done
check "rounds: 4 nodes did 200 rounds with 4 members" \
	[ "$(count '^node [1-4]: done 200 rounds, 4 members$' "$T/rounds.out")" -eq 4 ]
[[ $RC -eq 0 ]] || show "$T/rounds.out"

# 3. a rank kills itself: the others see a failed member and go on
run_bounded 150 "$T/die.out" env LOCO_LOG=info LOCO_FAIL_TIMEOUT_MS=$FAIL_MS \
	srun --mpi=pmix -n 4 "$NODE" --die 3 100
echo "figure: srun --mpi=pmix -n 4 launch-node --die 3 100: ${MS} ms, exit $RC"
grep -E '^node [0-9]+: member 3 gone' "$T/die.out" | sed 's/^/figure: /'
check "die: node 3 killed itself" grep -q '^node 3: killing myself' "$T/die.out"
check "die: 3 survivors did 100 rounds, 3 members at the end" \
	[ "$(count '^node [124]: done 100 rounds, 3 members$' "$T/die.out")" -eq 3 ]
check "die: node 3 is logged as failed, not as left" \
	grep -q 'node 3 failed: removed from the view' "$T/die.out"
check "die: the step was not cancelled" bash -c '! grep -q CANCELLED "$1"' _ "$T/die.out"
[[ $(count '^node [124]: done 100 rounds, 3 members$' "$T/die.out") -eq 3 ]] || show "$T/die.out"

echo "$FAILS check(s) failed"
[[ $FAILS -eq 0 ]]
