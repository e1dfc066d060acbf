#!/usr/bin/env bash
# cshim/vmtest.sh [USERLAND]: runs cshim/testdata/vmcheck.c in the VM (tests/vm; kernel
# 6.1, Soft-RoCE) through the stock libibverbs of USERLAND (jammy = rdma-core 39,
# bookworm = 44, noble = 50, trixie = 56.1, resolute = 61, sid = 65; default bookworm)
# with our provider as the only one libibverbs loads by default for rxe: ECE and
# query_port_speed errnos, the dmabuf/create_cq_ex dummies, a real completion event with
# destroy_cq waiting for its ack while the event holder polls and re-arms, async port
# events, and failing ops' return values and errno against stock librxe in the same
# boot (librxe stays in the image without its .driver file; vmcheck runs it in a child
# with RDMAV_DRIVERS=rxe and our claim of rxe off); then cshim/testdata/srqresize.c
# (ibv_modify_srq growing an SRQ under traffic).
# Prints go-test-style lines; exit status non-zero if a check failed.
set -euo pipefail

log() { printf '[cshim-vm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

main() {
  local repo userland=${1:-bookworm} provdir=usr/lib/x86_64-linux-gnu/libibverbs p
  repo=$(cd "$(dirname "$0")/.." && pwd)
  export CACHE=${CACHE:-$repo/.cache} GOMODCACHE=${GOMODCACHE:-$repo/.cache/gomod} GOFLAGS=${GOFLAGS:--modcacherw}
  work=$(mktemp -d /tmp/cshim-vm.XXXXXX)
  [[ -e /usr/include/infiniband/verbs.h ]] || { log "libibverbs-dev is needed to build vmcheck"; exit 1; }

  log "building the provider and vmcheck"
  "$repo/scripts/build-provider.sh" "$work"
  mkdir -p "$work/files" "$work/overlay/$provdir" "$work/overlay/etc/libibverbs.d" "$work/overlay/etc/usb4verbs"
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$work/files/vmcheck" "$repo/cshim/testdata/vmcheck.c" -libverbs
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/srqresize" "$repo/cshim/testdata/srqresize.c" -libverbs

  # The provider as packaging installs it (the front once, a name per PABI,
  # the Go part beside it), the .driver file, and the rxe opt-in (cshim/README.md).
  install -m644 "$work/libusb4_rdma.so" "$work/overlay/$provdir/libusb4_rdma.so"
  install -m644 "$work/libusb4_rdma-go.so" "$work/overlay/$provdir/libusb4_rdma-go.so"
  for p in 34 57 59 64 65; do ln -s libusb4_rdma.so "$work/overlay/$provdir/libusb4_rdma-rdmav$p.so"; done
  printf 'driver /%s/libusb4_rdma\n' "$provdir" > "$work/overlay/etc/libibverbs.d/usb4_rdma.driver"
  printf 'claim_rxe yes\n' > "$work/overlay/etc/usb4verbs/usb4_rdma.conf"

  cat > "$work/vmcheck.sh" <<'GUEST'
#!/bin/sh
rc=0
/opt/usb4verbs/vmcheck "$USB4VERBS_DEV0" "$USB4VERBS_DEV1" "$USB4VERBS_NETDEV1" || rc=1
/opt/usb4verbs/srqresize "$USB4VERBS_DEV0" "$USB4VERBS_GID0" || rc=1
exit $rc
GUEST

  # The harness as committed: others edit tests/vm while runs are under way.
  mkdir -p "$work/harness"
  git -C "$repo" archive HEAD tests/vm | tar -x -C "$work/harness"
  ln -s "$repo/build" "$work/harness/build"
  mkdir -p "$repo/build"

  log "booting ($userland)"
  USERLAND=$userland VM_FILES="$work/files" VM_OVERLAY="$work/overlay" VM_GUEST_SCRIPT="$work/vmcheck.sh" \
    VM_EXCLUDE_GLOB="etc/libibverbs.d/rxe.driver" \
    VM_TIMEOUT=${VM_TIMEOUT:-600} "$work/harness/tests/vm/run.sh" || {
    local rc=$?
    # 77: the userland could not be fetched; the harness printed a SKIP line.
    ((rc == 77)) && return 0
    return $rc
  }
}

main "$@"
