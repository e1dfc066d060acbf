# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh and the other libs read
# The guest kernel: a stock Debian linux-image from KSUITE, extracted on the host, its
# uncompressed vmlinux pulled out for a PVH boot, and the closure of the modules the
# tests need, decompressed. All of it is cached under $VMCACHE/kernel/<package>/.

# Modules the guest loads, in this order after their dependencies. crc32: rxe computes
# its ICRC through the crypto API and 6.1 does not autoload a provider, so one is
# loaded explicitly (6.1: crc32_generic; 7.x: crc32_cryptoapi). Optional ones may be
# built in or absent depending on the kernel.
KMODS_REQUIRED="veth rdma_rxe ib_uverbs ib_umad rdma_ucm"
KMODS_OPTIONAL="crc32_generic crc32_pclmul crc32_cryptoapi ib_uverbs_support cuse"
# The dma-buf exporter of the dma-buf MR tests (tests/usb4/dmabuf.c): vgem, DRM without
# hardware, whose dumb buffers export (PRIME) as dma-bufs backed by shmem pages. Loaded
# where the kernel builds it (Debian: CONFIG_DRM_VGEM=m in 6.1, 6.12 and 7.x), in both
# modes; the module sets with it live in their own directory (KMODDIR's -vgem).
KMODS_DMABUF="vgem"

