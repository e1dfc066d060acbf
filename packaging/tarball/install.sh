#!/bin/sh
# install.sh: installs usb4verbs @VERSION@ (libusb4_rdma, the libibverbs provider, and
# ibvinfo) from this unpacked tarball. POSIX sh, so it also runs in slim containers.
#
#   ./install.sh [--prefix DIR] [--provider-dir DIR] [--uninstall] [--dry-run] [--force] [--replace]
#
# Default: the provider goes into the system libibverbs' provider directory (found from
# libibverbs.so.1, else the distro default), ibvinfo and usb4verbs-container into
# /usr/local/bin. With --prefix everything goes under DIR (provider in DIR/lib).
# /etc/libibverbs.d/usb4_rdma.driver names the provider by absolute path either way.
# DESTDIR is honoured for staging. Provider files a package owns (the module's
# usb4-rdma-provider, or our own deb/rpm) stop the install with the command that removes
# that package; --replace runs that command first. --uninstall removes what the install
# with the same --prefix and DESTDIR recorded.
set -eu

VERSION=@VERSION@
PABIS="@PABIS@"
DEB_MULTIARCH=@DEB_MULTIARCH@
SRC=$(cd "$(dirname "$0")" && pwd)
DESTDIR=${DESTDIR:-}
prefix="" provdir="" mode=install dry=0 force=0 replace=0

die() { echo "install.sh: $*" >&2; exit 1; }
say() { echo "install.sh: $*"; }
run() { if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi; }
usage() { sed -n '4,15s/^# \{0,1\}//p' "$0"; exit "$1"; }

while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --provider-dir) [ $# -ge 2 ] || die "--provider-dir needs a directory"; provdir=$2; shift 2 ;;
    --provider-dir=*) provdir=${1#*=}; shift ;;
    --uninstall) mode=uninstall; shift ;;
    --dry-run|-n) dry=1; shift ;;
    --force) force=1; shift ;;
    --replace) replace=1; shift ;;
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

for f in lib/libusb4_rdma.so.$VERSION lib/libusb4_rdma-go.so bin/ibvinfo bin/usb4verbs-container; do
  [ -f "$SRC/$f" ] || die "$SRC/$f is missing: run install.sh from the unpacked tarball"
done
# owner FILE: the package that owns FILE and the command that removes it, as
# "<package> <command...>"; nothing when no package manager claims it (a path under
# DESTDIR is in no package database, so staging finds nothing).
owner() {
  if command -v dpkg-query >/dev/null 2>&1 && p=$(dpkg-query -S "$1" 2>/dev/null); then
    p=${p%%:*}; p=${p%%,*}; echo "$p dpkg --remove $p"; return
  fi
  if command -v rpm >/dev/null 2>&1 && p=$(rpm -qf --qf '%{NAME}\n' "$1" 2>/dev/null); then
    echo "$p rpm -e $p"; return
  fi
  if command -v pacman >/dev/null 2>&1 && p=$(pacman -Qqo "$1" 2>/dev/null); then
    echo "$p pacman -R --noconfirm $p"; return
  fi
}
# Provider files a package owns: the module's usb4-rdma-provider or our own package.
# Two providers would fight over the .driver file, and the package manager would later
# delete or overwrite what this script installed.
owned="" driver_owned=0
for f in "$DESTDIR$driver" "$DESTDIR$provdir"/libusb4_rdma-rdmav*.so; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  o=$(owner "$f")
  [ -n "$o" ] || continue
  [ "$f" = "$DESTDIR$driver" ] && driver_owned=1
  case " $owned " in *" ${o%% *} "*) continue ;; esac
  owned="$owned ${o%% *}"
  cmd=${o#* }
  [ "$replace" = 1 ] || die "$f belongs to package ${o%% *}; remove it first ($cmd), or pass --replace to have install.sh run that"
  say "--replace: $f belongs to package ${o%% *}: $cmd"
  # shellcheck disable=SC2086 # cmd is a command line of plain words
  run $cmd || die "'$cmd' failed; remove ${o%% *} by hand, then run install.sh again"
done
# A .driver file that no install of ours recorded and no package owns was written by
# hand or by another copy script; two copies of the provider would fight over it.
if [ -e "$DESTDIR$driver" ] && [ ! -f "$DESTDIR$manifest" ] && [ "$force" = 0 ] && [ "$driver_owned" = 0 ]; then
  die "$DESTDIR$driver exists but this install.sh did not write it (is another usb4_rdma provider installed?); remove it, or pass --force"
fi

files="$provdir/libusb4_rdma-go.so"
for n in $PABIS; do files="$files $provdir/libusb4_rdma-rdmav$n.so"; done
files="$files $bindir/ibvinfo $bindir/usb4verbs-container $driver $docdir/README.md $docdir/PACKAGING.md $docdir/PROVIDER.md"

run mkdir -p "$DESTDIR$provdir" "$DESTDIR$bindir" "$DESTDIR$docdir" "$DESTDIR/etc/libibverbs.d" \
  "$DESTDIR$(dirname "$manifest")"
# The Go part: the front loads it from the directory of its own file.
run cp "$SRC/lib/libusb4_rdma-go.so" "$DESTDIR$provdir/"
run chmod 755 "$DESTDIR$provdir/libusb4_rdma-go.so"
# The front under each libibverbs private ABI's name (libibverbs dlopens
# <dir>/libusb4_rdma-rdmav<PABI>.so for its own PABI only), as files, the way the
# packages install them: a copy of one name into a container is the whole front.
for n in $PABIS; do
  run rm -f "$DESTDIR$provdir/libusb4_rdma-rdmav$n.so"
  run cp "$SRC/lib/libusb4_rdma.so.$VERSION" "$DESTDIR$provdir/libusb4_rdma-rdmav$n.so"
  run chmod 755 "$DESTDIR$provdir/libusb4_rdma-rdmav$n.so"
done
for b in ibvinfo usb4verbs-container; do
  run cp "$SRC/bin/$b" "$DESTDIR$bindir/$b"
  run chmod 755 "$DESTDIR$bindir/$b"
done
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
