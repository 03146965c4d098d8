#!/bin/bash
# run-in-rxe-vm.sh - run a command inside a throw-away QEMU guest that has
# Soft-RoCE (rdma_rxe) RDMA devices, so real libibverbs/librdmacm programs
# can be run on a machine whose own kernel has no RDMA support.
#
# LOCO's copy of the workplace's rxe-vm tool (tools/rxe-vm, checked
# 2026-11-22), used by tests/vm/run-verbs-suite.sh and bench/verbs-vm.sh.
# It is ours: change it here. Runs as root on the host (apt-get, 9p).
#
# Usage:  run-in-rxe-vm.sh 'COMMAND'        (run by bash -c in the guest)
#         run-in-rxe-vm.sh PROG [ARG...]    (several words: quoted as given)
#
# The guest boots Debian's stock linux-image-amd64 kernel (6.1.x, it ships
# rdma_rxe), downloaded with apt-get once and cached.  The host's root file
# system is the guest's root (9p, read-only, with a throw-away tmpfs overlay
# on top: every program installed on the host runs unchanged in the guest);
# the current directory is shared read-write at the same path, so build
# outputs and logs land on the host.  The guest has NO network connection
# to the outside (-nic none).  COMMAND runs as root in the current
# directory, with the caller's exported environment, stdin = /dev/null, its
# stdout/stderr streamed to this script's stdout/stderr.
#
# Exit status: COMMAND's; 124 when RXE_VM_TIMEOUT expired; 125 when the VM
# itself failed (its console log is then printed on stderr).
#
# Inside the guest (one network namespace):
#   veth0 10.77.0.1/24  MAC 02:00:00:77:00:01  ->  rxe0   ("node A")
#   veth1 10.77.0.2/24  MAC 02:00:00:77:00:02  ->  rxe1   ("node B")
#   Policy routing sends traffic between the two addresses through the veth
#   pair, so rxe0 and rxe1 behave as two RoCEv2 nodes (verbs and rdma_cm).
#   GID index 1 is the IPv4 (::ffff:10.77.0.x) RoCEv2 GID: use -g 1 / -x 1
#   (index 0, the fe80:: link-local GID, works too), or rdma_cm.
#   rxe0 <-> rxe0 traffic short-cuts inside rxe (no veth packets);
#   rxe0 <-> rxe1 traffic really crosses the veth pair.
#   COMMAND sees RXE_VM=1 RXE_DEV0=rxe0 RXE_DEV1=rxe1 RXE_IP0=10.77.0.1
#   RXE_IP1=10.77.0.2 RXE_GID_INDEX=1.
#
# Settings (environment variables):
#   RXE_VM_CPUS     guest CPUs           (default: the host's core count)
#   RXE_VM_MEM      guest memory         (default: 4G; only touched pages cost)
#   RXE_VM_TIMEOUT  seconds for the whole VM run (default: 3600)
#   RXE_VM_ACCEL    auto | kvm | tcg     (default: auto = kvm only where it is
#                   real VT-x/AMD-V KVM; this workplace's /dev/kvm is PVM,
#                   which cannot run a stock kernel, so auto picks tcg)
#   RXE_VM_CACHE    cache folder (default: /tmp/rxe-vm-cache, ~500 MB)
#   RXE_VM_KERNEL_PKG  kernel package (default: what linux-image-amd64
#                   depends on, resolved once and remembered in the cache)
#   RXE_VM_VERBOSE=1   also stream the guest console (kernel log) to stderr
#   RXE_VM_RW_PATHS  extra host folders to share read-write (colon-separated)
#   RXE_VM_APPEND    extra words for the guest kernel command line
#   RXE_VM_CLEARCPUID  CPU features the guest kernel must not use (default
#                   under TCG: erms,fsrm; "none" keeps them). With ERMS/FSRM
#                   the guest kernel's memcpy is `rep movsb`, which TCG runs
#                   one byte at a time: rxe's copies of RDMA payloads then
#                   tear aligned 8-byte words and can land a 64-byte line
#                   out of order, which no real NIC does (LOCO's fabric
#                   tests torn-word and line-order catch it). Without them
#                   the kernel copies with `rep movsq`: 8-byte stores.
#
# Notes: writes outside the current directory (and RXE_VM_RW_PATHS) go to
# the tmpfs overlay and are lost at power-off.  Under TCG (no usable KVM)
# the guest CPU has AVX2 but no AVX-512: host binaries built with
# -march=native on an AVX-512 host die with SIGILL in the guest.  A run
# costs ~8-10 s of boot/teardown with a warm cache (~25 s the first time:
# kernel download, plus apt-get install when packages are missing).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
NET_IP0=10.77.0.1 NET_IP1=10.77.0.2

