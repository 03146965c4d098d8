#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# tarball.sh -- a release tarball (git archive of HEAD: no .git) configured with meson's defaults
# builds no tests and no benchmarks, and does not look for cmocka; -Dtests=true and -Dbench=true
# bring them back. Only meson setup runs (no compile). Exit 0 pass, 1 fail, 77 skip (not a git
# checkout, or no git).
#   tarball.sh SOURCE_ROOT
set -u
src=$1
command -v git >/dev/null 2>&1 || { echo "SKIP: no git"; exit 77; }
git -C "$src" rev-parse --verify -q HEAD >/dev/null || { echo "SKIP: $src is not a git checkout"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
git -C "$src" archive --format=tar --prefix=loco/ HEAD | tar -x -C "$tmp" || exit 1
targets() { meson introspect --targets "$1" | python3 -c '
import json, sys
print("\n".join(t["name"] for t in json.load(sys.stdin)))'; }

if ! meson setup "$tmp/b" "$tmp/loco" >"$tmp/setup.log" 2>&1; then
	tail -n 20 "$tmp/setup.log"
	echo "FAIL: meson setup of the tarball"
	exit 1
fi
targets "$tmp/b" >"$tmp/t1"
check "the library is built (liboco)" grep -qx oco "$tmp/t1"
check "no unit test is built" test -z "$(grep '^unit-' "$tmp/t1")"
check "no benchmark is built" test -z "$(grep -x 'fabric-lat' "$tmp/t1")"
check "cmocka is not looked for" test -z "$(grep -i 'dependency cmocka' "$tmp/setup.log")"

if meson setup "$tmp/b2" "$tmp/loco" -Dtests=true -Dbench=true >"$tmp/setup2.log" 2>&1; then
	targets "$tmp/b2" >"$tmp/t2"
	check "-Dtests=true builds the unit tests" grep -q '^unit-' "$tmp/t2"
	check "-Dbench=true builds the benchmarks" grep -qx 'fabric-lat' "$tmp/t2"
else
	tail -n 20 "$tmp/setup2.log"
	check "meson setup -Dtests=true -Dbench=true (cmocka installed)" false
fi
[ "$fails" -eq 0 ]
