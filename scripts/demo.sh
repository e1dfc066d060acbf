#!/usr/bin/env bash
# scripts/demo.sh (`make demo`, after `make deps build`): boots one VM (Debian 12's
# kernel and userland, Soft-RoCE rxe0/rxe1 on a veth pair) with our provider as the only
# one that can serve rxe, and shows ibv_devices, ibv_devinfo, ibv_rc_pingpong,
# ib_write_bw and ib_send_lat running through it, then `ibvinfo` and `ibvinfo doctor`.
# Ends with a summary of the steps; exits 0 only if every step worked.
# PROVIDER=librxe runs the same steps on stock librxe (proves the demo itself).
# Other knobs: DEMO_USERLAND (bookworm), DEMO_ITERS (1000), DEMO_TIMEOUT (60 s a step).
set -euo pipefail
# The body is one function, called last: bash parses it whole before running it.
main() {
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  # shellcheck source=tests/stock/lib.sh
  . "$REPO/tests/stock/lib.sh"

  PROVIDER=${PROVIDER:-ours}
  USERLAND=${DEMO_USERLAND:-bookworm}
  ITERS=${DEMO_ITERS:-1000}
  STEP_TIMEOUT=${DEMO_TIMEOUT:-60}
  SO=$REPO/build/libusb4_rdma.so
  IBVINFO=$REPO/build/ibvinfo
  OUT=$REPO/build/demo

  if [[ -t 1 && -z ${NO_COLOR:-} ]]; then B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' N=$'\e[0m'; else B='' G='' R='' N=''; fi
  say() { printf '%s\n' "$*"; }
  die() { printf '%sdemo: %s%s\n' "$R" "$*" "$N" >&2; exit 1; }
  [[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,8s/^# \{0,1\}//p' "$0"; exit 0; }
  stock_check_provider "$PROVIDER" || exit 2
  [[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "DEMO_ITERS must be a positive number"
  [[ $STEP_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "DEMO_TIMEOUT must be a positive number of seconds"
  [[ -x $IBVINFO ]] || die "no $IBVINFO: run \`make build\` (or \`make demo\`) first"

  mkdir -p "$OUT"
  WORK=$(mktemp -d "$OUT/work.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  mkdir -p "$WORK/files" "$WORK/overlay/usr/bin"
  printf 'MODE=demo\nPROVIDER=%s\nITERS=%s\nTIMEOUT=%s\n' "$PROVIDER" "$ITERS" "$STEP_TIMEOUT" \
    > "$WORK/files/stock.conf"
  install -m755 "$IBVINFO" "$WORK/overlay/usr/bin/ibvinfo"
  exclude=""
  if [[ $PROVIDER == ours ]]; then
    stock_overlay "$WORK/overlay" "$SO" || exit 1
    exclude=$STOCK_EXCLUDE_LIBRXE
    what="our provider, libusb4_rdma (stock librxe is removed from the image)"
  else
    what="stock librxe (control run; our provider is not installed)"
  fi
  # One version of the harness and the guest script for this run.
  harness=$(stock_snapshot "$WORK/harness" "$REPO" 2>/dev/null)
  export CACHE=${CACHE:-$REPO/.cache}

  say "${B}usb4verbs demo${N}: stock RDMA tools on Soft-RoCE through $what"
  say "Debian $USERLAND userland on Debian 12's kernel, booted under qemu (TCG: expect about a"
  say "minute; the first run also downloads the packages). Progress, then the guest's output:"
  say ""

  # The harness's progress lines are many; a person needs a few of them.
  progress() {
    local line
    while IFS= read -r line; do
      printf '%s\n' "$line" >> "$OUT/harness.log"
      case $line in
        *"kernel: "* | *"userland: "* | *"initramfs "* | *"reached /init"* | *"setup ok"* \
          | *"FATAL"* | *"qemu exit"* | *"apt-get download"*)
          printf '  [vm] %s\n' "${line#\[vm\] }" ;;
      esac
    done
  }
  : > "$OUT/harness.log"
  rc=0
  USERLAND=$USERLAND VM_TIMEOUT=$((8 * (2 * STEP_TIMEOUT + 15) + 300)) \
    VM_EXTRA_DEBS="$STOCK_DEBS" VM_EXCLUDE_GLOB=$exclude VM_OVERLAY="$WORK/overlay" \
    VM_FILES="$WORK/files" VM_GUEST_SCRIPT="$WORK/harness/guest.sh" \
    "$harness" 2> >(progress) > "$OUT/guest.out" || rc=$?
  # Let the progress filter drain.
  sleep 0.2

  # The guest's part: its step headings and the tools' own output, without the
  # machine-readable lines meant for the summary below.
  grep -vE '^(--- (PASS|FAIL): vm/|    cmd: |# stock: )' "$OUT/guest.out" \
    | sed -E "s/^--- PASS: (demo\/.*)/${G}ok${N}: \1/; s/^--- FAIL: (demo\/.*)/${R}FAILED${N}: \1/" || true

  say ""
  meta=$(grep -m1 '^# stock: userland=' "$OUT/guest.out" || true)
  kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$meta"; }
  say "${B}==== Summary${N}: $what"
  say "Debian $USERLAND userland (rdma-core $(kv rdma-core), perftest $(kv perftest)), kernel $(kv kernel)"
  awk -v g="$G" -v r="$R" -v n="$N" '
    /^--- (PASS|FAIL): demo\// {
      if (name != "") printf "  %-8s %-16s %s\n", st, name, note
      st = ($2 == "PASS:") ? g "ok" n "      " : r "FAILED" n "  "
      name = $3; sub(/^demo\//, "", name); note = ""; total++; if ($2 == "PASS:") ok++
      next
    }
    name != "" && /^    note: / { note = substr($0, 11) }
    # The guest script exits 1 when a step failed: the steps above say which.
    /^--- FAIL: vm\// && !/^--- FAIL: vm\/guest\.sh \(exit [0-9]+\)$/ { h[++nh] = substr($0, 11) }
    END {
      if (name != "") printf "  %-8s %-16s %s\n", st, name, note
      for (i = 1; i <= nh; i++) printf "  %sharness%s  %s\n", r, n, h[i]
      printf "%d of %d steps worked.\n", ok, total
    }' "$OUT/guest.out"
  steps=$(grep -c '^--- \(PASS\|FAIL\): demo/' "$OUT/guest.out" || true)
  failed=$(grep -c '^--- FAIL: demo/' "$OUT/guest.out" || true)
  say "Full guest output: build/demo/guest.out; harness log: build/demo/harness.log; serial"
  say "console: the newest build/vm/serial-*.log."
  if ((rc == 0 && steps == 8 && failed == 0)); then
    say "${G}${B}Every step worked.${N}"
    exit 0
  fi
  if ((steps < 8)); then
    say "${R}Only $steps of the 8 steps reported a result (see the harness lines above).${N}"
  elif [[ $PROVIDER == ours ]]; then
    say "${R}$failed step(s) failed through our provider.${N} (Its data path is still being built;"
    say "PROVIDER=librxe $0 runs the same steps on stock librxe.)"
  else
    say "${R}$failed step(s) failed on stock librxe.${N}"
  fi
  exit 1
}

main "$@"
