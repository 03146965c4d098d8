#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# run-verbs-suite.sh -- the fabric contract tests, the scenario, core and object suites on
# the verbs provider, over Soft-RoCE, on a host without RDMA. Scenario
# nodes are spread over rxe0 and rxe1 (loco-run's LOCO_RUN_HOSTS). Run on
# the HOST, as root, from anywhere:
#
#   tests/vm/run-verbs-suite.sh [--no-build | --build-only] [TEST...]
#
# 1. Builds the project in build-release-gcc/, the tree of tools/test
#    --release gcc (gcc, -Dbuildtype=release, -Dwerror=true, and here
#    -Dverbs=enabled; never -march=native: the guest CPU under TCG lacks
#    AVX-512), installing libibverbs-dev and librdmacm-dev when missing.
# 2. Boots the rxe VM (tests/vm/run-in-rxe-vm.sh: rxe0 on 10.77.0.1, rxe1
#    on 10.77.0.2, joined by a veth pair) and runs inside it
#      meson test -C build-release-gcc --no-rebuild <the *-verbs fabric tests>
#    with LOCO_TEST_ADDR_A=10.77.0.1:0 and LOCO_TEST_ADDR_B=10.77.0.2:0:
#    each test's initiator uses rxe0 and its target rxe1, so the traffic
#    really crosses the veth link.
# 3. Prints one line per test, the VM's wall time, and ends with the plain
#    line "N passed, N failed". Inside the VM a test that skips (77) counts
#    as failed: the device is there, so a skip means the provider did not
#    open.
#
# TEST names a test without its "-verbs" suffix (one-sided, access...);
# default: every test of the fabric suite.
#
# Environment: LOCO_VM_TIMEOUT_MULT (meson's --timeout-multiplier, default
# 3: Soft-RoCE under TCG runs ~100 us per operation), LOCO_LOG (passed
# through: the provider's log level), and the RXE_VM_* settings of
# run-in-rxe-vm.sh. Exit status: 0 when every test passed, 1 otherwise,
# 125 when the VM itself failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
build=build-release-gcc # one gcc tree for the release check and the VM (.ci/run)
do_build=1
build_only=0
tests=()

while [[ $# -gt 0 ]]; do
	case $1 in
	--no-build) do_build=0 ;;
	--build-only) build_only=1 ;; # step 1 alone (.ci/run builds while other tests run)
	-h | --help)
		sed -n '3,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "run-verbs-suite: unknown option $1" >&2
		exit 2
		;;
	*) tests+=("$1") ;;
	esac
	shift
done

cd "$srcdir" || exit 1

if [[ $do_build = 1 ]]; then
	need=()
	for p in gcc meson ninja-build pkg-config libibverbs-dev librdmacm-dev; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
	done
	if [[ ${#need[@]} -gt 0 ]]; then
		echo "run-verbs-suite: installing ${need[*]}"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${need[@]}" >/dev/null || {
			echo "run-verbs-suite: apt-get install failed" >&2
			echo "0 passed, 1 failed"
			exit 1
		}
	fi
	if [[ ! -f $build/build.ninja ]]; then
		CC=gcc meson setup "$build" -Dverbs=enabled -Dwerror=true -Dbuildtype=release \
			-Dtests=true -Dbench=true >"$build.setup.log" 2>&1 || {
			cat "$build.setup.log" >&2
			echo "0 passed, 1 failed"
			exit 1
		}
		rm -f "$build.setup.log"
	elif ! meson configure "$build" -Dverbs=enabled >"$build.setup.log" 2>&1; then
		cat "$build.setup.log" >&2 # configured by tools/test --release gcc: verbs was auto
		echo "0 passed, 1 failed"
		exit 1
	fi
	rm -f "$build.setup.log"
	if ! meson compile -C "$build" >/dev/null 2>"$build.compile.log"; then
		cat "$build.compile.log" >&2
		echo "run-verbs-suite: the build failed" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	rm -f "$build.compile.log"
fi
if [[ $build_only = 1 ]]; then
	echo "run-verbs-suite: built $build"
	exit 0
fi

# the *-verbs tests of the fabric, scenario, core, objects and security suites ("loco:fabric+verbs / NAME")
mapfile -t all < <(meson test -C "$build" --no-rebuild --list 2>/dev/null |
	sed -n 's#^[^ ]*:\(fabric\|scenario\|core\|objects\|security\)+verbs / \(.*-verbs\)$#\2#p')
if [[ ${#all[@]} -eq 0 ]]; then
	echo "run-verbs-suite: no verbs variant in the fabric suite of $build" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
run=()
if [[ ${#tests[@]} -eq 0 ]]; then
	run=("${all[@]}")
else
	for t in "${tests[@]}"; do
		t=${t%-verbs}-verbs
		if printf '%s\n' "${all[@]}" | grep -qx -- "$t"; then
			run+=("$t")
		else
			echo "run-verbs-suite: no test $t (have: ${all[*]})" >&2
			echo "0 passed, 1 failed"
			exit 2
		fi
	done
fi

mult=${LOCO_VM_TIMEOUT_MULT:-3}
rm -f "$build/meson-logs/testlog.json"
# shellcheck disable=SC2016 # expanded in the guest
# scenarios: loco-run spreads the nodes over both devices (LOCO_RUN_HOSTS)
guest='export LOCO_TEST_ADDR_A=$RXE_IP0:0 LOCO_TEST_ADDR_B=$RXE_IP1:0
export LOCO_RUN_HOSTS=$RXE_IP0,$RXE_IP1
echo "guest: $(uname -r), rxe0 $RXE_IP0 (side A), rxe1 $RXE_IP1 (side B), memlock $(ulimit -l)"
meson test -C '"$build"' --no-rebuild --print-errorlogs --timeout-multiplier '"$mult"' "$@"'
t0=$(date +%s.%N)
"$here/run-in-rxe-vm.sh" bash -c "$guest" guest "${run[@]}"
vrc=$?
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')

echo
echo "run-verbs-suite: VM run took $secs s (boot, ${#run[@]} tests, power-off); VM exit status $vrc"
if [[ ! -s $build/meson-logs/testlog.json ]]; then
	echo "run-verbs-suite: no test results (the VM failed before meson test ran)" >&2
	echo "0 passed, ${#run[@]} failed"
	exit 1
fi
python3 - "$build/meson-logs/testlog.json" <<'EOF'
import json, sys
passed = failed = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    t = json.loads(line)
    res = t.get("result", "?")
    ok = res == "OK"
    print("%-6s %-24s %6.1f s%s" % ("PASS" if ok else "FAIL", t.get("name", "?"),
                                    t.get("duration", 0.0),
                                    "" if ok else "  (" + res + ")"))
    passed += ok
    failed += not ok
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 and passed > 0 else 1)
EOF
