#!/usr/bin/env bash
# tests/stock/run.sh [USERLAND...]: runs the stock-tool matrix (ibv_* examples, perftest,
# rping, ucx_perftest) in one VM boot per userland (default: jammy bookworm noble trixie
# resolute sid) and
# writes the pass table of each into build/stock/<provider>/stock-tools.md
# (stock-tools-librxe.md for PROVIDER=librxe); `make docs` copies the tables into
# docs/. Result lines go to stdout; exit status non-zero if any case failed. Knobs and
# the case list: tests/stock/README.md.
set -euo pipefail
# Everything is in functions and main runs last: bash has then parsed the whole file
# before it does anything, so editing this script during a long run is harmless.

log() { printf '[stock] %s\n' "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
usage() { sed -n '2,8s/^# \{0,1\}//p' "$0" >&2; exit 2; }

# run_userland U: one VM boot; its stdout (result lines) into $OUT/U.out and to ours.
# Status 77: the harness could not fetch the userland (it printed a SKIP line); U.out,
# and so U's section of the doc, keep the last run that did happen.
run_userland() {
  local u=$1 rc=0
  log "$u: booting (provider $PROVIDER, VM_TIMEOUT ${VM_TIMEOUT}s)"
  USERLAND=$u VM_TIMEOUT=$VM_TIMEOUT \
    VM_EXTRA_DEBS="$STOCK_DEBS${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
    VM_EXCLUDE_GLOB=$exclude VM_OVERLAY=$overlay VM_FILES="$WORK/files" \
    VM_GUEST_SCRIPT="$WORK/harness/guest.sh" \
    "$HARNESS_RUN" | tee "$WORK/$u.out" || rc=$?
  ((rc == 77)) && return 77
  mv "$WORK/$u.out" "$OUT/$u.out"
  # What was installed, for the doc: the provider build under test (ours only).
  [[ -n $SO_DESC ]] && printf '# host: provider=%s\n' "$SO_DESC" >> "$OUT/$u.out"
  return $rc
}

# section U: the markdown section of userland U, from $OUT/U.out.
section() {
  local u=$1 f="$OUT/$1.out" meta date
  # The run's date is that of its output (STOCK_REPORT_ONLY rewrites the doc later).
  date=$(date -u -r "$f" '+%Y-%m-%d %H:%M UTC')
  meta=$(sed -n 's/^# stock: userland=//p' "$f" | head -n1)
  printf '<!-- stock:begin %s -->\n' "$u"
  awk -v u="$u" -v meta="$meta" -v date="$date" -v prov="$PROVIDER" '
    function kv(k,   re) { re = k "=[^ ]*"; if (match(meta, re)) return substr(meta, RSTART + length(k) + 1, RLENGTH - length(k) - 1); return "?" }
    function cell(s) { gsub(/\|/, "\\|", s); if (length(s) > 200) s = substr(s, 1, 197) "..."; return s }
    function flush() { if (name != "") rows[++nrows] = sprintf("| %s | %s | %s | `%s` | %s |", name, res, t, cell(cmd), cell(note)); name = "" }
    /^--- (PASS|FAIL|SKIP): stock\// {
      flush()
      res = $2; sub(/:$/, "", res); name = $3; sub(/^stock\/[^\/]*\//, "", name)
      t = $4; gsub(/[()]/, "", t); cmd = ""; note = ""
      if (res == "PASS") pass++; else if (res == "FAIL") fail++; else skip++
      res = (res == "PASS") ? "pass" : (res == "FAIL") ? "**FAIL**" : "skip"
      next
    }
    name != "" && /^    cmd: / { cmd = substr($0, 10); next }
    name != "" && /^    note: / { note = substr($0, 11); next }
    /^--- FAIL: vm\// { sub(/^--- FAIL: /, ""); harness[++nh] = $0 }
    /^# host: provider=/ { so = substr($0, 18) }
    END {
      flush()
      printf "## %s: rdma-core %s\n\n", u, kv("rdma-core")
      printf "%s · kernel %s · provider **%s** · perftest %s · UCX %s · %d iterations, %ss timeout per case\n\n", \
        date, kv("kernel"), prov, kv("perftest"), kv("ucx"), kv("iters"), kv("timeout")
      if (so != "") printf "Provider build: %s\n\n", so
      printf "**%d passed, %d failed, %d skipped.**\n\n", pass, fail, skip
      printf "<!-- summary: %s|%s|%d|%d|%d|%s -->\n", u, kv("rdma-core"), pass, fail, skip, date
      if (nh) {
        printf "Harness: "
        for (i = 1; i <= nh; i++) printf "%s`%s`", (i > 1 ? ", " : ""), harness[i]
        printf "\n\n"
      }
      if (nrows) {
        print "| case | result | time | client command | note |"
        print "|---|---|---|---|---|"
        for (i = 1; i <= nrows; i++) print rows[i]
        print ""
      } else print "No case ran (see the harness lines above and build/vm/serial-latest.log).\n"
    }' "$f"
  printf '<!-- stock:end %s -->\n' "$u"
}

# write_doc: $STOCK_DOC with a fresh section for each userland run now; sections of
# userlands not run this time are kept as they were.
write_doc() {
  local secdir="$WORK/sections" u order=() label
  mkdir -p "$secdir"
  local base=$STOCK_DOC
  [[ -f $base ]] || base=$COMMITTED_DOC
  if [[ -f $base ]]; then
    awk -v d="$secdir" '/^<!-- stock:begin / { f = d "/" $3 ".md" } f { print > f } /^<!-- stock:end / { close(f); f = "" }' "$base"
  fi
  for u in "${ran[@]}"; do section "$u" > "$secdir/$u.md"; done
  for u in jammy bookworm noble trixie resolute sid; do [[ -f $secdir/$u.md ]] && order+=("$u"); done
  for f in "$secdir"/*.md; do
    u=${f##*/}; u=${u%.md}
    [[ " ${order[*]} " == *" $u "* ]] || order+=("$u")
  done
  if [[ $PROVIDER == ours ]]; then
    label="our provider (libusb4_rdma); stock librxe and rxe.driver are removed from the image, so only ours can serve rxe0/rxe1"
  else
    label="stock librxe (the control run; our provider is not installed)"
  fi
  mkdir -p "$(dirname "$STOCK_DOC")"
  {
    printf '# Stock tools on Soft-RoCE through %s\n\n' "$([[ $PROVIDER == ours ]] && echo "our provider" || echo "stock librxe")"
    printf 'Provider: %s.\n\n' "$label"
    # shellcheck disable=SC2016 # the backquotes are markdown
    printf 'Generated by `%stests/stock/run.sh` (tests/stock/README.md); each userland'"'"'s section is\n' \
      "$([[ $PROVIDER == librxe ]] && echo 'PROVIDER=librxe ')"
    printf 'replaced when that userland runs again, so the sections may carry different dates.\n'
    printf 'Every case runs in a qemu (TCG) guest on a stock Debian kernel: server on rxe0 pinned to\n'
    printf 'vCPU 0, client on rxe1 pinned to vCPU 1, over a veth pair; figures under TCG are noisy.\n\n'
    printf '| userland | rdma-core | passed | failed | skipped | run |\n|---|---|---|---|---|---|\n'
    for u in "${order[@]}"; do
      sed -n 's/^<!-- summary: \(.*\) -->$/\1/p' "$secdir/$u.md" | head -n1 \
        | awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }'
    done
    printf '\n'
    for u in "${order[@]}"; do cat "$secdir/$u.md"; printf '\n'; done
  } > "$STOCK_DOC.tmp"
  mv "$STOCK_DOC.tmp" "$STOCK_DOC"
  log "wrote ${STOCK_DOC#"$REPO"/}"
}

