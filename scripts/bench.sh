#!/usr/bin/env bash
# scripts/bench.sh: `make bench` (after `make deps build`). Runs the Go host
# micro-benchmarks that exist, then boots the VM once and runs tests/bench/guest.sh:
# perftest and tests/bench/microbench through our provider and through Debian's
# librxe on the same rxe devices, interleaved. Everything it writes is under build/bench:
# the raw lines of a full run in build/bench/results/<mode>.log, the host benchmarks in
# build/bench/results/host.txt, and build/bench/benchmarks.md with its SVGs from those
# over the committed tests/bench/results (go run ./tests/bench/report). The committed
# results and docs/benchmarks.md change only through `make bench-docs`
# (scripts/bench.sh docs), which promotes build/bench/results and regenerates the doc.
#
# BENCH_MODE=ab (default): ours (libusb4_rdma, opted in for rxe) against librxe.
# BENCH_MODE=aa: librxe against itself, to validate the method (ratios ~1.00).
# BENCH_REPS (5), BENCH_PLAN=quick (a few sizes, for trying the machinery), BENCH_PLAN=micro
# (no perftest: microbench, load/open footprint, RSS and threads only, for a change to the
# per-call path or the provider's footprint; kept as build/bench/results/micro-<mode>.log),
# BENCH_SKIP_VM=1 (host benchmarks and report only), BENCH_SKIP_HOST=1, BENCH_PROVIDER (the .so to
# test; build/libusb4_rdma.so), VM_TIMEOUT (1800).
# BENCH_PLAN=usb4: the usb4 plan only (below); the full plan runs it after the rxe one
# when the module source is there.
# BENCH_PLAN=ucx (issue 35): ucx_perftest over rc_verbs beside the matching perftest rows,
# same boot (tests/bench/guest-ucx.sh): one rxe boot (ours and librxe, Debian 12's UCX 1.13)
# and one bed boot per tree of BENCH_UCX_TREES (hellas-main) on BENCH_UCX_USERLAND (trixie:
# UCX 1.18.1; before 1.16 UCX cannot run on the module), ours and the module's C provider;
# build/bench/results/ucx-rxe.log and ucx-<tree>.log. BENCH_UCX_RXE=0 / BENCH_UCX_USB4=0
# leave a part out.
#
# The usb4 plan: per tree of BENCH_USB4_TREES (hellas-main: kernel commands; pleite-gda:
# also ours with its own DV send queues) one boot of the usb4 bed (USB4_TREE=<tree> tests/vm/run.sh) running
# tests/bench/guest-usb4.sh: ours against the module's own C provider, built by
# tests/bench/upstream-provider.sh from USB4_MODULE_SRC's rdma-core patches (RDMA_CORE_GIT:
# see there), with an A/A pair of the upstream provider in the same repetitions. Its raw
# lines go to build/bench/results/usb4-<tree>.log. Without USB4_MODULE_SRC (default
# ../shared/usb4-module) the plan says it was skipped and why.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
MODE=${BENCH_MODE:-ab}
REPS=${BENCH_REPS:-5}
PLAN=${BENCH_PLAN:-full}
OUT=$REPO/build/bench
RESULTS=$REPO/tests/bench/results  # committed: the doc's inputs
RUN_RESULTS=$OUT/results           # this machine's runs
log() { printf '[bench] %s\n' "$*" >&2; }

# report RESULTS DOC SVGDIR: the document from a results directory.
report() { go run ./tests/bench/report -results "$1" -doc "$2" -svgdir "$3"; }

