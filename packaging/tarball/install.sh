#!/bin/sh
# install.sh: installs usb4verbs @VERSION@ (libusb4_rdma, the libibverbs provider, and
# ibvinfo) from this unpacked tarball. POSIX sh, so it also runs in slim containers.
#
#   ./install.sh [--prefix DIR] [--provider-dir DIR] [--uninstall] [--dry-run] [--force]
#
# Default: the provider goes into the system libibverbs' provider directory (found from
# libibverbs.so.1, else the distro default), ibvinfo into /usr/local/bin. With --prefix
# everything goes under DIR (provider in DIR/lib). /etc/libibverbs.d/usb4_rdma.driver
# names the provider by absolute path either way. DESTDIR is honoured for staging.
# --uninstall removes what the install with the same --prefix and DESTDIR recorded.
set -eu

VERSION=@VERSION@
PABIS="@PABIS@"
DEB_MULTIARCH=@DEB_MULTIARCH@
SRC=$(cd "$(dirname "$0")" && pwd)
DESTDIR=${DESTDIR:-}
prefix="" provdir="" mode=install dry=0 force=0

die() { echo "install.sh: $*" >&2; exit 1; }
say() { echo "install.sh: $*"; }
run() { if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi; }
usage() { sed -n '4,12s/^# \{0,1\}//p' "$0"; exit "$1"; }

while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --provider-dir) [ $# -ge 2 ] || die "--provider-dir needs a directory"; provdir=$2; shift 2 ;;
    --provider-dir=*) provdir=${1#*=}; shift ;;
    --uninstall) mode=uninstall; shift ;;
    --dry-run|-n) dry=1; shift ;;
    --force) force=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "install.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
  esac