# kernel_prepare: sets KVER, KIMG (what qemu boots), KMODDIR (decompressed modules and
# their load order in modules.order), KDESC (for logs).
kernel_prepare() {
  # VM_EXTRA_KMODS: more modules the guest loads (e.g. overlay for a container engine);
  # that module set gets its own directory.
  if [[ -n ${VM_EXTRA_KMODS:-} ]]; then
    KMODS_REQUIRED="$KMODS_REQUIRED $VM_EXTRA_KMODS"
    KMODS_TAG="${KMODS_TAG:-}-x$(printf '%s' "$KMODS_REQUIRED" | sha256sum | cut -c1-8)"
  fi
  apt_use "$KSUITE"
  local kpkg=${KPKG:-}
  if [[ -z $kpkg ]]; then
    kpkg=$(apt-cache "${APTOPTS[@]}" depends linux-image-amd64 2>/dev/null \
           | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [[ -n $kpkg ]] || die "kernel: cannot resolve linux-image-amd64 in $KSUITE"
  fi
  local debdir="$VMCACHE/debs/$KSUITE" kdeb parts=() p
  kdeb=$(apt_fetch "$debdir" "$kpkg") || exit 1
  # Since 6.16 (trixie-backports, sid) linux-image-X is a meta package over
  # linux-binary-X (vmlinuz), linux-modules-X (.ko.xz) and linux-base-X (config).
  while read -r p; do parts+=("$p"); done < <(dpkg-deb -f "$kdeb" Depends | sed 's/[|,]/\n/g' \
    | sed 's/^ *//; s/ .*//' | grep -E '^linux-(binary|modules|base)-' || true)
  local debs=("$kdeb")
  if ((${#parts[@]})); then
    local more; more=$(apt_fetch "$debdir" "${parts[@]}") || exit 1
    while read -r p; do debs+=("$p"); done <<<"$more"
  fi
  KDIR="$VMCACHE/kernel/$(basename "$kdeb" .deb)"
  if [[ ! -e $KDIR/.extracted ]]; then
    log "kernel: extracting ${debs[*]##*/}"
    rm -rf "$KDIR"; mkdir -p "$KDIR/root"
    for p in "${debs[@]}"; do dpkg-deb -x "$p" "$KDIR/root" || die "dpkg-deb -x $p failed"; done
    touch "$KDIR/.extracted"
  fi
  local modbase="$KDIR/root/lib/modules"
  [[ -d $modbase ]] || modbase="$KDIR/root/usr/lib/modules"
  KVER=$(find "$modbase" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | head -n1)
  [[ -n $KVER ]] || die "kernel: no modules directory in ${debs[*]##*/}"
  KMODROOT="$modbase/$KVER"
  local vmlinuz="$KDIR/root/boot/vmlinuz-$KVER"
  [[ -f $vmlinuz ]] || vmlinuz="$KMODROOT/vmlinuz"
  [[ -f $vmlinuz ]] || die "kernel: no vmlinuz in ${debs[*]##*/}"
  KIMG=$(kernel_vmlinux "$vmlinuz")
  # KMODS_TAG: another module set (the usb4 mode's) gets its own directory.
  KMODDIR="$KDIR/modules${KMODS_TAG:-}-vgem"
  [[ -e $KMODDIR/.done ]] || kernel_modules
  KDESC="$(basename "$kdeb" .deb) ($KVER)"
}

# kernel_vmlinux VMLINUZ: prints the image to boot. The uncompressed vmlinux ELF has a
# PVH entry (CONFIG_PVH=y) that qemu -kernel enters directly, skipping real-mode setup
# and the in-guest decompression, both slow under TCG (3-4.5 s to /init instead of 7-9).
# Falls back to the bzImage when no compressed payload is found.
kernel_vmlinux() {
  local vmlinuz=$1 out="$KDIR/vmlinux.pvh" off
  if [[ ! -s $out ]]; then
    off=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$vmlinuz" | head -n1 | cut -d: -f1 || true)
    if [[ -n $off ]]; then
      tail -c +$((off + 1)) "$vmlinuz" | xz -dc > "$out.tmp" 2>/dev/null || true
    else # CONFIG_KERNEL_ZSTD (6.12+)
      off=$(LC_ALL=C grep -abo $'\x28\xb5\x2f\xfd' "$vmlinuz" | head -n1 | cut -d: -f1 || true)
      [[ -n $off ]] && { tail -c +$((off + 1)) "$vmlinuz" | zstd -qdc > "$out.tmp" 2>/dev/null || true; }
    fi
    if [[ -s $out.tmp && $(head -c4 "$out.tmp" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]]; then
      mv "$out.tmp" "$out"
    else
      rm -f "$out.tmp"
      log "WARN: no vmlinux inside $(basename "$vmlinuz"); booting the bzImage (slower)"
      printf '%s\n' "$vmlinuz"; return
    fi
  fi
  printf '%s\n' "$out"
}

# kernel_modules: decompress the closure of KMODS_* into $KMODDIR, dependencies first.
# The Debian package has no modules.dep, so dependencies come from each module's
# .modinfo "depends=" string; the guest runs busybox depmod for modprobe's sake.
kernel_modules() {
  local -A path=() seen=()
  local order=() f b builtin m
  while IFS= read -r f; do b=${f##*/}; b=${b%%.ko*}; path[${b//-/_}]=$f; done \
    < <(find "$KMODROOT/kernel" -name '*.ko*')
  builtin=" $(sed 's#.*/##; s#\.ko.*##; s#-#_#g' "$KMODROOT/modules.builtin" 2>/dev/null | tr '\n' ' ') "
  rm -rf "$KMODDIR"; mkdir -p "$KMODDIR"
  add_module() { # NAME REQUIRED(0/1)
    local m=${1//-/_} f=${path[${1//-/_}]:-} deps d
    [[ -n ${seen[$m]:-} ]] && return 0
    seen[$m]=1
    if [[ -z $f ]]; then
      [[ $builtin == *" $m "* ]] && return 0
      [[ $2 == 1 ]] && die "kernel $KVER has no module $m"
      return 0
    fi
    case $f in
      *.ko) cat "$f" ;; *.ko.xz) xz -dc "$f" ;; *.ko.zst) zstd -qdc "$f" ;; *.ko.gz) gzip -dc "$f" ;;
    esac > "$KMODDIR/$m.ko" || die "cannot decompress $f"
    deps=$(tr '\0' '\n' < "$KMODDIR/$m.ko" | grep -a -m1 '^depends=' | cut -d= -f2 || true)
    for d in ${deps//,/ }; do add_module "$d" 1; done
    order+=("$m")
  }
  # KMODS_PRE (usb4 mode): optional modules loaded first, for softdeps busybox modprobe
  # does not follow (6.12's libcrc32c needs a crc32c implementation before its init).
  for m in ${KMODS_PRE:-}; do add_module "$m" 0; done
  for m in $KMODS_REQUIRED; do add_module "$m" 1; done
  for m in $KMODS_OPTIONAL ${KMODS_DMABUF:-}; do add_module "$m" 0; done
  printf '%s\n' "${order[@]}" > "$KMODDIR/modules.order"
  cp "$KMODROOT/modules.builtin" "$KMODDIR/" 2>/dev/null || true
  log "kernel $KVER: modules ${order[*]}"
  touch "$KMODDIR/.done"
}
