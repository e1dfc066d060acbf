# shellcheck shell=sh
# tests/usb4/guest-capture.sh: capture NAME, the files ibvinfo reads as `ibvinfo --root`
# reads them plus the live ibvinfo outputs, printed as a base64 tar.gz between
# "=== ibvinfo-capture NAME begin/end ===" lines (tests/usb4/capture-ibvinfo-tree.sh
# unpacks them). Sourced by guest-ring.sh and guest-diag.sh. Needs B (ibvinfo's
# directory) and TBV (the module's debugfs); capture_traffic (optional, defined by the
# caller) moves a few messages between summary and summary.2 (125: none to move).
# capf FILE...: copy readable files into the capture tree $T at the same path.
capf() {
  for f in "$@"; do
    [ -f "$f" ] || continue
    mkdir -p "$T${f%/*}"
    cat "$f" > "$T$f" 2>/dev/null || rm -f "$T$f"
  done
}

# capture NAME: the files ibvinfo reads (internal/sysinfo), as ibvinfo --root reads
# them, plus the live ibvinfo outputs next to the tree; then printed as base64.
capture() {
  echo "# capture $1: reading the tree"
  C=/tmp/capture/$1
  T=$C/root
  rm -rf "$C"; mkdir -p "$T"
  for d in /sys/class/infiniband/*; do
    [ -e "$d" ] || continue
    capf "$d"/node_guid "$d"/node_type "$d"/fw_ver "$d"/sys_image_guid "$d"/parent
    if [ -L "$d/device/driver" ]; then
      mkdir -p "$T$d/device"; ln -s "$(readlink "$d/device/driver")" "$T$d/device/driver"
    fi
    # The domain below the device's NHI: which domain a renamed device is on.
    for dom in "$d"/device/domain*; do [ -d "$dom" ] && mkdir -p "$T$dom" && : > "$T$dom/.keep"; done
    for p in "$d"/ports/*; do
      capf "$p"/state "$p"/phys_state "$p"/rate "$p"/link_layer
      mkdir -p "$T$p/gids"
      for g in "$p"/gids/*; do
        # An empty RoCE entry reads as zeros or fails: kept as an empty file.
        cat "$g" > "$T$g" 2>/dev/null || : > "$T$g"
        capf "$p/gid_attrs/types/${g##*/}" "$p/gid_attrs/ndevs/${g##*/}"
      done
    done
  done
  mkdir -p "$T/sys/class/infiniband_verbs"
  for u in /sys/class/infiniband_verbs/uverbs*; do capf "$u"/ibdev "$u"/abi_version; done
  capf /sys/class/infiniband_verbs/abi_version
  for n in /sys/class/net/*; do capf "$n"/mtu; done
  mkdir -p "$T/sys/bus/thunderbolt/devices" "$T/sys/bus/thunderbolt/drivers"
  for t in /sys/bus/thunderbolt/devices/*; do
    mkdir -p "$T$t"
    for f in "$t"/*; do [ -f "$f" ] && [ "${f##*/}" != uevent ] && capf "$f"; done
  done
  for drv in /sys/bus/thunderbolt/drivers/*; do
    mkdir -p "$T$drv"
    for e in "$drv"/*; do
      [ -L "$e" ] && ln -s "$(readlink "$e")" "$T$e"
      [ -f "$e" ] && : > "$T$e"
    done
  done
  for m in thunderbolt_ibverbs thunderbolt_net; do
    [ -d /sys/module/$m ] || continue
    mkdir -p "$T/sys/module/$m/parameters"
    capf /sys/module/$m/parameters/*
  done
  capf $TBV/*
  # summary.2, the later sample doctor --watch compares: after a few messages
  # through our provider, so the data-path counters have moved.
  echo "# capture $1: tree read, traffic for summary.2"
  if command -v capture_traffic > /dev/null 2>&1; then
    capture_traffic > "$C/summary2.pingpong" 2>&1
    rc=$?
    # 125: nothing to send over (no device): no file, as with no capture_traffic.
    if [ $rc = 125 ]; then rm -f "$C/summary2.pingpong"; else echo "exit $rc" >> "$C/summary2.pingpong"; fi
  fi
  cp "$TBV/summary" "$T$TBV/summary.2"
  mkdir -p "$T/sys/class/iommu" "$T/sys/kernel/iommu_groups"
  for g in /sys/kernel/iommu_groups/*; do capf "$g"/type; done
  capf /proc/cmdline /proc/self/limits /proc/self/status
  # Only the variables ibvinfo looks at, NUL-separated as in the kernel's file.
  env | grep -E '^(RDMAV_DRIVERS|IBV_DRIVERS|NCCL_IB_HCA|UCX_NET_DEVICES|GGML_RDMA_DEV)=' | tr '\n' '\0' > "$T/proc/self/environ"
  for f in /etc/udev/rules.d/* /usr/lib/udev/rules.d/*rdma* /etc/libibverbs.d/*; do capf "$f"; done
  echo "# capture $1: ibvinfo, ibvinfo doctor (each bounded: 300 s)"
  timeout 300 $B/ibvinfo --no-color > "$C/live.show.txt" 2>&1; echo "exit $?" >> "$C/live.show.txt"
  timeout 300 $B/ibvinfo --json > "$C/live.show.json" 2> "$C/live.show.err"
  timeout 300 $B/ibvinfo doctor --no-color > "$C/live.doctor.txt" 2>&1; echo "exit $?" >> "$C/live.doctor.txt"
  timeout 300 $B/ibvinfo doctor --json > "$C/live.doctor.json" 2> "$C/live.doctor.err"
  timeout 300 $B/ibvinfo --root "$T" --json > "$C/root.show.json" 2>&1
  cat /sys/kernel/debug/tbloop/stats > "$C/tbloop.stats" 2>/dev/null
  echo "=== ibvinfo-capture $1 begin ==="
  (cd "$C" && tar czf - .) | base64
  echo "=== ibvinfo-capture $1 end ==="
}
