#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# shellcheck disable=SC2016,SC2317 # node scripts expand in the node; checks call functions
# exit-status.sh -- the exit status rules of --keep-going and of the control commands
# (loco-run(1), EXIT STATUS): a dead node is reported with id, pid and how while the others
# go on; the status is the first failure's; a node ended by the kill command is no failure;
# a summary line per dead node. Also the control client's answers and exit statuses.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Nodes that go on wait for $T/<run>.go (bounded), which the test gives once the launcher has
# reported the failure; they then print "after" and exit 0.
WAIT_GO='for ((i = 0; i < 400; i++)); do [[ -e $T/$RUN.go ]] && break; sleep 0.05; done
[[ -e $T/$RUN.go ]] && echo after'

# --- node 2 exits 3; nodes 1 and 3 go on and exit 0: status 3
export RUN=exit3
start_lr --keep-going -n 3 bash -c "if ((LOCO_NODE_ID == 2)); then exit 3; fi; $WAIT_GO"
check "exit 3: reported with id, pid and status" wait_until 20 grep -qE \
	'^loco-run [0-9.]+: node 2 \(pid [0-9]+\) exited with status 3; the others go on \(--keep-going\)$' "$T/err"
touch "$T/$RUN.go"
wait_lr 30
check "exit 3: launcher exits 3 (rc $RC)" [ "$RC" -eq 3 ]
check "exit 3: nodes 1 and 3 went on after it" \
	[ "$(grep -cE '^\[[13]\] after$' "$T/out")" -eq 2 ]
check "exit 3: summary line for node 2" \
	grep -qE 'summary: node 2 \(pid [0-9]+\) exited with status 3$' "$T/err"
check "exit 3: summary of the status" \
	grep -qE 'summary: 1 of 3 node\(s\) ended early; exit status 3$' "$T/err"
check "exit 3: nothing else reported" [ "$(grep -c 'summary: node' "$T/err")" -eq 1 ]
check "exit 3: nodes 1 and 3 reported as exited with status 0" \
	[ "$(grep -cE 'node [13] \(pid [0-9]+\) exited with status 0$' "$T/err")" -eq 2 ]
grep summary "$T/err"

# --- node 3 is killed by SIGKILL (not by the launcher), later node 2 exits 4: the first counts
export RUN=kill9
start_lr --keep-going -n 3 bash -c "if ((LOCO_NODE_ID == 3)); then kill -KILL \$\$; fi
$WAIT_GO
((LOCO_NODE_ID == 2)) && exit 4
exit 0"
check "SIGKILL: reported 'killed by SIGKILL'" wait_until 20 grep -qE \
	'node 3 \(pid [0-9]+\) killed by SIGKILL; the others go on \(--keep-going\)$' "$T/err"
touch "$T/$RUN.go"
wait_lr 30
check "SIGKILL first, exit 4 later: launcher exits 137 (rc $RC)" [ "$RC" -eq 137 ]
check "SIGKILL: node 2's exit 4 reported too" grep -qE 'node 2 \(pid [0-9]+\) exited with status 4' "$T/err"
check "SIGKILL: node 1 went on" grep -qx '\[1\] after' "$T/out"
check "SIGKILL: two summary lines and the status" \
	[ "$(grep -c 'summary: node' "$T/err")" -eq 2 -a "$(grep -c 'ended early; exit status 137$' "$T/err")" -eq 1 ]
grep summary "$T/err"

# --- all exit 0: 0, no summary
run_lr --keep-going -n 3 true
check "all exit 0: launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "all exit 0: no summary" eval '! grep -q summary "$T/err"'

# --- every node fails: the launch ends when none is left, with the first failure
# node 2 exits 12 only once node 1 has exited 11 (a zombie or gone): node 1 fails first
run_lr --keep-going -n 2 bash -c 'if ((LOCO_NODE_ID == 1)); then echo $$ >"$T/pid1.tmp"
	mv "$T/pid1.tmp" "$T/pid1"; exit 11; fi
for ((i = 0; i < 400; i++)); do
	[[ -e $T/pid1 ]] && { st=$(cut -d" " -f3 "/proc/$(cat "$T/pid1")/stat" 2>/dev/null) || break; }
	[[ ${st:-} == Z ]] && break
	sleep 0.05
done
exit 12'
check "all fail: launcher exits 11, node 1's (rc $RC)" [ "$RC" -eq 11 ]

# --- without --keep-going a failure still ends the others (the old rule)
export RUN=nokeep
start_lr -n 3 bash -c "if ((LOCO_NODE_ID == 2)); then exit 3; fi; exec -a \"\$MARK-node\" sleep 100"
wait_lr 30
check "no --keep-going: launcher exits 3 (rc $RC)" [ "$RC" -eq 3 ]
check "no --keep-going: the others were ended" grep -q 'node 2 exited with status 3; ending the others' "$T/err"
check "no --keep-going: no sleeper survives" marked_is 0

# --- the kill command: the node's end is no failure, with or without --keep-going
export RUN=cmd
CTL=$T/ctl
start_lr --control "$CTL" -n 2 bash -c "$WAIT_GO"
check "kill command: the socket is there" wait_until 20 test -S "$CTL"
"$LR" --ctl "$CTL" kill 2 >"$T/ctl.out"
CRC=$?
check "kill command: default SIGTERM, answered ok (rc $CRC)" \
	grep -qE '^ok sent SIGTERM to node 2 \(pid [0-9]+\)$' "$T/ctl.out"
check "kill command: reported" wait_until 20 grep -qE \
	'node 2 \(pid [0-9]+\) killed by SIGTERM \(kill command\); the others go on$' "$T/err"
"$LR" --ctl "$CTL" kill 2 KILL >"$T/ctl.out"
CRC=$?
check "kill command: a dead node cannot be killed (rc $CRC)" \
	[ "$CRC" -eq 1 -a "$(cat "$T/ctl.out")" = 'error: kill: node 2 is not running' ]
for bad in 'kill 9' 'kill 1 NOSUCHSIG' 'add 0' 'add x' 'list extra' 'bogus'; do
	# shellcheck disable=SC2086 # the words are the command
	"$LR" --ctl "$CTL" $bad >"$T/ctl.out"
	CRC=$?
	check "bad command '$bad': rc 1 and 'error: ...' ($(cat "$T/ctl.out"))" \
		[ "$CRC" -eq 1 -a "$(head -c 7 "$T/ctl.out")" = 'error: ' ]
done
"$LR" --ctl "$CTL" list >"$T/ctl.out"
check "list: node 1 running, node 2 killed" \
	[ "$(sed -n 1p "$T/ctl.out")" = 'ok 2 node(s)' ] && grep -qE '^1 [0-9]+ running 127' "$T/ctl.out" &&
	grep -qE '^2 [0-9]+ killed by SIGTERM \(kill command\)$' "$T/ctl.out"
touch "$T/$RUN.go"
wait_lr 30
check "kill command: launcher exits 0 (rc $RC)" [ "$RC" -eq 0 ]
check "kill command: node 1 went on" grep -qx '\[1\] after' "$T/out"
check "kill command: the socket is removed" [ ! -e "$CTL" ]
"$LR" --ctl "$CTL" list >"$T/ctl.out" 2>&1
CRC=$?
check "no launcher: the client exits 69 (rc $CRC)" [ "$CRC" -eq 69 ]

finish
