#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# verbs-vm.sh -- fabric-lat on the verbs provider next to perftest, in one
# boot of the Soft-RoCE VM (tests/vm/run-in-rxe-vm.sh). Run on the HOST,
# as root:
#
#   bench/verbs-vm.sh [--no-build] [--iters N]
#
# In the VM, one after the other:
#   fabric-lat --provider verbs          LOCO_DEVICE=rxe0: its target and
#                                        its initiator both on rxe0
#   ib_write_lat -s 8, ib_read_lat -s 8, ib_atomic_lat -A CMP_AND_SWAP,
#   ib_atomic_lat -A FETCH_AND_ADD       (-x 1, -n N), twice: server on
#                                        rxe0 ("same device", what
#                                        fabric-lat does) and server on
#                                        rxe1 ("across the veth link");
#                                        the client always on rxe0
# then prints the medians side by side, and the ratio fabric-lat / perftest
# for the same-device runs. Under TCG every number is slow and noisy: only
# the ratio means something. perftest's ib_write_lat is a ping-pong and
# reports half the round trip; fabric-lat reports the whole round trip of
# a signaled WRITE, so the WRITE ratio is taken against twice perftest's
# figure. READ and atomics are round trips in both.
#
# Results: build-release-gcc/bench/results/verbs-vm.json, or in $LOCO_BENCH_OUT when it is set
# (and the raw outputs next to it).
# Exit status: 0 when every program ran, 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/.." && pwd)
build=build-release-gcc # tools/test --release gcc's tree, with the verbs provider
iters=2000
do_build=1

while [[ $# -gt 0 ]]; do
	case $1 in
	--no-build) do_build=0 ;;
	--iters)
		iters=${2:?--iters needs a number}
		shift
		;;
	-h | --help)
		sed -n '3,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "verbs-vm: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
[[ $iters =~ ^[0-9]+$ ]] && ((iters >= 100)) || {
	echo "verbs-vm: --iters must be a number >= 100" >&2
	exit 2
}

cd "$srcdir" || exit 1
if [[ $do_build = 1 ]]; then
	if [[ ! -f $build/build.ninja ]]; then
		CC=gcc meson setup "$build" -Dverbs=enabled -Dwerror=true -Dbuildtype=release \
			-Dtests=true -Dbench=true >/dev/null || exit 1
	else
		meson configure "$build" -Dverbs=enabled >/dev/null || exit 1
	fi
	meson compile -C "$build" >/dev/null || {
		echo "verbs-vm: the build failed" >&2
		exit 1
	}
fi
[[ -x $build/bench/fabric-lat ]] || {
	echo "verbs-vm: no $build/bench/fabric-lat (configure with -Dbench=true)" >&2
	exit 1
}

out=${LOCO_BENCH_OUT:-$srcdir/$build/bench/results}/verbs-vm
rm -rf "$out" && mkdir -p "$out"
guest=$out/guest.sh
cat >"$guest" <<'EOF'
#!/bin/bash
# runs in the VM: $1 = output folder, $2 = iterations, $3 = the source tree, $4 = the build
out=$1 n=$2
cd "$3" || exit 1
fails=0
echo "guest: $(uname -r); fabric-lat, then perftest, $n iterations each"
LOCO_DEVICE=rxe0 timeout 600 "$4/bench/fabric-lat" --provider verbs --iters "$n" \
	--warmup $((n / 10)) --rate-ops $((n * 10)) --json "$out/fabric-verbs.json" \
	> "$out/fabric-lat.txt" 2>&1 || fails=$((fails + 1))
cat "$out/fabric-lat.txt"
# perf NAME SERVER_DEV SERVER_IP ARGS...: server in the background, client on rxe0
perf() {
	local name=$1 sdev=$2 sip=$3 sp rc
	shift 3
	timeout 300 "$@" -d "$sdev" -x 1 -n "$n" > "$out/$name.server.txt" 2>&1 & sp=$!
	sleep 1.5
	timeout 300 "$@" -d rxe0 -x 1 -n "$n" "$sip" > "$out/$name.txt" 2>&1
	rc=$?
	wait "$sp" || rc=1
	[ $rc = 0 ] || { fails=$((fails + 1)); echo "$name: failed (see $out/$name.txt)"; }
}
for where in same:rxe0:$RXE_IP0 cross:rxe1:$RXE_IP1; do
	IFS=: read -r tag dev ip <<< "$where"
	perf "write-$tag" "$dev" "$ip" ib_write_lat -s 8
	perf "read-$tag" "$dev" "$ip" ib_read_lat -s 8
	perf "cas-$tag" "$dev" "$ip" ib_atomic_lat -A CMP_AND_SWAP
	perf "faa-$tag" "$dev" "$ip" ib_atomic_lat -A FETCH_AND_ADD
done
exit $((fails > 0))
EOF
chmod +x "$guest"

t0=$(date +%s.%N)
"$srcdir/tests/vm/run-in-rxe-vm.sh" "$guest" "$out" "$iters" "$srcdir" "$build"
vrc=$?
t1=$(date +%s.%N)
echo "verbs-vm: VM run took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"

python3 - "$out" "$iters" "$vrc" <<'PYEOF'
import json, os, re, sys
out, iters, vrc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def perftest(name):
    """t_typical (the median) and t_min of a perftest latency output, in us."""
    try:
        text = open(os.path.join(out, name + ".txt")).read()
    except OSError:
        return None
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if "t_typical" in l and i + 1 < len(lines):
            f = lines[i + 1].split()
            if len(f) >= 6:
                return {"min": float(f[2]), "median": float(f[4]), "mean": float(f[5])}
    return None

try:
    fl = json.load(open(os.path.join(out, "fabric-verbs.json")))["latency_us"]
except (OSError, ValueError, KeyError):
    fl = {}
rows = [("WRITE", "write", 2.0), ("READ", "read", 1.0), ("CAS", "cas", 1.0), ("FAA", "faa", 1.0)]
res = {"iters": iters, "vm_exit": vrc, "ops": {}}
print()
print("8-byte ops, medians in us (Soft-RoCE under TCG: compare ratios only)")
print("%-6s %12s %14s %14s %10s" % ("op", "fabric-lat", "perftest same", "perftest cross",
                                     "ratio"))
ok = bool(fl)
for op, key, factor in rows:
    f = fl.get(op, {}).get("median")
    s, c = perftest(key + "-same"), perftest(key + "-cross")
    rt = s["median"] * factor if s else None
    ratio = f / rt if f and rt else None
    ok = ok and f is not None and s is not None and c is not None
    res["ops"][op] = {"fabric_lat_median": f, "perftest_same": s, "perftest_cross": c,
                      "perftest_round_trip_factor": factor, "ratio": ratio}
    print("%-6s %12s %14s %14s %10s" % (
        op, "%.2f" % f if f else "-",
        ("%.2f" % s["median"]) + ("x2" if factor != 1 else "") if s else "-",
        ("%.2f" % c["median"]) + ("x2" if factor != 1 else "") if c else "-",
        "%.2f" % ratio if ratio else "-"))
print("ratio = fabric-lat median / perftest same-device median (x2 for ib_write_lat, "
      "which reports half a round trip)")
json.dump(res, open(os.path.join(out, "..", "verbs-vm.json"), "w"), indent=1)
print("results: %s" % os.path.join(os.path.dirname(out), "verbs-vm.json"))
sys.exit(0 if ok and vrc == 0 else 1)
PYEOF
