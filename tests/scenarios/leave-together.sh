#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# leave-together.sh -- run leave-together (nodes 2, 3 and 4 of 4 call loco_fini at once) under
# loco-run with LOCO_LOG=info, several times, and check the log: node 1 says "node K left" for
# each of them, and nobody says that a node failed. (Installing a view used to forget that a
# member had said LEAVE while the view was agreed, so the next view dropped it as failed.)
#
#   bash leave-together.sh PROGRAM LOCO_RUN
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
need_loco_run

export LOCO_LOG=info
export LOCO_FAIL_TIMEOUT_MS=${LOCO_FAIL_TIMEOUT_MS:-5000}
for run in 1 2 3 4 5; do
	run_lr -n 4 --timeout 60 "$PROG"
	if [[ $RC -ne 0 ]]; then
		fail "run $run: loco-run exited with status $RC"
		cat "$T/out"
		continue
	fi
	for n in 2 3 4; do
		if ! has "^\[1\] loco\[[0-9]+\]( [0-9.]+)? info: manager: node $n left$"; then
			fail "run $run: node 1 did not log 'node $n left':" \
				"$(grep -E '^\[1\] .*manager: node [0-9]+ (left|failed)' "$T/out")"
		fi
	done
	if has "manager: node [0-9]+ failed"; then
		fail "run $run: a failure was logged in a run of graceful leaves:" \
			"$(grep -E 'manager: node [0-9]+ failed' "$T/out" | head -3)"
	fi
done
if ((FAILS == 0)); then
	ok "5 runs: node 1 saw nodes 2, 3 and 4 leave, nobody logged a failure"
fi
finish
