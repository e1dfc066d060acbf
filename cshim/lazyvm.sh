#!/usr/bin/env bash
# cshim/lazyvm.sh [USERLAND]: issue 13 on a real kernel, one VM boot (tests/vm; kernel
# 6.1, Soft-RoCE; default userland bookworm = rdma-core 44). Our package is installed as
# packaging lays it out (front, Go part, .driver file) beside the stock librxe, with no
# rxe opt-in in the config file. cshim/testdata/lazyvm.c then checks:
#   * a process that uses only librxe (rxe0 served by librxe, a PD allocated) has our
#     front mapped, but no Go part and one thread;
#   * a prefork server (USB4VERBS_CLAIM_RXE=1, RDMAV_DRIVERS naming us): the parent
#     lists without loading the Go part, 4 fork() children each open rxe0 and rxe1
#     through us and move 64 checked RDMA writes over an RC pair.
# Prints go-test-style lines; exit status non-zero if a check failed.
set -euo pipefail

log() { printf '[cshim-lazyvm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

main() {
  local repo userland=${1:-bookworm} provdir=usr/lib/x86_64-linux-gnu/libibverbs p
  repo=$(cd "$(dirname "$0")/.." && pwd)
  export CACHE=${CACHE:-$repo/.cache} GOMODCACHE=${GOMODCACHE:-$repo/.cache/gomod} GOFLAGS=${GOFLAGS:--modcacherw}
  work=$(mktemp -d /tmp/cshim-lazyvm.XXXXXX)
  [[ -e /usr/include/infiniband/verbs.h ]] || { log "libibverbs-dev is needed to build lazyvm"; exit 1; }

  log "building the provider and lazyvm"
  "$repo/scripts/build-provider.sh" "$work"
  mkdir -p "$work/files" "$work/overlay/$provdir" "$work/overlay/etc/libibverbs.d"
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/lazyvm" "$repo/cshim/testdata/lazyvm.c" -libverbs

  install -m644 "$work/libusb4_rdma.so" "$work/overlay/$provdir/libusb4_rdma.so"
  install -m644 "$work/libusb4_rdma-go.so" "$work/overlay/$provdir/libusb4_rdma-go.so"
  for p in 34 57 59 64 65; do ln -s libusb4_rdma.so "$work/overlay/$provdir/libusb4_rdma-rdmav$p.so"; done
  printf 'driver /%s/libusb4_rdma\n' "$provdir" > "$work/overlay/etc/libibverbs.d/usb4_rdma.driver"

  cat > "$work/lazyvm.sh" <<GUEST
#!/bin/sh
rc=0
env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS /opt/usb4verbs/lazyvm librxe-only || rc=1
USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma /opt/usb4verbs/lazyvm prefork || rc=1
exit \$rc
GUEST

  # The harness as committed: others edit tests/vm while runs are under way.
  mkdir -p "$work/harness"
  git -C "$repo" archive HEAD tests/vm | tar -x -C "$work/harness"
  ln -s "$repo/build" "$work/harness/build"
  mkdir -p "$repo/build"

  log "booting ($userland)"
  USERLAND=$userland VM_FILES="$work/files" VM_OVERLAY="$work/overlay" VM_GUEST_SCRIPT="$work/lazyvm.sh" \
    VM_TIMEOUT=${VM_TIMEOUT:-600} "$work/harness/tests/vm/run.sh" || {
    local rc=$?
    ((rc == 77)) && return 0 # the userland could not be fetched; the harness printed a SKIP line
    return $rc
  }
}

main "$@"
