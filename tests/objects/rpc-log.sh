#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rpc-log.sh -- a stock object logs what it counts (loco_log(3)): rpc-kill
# calls a name node 3 has no handler for, twice. With LOCO_LOG=info node 3
# says so, each time (the 1st and the 2nd are due), through the library's
# logger; at the default level (warn) nothing of it shows: the line is info.
#
# usage: rpc-log.sh LOCO_RUN RPC_KILL     exit 0 pass, 1 fail
set -u
run=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
line='info: rpc k: call to an id with no handler here'

LOCO_LOG=info "$run" -n 3 --timeout 100 "$prog" >"$out" 2>&1 || {
	echo "rpc-log: rpc-kill failed with LOCO_LOG=info"
	tail -20 "$out"
	exit 1
}
for n in 1 2; do
	if ! grep -q "^\[3\] loco\[[0-9]*\].* $line (unknown: $n so far)\$" "$out"; then
		echo "rpc-log: node 3 did not log the call with no handler ($n)"
		grep 'rpc k' "$out" | head
		exit 1
	fi
done
[ "$(grep -c "$line" "$out")" -eq 2 ] || { echo "rpc-log: not exactly 2 lines"; exit 1; }

LOCO_LOG='' "$run" -n 3 --timeout 100 "$prog" >"$out" 2>&1 || {
	echo "rpc-log: rpc-kill failed at the default level"
	exit 1
}
if grep -q "rpc k: call to an id" "$out"; then
	echo "rpc-log: an info line at the default level (warn)"
	exit 1
fi
echo "rpc-log: ok"