log() { echo "run-in-rxe-vm: $*" >&2; }
die() { log "$*"; exit 125; }

# ---------------------------------------------------------------- guest ---
# Stage 2 runs as PID 1 inside the guest (after switch_root), with the
# host's bash, on the overlay root.
guest_stage2() {
    set +eu
    CTL=/run/rxe-vm
    exec </dev/null >/dev/console 2>&1
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    . "$CTL/config"
    local up_s kv KV i ok=0 g0 g1 a b out=/dev/console err=/dev/console p rc
    up() { read -r up_s _ < /proc/uptime; echo "rxe-vm stage2: $* (${up_s}s uptime)"; }
    setup_fail() {
        echo "rxe-vm stage2: SETUP FAILED: $*"; echo "$*" > "$CTL/setup_failed"; sync
        "$GUEST_BUSYBOX" poweroff -f; echo o > /proc/sysrq-trigger; sleep 10
    }
    up "start"
    # (bash builtins where possible: every exec costs ~0.1 s under TCG)
    echo rxe-vm > /proc/sys/kernel/hostname
    read -r KV < /proc/sys/kernel/osrelease
    if [ ! -e "/lib/modules/$KV/modules.dep" ]; then
        mkdir -p /lib/modules && rm -rf "/lib/modules/$KV" && ln -s "$GUEST_KMODDIR" "/lib/modules/$KV"
    fi
    for m in virtio_console veth rdma_rxe ib_uverbs rdma_ucm; do
        [ -d "/sys/module/$m" ] || { modprobe -a virtio_console veth rdma_rxe ib_uverbs rdma_ucm || setup_fail "modprobe"; break; }
    done
    up "modules loaded"
    # New interfaces inherit these: veth1 must accept packets whose source
    # (veth0's address) is local, and reverse-path filtering must be off.
    echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter
    echo 0 > /proc/sys/net/ipv4/conf/default/rp_filter
    echo 1 > /proc/sys/net/ipv4/conf/default/accept_local
    # Locally generated traffic to the other "node" leaves through its own
    # veth end instead of being short-cut through lo: rules 100/101 come
    # before the local table, which moves from priority 0 to 1000.
    ip -batch - <<EOB || setup_fail "network setup"
link set lo up
link add veth0 address 02:00:00:77:00:01 type veth peer name veth1 address 02:00:00:77:00:02
addr add $NET_IP0/24 dev veth0
addr add $NET_IP1/24 dev veth1
link set veth0 up
link set veth1 up
rule add pref 100 iif lo to $NET_IP1 lookup 100
rule add pref 101 iif lo to $NET_IP0 lookup 101
rule add pref 1000 lookup local
rule del pref 0 lookup local
route add $NET_IP1 dev veth0 src $NET_IP0 table 100
route add $NET_IP0 dev veth1 src $NET_IP1 table 101
EOB
    up "network up"
    rdma -b - <<EOB || setup_fail "rdma link add"
link add rxe0 type rxe netdev veth0
link add rxe1 type rxe netdev veth1
EOB
    # wait for the IPv4 GIDs, port ACTIVE and the device nodes
    g0=$(printf 'ffff:%02x%02x:%02x%02x' ${NET_IP0//./ })
    g1=$(printf 'ffff:%02x%02x:%02x%02x' ${NET_IP1//./ })
    for ((i = 0; i < 300; i++)); do
        a= b=
        read -r a 2>/dev/null < /sys/class/infiniband/rxe0/ports/1/gids/1
        read -r b 2>/dev/null < /sys/class/infiniband/rxe1/ports/1/gids/1
        if [[ $a == *$g0 && $b == *$g1 && -c /dev/infiniband/uverbs1 && -c /dev/infiniband/rdma_cm ]] &&
           [[ $(< /sys/class/infiniband/rxe0/ports/1/state) == *ACTIVE* ]] &&
           [[ $(< /sys/class/infiniband/rxe1/ports/1/state) == *ACTIVE* ]]; then ok=1; break; fi
        sleep 0.05
    done
    [ $ok = 1 ] || setup_fail "rxe devices not ready"
    for p in /sys/class/virtio-ports/*; do
        read -r a < "$p/name"
        case $a in
            rxevm.stdout) out=/dev/${p##*/} ;;
            rxevm.stderr) err=/dev/${p##*/} ;;
        esac
    done
    [ -c "$out" ] && [ -c "$err" ] || setup_fail "virtio-serial ports missing"
    up "ready"
    : > "$CTL/ready"
    # the caller's environment
    while IFS= read -r -d '' kv; do
        case "${kv%%=*}" in
            PWD|OLDPWD|SHLVL|_|BASH_*|SHELLOPTS|BASHOPTS|HOSTNAME|PS1|PS2|PS4|PROMPT_COMMAND|LINES|COLUMNS) ;;
            *) export "$kv" 2>/dev/null ;;
        esac
    done < "$CTL/env"
    export RXE_VM=1 RXE_DEV0=rxe0 RXE_DEV1=rxe1 RXE_IP0=$NET_IP0 RXE_IP1=$NET_IP1 RXE_GID_INDEX=1
    ulimit -l unlimited; ulimit -c 0
    cd "$GUEST_CWD" || setup_fail "cd $GUEST_CWD"
    /bin/bash -c "$(< "$CTL/cmd")" </dev/null >"$out" 2>"$err"
    rc=$?
    echo "$rc" > "$CTL/rc"
    up "command exited with $rc"
    sync
    "$GUEST_BUSYBOX" poweroff -f
    echo o > /proc/sysrq-trigger; sleep 10
}

if [ "${1:-}" = "--guest-stage2" ]; then
    guest_stage2
    exit 0
fi

# ----------------------------------------------------------------- host ---
[ $# -ge 1 ] || { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$SELF" >&2; exit 2; }
if [ $# -eq 1 ]; then CMD=$1; else CMD=$(printf '%q ' "$@"); fi
[ "$(id -u)" = 0 ] || die "must run as root (apt-get, 9p export of /)"
CWD=$(pwd -P)
[ "$CWD" != / ] || die "refusing to share / read-write; cd into a project folder first"

CACHE=${RXE_VM_CACHE:-/tmp/rxe-vm-cache}
CPUS=${RXE_VM_CPUS:-$(nproc)}
MEM=${RXE_VM_MEM:-4G}
TMO=${RXE_VM_TIMEOUT:-3600}
mkdir -p "$CACHE"

export DEBIAN_FRONTEND=noninteractive
apt_updated=0
quietly() { "$@" > "$CACHE/apt.log" 2>&1 || { cat "$CACHE/apt.log" >&2; return 1; }; }
apt_update() { [ $apt_updated = 1 ] || { quietly apt-get update || die "apt-get update failed"; apt_updated=1; }; }
download() { ( cd "$1" && quietly apt-get download -o APT::Sandbox::User=root "$2" ); }

# 1. host packages (idempotent)
need=()
for p in qemu-system-x86 cpio xz-utils kmod iproute2 \
         ibverbs-providers ibverbs-utils rdmacm-utils perftest; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt_update
    quietly apt-get install -y --no-install-recommends "${need[@]}" \
        || die "apt-get install failed"
fi

# 2. kernel, busybox and initramfs, cached (under a lock: parallel runs)
exec 9>"$CACHE/.lock"
flock 9
if [ -n "${RXE_VM_KERNEL_PKG:-}" ]; then
    KPKG=$RXE_VM_KERNEL_PKG
elif [ -s "$CACHE/default-kernel" ]; then
    KPKG=$(cat "$CACHE/default-kernel")
else
    apt_update
    KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
           sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
    [ -n "$KPKG" ] || die "cannot resolve linux-image-amd64"
    echo "$KPKG" > "$CACHE/default-kernel"
fi
KDIR=$CACHE/$KPKG
if [ ! -f "$KDIR/.ready" ]; then
    log "fetching $KPKG (once)"
    rm -rf "$KDIR"; mkdir -p "$KDIR/dl"
    download "$KDIR/dl" "$KPKG" || { apt_update; download "$KDIR/dl" "$KPKG"; } || die "cannot download $KPKG"
    dpkg -x "$KDIR"/dl/*.deb "$KDIR/root"
    rm -rf "$KDIR/dl"
    MO=$(dirname "$(find "$KDIR/root" -name modules.order | head -1)")
    KV=$(basename "$MO")
    depmod -b "$KDIR/root" "$KV" 2>/dev/null || depmod -b "$KDIR/root/usr" "$KV"
    # Uncompressed vmlinux boots through its PVH entry point: no in-guest XZ
    # decompression, which costs ~6 s under TCG.
    BZ=$KDIR/root/boot/vmlinuz-$KV
    off=$(LC_ALL=C grep -abo $'\xfd7zXZ' "$BZ" | head -1 | cut -d: -f1 || true)
    if [ -n "$off" ]; then tail -c +$((off + 1)) "$BZ" | xz -dc > "$KDIR/vmlinux" 2>/dev/null || true; fi
    [ "$(head -c 4 "$KDIR/vmlinux" 2>/dev/null | od -An -c | tr -d ' ')" = 177ELF ] || cp "$BZ" "$KDIR/vmlinux"
    echo "$KV" > "$KDIR/kver"; echo "$MO" > "$KDIR/moddir"
    touch "$KDIR/.ready"
fi
KV=$(cat "$KDIR/kver"); MO=$(cat "$KDIR/moddir")
BBDIR=$CACHE/busybox-static
if [ ! -x "$BBDIR/bin/busybox" ]; then
    rm -rf "$BBDIR"; mkdir -p "$BBDIR/dl"
    download "$BBDIR/dl" busybox-static || { apt_update; download "$BBDIR/dl" busybox-static; } ||
        die "cannot download busybox-static"
    dpkg -x "$BBDIR"/dl/*.deb "$BBDIR/x"
    mkdir -p "$BBDIR/bin"; cp "$(find "$BBDIR/x" -path '*bin/busybox' | head -1)" "$BBDIR/bin/busybox"
    rm -rf "$BBDIR/dl" "$BBDIR/x"
fi
BB=$BBDIR/bin/busybox

# Stage 1: PID 1 of the initramfs (busybox sh).
read -r -d '' INIT <<'EOF' || true
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
fail() { echo "rxe-vm init: SETUP FAILED: $*"; poweroff -f; sleep 10; }
for m in $(cat /mods/order); do insmod /mods/$m || fail "insmod $m"; done
O=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /ctl /lower /rw /newroot
mount -t 9p -o $O,cache=none rxevm /ctl || fail "mount rxevm"
. /ctl/config
mount -t 9p -o $O,ro,cache=loose hostroot /lower || fail "mount hostroot"
mount -t tmpfs -o mode=0755 tmpfs /rw && mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || fail "overlay"
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/rxe-vm && mount --move /ctl /newroot/run/rxe-vm
i=0
for p in $GUEST_RW; do
    mkdir -p "/newroot$p" && mount -t 9p -o $O,cache=mmap rw$i "/newroot$p" || fail "mount $p"
    i=$((i + 1))
done
for d in proc sys dev; do mount --move /$d /newroot/$d; done
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
ln -s /proc/self/fd /newroot/dev/fd; ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout; ln -s /proc/self/fd/2 /newroot/dev/stderr
exec switch_root /newroot /bin/bash "$GUEST_STAGE2" --guest-stage2
EOF
# 9p root + the RDMA stack: insmod from the initramfs is ~2 s faster under
# TCG than modprobe reading the modules over 9p.
IMODS="virtio_pci 9pnet_virtio 9p overlay virtio_console veth rdma_rxe ib_uverbs rdma_ucm"
IHASH=$(printf '%s\n%s\n%s\n' "$INIT" "$KV" "$IMODS" | md5sum | cut -c1-12)
INITRD=$KDIR/initrd-$IHASH.gz
if [ ! -f "$INITRD" ]; then
    T=$(mktemp -d /tmp/rxe-vm-initrd.XXXXXX)
    mkdir -p "$T/bin" "$T/mods" "$T/proc" "$T/sys" "$T/dev"
    cp "$BB" "$T/bin/busybox"
    printf '%s\n' "$INIT" > "$T/init"; chmod 755 "$T/init"
    for m in $IMODS; do
        modprobe -d "$KDIR/root" -S "$KV" --show-depends "$m" 2>/dev/null ||
        modprobe -d "$KDIR/root/usr" -S "$KV" --show-depends "$m"
    done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r f; do
        cp "$f" "$T/mods/"; basename "$f" >> "$T/mods/order"
    done
    ( cd "$T" && find . | cpio -o -H newc --quiet | gzip -1 ) > "$INITRD.tmp"
    mv "$INITRD.tmp" "$INITRD"; rm -rf "$T"
fi
flock -u 9; exec 9>&-

# 3. accelerator
ACCEL=${RXE_VM_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
    ACCEL=tcg
    if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
       { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then ACCEL=kvm; fi
fi
CLEAR=${RXE_VM_CLEARCPUID:-}
[ -n "$CLEAR" ] || { [ "$ACCEL" = tcg ] && CLEAR=erms,fsrm || CLEAR=none; }
CLEARCPUID=; [ "$CLEAR" = none ] || CLEARCPUID="clearcpuid=$CLEAR"
case $ACCEL in
    kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
    tcg) ACCEL_ARGS=(-accel tcg,thread=multi -cpu max) ;;
    *) die "RXE_VM_ACCEL must be auto, kvm or tcg" ;;
esac

# 4. the run folder (shared with the guest as tag rxevm)
RUN=$(mktemp -d /tmp/rxe-vm-run.XXXXXX)
QPID= OPID= EPID= VPID=
cleanup() {
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
    for p in $OPID $EPID $VPID; do kill "$p" 2>/dev/null; done
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
qarg() { printf '%s' "${1//,/,,}"; }   # qemu option values: double the commas
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
RW=("$CWD")
IFS=: read -r -a extra <<< "${RXE_VM_RW_PATHS:-}"
for p in "${extra[@]}"; do [ -n "$p" ] && RW+=("$(readlink -f "$p")"); done
SHARES=() GUEST_RW=
for i in "${!RW[@]}"; do
    case ${RW[$i]} in *[[:space:]]*) die "paths with spaces are not supported: ${RW[$i]}";; esac
    SHARES+=(-virtfs "local,path=$(qarg "${RW[$i]}"),mount_tag=rw$i,security_model=none,multidevs=remap")
    GUEST_RW+="${RW[$i]} "
done
{
    echo "GUEST_CWD=$(sq "$CWD")"
    echo "GUEST_RW=$(sq "$GUEST_RW")"
    echo "GUEST_STAGE2=$(sq "$SELF")"
    echo "GUEST_KMODDIR=$(sq "$MO")"
    echo "GUEST_BUSYBOX=$(sq "$BB")"
    echo "NET_IP0=$NET_IP0 NET_IP1=$NET_IP1"
} > "$RUN/config"
printf '%s' "$CMD" > "$RUN/cmd"
env -0 > "$RUN/env"
mkfifo "$RUN/out" "$RUN/err"
cat "$RUN/out" & OPID=$!
cat "$RUN/err" >&2 & EPID=$!
# Hold a writer on each FIFO (read-write opens never block) so the readers
# see EOF only once both qemu and this script have closed them.
exec 7<>"$RUN/out" 8<>"$RUN/err"
: > "$RUN/console.log"

KQUIET="quiet loglevel=4"; [ "${RXE_VM_VERBOSE:-0}" = 1 ] && KQUIET=
T0=$(date +%s.%N)
timeout -k 10 "$TMO" qemu-system-x86_64 \
    "${ACCEL_ARGS[@]}" -smp "$CPUS" -m "$MEM" \
    -nodefaults -no-user-config -display none -monitor none -nic none -no-reboot \
    -kernel "$KDIR/vmlinux" -initrd "$INITRD" \
    -append "console=ttyS0 panic=-1 tsc=reliable mitigations=off acpi=noirq $KQUIET $CLEARCPUID ${RXE_VM_APPEND:-}" \
    -serial "file:$(qarg "$RUN/console.log")" \
    -device virtio-serial-pci,id=vser \
    -chardev "file,id=cout,path=$(qarg "$RUN/out")" -device virtserialport,bus=vser.0,chardev=cout,name=rxevm.stdout \
    -chardev "file,id=cerr,path=$(qarg "$RUN/err")" -device virtserialport,bus=vser.0,chardev=cerr,name=rxevm.stderr \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$(qarg "$RUN"),mount_tag=rxevm,security_model=none" \
    "${SHARES[@]}" \
    </dev/null >"$RUN/qemu.log" 2>&1 7>&- 8>&- &
QPID=$!
if [ "${RXE_VM_VERBOSE:-0}" = 1 ]; then
    log "accel=$ACCEL cpus=$CPUS mem=$MEM kernel=$KV"
    tail -n +1 -f "$RUN/console.log" >&2 7>&- 8>&- & VPID=$!
fi
qrc=0; wait "$QPID" || qrc=$?
QPID=
[ -n "$VPID" ] && { sleep 0.2; kill "$VPID" 2>/dev/null; VPID=; }
exec 7>&- 8>&-
wait "$OPID" "$EPID" 2>/dev/null || true
OPID= EPID=
T1=$(date +%s.%N)
[ "${RXE_VM_VERBOSE:-0}" = 1 ] && log "VM ran $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}') s"

if [ -f "$RUN/rc" ]; then
    exit "$(cat "$RUN/rc")"
fi
if [ $qrc = 124 ] || [ $qrc = 137 ]; then
    log "timed out after ${TMO}s (RXE_VM_TIMEOUT); guest console tail:"
    tail -n 30 "$RUN/console.log" >&2
    exit 124
fi
log "the VM failed (qemu exit $qrc); qemu said:"
cat "$RUN/qemu.log" >&2
log "guest console:"
tail -n 60 "$RUN/console.log" >&2
exit 125
