#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# leave-graceful.sh -- run leave-graceful (node 3 of 3 calls loco_fini early) under loco-run
# with LOCO_LOG=info, and check the log: nodes 1 and 2 say "node 3 left", nobody says
# "node 3 failed" (nor logs any failure: every node of this run leaves gracefully).
#
#   bash leave-graceful.sh PROGRAM LOCO_RUN
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
need_loco_run

export LOCO_LOG=info
export LOCO_FAIL_TIMEOUT_MS=${LOCO_FAIL_TIMEOUT_MS:-5000}
run_lr -n 3 --timeout 100 "$PROG"
cat "$T/out"
echo "---"

if [[ $RC -eq 0 ]]; then
	ok "every node exited 0"
else
	fail "loco-run exited with status $RC"
fi
for n in 1 2; do
	if has "^\[$n\] loco\[[0-9]+\]( [0-9.]+)? info: manager: node 3 left$"; then
		ok "node $n logged that node 3 left"
	else
		fail "node $n did not log 'node 3 left'"
	fi
	if has "^\[$n\] .*leave-graceful: node $n: node 3 gone from the members"; then
		ok "node $n measured the leave"
	else
		fail "node $n did not report the leave"
	fi
done
if has "node 3 failed"; then
	fail "a node logged node 3 as failed: $(grep -E 'node 3 failed' "$T/out" | head -3)"
else
	ok "nobody logged node 3 as failed"
fi
# every node leaves gracefully in this run (3 early, then 1 and 2): nobody fails, including
# the nodes a leaving node still hears from while it leaves
if has "manager: node [0-9]+ failed"; then
	fail "a failure was logged in a run of graceful leaves:" \
		"$(grep -E 'manager: node [0-9]+ failed' "$T/out" | head -3)"
else
	ok "no failure logged at all"
fi
finish
