#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# log-time.sh -- the time on liboco's log lines, LOCO_LOG_TIME=mono (default), wall or none
# (loco_init(3)): one node of rounds-node under loco-run with LOCO_LOG=info, DIR/stop already
# there, so it logs its start-up and ends at once.
# Usage: log-time.sh LOCO_RUN ROUNDS_NODE
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RN=${2:?usage: $0 LOCO_RUN ROUNDS_NODE}
touch "$T/stop"
export LOCO_LOG=info

# lines -- liboco's log lines of the last run.
lines() {
	grep -E '^\[1\] loco\[[0-9]+\]' "$T/err"
}

# --- default: seconds since the process started, 6 decimals, never going back
LOCO_LOG_TIME='' run_lr -n 1 "$RN" "$T"
check "mono: node exits 0 (rc $RC)" [ "$RC" -eq 0 ]
n=$(lines | wc -l)
check "mono: some log lines ($n)" [ "$n" -gt 0 ]
check "mono: every line is 'loco[pid] S.UUUUUU level: ...'" \
	[ "$(lines | grep -cvE '^\[1\] loco\[[0-9]+\] [0-9]+\.[0-9]{6} (error|warn|info|debug): ')" -eq 0 ]
times=$(lines | sed -nE 's/^\[1\] loco\[[0-9]+\] ([0-9.]+) .*/\1/p')
echo "mono times: $(echo "$times" | head -3 | tr '\n' ' ')... last $(echo "$times" | tail -1)"
check "mono: times never go back" awk 'NR > 1 && $1 < prev { exit 1 } { prev = $1 }' <<<"$times"
check "mono: counted from the start of the process (first < 60 s)" \
	awk 'NR == 1 { exit !($1 < 60) }' <<<"$times"

# --- a value it does not know is the default
LOCO_LOG_TIME=bogus run_lr -n 1 "$RN" "$T"
check "unknown value: mono" [ "$(lines | grep -cvE '^\[1\] loco\[[0-9]+\] [0-9]+\.[0-9]{6} [a-z]+: ')" -eq 0 ]

# --- wall: the UTC date and time
LOCO_LOG_TIME=wall run_lr -n 1 "$RN" "$T"
check "wall: node exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "wall: some log lines" [ "$(lines | wc -l)" -gt 0 ]
check "wall: every line is 'loco[pid] YYYY-MM-DDTHH:MM:SS.UUUUUUZ level: ...'" [ "$(lines |
	grep -cvE '^\[1\] loco\[[0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z [a-z]+: ')" -eq 0 ]
today() { lines | grep -q "\] $(date -u +%F)T"; }
check "wall: today's date ($(date -u +%F))" today
lines | head -1

# --- none: the format without a time
LOCO_LOG_TIME=none run_lr -n 1 "$RN" "$T"
check "none: some log lines" [ "$(lines | wc -l)" -gt 0 ]
check "none: every line is 'loco[pid] level: ...'" \
	[ "$(lines | grep -cvE '^\[1\] loco\[[0-9]+\] (error|warn|info|debug): ')" -eq 0 ]
lines | head -1

finish
