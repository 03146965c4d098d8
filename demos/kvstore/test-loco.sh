#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# test-loco.sh LOCO_RUN KV_SERVER KV KV_YCSB -- the KV store as its README runs it:
#   1. 4 kv-servers (2 replicas) under loco-run --keep-going --control; the kv command line
#      puts, gets, deletes (get then says "no such key", exit 3) and stats; 16 more puts and
#      gets, each a client node joining and leaving (2 client ids, reused); kv stat counts
#      them (the clients' gets and writes, the writes each server applied);
#   2. kv-ycsb workload B, 2 threads, 3 s, --verify: 0 lost, 0 corrupt, reads and updates ran;
#   3. kv-ycsb workload A with --kill-at 1 (node 3, SIGKILL) and --join-at 3 (a fifth server):
#      0 acknowledged writes lost, operations in the run's last second (it went on), the new
#      server serves, the plot written;
#   4. kv-ycsb --join-at whose added server exits (id 6: no key holder's) reports the add as
#      FAILED and exits 1;
#   5. node 3, killed in 3., restarted with its id (loco-run --ctl restart 3): it joins the
#      store in use again, owns keys, and the keys written before read back;
#   6. the launcher is ended (SIGTERM: the servers hand their keys over and leave).
# Every process is ended by PID; every wait is bounded.
set -uo pipefail

run=$1 server=$2 kv=$3 ycsb=$4
tmp=$(mktemp -d)
lr=
cleanup() {
	if [[ -n $lr ]] && kill -0 "$lr" 2>/dev/null; then
		kill "$lr"
		for _ in $(seq 1 100); do kill -0 "$lr" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$lr" 2>/dev/null
	fi
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; grep -v MEMLOCK "$tmp/servers.log" | tail -20; exit 1; }

cl=$tmp/kv.cluster
"$run" --keep-going --control "$tmp/ctl" -n 4 "$server" --replicas 2 --capacity 8192 \
	--cluster "$cl" >"$tmp/servers.log" 2>&1 &
lr=$!
for _ in $(seq 1 300); do
	[[ $(grep -c '^server ' "$cl" 2>/dev/null) == 4 ]] && break
	kill -0 "$lr" 2>/dev/null || fail "the servers ended"
	sleep 0.1
done
[[ $(grep -c '^server ' "$cl" 2>/dev/null) == 4 ]] || fail "4 servers did not come up in 30 s"
[[ $(stat -c %a "$cl") == 600 ]] || fail "the cluster file (it holds the secret) is not mode 0600"
echo "ok: 4 servers serving"

k=("$kv" --cluster "$cl")
[[ $("${k[@]}" put greeting "hello world" 2>/dev/null) == "version 1" ]] || fail "put"
[[ $("${k[@]}" get greeting 2>/dev/null) == "hello world" ]] || fail "get"
[[ $("${k[@]}" put greeting again 2>/dev/null) == "version 2" ]] || fail "second put"
[[ $("${k[@]}" del greeting 2>/dev/null) == "deleted" ]] || fail "del"
"${k[@]}" get greeting >/dev/null 2>&1
[[ $? == 3 ]] || fail "get of a deleted key did not exit 3"
[[ $("${k[@]}" stat 2>/dev/null | grep -c '^node ') == 4 ]] || fail "stat did not list 4 servers"
# each kv command joins as a client node and leaves: 2 client ids (6, 7) serve any number of runs
for i in $(seq 1 8); do
	[[ $("${k[@]}" put "k$i" "v$i" 2>/dev/null) == "version 1" ]] || fail "put k$i (run $i)"
done
for i in $(seq 1 8); do
	[[ $("${k[@]}" get "k$i" 2>"$tmp/get.err") == "v$i" ]] || fail "get k$i: $(cat "$tmp/get.err")"
done
grep -q 'client node [67])' "$tmp/get.err" || fail "get did not run as client node 6 or 7"
echo "ok: kv put/get/del/stat, 21 kv commands, each a client node (ids 6 and 7, reused)"
# kv stat counts them: the clients' gets and writes (a GET is a one-sided READ no server sees:
# each client adds its counts as it leaves), and each write applied on its owner and 1 replica.
# So far: 10 puts and 1 del (11 writes), 10 gets (one of a deleted key), 21 clients
"${k[@]}" stat >"$tmp/stat.out" 2>&1 || fail "stat: $(cat "$tmp/stat.out")"
grep -q '^clients: 10 gets, 11 writes (counted by the 21 clients' "$tmp/stat.out" ||
	fail "kv stat counted wrong: $(cat "$tmp/stat.out")"
applied=0
for a in $(sed -n 's/.*; \([0-9]*\) writes applied.*/\1/p' "$tmp/stat.out"); do
	applied=$((applied + a))
