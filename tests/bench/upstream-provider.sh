#!/usr/bin/env bash
# tests/bench/upstream-provider.sh OUTDIR: the baseline of the usb4 benchmark plan, the
# module's own C provider (libusb4_rdma-rdmav34.so) as its users build it: the rdma-core
# patches of $USB4_MODULE_SRC/hellas-main/packaging/rdma-core-patches applied at run time
# (GPL test input, never copied into this repository) to Debian 12's rdma-core source
# package, the same version as the guest's libibverbs1, built with cmake/ninja in a
# chroot of Debian 12 packages (the pattern of tests/usb4/lib/toolchain.sh). Built once,
# cached under $CACHE/bench/upstream/<key>/ (key: the patches, the source package, the
# toolchain's packages and this script). Copies the .so, build.log and patches.log into
# OUTDIR and prints the .so's path.
#
# The source package comes from the machine's Debian mirror (tests/vm/lib): its Sources
# index is read through a private apt state, so the .dsc and the tarballs apt fetches are
# verified against the signed Release file. Where the mirror serves the .dsc and the
# Debian tarball but not the upstream orig tarball (seen on this project's machines: 404),
# RDMA_CORE_GIT names a clone of upstream rdma-core and the tree of its tag
# v<upstream version> (e.g. v44.0) stands in for the orig tarball; that substitution is
# written to patches.log and to the .so's cache key, and the tree's tarball stays in the
# cache, where later runs without RDMA_CORE_GIT take it. Debian 13's rdma-core 56.1
# (whose tarballs the mirror serves, with the same private ABI 34) cannot stand in: the
# module's patch takes the 6-argument ibv_cmd_get_context from rdma-core 55 on
# (hellas-main:packaging/rdma-core-patches/0001-providers-usb4_rdma-add-USB4-soft-RDMA-provider.patch:36),
# which rdma-core gained in 57 (rdma-core:libibverbs/driver.h, v56.1 and v57.0), so its
# provider does not compile against 55 or 56 (tried: "too many arguments").
# Exit 77 with one line saying why when there is nothing to build from.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUTDIR=${1:?usage: upstream-provider.sh OUTDIR}
# shellcheck source=/dev/null
. "$REPO/tests/vm/lib/common.sh"
# shellcheck source=/dev/null
. "$REPO/tests/vm/lib/fetch.sh"
CACHE=${CACHE:-$REPO/.cache}
VMCACHE=$CACHE/vm
BCACHE=$CACHE/bench/upstream
mkdir -p "$VMCACHE" "$BCACHE" "$OUTDIR"
if [[ -z ${MIRROR:-} ]]; then MIRROR=$(host_mirror) || exit 1; fi

SRC=${USB4_MODULE_SRC:-$REPO/../shared/usb4-module}
PATCHDIR=$SRC/hellas-main/packaging/rdma-core-patches
if ! compgen -G "$PATCHDIR/*.patch" >/dev/null; then
  echo "upstream-provider: no rdma-core patches under $PATCHDIR (USB4_MODULE_SRC)" >&2
  exit 77
fi

# What builds it: Debian 12's compiler and rdma-core's build dependencies (cmake,
# ninja, python3 for its generators, libnl, libudev), plus patch for the quilt series.
UP_PKGS="gcc cmake ninja-build pkg-config python3 libnl-3-dev libnl-route-3-dev libudev-dev
  libc6-dev binutils patch coreutils dash bash sed grep gawk findutils diffutils tar gzip xz-utils"
UP_DENY=" debconf cdebconf perl-base perl init-system-helpers adduser lsb-base usrmerge
  usr-is-merged libpam-runtime libpam-modules libpam-modules-bin passwd login tzdata
  systemd systemd-sysv udev sensible-utils opensysusers dpkg libc-bin media-types "

lockfd=
exec {lockfd}>"$VMCACHE/.lock"
flock "$lockfd"
apt_use bookworm
read -r srcpkg srcver < <(apt-cache "${APTOPTS[@]}" show --no-all-versions libibverbs1 2>/dev/null \
  | awk '/^Source:/{s=$2} /^Version:/{v=$2} END{print (s == "" ? "rdma-core" : s), v}')