main() {
  STOCKDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  REPO=$(cd "$STOCKDIR/../.." && pwd)
  # shellcheck source=tests/stock/lib.sh
  . "$STOCKDIR/lib.sh"

  PROVIDER=${PROVIDER:-ours}
  STOCK_ITERS=${STOCK_ITERS:-1000}
  STOCK_TIMEOUT=${STOCK_TIMEOUT:-60}
  STOCK_CASES=${STOCK_CASES:-}
  STOCK_SO=${STOCK_SO:-$REPO/build/libusb4_rdma.so}
  # The run's doc goes under build/ with the outputs; `make docs` (STOCK_REPORT_ONLY=1
  # STOCK_DOC=docs/...) is what rewrites the committed one. Sections of userlands not
  # run come from the committed doc.
  local docname=stock-tools.md
  [[ $PROVIDER == librxe ]] && docname=stock-tools-librxe.md
  COMMITTED_DOC=$REPO/docs/$docname
  OUT="$REPO/build/stock/$PROVIDER"
  STOCK_DOC=${STOCK_DOC:-$OUT/$docname}

  [[ ${1:-} == -h || ${1:-} == --help ]] && usage
  stock_check_provider "$PROVIDER" || exit 2
  [[ $STOCK_ITERS =~ ^[1-9][0-9]*$ ]] || die "STOCK_ITERS must be a positive number"
  [[ $STOCK_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "STOCK_TIMEOUT must be a positive number of seconds"
  local u
  userlands=("$@")
  if ((${#userlands[@]} == 0)) && [[ ${STOCK_REPORT_ONLY:-0} == 1 ]]; then
    # Report what the last runs left, each userland that has an output.
    for u in jammy bookworm noble trixie resolute sid; do [[ -s $OUT/$u.out ]] && userlands+=("$u"); done
    ((${#userlands[@]})) || die "no earlier output under ${OUT#"$REPO"/}: run tests/stock/run.sh (make test) first"
  fi
  ((${#userlands[@]})) || userlands=(jammy bookworm noble trixie resolute sid)
  for u in "${userlands[@]}"; do
    [[ $u =~ ^[a-z][a-z0-9-]*$ ]] || die "not a Debian suite name: $u"
  done

  mkdir -p "$OUT"
  WORK=$(mktemp -d "$OUT/work.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  # STOCK_REPORT_ONLY=1: rewrite the doc from the last runs' output, boot nothing.
  if [[ ${STOCK_REPORT_ONLY:-0} == 1 ]]; then
    for u in "${userlands[@]}"; do [[ -s $OUT/$u.out ]] || die "no earlier output $OUT/$u.out"; done
    ran=("${userlands[@]}")
    write_doc
    return 0
  fi

  # /opt/usb4verbs/stock.conf in the guest (tests/stock/guest.sh reads it).
  mkdir -p "$WORK/files"
  {
    printf 'PROVIDER=%s\nITERS=%s\nTIMEOUT=%s\n' "$PROVIDER" "$STOCK_ITERS" "$STOCK_TIMEOUT"
    printf "CASES='%s'\n" "${STOCK_CASES//\'/}"
  } > "$WORK/files/stock.conf"
  exclude=${VM_EXCLUDE_GLOB:-}
  overlay=${VM_OVERLAY:-}
  SO_DESC=""
  if [[ $PROVIDER == ours ]]; then
    [[ -z $overlay ]] || die "VM_OVERLAY is set: PROVIDER=ours builds its own overlay"
    overlay="$WORK/overlay"
    stock_overlay "$overlay" "$STOCK_SO" || exit 1
    exclude="$STOCK_EXCLUDE_LIBRXE${exclude:+ $exclude}"
    SO_DESC="libusb4_rdma.so sha256 $(sha256sum "$STOCK_SO" | cut -c1-12), built $(date -u -r "$STOCK_SO" '+%Y-%m-%d %H:%M UTC'), checkout at $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  fi

  # One version of the harness and of guest.sh for the whole run (lib.sh: stock_snapshot).
  HARNESS_RUN=$(stock_snapshot "$WORK/harness" "$REPO")
  export CACHE=${CACHE:-$REPO/.cache}

  # Every case spends at most two timeouts (server start, client) plus the grace; the
  # whole guest script must fit in the VM's budget with room for boot and setup.
  : "${VM_TIMEOUT:=$((40 * (2 * STOCK_TIMEOUT + 15) + 300))}"

  local failed=() skipped=() rc
  ran=()
  for u in "${userlands[@]}"; do
    rc=0
    run_userland "$u" || rc=$?
    case $rc in
      0) ran+=("$u") ;;
      77) skipped+=("$u") ;;
      *) ran+=("$u"); failed+=("$u") ;;
    esac
  done
  ((${#skipped[@]} == 0)) || log "not run (userland not reachable): ${skipped[*]}; their sections of the doc are kept"
  write_doc
  if ((${#failed[@]})); then
    log "failures in: ${failed[*]} (details: $OUT/<userland>.out, build/vm/serial-*.log)"
    exit 1
  fi
  if ((${#ran[@]})); then log "all cases passed in: ${ran[*]}"; else log "no userland ran"; fi
}

main "$@"
exit
