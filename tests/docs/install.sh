#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# install.sh -- what README "Install into a prefix" says works: install the build into a temporary
# directory (meson install --destdir), build a program with pkg-config and an rpath, run it with no
# LD_LIBRARY_PATH, and find the man pages (installed without pandoc, from docs/man/gen/). The
# program is compiled with `pkg-config --cflags --libs loco` and no other .pc file in reach (the
# dependencies' .pc files, pmix's among them, must not be needed), and linked once more against
# liboco.a with `pkg-config --static --libs loco` (its Libs.private).
# usage: install.sh BUILD_ROOT SOURCE_ROOT VERSION CC [SANITIZE]    exit 0 pass, 1 fail, 77 skip
# SANITIZE: the build's b_sanitize (none, address,undefined, ...): a sanitized liboco needs the
# program built with the same -fsanitize (its runtime).
set -u
build=$1
src=$2
version=$3
cc=$4
san=()
[ "${5:-none}" != none ] && san=("-fsanitize=$5")
fails=0
check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
for tool in meson pkg-config; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found"
		exit 77
	fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! meson install -C "$build" --no-rebuild --destdir "$tmp/root" >"$tmp/install.log" 2>&1; then
	tail -n 20 "$tmp/install.log"
	echo "FAIL: meson install --destdir"
	exit 1
fi
pc=$(find "$tmp/root" -name loco.pc | head -n 1)
check "loco.pc installed" test -n "$pc"
[ -n "$pc" ] || exit 1
prefix=$(sed -n 's/^prefix=//p' "$pc")
root=$tmp/root$prefix # where the prefix landed
# PKG_CONFIG_LIBDIR replaces the system's .pc folders: only loco.pc is in reach
PKG_CONFIG_LIBDIR=$(dirname "$pc")
export PKG_CONFIG_LIBDIR
unset PKG_CONFIG_PATH
pkc() { pkg-config --define-variable=prefix="$root" "$@" loco; }
libdir=$(pkc --variable=libdir)
echo "prefix $prefix, libdir ${libdir#"$root"/}, loco.pc ${pc#"$tmp/root"}"
check "pkg-config --modversion is $version" test "$(pkc --modversion)" = "$version"
check "liboco.so.0 in libdir" test -e "$libdir/liboco.so.0"
check "loco.pc requires no other .pc file" test -z "$(pkc --print-requires --print-requires-private)"

cat >"$tmp/app.c" <<'C'
#include <stdio.h>
#include <loco.h>
#if !LOCO_CHECK_VERSION(0, 4)
#error "headers older than 0.4"
#endif
int main(void)
{
	unsigned v = loco_version();
	printf("loco %u.%u (headers %s): %s\n", v >> 16, v & 0xffff, LOCO_VERSION_STRING, loco_strerror(0));
	return v == ((unsigned)LOCO_VERSION_MAJOR << 16 | LOCO_VERSION_MINOR) ? 0 : 1;
}
C
# shellcheck disable=SC2046 # pkg-config's words are meant to split
if ! "$cc" "${san[@]}" -o "$tmp/app" "$tmp/app.c" $(pkc --cflags --libs) -Wl,-rpath,"$libdir" 2>"$tmp/cc.log"; then
	cat "$tmp/cc.log"
	echo "FAIL: cc with pkg-config"
	exit 1
fi
out=$(env -u LD_LIBRARY_PATH "$tmp/app")
rc=$?
echo "app: $out"
check "the program runs with the rpath alone (rc $rc)" test "$rc" -eq 0
check "it reports $version" grep -q "^loco ${version%.*} (headers $version)" <<<"$out"
lib=$(env -u LD_LIBRARY_PATH ldd "$tmp/app" | grep 'liboco\.so\.0')
check "liboco.so.0 is loaded from the prefix ($lib)" grep -qF "$libdir/liboco.so.0" <<<"$lib"

# static: liboco.a and the Libs.private flags (which name each dependency's library folder)
static=$(pkc --static --libs)
static=${static//-loco/$libdir/liboco.a}
# shellcheck disable=SC2046,SC2086 # pkg-config's words are meant to split
if "$cc" "${san[@]}" -o "$tmp/app-static" "$tmp/app.c" $(pkc --cflags) $static 2>"$tmp/cc-static.log"; then
	out=$(env -u LD_LIBRARY_PATH "$tmp/app-static")
	check "linked against liboco.a with --static --libs, it runs ($out)" test $? -eq 0
	check "and loads no liboco.so" test -z "$(ldd "$tmp/app-static" | grep liboco)"
else
	cat "$tmp/cc-static.log"
	check "cc against liboco.a with pkg-config --static --libs" false
fi

# man pages: every kept page but loco-fabric.7 (internal), and the per-function aliases
man=$root/share/man
n=0
for page in "$src"/docs/man/gen/*.[137]; do
	p=$(basename "$page")
	[ "$p" = loco-fabric.7 ] && continue
	n=$((n + 1))
	check "man${p##*.}/$p installed" test -s "$man/man${p##*.}/$p"
done
check "alias man3/loco_sst_push_to.3 -> loco_sst.3" grep -qx '.so man3/loco_sst.3' "$man/man3/loco_sst_push_to.3"
echo "figures: $n pages, $(find "$man/man3" -type f | wc -l) entries in man3"
[ "$fails" -eq 0 ] || exit 1
exit 0
