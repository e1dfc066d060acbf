# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that kbuild.sh and tests/vm read
# The module build toolchain: the Debian linux-headers/linux-kbuild of the VM kernel and
# the gcc that kernel was built with (CONFIG_CC_VERSION_TEXT), plus make, binutils,
# libc6-dev, pahole and a shell, all extracted from Debian packages into one tree that
# builds run in with chroot. Needs tests/vm/lib/{common,fetch}.sh sourced and KSUITE,
# CACHE, VMCACHE, USB4CACHE, MIRROR set.

# What kbuild runs besides the compiler: shell and text tools used by the kernel's
# Makefiles and scripts, and xz/zstd for CONFIG_MODULE_COMPRESS (modules_install only).
TC_TOOLS="make libc6-dev binutils coreutils dash bash sed grep gawk findutils diffutils
  kmod xz-utils zstd"

# Left out of the toolchain's dependency closure: package plumbing a chroot that only runs
# make never executes (the closure would otherwise pull in perl, systemd, PAM).
TC_DENY=" debconf cdebconf perl-base perl init-system-helpers adduser lsb-base usrmerge
  usr-is-merged libpam-runtime libpam-modules libpam-modules-bin passwd login tzdata
  systemd systemd-sysv udev python3 python3-minimal sensible-utils opensysusers
  systemd-standalone-sysusers systemd-sysusers dpkg "

