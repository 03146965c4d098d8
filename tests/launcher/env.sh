#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# env.sh -- the environment each node gets: ids, LOCO_NODES, LOCO_ADDR/LOCO_JOIN of a fresh job
# and of --join, the shared secret, LOCO_FABRIC, --first-id; own process group; stdin.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Each node dumps its environment, process group and stdin into $T/<launch>/env.<id>.
DUMP='d="$T/$RUN"; mkdir -p "$d"; env >"$d/env.$LOCO_NODE_ID";
echo "pid=$$ pgrp=$(cut -d" " -f5 /proc/$$/stat) stdin=$(readlink /proc/$$/fd/0)" >"$d/proc.$LOCO_NODE_ID"'

# get -- the value of variable NAME in the dump of node ID of launch RUN ("" when unset).
get() {
	grep -m1 "^$3=" "$T/$1/env.$2" | cut -d= -f2-
}

# has -- true when variable NAME is set for node ID of launch RUN.
has() {
	grep -q "^$3=" "$T/$1/env.$2"
}

# ids_are -- true when launch RUN dumped exactly the node ids given.
ids_are() {
	local run=$1 got want
	shift
	got=$(for f in "$T/$run"/env.*; do echo "${f##*/env.}"; done | sort -n | tr '\n' ' ')
	want="$* "
	[[ $got == "$want" ]] || {
		echo "ids: got '$got' want '$want'"
		return 1
	}
}

# --- a fresh job of 4, with a LOCO_JOIN and LOCO_FABRIC in the caller's environment
RUN=a LOCO_SECRET='' LOCO_JOIN=10.9.9.9:9 LOCO_FABRIC=inheritedfab LR_TEST_FOO='x y=z' \
	run_lr -n 4 bash -c "$DUMP"
