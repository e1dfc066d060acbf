#!/usr/bin/env bash
# tests/usb4/run.sh [TREE...]: the `make test` stage "usb4 bed": builds tbloop and each
# module tree (default: USB4_TEST_TREES, else lib/trees.sh USB4_TEST_TREES_DEFAULT, or
# USB4_TEST_TREES_FULL with TEST_FULL=1) against its kernel, then boots the VM
# once per tree that built (USB4_TREE=<tree> tests/vm/run.sh) and runs there the
# real-kernel Go tests of the data path (provider/dataplane's TestVM*, built here into
# build/usb4/bin) and tests/usb4/guest-smoke.sh: ibv_devices, ibv_devinfo -v and
# ibv_rc_pingpong through our provider, then the stock-tool cases (tests/stock/guest.sh
# MODE=usb4), whose table per tree goes to build/usb4/stock-tools-usb4.md (`make docs`:
# docs/). Go-test-style lines usb4/build/<tree>, usb4/<tree>/..., usb4/<tree>/stock/...,
# the Go tests' own; SKIP lines when USB4_MODULE_SRC is absent, or for a tree recorded
# as not building. USB4_GO_TESTS=0 leaves the Go tests out; USB4_VM_TEST_RUN (default
# ^TestVM) narrows them.
set -uo pipefail

