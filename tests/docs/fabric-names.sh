#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# fabric-names.sh -- an unknown fabric name is answered with the providers this build has, the
# ones loco-info lists: `loco-run --fabric rdma` refuses it before starting a node (exit 2), and
# a LOCO program with LOCO_FABRIC=rdma fails in loco_init() with the same list in its log. Every
# name loco-info lists is accepted by loco-run --fabric.
# usage: fabric-names.sh LOCO_RUN LOCO_INFO PROGRAM     exit 0 pass, 1 fail
set -u
LR=${1:?usage: $0 LOCO_RUN LOCO_INFO PROGRAM}
LI=${2:?usage: $0 LOCO_RUN LOCO_INFO PROGRAM}
PROG=${3:?usage: $0 LOCO_RUN LOCO_INFO PROGRAM}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAILS=0
check() { # check WHAT COMMAND...
	if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; FAILS=$((FAILS + 1)); fi
}

# the names loco-info lists under "Fabrics", in its order (continuation lines start with blanks)
"$LI" >"$T/info" 2>&1
names=$(awk '/^Fabrics/ {f = 1; next} f && /^$/ {exit} f && /^[a-z]/ && $1 != "name" {print $1}' \
	"$T/info")
list=$(echo "$names" | paste -sd, | sed 's/,/, /g')
echo "loco-info lists: $list"
check "loco-info lists tcp, shm and auto" bash -c '[[ $1 == tcp,\ shm* && $1 == *auto ]]' _ "$list"

# loco-run --fabric: refused before anything starts
"$LR" -n 2 --fabric rdma "$PROG" >"$T/lr.out" 2>"$T/lr.err"
rc=$?
sed 's/^/loco-run: /' "$T/lr.err" | head -2
check "loco-run --fabric rdma exits 2 (rc $rc)" [ "$rc" -eq 2 ]
check "... naming the providers of this build" \
	grep -qF -- "--fabric rdma: no such provider in this build, which has: $list" "$T/lr.err"
check "... and starts no node" [ ! -s "$T/lr.out" ]
for n in $names; do
	"$LR" -n 1 --fabric "$n" --no-prefix bash -c 'echo "$LOCO_FABRIC"' >"$T/ok.out" 2>&1
	check "loco-run --fabric $n is accepted" grep -qx "$n" "$T/ok.out"
done

# LOCO_FABRIC=rdma: loco_init() fails, its log names the providers
LOCO_FABRIC=rdma timeout 20 "$PROG" >"$T/p.out" 2>"$T/p.err"
rc=$?
grep 'provider' "$T/p.err" | sed 's/^/program: /'
check "LOCO_FABRIC=rdma: the program fails at once (rc $rc)" [ "$rc" -ne 0 -a "$rc" -ne 124 ]
check "... its log names the providers of this build" \
	grep -qF "fabric rdma: no such provider in this build, which has: $list" "$T/p.err"

echo "$FAILS check(s) failed"
[ "$FAILS" -eq 0 ]