check "fresh job exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "node ids 1..4" ids_are a 1 2 3 4
addr1=$(get a 1 LOCO_ADDR)
port1=${addr1#127.0.0.1:}
check "node 1 LOCO_ADDR is 127.0.0.1:<port> ($addr1)" matches "$addr1" '^127\.0\.0\.1:[0-9]+$'
check "node 1 port is a real port ($port1)" [ "$port1" -gt 0 -a "$port1" -lt 65536 ]
check "node 1 has no LOCO_JOIN (it starts the job)" eval '! has a 1 LOCO_JOIN'
secret=$(get a 1 LOCO_SECRET)
check "secret is 32 hex chars ($secret)" matches "$secret" '^[0-9a-f]{32}$'
for i in 1 2 3 4; do
	check "node $i LOCO_NODE_ID=$i" [ "$(get a $i LOCO_NODE_ID)" = "$i" ]
	check "node $i LOCO_NODES=4" [ "$(get a $i LOCO_NODES)" = 4 ]
	check "node $i same secret" [ "$(get a $i LOCO_SECRET)" = "$secret" ]
	check "node $i inherits LOCO_FABRIC" [ "$(get a $i LOCO_FABRIC)" = inheritedfab ]
	check "node $i inherits other variables" [ "$(get a $i LR_TEST_FOO)" = 'x y=z' ]
	read -r pid pgrp stdin <"$T/a/proc.$i"
	check "node $i leads its own process group ($pid $pgrp)" [ "${pid#pid=}" = "${pgrp#pgrp=}" ]
	check "node $i stdin is /dev/null ($stdin)" [ "$stdin" = stdin=/dev/null ]
	if ((i > 1)); then
		check "node $i LOCO_ADDR=127.0.0.1:0" [ "$(get a $i LOCO_ADDR)" = 127.0.0.1:0 ]
		check "node $i LOCO_JOIN is node 1's LOCO_ADDR" [ "$(get a $i LOCO_JOIN)" = "$addr1" ]
	fi
done
pgrps=$(cat "$T"/a/proc.* | sed 's/.*pgrp=\([0-9]*\).*/\1/' | sort -u | wc -l)
check "4 distinct process groups ($pgrps)" [ "$pgrps" -eq 4 ]
check "no process group of launch a is left" groups_gone

# The port was free: the launcher closed its socket, and node 1 can listen on it.
if command -v python3 >/dev/null 2>&1; then
	RUN=p run_lr -n 1 bash -c "$DUMP"'; python3 -c "
import os, socket
s = socket.socket()
s.bind((\"127.0.0.1\", int(os.environ[\"LOCO_ADDR\"].split(\":\")[1])))
s.listen()
print(\"bound\")"'
	check "node 1 can listen on its LOCO_ADDR port (rc $RC, $(cat "$T/out"))" \
		[ "$RC" -eq 0 -a "$(cat "$T/out")" = "[1] bound" ]
fi

# --- a second launch: a different secret; --fabric overrides the inherited LOCO_FABRIC
RUN=b LOCO_SECRET='' LOCO_FABRIC=inheritedfab run_lr -n 2 --fabric tcp bash -c "$DUMP"
check "second launch exits 0 (rc $RC)" [ "$RC" -eq 0 ]
secret_b=$(get b 1 LOCO_SECRET)
check "second launch: one secret on both nodes" [ "$secret_b" = "$(get b 2 LOCO_SECRET)" ]
check "second launch: secret is 32 hex chars" matches "$secret_b" '^[0-9a-f]{32}$'
check "two launches get different secrets ($secret vs $secret_b)" [ "$secret" != "$secret_b" ]
check "--fabric tcp sets LOCO_FABRIC on node 1" [ "$(get b 1 LOCO_FABRIC)" = tcp ]
check "--fabric tcp sets LOCO_FABRIC on node 2" [ "$(get b 2 LOCO_FABRIC)" = tcp ]
check "second launch: node 1 LOCO_ADDR has a port" matches "$(get b 1 LOCO_ADDR)" '^127\.0\.0\.1:[1-9][0-9]*$'

# --- LOCO_SECRET set by the caller is passed on unchanged; no --fabric, none inherited
RUN=c LOCO_SECRET=caller-secret-1 run_lr -n 3 env -u LOCO_FABRIC bash -c "$DUMP"
check "launch with LOCO_SECRET exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for i in 1 2 3; do
	check "node $i keeps the caller's LOCO_SECRET" [ "$(get c $i LOCO_SECRET)" = caller-secret-1 ]
done
unset LOCO_FABRIC
RUN=c2 run_lr -n 1 bash -c "$DUMP"
check "no --fabric and none inherited: LOCO_FABRIC unset" eval '! has c2 1 LOCO_FABRIC'

# --- --join and --first-id: adding nodes 7..9 to a running job
RUN=d LOCO_SECRET=s3 run_lr -n 3 --join 10.1.2.3:4567 --first-id 7 bash -c "$DUMP"
check "--join launch exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "--first-id 7 -n 3: node ids 7..9" ids_are d 7 8 9
for i in 7 8 9; do
	check "node $i LOCO_NODE_ID=$i" [ "$(get d $i LOCO_NODE_ID)" = "$i" ]
	check "node $i LOCO_NODES=3" [ "$(get d $i LOCO_NODES)" = 3 ]
	check "node $i LOCO_JOIN=--join address" [ "$(get d $i LOCO_JOIN)" = 10.1.2.3:4567 ]
	check "node $i LOCO_ADDR=127.0.0.1:0" [ "$(get d $i LOCO_ADDR)" = 127.0.0.1:0 ]
	check "node $i LOCO_SECRET=s3" [ "$(get d $i LOCO_SECRET)" = s3 ]
done

# --- more nodes than the caller's fd limit allows pipes for: the launcher raises its own soft
# limit, and each node gets the caller's limit back
# run_lr_limited -- run_lr in a subshell whose soft fd limit is 64; sets RC.
run_lr_limited() {
	(
		ulimit -Sn 64 || exit 99
		run_lr "$@"
		exit "$RC"
	)
	RC=$?
}
RUN=f run_lr_limited -n 100 bash -c "$DUMP"'; ulimit -Sn >"$T/$RUN/nofile.$LOCO_NODE_ID"'
check "100 nodes under a soft fd limit of 64 exit 0 (rc $RC)" [ "$RC" -eq 0 ]
check "100 nodes: all ids 1..100" ids_are f $(seq 1 100)
check "100 nodes: each node has the caller's fd limit back" \
	[ "$(cat "$T"/f/nofile.* | sort -u)" = 64 ]

# --- --first-id without --join: the first node (id 5) starts the job, 6 joins it
RUN=e run_lr -n 2 --first-id 5 bash -c "$DUMP"
check "--first-id 5 -n 2: node ids 5 6" ids_are e 5 6
check "node 5 starts the job (no LOCO_JOIN)" eval '! has e 5 LOCO_JOIN'
check "node 6 joins node 5" [ "$(get e 6 LOCO_JOIN)" = "$(get e 5 LOCO_ADDR)" ]

# --- --hosts: node k listens on the k-th address (round robin), all join the first node
RUN=h run_lr -n 3 --hosts 127.0.0.1,127.0.0.2 bash -c "$DUMP"
check "--hosts: exits 0 (rc $RC)" [ "$RC" -eq 0 ]
addr=$(get h 1 LOCO_ADDR)
check "--hosts: node 1 starts on the first address ($addr)" [ "${addr%:*}" = 127.0.0.1 ] && check "--hosts: with a real port" [ "${addr#*:}" -gt 0 ]
check "--hosts: node 2 on the second address" [ "$(get h 2 LOCO_ADDR)" = 127.0.0.2:0 ]
check "--hosts: node 3 back on the first" [ "$(get h 3 LOCO_ADDR)" = 127.0.0.1:0 ]
check "--hosts: node 2 joins node 1" [ "$(get h 2 LOCO_JOIN)" = "$(get h 1 LOCO_ADDR)" ]
RUN=i LOCO_RUN_HOSTS=127.0.0.3 run_lr -n 2 bash -c "$DUMP"
check "LOCO_RUN_HOSTS is the default of --hosts" [ "$(get i 2 LOCO_ADDR)" = 127.0.0.3:0 ]
RUN=j run_lr -n 1 --hosts 1.2.3 true
check "--hosts with a bad address: usage error (rc $RC)" [ "$RC" -eq 2 ]

finish
