#!/bin/sh
# tests/usb4/guest-nccl.sh: NCCL net_ib's pattern (tests/usb4/ncclpattern.c) on the usb4 bed,
# in the guest (guest-smoke.sh runs it): sender on host 0's device and receiver on host 1's
# and the reverse, 1 and 4 QPs, every size class, through our provider (result lines
# usb4/<tree>/nccl/<case>), then, when the boot carries the module's own C provider
# (/opt/usb4verbs/upstream/libusb4_rdma-rdmav34.so, tests/bench/upstream-provider.sh), through
# it in the same boot. The C provider's lines are the baseline for docs/nccl-pattern.md, not
# results of ours: they are printed as "cprovider| --- PASS/FAIL: usb4/<tree>/nccl/<case>",
# which testsummary does not count. Settings (nccl.conf): NCCL_MSGS (500), NCCL_BIG_MSGS (per
# 1 MiB case, NCCL_MSGS), NCCL_CASES (an ERE, all), NCCL_STALL_S (20), NCCL_CPROVIDER (1),
# NCCL_MAIN (1; 0 runs only the adaptive-routing form, ncclpattern --ar).
# shellcheck disable=SC3043 # busybox ash has local
tree=${USB4VERBS_BACKEND_TREE:?not in the usb4 mode}
BIN=/opt/usb4verbs
[ -x $BIN/ncclpattern ] || exit 0
[ -r $BIN/nccl.conf ] && . $BIN/nccl.conf
msgs=${NCCL_MSGS:-500}

# The trees whose RECV_RDMA_WITH_IMM completion carries no byte_len (the ib_wc is built
# without it): the byte_len case SKIPs there with this citation when every one is 0.
case $tree in
  hellas-main) known="hellas-main:kernel/ibdev.c:7357 and :8084 build the RECV_RDMA_WITH_IMM ib_wc without byte_len" ;;
  hellas-gda-v2) known="hellas-gda-v2:kernel/ibdev.c:7567 and :8294 build the RECV_RDMA_WITH_IMM ib_wc without byte_len" ;;
  pleite-gda) known="pleite-gda:kernel/ibdev.c:7770 and :8497 build the RECV_RDMA_WITH_IMM ib_wc without byte_len" ;;
  pleite-main) known="pleite-main:kernel/ibdev.c:6537 and :7270 build the RECV_RDMA_WITH_IMM ib_wc without byte_len" ;;
  *) known="" ;;
esac
. $BIN/guest-known.sh
torn=$(nccl_torn_known "$tree")
# NCCL's adaptive-routing form (ncclpattern --ar, issue 33 item 3): the trees whose module
# refuses its 0-byte RDMA_WRITE_WITH_IMM for the rkey 0 NCCL leaves in it; such a case SKIPs
# with this citation when the same WR with a real rkey passes in the same run.
case $tree in
  pleite-gda-8099446) ar_known="pleite-gda-8099446:kernel/ibdev.c:10712-10717 queues every RDMA_WRITE_WITH_IMM for in-order delivery, whose tbv_rx_deliver_reorder_write_locked looks the header's rkey up even for a 0-byte write (:9340-9344): rkey 0 ends in LOC_PROT_ERR on the receive side; NCCL_IB_ADAPTIVE_ROUTING=0 avoids the form" ;;
  *) ar_known="" ;;
esac

# run LABEL LINE_PREFIX ENV...: one pass over the cases with the provider ENV selects, pinned
# to one vCPU (one process drives both hosts' devices); the exit status is ncclpattern's.
run() {
  local label=$1 lp=$2 rc
  shift 2
  set -- env "$@" taskset 2 timeout "${NCCL_TIMEOUT:-1500}" $BIN/ncclpattern --msgs "$msgs" --big-msgs "${NCCL_BIG_MSGS:-$msgs}" --stall-s "${NCCL_STALL_S:-20}" \
    --name-prefix "usb4/$tree/nccl/" --line-prefix "$lp"
  [ -n "${NCCL_CASES:-}" ] && set -- "$@" --cases "$NCCL_CASES"
  [ -n "$known" ] && set -- "$@" --byte-len-zero-known "$known"
  [ -n "$torn" ] && set -- "$@" --cts-torn-known "$torn"
  rm -f /tmp/nccl.$label.rc
  { "$@" "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$USB4VERBS_DEV1" "$USB4VERBS_GID1" 2>&1; echo $? > /tmp/nccl.$label.rc; } |
    tee /tmp/nccl.$label.out
  rc=$(cat /tmp/nccl.$label.rc 2>/dev/null || echo 99)
  echo "# nccl $label: ncclpattern exit $rc"
  # What the module logged meanwhile (its per-QP error lines), when a case failed.
  [ "$rc" = 0 ] || dmesg | tail -n 40 | sed "s/^/# nccl $label dmesg: /"
  return "$rc"
}

# run_ar LABEL LINE_PREFIX ENV...: NCCL's adaptive-routing form (ncclpattern --ar), a few
# seconds; the exit status is ncclpattern's.
run_ar() {
  local label="$1" lp="$2" rc
  shift 2
  set -- env "$@" taskset 2 timeout 300 $BIN/ncclpattern --ar --stall-s 10 --name-prefix "usb4/$tree/nccl/" --line-prefix "$lp"
  [ -n "${NCCL_CASES:-}" ] && set -- "$@" --cases "$NCCL_CASES"
  [ -n "$ar_known" ] && set -- "$@" --ar-rkey0-known "$ar_known"
  { "$@" "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$USB4VERBS_DEV1" "$USB4VERBS_GID1" 2>&1; echo $? > /tmp/nccl.ar."$label".rc; } |
    tee /tmp/nccl.ar."$label".out
  rc=$(cat /tmp/nccl.ar."$label".rc 2>/dev/null || echo 99)
  [ "$rc" = 0 ] || dmesg | tail -n 20 | sed "s/^/# nccl ar $label dmesg: /"
  if [ "$rc" != 0 ] && ! grep -q '^--- FAIL' /tmp/nccl.ar."$label".out; then
    echo "${lp}--- FAIL: usb4/$tree/nccl/ar (ncclpattern --ar exit $rc)"
  fi
  return "$rc"
}

if [ "${NCCL_MAIN:-1}" != 0 ]; then
  run ours ""
  rc=$?
else
  rc=0
fi
# A timeout kill (124) or a crash leaves cases without a line: one FAIL says so.
if [ $rc -ne 0 ] && ! grep -q '^--- FAIL' /tmp/nccl.ours.out; then
  echo "--- FAIL: usb4/$tree/nccl/run (ncclpattern exit $rc)"
fi
run_ar ours "" || rc=1

UP=$BIN/upstream/libusb4_rdma
if [ -f $UP-rdmav34.so ] && [ "${NCCL_CPROVIDER:-1}" != 0 ]; then
  # Only the provider RDMAV_DRIVERS names may serve the devices: the bed's driver file
  # (ours) goes away while the C provider runs (as tests/bench/guest-usb4.sh does).
  drv=/etc/libibverbs.d/usb4_rdma.driver
  [ -f $drv ] && mv $drv /tmp/usb4_rdma.driver.saved
  [ "${NCCL_MAIN:-1}" != 0 ] && run cprovider "cprovider| " RDMAV_DRIVERS=$UP
  run_ar cprovider "cprovider| " RDMAV_DRIVERS=$UP
  [ -f /tmp/usb4_rdma.driver.saved ] && mv /tmp/usb4_rdma.driver.saved $drv
fi
[ $rc -eq 0 ]
