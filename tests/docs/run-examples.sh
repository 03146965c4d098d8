#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# run-examples.sh -- run the docs' programs as their pages say, under one launcher:
#
#   run-examples.sh loco-run LOCO_RUN SOURCE_ROOT BUILD_ROOT JOB...
#   run-examples.sh mpirun pmix|no-pmix SOURCE_ROOT BUILD_ROOT JOB...
#
# JOB is "N|PROGRAM|ARGS": PROGRAM run as N nodes, `loco-run -n N PROGRAM ARGS` or
# `mpirun --oversubscribe -n N PROGRAM ARGS` (as root with --allow-run-as-root, which Open
# MPI wants; the guide and README say so), each bounded by 60 s; it must exit 0. First, the
# README's own command line for the launcher is run as it is written there (build/ being
# BUILD_ROOT): `build/tools/loco-run -n 3 build/demos/hello`, whose output must be the lines
# the README shows, or its `mpirun ... build/demos/hello` line. Settings come from the
# launcher: every LOCO_* variable but LOCO_FABRIC is unset; Open MPI is kept on loopback
# (OMPI_MCA_*_if_include=lo). Exit 0 pass, 1 fail, 77 skip (mpirun absent, or a liboco
# without the PMIx bootstrap), the reason on stdout.
set -uo pipefail
KIND=${1:?usage: $0 loco-run LOCO_RUN|mpirun pmix|no-pmix SOURCE_ROOT BUILD_ROOT JOB...}
ARG=${2:?} SRC=${3:?} BUILD=${4:?}
shift 4
for v in $(compgen -e | grep '^LOCO_' | grep -v -e '^LOCO_FABRIC$'); do
	unset "$v"
done
T=$(mktemp -d "${TMPDIR:-/tmp}/loco-docs-examples.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
ROOT_ARGS=()
[[ $(id -u) -eq 0 ]] && ROOT_ARGS=(--allow-run-as-root)

case $KIND in
loco-run)
	LAUNCH=("$ARG" --timeout 60 -n)
	;;
mpirun)
	if ! command -v mpirun >/dev/null 2>&1; then
		echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin)"
		exit 77
	fi
	if [[ $ARG != pmix ]]; then
		echo "SKIP: this liboco has no PMIx bootstrap (libpmix-dev was missing at meson setup)," \
			"so ranks started by mpirun would not find each other"
		exit 77
	fi
	export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
	# sanitizer builds: what libpmix itself leaks is not ours (as in tests/launch)
	export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$SRC/tests/launch/lsan.supp"
	LAUNCH=(timeout 60 mpirun --oversubscribe "${ROOT_ARGS[@]}" -n)
	echo "$(mpirun --version 2>&1 | head -1)"
	;;
*)
	echo "usage: $0 loco-run LOCO_RUN|mpirun pmix|no-pmix SOURCE_ROOT BUILD_ROOT JOB..." >&2
	exit 2
	;;
esac

# job WHAT COMMAND...: run it, say how long it took, count a failure
job() {
	local what=$1 t0 ms rc
	shift
	t0=$(date +%s%N)
	"$@" >"$T/out" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [[ $rc -eq 0 ]]; then
		echo "ok: $what (${ms} ms)"
	else
		echo "FAIL: $what: exit $rc after ${ms} ms; its output:"
		sed 's/^/    /' "$T/out" | tail -40
		FAILS=$((FAILS + 1))
	fi
	return $rc
}

# the README's command line for this launcher, as written (build/ is BUILD_ROOT)
if [[ $KIND == loco-run ]]; then
	line=$(grep -m1 -E '^build/tools/loco-run -n [0-9]+ build/demos/hello$' "$SRC/README.md")
else
	line=$(grep -m1 -E '^mpirun .*build/demos/hello' "$SRC/README.md" | sed 's/#.*//; s/ *$//')
fi
if [[ -z $line ]]; then
	echo "FAIL: README.md has no $KIND line for build/demos/hello"
	FAILS=$((FAILS + 1))
else
	read -r -a words <<<"${line//build\//$BUILD/}"
	[[ $KIND == mpirun ]] && words=(timeout 60 "${words[0]}" "${ROOT_ARGS[@]}" "${words[@]:1}")
	if job "README: $line" "${words[@]}" && [[ $KIND == loco-run ]]; then
		# the output the README shows under it, in any order
		grep -E '^# \[[0-9]+\] node ' "$SRC/README.md" | sed 's/^# //' | sort >"$T/want"
		sort "$T/out" >"$T/got"
		if [[ -s $T/want ]] && diff "$T/want" "$T/got" >/dev/null; then
			echo "ok: ... printed what the README shows ($(wc -l <"$T/want") lines)"
		else
			echo "FAIL: ... printed other lines than the README shows:"
			diff "$T/want" "$T/got" | sed 's/^/    /'
			FAILS=$((FAILS + 1))
		fi
	fi
fi

# the programs of the docs
for spec in "$@"; do
	IFS='|' read -r n prog args <<<"$spec"
	read -r -a argv <<<"$args"
	shown=("${LAUNCH[@]}")
	[[ ${shown[0]} == timeout ]] && shown=("${shown[@]:2}")
	shown[0]=${shown[0]##*/}
	job "${shown[*]} $n ${prog#"$BUILD"/}${args:+ $args}" "${LAUNCH[@]}" "$n" "$prog" "${argv[@]}"
done

echo "$FAILS failed"
[[ $FAILS -eq 0 ]]
