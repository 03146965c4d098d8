#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# info-config.sh -- loco-info -c prints the library's settings table: every LOCO_* variable the
# README documents, with its default and its value here, and never the cluster secret.
# Usage: info-config.sh LOCO_INFO README
set -u
info=$1
readme=$2
fails=0
check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

out=$(LOCO_FAIL_TIMEOUT_MS=1234 LOCO_SECRET=hunter2-not-shown "$info" -c)
rc=$?
check "exits 0 (rc $rc)" [ "$rc" -eq 0 ]
check "a set value is shown" grep -qE '^LOCO_FAIL_TIMEOUT_MS +1234 +default 1000 ' <<<"$out"
check "an unset one says so" grep -qE '^LOCO_JOIN_TIMEOUT_MS +\(unset\) +default 10000 ' <<<"$out"
check "the secret is not printed" bash -c '! grep -q hunter2 <<<"$1"' _ "$out"
check "the secret is shown as set" grep -qE '^LOCO_SECRET +\(set\)' <<<"$out"
# every variable of the README's environment table is in the settings table
for v in $(grep -oE '`LOCO_[A-Z_]+' "$readme" | tr -d '`' | sort -u); do
	# the tests' and the benchmarks' own variables, not the library's
	case $v in LOCO_TEST_SCALE | LOCO_TEST_FULL | LOCO_FUZZ_SECONDS | LOCO_RUN_* | LOCO_BENCH_OUT) continue ;; esac
	check "$v in the table" grep -qE "^$v " <<<"$out"
done
[ "$fails" -eq 0 ] || exit 1
exit 0