[[ -n $srcver ]] || die "upstream-provider: no libibverbs1 in bookworm"
# shellcheck disable=SC2086
tcpkgs=$(DENY_PKGS=$UP_DENY VM_DENY_DEBS="" apt_closure $UP_PKGS) || exit 1
# shellcheck disable=SC2086
tcdebs=$(apt_fetch "$VMCACHE/debs/bookworm" $tcpkgs) || exit 1

# The source package, through a private deb-src state of the same suites.
sd=$VMCACHE/apt/bookworm-src
mkdir -p "$sd/lists/partial" "$sd/cache/archives/partial"
printf 'deb-src %s bookworm main\ndeb-src %s bookworm-updates main\ndeb-src %s/debian-security bookworm-security main\n' \
  "$MIRROR" "$MIRROR" "${MIRROR%/debian}" > "$sd/sources.list"
SRCOPTS=(-o Dir::Etc::sourcelist="$sd/sources.list" -o Dir::Etc::sourceparts=-
         -o Dir::State::Lists="$sd/lists" -o Dir::Cache="$sd/cache" -o Dir::State::status=/dev/null
         -o Dir::Cache::pkgcache="$sd/cache/pkgcache.bin" -o Dir::Cache::srcpkgcache="$sd/cache/srcpkgcache.bin"
         -o APT::Sandbox::User=root -o Debug::NoLocking=1 -o Acquire::Retries=3)
if [[ ! -e $sd/updated || -n $(find "$sd/updated" -mmin +720 2>/dev/null) ]]; then
  log "apt-get update (bookworm sources)"
  apt-get "${SRCOPTS[@]}" -qq update >&2 && touch "$sd/updated" || [[ -e $sd/updated ]] \
    || die "apt-get update of the bookworm sources failed"
