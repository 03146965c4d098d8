#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# wrong-secret.sh -- run wrong-secret under loco-run with LOCO_LOG=info: node 1 spawns an
# intruder (node 5) with a different LOCO_SECRET. Besides the program's own checks
# (loco_init fails with -LOCO_EAUTH; the member tables stay {1, 2, 3}), check the log: the
# intruder and node 1 (the member it tried) each log a "wrong cluster secret" line, and no
# node logs that node 5 joined.
#
#   bash wrong-secret.sh PROGRAM LOCO_RUN
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
need_loco_run

export LOCO_LOG=info
run_lr -n 3 --timeout 100 "$PROG"
cat "$T/out"
echo "---"

if [[ $RC -eq 0 ]]; then
	ok "every node exited 0"
else
	fail "loco-run exited with status $RC"
fi
# the intruder's and node 1's PIDs, as the program printed them
ipid=$(sed -nE 's/^\[1\] wrong-secret: node 5: intruder pid ([0-9]+) .*/\1/p' "$T/out" | head -1)
mpid=$(sed -nE 's/^\[1\] wrong-secret: node 1: pid ([0-9]+)$/\1/p' "$T/out" | head -1)
if [[ -z $ipid || -z $mpid ]]; then
	fail "the program did not print the PIDs of the intruder and node 1"
else
	if has "^\[1\] loco\[$ipid\]( [0-9.]+)? error: .*wrong cluster secret"; then
		ok "the intruder (pid $ipid) logged the wrong cluster secret"
	else
		fail "the intruder (pid $ipid) logged no 'wrong cluster secret' line"
	fi
	if has "^\[1\] loco\[$mpid\]( [0-9.]+)? [a-z]+: .*node 5 .*wrong cluster secret"; then
		ok "node 1 (pid $mpid) logged the wrong cluster secret of node 5"
	else
		fail "node 1 (pid $mpid) logged no 'wrong cluster secret' line about node 5"
	fi
fi
if has "node 5 joined"; then
	fail "a node logged that node 5 joined: $(grep -E 'node 5 joined' "$T/out" | head -3)"
else
	ok "no node logged node 5 as joined"
fi
finish
