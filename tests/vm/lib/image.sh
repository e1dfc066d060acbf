# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh and the other libs read
# The initramfs for one run: the staged userland, the kernel modules, /init, the test
# binaries and the optional extras, packed as an uncompressed newc cpio (qemu loads it
# straight into guest memory; decompressing it under TCG would only cost time).

# image_build WORKDIR BIN...: sets INITRD and GUEST_NAMES (the names the guest reports).
image_build() {
  local work=$1; shift
  local root="$work/root"
  rm -rf "$root"; mkdir -p "$work"
  cp -a "$STAGE" "$root"
  rm -f "$root/.done" "$root/.debs"
  image_exclude "$root"
  mkdir -p "$root"/{proc,sys,dev,tmp,run,root,opt/vmtest/bin} "$root/usr/lib/modules/$KVER/kernel"

  cp "$KMODDIR"/*.ko "$root/usr/lib/modules/$KVER/kernel/"
  cp "$KMODDIR/modules.order" "$root/etc/vmtest-modules.order"
  [[ -f $KMODDIR/modules.builtin ]] && cp "$KMODDIR/modules.builtin" "$root/usr/lib/modules/$KVER/"
  install -m755 "$VMDIR/guest/init" "$root/init"
  # usb4 mode: the built modules (tbloop's, the tree's) and the setup /init sources
  # instead of the veth/rxe one.
  if [[ -n ${USB4_TREE:-} ]]; then
    mkdir -p "$root/usr/lib/modules/$KVER/extra"
    cp "$USB4_KODIR"/*.ko "$root/usr/lib/modules/$KVER/extra/"
    install -m644 "$VMDIR/guest/usb4-setup.sh" "$root/etc/vmtest-usb4-setup.sh"
  fi
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
  printf 'root:x:0:\n' > "$root/etc/group"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"

  local b names=() name
  for b in "$@"; do
    name=${b##*/}
    # The name travels in /etc/vmtest.conf and in the @@VM markers.
    [[ $name =~ ^[A-Za-z0-9._+-]+$ ]] || die "test binary name must be [A-Za-z0-9._+-]: $name"
    [[ " ${names[*]} " == *" $name "* ]] && die "two test binaries are named $name"
    install -m755 "$b" "$root/opt/vmtest/bin/$name"
    names+=("$name")
  done
  if [[ -n $VM_FILES ]]; then
    mkdir -p "$root/opt/usb4verbs"
    cp -a "$VM_FILES/." "$root/opt/usb4verbs/"
  fi
  # VM_OVERLAY: files laid over the image root as they are (a provider .so in the
  # providers directory, its .driver file in /etc/libibverbs.d), before /init runs.
  [[ -n $VM_OVERLAY ]] && cp -a "$VM_OVERLAY/." "$root/"
  local script=""
  if [[ -n $VM_GUEST_SCRIPT ]]; then
    script=${VM_GUEST_SCRIPT##*/}
    [[ $script =~ ^[A-Za-z0-9._+-]+$ ]] || die "VM_GUEST_SCRIPT name must be [A-Za-z0-9._+-]: $script"
    [[ " ${names[*]} " == *" $script "* ]] && die "VM_GUEST_SCRIPT has the name of a test binary: $script"
    install -m755 "$VM_GUEST_SCRIPT" "$root/opt/vmtest/$script"
  fi
  GUEST_NAMES=("${names[@]}" ${script:+"$script"})

  local ip rdma p
  for p in usr/sbin/ip usr/bin/ip; do present "$root/$p" && [[ $(readlink "$root/$p") != *busybox ]] && { ip=/$p; break; }; done
  for p in usr/bin/rdma usr/sbin/rdma; do present "$root/$p" && { rdma=/$p; break; }; done
  [[ -n ${ip:-} && -n ${rdma:-} ]] || die "iproute2's ip/rdma missing from the image (VM_EXCLUDE_GLOB?)"
  {
    # Busybox ash runs its own `ip` applet ahead of PATH, and that one cannot create
    # veth pairs: iproute2's tools are called by full path.
    printf 'IP=%s\nRDMA=%s\n' "$ip" "$rdma"
    printf 'IP0=10.11.0.1\nIP1=10.11.0.2\nMTU=9000\n'
    printf 'USERLAND=%s\n' "$USERLAND"
    printf "TESTS='%s'\n" "${names[*]}"
    printf 'TEST_TIMEOUT_MIN=%s\nKILL_AFTER_S=%s\n' "$TEST_TIMEOUT_MIN" $((TEST_TIMEOUT_MIN * 60 + 30))
    printf "GUEST_SCRIPT='%s'\n" "$script"
    printf "TEST_RUN='%s'\n" "${VM_TEST_RUN:-}"
    printf "GUEST_ENV='%s'\n" "${VM_GUEST_ENV:-}"
    if [[ -n ${USB4_TREE:-} ]]; then
      printf "MODE=usb4\nUSB4_TREE='%s'\nUSB4_KO_NAMES='%s'\n" "$USB4_TREE" "${USB4_KO_NAMES[*]}"
      printf "USB4_TBLOOP_PARAMS='%s'\nUSB4_TBV_PARAMS='%s'\n" "$USB4_TBLOOP_PARAMS" "$USB4_TBV_PARAMS"
      printf 'USB4_NETDEV=tbv0\nUSB4_IP=10.77.0.1\nUSB4_SETUP_WAIT_S=%s\n' "${USB4_SETUP_WAIT_S:-90}"
      printf "USB4_RAILS_PER_CABLE='%s'\n" "${USB4_RAILS_PER_CABLE:-}"
    fi
  } > "$root/etc/vmtest.conf"

  INITRD="$work/initrd.cpio"
  (cd "$root" && find . -mindepth 1 | cpio --quiet -o -H newc -R 0:0 > "$INITRD") \
    || die "cpio failed"
}

# image_exclude ROOT: delete what VM_EXCLUDE_GLOB names (globs relative to the image
# root, space-separated, ** allowed), e.g. stock librxe so only our provider serves rxe.
image_exclude() {
  local root=$1 globs g f n
  read -ra globs <<<"$VM_EXCLUDE_GLOB"
  ((${#globs[@]})) || return 0
  (
    cd "$root" || exit 1
    shopt -s globstar nullglob
    for g in "${globs[@]}"; do
      n=0
      # shellcheck disable=SC2206 # the glob is meant to expand here
      for f in $g; do rm -rf -- "$f"; n=$((n + 1)); done
      log "exclude $g: $n removed"
    done
  )
}
