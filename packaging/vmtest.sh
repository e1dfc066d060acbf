#!/usr/bin/env bash
# packaging/vmtest.sh [SUITE...]: installs build/pkg's .deb with dpkg into Debian and
# Ubuntu userlands booted on a real kernel (tests/vm; default suites: jammy bookworm noble
# trixie resolute sid, one VM at a time), and checks that stock ibv_devices/ibv_devinfo
# find rxe0/rxe1 through our provider (librxe removed from the image). Result lines "--- PASS|FAIL: pkg/<suite>/<step>"
# go to stdout and to build/pkg/vm/<suite>.out. Run `make package` first.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKG_OUT=${PKG_OUT:-$REPO/build/pkg}
suites=("$@")
((${#suites[@]})) || suites=(jammy bookworm noble trixie resolute sid)
for s in "${suites[@]}"; do
  [[ $s =~ ^[a-z][a-z0-9-]*$ ]] || { echo "vmtest: not a suite name: $s" >&2; exit 2; }
done
debs=("$PKG_OUT"/usb4verbs_*_amd64.deb)
[[ -f ${debs[0]} ]] || { echo "vmtest: no usb4verbs_*_amd64.deb in $PKG_OUT; run 'make package'" >&2; exit 1; }
((${#debs[@]} == 1)) || { echo "vmtest: more than one .deb in $PKG_OUT: ${debs[*]##*/}" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/files" "$PKG_OUT/vm"
cp "${debs[0]}" "$WORK/files/"

# dpkg to install with, plus two Essential packages every real Debian system has: tar
# (dpkg runs it to unpack; sid's dpkg no longer pulls it in, and we do not rely on
# busybox's) and libc-bin (dpkg wants ldconfig in PATH). ibverbs-utils: ibv_devinfo.
extra="dpkg tar libc-bin ibverbs-utils"
provdir=usr/lib/x86_64-linux-gnu/libibverbs
rc=0 r=0
# Status 77 from the harness: the userland could not be fetched (its SKIP line is in
# the output); not a failure of the package.
for s in "${suites[@]}"; do
  echo "vmtest: $s: booting with ${debs[0]##*/}" >&2
  USERLAND=$s VM_TIMEOUT=${VM_TIMEOUT:-600} \
    VM_EXTRA_DEBS="$extra${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
    VM_EXCLUDE_GLOB="$provdir/librxe-rdmav*.so etc/libibverbs.d/rxe.driver" \
    VM_FILES="$WORK/files" VM_GUEST_SCRIPT="$REPO/packaging/vm/guest.sh" \
    "$REPO/tests/vm/run.sh" | tee "$PKG_OUT/vm/$s.out" || { r=$?; ((r == 77)) || rc=1; }
done
outs=("${suites[@]/#/$PKG_OUT/vm/}"); outs=("${outs[@]/%/.out}")
echo "vmtest: $(cat "${outs[@]}" | grep -c '^--- PASS' || true) passed," \
  "$(cat "${outs[@]}" | grep -c '^--- FAIL' || true) failed (${outs[*]})" >&2
exit $rc
