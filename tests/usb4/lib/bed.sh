# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that tests/vm/run.sh and its libs read
# The host side of tests/vm's usb4 mode (USB4_TREE=<tree>): the kernel the tree builds
# against, tbloop and the tree built for it, the in-kernel modules they need, and our
# provider laid over the image. Sourced by tests/vm/run.sh after its own libs; needs
# REPO, VMDIR, CACHE, VMCACHE and MIRROR set.

# Module parameters, as a user loads the module for two Linux peers (README.md, "The
# kernel module"); roce_netdev is added by the guest (the dummy netdev it creates).
USB4_TBV_PARAMS_DEFAULT="profile=linux_perf bind_services=1 allocate_rings=1 start_rings=1 negotiate_native=1 enable_tunnels=1 register_verbs=1"

# In-kernel modules the bed loads besides what the built modules depend on: the dummy
# netdev for roce_netdev, and the uverbs/umad/rdma_cm character devices the tools use.
USB4_KMODS="dummy ib_uverbs ib_umad rdma_ucm"

# usb4_prepare: builds what USB4_TREE needs and sets KSUITE/KPKG (unless KPKG was given),
# KMODS_REQUIRED/KMODS_OPTIONAL/KMODS_TAG for kernel_prepare, USB4_KODIR (stripped .ko
# files for the image: tbloop's first, then the tree's), USB4_KO_NAMES (their module
# names in load order) and, when the caller gave no VM_OVERLAY, one with our provider.
# Runs before run.sh takes the VM cache lock (toolchain_prepare takes it itself).
usb4_prepare() {
  USB4CACHE="$CACHE/usb4"
  mkdir -p "$USB4CACHE"
  USB4_MODULE_SRC=$(usb4_module_src "$REPO")
  [[ -n $USB4_MODULE_SRC && -d $USB4_MODULE_SRC ]] \
    || die "USB4_TREE=$USB4_TREE: USB4_MODULE_SRC not set and $REPO/../shared/usb4-module absent"
  local k
  k=$(usb4_tree_kernel "$USB4_TREE") || die "USB4_TREE: unknown tree $USB4_TREE (one of: $USB4_TREES)"
  if [[ -z ${KPKG:-} ]]; then KSUITE=${k%% *}; KPKG=${k#* }; fi
  USB4_TBLOOP_SRC=${USB4_TBLOOP_SRC:-$REPO/tests/usb4/tbloop}
  [[ -f $USB4_TBLOOP_SRC/Makefile || -f $USB4_TBLOOP_SRC/Kbuild ]] \
    || die "usb4: no tbloop module source at $USB4_TBLOOP_SRC (USB4_TBLOOP_SRC)"

  toolchain_prepare
  # Per run: two runs of one tree (other checkouts share the cache) each rm -rf'd and
  # refilled one directory, and one's image then found no .ko ("cp: cannot stat
  # .../bed/pleite-main-6.12.118+deb13-amd64/ko/*.ko"). run.sh removes it at exit.
  local out="$USB4CACHE/bed/$USB4_TREE-$KVER.$$" treedir kos f deps=() d m
  USB4_BED_OUT=$out
  rm -rf "$out"; mkdir -p "$out/tbloop" "$out/tree" "$out/ko"
  kos=$(kbuild_module "$USB4_TBLOOP_SRC" "" "$out/tbloop") || die "usb4: tbloop does not build against $KVER"
  treedir=$(usb4_tree_dir "$USB4_TREE") || exit 1
  kos+=$'\n'$(KBUILD_EXTRA_SYMBOLS="$out/tbloop/Module.symvers" KBUILD_GLUE="$(usb4_tree_glue "$USB4_TREE")" \
    KBUILD_MAKEVARS="$(usb4_tree_make_vars "$USB4_TREE")" kbuild_module "$treedir" kernel "$out/tree") \
    || die "usb4: $USB4_TREE does not build against $KVER (tests/usb4/README.md lists the kernels it builds on)"
  USB4_KO_NAMES=()
  local built=" "
  while read -r f; do
    m=$(basename "$f" .ko); m=${m//-/_}  # kbuild names a module after its object
    USB4_KO_NAMES+=("$m"); built+="$m "
    cp "$f" "$out/ko/$m.ko"
  done <<<"$kos"
  # The .modinfo sections, cut out with the toolchain's objcopy (a plain string search
  # of the .ko also finds "name=%s"-like format strings).
  tc_run "$out/ko" /bin/sh -c 'for f in /build/*.ko; do objcopy -O binary --only-section=.modinfo "$f" "${f%.ko}.modinfo"; done' \
    || die "usb4: objcopy of the .modinfo sections failed"
  for m in "${USB4_KO_NAMES[@]}"; do
    for d in $(modinfo_field "$out/ko/$m.modinfo" depends | tr ',' ' '); do
      [[ $built == *" $d "* ]] && continue
      # The stand-in replaces thunderbolt.ko: a module that still needs the real one was
      # linked against the kernel's symbols, not tbloop's.
      [[ $d == thunderbolt ]] && die "usb4: $m.ko depends on the real thunderbolt.ko (built without tbloop's Module.symvers, or tbloop does not export what it uses)"
      deps+=("$d")
    done
  done
  [[ " ${USB4_KO_NAMES[*]} " == *" thunderbolt_ibverbs "* ]] || die "usb4: $USB4_TREE built no thunderbolt_ibverbs.ko"
  # The image carries them without debug info (~12 MB each otherwise); BTF stays.
  tc_run "$out/ko" /bin/sh -c 'strip --strip-debug /build/*.ko; rm -f /build/*.modinfo' || die "usb4: strip failed"
  USB4_KODIR="$out/ko"
  KMODS_REQUIRED="$USB4_KMODS ${deps[*]}"
  KMODS_OPTIONAL="ib_uverbs_support cuse"
  # 6.12's libcrc32c (hellas-gda-v2 needs it) has softdep=pre: crc32c, which busybox
  # modprobe ignores; without an implementation loaded first its init fails.
  KMODS_PRE="crc32c_generic crc32c_intel"
  KMODS_TAG="-usb4-$(printf '%s' "$KMODS_PRE $KMODS_REQUIRED" | sha256sum | cut -c1-8)"
  USB4_TBLOOP_PARAMS=${USB4_TBLOOP_PARAMS:-}
  # USB4_TBLOOP_TOPOLOGY: tbloop's hosts and cables by name (usb4_topology_params).
  local topo
  topo=$(usb4_topology_params "${USB4_TBLOOP_TOPOLOGY:-}") || die "USB4_TBLOOP_TOPOLOGY=$USB4_TBLOOP_TOPOLOGY: one of $USB4_TOPOLOGIES"
  if [[ -n $topo ]]; then
    USB4_TBLOOP_PARAMS="$topo${USB4_TBLOOP_PARAMS:+ $USB4_TBLOOP_PARAMS}"
    # 16 devices negotiate one after another in the module's work items.
    USB4_SETUP_WAIT_S=${USB4_SETUP_WAIT_S:-300}
    # On 6.12 each of tbloop's domains borrows a PCI function no driver is bound to as
    # its NHI (tbloop/README.md); the bed's machine (-nodefaults) has about four. Six
    # pci-testdev functions (no Linux driver binds them) make room for a ring's eight.
    local i
    for i in 1 2 3 4 5 6; do VM_QEMU_EXTRA+=" -device pci-testdev"; done
    VM_QEMU_EXTRA=${VM_QEMU_EXTRA# }
  fi
  local treeparams
  treeparams=$(usb4_tree_tbv_params "$USB4_TREE")
  USB4_TBV_PARAMS=${USB4_TBV_PARAMS:-$USB4_TBV_PARAMS_DEFAULT${treeparams:+ $treeparams}}
  if [[ -z $VM_OVERLAY ]]; then
    local so=${USB4_PROVIDER_SO:-$REPO/build/libusb4_rdma.so}
    # shellcheck source=/dev/null
    . "$REPO/tests/stock/lib.sh"
    # In this checkout's build/, not the shared cache: concurrent boots of the same tree
    # from other checkouts would lay their provider over ours there.
    local ov="$REPO/build/usb4/overlay-$USB4_TREE"
    stock_overlay "$ov" "$so" || exit 1
    # usb4 devices are ours without any opt-in: no claim_rxe here.
    rm -rf "$ov/etc/usb4verbs"
    VM_OVERLAY="$ov"
  fi
  USB4_DESC="$USB4_TREE ($(sed -n 's/^\([0-9a-f]\{7\}\).*/\1/p' "$treedir/SNAPSHOT" 2>/dev/null | head -n1)) on $KVER, modules ${USB4_KO_NAMES[*]}"
}

# The topologies USB4_TBLOOP_TOPOLOGY names (tbloop/README.md, "Topologies").
USB4_TOPOLOGIES="ring4 twocable"

# usb4_topology_params NAME: tbloop's parameters for topology NAME; nothing for "" (the
# two-host default); fails for an unknown name. ring4: MULTI-PORT-TOPOLOGY.md's four
# machines in a ring, A-B, B-C, C-D, D-A, two ports a host
# (pleite-main docs/MULTI-PORT-TOPOLOGY.md, "Topology B"); twocable: its two machines
# with two cables between them ("Topology A").
usb4_topology_params() {
  case $1 in
    "") ;;
    ring4) echo "hosts=4 topology=0-1,1-2,2-3,3-0" ;;
    twocable) echo "cables=2" ;;
    *) return 1 ;;
  esac
}

# modinfo_field MODINFO FIELD: FIELD of a dumped .modinfo section (NUL-separated).
modinfo_field() {
  tr '\0' '\n' < "$1" | grep -a -m1 "^$2=" | cut -d= -f2- || true
}
