#!/usr/bin/env bash
# tests/vm/run.sh [TESTBIN...]: boots a stock Debian kernel under qemu with Soft-RoCE
# (rxe0 on vethA, rxe1 on vethB), runs each host-built Go test binary inside as root,
# and relays its output to stdout unchanged. Harness failures are go-test-style
# "--- FAIL: vm/..." lines; the exit status is non-zero if anything failed.
# Progress goes to stderr as "[vm] ..." lines. Knobs and debugging: tests/vm/README.md.
# USB4_TREE=<tree>: the usb4 mode instead: the real thunderbolt_ibverbs module of that
# tree on tbloop's loopback Thunderbolt bus, both hosts' usb4_rdma devices served by our
# provider (tests/usb4/README.md).
# Exit status 77: the userland could not be fetched (an Ubuntu suite whose archive this
# machine cannot reach); a "--- SKIP: vm/userland" line says so, and nothing booted.
set -euo pipefail

# The body is one function, called on the last line: bash then parses the whole file
# before running any of it, so editing the script during a run cannot break that run.
main() {

VMDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VMDIR/../.." && pwd)
for f in common fetch kernel userland image boot; do
  # shellcheck source=/dev/null
  . "$VMDIR/lib/$f.sh"
done

KSUITE=${KSUITE:-bookworm}
USERLAND=${USERLAND:-bookworm}
VM_TIMEOUT=${VM_TIMEOUT:-900}
VM_EXTRA_DEBS=${VM_EXTRA_DEBS:-}
VM_DENY_DEBS=${VM_DENY_DEBS:-}
VM_EXCLUDE_GLOB=${VM_EXCLUDE_GLOB:-}
VM_FILES=${VM_FILES:-}
VM_OVERLAY=${VM_OVERLAY:-}
VM_GUEST_SCRIPT=${VM_GUEST_SCRIPT:-}
VM_APPEND=${VM_APPEND:-}
VM_QEMU_EXTRA=${VM_QEMU_EXTRA:-}
VM_SMP=${VM_SMP:-2}
VM_MEM=${VM_MEM:-1024}
VM_VERBOSE=${VM_VERBOSE:-0}
VM_KEEP=${VM_KEEP:-0}
CACHE=${CACHE:-$REPO/.cache}
VMCACHE="$CACHE/vm"
BUILDDIR="$REPO/build/vm"
if [[ -z ${MIRROR:-} ]]; then MIRROR=$(host_mirror) || exit 1; fi

usage() { sed -n '2,6s/^# \{0,1\}//p' "$0" >&2; exit 2; }
[[ ${1:-} == -h || ${1:-} == --help ]] && usage
if ! [[ $VM_TIMEOUT =~ ^[0-9]+$ ]] || ((VM_TIMEOUT < 60)); then
  die "VM_TIMEOUT must be a number of seconds >= 60"
fi
# Each binary's own -test.timeout: the run's budget less a minute for boot and setup.
TEST_TIMEOUT_MIN=${VM_TEST_TIMEOUT_MIN:-$(((VM_TIMEOUT - 60) / 60))}
((TEST_TIMEOUT_MIN >= 1)) || TEST_TIMEOUT_MIN=1
for b in "$@"; do [[ -f $b && -x $b ]] || die "not an executable file: $b"; done
[[ -z $VM_FILES || -d $VM_FILES ]] || die "VM_FILES is not a directory: $VM_FILES"
[[ -z $VM_OVERLAY || -d $VM_OVERLAY ]] || die "VM_OVERLAY is not a directory: $VM_OVERLAY"
[[ -z $VM_GUEST_SCRIPT || -f $VM_GUEST_SCRIPT ]] || die "VM_GUEST_SCRIPT is not a file: $VM_GUEST_SCRIPT"
require_host_tools
mkdir -p "$VMCACHE" "$BUILDDIR"
USB4_TREE=${USB4_TREE:-}
if [[ -n $USB4_TREE ]]; then
  for f in toolchain trees bed; do
    # shellcheck source=/dev/null
    . "$REPO/tests/usb4/lib/$f.sh"
  done
  usb4_prepare
  log "usb4: $USB4_DESC"
fi

# One preparer at a time per cache: the apt states and staged trees are shared.
exec {lockfd}>"$VMCACHE/.lock"
flock "$lockfd"
kernel_prepare
log "kernel: $KSUITE $KDESC, booting $(basename "$KIMG")"
userland_prepare
log "userland: $UDESC${VM_EXTRA_DEBS:+ + $VM_EXTRA_DEBS}"

WORK=$(mktemp -d "$VMCACHE/work.XXXXXX")
if [[ $VM_KEEP == 1 ]]; then log "keeping $WORK"; else trap 'rm -rf "$WORK" ${USB4_BED_OUT:+"$USB4_BED_OUT"}' EXIT; fi
image_build "$WORK" "$@"
flock -u "$lockfd"
log "initramfs $(du -h "$INITRD" | cut -f1) ready after $(elapsed "$T0") s"

# One log per run (several runs may share the checkout); the 40 newest are kept.
SERIAL_LOG="$BUILDDIR/serial-$KVER-$USERLAND-$(date +%Y%m%d-%H%M%S)-$$.log"
find "$BUILDDIR" -maxdepth 1 -name 'serial-*-*.log' -type f -printf '%T@ %p\n' 2>/dev/null \
  | sort -rn | tail -n +40 | cut -d' ' -f2- | xargs -r rm -f
vm_boot
log "done in $(elapsed "$T0") s; serial log $SERIAL_LOG"
((FAILURES == 0))
}

main "$@"