main() {
USB4DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$USB4DIR/../.." && pwd)
VMDIR="$REPO/tests/vm"
for f in "$VMDIR/lib/common.sh" "$VMDIR/lib/mirror.sh" "$VMDIR/lib/fetch.sh" "$USB4DIR/lib/toolchain.sh" "$USB4DIR/lib/trees.sh"; do
  # shellcheck source=/dev/null
  . "$f"
done
CACHE=${CACHE:-$REPO/.cache}
export CACHE
VMCACHE="$CACHE/vm"
USB4CACHE="$CACHE/usb4"
MIRROR=${MIRROR:-$(host_mirror)}
mkdir -p "$VMCACHE" "$USB4CACHE"

local diag_only=0
[[ ${1:-} == --diag-only ]] && { diag_only=1; shift; }
# Run by hand, --diag-only would test whatever build/ holds (make test builds first): build.
if ((diag_only)) && ! make -C "$REPO" --no-print-directory build >&2; then
  for t in "$@"; do result FAIL "usb4/$t/diag" "make build failed"; done
  return 1
fi
local trees=("$@") tree named=$# why
local default_trees=$USB4_TEST_TREES_DEFAULT
[[ ${TEST_FULL:-0} == 1 ]] && default_trees=$USB4_TEST_TREES_FULL
((${#trees[@]})) || read -ra trees <<<"${USB4_TEST_TREES:-$default_trees}"
USB4_MODULE_SRC=$(usb4_module_src "$REPO")
if [[ -z $USB4_MODULE_SRC || ! -d $USB4_MODULE_SRC ]]; then
  local why="USB4_MODULE_SRC not set and ../shared/usb4-module absent"
  [[ -n $USB4_MODULE_SRC ]] && why="USB4_MODULE_SRC=$USB4_MODULE_SRC is not a directory"
  for tree in "${trees[@]}"; do result SKIP "usb4/$tree" "$why"; done
  return 0
fi
export USB4_MODULE_SRC
local tbloop=${USB4_TBLOOP_SRC:-$REPO/tests/usb4/tbloop}
if [[ ! -f $tbloop/Makefile && ! -f $tbloop/Kbuild ]]; then
  for tree in "${trees[@]}"; do
    result SKIP "usb4/$tree" "no tbloop module at ${tbloop#"$REPO"/} yet"
  done
  return 0
fi

local rc=0 k first log t0 bins=()
if ((!diag_only)) && [[ ${USB4_GO_TESTS:-1} != 0 ]]; then
  mkdir -p "$REPO/build/usb4/bin"
  if (cd "$REPO" && go test -c -o build/usb4/bin/dataplane.test ./provider/dataplane); then
    bins=("$REPO/build/usb4/bin/dataplane.test")
  else
    result FAIL "usb4/go-tests" "go test -c ./provider/dataplane failed"; rc=1
  fi
fi
# The module's own C provider, the baseline of the NCCL-pattern, dma-buf and DV cases:
# built once (tests/bench/upstream-provider.sh, cached); without it those cases compare
# nothing and say so.
UPSTREAM_SO=""
if ((!diag_only)); then
  mkdir -p "$REPO/build/usb4/upstream"
  UPSTREAM_SO=$("$REPO/tests/bench/upstream-provider.sh" "$REPO/build/usb4/upstream" 2> "$REPO/build/usb4/upstream/build.err") \
    || { UPSTREAM_SO=""; log "usb4: no C provider baseline for the dma-buf cases: $(tail -n 1 "$REPO/build/usb4/upstream/build.err")"; }
fi
for tree in "${trees[@]}"; do
  k=$(usb4_tree_kernel "$tree") || { result FAIL "usb4/build/$tree" "unknown tree"; rc=1; continue; }
  log="$REPO/build/usb4/$tree.build.log"
  mkdir -p "${log%/*}"
  # The build on its own first, so that a tree that does not build is one clear line.
  if (KSUITE=${k%% *} KPKG=${k#* } usb4_build_only "$tree" "$tbloop") > "$log" 2>&1; then
    result PASS "usb4/build/$tree" "${k#* }"
  else
    first=$(grep -m1 -E 'error:|ERROR:|FATAL' "$log" | sed 's/^[[:space:]]*//')
    if usb4_tree_expected_to_fail "$tree"; then
      result SKIP "usb4/build/$tree" "does not build against ${k#* }, as recorded in tests/usb4/README.md: $first"
    else
      cat "$log"
      result FAIL "usb4/build/$tree" "${k#* }: $first"
      rc=1
    fi
    continue
  fi
  if ((!named)) && why=$(usb4_tree_no_boot "$tree"); then
    result SKIP "usb4/$tree" "$why"
    continue
  fi
  if ((!diag_only)) && [[ ${USB4_RING_ONLY:-0} != 1 && ${USB4_UCX_ONLY:-0} != 1 ]]; then
    # Only the real-kernel tests: the package's double tests ran on the host already.
    usb4_stock_files "$tree"
    t0=$SECONDS
    USB4_TREE=$tree USB4_TBLOOP_SRC=$tbloop \
      VM_EXTRA_DEBS="ibverbs-utils perftest rdmacm-utils${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
      VM_FILES="$STOCK_FILES" VM_GUEST_SCRIPT="$USB4DIR/guest-smoke.sh" VM_TIMEOUT=${VM_TIMEOUT:-1500} \
      VM_TEST_RUN="${USB4_VM_TEST_RUN:-^TestVM}" "$VMDIR/run.sh" "${bins[@]}" | tee "$STOCK_OUT.tmp" || rc=1
    usb4_stock_keep "$tree" "${k#* }" $((SECONDS - t0))
  fi
  # One more boot for ibvinfo and the faults (guest-diag.sh) on USB4_DIAG_TREES.
  if [[ ${USB4_RING_ONLY:-0} != 1 && ${USB4_UCX_ONLY:-0} != 1 && " ${USB4_DIAG_TREES-hellas-main} " == *" $tree "* ]]; then usb4_diag_boot "$tree" "$tbloop" || rc=1; fi
  # The four-host ring (guest-ring.sh) on USB4_RING_TREES; with TEST_FULL=1 on every
  # booted tree. USB4_RING_ONLY=1: this boot alone (the builds, then the ring).
  # USB4_RING_TOPOLOGIES (ring4): one boot each (lib/bed.sh USB4_TOPOLOGIES).
  if ((!diag_only)) && [[ ${USB4_UCX_ONLY:-0} != 1 ]] && [[ ${TEST_FULL:-0} == 1 || ${USB4_RING_ONLY:-0} == 1 || " ${USB4_RING_TREES-hellas-main} " == *" $tree "* ]]; then
    for t in ${USB4_RING_TOPOLOGIES:-ring4}; do usb4_ring_boot "$tree" "$tbloop" "$t" || rc=1; done
  fi
  # UCX and Open MPI (guest-ucx.sh, a Debian 13 userland) on USB4_UCX_TREES (none in CI's
  # tier: the boot took 250-420 s on a loaded machine, and make test is at its 40 minutes;
  # CI's tier runs ucx_perftest over the provider SRQ on rxe, tests/reliability); with
  # TEST_FULL=1 on every booted tree. USB4_UCX_ONLY=1: the builds and this boot only.
  if ((!diag_only)) && [[ ${USB4_RING_ONLY:-0} != 1 ]] && [[ ${TEST_FULL:-0} == 1 || ${USB4_UCX_ONLY:-0} == 1 || " ${USB4_UCX_TREES-} " == *" $tree "* ]]; then
    usb4_ucx_boot "$tree" "$tbloop" || rc=1
  fi
done
"$USB4DIR/stock-doc.sh" "$REPO/build/usb4/stock-tools-usb4.md" || rc=1
return $rc
}

# usb4_diag_boot TREE TBLOOP: one more boot with guest-diag.sh (ibvinfo on the real
# module, its captures, faults); stdout also kept in build/usb4/TREE.diag.out, which
# capture-ibvinfo-tree.sh unpacks into cmd/ibvinfo/testdata/bed.
usb4_diag_boot() {
  local files="$REPO/build/usb4/diag-files" c
  mkdir -p "$files"
  for c in "$REPO/tests/reliability/badinput.c" "$REPO/tests/reliability/faults.c" "$USB4DIR/unsupported.c"; do
    gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$files/$(basename "$c" .c)" "$c" -libverbs ||
      { result FAIL "usb4/$1/faults/build" "gcc $(basename "$c")"; return 1; }
  done
  # The cable pull's waiters under AddressSanitizer and LeakSanitizer, as on rxe.
  gcc -std=c11 -Wall -Wextra -Werror -O1 -g -pthread -fsanitize=address -fno-omit-frame-pointer \
    -o "$files/faults.asan" "$REPO/tests/reliability/faults.c" -libverbs ||
    { result FAIL "usb4/$1/faults/build" "gcc -fsanitize=address faults.c"; return 1; }
  # NCCL's pattern on the devices `ibvinfo nccl` prints (guest-diag.sh 1c).
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$files/ncclpattern" "$USB4DIR/ncclpattern.c" -libverbs ||
    { result FAIL "usb4/$1/nccl/build" "gcc tests/usb4/ncclpattern.c"; return 1; }
  (cd "$REPO" && go build -o "$files/ibvinfo" ./cmd/ibvinfo) ||
    { result FAIL "usb4/$1/ibvinfo/build" "go build ./cmd/ibvinfo"; return 1; }
  install -m644 "$USB4DIR/guest-capture.sh" "$files/guest-capture.sh"
  USB4_TREE=$1 USB4_TBLOOP_SRC=$2 VM_FILES="$files" \
    VM_EXTRA_DEBS="ibverbs-utils perftest ucx-utils libasan8${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
    VM_GUEST_SCRIPT="$USB4DIR/guest-diag.sh" VM_TIMEOUT=${VM_TIMEOUT:-600} \
    "$VMDIR/run.sh" | tee "$REPO/build/usb4/$1.diag.out" | grep -v -E '^[A-Za-z0-9+/=]{60,}$'
  return "${PIPESTATUS[0]}"
}

# usb4_ring_boot TREE TBLOOP TOPOLOGY: one more boot with tbloop in TOPOLOGY (ring4: four
# hosts in a ring; twocable: two hosts, two cables) and guest-ring.sh: ring4 every host's
# devices per peer and rail, NCCL's ring and two rails at once through ours and the
# module's C provider; twocable what the module makes of a second cable to one host.
# Stdout also kept in build/usb4/TREE.TOPOLOGY.out. USB4_RING_MSGS (100), USB4_RING_BIG_MSGS (10),
# USB4_RING_CASES (an ERE over the NCCL cases), USB4_RING_CAPTURE=1 (ibvinfo captures).
usb4_ring_boot() {
  local files="$REPO/build/usb4/ring-files-$1"
  rm -rf "$files"; mkdir -p "$files/upstream"
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$files/ncclpattern" "$USB4DIR/ncclpattern.c" -libverbs ||
    { result FAIL "usb4/$1/ring4/build" "gcc tests/usb4/ncclpattern.c"; return 1; }
  (cd "$REPO" && go build -o "$files/ibvinfo" ./cmd/ibvinfo) ||
    { result FAIL "usb4/$1/ring4/build" "go build ./cmd/ibvinfo"; return 1; }
  install -m755 "$USB4DIR/guest-ring.sh" "$files/guest-ring.sh"
  install -m644 "$USB4DIR/guest-listen.sh" "$files/guest-listen.sh"
  install -m644 "$USB4DIR/guest-known.sh" "$files/guest-known.sh"
  install -m644 "$USB4DIR/guest-capture.sh" "$files/guest-capture.sh"
  local ncases=${USB4_RING_CASES:-}
  # CI's tier: 50 messages a case (1 MiB: 4); TEST_FULL=1: 200 (1 MiB: 20), as guest-nccl.
  local msgs=50 big=4
  [[ ${TEST_FULL:-0} == 1 ]] && msgs=200 big=20
  printf 'RING_MSGS=%s\nRING_BIG_MSGS=%s\nRING_CAPTURE=%s\nRING_CASES='"'"'%s'"'"'\n' "${USB4_RING_MSGS:-$msgs}" \
    "${USB4_RING_BIG_MSGS:-$big}" "${USB4_RING_CAPTURE:-0}" "${ncases//\'/}" > "$files/ring.conf"
  if [[ -n ${UPSTREAM_SO:-} && ${USB4_CPROVIDER:-1} != 0 ]]; then
    install -m644 "$UPSTREAM_SO" "$files/upstream/libusb4_rdma-rdmav34.so"
  else
    echo "the module's C provider is not in this boot (USB4_CPROVIDER=0, or tests/bench/upstream-provider.sh failed: build/usb4/upstream/build.err)" > "$files/upstream/skip"
  fi
  USB4_TREE=$1 USB4_TBLOOP_SRC=$2 USB4_TBLOOP_TOPOLOGY=$3 VM_FILES="$files" \
    VM_EXTRA_DEBS="ibverbs-utils perftest${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
    VM_GUEST_SCRIPT="$USB4DIR/guest-ring.sh" VM_TIMEOUT=${VM_TIMEOUT:-2400} \
    "$VMDIR/run.sh" | tee "$REPO/build/usb4/$1.$3.out" | grep -v -E '^[A-Za-z0-9+/=]{60,}$'
  return "${PIPESTATUS[0]}"
}

# usb4_ucx_boot TREE TBLOOP: one more boot, on a Debian 13 (trixie) userland (UCX 1.18: its
# rc_verbs wires up over TCP as an auxiliary transport, which UCX takes from 1.16 on; Open
# MPI 5.0), with guest-ucx.sh: ucx_perftest over rc_verbs through our provider's SRQ, Open
# MPI over UCX between host 0's and host 1's device (tests/usb4/mpiring.c, built here
# against that userland's own Open MPI, from its .debs), the module's C provider beside
# them with Debian 12's libibverbs 44 (the rdma-core it is built against) in front, and a
# cable pull under ucx_perftest. Stdout also kept in build/usb4/TREE.ucx.out.
# USB4_UCX_ITERS (ucx_perftest -n: 100, TEST_FULL=1 1000), USB4_UCX_MPI_ITERS (3; 20),
# USB4_UCX_CASES (an ERE over perftest tag_lat tag_bw put_bw am_bw ompi cprovider cable_pull).
usb4_ucx_boot() {
  local files="$REPO/build/usb4/ucx-files-$1" ompi="$REPO/build/usb4/ompi-trixie-$1" debs d
  rm -rf "$files"; mkdir -p "$files/upstream" "$files/ibverbs44"
  # The guest userland's Open MPI headers and library, from the same .debs the image uses.
  debs=$(
    exec {lk}>"$VMCACHE/.lock"; flock "$lk"
    apt_use trixie && apt_fetch "$VMCACHE/debs/trixie" libopenmpi-dev libopenmpi40 &&
      apt_use bookworm && apt_fetch "$VMCACHE/debs/bookworm" libibverbs1
  ) || { result FAIL "usb4/$1/ucx/build" "cannot fetch trixie's libopenmpi-dev/libopenmpi40 or bookworm's libibverbs1"; return 1; }
  rm -rf "$ompi"; mkdir -p "$ompi"
  for d in $debs; do
    case ${d##*/} in
    libibverbs1_*) dpkg-deb -x "$d" "$ompi/v44" ;;
    *) dpkg-deb -x "$d" "$ompi/root" ;;
    esac
  done
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -I"$ompi/root/usr/lib/x86_64-linux-gnu/openmpi/include" \
    -o "$files/mpiring" "$USB4DIR/mpiring.c" "$ompi/root/usr/lib/x86_64-linux-gnu/libmpi.so.40" -Wl,--allow-shlib-undefined ||
    { result FAIL "usb4/$1/ucx/build" "gcc tests/usb4/mpiring.c against trixie's Open MPI"; return 1; }
  cp -a "$ompi"/v44/usr/lib/x86_64-linux-gnu/libibverbs.so.1* "$files/ibverbs44/"
  install -m755 "$USB4DIR/guest-ucx.sh" "$files/guest-ucx.sh"
  install -m755 "$USB4DIR/ucx-rank.sh" "$files/ucx-rank.sh"
  install -m644 "$USB4DIR/guest-listen.sh" "$files/guest-listen.sh"
  local iters=100 mpiters=3 ncases=${USB4_UCX_CASES:-}
  [[ ${TEST_FULL:-0} == 1 ]] && iters=1000 mpiters=20
  printf 'UCX_ITERS=%s\nMPI_ITERS=%s\nUCX_CASES='"'"'%s'"'"'\n' "${USB4_UCX_ITERS:-$iters}" "${USB4_UCX_MPI_ITERS:-$mpiters}" \
    "${ncases//\'/}" > "$files/ucx.conf"
  if [[ -n ${UPSTREAM_SO:-} && ${USB4_CPROVIDER:-1} != 0 ]]; then
    install -m644 "$UPSTREAM_SO" "$files/upstream/libusb4_rdma-rdmav34.so"
  else
    echo "the module's C provider is not in this boot (USB4_CPROVIDER=0, or tests/bench/upstream-provider.sh failed: build/usb4/upstream/build.err)" > "$files/upstream/skip"
  fi
  local t0=$SECONDS r
  USB4_TREE=$1 USB4_TBLOOP_SRC=$2 USERLAND=trixie VM_FILES="$files" \
    VM_EXTRA_DEBS="ibverbs-utils ucx-utils openmpi-bin${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" \
    VM_GUEST_SCRIPT="$USB4DIR/guest-ucx.sh" VM_TIMEOUT=${VM_TIMEOUT:-1500} \
    "$VMDIR/run.sh" | tee "$REPO/build/usb4/$1.ucx.out"
  r=${PIPESTATUS[0]}
  log "usb4: $1 UCX boot: $((SECONDS - t0)) s of wall time"
  return "$r"
}

# usb4_stock_files TREE: STOCK_FILES, the guest's /opt/usb4verbs: tests/stock/guest.sh
# (its usb4 mode, which guest-smoke.sh runs after the smoke checks) and its settings,
# and cshim/testdata/cqex.c built (guest-smoke.sh's cqex checks);
# STOCK_OUT, where the run's output is kept for the doc (tests/usb4/stock-doc.sh).
usb4_stock_files() {
  local cases=${USB4_STOCK_CASES:-}
  # CI's tier: every stock case on the first tree (the released module), a core set on the
  # others (a pingpong with events, a WRITE, SEND and READ of perftest, rdma_cm): ~30 s
  # less a tree; TEST_FULL=1 (which makes docs/stock-tools-usb4.md's tables) every case.
  if [[ -z ${USB4_STOCK_CASES+set} && ${TEST_FULL:-0} != 1 && $1 != "${USB4_STOCK_ALL_TREE:-hellas-main}" ]]; then
    cases='^(ibv_rc_pingpong_-e|ib_write_bw|ib_send_bw_-e|ib_read_lat|rping_.*)$'
  fi
  STOCK_FILES="$REPO/build/usb4/stock/files-$1"
  STOCK_OUT="$REPO/build/usb4/stock/$1.out"
  rm -rf "$STOCK_FILES"; mkdir -p "$STOCK_FILES"
  install -m644 "$USB4DIR/guest-listen.sh" "$STOCK_FILES/guest-listen.sh"
  install -m644 "$USB4DIR/guest-known.sh" "$STOCK_FILES/guest-known.sh"
  install -m755 "$REPO/tests/stock/guest.sh" "$STOCK_FILES/guest.sh"
  # The extended CQ verbs through libibverbs (issue 14), which guest-smoke.sh runs.
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$STOCK_FILES/cqex" "$REPO/cshim/testdata/cqex.c" -libverbs ||
    result FAIL "usb4/$1/cqex/build" "gcc cshim/testdata/cqex.c"
  # create_qp_ex / ibv_wr_* on the module (guest-smoke.sh runs it before the stock cases).
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$STOCK_FILES/qpex" "$REPO/cshim/testdata/qpex.c" -libverbs ||
    result FAIL "usb4/$1/qpex/build" "gcc cshim/testdata/qpex.c"
  # NCCL net_ib's pattern (guest-smoke.sh runs guest-nccl.sh), and the module's own C
  # provider as its baseline in the same boot when tests/bench/upstream-provider.sh can
  # build it (cached; the first build needs RDMA_CORE_GIT, see there): else ours only.
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$STOCK_FILES/ncclpattern" "$USB4DIR/ncclpattern.c" -libverbs ||
    result FAIL "usb4/$1/nccl/build" "gcc tests/usb4/ncclpattern.c"
  install -m755 "$USB4DIR/guest-nccl.sh" "$STOCK_FILES/guest-nccl.sh"
  local ncases=${USB4_NCCL_CASES:-}
  printf 'NCCL_MSGS=%s\nNCCL_BIG_MSGS=%s\nNCCL_CASES='"'"'%s'"'"'\n' "${USB4_NCCL_MSGS:-200}" "${USB4_NCCL_BIG_MSGS:-20}" \
    "${ncases//\'/}" > "$STOCK_FILES/nccl.conf"
  [[ -n ${UPSTREAM_SO:-} ]] ||
    echo "usb4: the module's C provider is not in the $1 boot (build/usb4/upstream/build.err); NCCL's pattern runs through ours only" >&2
  # dma-buf MRs (issue 21): dmabuf.c through ours and the module's C provider (guest-dmabuf.sh).
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$STOCK_FILES/dmabuf" "$USB4DIR/dmabuf.c" -libverbs ||
    result FAIL "usb4/$1/dmabuf/build" "gcc tests/usb4/dmabuf.c"
  install -m755 "$USB4DIR/guest-dmabuf.sh" "$STOCK_FILES/guest-dmabuf.sh"
  # The DV ABI as an application uses it (issue 23), run by guest-smoke.sh through our
  # provider and through the module's own C provider (tests/bench/upstream-provider.sh,
  # cached; where it cannot be built the guest says SKIP with the reason).
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -I"$REPO/uapi/c" -o "$STOCK_FILES/dvconsumer" \
    "$USB4DIR/dvconsumer.c" -libverbs || result FAIL "usb4/$1/dv_consumer/build" "gcc tests/usb4/dvconsumer.c"
  # gloo's ibverbs pattern (issue 34; guest-smoke.sh runs guest-gloo.sh) through ours and the
  # module's C provider, on the trees of USB4_GLOO_TREES (hellas-main): one event-mode run each
  # (a few seconds); TEST_FULL=1 runs 10 each and the polling pattern too.
  if [[ " ${USB4_GLOO_TREES-hellas-main} " == *" $1 "* ]]; then
    gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$STOCK_FILES/gloopattern" "$USB4DIR/gloopattern.c" -libverbs ||
      result FAIL "usb4/$1/gloo/build" "gcc tests/usb4/gloopattern.c"
    install -m755 "$USB4DIR/guest-gloo.sh" "$STOCK_FILES/guest-gloo.sh"
    if [[ ${TEST_FULL:-0} == 1 ]]; then
      printf 'GLOO_RUNS=%s\nGLOO_MODES="%s"\n' "${USB4_GLOO_RUNS:-10}" "${USB4_GLOO_MODES:-event poll}" > "$STOCK_FILES/gloo.conf"
    else
      printf 'GLOO_RUNS=%s\nGLOO_MODES="%s"\n' "${USB4_GLOO_RUNS:-1}" "${USB4_GLOO_MODES:-event}" > "$STOCK_FILES/gloo.conf"
    fi
  fi
  # Shared receive queues (issue 35): srq.c and ibv_srq_pingpong through ours and the
  # module's C provider (guest-srq.sh), on the trees of USB4_SRQ_TREES (CI's tier:
  # hellas-main, 14-25 s of its smoke boot), every tree with TEST_FULL=1. The module's
  # "RNR retry counter exceeded" with rnr_retry 7 (hellas-main:kernel/ibdev.c:3456-3494,
  # fixed in pleite's c2dd72b) and its credit stall (34.4 s, then a QP in ERR; every tree,
  # through its C provider too) are SKIPs with their citation (guest-srq.sh, docs/srq.md).
  # USB4_SRQ_RUNS (1): srq.c's runs of traffic and plain_traffic in the boot.
  if [[ ${TEST_FULL:-0} == 1 || " ${USB4_SRQ_TREES-hellas-main} " == *" $1 "* ]]; then
    gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$STOCK_FILES/srq" "$USB4DIR/srq.c" -libverbs ||
      result FAIL "usb4/$1/srq/build" "gcc tests/usb4/srq.c"
    install -m755 "$USB4DIR/guest-srq.sh" "$STOCK_FILES/guest-srq.sh"
    printf 'SRQ_RUNS=%s\n' "${USB4_SRQ_RUNS:-1}" > "$STOCK_FILES/srq.conf"
  fi
  # The module's C provider (built once above): the baseline of the NCCL, dma-buf and DV cases.
  if [[ -n ${UPSTREAM_SO:-} && ${USB4_CPROVIDER:-1} != 0 ]]; then
    mkdir -p "$STOCK_FILES/upstream"
    install -m644 "$UPSTREAM_SO" "$STOCK_FILES/upstream/libusb4_rdma-rdmav34.so"
  else
    mkdir -p "$STOCK_FILES/upstream"
    echo "the module's C provider is not in this boot (USB4_CPROVIDER=0, or tests/bench/upstream-provider.sh failed: build/usb4/upstream/build.err)" > "$STOCK_FILES/upstream/skip"
  fi
  {
    printf 'MODE=usb4\nITERS=%s\nTIMEOUT=%s\nBIG_ITERS=%s\n' "${USB4_STOCK_ITERS:-1000}" \
      "${USB4_STOCK_TIMEOUT:-60}" "${USB4_STOCK_BIG_ITERS:-100}"
    printf "CASES='%s'\n" "${cases//\'/}"
  } > "$STOCK_FILES/stock.conf"
}

# usb4_stock_keep TREE KPKG WALL_S: the run's output, with the tree's commit (its SNAPSHOT file)
# and the provider build, replaces build/usb4/stock/TREE.out when the stock cases ran.
usb4_stock_keep() {
  local commit=unknown so="$REPO/build/libusb4_rdma.so"
  [[ -r $USB4_MODULE_SRC/$1/SNAPSHOT ]] && commit=$(awk '{ print $1; exit }' "$USB4_MODULE_SRC/$1/SNAPSHOT")
  if grep -q "^--- [A-Z]*: usb4/$1/stock/" "$STOCK_OUT.tmp"; then
    printf '# host: tree=%s commit=%s kpkg=%s boot_s=%s provider=sha256:%s checkout=%s\n' "$1" "$commit" "$2" "$3" \
      "$(sha256sum "${USB4_PROVIDER_SO:-$so}" | cut -c1-12)" \
      "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$STOCK_OUT.tmp"
    mv "$STOCK_OUT.tmp" "$STOCK_OUT"
  else
    rm -f "$STOCK_OUT.tmp"
  fi
}

# usb4_build_only TREE TBLOOP: tbloop, then TREE against tbloop's symbols.
usb4_build_only() {
  local out="$USB4CACHE/bed/check-$1" dir
  toolchain_prepare
  rm -rf "$out"
  kbuild_module "$2" "" "$out/tbloop" || return 1
  dir=$(usb4_tree_dir "$1") || return 1
  KBUILD_EXTRA_SYMBOLS="$out/tbloop/Module.symvers" KBUILD_GLUE="$(usb4_tree_glue "$1")" \
    KBUILD_MAKEVARS="$(usb4_tree_make_vars "$1")" kbuild_module "$dir" kernel "$out/tree"
}

main "$@"
