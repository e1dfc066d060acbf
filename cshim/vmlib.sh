# cshim/vmlib.sh: sourced by cshim/vmtest.sh and cshim/lazyvm.sh, which each boot
# the VM (tests/vm) once with our provider installed in the image as packaging lays
# it out. The sourcing script defines log() and traps the removal of $work.

provdir=usr/lib/x86_64-linux-gnu/libibverbs

# vm_prepare TAG WHAT: sets $repo and $work (a new /tmp/TAG.XXXXXX), builds the
# provider into $work and installs it under $work/overlay (the front once, a name per
# PABI, the Go part beside it, the .driver file), and copies the harness as committed
# to $work/harness. Guest programs (WHAT, for the log) go into $work/files.
vm_prepare() {
  local tag=$1 what=$2 p
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  export CACHE=${CACHE:-$repo/.cache} GOMODCACHE=${GOMODCACHE:-$repo/.cache/gomod} GOFLAGS=${GOFLAGS:--modcacherw}
  work=$(mktemp -d "/tmp/$tag.XXXXXX")
  [[ -e /usr/include/infiniband/verbs.h ]] || { log "libibverbs-dev is needed to build $what"; exit 1; }

  log "building the provider and $what"
  "$repo/scripts/build-provider.sh" "$work"
  mkdir -p "$work/files" "$work/overlay/$provdir" "$work/overlay/etc/libibverbs.d"
  install -m644 "$work/libusb4_rdma.so" "$work/overlay/$provdir/libusb4_rdma.so"
  install -m644 "$work/libusb4_rdma-go.so" "$work/overlay/$provdir/libusb4_rdma-go.so"
  for p in 34 57 59 64 65; do ln -s libusb4_rdma.so "$work/overlay/$provdir/libusb4_rdma-rdmav$p.so"; done
  printf 'driver /%s/libusb4_rdma\n' "$provdir" > "$work/overlay/etc/libibverbs.d/usb4_rdma.driver"

  # The harness as committed: others edit tests/vm while runs are under way.
  mkdir -p "$work/harness"
  git -C "$repo" archive HEAD tests/vm | tar -x -C "$work/harness"
  ln -s "$repo/build" "$work/harness/build"
  mkdir -p "$repo/build"
}

# vm_boot USERLAND GUEST_SCRIPT: one boot running GUEST_SCRIPT with $work/files and
# $work/overlay; other VM_* settings pass through the environment. A userland that
# could not be fetched (exit 77; the harness printed a SKIP line) is not a failure.
vm_boot() {
  log "booting ($1)"
  USERLAND=$1 VM_FILES="$work/files" VM_OVERLAY="$work/overlay" VM_GUEST_SCRIPT=$2 \
    VM_TIMEOUT=${VM_TIMEOUT:-600} "$work/harness/tests/vm/run.sh" || {
    local rc=$?
    ((rc == 77)) && return 0
    return $rc
  }
}