done
[[ $applied == 22 ]] || fail "the servers applied $applied writes, not 22: $(cat "$tmp/stat.out")"
echo "ok: kv stat: 10 gets, 11 writes by 21 clients; 22 writes applied (2 copies of each)"
# beside a live client (kv-ycsb holds one client id for 4 s) a kv command takes the other id
"$ycsb" --store "loco:$cl" --workload C --records 200 --duration 4 --threads 1 >"$tmp/bg.out" 2>&1 &
bg=$!
sleep 1.5
[[ $("${k[@]}" get k1 2>"$tmp/get.err") == "v1" ]] || fail "get beside kv-ycsb: $(cat "$tmp/get.err")"
wait "$bg" || { cat "$tmp/bg.out"; fail "the kv-ycsb beside it failed"; }
echo "ok: a kv command beside a running kv-ycsb: $(grep -o 'client node [0-9]*' "$tmp/get.err")"

out=$("$ycsb" --store "loco:$cl" --workload B --records 2000 --duration 3 --threads 2 --verify \
	--json "$tmp/b.json" 2>&1) || { echo "$out"; fail "kv-ycsb B exited $?"; }
echo "$out" | grep -v MEMLOCK
grep -q '^read ' <<<"$out" && grep -q '^update ' <<<"$out" || fail "an op type is missing"
grep -q ' 0 lost, 0 corrupt' <<<"$out" || fail "lost or corrupt writes"

out=$("$ycsb" --store "loco:$cl" --workload A --records 2000 --duration 6 --threads 2 --verify \
	--ctl "$tmp/ctl" --kill-at 1 --kill-node 3 --join-at 3 --json "$tmp/a.json" \
	--plot "$tmp/a.png" 2>&1)
rc=$?
echo "$out" | grep -v MEMLOCK
[[ $rc == 0 ]] || fail "kv-ycsb with a kill and a join exited $rc"
grep -q 'kill 3 KILL: done' <<<"$out" || fail "node 3 was not killed"
grep -q 'add 1: node 5 joined' <<<"$out" || fail "no server was added"
grep -q ' 0 lost, 0 corrupt' <<<"$out" || fail "acknowledged writes lost across the kill"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["per_second"][-1] > 0, d["per_second"]' \
	"$tmp/a.json" || fail "no operation in the run's last second"
[[ -s $tmp/a.png ]] || fail "no plot"
for _ in $(seq 1 100); do grep -q 'node 5 serving (joined' "$tmp/servers.log" && break; sleep 0.1; done
grep -q 'node 5 serving (joined' "$tmp/servers.log" || fail "the added server does not serve"
echo "ok: a server killed and one added during a run; no acknowledged write lost"

# a failed add is reported as failed (it said "add 1: done"): the next add gives id 6, which is
# no key holder's (1..5): that server exits at once, and kv-ycsb says so and exits 1
out=$("$ycsb" --store "loco:$cl" --workload C --records 200 --duration 2 --threads 1 \
	--ctl "$tmp/ctl" --join-at 1 2>&1)
rc=$?
echo "$out" | grep -v MEMLOCK | grep 'add 1'
[[ $rc == 1 ]] || fail "kv-ycsb whose added server failed exited $rc, not 1"
grep -qE 'add 1: FAILED: node 6 exited with status [1-9]' <<<"$out" ||
	fail "the failed add was not reported: $out"
grep -q 'add 1: node 6 joined' <<<"$out" && fail "a failed add reported as joined"
echo "ok: an added server that exits is reported: $(grep -o 'add 1: FAILED.*' <<<"$out")"

# node 3 (killed above) comes back with its id: it joins the store in use and takes keys again
"$run" --ctl "$tmp/ctl" restart 3 >"$tmp/restart.out" 2>&1 ||
	fail "restart 3: $(cat "$tmp/restart.out")"
grep -qE '^ok restarted 3 \(pid [0-9]+\)$' "$tmp/restart.out" || fail "restart 3 answered $(cat "$tmp/restart.out")"
for _ in $(seq 1 300); do
	grep -q 'node 3 serving (joined a running store again' "$tmp/servers.log" && break
	sleep 0.1
done
grep -q 'node 3 serving (joined a running store again' "$tmp/servers.log" ||
	fail "the restarted node 3 does not serve"
for i in $(seq 1 8); do
	[[ $("${k[@]}" get "k$i" 2>"$tmp/get.err") == "v$i" ]] || fail "get k$i after the restart: $(cat "$tmp/get.err")"
done
"${k[@]}" stat >"$tmp/stat.out" 2>&1 || fail "stat: $(cat "$tmp/stat.out")"
[[ $(grep -cE '^node [1-5]:' "$tmp/stat.out") == 5 ]] || fail "stat after the restart: $(cat "$tmp/stat.out")"
grep -qE '^node 3: [0-9]+ owned' "$tmp/stat.out" || fail "node 3 holds no keys: $(cat "$tmp/stat.out")"
echo "ok: node 3 restarted with its id (loco-run --ctl restart 3) serves again: $(grep '^node 3:' "$tmp/stat.out" | cut -d';' -f1)"

kill "$lr"
for _ in $(seq 1 300); do kill -0 "$lr" 2>/dev/null || break; sleep 0.1; done
kill -0 "$lr" 2>/dev/null && fail "the servers did not end within 30 s of SIGTERM"
lr=
grep -c 'leaving' "$tmp/servers.log" | grep -q '^[1-9]' || fail "no server said it was leaving"
echo "PASS"
