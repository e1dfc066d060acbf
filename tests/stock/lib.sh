# shellcheck shell=bash
# What a VM image needs for stock tools, shared by tests/stock/run.sh and scripts/demo.sh:
# the Debian packages per userland and, for PROVIDER=ours, the provider files laid over
# the image with stock librxe taken out.

# shellcheck disable=SC2034 # the STOCK_* settings are used by the scripts that source this
# The tools. The harness resolves names that trixie renamed for t64 (librdmacm1 ->
# librdmacm1t64), so one list serves every suite; ucx-utils brings libucx0 and the
# ucx_perftest/ucx_info binaries.
STOCK_DEBS="ibverbs-utils perftest rdmacm-utils ucx-utils"

# Where rdma-core looks for providers, and the PABIs it has used since v34
# (reference/rdma-core-private-abi.md: 34 for v34-v56, 57, 59, 64, 65).
STOCK_PROVDIR=usr/lib/x86_64-linux-gnu/libibverbs
STOCK_PABIS="34 57 59 64 65"

# Stock librxe and its driver file: removed for PROVIDER=ours so that only our provider
# can serve rxe0/rxe1 (globs relative to the image root, for VM_EXCLUDE_GLOB).
STOCK_EXCLUDE_LIBRXE="$STOCK_PROVDIR/librxe-rdmav*.so etc/libibverbs.d/rxe.driver"

# stock_check_provider PROVIDER: PROVIDER is one this machinery knows.
stock_check_provider() {
  case $1 in
    ours | librxe) ;;
    *) printf 'PROVIDER must be ours or librxe, not %s\n' "$1" >&2; return 1 ;;
  esac
}

# stock_overlay DIR SO: lays out, under DIR, our provider as the image should hold it:
# the front library once plus one libusb4_rdma-rdmavNN.so link per PABI, the Go part
# beside it (libusb4_rdma-go.so, taken from SO's directory), the .driver file
# naming it by absolute path (libibverbs appends -rdmavNN.so), and the opt-in setting
# that lets it claim rxe devices (cshim/README.md: /etc/usb4verbs/usb4_rdma.conf).
stock_overlay() {
  local dir=$1 so=$2 p
  # shellcheck disable=SC2016 # literal backquotes
  local gopart
  gopart=$(dirname "$so")/libusb4_rdma-go.so
  [[ -f $so ]] || { printf 'no provider at %s: run `make build` first\n' "$so" >&2; return 1; }
  # shellcheck disable=SC2016 # literal backquotes
  [[ -f $gopart ]] || { printf 'no Go part at %s: run `make build` first\n' "$gopart" >&2; return 1; }
  mkdir -p "$dir/$STOCK_PROVDIR" "$dir/etc/libibverbs.d" "$dir/etc/usb4verbs"
  install -m644 "$so" "$dir/$STOCK_PROVDIR/libusb4_rdma.so"
  install -m644 "$gopart" "$dir/$STOCK_PROVDIR/libusb4_rdma-go.so"
  for p in $STOCK_PABIS; do
    ln -sfn libusb4_rdma.so "$dir/$STOCK_PROVDIR/libusb4_rdma-rdmav$p.so"
  done
  printf 'driver /%s/libusb4_rdma\n' "$STOCK_PROVDIR" > "$dir/etc/libibverbs.d/usb4_rdma.driver"
  printf '# Written by tests/stock: our provider serves Soft-RoCE devices in the test VM.\nclaim_rxe yes\n' \
    > "$dir/etc/usb4verbs/usb4_rdma.conf"
}

# stock_snapshot DIR REPO: copies the VM harness (tests/vm, as committed when REPO is a
# git checkout, else as it is) and tests/stock/guest.sh into DIR, and prints the path of
# the harness's run.sh. bash reads a script while it runs it, and others edit tests/vm
# while a long run is under way; a copy keeps one run on one version. The copy's build/
# is REPO's, so serial logs still land in REPO/build/vm; set CACHE to REPO/.cache.
stock_snapshot() {
  local dir=$1 repo=$2
  mkdir -p "$dir/tests"
  if [[ ${STOCK_HARNESS:-head} == head ]] \
     && git -C "$repo" archive HEAD tests/vm 2>/dev/null | tar -x -C "$dir" 2>/dev/null \
     && [[ -x $dir/tests/vm/run.sh ]]; then
    printf '[stock] harness: tests/vm as committed at %s\n' "$(git -C "$repo" rev-parse --short HEAD)" >&2
  else
    rm -rf "$dir/tests/vm"
    cp -a "$repo/tests/vm" "$dir/tests/"
    printf '[stock] harness: tests/vm from the work tree\n' >&2
  fi
  install -m755 "$repo/tests/stock/guest.sh" "$dir/guest.sh"
  mkdir -p "$repo/build"
  ln -sfn "$repo/build" "$dir/build"
  printf '%s\n' "$dir/tests/vm/run.sh"
}
