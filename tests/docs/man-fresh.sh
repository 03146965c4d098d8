#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# man-fresh.sh -- the nroff pages kept in docs/man/gen/ (what `meson install` installs) are what
# tools/gen-man makes from docs/man/*.md now: regenerate into a temporary directory and compare.
# Skips (77) when pandoc is absent, or is another version than the one that made the kept pages
# (pandoc versions differ in small details of their output).
# usage: man-fresh.sh SOURCE_ROOT       exit 0 pass, 1 stale, 77 skip
set -u
root=$1
kept=$root/docs/man/gen
if ! command -v pandoc >/dev/null 2>&1; then
	echo "SKIP: pandoc not found (apt-get install pandoc), the kept pages cannot be checked"
	exit 77
fi
have=$(pandoc --version | head -n 1)
made=$(cat "$kept/PANDOC_VERSION" 2>/dev/null || echo "(no $kept/PANDOC_VERSION)")
if [ "$have" != "$made" ]; then
	echo "SKIP: the kept pages were made by $made, this is $have; run tools/gen-man to remake them"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/tools/gen-man" "$tmp" || exit 1
n=$(find "$tmp" -name '*.[137]' | wc -l)
if ! diff -r "$kept" "$tmp" >"$tmp.diff" 2>&1; then
	grep -E '^(Only in|diff )' "$tmp.diff" | sed 's/^/stale: /'
	rm -f "$tmp.diff"
	echo "FAIL: docs/man/gen/ is stale against docs/man/*.md: run tools/gen-man and commit docs/man/gen/"
	exit 1
fi
rm -f "$tmp.diff"
echo "ok: $n kept pages match docs/man/*.md ($have)"
exit 0
