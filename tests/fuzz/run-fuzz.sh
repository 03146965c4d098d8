#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# run-fuzz.sh -- run a libFuzzer target for LOCO_FUZZ_SECONDS (default 60)
# on a temporary copy of its seed corpus, so the source tree stays clean.
# Crash inputs go to ARTIFACT_DIR. LOCO_FUZZ_SECONDS=0 skips (exit 77).
# LOCO_FUZZ_LIMIT (set by meson from the test's timeout) caps the seconds.
#
#   run-fuzz.sh FUZZER SEED_DIR ARTIFACT_DIR
set -u

if [ $# -ne 3 ]; then
	echo "usage: run-fuzz.sh FUZZER SEED_DIR ARTIFACT_DIR" >&2
	exit 1
fi
fuzzer=$1
seeds=$2
artifacts=$3
secs=${LOCO_FUZZ_SECONDS:-60}
limit=${LOCO_FUZZ_LIMIT:-0}

case $secs in
'' | *[!0-9]*)
	echo "run-fuzz: LOCO_FUZZ_SECONDS='$secs' is not a number of seconds" >&2
	exit 1
	;;
esac
if [ "$secs" -eq 0 ]; then
	echo "run-fuzz: LOCO_FUZZ_SECONDS=0, skipping"
	exit 77
fi
if [ "$limit" -gt 0 ] && [ "$secs" -gt "$limit" ]; then
	echo "run-fuzz: $secs s does not fit the test timeout; running $limit s" \
		"(reconfigure with LOCO_FUZZ_SECONDS=$secs set to raise it)"
	secs=$limit
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/loco-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$tmp/corpus" "$artifacts" || exit 1
cp "$seeds"/* "$tmp/corpus/" || exit 1

echo "run-fuzz: $(basename "$fuzzer") for $secs s on a copy of $seeds; crashes go to $artifacts/"
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-error_exitcode=1 -timeout_exitcode=1 \
	-artifact_prefix="$artifacts/" "$tmp/corpus"
rc=$?
echo "run-fuzz: exit $rc, corpus grew from $(ls "$seeds" | wc -l) to $(ls "$tmp/corpus" | wc -l) inputs"
exit $rc