fi
srcdir=$BCACHE/src/$srcpkg-$srcver
mkdir -p "$srcdir"
dsc=$srcdir/${srcpkg}_${srcver#*:}.dsc
if [[ ! -s $dsc ]]; then
  log "apt-get source --download-only $srcpkg=$srcver"
  (cd "$srcdir" && apt-get "${SRCOPTS[@]}" -qq source --download-only "$srcpkg=$srcver" >&2) || true
fi
flock -u "$lockfd"
[[ -s $dsc ]] || die "upstream-provider: the mirror gave no $srcpkg $srcver .dsc"
upver=${srcver#*:}; upver=${upver%-*}
orig=$(awk '/^Files:/{f=1; next} /^[^ ]/{f=0} f && $3 ~ /orig\.tar/ {print $3}' "$dsc")
debtar=$(awk '/^Files:/{f=1; next} /^[^ ]/{f=0} f && $3 ~ /debian\.tar/ {print $3}' "$dsc")
[[ -s $srcdir/$debtar ]] || die "upstream-provider: $debtar missing after apt-get source"
origdesc="$orig (Debian's, checked by apt)"
cached=$(compgen -G "$srcdir/$srcpkg-$upver.git-*.tar.gz" | head -n1 || true)
if [[ ! -s $srcdir/$orig && -z ${RDMA_CORE_GIT:-} && -n $cached ]]; then
  # Made from RDMA_CORE_GIT by an earlier run on this cache.
  orig=${cached##*/}
  origdesc="$orig (an upstream tag's tree cached by an earlier run; the mirror has no $srcpkg ${upver} orig tarball)"
elif [[ ! -s $srcdir/$orig ]]; then
  gitdir=${RDMA_CORE_GIT:-}
  if [[ -z $gitdir ]] || ! git -C "$gitdir" rev-parse -q --verify "v$upver^{tree}" >/dev/null 2>&1; then
    echo "upstream-provider: the mirror does not serve $orig, and RDMA_CORE_GIT (a clone of upstream rdma-core with tag v$upver) is ${gitdir:-not set}" >&2
    exit 77
  fi
  orig=$srcpkg-$upver.git-$(git -C "$gitdir" rev-parse --short=12 "v$upver^{tree}").tar.gz
  [[ -s $srcdir/$orig ]] || git -C "$gitdir" archive --format=tar.gz --prefix="$srcpkg-$upver/" "v$upver" > "$srcdir/$orig"
  origdesc="$orig (tag v$upver of RDMA_CORE_GIT; the mirror has no $srcpkg ${upver} orig tarball)"
fi

key=$( { cat "$PATCHDIR"/*.patch | sha256sum; sha256sum < "$dsc"; sha256sum < "$srcdir/$orig"
         printf '%s\n' "$tcdebs" | sed 's#.*/##' | sort; sha256sum < "$0"; } | sha256sum | cut -c1-16)
out=$BCACHE/$srcpkg-$srcver-$key
exec {lockfd}>"$out.lock"
flock "$lockfd"
if [[ ! -e $out/.done ]]; then
  TCROOT=$BCACHE/toolchain-$(printf '%s\n' "$tcdebs" | sed 's#.*/##' | sort | sha256sum | cut -c1-12)
  if [[ ! -e $TCROOT/.done ]]; then
    log "upstream-provider: staging the build chroot ($(wc -l <<<"$tcdebs") packages)"
    stage_build_root "$TCROOT" "$tcdebs"
    [[ -e $TCROOT/usr/bin/cc ]] || ln -s gcc "$TCROOT/usr/bin/cc"
    touch "$TCROOT/.done"
  fi
  work=$out.work.$$
  rm -rf "$work"; mkdir -p "$work/patches/module"
  tar -C "$work" -xzf "$srcdir/$orig"
  mv "$work/$srcpkg-$upver" "$work/src"
  tar -C "$work/src" -xJf "$srcdir/$debtar"
  cp "$PATCHDIR"/*.patch "$work/patches/module/"
  log "upstream-provider: building $srcpkg $srcver + $(ls "$PATCHDIR"/*.patch | wc -l) module patches"
  # Debian's own series first, then the module's patches (made against rdma-core v62+: on
  # 44 their context lines differ, hence the fuzz; patches.log keeps what patch said).
  # Flags: what dpkg-buildflags gives a bookworm package build.
  cat > "$work/build.sh" <<'EOS'
set -e
cd /build/src
if [ -f debian/patches/series ]; then
  grep -v '^#' debian/patches/series | while read -r p _; do
    [ -n "$p" ] || continue
    echo "debian/patches/$p:"; patch -p1 -N -s < "debian/patches/$p"
  done
fi
for p in /build/patches/module/*.patch; do
  echo "${p##*/}:"; patch -p1 -N -F3 < "$p"
done
mkdir -p /build/b && cd /build/b
export CFLAGS="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security" \
  CPPFLAGS="-Wdate-time -D_FORTIFY_SOURCE=2" LDFLAGS="-Wl,-z,relro -Wl,-z,now"
cmake -GNinja -DCMAKE_BUILD_TYPE=None -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 \
  -DCMAKE_C_FLAGS="$CFLAGS $CPPFLAGS" /build/src
ninja usb4_rdma-rdmav34
EOS
  rc=0
  unshare --mount --propagation private -- /bin/sh -c '
    set -e
    root=$1 work=$2
    mkdir -p "$work/tmp"
    mount --bind "$work" "$root/build"
    mount --bind "$work/tmp" "$root/tmp"
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/usr/sbin HOME=/tmp LC_ALL=C.UTF-8 TMPDIR=/tmp sh /build/build.sh
  ' up "$TCROOT" "$work" > "$work/build.log" 2>&1 || rc=$?
  so=$(find "$work/b/lib" -name 'libusb4_rdma-rdmav*.so' 2>/dev/null | head -n1)
  if ((rc != 0)) || [[ -z $so ]]; then
    tail -n 40 "$work/build.log" >&2
    cp "$work/build.log" "$OUTDIR/build.log"
    rm -rf "$work"
    die "upstream-provider: the build failed (exit $rc); log: $OUTDIR/build.log"
  fi
  rm -rf "$out"; mkdir -p "$out"
  cp "$so" "$out/"
  cp "$work/build.log" "$out/"
  {
    echo "source: $srcpkg $srcver, orig $origdesc, ${debtar}"
    echo "patches: $PATCHDIR ($(cd "$PATCHDIR" && sha256sum ./*.patch | cut -c1-16 | tr '\n' ' '))"
    grep -E '\.patch:$|^patching|Hunk|FAILED' "$work/build.log" || true
  } > "$out/patches.log"
  rm -rf "$work"
  touch "$out/.done"
fi
flock -u "$lockfd"
cp "$out"/libusb4_rdma-rdmav*.so "$out/build.log" "$out/patches.log" "$OUTDIR/"
ls "$OUTDIR"/libusb4_rdma-rdmav*.so