# `scripts/bench.sh docs` (make bench-docs): the committed results take this machine's
# latest ones, and docs/benchmarks.md is regenerated from them.
if [[ ${1:-} == docs ]]; then
  compgen -G "$RUN_RESULTS/*" >/dev/null || { log "nothing in ${RUN_RESULTS#"$REPO"/}: run make bench first"; exit 1; }
  for f in "$RUN_RESULTS"/*; do cp "$f" "$RESULTS/"; log "${f#"$REPO"/} -> ${RESULTS#"$REPO"/}/"; done
  report "$RESULTS" docs/benchmarks.md docs
  log "wrote docs/benchmarks.md and its SVGs (docs/benchmarks-*.svg)"
  exit 0
fi
case $MODE in aa | ab) ;; *) echo "bench: BENCH_MODE must be aa or ab, not $MODE" >&2; exit 2 ;; esac
case $PLAN in full | quick | micro | usb4 | control | ucx) ;; *) echo "bench: BENCH_PLAN must be full, quick, micro, usb4, control or ucx, not $PLAN" >&2; exit 2 ;; esac
mkdir -p "$OUT" "$RUN_RESULTS"

# The micro benchmark is built on the host against Debian 12's libibverbs (the
# guest userland is Debian 12 too).
if [[ ! -f /usr/include/infiniband/verbs.h ]]; then
  log "apt-get install libibverbs-dev"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libibverbs-dev >&2
fi

# 1. Go host micro-benchmarks of the data path, if the package has them.
HOST_OUT=$RUN_RESULTS/host.txt
if [[ ${BENCH_SKIP_HOST:-0} == 1 || $PLAN == usb4 || $PLAN == control || $PLAN == ucx ]]; then
  log "BENCH_SKIP_HOST=1 or plan usb4/control/ucx: host micro-benchmarks not run"
elif compgen -G "provider/dataplane/*_test.go" >/dev/null \
  && grep -qs '^func Benchmark' provider/dataplane/*_test.go; then
  log "go test -bench . ./provider/dataplane/..."
  {
    echo "# go test -run '^\$' -bench . -count 5 ./provider/dataplane/...; $(date -u +%FT%TZ); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
    go test -run '^$' -bench . -count 5 ./provider/dataplane/... 2>&1
  } > "$OUT/host.txt" || log "host benchmarks failed (kept in $OUT/host.txt)"
  cp "$OUT/host.txt" "$HOST_OUT"
else
  log "no Benchmark functions in provider/dataplane yet: host micro-benchmarks skipped"
fi

# ctrl_files DIR: what the control plan's guest half needs (tests/bench/guest-ctrl.sh):
# ctrlbench, the script, and with BENCH_BASE_PROVIDER (another build's front, its Go
# part beside it: the build before a change) that build under DIR/base, the side base.
ctrl_files() {
  gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$1/ctrlbench" tests/bench/ctrlbench.c -libverbs -ldl
  cp tests/bench/guest-ctrl.sh "$1/"
  if [[ -n ${BENCH_BASE_PROVIDER:-} ]]; then
    mkdir -p "$1/base"
    cp "$BENCH_BASE_PROVIDER" "$1/base/libusb4_rdma-rdmav34.so"
    cp "$(dirname "$BENCH_BASE_PROVIDER")/libusb4_rdma-go.so" "$1/base/"
  fi
}

if [[ ${BENCH_SKIP_VM:-0} != 1 && $PLAN != usb4 && $PLAN != control && $PLAN != ucx ]]; then
  # 2. What the guest gets under /opt/usb4verbs.
  FILES=$OUT/files
  rm -rf "$FILES"; mkdir -p "$FILES"
  gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$FILES/microbench" tests/bench/microbench.c -libverbs
  gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$FILES/footprint" tests/bench/footprint.c -libverbs
  PROVIDER=${BENCH_PROVIDER:-build/libusb4_rdma.so}
  [[ -f $PROVIDER ]] || { echo "bench: $PROVIDER missing: run make build" >&2; exit 1; }
  # Debian 12's libibverbs (rdma-core 44) loads PABI 34 names.
  cp "$PROVIDER" "$FILES/libusb4_rdma-rdmav34.so"
  # The Go part, which the front loads from its own directory.
  cp "$(dirname "$PROVIDER")/libusb4_rdma-go.so" "$FILES/" \
    || { echo "bench: no libusb4_rdma-go.so beside $PROVIDER: run make build" >&2; exit 1; }
  cand_env=""
  [[ $MODE == ab ]] && cand_env="RDMAV_DRIVERS=/opt/usb4verbs/libusb4_rdma USB4VERBS_CLAIM_RXE=1"
  {
    echo "BENCH_MODE=$MODE"
    echo "BENCH_REPS=$REPS"
    echo "CAND_ENV=\"$cand_env\""
    if [[ $PLAN == quick ]]; then
      echo 'BENCH_LAT_SIZES="2 65536"'
      echo 'BENCH_BW_SIZES="64 1048576"'
      echo 'BENCH_BW_MULTI_QP_SIZES="64 262144"'
    elif [[ $PLAN == micro ]]; then
      echo 'BENCH_LAT_TOOLS=""'
      echo 'BENCH_BW_TOOLS=""'
      echo 'BENCH_RATE_TOOLS=""'
    fi
  } > "$FILES/bench.conf"

  # 3. One boot. The host is shared with other VM boots: sample its load meanwhile.
  RAW=$OUT/raw-$MODE.log
  LOADS=$OUT/hostload-$MODE.txt
  : > "$LOADS"
  (while :; do echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOADS"; sleep 20; done) &
  sampler=$!
  trap 'kill $sampler 2>/dev/null || true' EXIT
  log "VM boot ($MODE, $REPS reps, plan $PLAN); serial log under build/vm/"
  t0=$(date +%s)
  rc=0
  VM_EXTRA_DEBS="perftest ${VM_EXTRA_DEBS:-}" VM_FILES=$FILES VM_GUEST_SCRIPT=$REPO/tests/bench/guest.sh \
    VM_TIMEOUT=${VM_TIMEOUT:-1800} tests/vm/run.sh > "$RAW" || rc=$?
  kill $sampler 2>/dev/null || true
  {
    echo "@@BENCHINFO what=host boot_s=$(($(date +%s) - t0)) vm_rc=$rc nproc=$(nproc) date=$(date -u +%FT%TZ) git=$(git rev-parse --short HEAD) plan=$PLAN"
    awk '{ printf "@@BENCHINFO what=hostload t=%s load1=%s load5=%s load15=%s\n", $1, $2, $3, $4 }' "$LOADS"
  } >> "$RAW"
  grep -c '^@@BENCH ' "$RAW" | xargs -I{} echo "[bench] {} samples, $(grep -c '^@@BENCHFAIL' "$RAW" || true) failures" >&2
  if [[ $PLAN == full ]]; then
    cp "$RAW" "$RUN_RESULTS/$MODE.log"
  elif [[ $PLAN == micro ]]; then
    # The report takes the per-call, footprint and thread/RSS figures from
    # whichever of micro-<mode>.log and <mode>.log is the newer run.
    cp "$RAW" "$RUN_RESULTS/micro-$MODE.log"
  else
    log "plan $PLAN: results stay in $RAW (not in the report's results)"
  fi
  ((rc == 0)) || log "VM run reported failures (exit $rc); see $RAW"
fi

# 3b. The usb4 plan: one boot per tree, ours against the module's C provider.
usb4_plan() {
  local src=${USB4_MODULE_SRC:-$REPO/../shared/usb4-module} files tree raw rc t0 sampler loads up commit
  if [[ ! -d $src/hellas-main ]]; then
    log "usb4 plan skipped: no module source at $src (USB4_MODULE_SRC)"
    return 0
  fi
  files=$OUT/files-usb4
  rm -rf "$files"; mkdir -p "$files/upstream"
  rc=0
  up=$(USB4_MODULE_SRC=$src tests/bench/upstream-provider.sh "$files/upstream") || rc=$?
  if ((rc == 77)); then
    log "usb4 plan skipped: the upstream provider cannot be built (above)"
    return 0
  elif ((rc != 0)); then
    log "usb4 plan failed: tests/bench/upstream-provider.sh exit $rc"
    return 1
  fi
  log "upstream provider: ${up#"$REPO"/}"
  gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$files/microbench" tests/bench/microbench.c -libverbs
  gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$files/footprint" tests/bench/footprint.c -libverbs
  gcc -std=c11 -O2 -Wall -Wextra -Werror -I uapi/c -o "$files/dvconsumer" tests/usb4/dvconsumer.c -libverbs
  ctrl_files "$files"
  # gloo's pattern (issue 34 part 1), which guest-usb4.sh runs through both providers.
  gcc -std=c11 -O2 -Wall -Wextra -Werror -pthread -o "$files/gloopattern" tests/usb4/gloopattern.c -libverbs
  cp tests/usb4/guest-gloo.sh "$files/"
  local provider=${BENCH_PROVIDER:-build/libusb4_rdma.so}
  [[ -f $provider ]] || { echo "bench: $provider missing: run make build" >&2; return 1; }
  cp "$provider" "$files/libusb4_rdma-rdmav34.so"
  cp "$(dirname "$provider")/libusb4_rdma-go.so" "$files/"
  local trees=${BENCH_USB4_TREES:-hellas-main pleite-gda} script=$REPO/tests/bench/guest-usb4.sh name=usb4
  # The control plan: guest-usb4.sh with only its control path (guest-ctrl.sh), gloo's
  # pattern and perftest's event mode (issue 34), on hellas-main unless told otherwise.
  if [[ $PLAN == control ]]; then
    trees=${BENCH_USB4_TREES:-hellas-main} name=control
  fi
  # The UCX plan: ucx_perftest and the matching perftest rows (ucx_conf) through ours and
  # the module's C provider, on a userland whose UCX takes TCP as its auxiliary transport.
  local userland=${USERLAND:-bookworm} debs="perftest strace" timeout=2100
  if [[ $PLAN == ucx ]]; then
    trees=${BENCH_UCX_TREES:-hellas-main} name=ucx userland=${BENCH_UCX_USERLAND:-trixie} debs="perftest ucx-utils" timeout=3600
    cp tests/bench/guest-ucx.sh "$files/"
  fi
  for tree in $trees; do
    {
      echo "BENCH_REPS=$REPS"
      if [[ $PLAN == ucx ]]; then
        echo 'BENCH_USB4_SIDES="up ours"'
        echo 'BENCH_USB4_ONLY="ucx lat bw"'
        ucx_conf
      else case $tree in
        # The only backend hellas-main offers is kernel commands: ours against
        # upstream, and upstream against itself (up2) for the noise band.
        hellas-main | hellas-gda-v2) echo 'BENCH_USB4_SIDES="up ours up2"' ;;
        # The DV trees (the pleite-gda line): ours with its defaults (kernel commands:
        # DV queues are the applications'), ours with its own DV send queues
        # (dv_send), upstream and its A/A twin; latency where issue 23 reads it
        # (2 B to 8 KiB), fewer bandwidth and rate cases.
        *)
          echo 'BENCH_USB4_SIDES="up ours oursdv up2"'
          echo 'BENCH_LAT_SIZES="2 512 8192"'
          echo 'BENCH_BW_SIZES="64 1048576"'
          echo 'BENCH_BW_QPS="1"'
          echo 'BENCH_BW_TOOLS="ib_write_bw ib_send_bw"'
          echo 'BENCH_RATE_TOOLS="ib_write_bw"'
          echo 'BENCH_DEADLINE_S=1500' ;;
      esac; fi
      [[ $PLAN == control ]] && echo "BENCH_USB4_ONLY=\"${BENCH_USB4_ONLY:-ctrl gloo event}\""
      [[ ($PLAN == usb4 || $PLAN == control || $PLAN == ucx) && -n ${BENCH_USB4_CONF:-} ]] && cat "$BENCH_USB4_CONF"
    } > "$files/bench.conf"
    raw=$OUT/raw-$name-$tree.log
    loads=$OUT/hostload-$name-$tree.txt
    : > "$loads"
    (while :; do echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$loads"; sleep 20; done) &
    sampler=$!
    log "VM boot ($name plan, tree $tree, $userland userland, $REPS reps); serial log under build/vm/"
    t0=$(date +%s)
    # The commit the guest's files come from, taken before the boot (a commit made
    # while it runs is not what ran); -dirty when tracked files differ from it.
    commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
    rc=0
    USB4_TREE=$tree USB4_MODULE_SRC=$src USB4_PROVIDER_SO=$provider USERLAND=$userland \
      VM_EXTRA_DEBS="$debs ${VM_EXTRA_DEBS:-}" VM_FILES=$files \
      VM_GUEST_SCRIPT=$script VM_TIMEOUT=${VM_TIMEOUT:-$timeout} \
      tests/vm/run.sh > "$raw" || rc=$?
    kill "$sampler" 2>/dev/null || true
    {
      echo "@@BENCHINFO what=host boot_s=$(($(date +%s) - t0)) vm_rc=$rc nproc=$(nproc) date=$(date -u +%FT%TZ) git=$commit plan=$PLAN tree=$tree"
      awk '{ printf "@@BENCHINFO what=hostload t=%s load1=%s load5=%s load15=%s\n", $1, $2, $3, $4 }' "$loads"
    } >> "$raw"
    log "$name $tree: $(grep -c '^@@BENCH ' "$raw") samples, $(grep -c '^@@BENCHFAIL' "$raw" || true) failures, $(($(date +%s) - t0)) s"
    cp "$raw" "$RUN_RESULTS/$name-$tree.log"
    ((rc == 0)) || log "VM run reported failures (exit $rc); see $raw"
  done
}
# ucx_conf: the bench.conf lines of the UCX plan (tests/bench/guest-ucx.sh): its steps ucx,
# lat and bw, perftest narrowed to the rows its UCX cases sit beside (ib_send_lat at the
# tag_lat sizes, ib_send_bw and ib_write_bw at the bandwidth sizes, 1 QP, no rate).
ucx_conf() {
  local lat=${BENCH_UCX_LAT_SIZES:-2 8192} bw=${BENCH_UCX_BW_SIZES:-64 65536}
  echo "BENCH_UCX_LAT_SIZES=\"$lat\""
  echo "BENCH_UCX_BW_SIZES=\"$bw\""
  echo "BENCH_UCX_AM_SIZES=\"${BENCH_UCX_AM_SIZES:-64 4096}\""
  echo "BENCH_UCX_TESTS=\"${BENCH_UCX_TESTS:-tag_lat tag_bw put_bw am_bw}\""
  echo 'BENCH_LAT_TOOLS="ib_send_lat"'
  echo "BENCH_LAT_SIZES=\"$lat\""
  echo 'BENCH_BW_TOOLS="ib_send_bw ib_write_bw"'
  # perftest's send bandwidth also at the am_bw sizes, so each UCX row has one beside it.
  echo "BENCH_BW_SIZES=\"$(echo "$bw ${BENCH_UCX_AM_SIZES:-64 4096}" | tr ' ' '\n' | sort -nu | tr '\n' ' ' | sed 's/ $//')\""
  echo 'BENCH_BW_QPS="1"'
  echo 'BENCH_RATE_TOOLS=""'
  # Each ucx_perftest run takes 10-40 s under TCG on a loaded host (process start and
  # wire-up): a deadline after which no case starts, inside the boot's VM_TIMEOUT.
  echo "BENCH_DEADLINE_S=${BENCH_UCX_DEADLINE_S:-2700}"
}

# 3b'. The UCX plan on rxe: ucx_perftest and the matching perftest rows through ours and
# librxe in one boot of tests/vm (Debian 12: UCX 1.13, whose ud_verbs serves the wire-up
# on rxe); its raw lines go to build/bench/results/ucx-rxe.log.
ucx_rxe() {
  local files=$OUT/files-ucx raw=$OUT/raw-ucx-rxe.log rc=0 t0 provider=${BENCH_PROVIDER:-build/libusb4_rdma.so} commit
  rm -rf "$files"; mkdir -p "$files"
  [[ -f $provider ]] || { echo "bench: $provider missing: run make build" >&2; return 1; }
  cp "$provider" "$files/libusb4_rdma-rdmav34.so"
  cp "$(dirname "$provider")/libusb4_rdma-go.so" "$files/"
  cp tests/bench/guest-ucx.sh "$files/"
  {
    echo "BENCH_MODE=ab"
    echo "BENCH_REPS=$REPS"
    echo 'CAND_ENV="RDMAV_DRIVERS=/opt/usb4verbs/libusb4_rdma USB4VERBS_CLAIM_RXE=1"'
    echo 'BENCH_RXE_ONLY="ucx lat bw"'
    ucx_conf
    [[ -n ${BENCH_USB4_CONF:-} ]] && cat "$BENCH_USB4_CONF"
  } > "$files/bench.conf"
  commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
  log "VM boot (ucx plan, rxe, $REPS reps); serial log under build/vm/"
  local loads=$OUT/hostload-ucx-rxe.txt sampler
  : > "$loads"
  (while :; do echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$loads"; sleep 20; done) &
  sampler=$!
  t0=$(date +%s)
  VM_EXTRA_DEBS="perftest ucx-utils ${VM_EXTRA_DEBS:-}" VM_FILES=$files VM_GUEST_SCRIPT=$REPO/tests/bench/guest.sh \
    VM_TIMEOUT=${VM_TIMEOUT:-3300} tests/vm/run.sh > "$raw" || rc=$?
  kill "$sampler" 2>/dev/null || true
  {
    echo "@@BENCHINFO what=host boot_s=$(($(date +%s) - t0)) vm_rc=$rc nproc=$(nproc) date=$(date -u +%FT%TZ) git=$commit plan=ucx tree=rxe"
    awk '{ printf "@@BENCHINFO what=hostload t=%s load1=%s load5=%s load15=%s\n", $1, $2, $3, $4 }' "$loads"
  } >> "$raw"
  log "ucx rxe: $(grep -c '^@@BENCH ' "$raw") samples, $(grep -c '^@@BENCHFAIL' "$raw" || true) failures, $(($(date +%s) - t0)) s"
  cp "$raw" "$RUN_RESULTS/ucx-rxe.log"
}

# 3c. The control plan on rxe (issue 34): ctrlbench through ours and librxe in one
# boot of tests/vm; its raw lines go to build/bench/results/control-rxe.log.
control_rxe() {
  local files=$OUT/files-control raw=$OUT/raw-control-rxe.log rc=0 t0 provider=${BENCH_PROVIDER:-build/libusb4_rdma.so} commit
  rm -rf "$files"; mkdir -p "$files"
  [[ -f $provider ]] || { echo "bench: $provider missing: run make build" >&2; return 1; }
  cp "$provider" "$files/libusb4_rdma-rdmav34.so"
  cp "$(dirname "$provider")/libusb4_rdma-go.so" "$files/"
  ctrl_files "$files"
  echo "BENCH_REPS=$REPS" > "$files/bench.conf"
  [[ -n ${BENCH_USB4_CONF:-} ]] && cat "$BENCH_USB4_CONF" >> "$files/bench.conf"
  commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
  log "VM boot (control plan, rxe, $REPS reps); serial log under build/vm/"
  t0=$(date +%s)
  VM_EXTRA_DEBS="strace ${VM_EXTRA_DEBS:-}" VM_FILES=$files VM_GUEST_SCRIPT=$REPO/tests/bench/guest-ctrl.sh \
    VM_TIMEOUT=${VM_TIMEOUT:-1800} tests/vm/run.sh > "$raw" || rc=$?
  echo "@@BENCHINFO what=host boot_s=$(($(date +%s) - t0)) vm_rc=$rc nproc=$(nproc) date=$(date -u +%FT%TZ) git=$commit plan=control tree=rxe" >> "$raw"
  log "control rxe: $(grep -c '^@@BENCH ' "$raw") samples, $(grep -c '^@@BENCHFAIL' "$raw" || true) failures, $(($(date +%s) - t0)) s"
  cp "$raw" "$RUN_RESULTS/control-rxe.log"
}
if [[ ${BENCH_SKIP_VM:-0} != 1 && $PLAN == control && ${BENCH_CONTROL_RXE:-1} == 1 ]]; then
  control_rxe
fi
if [[ ${BENCH_SKIP_VM:-0} != 1 && $PLAN == ucx && ${BENCH_UCX_RXE:-1} == 1 ]]; then
  ucx_rxe
fi
if [[ ${BENCH_SKIP_VM:-0} != 1 && ( $PLAN == usb4 || $PLAN == full || ( $PLAN == control && ${BENCH_CONTROL_USB4:-1} == 1 ) \
  || ( $PLAN == ucx && ${BENCH_UCX_USB4:-1} == 1 ) ) ]]; then
  usb4_plan
fi

# 4. The document, under build/bench: this machine's results over the committed ones.
INPUT=$OUT/report-input
rm -rf "$INPUT"; mkdir -p "$INPUT"
cp "$RESULTS"/* "$INPUT/"
if compgen -G "$RUN_RESULTS/*" >/dev/null; then cp "$RUN_RESULTS"/* "$INPUT/"; fi
if ! compgen -G "$INPUT/a[ab].log" >/dev/null && ! compgen -G "$INPUT/micro-a[ab].log" >/dev/null; then
  log "no full run yet: no benchmarks.md written"
  exit 0
fi
report "$INPUT" "$OUT/benchmarks.md" "$OUT"
log "wrote build/bench/benchmarks.md and its SVGs; make bench-docs puts them into docs/"