done
for d in "$prefix" "$provdir"; do
  case $d in ''|/*) ;; *) die "directories must be absolute: $d" ;; esac
done
for d in "$prefix" "$provdir" "$DESTDIR"; do
  case $d in *[[:space:]]*) die "directories with spaces are not supported: $d" ;; esac
done

# libibverbs_dir: the directory holding the real libibverbs.so.1 (inside DESTDIR when
# staging), printed without DESTDIR; nothing when there is no libibverbs.
libibverbs_dir() {
  if [ -z "$DESTDIR" ] && command -v ldconfig >/dev/null 2>&1; then
    p=$(ldconfig -p 2>/dev/null | awk '$1 == "libibverbs.so.1" && $2 ~ /x86-64|AArch64|aarch64/ {print $NF; exit}')
    if [ -n "$p" ] && [ -e "$p" ]; then dirname "$(readlink -f "$p")"; return; fi
  fi
  for d in /usr/lib/$DEB_MULTIARCH /usr/lib64 /usr/lib /lib/$DEB_MULTIARCH /lib64 /lib; do
    if [ -e "$DESTDIR$d/libibverbs.so.1" ]; then
      real=$(readlink -f "$DESTDIR$d/libibverbs.so.1")
      real=$(dirname "$real")
      echo "${real#"$DESTDIR"}"
      return
    fi
  done
}

# distro_provider_dir: VERBS_PROVIDER_DIR as each distro family builds rdma-core.
distro_provider_dir() {
  ids=""
  for f in "$DESTDIR/etc/os-release" "$DESTDIR/usr/lib/os-release"; do
    [ -r "$f" ] || continue
    # shellcheck source=/dev/null # os-release is shell assignments by definition
    ids=$( (. "$f"; echo "${ID:-} ${ID_LIKE:-}") )
    break
  done
  case " $ids " in
    *" debian "*|*" ubuntu "*) echo "/usr/lib/$DEB_MULTIARCH/libibverbs" ;;
    *" arch "*) echo "/usr/lib/libibverbs" ;;
    *" fedora "*|*" rhel "*|*" centos "*|*" suse "*|*" opensuse "*) echo "/usr/lib64/libibverbs" ;;
    *) echo "" ;;
  esac
}

if [ -n "$prefix" ]; then
  root=$prefix
  [ -n "$provdir" ] || provdir=$prefix/lib
else
  root=/usr/local
  if [ -z "$provdir" ]; then
    lib=$(libibverbs_dir)
    if [ -n "$lib" ]; then
      provdir=$lib/libibverbs
    else
      provdir=$(distro_provider_dir)
      [ -n "$provdir" ] || die "no libibverbs.so.1 found and the distro is not known; install libibverbs (libibverbs1, rdma-core) or pass --provider-dir or --prefix"
      [ "$mode" = uninstall ] || say "warning: libibverbs.so.1 not found; using the distro default $provdir (install libibverbs1/libibverbs/rdma-core to use the provider)"
    fi
  fi
fi
bindir=$root/bin
docdir=$root/share/doc/usb4verbs
manifest=$root/share/usb4verbs/installed-files
driver=/etc/libibverbs.d/usb4_rdma.driver

if [ "$mode" = uninstall ]; then
  [ -f "$DESTDIR$manifest" ] || die "nothing recorded at $DESTDIR$manifest (use the --prefix of the install)"
  while IFS= read -r f; do
    case $f in /*) ;; *) continue ;; esac
    if [ -e "$DESTDIR$f" ] || [ -L "$DESTDIR$f" ]; then run rm -f "$DESTDIR$f"; fi
  done < "$DESTDIR$manifest"
  run rm -f "$DESTDIR$manifest"
  for d in "$root/share/usb4verbs" "$docdir"; do
    if [ -d "$DESTDIR$d" ]; then run rmdir "$DESTDIR$d" 2>/dev/null || true; fi
  done
  say "removed usb4verbs (as recorded in $manifest)"
  exit 0
fi

for f in lib/libusb4_rdma.so.$VERSION lib/libusb4_rdma-go.so bin/ibvinfo; do
  [ -f "$SRC/$f" ] || die "$SRC/$f is missing: run install.sh from the unpacked tarball"
done
# A .driver file that no install of ours recorded most likely belongs to the deb/rpm
# package; two copies of the provider would fight over it.
if [ -e "$DESTDIR$driver" ] && [ ! -f "$DESTDIR$manifest" ] && [ "$force" = 0 ]; then
  die "$DESTDIR$driver exists but this install.sh did not write it (is the usb4verbs package installed?); remove the package, or pass --force"
fi

files="$provdir/libusb4_rdma.so.$VERSION $provdir/libusb4_rdma-go.so"
for n in $PABIS; do files="$files $provdir/libusb4_rdma-rdmav$n.so"; done
files="$files $bindir/ibvinfo $driver $docdir/README.md $docdir/PACKAGING.md $docdir/PROVIDER.md"

run mkdir -p "$DESTDIR$provdir" "$DESTDIR$bindir" "$DESTDIR$docdir" "$DESTDIR/etc/libibverbs.d" \
  "$DESTDIR$(dirname "$manifest")"
run cp "$SRC/lib/libusb4_rdma.so.$VERSION" "$DESTDIR$provdir/"
run chmod 755 "$DESTDIR$provdir/libusb4_rdma.so.$VERSION"
# The Go part: the front loads it from the directory of its own file.
run cp "$SRC/lib/libusb4_rdma-go.so" "$DESTDIR$provdir/"
run chmod 755 "$DESTDIR$provdir/libusb4_rdma-go.so"
# One file, a name per libibverbs private ABI: libibverbs dlopens
# <dir>/libusb4_rdma-rdmav<PABI>.so for its own PABI only.
for n in $PABIS; do run ln -sfn "libusb4_rdma.so.$VERSION" "$DESTDIR$provdir/libusb4_rdma-rdmav$n.so"; done
run cp "$SRC/bin/ibvinfo" "$DESTDIR$bindir/ibvinfo"
run chmod 755 "$DESTDIR$bindir/ibvinfo"
for d in README.md PACKAGING.md PROVIDER.md; do run cp "$SRC/share/doc/usb4verbs/$d" "$DESTDIR$docdir/$d"; done
# An absolute name works whatever provider dir the running libibverbs was built with.
if [ "$dry" = 1 ]; then
  echo "+ echo 'driver $provdir/libusb4_rdma' > $DESTDIR$driver"
else
  echo "driver $provdir/libusb4_rdma" > "$DESTDIR$driver"
  chmod 644 "$DESTDIR$driver"
  # shellcheck disable=SC2086 # one path per word, none has spaces (checked below)
  printf '%s\n' $files > "$DESTDIR$manifest"
fi
# No ldconfig: libibverbs dlopens the provider by path, and it has no SONAME to cache.
[ "$dry" = 1 ] && { say "dry run, nothing changed"; exit 0; }
say "installed usb4verbs $VERSION: provider in $provdir, ibvinfo in $bindir, $driver"
