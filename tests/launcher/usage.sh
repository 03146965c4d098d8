#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# usage.sh -- bad options: usage on stderr and exit 2; a PROGRAM that cannot be run: a message
# and exit 127, with no node started; options after PROGRAM belong to PROGRAM.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# bad -- the launcher given ARGS... must exit 2, print the usage on stderr and start nothing.
bad() {
	rm -f "$T/ran"
	run_lr "$@"
	check "'$*': exits 2 (rc $RC)" [ "$RC" -eq 2 ]
	check "'$*': usage on stderr" grep -q '^usage: loco-run -n N' "$T/err"
	check "'$*': nothing on stdout" [ ! -s "$T/out" ]
	check "'$*': no node started" [ ! -e "$T/ran" ]
}

RAN=(bash -c 'touch "$T/ran"')
bad
bad "${RAN[@]}"
bad -n
bad -n 0 "${RAN[@]}"
bad -n -1 "${RAN[@]}"
bad -n x "${RAN[@]}"
bad -n 2x "${RAN[@]}"
bad -n 1025 "${RAN[@]}"
bad -n 2
bad -n 2 --
bad -n 2 --bogus "${RAN[@]}"
bad -n 2 -z "${RAN[@]}"
bad -n 2 --timeout "${RAN[@]}"
bad -n 2 --timeout -1 "${RAN[@]}"
bad -n 2 --timeout abc "${RAN[@]}"
bad -n 2 --timeout 1s "${RAN[@]}"
bad -n 2 --timeout nan "${RAN[@]}"
bad -n 2 --first-id 0 "${RAN[@]}"
bad -n 2 --first-id x "${RAN[@]}"
bad -n 2 --first-id 4294967295 "${RAN[@]}"
bad -n 2 --join nocolon "${RAN[@]}"
bad -n 2 --join '' "${RAN[@]}"
bad -n 2 --fabric '' "${RAN[@]}"
bad -n 2 --no-prefix=yes "${RAN[@]}"

run_lr --help
check "--help: exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "--help: usage on stdout" grep -q '^usage: loco-run -n N' "$T/out"

# The largest ids still fit: --first-id 4294967294 -n 2 is nodes 4294967294 and 4294967295.
run_lr -n 2 --first-id 4294967294 bash -c 'echo "$LOCO_NODE_ID"'
check "--first-id 4294967294 -n 2 runs (rc $RC)" [ "$RC" -eq 0 ]
check "--first-id 4294967294 -n 2: ids up to 4294967295" grep -qx '\[4294967295\] 4294967295' "$T/out"

# PROGRAM cannot be run: 127, a message naming it, no node.
missing=$T/no-such-program
run_lr -n 2 "$missing"
check "missing path: exits 127 (rc $RC)" [ "$RC" -eq 127 ]
check "missing path: message names it" grep -qE "loco-run [0-9.]+: $missing: cannot execute" "$T/err"
run_lr -n 2 "no-such-program-$MARK" arg
check "missing command: exits 127 (rc $RC)" [ "$RC" -eq 127 ]
check "missing command: message names it" grep -qE "loco-run [0-9.]+: no-such-program-$MARK: command not found" "$T/err"
echo 'echo hi' >"$T/not-executable"
run_lr -n 2 "$T/not-executable"
check "not executable: exits 127 (rc $RC)" [ "$RC" -eq 127 ]
check "not executable: message says why" grep -q 'Permission denied' "$T/err"
run_lr -n 2 "$T"
check "a directory: exits 127 (rc $RC)" [ "$RC" -eq 127 ]
run_lr -n 2 ''
check "empty program name: exits 127 (rc $RC)" [ "$RC" -eq 127 ]

# Options after PROGRAM are PROGRAM's, also ones the launcher knows; -- ends the options.
run_lr -n 1 printf '%s|' -n 3 --timeout x --no-prefix
check "PROGRAM's own options are passed on (rc $RC, $(cat "$T/out"))" \
	[ "$RC" -eq 0 -a "$(cat "$T/out")" = '[1] -n|3|--timeout|x|--no-prefix|' ]
run_lr -n 1 -- printf '%s|' -- -n
check "-- ends the launcher's options (rc $RC, $(cat "$T/out"))" \
	[ "$RC" -eq 0 -a "$(cat "$T/out")" = '[1] --|-n|' ]
run_lr -n1 --timeout=5 --fabric=tcp --first-id=3 --no-prefix bash -c 'echo "$LOCO_NODE_ID $LOCO_FABRIC"'
check "short -n1 and --opt=value forms (rc $RC, $(cat "$T/out"))" \
	[ "$RC" -eq 0 -a "$(cat "$T/out")" = '3 tcp' ]
# A PROGRAM found in $PATH, like execvp() finds it.
mkdir -p "$T/bin"
printf '#!/bin/sh\necho "found $LOCO_NODE_ID"\n' >"$T/bin/lr-test-prog"
chmod +x "$T/bin/lr-test-prog"
PATH="$T/bin:$PATH" run_lr -n 2 lr-test-prog
check "PROGRAM found in PATH (rc $RC)" [ "$RC" -eq 0 -a "$(sort "$T/out" | tr '\n' ' ')" = '[1] found 1 [2] found 2 ' ]

finish
