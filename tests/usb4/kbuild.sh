#!/usr/bin/env bash
# tests/usb4/kbuild.sh [--subdir DIR] SRC OUT: builds the out-of-tree kernel module in SRC
# (its Kbuild directory is SRC/DIR, default SRC itself) against the Debian linux-headers
# of the VM kernel, with the compiler that kernel was built with, inside a chroot of
# Debian packages. Prints the built .ko paths (copied into OUT, with Module.symvers and
# build.log), one a line. KBUILD_EXTRA_SYMBOLS: space-separated host paths of
# Module.symvers files of modules SRC links against. On failure: the compiler's output
# on stderr and a non-zero exit. Details, cache layout, kernels tried: tests/usb4/README.md.
set -euo pipefail

main() {
USB4DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$USB4DIR/../.." && pwd)
VMDIR="$REPO/tests/vm"
# shellcheck source=/dev/null
. "$VMDIR/lib/common.sh"
# shellcheck source=/dev/null
. "$VMDIR/lib/mirror.sh"
# shellcheck source=/dev/null
. "$VMDIR/lib/fetch.sh"
# shellcheck source=/dev/null
. "$USB4DIR/lib/toolchain.sh"

local subdir="" src out
while (($#)); do
  case $1 in
    --subdir) subdir=${2:?--subdir needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,8s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
    --) shift; break ;;
    -*) die "unknown option $1" ;;
    *) break ;;
  esac
done
(($# == 2)) || { sed -n '2,8s/^# \{0,1\}//p' "$0" >&2; exit 2; }
src=$(cd "$1" && pwd) || die "no source directory $1"
[[ -d $src/$subdir ]] || die "no directory $src/$subdir"
[[ -f $src/$subdir/Makefile || -f $src/$subdir/Kbuild ]] || die "no Makefile or Kbuild in $src/$subdir"
mkdir -p "$2"; out=$(cd "$2" && pwd)

KSUITE=${KSUITE:-trixie-backports}
CACHE=${CACHE:-$REPO/.cache}
VMCACHE="$CACHE/vm"
USB4CACHE="$CACHE/usb4"
MIRROR=${MIRROR:-$(host_mirror)}
mkdir -p "$VMCACHE" "$USB4CACHE"

toolchain_prepare
kbuild_module "$src" "$subdir" "$out"
}

main "$@"