# kernel_package: the linux-image package of the VM kernel, resolved as
# tests/vm/lib/kernel.sh does (KPKG, else what linux-image-amd64 of KSUITE depends on).
kernel_package() {
  local kpkg=${KPKG:-}
  if [[ -z $kpkg ]]; then
    kpkg=$(apt-cache "${APTOPTS[@]}" depends linux-image-amd64 2>/dev/null \
           | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [[ -n $kpkg ]] || die "kbuild: cannot resolve linux-image-amd64 in $KSUITE"
  fi
  printf '%s\n' "$kpkg"
}

# toolchain_prepare: sets KVER, TCROOT (the chroot), KHDR (the headers directory inside
# it), TCDESC (kernel, compiler). Staged once per kernel and compiler under
# $USB4CACHE/toolchain/, under the VM cache's lock (the apt states are shared with
# tests/vm/run.sh).
toolchain_prepare() {
  local lockfd
  exec {lockfd}>"$VMCACHE/.lock"
  flock "$lockfd"
  apt_use "$KSUITE"
  local kpkg hdrdebs kbuilddeps p
  kpkg=$(kernel_package)
  KVER=${kpkg#linux-image-}
  # The kernel-specific packages come from KSUITE; linux-headers-X-amd64 also depends
  # on linux-base (udev/perl plumbing, not needed to build) and a gcc virtual package
  # that the base suite resolves.
  hdrdebs=$(apt_fetch "$VMCACHE/debs/$KSUITE" "linux-headers-$KVER" \
    "linux-headers-${KVER%-amd64}-common" "linux-kbuild-${KVER%-amd64}") || exit 1
  local gccmajor cctext
  cctext=$(dpkg-deb --fsys-tarfile "$(head -n1 <<<"$hdrdebs")" \
    | tar -xOf - "./usr/src/linux-headers-$KVER/.config" | sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p')
  [[ $cctext =~ gcc-([0-9]+)\  ]] || [[ $cctext =~ \(Debian\ ([0-9]+)\. ]] \
    || die "kbuild: cannot tell the compiler of $KVER from CONFIG_CC_VERSION_TEXT '$cctext'"
  gccmajor=${BASH_REMATCH[1]}
  kbuilddeps=$(dpkg-deb -f "$(grep /linux-kbuild- <<<"$hdrdebs")" Depends | sed 's/([^)]*)//g; s/|[^,]*//g; s/,/ /g')

  local base=${KSUITE%-backports} pkgs debs key
  apt_use "$base"
  # shellcheck disable=SC2086 # word splitting of the package lists is intended
  pkgs=$(DENY_PKGS=$TC_DENY VM_DENY_DEBS="" apt_closure "gcc-$gccmajor" $TC_TOOLS $kbuilddeps) || exit 1
  # shellcheck disable=SC2086
  debs=$(apt_fetch "$VMCACHE/debs/$base" $pkgs) || exit 1
  debs+=$'\n'$hdrdebs
  key=$(printf '%s\n' "$debs" | sed 's#.*/##' | sort | sha256sum | cut -c1-12)
  TCROOT="$USB4CACHE/toolchain/$KVER-gcc$gccmajor-$key"
  if [[ ! -e $TCROOT/.done ]]; then
    log "kbuild: staging the toolchain for $KVER (gcc-$gccmajor, $(wc -l <<<"$debs") packages)"
    stage_build_root "$TCROOT" "$debs"
    # gcc for tools that call it by its plain name (Debian's .kernelvariables
    # names x86_64-linux-gnu-gcc-N itself).
    [[ -e $TCROOT/usr/bin/gcc ]] || ln -s "gcc-$gccmajor" "$TCROOT/usr/bin/gcc"
    printf '%s\n' "$debs" | sed 's#.*/##' | sort > "$TCROOT/.debs"
    printf '%s\n' "$cctext" > "$TCROOT/.cc-version-text"
    touch "$TCROOT/.done"
  fi
  flock -u "$lockfd"
  KHDR="/usr/src/linux-headers-$KVER"
  TCDESC="$KVER, gcc-$gccmajor ($cctext)"
}

# tc_run WORKDIR CMD...: runs CMD in the toolchain chroot with WORKDIR at /build, in a
# private mount namespace (the binds vanish with it, and concurrent builds each see
# their own /build and /tmp).
tc_run() {
  local work=$1; shift
  mkdir -p "$work/tmp"
  unshare --mount --propagation private -- /bin/sh -c '
    set -e
    root=$1 work=$2; shift 2
    mount --bind "$work" "$root/build"
    mount --bind "$work/tmp" "$root/tmp"
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/usr/sbin HOME=/tmp LC_ALL=C.UTF-8 TMPDIR=/tmp "$@"
  ' tc_run "$TCROOT" "$work" "$@"
}

# srctar DIR: the source tree as a reproducible tar on stdout, build products left out
# (a tree someone built in place hashes the same as a clean one).
srctar() {
  tar -C "$1" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    --exclude=.git --exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
    --exclude='.*.cmd' --exclude=Module.symvers --exclude=modules.order --exclude='.tmp_*' \
    --exclude='*.a' -cf - .
}

# kbuild_module SRC SUBDIR OUT: builds SRC/SUBDIR with M=, cached under
# $USB4CACHE/ko/<hash of source, extra symbols, glue, toolchain>; copies the .ko files,
# Module.symvers and build.log into OUT and prints the .ko paths. KBUILD_GLUE:
# space-separated OBJ=HEADER pairs, a header of ours forced in front of one object of
# the module (make CFLAGS_OBJ=-include HEADER), for a tree that needs glue on this
# kernel (trees.sh usb4_tree_glue). KBUILD_MAKEVARS: space-separated NAME=VALUE make
# variables of the tree's own Makefile (trees.sh usb4_tree_make_vars, e.g. pleite-main's
# tbv_gpu_direct=1); part of the key. KDIR is always the headers directory: the trees'
# Makefiles read it (`KDIR ?= /lib/modules/$(KVER)/build`, which in the chroot is the
# host's kernel) and pleite's probe the headers under it for the kernel's API; KDIR
# follows from the toolchain, which the key has.
kbuild_module() {
  local src=$1 subdir=$2 out=$3 key f i=0 extra=() glue=() symvers gluevars=() makevars=()
  read -ra extra <<<"${KBUILD_EXTRA_SYMBOLS:-}"
  read -ra glue <<<"${KBUILD_GLUE:-}"
  read -ra makevars <<<"${KBUILD_MAKEVARS:-}"
  for f in "${makevars[@]}"; do [[ $f =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]] || die "KBUILD_MAKEVARS: $f is not NAME=VALUE"; done
  for f in "${extra[@]}"; do [[ -f $f ]] || die "KBUILD_EXTRA_SYMBOLS: no file $f"; done
  for f in "${glue[@]}"; do [[ $f == *.o=* && -f ${f#*=} ]] || die "KBUILD_GLUE: $f is not OBJ.o=<existing header>"; done
  key=$( { srctar "$src" | sha256sum; printf '%s\n' "$subdir" "$TCROOT"
           for f in "${extra[@]}"; do sha256sum < "$f"; done
           for f in "${glue[@]}"; do printf 'glue %s ' "${f%%=*}=${f##*/}"; sha256sum < "${f#*=}"; done
           for f in "${makevars[@]}"; do printf 'make %s\n' "$f"; done; } | sha256sum | cut -c1-16)
  local ko lockfd
  ko="$USB4CACHE/ko/$(basename "$src")-$key"
  mkdir -p "$USB4CACHE/ko"
  exec {lockfd}>"$ko.lock"
  flock "$lockfd"  # one build per key; a second caller waits and takes the cached one
  if [[ ! -e $ko/.done ]]; then
    local work="$ko.work.$$"
    rm -rf "$work"; mkdir -p "$work/src" "$work/extra"
    srctar "$src" | tar -C "$work/src" -xf -
    symvers=""
    for f in "${extra[@]}"; do
      cp "$f" "$work/extra/$i.symvers"; symvers+=" /build/extra/$i.symvers"; i=$((i + 1))
    done
    for f in "${glue[@]}"; do
      mkdir -p "$work/glue"; cp "${f#*=}" "$work/glue/"
      gluevars+=("CFLAGS_${f%%=*}=-include /build/glue/${f##*/}")
    done
    log "kbuild: building $src${subdir:+/$subdir} for $TCDESC${gluevars[*]:+ (${gluevars[*]})}${makevars[*]:+ with ${makevars[*]}}"
    local rc=0
    tc_run "$work" make -C "$KHDR" M="/build/src${subdir:+/$subdir}" KDIR="$KHDR" \
      -j"${KBUILD_JOBS:-2}" ${symvers:+KBUILD_EXTRA_SYMBOLS="${symvers# }"} \
      "${gluevars[@]}" "${makevars[@]}" modules \
      > "$work/build.log" 2>&1 || rc=$?
    if ((rc != 0)); then
      cat "$work/build.log" >&2
      mkdir -p "$out"; cp "$work/build.log" "$out/build.log"
      rm -rf "$work"
      die "kbuild: make modules failed (exit $rc) for $src${subdir:+/$subdir} against $KVER; log: $out/build.log"
    fi
    rm -rf "$ko"; mkdir -p "$ko"
    (cd "$work/src/$subdir" && find . -name '*.ko' -printf '%P\n') > "$work/kos"
    [[ -s $work/kos ]] || { cat "$work/build.log" >&2; rm -rf "$work"; die "kbuild: make succeeded but built no .ko"; }
    while read -r f; do cp "$work/src/$subdir/$f" "$ko/"; done < "$work/kos"
    cp "$work/src/$subdir/Module.symvers" "$ko/" 2>/dev/null || : > "$ko/Module.symvers"
    cp "$work/build.log" "$ko/"
    printf '%s\n' "$TCDESC" > "$ko/toolchain"
    rm -rf "$work"
    touch "$ko/.done"
  fi
  flock -u "$lockfd"
  mkdir -p "$out"
  cp "$ko"/*.ko "$ko/Module.symvers" "$ko/build.log" "$out/"
  for f in "$ko"/*.ko; do printf '%s\n' "$out/${f##*/}"; done
}
