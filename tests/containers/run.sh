#!/usr/bin/env bash
# tests/containers/run.sh [BASE...]: our .deb in container images run by a real engine
# (rootful podman from Debian 12) inside one tests/vm boot. Each BASE (default: debian12
# ubuntu2204 ubuntu2404) is a rootfs assembled from that release's packages
# (tests/containers/lib.sh), `podman import`ed, and built with
# examples/containers/Containerfile.<BASE>; the stock tools then run in containers with
# the flags examples/containers/README.md documents. Result lines
# "--- PASS|FAIL|SKIP: ctr/<base>/<case>" go to stdout and build/containers/<mode>.out.
# USB4_TREE=<tree>: the same on the usb4 bed (tests/usb4/README.md) instead of rxe.
# --all-modes (make test): rxe with every BASE, then the usb4 bed on hellas-main
# (CTR_USB4_TREES) with ubuntu2204, the base of the PyTorch and vLLM images
# (CTR_USB4_BASES), or a SKIP line per tree when USB4_MODULE_SRC is absent.
# --one-boot (make test's CI tier): the BASEs in one boot, on the usb4 bed's first
# CTR_USB4_TREES tree when the module source is there, else on rxe. Run `make package`
# first.
set -euo pipefail

main() {
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VMDIR=$REPO/tests/vm
for f in common fetch userland; do
  # shellcheck source=/dev/null
  . "$VMDIR/lib/$f.sh"
done
# shellcheck source=/dev/null
. "$REPO/tests/containers/lib.sh"
CACHE=${CACHE:-$REPO/.cache}
VMCACHE=$CACHE/vm
if [[ -z ${MIRROR:-} ]]; then MIRROR=$(host_mirror) || exit 1; fi
export MIRROR CACHE

local all_modes=0 one_boot=0
[[ ${1:-} == --all-modes ]] && { all_modes=1; shift; }
[[ ${1:-} == --one-boot ]] && { one_boot=1; shift; }
bases=("$@")
((${#bases[@]})) || bases=(debian12 ubuntu2204 ubuntu2404)
PKG_OUT=${PKG_OUT:-$REPO/build/pkg}
debs=("$PKG_OUT"/usb4verbs_*_amd64.deb)
[[ -f ${debs[0]} ]] || die "no usb4verbs_*_amd64.deb in $PKG_OUT; run 'make package'"
((${#debs[@]} == 1)) || die "more than one .deb in $PKG_OUT: ${debs[*]##*/}"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/files/pkg" "$WORK/files/containers" "$WORK/files/rootfs" "$WORK/files/stock"
cp "${debs[0]}" "$WORK/files/pkg/"
# The switch from the module's own provider (guest.sh stock_cases): our tarball for the
# container host, and the module's usb4-rdma-provider .deb, holding its C provider where
# the usb4 stage built one (tests/bench/upstream-provider.sh), else a stand-in file.
tgz=("$PKG_OUT"/usb4verbs-*-linux-amd64.tar.gz)
[[ -f ${tgz[0]} ]] || die "no usb4verbs-*-linux-amd64.tar.gz in $PKG_OUT; run 'make package'"
cp "${tgz[0]}" "$WORK/files/pkg/"
upstream_so=$REPO/build/usb4/upstream/libusb4_rdma-rdmav34.so
[[ -f $upstream_so ]] || upstream_so=""
NFPM=${NFPM:-$CACHE/bin/nfpm} "$REPO/packaging/testdata/module-provider-pkg.sh" deb "$WORK/files/pkg" ${upstream_so:+"$upstream_so"} \
  > /dev/null 2> "$WORK/module-pkg.log" || { cat "$WORK/module-pkg.log" >&2; die "the module's provider package could not be built"; }
if [[ -n $upstream_so ]]; then what="the module's C provider, tests/bench/upstream-provider.sh"; else what="a stand-in file"; fi
echo "$what" > "$WORK/files/stock/module-so"
local b suite root rc=0
have=()
for b in "${bases[@]}"; do
  case $b in
    debian12) suite=bookworm ;; ubuntu2204) suite=jammy ;; ubuntu2404) suite=noble ;;
    *) die "unknown base $b (debian12, ubuntu2204, ubuntu2404)" ;;
  esac
  cp "$REPO/examples/containers/Containerfile.$b" "$WORK/files/containers/"
  # ctr_rootfs prints the path on stdout, so its SKIP line (status 77: the suite's
  # archive is unreachable) would land in $root; the line is printed here instead.
  root=$(ctr_rootfs "$suite") || rc=$?
  if ((rc == 77)); then
    rc=0
    result SKIP "ctr/$b" "no $suite rootfs: its archive is not reachable from this machine"
    continue
  fi
  ((rc == 0)) || die "rootfs for $b failed"
  cp -a "$root" "$WORK/files/rootfs/$b"
  rm -f "$WORK/files/rootfs/$b"/{.done,.debs}
  have+=("$b")
done
((${#have[@]})) || { result SKIP ctr/all "no base rootfs could be assembled"; exit 0; }
printf '%s\n' "${have[*]}" > "$WORK/files/bases"
# Stock images (CTR_STOCK_BASES): the base rootfs alone, stock libibverbs1 and
# ibverbs-utils and nothing of ours; our package or usb4verbs-container goes in at run time.
for b in ${CTR_STOCK_BASES-debian12 ubuntu2404}; do
  case $b in
    debian12) suite=bookworm ;; ubuntu2204) suite=jammy ;; ubuntu2404) suite=noble ;;
    *) die "unknown stock base $b" ;;
  esac
  rc=0
  root=$(ctr_rootfs "$suite") || rc=$?
  if ((rc == 77)); then rc=0; result SKIP "ctr/stock-$b" "no $suite rootfs: its archive is not reachable"; continue; fi
  ((rc == 0)) || die "rootfs for stock $b failed"
  cp -a "$root" "$WORK/files/stock/$b"
  rm -f "$WORK/files/stock/$b"/{.done,.debs}
done

mkdir -p "$REPO/build/containers"
local tree src
# shellcheck source=/dev/null
. "$REPO/tests/usb4/lib/trees.sh"
src=$(usb4_module_src "$REPO")
if ((one_boot)); then
  # CI's tier: the switch on the first stock base, usb4verbs-container on the other
  # (both everywhere with CTR_STOCK_SPLIT=0; every other mode runs both on every base).
  [[ ${CTR_STOCK_SPLIT:-1} == 1 ]] && touch "$WORK/files/stock/split"
  tree=""
  [[ -n $src && -d $src ]] && read -r tree _ <<<"${CTR_USB4_TREES:-hellas-main}"
  USB4_MODULE_SRC=$src boot "$tree" || rc=$?
  exit $rc
fi
if ((!all_modes)); then
  boot "${USB4_TREE:-}" || rc=$?
  exit $rc
fi
boot "" || rc=1
for tree in ${CTR_USB4_TREES:-hellas-main}; do
  if [[ -z $src || ! -d $src ]]; then
    result SKIP "ctr/usb4-$tree" "USB4_MODULE_SRC not set and ../shared/usb4-module absent: no usb4 bed"
    continue
  fi
  # Only CTR_USB4_BASES go into this boot (the others' trees wait outside the image).
  mkdir -p "$WORK/spare"
  for b in "${have[@]}"; do
    [[ " ${CTR_USB4_BASES:-ubuntu2204} " == *" $b "* ]] || mv "$WORK/files/rootfs/$b" "$WORK/spare/"
  done
  (cd "$WORK/files/rootfs" && ls) | paste -sd' ' > "$WORK/files/bases"
  if [[ -s $WORK/files/bases ]] && [[ -n $(cat "$WORK/files/bases") ]]; then
    USB4_MODULE_SRC=$src boot "$tree" || rc=1
  else
    result SKIP "ctr/usb4-$tree" "none of CTR_USB4_BASES (${CTR_USB4_BASES:-ubuntu2204}) could be assembled"
  fi
done
exit $rc
}

# boot TREE: one VM with every image; TREE empty: rxe, else the usb4 bed on TREE.
boot() {
  local mode=rxe
  [[ -n $1 ]] && mode=usb4-$1
  log "containers: ${have[*]} ($mode), ${debs[0]##*/}"
  # The VM's own userland is the container host: Debian 12 with podman, crun, conmon;
  # runc (the other OCI runtime podman accepts) is left out. overlay: the storage driver;
  # veth: the own-netns cases (the usb4 bed loads no veth of its own).
  # A boot whose guest kernel hung or died (soft lockup: seen once under TCG, with podman
  # and timeout stuck in the kernel after an image build, no call trace; a panic after the
  # Ubuntu image's build on the bed, once in CI, serial log not kept) is booted once more;
  # its output is kept as $mode.out.hung, and a SKIP line carries the kernel's first words
  # into the results, so a death that repeats in one boot of two still shows.
  local out="$REPO/build/containers/$mode.out" try r
  rm -f "$out.hung"
  for try in 1 2; do
    r=0
    USB4_TREE=$1 USERLAND=bookworm VM_TIMEOUT=${VM_TIMEOUT:-1800} VM_MEM=${VM_MEM:-4096} \
      VM_EXTRA_KMODS="overlay veth" \
      VM_EXTRA_DEBS="podman crun conmon golang-github-containers-common${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
      VM_DENY_DEBS="runc" VM_FILES="$WORK/files" VM_GUEST_SCRIPT="$REPO/tests/containers/guest.sh" \
      "$VMDIR/run.sh" > "$out" || r=$?
    local died
    died=$(grep -m1 -E 'soft lockup|Kernel panic|Oops: |BUG: |guest kernel' "$out" | cut -c1-160) || true
    if ((try == 1 && r != 0 && r != 77)) && [[ -n $died ]]; then
      log "containers ($mode): the guest kernel hung or died ($died), booting once more"
      result SKIP "ctr/$mode/first_boot" "the guest kernel hung or died: $died; booted once more (build/containers/$mode.out.hung)"
      mv "$out" "$out.hung"
      continue
    fi
    break
  done
  cat "$out"
  [[ ! -e $out.hung ]] || echo "# containers ($mode): the first boot's guest kernel hung or died (build/containers/$mode.out.hung); these are the second boot's results"
  ((r == 0 || r == 77))
}

main "$@"
