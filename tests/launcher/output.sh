#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# output.sh -- each line a node writes comes out whole, once, in order, prefixed with its own id,
# on the launcher's stdout or stderr as the node wrote it; while 4 nodes write lines in pieces.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Every line is written in three pieces (three write() calls); every 10th line sleeps between
# them, so the pieces of the 4 nodes interleave in the pipes. Then a line longer than PIPE_BUF,
# and a last line without '\n'.
NODE='id=$LOCO_NODE_ID
for ((j = 1; j <= 100; j++)); do
	printf "n%s-l%03d-" "$id" "$j"
	printf "mid-"
	if ((j % 10 == 0)); then sleep 0.02; fi
	printf "end-%s\n" "$id"
	printf "e%s-l%03d-" "$id" "$j" >&2
	printf "x\n" >&2
done
printf "long-%s-" "$id"
head -c 10000 /dev/zero | tr "\0" "$id"
printf "\n"
printf "tail-%s" "$id"'

# expected -- what node ID writes to stdout (1) or stderr (2), one line each.
expected() {
	local id=$1 fd=$2 j
	for ((j = 1; j <= 100; j++)); do
		if ((fd == 1)); then
			printf 'n%s-l%03d-mid-end-%s\n' "$id" "$j" "$id"
		else
			printf 'e%s-l%03d-x\n' "$id" "$j"
		fi
	done
	if ((fd == 1)); then
		printf 'long-%s-' "$id"
		head -c 10000 /dev/zero | tr '\0' "$id"
		printf '\ntail-%s\n' "$id"
	fi
}

run_lr -n 4 bash -c "$NODE"
check "4 writing nodes exit 0 (rc $RC)" [ "$RC" -eq 0 ]
bad=$(grep -cvE '^\[[1-4]\] ' "$T/out")
check "every stdout line has a node prefix ($bad without)" [ "$bad" -eq 0 ]
bad=$(grep -cvE '^\[[1-4]\] ' "$T/err")
check "every stderr line has a node prefix ($bad without)" [ "$bad" -eq 0 ]
for id in 1 2 3 4; do
	expected "$id" 1 >"$T/want.$id.1"
	expected "$id" 2 >"$T/want.$id.2"
	grep "^\[$id\] " "$T/out" | sed "s/^\[$id\] //" >"$T/got.$id.1"
	grep "^\[$id\] " "$T/err" | sed "s/^\[$id\] //" >"$T/got.$id.2"
	check "node $id stdout: every line whole, in order, under its own id" \
		cmp -s "$T/want.$id.1" "$T/got.$id.1"
	check "node $id stderr: every line whole, in order, under its own id" \
		cmp -s "$T/want.$id.2" "$T/got.$id.2"
done
lines=$(wc -l <"$T/out")
check "stdout has 4 x 102 lines ($lines)" [ "$lines" -eq 408 ]
check "stdout ends with a newline (the partial last lines got one)" \
	[ "$(tail -c 1 "$T/out" | od -An -c | tr -d ' ')" = '\n' ]
# The nodes really ran side by side: their lines alternate (else the test proves little).
switches=$(sed -E 's/^\[([0-9]+)\].*/\1/' "$T/out" | uniq | wc -l)
check "the 4 nodes' lines are interleaved ($switches runs)" [ "$switches" -gt 8 ]

# --no-prefix: the same lines, whole, without prefixes.
run_lr -n 4 --no-prefix bash -c "$NODE"
check "--no-prefix exits 0 (rc $RC)" [ "$RC" -eq 0 ]
for id in 1 2 3 4; do
	expected "$id" 1
done | sort >"$T/want.np.1"
sort "$T/out" >"$T/got.np.1"
check "--no-prefix: stdout is exactly the nodes' lines, whole" cmp -s "$T/want.np.1" "$T/got.np.1"
bad=$(grep -cE '^\[[0-9]+\] ' "$T/out")
check "--no-prefix: no line is prefixed ($bad are)" [ "$bad" -eq 0 ]
for id in 1 2 3 4; do
	expected "$id" 2
done | sort >"$T/want.np.2"
sort "$T/err" >"$T/got.np.2"
check "--no-prefix: stderr is exactly the nodes' lines, whole" cmp -s "$T/want.np.2" "$T/got.np.2"

# A line longer than the launcher's 64 KiB line buffer is split, each piece prefixed.
run_lr -n 1 bash -c 'head -c 70000 /dev/zero | tr "\0" a; echo; echo after'
check "long line: exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "long line: split into 65536 + 4464 bytes, each piece prefixed" \
	[ "$(awk '{ print $1, length($2) }' "$T/out" | tr '\n' ' ')" = "[1] 65536 [1] 4464 [1] 5 " ]

# A reader that goes away: the nodes' writes fail as if they wrote to it directly (SIGPIPE), so
# endless writers end and the launcher with them; nothing is left.
timeout -k 5 30 "$LR" -n 2 bash -c 'exec -a "$MARK-yes" yes' 2>"$T/err" | head -n 3 >"$T/out"
RC=${PIPESTATUS[0]}
check "closed stdout: endless writers end, status 128+SIGPIPE (rc $RC)" [ "$RC" -eq 141 ]
check "closed stdout: the reader got 3 prefixed lines" \
	[ "$(grep -cE '^\[[12]\] y$' "$T/out")" -eq 3 ]
check "closed stdout: no writer is left ($(marked) left)" marked_is 0

finish
